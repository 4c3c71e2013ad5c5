/* enc_int.h: the encoder's private state (enc.c, learn.c). */
#ifndef WANOPT_DRE_ENC_INT_H
#define WANOPT_DRE_ENC_INT_H

#include "dre_int.h"

/* A chunk of a retained frame: tag 0 means raw bytes kept in the frame's raw buffer. */
struct dre_ret_ch {
	uint64_t tag;
	uint32_t len;
	uint32_t pad;
};

/* What a sent frame was made of, kept until acked so a learn can be answered. */
struct dre_ret {
	uint64_t seq, cursor;
	struct dre_ret_ch *ch;
	size_t nch;
	uint8_t *raw;
	size_t rawlen;
};

struct dre_enc {
	dre_store *st;
	dre_enc_opts o;
	dre_cdc cdc;
	dre_fp *fp;
	dre_lzc *lz;
	int lzkind, hdr_sent;
	uint64_t seed, seq;
	dre_buf in;            /* input not yet framed, from in_off */
	size_t in_off;
	dre_buf ops, lits, out;
	dre_ent cur;           /* the cursor: last chunk used from the peer's history */
	uint64_t prev;         /* last chunk output (0 after raw bytes) */
	uint64_t run;          /* pending RUN/SKIP count */
	uint32_t run_skip;
	int delta_fails;
	uint8_t *win;          /* delta base window */
	uint64_t win_tag[8];
	uint32_t win_end[8];
	int win_n;
	dre_delta_ins *ins;
	dre_buf cur_ch, cur_raw;  /* chunks of the frame being built (retain) */
	struct dre_ret *ret;      /* ring of RETAIN_MAX retained frames */
	size_t ret_head, nret;
	dre_codec_stats stats;
	uint64_t st_ref, st_delta, st_lit;
};

/* Emit a frame of `type` from e->ops and e->lits; raw is what it decodes to
 * (for the checksum, keyed with sum_seq). */
int dre_enc_emit(dre_enc *e, int type, const uint8_t *raw, size_t raw_n, uint64_t sum_seq,
		 dre_out_fn out, void *arg);

#endif
