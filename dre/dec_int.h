/* dec_int.h: the decoder's private state (dec.c, dec_ops.c, dec_work.c, dec_lz.c). */
#ifndef WANOPT_DRE_DEC_INT_H
#define WANOPT_DRE_DEC_INT_H

#include "dre_int.h"
#include "worker.h"

struct dre_fhdr {
	int type, lz;
	uint64_t raw_len, ops_len, lit_len, lz_len, sum;
	size_t hdr_len;
};

/* A parsed frame waiting to be applied.  Its literal section is decompressed
 * when it is parsed or, by the decompression thread, soon after (lz_no). */
struct dre_qframe {
	struct dre_fhdr h;
	uint64_t seq;        /* DATA: its number in the stream */
	uint64_t learn_seq;  /* LEARN: the frame it stands for */
	uint8_t *ops, *lits;
	uint8_t *lzd;        /* its compressed literal section, for the thread */
	size_t ops_cap, lits_cap, lzd_cap;
	unsigned lz_no;      /* its number in the thread's order; 0 once known done */
	int lz_rc;           /* 0 or the decompression's error */
	int inplace;         /* lits were moved to d->out, being its bytes already */
	struct dre_qframe *next;
};

/* Frames parsed ahead of the one being applied, their literal sections
 * decompressed by a thread of their own (in arrival order: one compression
 * stream spans the frames) while the decoder rebuilds earlier ones. */
#define DRE_DEC_AHEAD 3

/* The decompression thread: frames are handed over in order (put) through a
 * ring and decompressed in the same order (take). */
struct dre_dlz {
	dre_worker t;
	struct dre_qframe *ring[DRE_DEC_AHEAD];
	unsigned put;             /* frames handed over; decoder's thread only */
	unsigned take;            /* frames taken; the thread only */
	int failed;               /* a decompression failed (the stream is lost); whoever
				     decompresses (the decoder's thread only while the
				     thread is idle) */
};

/* A store operation recorded while a frame is rebuilt, run after it (in order)
 * by the decoder's helper thread or, without one, by the decoder itself. */
struct dre_sop {
	uint32_t kind;  /* SOP_PUT, SOP_HIT, SOP_BREAK */
	uint32_t len;   /* PUT, HIT: chunk length */
	uint64_t arg;   /* PUT: offset in the frame buffer; HIT: chunk tag */
};
enum { SOP_PUT = 1, SOP_HIT = 2, SOP_BREAK = 3, SOP_PUTL = 4 /* PUT, then adopt prev -> it */,
       SOP_PREV = 5 /* the previous chunk is arg (LEARN) */ };

/* A frame's checksum check and output, when the helper thread does them. */
struct dre_vjob {
	uint64_t want, seed;      /* expected frame checksum and its seed */
	int version;              /* the stream's (which checksum) */
	dre_out_fn out;
	void *arg;
};

/* Frames in flight to the helper thread: the decoder rebuilds frame N+DEPTH
 * while the helper checks, outputs and stores frames N..N+DEPTH-1. */
#define DRE_DEC_DEPTH 3

/* One frame handed to the helper thread. */
struct dre_dslot {
	dre_buf ops, data;        /* its struct dre_sop list and its bytes */
	uint64_t op_bytes;        /* what its store operations may append */
	int verify;               /* ... and, if set, check and output data (vj) first */
	struct dre_vjob vj;
};

/* The helper thread: stores the chunks of earlier frames while the next one
 * is rebuilt.  Slots are filled by the decoder's thread in order (put) and run
 * by the helper in the same order (take); the worker's pending count says
 * which are in flight, so a slot is refilled only after its run finished. */
struct dre_dwork {
	dre_worker t;
	struct dre_dslot slot[DRE_DEC_DEPTH];
	unsigned put;             /* slots handed over; decoder's thread only */
	unsigned take;            /* slots run; helper thread only */
	dre_fp *fp;
};

struct dre_dec {
	dre_store *st;
	dre_fp *fp;
	dre_lzc *lz[3];           /* by enum dre_proto_lz, created on first use */
	int hdr_got, waiting, err, paused, ended;
	int wait_full;            /* the learn awaited was asked for in full */
	int lacks;                /* the frame being applied named a chunk we lack */
	int full_asks;            /* a light learn named chunks we lack: ask in full from now */
	uint64_t seed, seq, applied, wait_seq;
	int version;              /* the stream header's */
	dre_fsum_state fs;        /* the frame being rebuilt's checksum, taken as it grows */
	int fs_on;                /* ... when it is checked here (stream version 2) */
	dre_buf in;
	size_t in_off;
	struct dre_qframe *qhead, *qtail, *spare; /* queue; spare: recycled frames */
	unsigned qcount, nspare;
	uint64_t qbytes;
	struct dre_dlz lzw;
	dre_ent cur;              /* cursor, as in the encoder */
	uint64_t prev;            /* last chunk output: used only by whoever runs sops */
	dre_buf sops;             /* store operations of the frame being rebuilt */
	dre_buf used;             /* tags of the stored chunks it used (with an ask path) */
	size_t sops_done;         /* how many of them already ran (forced early) */
	/* What the store operations not run yet may append: those of the frame
	 * being rebuilt, and at most fly_bytes in the frames handed to the
	 * helper thread; and the eviction horizon (see dre_store_horizon) for up
	 * to hz_upto such bytes.  An entry looked up in an older file may be one
	 * those operations evict (and store again, with another successor). */
	uint64_t cur_bytes, fly_bytes, hz_upto;
	uint32_t hz;
	int in_frame;             /* rebuilding: links made by ops forced early are journaled */
	dre_buf undo;             /* that journal: struct dre_undo, restored if the frame fails */
	struct dre_dwork w;
	dre_buf out;              /* the frame being rebuilt */
	uint8_t *win;             /* delta base window */
	dre_rwin rw;              /* the store read ahead, for runs (rwin.c) */
	uint64_t win_tag[16];
	uint32_t win_end[16];
	int win_cnt;
	uint32_t win_len;
	dre_ask_fn ask;
	void *ask_arg;
	dre_take_fn take;         /* hand output buffers over (dre_dec_set_take) */
	uint32_t peer_bit;        /* slot bit of the peer the stream comes from, or 0 */
	dre_codec_stats stats;
};

