/* enc_int.h: the encoder's private state (enc*.c, learn.c). */
#ifndef WANOPT_DRE_ENC_INT_H
#define WANOPT_DRE_ENC_INT_H

#include <sys/types.h>

#include "dre_int.h"
#include "worker.h"

/* A chunk of a retained frame: tag 0 means raw bytes kept in the frame's raw buffer. */
struct dre_pend;

struct dre_ret_ch {
	uint64_t tag;
	uint32_t len;
	uint16_t linked; /* it followed the previous chunk in our store order */
	uint16_t held;   /* it was a reference to a chunk the peer held before the frame */
	uint32_t file, off; /* a reference: where the chunk sat (DRE_PIN_NONE: not known) */
};

#define DRE_RETAIN_MAX 4096 /* unacknowledged frames kept for learns */

/* What a sent frame was made of, kept until acked so a learn can be answered. */
struct dre_ret {
	uint64_t seq, cursor, prev; /* prev: the chunk output just before the frame */
	struct dre_ret_ch *ch;
	size_t nch;
	uint8_t *raw;
	size_t rawlen;
	uint32_t pin; /* the store file pinned for it (dre_store_pin) */
};

/* A frame cut and hashed ahead (enc_prep.c). */
struct dre_prep_ch;
struct dre_prep_seg;
struct dre_prep {
	dre_worker t;            /* cuts and hashes pieces of the frame beside us */
	dre_fp *fp;              /* the helper thread's hasher */
	struct dre_prep_ch *ch;  /* chunks found, in order: offset, length, SHA-256 */
	size_t n, next;          /* chunks, lookup cursor */
	struct dre_prep_seg *seg; /* the frame's pieces, cut by whichever thread took each */
	struct dre_prep_ch *sch; /* their chunks: PREP_MAX / PREP_SEGS slots each */
	size_t merged;           /* pieces taken into ch */
	size_t claim;            /* the next piece to take (atomic) */
	size_t pos;              /* where the chunks in ch end */
	int pending, kicked, err; /* pieces not yet in ch; the helper has this frame; first error */
	const uint8_t *base;     /* the input: len bytes, final or not */
	size_t len;
	int final;
	uint64_t used;           /* bytes of chunks the encoding loop took from here (tests) */
};

/* A frame handed to the helper threads: residual-coded and emitted by one,
 * its store operations run by the other, while later frames are cut and
 * fingerprinted.  Up to DRE_ENC_DEPTH frames are in flight. */
#define DRE_ENC_DEPTH 2
struct dre_eslot {
	dre_buf ops, lits;      /* the frame's ops and literal section */
	dre_buf litv;           /* ... or, when litv.p is set, its literal section as a view */
	dre_buf eops, edata;    /* its store operations */
	int type;
	size_t raw_n;
	uint64_t sum;
	const uint8_t *src;     /* set: sum is the seed; checksum src[0..raw_n) first */
	dre_out_fn out;
	void *arg;
	uint64_t op_bytes;      /* what its store operations may append */
};

/* A helper thread, taking the slots in order. */
struct dre_ework {
	dre_worker t;
	unsigned take;          /* slots taken (the helper's own count) */
};

