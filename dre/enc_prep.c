/*
 * enc_prep.c: cutting and fingerprinting a frame ahead, on two threads.
 *
 * When the data is new (most of the last frame went out as literals or
 * deltas), chunking and SHA-256 are the encoder's largest costs.  Before such
 * a frame is encoded, it is split into PREP_SEGS pieces, and we and the
 * helper thread take them in turn, each cutting its piece as if a chunk
 * started there and hashing the chunks.  Cut points depend only on where a
 * chunk starts, so every chunk found in a piece is exactly what cutting at its
 * start would give, and once the cuts carried over from the piece before
 * reach one of a piece's starts, the two sequences are the same from there on
 * (within a chunk or two, for all but uniform data: then we just go on
 * cutting alone).  Taking pieces in turn, rather than a half each, keeps both
 * processors busy when the helper gets less of its processor than we do (it
 * shares one with the emit and store threads): with halves we waited for it
 * 33-48 ms of a 210 ms encode of corpus (c) (2026-12-03).  Once every piece
 * is taken, the encoding loop goes through the chunks (index lookups, store
 * writes), waiting for the helper only when it reaches the piece the helper
 * still cuts.  The encoding loop takes the chunk and hash found for its
 * position; positions it reaches otherwise (after a run of chunks matched
 * from the store) are cut and hashed inline as before.  Repeated data is left
 * to the run fast path, which needs no hashing at all.
 */
#include <stdlib.h>

#include "enc_int.h"

#define PREP_MAX 4096          /* chunks per frame (1 MiB / 256 B); more are cut inline */
#define PREP_SEGS 8            /* pieces of a frame, taken in turn by us and the helper */
#define PREP_SEG_MAX (PREP_MAX / PREP_SEGS) /* chunks a piece holds; beyond, the join cuts them */
#define PREP_SPLIT (64u << 10) /* frames shorter than this are cut and hashed by us alone */

struct dre_prep_ch {
	size_t off;
	uint32_t len;
	uint8_t h[32];
};

/* A piece of the frame: cut from start while below lim; n chunks in its
 * slots; done (atomic) once they are there. */
struct dre_prep_seg {
	size_t start, lim, n;
	int done, err;
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
 * ch[*k] (up to cap) and hashing them with fp, DRE_FP_BATCH at a time;
 * stops early, returning the position reached, once pos is the start of
 * one of the `nstop` chunks in stop (sorted), which *j then indexes.  Sets
 * *err on a hashing failure. */
static size_t cut_hash(const dre_enc *e, dre_fp *fp, size_t pos, size_t lim, struct dre_prep_ch *ch, size_t *k,
		       size_t cap, const struct dre_prep_ch *stop, size_t nstop, size_t *j, int *err)
{
	const struct dre_prep *pr = &e->prep;
	size_t unhashed = *k;
	while (pos < pr->len && pos < lim && *k < cap) {
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

/* Take pieces until none is left, cutting and hashing each with fp (ours
 * or the helper's). */
static void take_pieces(dre_enc *e, dre_fp *fp)
{
	struct dre_prep *pr = &e->prep;
	size_t s;
	while ((s = __atomic_fetch_add(&pr->claim, 1, __ATOMIC_RELAXED)) < PREP_SEGS) {
		struct dre_prep_seg *g = &pr->seg[s];
		size_t j = 0;
		g->n = 0;
		cut_hash(e, fp, g->start, g->lim, pr->sch + s * PREP_SEG_MAX, &g->n, PREP_SEG_MAX, NULL, 0, &j,
			 &g->err);
		__atomic_store_n(&g->done, 1, __ATOMIC_RELEASE);
	}
}

/* The helper thread's job: take pieces of the frame beside us. */
static int prep_job(void *arg)
{
	take_pieces(arg, ((dre_enc *)arg)->prep.fp);
	return 0;
}

int dre_enc_prep_start(dre_enc *e)
{
	struct dre_prep *pr = &e->prep;
	if (!(pr->ch = malloc(PREP_MAX * sizeof *pr->ch)) || !(pr->sch = malloc(PREP_MAX * sizeof *pr->sch)) ||
	    !(pr->seg = calloc(PREP_SEGS, sizeof *pr->seg)) || !(pr->fp = dre_fp_new()))
		return DRE_ENOMEM;
	return dre_worker_start(&pr->t, prep_job, e);
}

void dre_enc_prep_stop(dre_enc *e)
{
	struct dre_prep *pr = &e->prep;
	dre_worker_stop(&pr->t);
	dre_fp_free(pr->fp);
	free(pr->ch);
	free(pr->sch);
	free(pr->seg);
	memset(pr, 0, sizeof *pr);
}

int dre_enc_prep(dre_enc *e, const uint8_t *p, size_t n, int final)
{
	struct dre_prep *pr = &e->prep;
	pr->n = pr->next = pr->pos = pr->merged = 0;
	pr->base = p;
	pr->len = n;
	pr->final = final;
	pr->pending = pr->kicked = pr->err = 0;
	if (!pr->t.running)
		return 0;
	size_t end = n < e->o.frame_max ? n : e->o.frame_max, j = 0;
	if (end < PREP_SPLIT) { /* alone */
		pr->pos = cut_hash(e, e->fp, 0, e->o.frame_max, pr->ch, &pr->n, PREP_MAX, NULL, 0, &j, &pr->err);
		return pr->err;
	}
	for (size_t s = 0; s < PREP_SEGS; s++)
		pr->seg[s] = (struct dre_prep_seg){ .start = s * end / PREP_SEGS,
						    .lim = s + 1 < PREP_SEGS ? (s + 1) * end / PREP_SEGS
									     : e->o.frame_max };
	pr->claim = 0;
	pr->pending = pr->kicked = 1;
	dre_worker_kick(&pr->t);
	take_pieces(e, e->fp);
	return 0;
}

/* Wait until the helper is done with this frame, if it has it; its error
 * becomes ours unless we have one. */
static void helper_done(struct dre_prep *pr)
{
	if (!pr->kicked)
		return;
	int rc = dre_worker_wait(&pr->t);
	pr->kicked = 0;
	if (rc && !pr->err)
		pr->err = rc;
}

/* Take the next piece into ch, waiting for the helper if it still cuts
 * it: go on cutting from where ch ends until those cuts meet the piece's,
 * and take the piece's chunks from there. */
static void prep_join(dre_enc *e)
{
	struct dre_prep *pr = &e->prep;
	size_t s = pr->merged++;
	const struct dre_prep_seg *g = &pr->seg[s];
	if (!__atomic_load_n(&g->done, __ATOMIC_ACQUIRE))
		helper_done(pr); /* every piece is done after this */
	pr->pending = pr->merged < PREP_SEGS;
	if (g->err && !pr->err)
		pr->err = g->err;
	if (pr->err) {
		pr->pending = 0;
		return;
	}
	const struct dre_prep_ch *sc = pr->sch + s * PREP_SEG_MAX;
	size_t j = 0, pos = cut_hash(e, e->fp, pr->pos, e->o.frame_max, pr->ch, &pr->n, PREP_MAX, sc, g->n, &j,
				     &pr->err);
	for (; j < g->n && sc[j].off == pos && pr->n < PREP_MAX; j++) {
		pr->ch[pr->n++] = sc[j];
		pos += sc[j].len;
	}
	pr->pos = pos;
}

int dre_enc_prep_end(dre_enc *e)
{
	e->prep.pending = 0;
	helper_done(&e->prep);
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
	pr->used += *len;
	return pr->ch[pr->next].h;
}
