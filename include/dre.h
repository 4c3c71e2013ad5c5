/*
 * dre.h: data redundancy elimination: a persistent segment store shared by all
 * streams of a node, and a per-stream encoder/decoder pair.
 *
 * The encoder cuts a byte stream into content-defined chunks, names each by its
 * SHA-256, and sends chunks the peer already holds as references (long runs of
 * chunks seen before in the same order cost a few bytes in all), changed chunks
 * as deltas against what the peer holds, and the rest (the residual) through
 * lz4/zstd or raw.  The output is a sequence of self-delimiting frames, each
 * carrying a checksum of the bytes it decodes to.
 *
 * Thread safety: a dre_store may be shared by any number of threads (it locks
 * internally).  Each writable store runs one writer thread of its own: chunks
 * are appended to memory and written to disk behind the callers' backs, so
 * storing never waits on the disk unless the writer is 32 MiB behind.  A dre_enc or dre_dec is one stream's state: use each from one
 * thread at a time.  Neither knows about sockets or event loops.
 */
#ifndef WANOPT_DRE_H
#define WANOPT_DRE_H

#include <stddef.h>
#include <stdint.h>

/* Error codes: 0 is success, every error is negative. */
enum dre_err {
	DRE_OK = 0,
	DRE_EINVAL = -1,    /* bad argument or option */
	DRE_ENOMEM = -2,    /* allocation failed */
	DRE_EIO = -3,       /* store file I/O failed (errno-level detail in the store log) */
	DRE_ESTORE = -4,    /* store directory unusable: not a store, bad version, locked */
	DRE_ECORRUPT = -5,  /* encoded stream malformed */
	DRE_EMISS = -6,     /* encoded stream references data this store lacks */
	DRE_ECHECKSUM = -7, /* a frame decoded to bytes whose checksum differs */
	DRE_ELZ = -8,       /* residual (de)compression failed */
	DRE_EOUT = -9,      /* the caller's output callback reported failure */
	DRE_ESTATE = -10,   /* call not valid in the current state */
	DRE_EVERSION = -11, /* encoded stream of a format version this build does not read */
};
const char *dre_strerror(int err);

/* ---- store -------------------------------------------------------------- */

typedef struct dre_store dre_store;

typedef struct dre_store_opts {
	uint64_t size_limit;  /* bytes of chunk data kept on disk (saved with the store); 0 = the
				 saved one, else the default (1 GiB; for a store made before
				 limits were saved, at least what it holds, and not saved) */
	int create;           /* create DIR (and a new store in it) if absent */
	int readonly;         /* open for stats only: no writes, no lock */
	int keep;             /* writable, but neither evict nor save the limit (dre check) */
	int batch;            /* a one-shot run (wanopt dre): leave writing the data back to the
				 disk to the kernel, as any program's file writes.  Otherwise the
				 store starts writeback of every 8 MiB it writes, so that a
				 long-running daemon never builds up a backlog of dirty pages that
				 a sync, or the kernel's throttling of writers, would then make
				 its threads wait for.  A one-shot run also lets go of the store's
				 mapped pages every 32 MiB read, a daemon every 256 MiB (faster
				 hot transfers; a run's peak RSS stays low) */
	int reads;            /* how runs of stored chunks are read: DRE_READS_AUTO (0), the faster
				 way on this host as measured once per process (rprobe.c; the
				 environment's WANOPT_STORE_READS=window|map overrides it), or
				 DRE_READS_WINDOW (128 KiB preads) or DRE_READS_MAP (the mappings) */
} dre_store_opts;

#define DRE_READS_AUTO 0
#define DRE_READS_WINDOW 1
#define DRE_READS_MAP 2

/* How far past its size a store may grow while frames in flight pin its
 * oldest data file, MiB (what those frames store depends on the link, not
 * on the store's size). */
#define DRE_PIN_SLACK_MIB 64

