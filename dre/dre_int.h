/* dre_int.h: internals shared by the dre/ modules (not part of the public API). */
#ifndef WANOPT_DRE_INT_H
#define WANOPT_DRE_INT_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "dre.h"
#include "dre_proto.h"

/* ---- sum64: a fast 64-bit checksum (the XXH64 algorithm, written from its
 * published specification).  Used for store records and frame outputs; it is
 * not a fingerprint (SHA-256 is). */
uint64_t dre_sum64(const void *p, size_t n, uint64_t seed);
/* ---- fsum.c: the frame checksum of stream version 2: a different function,
 * about three times as fast on large input (AVX2 where the CPU has it). */
uint64_t dre_fsum(const void *p, size_t n, uint64_t seed);
/* The same value computed without SIMD (its definition; for tests). */
uint64_t dre_fsum_ref(const void *p, size_t n, uint64_t seed);
/* dre_fsum(p, n, seed) taken as p[0..n) arrives: begin, then feed with the
 * bytes so far (p is always the start of the input, avail never shrinks),
 * then end with the whole length.  Feeding is optional; it only sums the
 * whole blocks that are already certain. */
typedef struct dre_fsum_state {
	uint64_t acc[8], key[24], seed;
	size_t blocks; /* whole blocks summed so far */
} dre_fsum_state;
void dre_fsum_begin(dre_fsum_state *st, uint64_t seed);
void dre_fsum_feed(dre_fsum_state *st, const void *p, size_t avail);
uint64_t dre_fsum_end(dre_fsum_state *st, const void *p, size_t n);
/* The frame checksum of a stream of `version`. */
static inline uint64_t dre_frame_sum(int version, const void *p, size_t n, uint64_t seed)
{
	return version >= 2 ? dre_fsum(p, n, seed) : dre_sum64(p, n, seed);
}

/* ---- fingerprints (fp.c): SHA-256, with the CPU's SHA extensions where
 * sha256.c vouches for them, else through OpenSSL (context reused).  A
 * dre_fp is used by one thread at a time. */
typedef struct dre_fp dre_fp;
dre_fp *dre_fp_new(void);
void dre_fp_free(dre_fp *f);
/* SHA-256 of p[0..n) into out; 0 on success. */
int dre_fp_sha256(dre_fp *f, const void *p, size_t n, uint8_t out[32]);
/* One message of a batch: SHA-256 of p[0..n) into out. */
struct dre_sha_job {
	const uint8_t *p;
	size_t n;
	uint8_t *out;
};
/* Hash a batch (faster than one call each where messages are hashed two
 * at a time, interleaved); 0 on success. */
int dre_fp_sha256_jobs(dre_fp *f, struct dre_sha_job *jobs, size_t n);
/* Chunks the codec hashes per batch: enough that the two lanes rarely run
 * one alone, few enough to stay in cache after cutting or rebuilding. */
#define DRE_FP_BATCH 16
/* 1 if fingerprints use the SHA extensions (sha256.c), 0 if OpenSSL. */
int dre_fp_accel(void);
/* sha256.c: 1 if the CPU has the SHA extensions and the code below agrees
 * with OpenSSL (checked once); only then may dre_sha256_ni* be called. */
int dre_sha256_accel(void);
void dre_sha256_ni(const void *p, size_t n, uint8_t out[32]);
void dre_sha256_ni_jobs(struct dre_sha_job *jobs, size_t n);
/* The in-memory name of a chunk: the first 8 bytes of its SHA-256, never 0. */
static inline uint64_t dre_fp_tag(const uint8_t h[32])
{
	uint64_t t;
	memcpy(&t, h, 8);
	return t ? t : 1;
}

/* ---- content-defined chunking (chunk.c): gear rolling hash, FastCDC-style
 * normalized cut points. */
typedef struct dre_cdc {
	uint32_t min, avg, max;
	uint64_t mask_s, mask_l; /* stricter mask before avg, looser after */
} dre_cdc;
/* Set up a chunker; sizes must satisfy 64 <= min < avg < max <= DRE_CHUNK_MAX. */
int dre_cdc_init(dre_cdc *c, uint32_t min, uint32_t avg, uint32_t max);
/* Length of the first chunk of p[0..n).  Returns 0 when no cut point lies in
 * p and n < max (more input needed), unless `final`, then n. */
size_t dre_cdc_cut(const dre_cdc *c, const uint8_t *p, size_t n, int final);
/* 1 if a chunk p[0..len) that holds no cut point before len (a stored chunk
 * cut by these sizes) ends at a cut point of the content (or at max), as
 * dre_cdc_cut would find it; 0 if it ended only with its input. */