struct dre_enc {
	dre_store *st;
	dre_enc_opts o;
	dre_cdc cdc;
	dre_fp *fp;
	dre_lzc *lz;
	int lzkind, hdr_sent;
	int ended;             /* the END frame went out: no more data */
	uint64_t seed, seq;
	dre_buf in;            /* input not yet framed, from in_off */
	size_t in_off;
	/* Threaded: e->in's twin.  Frames cut from e->in leave their literals
	 * there as views; while the helper may still read one, the unframed
	 * rest moves to in_alt (the two swap) instead of to e->in's front. */
	dre_buf in_alt;
	const uint8_t *busy_p; /* with view_busy: e->in.p or in_alt.p the frame in flight lies in, or NULL */
	size_t busy_off;       /* ...and where in it the frame begins */
	dre_buf ops, lits, out;
	/* The literal section as a view of the caller's input (cap 0: never
	 * written or freed) while it is one contiguous run of input bytes, in
	 * frames cut straight from dre_enc_write's buffer; lits is empty then. */
	dre_buf litv;
	int view_ok;           /* the frame being cut may use litv */
	int view_busy;         /* a helper may still read a view: wait before returning */
	dre_ent cur;           /* the cursor: last chunk used from the peer's history */
	uint64_t prev;         /* last chunk output (0 after raw bytes) */
	int prev_sent;         /* ... and its bytes went out (it is new at the peer) */
	uint64_t frame_prev;   /* prev when the current frame began */
	uint64_t run;          /* pending RUN/SKIP count */
	uint64_t again;        /* pending AGAIN count (the cursor chunk repeated) */
	uint64_t ahead;        /* a precomputed chunk's tag to prefetch the index slot of, or 0 */
	uint32_t run_skip;
	int delta_fails;
	int last_cont;         /* the last chunk was a run continuation of the one before */
	uint32_t peer_bit;     /* the peer's slot bit, 0: untracked (assumed to hold all) */
	uint8_t *win;          /* delta base window */
	dre_rwin rw;           /* the store read ahead, for runs (rwin.c) */
	uint64_t win_tag[8];
	uint32_t win_end[8];
	int win_n;
	dre_delta_ins *ins;
	dre_buf cur_ch, cur_raw;  /* chunks of the frame being built (retain) */
	uint32_t pin_floor;       /* ... the oldest store file they sit in (DRE_PIN_NONE: none) */
	uint32_t pin_held;        /* ... the pin taken for it (dre_store_pin), until the frame keeps it */
	struct dre_ret *ret;      /* ring of retained frames, grown up to DRE_RETAIN_MAX */
	size_t ret_head, nret, ret_cap;
	dre_codec_stats stats;
	uint64_t st_ref, st_delta, st_lit;
	struct dre_ework w;        /* helper thread: residual coding and output */
	struct dre_ework ws;       /* helper thread: store operations */
	struct dre_eslot slot[DRE_ENC_DEPTH]; /* frames handed to them */
	unsigned put;              /* slots handed over */
	int fly_in;                /* a frame in flight may lie in e->in (or in_alt) */
	dre_buf eops, edata;       /* store operations of the frame being built (threaded) */
	struct dre_pend *pend;     /* chunks recorded but maybe not stored yet */
	uint32_t pend_gen;         /* frame generation of the pending table */
	struct dre_prep prep;      /* the frame cut and hashed ahead, when prep_want */
	int prep_want;             /* the last frame was mostly new data */
	/* Eviction horizon: chunks in data files older than `horizon` may be
	 * gone when the peer reads this frame (its store runs the operations
	 * the helper thread has not yet run here), so they are not referenced.
	 * fly_bytes, cur_bytes: what the in-flight and the current frame's
	 * recorded operations may append; cur_allow: the current frame's bytes
	 * the horizon allows for.  active: the store's active file when the
	 * horizon last moved, where a chunk stored from then on lands or later. */
	uint32_t horizon, active;
	uint64_t fly_bytes, cur_bytes, cur_allow;
};

/* Encode p[0..n) (whole chunks, final or not) as one frame, handed to the
 * helper threads when there are some; *used (which the caller zeroes) gets
 * the input bytes it took, and stays 0 when p holds no whole chunk yet.  With
 * e->view_ok, the frame's literals and checksum may be read from p until the
 * helper is done with it (e->view_busy, e->busy_p). */
int dre_enc_frame(dre_enc *e, const uint8_t *p, size_t n, int final, size_t *used, dre_out_fn out, void *arg);
/* Emit a frame of `type` (0: just the stream header) built from e->ops and
 * e->lits (or the view e->litv), decoding to raw_n bytes whose checksum is
 * sum: on the helper thread if there is one (e->ops/e->lits are then swapped
 * for empty buffers, a view handed over), else now. */
int dre_enc_submit(dre_enc *e, int type, size_t raw_n, uint64_t sum, dre_out_fn out, void *arg);
/* The same, with the checksum of src[0..raw_n) under seed `seed` computed on
 * the helper thread (which reads src until dre_enc_wait: e->view_busy). */
int dre_enc_submit_src(dre_enc *e, int type, size_t raw_n, uint64_t seed, const uint8_t *src, dre_out_fn out,
		       void *arg);
/* Emit a DATA frame of no data whose literal section ends the residual
 * compressor's frame (dre_lz_end); sum: the checksum of no bytes. */