typedef struct dre_store_stats {
	uint64_t chunks;       /* chunks indexed */
	uint64_t data_bytes;   /* chunk payload bytes stored (live) */
	uint64_t disk_bytes;   /* bytes of data files on disk, headers and dead records included */
	uint64_t size_limit;   /* configured bound on disk_bytes */
	/* What its file system leaves the store now, while that is less than
	 * size_limit (the bound eviction then keeps to; else 0): what the store
	 * holds on disk and what is free, less 1/64 of the file system (at most
	 * 64 MiB) left to others; at least 4 data files. */
	uint64_t room;
	uint64_t index_bytes;  /* memory held by the in-memory index */
	uint64_t files;        /* data files */
	uint64_t evicted_chunks, evicted_bytes; /* since open */
	/* Since open: the most disk_bytes went past size_limit because frames
	 * not yet acknowledged referenced the oldest data file (the store keeps
	 * it so that a peer's ask can be answered), and data files evicted
	 * all the same, past the margin (DRE_PIN_SLACK_MIB), or by a shrink:
	 * asks for frames that referenced them may fail. */
	uint64_t pin_over_max, pin_forced;
	uint64_t pins; /* pins held now (frames not yet acknowledged that keep a file) */
	uint64_t dropped_records; /* torn or corrupt records dropped at open */
	uint64_t lookups, hits;   /* since open */
	uint64_t io_errors;       /* failed data file reads and writes since open */
	int io_errno;             /* errno of the last of them (0: none) */
	uint64_t dir_remade;      /* since open: the directory was removed in use and made again */
	uint64_t bad_reads;       /* since open: chunks whose record went bad on disk (dropped when read) */
	uint32_t peers, peers_held; /* peer slots in use; of them, held now (dre_store_peer) */
	uint64_t peers_untracked;  /* since open: dre_store_peer calls that found no slot */
	uint64_t peers_reclaimed;  /* since open: idle slots given to new peers */
	/* Sizing (kept in DIR/sizing across runs, since sizing_since, unix
	 * time): chunk bytes referenced and stored anew, and of the latter the
	 * bytes estimated to have been references with a store 2, 4 and 8 times
	 * as large (from a sample of the chunks evicted and stored again). */
	uint64_t sizing_since, hit_bytes, new_bytes, larger_hit_bytes[3];
	/* How runs are read (DRE_READS_WINDOW or _MAP) and, where the way was
	 * measured, what comparing 2 MiB took each way (ns; else 0). */
	int reads;
	uint64_t reads_window_ns, reads_map_ns;
	const char *reads_ignored; /* WANOPT_STORE_READS's value if it named no way (else NULL) */
	/* Where the store chooses the way (reads_tuned 1): what its own reads
	 * cost each way when last timed (ns per MiB; 0: not yet), and how many
	 * times the way changed since open. */
	int reads_tuned;
	uint64_t reads_window_cost, reads_map_cost, reads_switches;
} dre_store_stats;

/* Open (or create) the store in DIR.  On failure returns NULL and writes a
 * message naming the file at fault into err (errlen bytes). */
dre_store *dre_store_open(const char *dir, const dre_store_opts *o, char *err, size_t errlen);
/* Close; accepts NULL.  What was written is in the page cache and reaches the
 * disk as the kernel writes it back; call dre_store_sync first to force it.
 * Records that never made it to disk fail their checksums after a crash and
 * are dropped, never served. */
void dre_store_close(dre_store *st);
/* Change the size bound at run time; evicts at once if now over it,
 * returning when within it (the files themselves are deleted afterwards by
 * the store's writer thread).  0 or a negative DRE_E* error. */
