/* dec_int.h: the decoder's private state (dec.c, dec_ops.c). */
#ifndef WANOPT_DRE_DEC_INT_H
#define WANOPT_DRE_DEC_INT_H

#include "dre_int.h"

struct dre_fhdr {
	int type, lz;
	uint64_t raw_len, ops_len, lit_len, lz_len, sum;
	size_t hdr_len;
};

/* A parsed frame (literal section already decompressed) waiting to be applied. */
struct dre_qframe {
	struct dre_fhdr h;
	uint64_t seq;        /* DATA: its number in the stream */
	uint64_t learn_seq;  /* LEARN: the frame it stands for */
	uint8_t *ops, *lits;
	struct dre_qframe *next;
};

struct dre_dec {
	dre_store *st;
	dre_fp *fp;
	dre_lzc *lz[3];           /* by enum dre_proto_lz, created on first use */
	int hdr_got, waiting, err;
	uint64_t seed, seq, applied, wait_seq;
	dre_buf in;
	size_t in_off;
	struct dre_qframe *qhead, *qtail;
	uint64_t qbytes;
	dre_ent cur;              /* cursor, as in the encoder */
	uint64_t prev;
	dre_buf out;              /* the frame being rebuilt */
	uint8_t *win;             /* delta base window */
	uint64_t win_tag[16];
	uint32_t win_end[16];
	int win_cnt;
	uint32_t win_len;
	dre_ask_fn ask;
	void *ask_arg;
	dre_codec_stats stats;
};

/* Rebuild a DATA frame into d->out: 0, DRE_EMISS, DRE_ECORRUPT, ... */
int dre_dec_ops(dre_dec *d, struct dre_qframe *f);
/* Rebuild a LEARN frame into d->out, storing its chunks. */
int dre_dec_learn_ops(dre_dec *d, struct dre_qframe *f);

#endif
