/* dec_lz.c: the decoder's literal sections, decompressed as frames are parsed
 * or, when the decoder is threaded, by a thread of their own: the decoder then
 * parses up to DRE_DEC_AHEAD frames ahead and hands them over in arrival order
 * (one compression stream spans the frames), so decompressing frame N+1
 * overlaps rebuilding frame N.  A frame is applied or dropped only once its
 * literals are there (dre_dec_lz_ready). */
#include <stdlib.h>

#include "dec_int.h"

/* Literal sections smaller than this are decompressed by the decoder's own
 * thread when the decompression thread is idle: handing one over costs about
 * as much as decompressing it (two wake-ups). */
#define LZ_INLINE_MAX (64u << 10)

/* Decompress f's literal section from lz into f->lits, setting f->lz_rc.
 * After a failure the stream's state is lost: later frames fail without
 * touching it. */
static void lz_run(dre_dec *d, struct dre_qframe *f, const uint8_t *lz)
{
	struct dre_dlz *l = &d->lzw;
	f->lz_rc = l->failed ? DRE_ELZ : dre_lz_decompress(d->lz[f->h.lz], lz, f->h.lz_len, f->lits, f->h.lit_len);
	if (f->lz_rc)
		l->failed = 1;
}

/* The thread's job: decompress the oldest frame handed over. */
static int lz_job(void *arg)
{
	dre_dec *d = arg;
	struct dre_dlz *l = &d->lzw;
	struct dre_qframe *f = l->ring[l->take++ % DRE_DEC_AHEAD];
	lz_run(d, f, f->lzd);
	return 0;
}

int dre_dec_lz_start(dre_dec *d)
{
	return dre_worker_start(&d->lzw.t, lz_job, d);
}

void dre_dec_lz_stop(dre_dec *d)
{
	dre_worker_stop(&d->lzw.t);
}

int dre_dec_lz_load(dre_dec *d, struct dre_qframe *f, const uint8_t *lz)
{
	const struct dre_fhdr *h = &f->h;
	struct dre_dlz *l = &d->lzw;
	f->lz_no = 0;
	f->lz_rc = 0;
	if (!h->lit_len && !h->lz_len)
		return 0;
	if (!d->lz[h->lz] && !(d->lz[h->lz] = dre_lz_new(h->lz, 0, 1)))
		return DRE_ENOMEM;
	if (!l->t.running)
		return f->lz_rc = dre_lz_decompress(d->lz[h->lz], lz, h->lz_len, f->lits, h->lit_len);
	if (h->lz == DRE_PLZ_NONE) {
		/* a copy, and no stream state: no order to keep */
		f->lz_rc = dre_lz_decompress(d->lz[h->lz], lz, h->lz_len, f->lits, h->lit_len);
		return 0;
	}
	if (h->lit_len < LZ_INLINE_MAX && !dre_worker_pending(&l->t)) {
		/* in order, as the thread is done; an error shows at the frame's turn */
		lz_run(d, f, lz);
		return 0;
	}
	if (f->lzd_cap < h->lz_len + 1) {
		free(f->lzd);
		f->lzd_cap = h->lz_len + 1;
		if (!(f->lzd = malloc(f->lzd_cap))) {
			f->lzd_cap = 0;
			return DRE_ENOMEM;
		}
	}
	memcpy(f->lzd, lz, h->lz_len);
	dre_worker_wait_below(&l->t, DRE_DEC_AHEAD); /* its job never fails */
	/* the ring entry after the last one handed over has been taken */
	l->ring[l->put % DRE_DEC_AHEAD] = f;
	f->lz_no = ++l->put;
	dre_worker_kick(&l->t);
	return 0;
}

int dre_dec_lz_ready(dre_dec *d, struct dre_qframe *f)
{
	if (f->lz_no) {
		/* done once no more than put - lz_no runs are pending */
		dre_worker_wait_below(&d->lzw.t, d->lzw.put - f->lz_no + 1);
		f->lz_no = 0;
	}
	return f->lz_rc;
}