int dre_store_set_limit(dre_store *st, uint64_t size_limit);
/* The same in steps, for a thread that must not stall: each call evicts at
 * most one data file (the oldest) and returns 1 while the store still holds
 * more than size_limit (call again), 0 once within it (the new bound is then
 * saved in DIR/limit), or a negative DRE_E* error.  Until then the bound is
 * what the store holds, so stores in between evict only about what they add.
 * With wait_pins, an oldest file that frames in flight still pin is not
 * evicted: 2 then (call again later, when they were acknowledged; or
 * without wait_pins to evict it all the same, counted as pins_forced).
 * A store closed half-way keeps the old bound in DIR/limit. */
int dre_store_shrink_step(dre_store *st, uint64_t size_limit, int wait_pins);
/* Make everything written so far durable (fdatasync data and index files).
 * Blocks until the disk has it. */
int dre_store_sync(dre_store *st);
/* Wait until the writer thread has written (not synced) everything appended
 * so far, so that dre_store_get_stats counts its errors. */
void dre_store_flush(dre_store *st);
/* The same, done by the store's writer thread: returns at once (0 or
 * DRE_ENOMEM); failures show in the store's I/O error count. */
int dre_store_sync_later(dre_store *st);
/* Have the store's writer thread measure the room its file system leaves it
 * (others' data may have filled it or freed space since the writer last
 * measured, as it does every 4 MiB it writes) ahead of the writes queued,
 * and evict its oldest data beyond that room.  Returns at once: 0 or
 * DRE_ENOMEM; the room shows in dre_store_get_stats once measured. */
int dre_store_room_later(dre_store *st);
void dre_store_get_stats(dre_store *st, dre_store_stats *s);
/* Measure again which way of reading runs is faster here and use it (what
 * the host makes of a page fault can change under a running process: a VM
 * moved to another host).  1 if the way changed, 0 if not, -1 if the store
 * does not probe (its options named a way, or it is read-only).  The new
 * figures show in dre_store_get_stats; WANOPT_STORE_READS still decides if
 * set.  Thread-safe; takes about a millisecond. */
int dre_store_reprobe(dre_store *st);
/* The store's identity: random at creation, so a wiped store gets a new one. */
uint64_t dre_store_id(const dre_store *st);
/* 1 if a process has the store in DIR open for writing (its lock is held:
 * dre_store_open would fail for that), else 0. */
int dre_store_in_use(const char *dir);
/* Peers: the encoder references only chunks a peer is known to hold.  A peer
 * is named by its store id (16 bytes, e.g. from the tunnel HELLO); it gets one
 * of DRE_PEER_SLOTS slots, whose knowledge is saved with dre_store_sync and
 * loaded at open.  dre_store_peer returns the slot and holds it until
 * dre_store_peer_put(slot) (a codec using the slot's bit is freed first).
 * When all slots are taken, a new peer gets the slot unused longest if nobody
 * holds it and it has been unused DRE_PEER_IDLE_S seconds (across restarts:
 * a slot's last use is saved with its knowledge); what its old peer held is
 * forgotten, so that peer, if it comes back, starts as one holding nothing.
 * Otherwise -1: that peer is not tracked (treated as holding everything this
 * store holds; its misses cost an ask each). */
#define DRE_PEER_SLOTS 32
#define DRE_PEER_IDLE_S (24 * 3600)
int dre_store_peer(dre_store *st, const uint8_t id[16]);
/* Give back a slot dre_store_peer returned (-1: nothing). */
void dre_store_peer_put(dre_store *st, int slot);
/* Check the index against the data files (tests, debug): 0 or DRE_ESTORE. */
int dre_store_check(dre_store *st, char *err, size_t errlen);

/* ---- codec -------------------------------------------------------------- */

/* Receives encoded (encoder) or decoded (decoder) bytes; return 0, a negative
 * value to abort the call with DRE_EOUT, or (decoder only) a positive value to
 * pause after this frame. */
typedef int (*dre_out_fn)(void *arg, const void *buf, size_t len);

/* Links up to this rate (bits/s) get zstd level 16 under DRE_LZ_AUTO, about
 * 5-9 MB/s of input per core: a caller feeding such an encoder should hand
 * it new data a frame at a time. */