/* A successor a frame's early store operations changed: chunk `tag` had
 * `next`, and has `now` (restored only if still so: another stream sharing the
 * store may have linked it since). */
struct dre_undo {
	uint64_t tag, next, now;
};

/* The frame being rebuilt failed (checksum, miss, corrupt): store its new
 * chunks (they are sound: fingerprinted here) but none of its links, and
 * undo the links its operations forced early made, so a bad frame never
 * leaves a wrong successor for later streams to follow.  0 or a store error. */
int dre_dec_discard(dre_dec *d);
/* The frame being rebuilt failed (its checksum, or a chunk it lacks): read
 * every stored chunk it used (d->used) with its record's checksum checked,
 * so that one gone bad on disk leaves the store (the LEARN then stores it
 * anew) instead of failing every later frame that uses it. */
void dre_dec_verify_hits(dre_dec *d);
/* Record a store operation for the frame being rebuilt. */
int dre_dec_sop(dre_dec *d, uint32_t kind, uint32_t len, uint64_t arg);
/* Make every recorded store operation take effect now, those of the frames
 * in flight to the helper thread first (lookups that missed call this and try
 * again).  0 or a store error, or the helper thread's. */
int dre_dec_sync(dre_dec *d);
/* End of a frame: hand its store operations to the helper thread (swapping
 * frame buffers with a free slot, waiting for one if all DRE_DEC_DEPTH are in
 * flight) or run them.  With vj, the frame's checksum check and output go
 * along (or are done now, if the frame is not handed over).  0 or an error
 * (a helper thread's error shows at a later call). */
int dre_dec_frame_done(dre_dec *d, const struct dre_vjob *vj);
/* Start or stop the helper thread; stopping finishes the frames in flight. */
int dre_dec_work_start(dre_dec *d);
void dre_dec_work_stop(dre_dec *d);
/* Look a tag up, making pending store operations take effect on a miss. */
int dre_dec_find(dre_dec *d, uint64_t tag, dre_ent *e);
/* Look chunk `tag` up (dre_dec_find) into *e and read its bytes into buf,
 * which has room for max: 0, DRE_EMISS (not stored, or its record is
 * unreadable), DRE_ECORRUPT (longer than max).  The frame checksum covers
 * the bytes: they are not checked against the record's. */
int dre_dec_read(dre_dec *d, uint64_t tag, dre_ent *e, uint8_t *buf, size_t max);
/* Bring *e, an entry looked up earlier, up to date for following its
 * successor: looked up again if it has none yet, and after every pending
 * store operation has run if it sits in a file they may evict.  1 if the
 * chunk is still stored (*e updated), else 0. */
int dre_dec_refresh(dre_dec *d, dre_ent *e);

/* Start or stop the decompression thread; stopping finishes what it holds. */
int dre_dec_lz_start(dre_dec *d);
void dre_dec_lz_stop(dre_dec *d);
/* Decompress f's literal section (f->h says how) from lz[0..h.lz_len): at
 * once, or handed to the thread (lz is copied; waits while DRE_DEC_AHEAD
 * frames are in flight).  0 or an error (DRE_ENOMEM, or at once DRE_ELZ). */
int dre_dec_lz_load(dre_dec *d, struct dre_qframe *f, const uint8_t *lz);
/* Wait until f's literals are there: 0 or its decompression's error. */
int dre_dec_lz_ready(dre_dec *d, struct dre_qframe *f);

/* Before rebuilding f into an empty d->out: if f is a DATA frame made of
 * literal ops only, swap buffers so that d->out holds its literal section,
 * which is already the frame's bytes (saves copying them). */
void dre_dec_adopt_lits(dre_dec *d, struct dre_qframe *f);
/* Rebuild a DATA frame into d->out: 0, DRE_EMISS, DRE_ECORRUPT, ... */
int dre_dec_ops(dre_dec *d, struct dre_qframe *f);
/* Rebuild a LEARN frame into d->out, storing its chunks. */
int dre_dec_learn_ops(dre_dec *d, struct dre_qframe *f);

#endif