int dre_enc_emit_lz_end(dre_enc *e, uint64_t sum, dre_out_fn out, void *arg);
/* Wait until the helper thread has emitted everything; its sticky error or 0. */
int dre_enc_wait(dre_enc *e);
int dre_enc_work_start(dre_enc *e);
/* Store mutations (enc_store.c): now, or recorded for the helper thread. */
/* lit_off: where p's bytes sit in e->lits, or -1 (they are copied then);
 * old: the store's entry for this chunk's tag when it was looked up, or NULL
 * (a chunk stored already stays where it is: see dre_enc_pending). */
int dre_enc_put(dre_enc *e, const uint8_t h[32], const uint8_t *p, uint32_t len, uint64_t prev,
		ssize_t lit_off, const dre_ent *old);
/* file: the data file the chunk sat in when looked up (for its pin) */
int dre_enc_hit(dre_enc *e, uint64_t prev, uint64_t tag, uint32_t len, uint32_t file);
/* A frame begins: set e->horizon for the operations in flight and those the
 * frame may record (see struct dre_enc). */
void dre_enc_horizon_begin(dre_enc *e);
/* 1 if a chunk with SHA-256 h and length len was recorded in the current or
 * the in-flight frame (not necessarily stored yet); *file: the oldest data
 * file it may sit in once stored (the file holding it already, for a chunk
 * the store had: storing it again adds no copy). */
int dre_enc_pending(const dre_enc *e, const uint8_t h[32], uint32_t len, uint32_t *file);
/* A frame was handed over: pending entries older than the previous frame expire. */
void dre_enc_pend_next(dre_enc *e);
/* Run recorded store operations (the helper thread). */
int dre_enc_eops_run(dre_store *st, const dre_buf *eops, const dre_buf *data, const dre_buf *lits,
		     uint32_t peer_bit);
void dre_enc_work_stop(dre_enc *e);
/* Hash-ahead (enc_prep.c): start/stop its helper thread.  dre_enc_prep
 * cuts p[0..n) (as enc_frame would from position 0) and hashes the chunks,
 * in pieces that this thread and the helper take in turn: it returns once
 * every piece is taken, the helper's last perhaps going on (0 or an error).
 * dre_enc_prep_get: the hash and length of the precomputed chunk starting
 * at pos, or NULL; it waits for the helper's piece when it gets there.
 * dre_enc_prep_end, before the frame is done: waits for the helper if it
 * was not needed; the first error, or 0. */
int dre_enc_prep_start(dre_enc *e);
void dre_enc_prep_stop(dre_enc *e);
int dre_enc_prep(dre_enc *e, const uint8_t *p, size_t n, int final);
const uint8_t *dre_enc_prep_get(dre_enc *e, size_t pos, uint32_t *len);
/* The tag of the precomputed chunk k after the one dre_enc_prep_get last
 * gave, if it is known yet; else 0. */
uint64_t dre_enc_prep_ahead(const dre_enc *e, size_t k);
int dre_enc_prep_end(dre_enc *e);
/* Retained frames (learn.c), when e->o.retain: note a chunk of the frame
 * being built (held: sent as a reference to a chunk the peer held before;
 * else its bytes went in this frame, which the peer may not have stored if
 * the frame failed; tag 0: raw bytes p[0..len) kept with the frame); keep
 * the built frame in the ring (the oldest goes when it is full); free every
 * retained frame and the ring. */
int dre_enc_retain_chunk(dre_enc *e, uint64_t tag, const uint8_t *p, uint32_t len, int held);
int dre_enc_retain_frame(dre_enc *e);
/* A frame begins: no chunks noted yet (a pin left by a frame never kept,
 * one that failed, goes). */
void dre_enc_retain_begin(dre_enc *e);
/* The frame references (or stores anew) a chunk in store file `file`, or
 * (DRE_PIN_NONE) one about to be stored in the active file: the oldest such
 * file is pinned at once, and the retained frame keeps that pin until the
 * frame is acknowledged, so its chunks stay answerable from the moment the
 * frame first uses them. */
void dre_enc_retain_file(dre_enc *e, uint32_t file);
void dre_enc_ret_free(dre_enc *e);

#endif