#define DRE_LINK_SLOW_BPS 4000000ULL
/* ... and up to this rate zstd level 9, about 40-60 MB/s per core. */
#define DRE_LINK_MID_BPS 20000000ULL

enum dre_lz {
	DRE_LZ_AUTO = 0,  /* choose from link_bps: zstd -16 up to DRE_LINK_SLOW_BPS, -9 up to
			     20 Mbit/s, -3 up to 200 Mbit/s (and when unknown), lz4 beyond */
	DRE_LZ_NONE = 1,
	DRE_LZ_LZ4 = 2,
	DRE_LZ_ZSTD = 3,
};

typedef struct dre_enc_opts {
	int lz;               /* enum dre_lz */
	int level;            /* zstd level (1..19) or lz4 acceleration; 0 = default */
	uint64_t link_bps;    /* WAN rate hint for DRE_LZ_AUTO, bits/s; 0 = unknown (zstd) */
	int no_dedup;         /* 1: LZ only (optimize = lz): no chunk references, nothing stored */
	size_t frame_max;     /* input bytes per frame; 0 = default (1 MiB) */
	size_t frame_lit_max; /* ... or fewer: a frame ends once this many of its bytes went
			       * out as literals or deltas (0 = no such bound), so that a
			       * slow zstd level codes new data in small steps while repeated
			       * data still goes in large frames */
	int retain;           /* 1: keep what is needed to answer dre_enc_learn until acked */
	int peer;             /* peer slot (dre_store_peer) + 1, or 0: untracked peer assumed
				 to hold everything (lock-step stores, as with wanopt dre) */
	uint32_t chunk_min, chunk_avg, chunk_max; /* CDC sizes; 0 = defaults (2K/4K/16K) */
	int threaded;         /* 1: residual coding and output on a helper thread, overlapping
				 the next frame, and (unless link_bps names a link of up to
				 20 Mbit/s) full-size zstd frames coded on zstd's worker
				 threads, one per processor up to 4; `out` is then called
				 from the helper thread.  For a bulk run that owns the machine */
	int version;          /* stream format version to write (DRE_STREAM_VERSION_MIN..
				 DRE_STREAM_VERSION, for an older decoder); 0 = newest */
} dre_enc_opts;

typedef struct dre_codec_stats {
	uint64_t in_bytes;      /* encoder: bytes given; decoder: encoded bytes given */
	uint64_t out_bytes;     /* encoder: encoded bytes produced; decoder: bytes produced */
	uint64_t frames;
	uint64_t ref_bytes;     /* raw bytes sent as references (DRE hits) */
	uint64_t delta_bytes;   /* raw bytes sent as deltas */
	uint64_t lit_bytes;     /* raw bytes sent as literals (the residual) */
	uint64_t lz_in, lz_out; /* residual bytes before and after LZ (a decoder: as the
				   sender coded them) */
	uint64_t asks;          /* encoder: learns answered; decoder: asks raised */
	uint64_t hashed_bytes;  /* encoder: raw bytes cut and fingerprinted (new data, and
				   repeats whose order it could not follow) */
	uint64_t cut_bytes;     /* encoder: raw bytes searched for chunk boundaries (hashed
				   bytes, and repeats found again by their bytes' checksum) */
} dre_codec_stats;

typedef struct dre_enc dre_enc;
typedef struct dre_dec dre_dec;

dre_enc *dre_enc_new(dre_store *st, const dre_enc_opts *o);
void dre_enc_free(dre_enc *e);
/* Consume all n bytes; frames that fill up are emitted through out. */
int dre_enc_write(dre_enc *e, const void *buf, size_t n, dre_out_fn out, void *arg);
/* Input written in place instead of passed to dre_enc_write (which copies
 * what it cannot frame at once): space for at least `min` bytes (*room: how
 * many fit), NULL when out of memory.  After writing n <= *room bytes there,
 * dre_enc_commit encodes them as dre_enc_write would; nothing else may be
 * called on the encoder in between. */
