/*
 * enc_prep.c: cutting and fingerprinting a frame ahead, on two threads.
 *
 * When the data is new (most of the last frame went out as literals or
 * deltas), chunking and SHA-256 are the encoder's largest costs.  Before such
 * a frame is encoded, it is cut and its chunks hashed in two halves at once:
 * we take the first half, the helper thread cuts from the middle of the frame
 * as if a chunk started there.  Cut points depend only on where a chunk
 * starts, so every chunk the helper finds is exactly what cutting at its
 * start would give, and once our cuts reach one of the helper's starts the
 * two sequences are the same from there on (within a chunk or two, for all
 * but uniform data: then we just go on cutting alone).  We do not wait for
 * the helper once our half is cut: the encoding loop goes through our chunks
 * (index lookups, store writes) meanwhile, and only waits where it needs
 * the helper's (the helper shares a processor with the emit and store
 * threads, so it tends to finish last).  The encoding loop
 * takes the chunk and hash found for its position; positions it reaches
 * otherwise (after a run of chunks matched from the store) are cut and hashed
 * inline as before.  Repeated data is left to the run fast path, which needs
 * no hashing at all.
 */
#include <stdlib.h>

#include "enc_int.h"

#define PREP_MAX 4096          /* chunks per frame (1 MiB / 256 B); more are cut inline */
#define PREP_SPLIT (64u << 10) /* frames shorter than this are cut and hashed by us alone */

struct dre_prep_ch {
	size_t off;
	uint32_t len;
	uint8_t h[32];
};

/* Hash ch[0..n) (n <= DRE_FP_BATCH) of base. */
static int hash_chunks(dre_fp *fp, const uint8_t *base, struct dre_prep_ch *ch, size_t n)
{
	struct dre_sha_job jobs[DRE_FP_BATCH];
	for (size_t i = 0; i < n; i++)
		jobs[i] = (struct dre_sha_job){ base + ch[i].off, ch[i].len, ch[i].h };
	return dre_fp_sha256_jobs(fp, jobs, n);
}

/* Cut chunks from pos while pos < lim (and the input lasts), appending to
 * ch[*k] (up to PREP_MAX) and hashing them with fp, DRE_FP_BATCH at a time;
 * stops early, returning the position reached, once pos is the start of
 * one of the `nstop` chunks in stop (sorted), which *j then indexes.  Sets
 * *err on a hashing failure. */
static size_t cut_hash(const dre_enc *e, dre_fp *fp, size_t pos, size_t lim, struct dre_prep_ch *ch, size_t *k,
		       const struct dre_prep_ch *stop, size_t nstop, size_t *j, int *err)
{
	const struct dre_prep *pr = &e->prep;
	size_t unhashed = *k;
	while (pos < pr->len && pos < lim && *k < PREP_MAX) {
		while (*j < nstop && stop[*j].off < pos)
			++*j;
		if (*j < nstop && stop[*j].off == pos)
			break;
		size_t c = dre_cdc_cut(&e->cdc, pr->base + pos, pr->len - pos, pr->final);
		if (!c)
			break;
		ch[(*k)++] = (struct dre_prep_ch){ .off = pos, .len = (uint32_t)c };
		pos += c;
		if (*k - unhashed == DRE_FP_BATCH) {
			if (hash_chunks(fp, pr->base, ch + unhashed, DRE_FP_BATCH))
				*err = DRE_EINVAL;
			unhashed = *k;
		}
	}
	if (*k > unhashed && hash_chunks(fp, pr->base, ch + unhashed, *k - unhashed))
		*err = DRE_EINVAL;
	return pos;
}

/* The helper thread's job: cut and hash from pr->from to the frame's end. */
static int prep_job(void *arg)
{
	dre_enc *e = arg;
	struct dre_prep *pr = &e->prep;
	size_t j = 0;
	int err = 0;
	pr->hn = 0;
	cut_hash(e, pr->fp, pr->from, e->o.frame_max, pr->hch, &pr->hn, NULL, 0, &j, &err);
	return err;
}

int dre_enc_prep_start(dre_enc *e)
{
	struct dre_prep *pr = &e->prep;
	if (!(pr->ch = malloc(PREP_MAX * sizeof *pr->ch)) || !(pr->hch = malloc(PREP_MAX * sizeof *pr->hch)) ||
	    !(pr->fp = dre_fp_new()))
		return DRE_ENOMEM;
	return dre_worker_start(&pr->t, prep_job, e);
}

void dre_enc_prep_stop(dre_enc *e)
{
	struct dre_prep *pr = &e->prep;
	dre_worker_stop(&pr->t);
	dre_fp_free(pr->fp);
	free(pr->ch);
	free(pr->hch);
	memset(pr, 0, sizeof *pr);
}

int dre_enc_prep(dre_enc *e, const uint8_t *p, size_t n, int final)
{
	struct dre_prep *pr = &e->prep;
	pr->n = pr->next = 0;
	pr->base = p;
	pr->len = n;
	pr->final = final;
	pr->pending = pr->err = 0;
	if (!pr->t.running)
		return 0;
	size_t end = n < e->o.frame_max ? n : e->o.frame_max, j = 0;
	pr->from = end >= PREP_SPLIT ? end / 2 : end;
	if (pr->from < end) {
		dre_worker_kick(&pr->t);
		pr->pending = 1;
	}
	pr->pos = cut_hash(e, e->fp, 0, pr->from, pr->ch, &pr->n, NULL, 0, &j, &pr->err);
	return pr->err ? dre_enc_prep_end(e) : 0;
}

/* Wait for the helper's half (the encoding loop has used ours meanwhile),
 * then go on cutting from where ours ended until our cuts meet the
 * helper's, and take the helper's from there. */
static void prep_join(dre_enc *e)
{
	struct dre_prep *pr = &e->prep;
	pr->pending = 0;
	int rc = dre_worker_wait(&pr->t);
	if (rc || pr->err) {
		pr->err = pr->err ? pr->err : rc;
		return;
	}
	size_t j = 0, pos = cut_hash(e, e->fp, pr->pos, e->o.frame_max, pr->ch, &pr->n, pr->hch, pr->hn, &j, &pr->err);
	for (; j < pr->hn && pr->hch[j].off == pos && pr->n < PREP_MAX; j++) {
		pr->ch[pr->n++] = pr->hch[j];
		pos += pr->hch[j].len;
	}
}

int dre_enc_prep_end(dre_enc *e)
{
	if (e->prep.pending)
		prep_join(e);
	return e->prep.err;
}

uint64_t dre_enc_prep_ahead(const dre_enc *e, size_t k)
{
	const struct dre_prep *pr = &e->prep;
	return pr->next + k < pr->n ? dre_fp_tag(pr->ch[pr->next + k].h) : 0;
}

const uint8_t *dre_enc_prep_get(dre_enc *e, size_t pos, uint32_t *len)
{
	struct dre_prep *pr = &e->prep;
	for (;;) {
		while (pr->next < pr->n && pr->ch[pr->next].off < pos)
			pr->next++;
		if (pr->next < pr->n || !pr->pending)
			break;
		prep_join(e);
	}
	if (pr->next == pr->n || pr->ch[pr->next].off != pos)
		return NULL;
	*len = pr->ch[pr->next].len;
	return pr->ch[pr->next].h;
}
