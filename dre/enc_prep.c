/*
 * enc_prep.c: cutting and fingerprinting a frame ahead, on two threads.
 *
 * When the data is new (most of the last frame went out as literals or
 * deltas), SHA-256 is the encoder's largest cost.  Before such a frame is
 * encoded, its chunk boundaries are found in one pass and the chunks hashed,
 * half of them by a helper thread.  The encoding loop then takes the chunk
 * and hash found for its position.  Cut points depend only on where a chunk
 * starts, so a precomputed entry is exactly what cutting at that position
 * would give; positions the loop reaches otherwise (after a run of chunks
 * matched from the store) are cut and hashed inline as before.  Repeated data
 * is left to the run fast path, which needs no hashing at all.
 */
#include <stdlib.h>

#include "enc_int.h"

#define PREP_MAX 4096 /* chunks per frame (1 MiB / 256 B); more are cut inline */

struct dre_prep_ch {
	size_t off;
	uint32_t len;
	uint8_t h[32];
};

/* The helper thread's job: hash chunks [split, n). */
static int prep_job(void *arg)
{
	dre_enc *e = arg;
	struct dre_prep *pr = &e->prep;
	for (size_t i = pr->split; i < pr->n; i++)
		if (dre_fp_sha256(pr->fp, pr->base + pr->ch[i].off, pr->ch[i].len, pr->ch[i].h))
			return DRE_EINVAL;
	return 0;
}

int dre_enc_prep_start(dre_enc *e)
{
	struct dre_prep *pr = &e->prep;
	if (!(pr->ch = malloc(PREP_MAX * sizeof *pr->ch)) || !(pr->fp = dre_fp_new()))
		return DRE_ENOMEM;
	return dre_worker_start(&pr->t, prep_job, e);
}

void dre_enc_prep_stop(dre_enc *e)
{
	struct dre_prep *pr = &e->prep;
	dre_worker_stop(&pr->t);
	dre_fp_free(pr->fp);
	free(pr->ch);
	memset(pr, 0, sizeof *pr);
}

int dre_enc_prep(dre_enc *e, const uint8_t *p, size_t n, int final)
{
	struct dre_prep *pr = &e->prep;
	pr->n = pr->next = 0;
	pr->base = p;
	if (!pr->t.running)
		return 0;
	size_t pos = 0, bytes = 0;
	while (pos < n && pos < e->o.frame_max && pr->n < PREP_MAX) {
		size_t c = dre_cdc_cut(&e->cdc, p + pos, n - pos, final);
		if (!c)
			break;
		pr->ch[pr->n++] = (struct dre_prep_ch){ .off = pos, .len = (uint32_t)c };
		pos += c;
	}
	/* split by bytes: the helper hashes the second half while we do the first */
	size_t half = pos / 2;
	for (pr->split = 0; pr->split < pr->n && bytes < half; pr->split++)
		bytes += pr->ch[pr->split].len;
	if (pr->split < pr->n)
		dre_worker_kick(&pr->t);
	for (size_t i = 0; i < pr->split; i++)
		if (dre_fp_sha256(e->fp, p + pr->ch[i].off, pr->ch[i].len, pr->ch[i].h))
			return DRE_EINVAL;
	return dre_worker_wait(&pr->t);
}

const uint8_t *dre_enc_prep_get(dre_enc *e, size_t pos, uint32_t *len)
{
	struct dre_prep *pr = &e->prep;
	while (pr->next < pr->n && pr->ch[pr->next].off < pos)
		pr->next++;
	if (pr->next == pr->n || pr->ch[pr->next].off != pos)
		return NULL;
	*len = pr->ch[pr->next].len;
	return pr->ch[pr->next].h;
}