void *dre_enc_space(dre_enc *e, size_t min, size_t *room);
int dre_enc_commit(dre_enc *e, size_t n, dre_out_fn out, void *arg);
/* Encode whole frames straight from buf, with no copy: as many as buf holds
 * with a chunk to spare after each (frame_max plus the largest chunk).
 * *took: the bytes consumed; the rest is not buffered, the caller passes it
 * again (with what follows it) or to dre_enc_write.  Helper threads may go
 * on reading buf[0..*took) after it returns: the caller keeps those bytes
 * unchanged until dre_enc_release (or dre_enc_write, _flush, _end, _free)
 * returns, so that the next buffer's frames overlap this one's.  Only while
 * nothing is buffered (no dre_enc_write or dre_enc_commit since the encoder
 * was made or flushed), else DRE_ESTATE. */
int dre_enc_write_frames(dre_enc *e, const void *buf, size_t n, size_t *took, dre_out_fn out, void *arg);
/* Wait until no helper thread reads bytes given to dre_enc_write_frames;
 * 0, or a helper's error. */
int dre_enc_release(dre_enc *e);
/* Emit everything buffered as frames now (the caller has no more data for a while). */
int dre_enc_flush(dre_enc *e, dre_out_fn out, void *arg);
/* The data ended: flush, then emit an END frame, on which the decoder reports
 * dre_dec_ended once all before it is applied (learns can still follow).
 * Once only: later calls emit nothing, and data written after it is refused
 * (DRE_ESTATE). */
int dre_enc_end(dre_enc *e, dre_out_fn out, void *arg);
/* The decoder asked for frame `seq` (it lacked something it referenced): emit a
 * LEARN frame carrying that frame's bytes (from stream version 3, chunks the
 * peer holds by name, unless seq has DRE_ASK_FULL set).  Needs opts.retain. */
int dre_enc_learn(dre_enc *e, uint64_t seq, dre_out_fn out, void *arg);
/* The decoder has applied every frame up to and including `seq`. */
void dre_enc_ack(dre_enc *e, uint64_t seq);
void dre_enc_get_stats(const dre_enc *e, dre_codec_stats *s);
/* The residual coder e uses, for logs: "zstd 16", "zstd 3 on 2 threads", "lz4"
 * or "no LZ"; buf. */
const char *dre_enc_lz_name(const dre_enc *e, char *buf, size_t len);
/* Sequence number of the last DATA frame emitted (0 before the first). */
uint64_t dre_enc_seq(const dre_enc *e);
/* The stream has gone quiet: flush, and give back what the next data can
 * rebuild: the residual compressor (its zstd frame is ended in a DATA frame of
 * no data, a dozen bytes, so that the decoder frees its own too), frame
 * buffers and the delta window.  The stream goes on as before; the next data
 * starts with a small compressor again.  After dre_enc_end the compressor
 * stays while a frame may still be asked for (a LEARN continues the residual
 * stream the peer is in).  Nothing for a threaded encoder. */
int dre_enc_rest(dre_enc *e, dre_out_fn out, void *arg);
/* Bytes e has allocated for its residual compressor and frame buffers (pages
 * not yet used count too). */
size_t dre_enc_mem(const dre_enc *e);

/* Called by the decoder when frame `seq` references data its store lacks; the
 * caller must get the encoder to call dre_enc_learn(seq).  Until the LEARN frame
 * arrives in the stream, the decoder buffers what follows (bounded).  If that
 * learn named chunks the decoder lacks too, it asks once more, with
 * DRE_ASK_FULL set in seq; it sets DRE_ASK_FULL at once where the frame named
 * a chunk it lacks, and on every ask after such a failed learn. */
#define DRE_ASK_FULL (1ULL << 63)
typedef void (*dre_ask_fn)(void *arg, uint64_t seq);