int dre_cdc_cuts_at(const dre_cdc *c, const uint8_t *p, size_t len);

/* ---- varints (LEB128) with bounds checks. */
static inline size_t dre_put_varint(uint8_t *p, uint64_t v)
{
	size_t i = 0;
	while (v >= 0x80) {
		p[i++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[i++] = (uint8_t)v;
	return i;
}
/* Read a varint from *pp (< end); 0 on success, -1 if truncated or too long. */
static inline int dre_get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
	const uint8_t *p = *pp;
	uint64_t r = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (p >= end)
			return -1;
		uint8_t b = *p++;
		r |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*pp = p;
			*v = r;
			return 0;
		}
	}
	return -1;
}
static inline void dre_put_u64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8); /* little-endian hosts only; checked at build time in util.c */
}
static inline uint64_t dre_get_u64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* Format an error message into err (errlen bytes; err may be NULL). */
void dre_seterr(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A store holds the traffic it has seen: its directories and files are its
 * owner's alone, whatever the umask. */
#define DRE_DIR_MODE 0700
#define DRE_FILE_MODE 0600
/* path opened for writing ("w" or "wb"), created DRE_FILE_MODE or truncated;
 * NULL with errno set on failure. */
FILE *dre_fopen_w(const char *path, const char *mode);
/* Make directory path DRE_DIR_MODE, and its missing parents likewise:
 * 0, or -1 with errno set (EEXIST: path exists already). */
int dre_mkdirs(const char *path);
/* Write all n bytes of p to fd, at offset off (pwrite) or, if off < 0, at the
 * file position; retries short writes and EINTR.  0 or -1 (errno set). */
int dre_write_all(int fd, const void *p, size_t n, int64_t off);

/* ---- growable byte buffer. */
typedef struct dre_buf {
	uint8_t *p;
	size_t len, cap;
} dre_buf;
/* Make room for `more` bytes past len; 0 or DRE_ENOMEM. */
int dre_buf_reserve(dre_buf *b, size_t more);
/* The same, growing the capacity to exactly len + more (not doubling). */
int dre_buf_reserve_exact(dre_buf *b, size_t more);
int dre_buf_add(dre_buf *b, const void *p, size_t n);
void dre_buf_free(dre_buf *b);
/* Make the whole pages of p[0..n), memory about to be filled, in one call
 * rather than a fault each (10 us a fault on this kind of VM: an encode of
 * 210 MB faulted in 4,300 pages of buffers that way).  0, or -1 where the
 * kernel cannot (before Linux 5.14): the pages then come with the first
 * writes, as without it. */
int dre_mem_populate(void *p, size_t n);

/* ---- store internals used by the codec (store.c). */
typedef struct dre_ent {
	uint64_t tag;  /* first 8 bytes of SHA-256 (never 0) */
	uint64_t next; /* tag of the chunk that followed it when first seen, or 0 */
	uint32_t file; /* data file number */
	uint32_t off;  /* offset of the record in that file */
	uint32_t len;  /* payload length */
	uint32_t peers; /* bit i: peer slot i is known to hold this chunk */
} dre_ent;

/* A chunk a stream just carried: store it (if absent), link it after prev
 * (relink: even if prev had another successor), and mark it held by the peer
 * slots in bits.  0 or an error. */
int dre_store_add(dre_store *st, const uint8_t h[32], const void *p, uint32_t len, uint64_t prev,
		  uint32_t bits, int relink);
/* Look a tag up; 1 and *e filled if present, else 0. */
int dre_store_find(dre_store *st, uint64_t tag, dre_ent *e);
/* dre_store_find, and start loading the index slot of `ahead` (0: none), a
 * tag to be looked up soon. */
int dre_store_find_ahead(dre_store *st, uint64_t tag, uint64_t ahead, dre_ent *e);
/* Add a chunk whose SHA-256 is h unless its tag is present; fills *e with the
 * (new or existing) entry; if added, record that it followed chunk `prev`
 * (0: none).  Returns 1 if added, 0 if present, <0 on error. */
int dre_store_put_after(dre_store *st, const uint8_t h[32], const void *p, uint32_t len,
			uint64_t prev, dre_ent *e);
/* A reader's window on the store's data files (rwin.c): a run of stored
 * chunks read ahead with one pread.  Zeroed to start; one thread at a time. */
typedef struct dre_rwin {
	uint8_t *buf;                /* allocated by the first run read through it */
	uint64_t gen;                /* the store's unmap count when filled */
	uint64_t off, last_end;      /* buf holds file `file` from off, len bytes */
	uint32_t file, len, last_file; /* the last record read ended at last_end */
	/* what its reads cost (rtune.c): bytes read since handed to the store;
	 * of the reads timed in store epoch tn_epoch, way tn_way, time and bytes */
	uint64_t tn_read, tn_ns, tn_bytes;
	uint32_t tn_epoch, tn_rng;
	int tn_way;
} dre_rwin;
/* Give back w's buffer (it is allocated again when needed). */
void dre_rwin_free(dre_rwin *w);
/* Bytes w holds. */
size_t dre_rwin_mem(const dre_rwin *w);
/* Copy a chunk's payload into buf (e->len bytes) and verify its record
 * checksum; 0, DRE_EMISS (evicted since), or DRE_EIO. */
int dre_store_read(dre_store *st, const dre_ent *e, void *buf);
/* Copy the payload at e's place (e->file, e->off: the index need not hold
 * it any more) into buf unchecked: to salvage a chunk whose record went bad
 * when its bytes can be checked otherwise (its fingerprint).  0 or DRE_EMISS
 * (its file is gone). */
int dre_store_read_raw(dre_store *st, const dre_ent *e, void *buf);
/* As dre_store_read without the payload checksum: for bytes that a frame
 * checksum (or a comparison) covers anyway.  w (or NULL): the reader's
 * window, for reads that run on through a data file. */
int dre_store_read_fast(dre_store *st, const dre_ent *e, void *buf, dre_rwin *w);
/* dre_store_find and dre_store_read_fast in one locked step: chunk `tag`'s
 * entry into *out and its payload into buf; 0, DRE_EMISS (not stored: out->tag
 * is then 0; or evicted since), DRE_ECORRUPT (longer than max), or DRE_EIO. */
int dre_store_read_tag(dre_store *st, uint64_t tag, size_t max, void *buf, dre_rwin *w, dre_ent *out);
/* The most one store operation on a chunk of len bytes appends to the data
 * files: a chunk record (dre_store_add) or a refresh's copy (dre_store_hit),
 * and a LINK record. */
#define DRE_STORE_OP_BYTES(len) ((uint64_t)(len) + 2 * 56)
/* The number of the oldest data file that no eviction can drop while at most
 * `extra` more bytes are appended (all files' chunks are safe: the oldest's
 * number).  UINT32_MAX if the active file may go too: then nothing is safe,
 * not even what is appended to it meanwhile.  *active: the active file's
 * number (0 if there is none yet): what is appended from now on goes there or
 * to a later file. */
uint32_t dre_store_horizon(dre_store *st, uint64_t extra, uint32_t *active);
/* Pins: an encoder keeps a frame's chunks answerable until the peer
 * acknowledges the frame.  dre_store_pin keeps data file `file` (the oldest
 * its chunks sit in) and so every later one from eviction: the store grows
 * past its bound instead, by at most DRE_PIN_SLACK; beyond that the
 * oldest file goes all the same (counted).  It returns the file pinned
 * (the oldest live one from `file` on), or DRE_PIN_NONE if none is (file
 * DRE_PIN_NONE, or every file older); dre_store_unpin lets go of what it
 * returned (DRE_PIN_NONE, or a file evicted since: nothing).
 * dre_store_pin_newest pins the active file, where a chunk stored from now on
 * lands or later, and returns its number (DRE_PIN_NONE: no file yet). */
#define DRE_PIN_NONE UINT32_MAX
uint32_t dre_store_pin(dre_store *st, uint32_t file);
void dre_store_unpin(dre_store *st, uint32_t file);
#define DRE_PIN_SLACK ((uint64_t)DRE_PIN_SLACK_MIB << 20)
uint32_t dre_store_pin_newest(dre_store *st);
/* The run fast path in one locked step: if chunk `tag` is stored, at most max
 * bytes long, held by a peer in `bits` (0: no check) and its bytes equal p,
 * fill *out and return 1; else 0.  It changes nothing (the caller refreshes
 * the chunk with dre_store_hit, in stream order).
 * scratch (DRE_DELTA_WIN bytes) serves reads the mapping cannot; w (or
 * NULL) as for dre_store_read_fast. */
int dre_store_match(dre_store *st, uint64_t tag, const void *p, size_t max, uint32_t bits, void *scratch, dre_rwin *w,
		    dre_ent *out);
/* 1 if the chunk stored for e has exactly SHA-256 h (not just the tag) and
 * its record, payload included, is sound; a record gone bad on disk is
 * dropped from the store (so the chunk is stored anew, not referenced). */
int dre_store_same(dre_store *st, const dre_ent *e, const uint8_t h[32]);
/* Chunks that broke runs (alt.c): remember chunk `tag` under key (a
 * dre_fsum of its bytes); the tag last remembered under key, or 0 (a lossy
 * table in memory). */
void dre_store_alt_set(dre_store *st, uint64_t key, uint64_t tag);
uint64_t dre_store_alt_get(dre_store *st, uint64_t key);
/* Forks (alt.c): chunk `tag` was followed by something other than its
 * successor (store lock held); 1 if it is noted as such (lossy, no lock). */
void dre_store_fork_locked(dre_store *st, uint64_t tag);
int dre_store_forked(dre_store *st, uint64_t tag);
/* Start loading what dre_store_forked(st, tag) reads (it is coming). */
void dre_store_forked_prefetch(dre_store *st, uint64_t tag);
/* Successors at a peer (alt.c): chunk b follows chunk a in the store of
 * peer slot `slot`, where ours holds another; the one noted, or 0 (lossy). */
void dre_store_peer_next_set(dre_store *st, int slot, uint64_t a, uint64_t b);
uint64_t dre_store_peer_next(dre_store *st, int slot, uint64_t a);
/* Record that chunk b followed chunk a, if a has no successor yet. */
void dre_store_link(dre_store *st, uint64_t a, uint64_t b);
/* Make b a's successor even if a had another (the peer's order wins). */
void dre_store_relink(dre_store *st, uint64_t a, uint64_t b);
/* Chunk tag's successor: 1 and *next (0: none) if tag is stored, else 0. */
int dre_store_next_of(dre_store *st, uint64_t tag, uint64_t *next);
/* Set a's successor to b, 0 meaning none, if it is still `expect` (undoing
 * a link a failed frame made, unless something relinked it since). */
void dre_store_set_next(dre_store *st, uint64_t a, uint64_t expect, uint64_t b);
/* Peer slot bits (see dre_store_peer) that chunk tag is known to be held by. */
void dre_store_mark(dre_store *st, uint64_t tag, uint32_t bits);
/* For a chunk just output by reference: link it after prev, and keep it from
 * being evicted first (copied forward when it sits in the oldest quarter).
 * The data file it sits in now, or DRE_PIN_NONE if it is no longer stored. */
uint32_t dre_store_hit(dre_store *st, uint64_t prev, uint64_t tag);

/* ---- residual compression (lz.c). */
typedef struct dre_lzc dre_lzc;
/* A per-stream compressor (or, with decomp, decompressor) for `kind`. */
dre_lzc *dre_lz_new(int kind, int level, int decomp);
void dre_lz_free(dre_lzc *z);
/* A zstd compressor codes its full-size frames on n threads of zstd's own
 * (n >= 2; else, and for lz4 and decompressors, on the caller's thread), from
 * the next frame it starts.  For a bulk encoder that has the processors. */
void dre_lz_set_workers(dre_lzc *z, int n);
/* The worker threads dre_lz_set_workers gave z: 0 if none, or once they were
 * refused when a full-size frame began. */
int dre_lz_workers(const dre_lzc *z);
/* Bytes z has allocated (zstd's contexts; an lz4 context as 80 KiB). */
size_t dre_lz_mem(const dre_lzc *z);
/* 1 while a compressor (zstd or lz4) holds a frame open, and its memory. */
int dre_lz_open(const dre_lzc *z);
/* End the open frame, appending its last bytes to out (the decoder needs
 * them), and free the compressor: the next piece starts a new frame (for
 * zstd, a small one). */
int dre_lz_end(dre_lzc *z, dre_buf *out);
/* Compress p[0..n) as the next piece of the stream, appending to out. */
int dre_lz_compress(dre_lzc *z, const void *p, size_t n, dre_buf *out);
/* Decompress exactly `in_n` bytes that must yield exactly `out_n` bytes. */
int dre_lz_decompress(dre_lzc *z, const void *in, size_t in_n, void *out, size_t out_n);
/* Literal sections shorter than this go raw: a block header and the
 * compressor's memory cost more than they could save. */
#define DRE_LZ_MIN 32
/* Cheap estimate: 1 if a sample of p looks incompressible. */
int dre_lz_incompressible(const void *p, size_t n);

/* ---- deltas (delta.c): copy/insert instructions of a target against a base. */
typedef struct dre_delta_ins {
	uint32_t lit;      /* literal bytes first */
	uint32_t copy_off; /* then copy_len bytes from base[copy_off] */
	uint32_t copy_len;
} dre_delta_ins;
/* Encode tgt against base: fills ins (up to max_ins) and appends the literal
 * bytes to lits.  Returns the instruction count, or -1 if the delta saves too
 * little to be worth sending (then nothing was appended). */
int dre_delta_encode(const uint8_t *base, size_t base_n, const uint8_t *tgt, size_t tgt_n,
		     dre_delta_ins *ins, int max_ins, dre_buf *lits);

#endif