dre_dec *dre_dec_new(dre_store *st);
void dre_dec_free(dre_dec *d);
/* 1: two helper threads (faster on a multi-core host): one decompresses the
 * literal sections of the next few frames, one stores the new chunks of the
 * last few while the frame between is rebuilt.  Without an ask callback the
 * storing thread also checks each frame's checksum and calls `out` (from that
 * thread; a pause request is then ignored); with one, callbacks stay on the
 * caller's thread.  A checksum failure seen by a helper thread fails a later
 * call; the bytes handed out before any error are the same as without. */
int dre_dec_set_threaded(dre_dec *d, int on);
/* What this decoder stores came from peer slot `peer` (dre_store_peer): mark
 * it as held by that peer too. */
void dre_dec_set_peer(dre_dec *d, int peer);
/* Without an ask callback a miss fails the stream with DRE_EMISS. */
void dre_dec_set_ask(dre_dec *d, dre_ask_fn ask, void *arg);
/* Output by handing buffers over instead of lending them: each frame's
 * decoded bytes go to take(arg, buf, len) in a malloc()ed buffer the callee
 * then owns (and releases with free()), saving the callee a copy; `arg` is
 * dre_dec_write's, and the return value means what out's does.  Without a
 * helper thread only (with one, out is called as usual). */
typedef int (*dre_take_fn)(void *arg, void *buf, size_t len);
void dre_dec_set_take(dre_dec *d, dre_take_fn take);
/* Feed any number of encoded bytes; decoded bytes go to out, in order, and
 * only after their frame's checksum matched.  If out returns a positive value
 * the decoder pauses after that frame, keeping the rest of its input; call
 * dre_dec_write again (n may be 0) to go on. */
int dre_dec_write(dre_dec *d, const void *buf, size_t n, dre_out_fn out, void *arg);
/* Input written in place instead of passed to dre_dec_write (which copies
 * it): space for at least `min` bytes (*room: how many fit), NULL when out of
 * memory.  After writing n <= *room bytes there, dre_dec_commit decodes them
 * as dre_dec_write would (n > *room: DRE_ESTATE); nothing else may be called
 * on the decoder in between. */
void *dre_dec_space(dre_dec *d, size_t min, size_t *room);
int dre_dec_commit(dre_dec *d, size_t n, dre_out_fn out, void *arg);
/* 1 once an END frame arrived and everything before it was applied (and no
 * part of a later frame is waiting for its rest). */
int dre_dec_ended(const dre_dec *d);
/* 1 if the last call stopped because out asked for a pause. */
int dre_dec_paused(const dre_dec *d);
/* 1 while the decoder waits for a LEARN frame answering its ask (the frames
 * after the one it lacks wait with it, up to DRE_LEARN_BACKLOG bytes). */
int dre_dec_waiting(const dre_dec *d);
/* The stream has gone quiet: give back recycled frame buffers, the input
 * buffer and the delta window.  Returns 1 if it did, 0 if it must keep them
 * for now: part of a frame is in, or frames are queued or awaited (call it
 * again later).  (Its zstd decompressor goes as soon as the encoder ends its
 * frame: dre_enc_rest.) */
int dre_dec_rest(dre_dec *d);
/* Bytes d has allocated for buffers and decompressors. */
size_t dre_dec_mem(const dre_dec *d);
/* Encoded bytes taken but not yet decoded (partial or waiting frames). */
size_t dre_dec_buffered(const dre_dec *d);
/* DRE_OK if the stream ended on a frame boundary with nothing pending.  No
 * callback comes after dre_dec_finish or dre_dec_free returns (with a helper
 * thread, output may otherwise still arrive after dre_dec_write returned). */
int dre_dec_finish(dre_dec *d);
/* Sequence number of the last frame applied (0 before the first). */
uint64_t dre_dec_applied(const dre_dec *d);
void dre_dec_get_stats(const dre_dec *d, dre_codec_stats *s);

#endif
