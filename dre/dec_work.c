/* dec_work.c: the decoder's store operations (fingerprint and store new
 * chunks, link and refresh referenced ones), recorded while a frame is rebuilt
 * and run afterwards, in order: by a helper thread when the decoder has one
 * (so hashing and store writes overlap the next frame), else inline.  A lookup
 * that misses first makes everything pending take effect, so deferring never
 * changes what a frame decodes to. */
#include <stdlib.h>

#include "dec_int.h"

int dre_dec_sop(dre_dec *d, uint32_t kind, uint32_t len, uint64_t arg)
{
	struct dre_sop op = { kind, len, arg };
	if (kind == SOP_HIT || kind == SOP_PUT || kind == SOP_PUTL) /* a hit may copy the chunk forward */
		d->cur_bytes += DRE_STORE_OP_BYTES(len);
	return dre_buf_add(&d->sops, &op, sizeof op);
}

static int sop_is_put(const struct dre_sop *o)
{
	return o->kind == SOP_PUT || o->kind == SOP_PUTL;
}

/* Hash the chunks of the next (up to) DRE_FP_BATCH puts from ops[i] on into
 * h[0..]; returns the index just past the last of them. */
static size_t sops_hash(dre_fp *fp, const struct dre_sop *ops, size_t i, size_t n, const uint8_t *data,
			uint8_t h[DRE_FP_BATCH][32], int *err)
{
	struct dre_sha_job jobs[DRE_FP_BATCH];
	size_t k = 0;
	for (; i < n && k < DRE_FP_BATCH; i++) {
		if (sop_is_put(&ops[i])) {
			jobs[k] = (struct dre_sha_job){ data + ops[i].arg, ops[i].len, h[k] };
			k++;
		}
	}
	*err = dre_fp_sha256_jobs(fp, jobs, k);
	return i;
}

/* Run op o (a PUT's fingerprint in hp) with `prev` before it.  With links 0
 * (a failed frame) it stores and marks chunks only; with undo, a successor it
 * changes is journaled there first. */
static int sop_apply(dre_store *st, const struct dre_sop *o, const uint8_t *hp, uint64_t tag, uint64_t prev,
		     const uint8_t *data, uint32_t peer_bit, int links, dre_buf *undo)
{
	struct dre_undo u = { prev, 0, 0 };
	int journal = links && undo && dre_store_next_of(st, prev, &u.next);
	if (sop_is_put(o)) {
		/* what the peer sent, it holds */
		int rc = dre_store_add(st, hp, data + o->arg, o->len, links ? prev : 0, peer_bit,
				       o->kind == SOP_PUTL);
		if (rc < 0)
			return rc;
	} else {
		if (links)
			dre_store_hit(st, prev, tag);
		dre_store_mark(st, tag, peer_bit);
	}
	u.now = u.next;
	if (journal && dre_store_next_of(st, prev, &u.now) && u.now != u.next && dre_buf_add(undo, &u, sizeof u))
		return DRE_ENOMEM;
	return 0;
}

/* Run ops[0..n) against data; *prev carries the chain between calls.  links
 * and undo: as for sop_apply. */
static int sops_run(dre_store *st, dre_fp *fp, uint64_t *prev, const struct dre_sop *ops, size_t n,
		    const uint8_t *data, uint32_t peer_bit, int links, dre_buf *undo)
{
	uint8_t h[DRE_FP_BATCH][32];
	size_t hashed = 0, next_h = 0; /* puts before ops[hashed] are in h[], from h[next_h] */
	for (size_t i = 0; i < n; i++) {
		const struct dre_sop *o = &ops[i];
		if (o->kind == SOP_BREAK || o->kind == SOP_PREV) {
			*prev = o->kind == SOP_PREV ? o->arg : 0;
			continue;
		}
		uint64_t tag = o->arg;
		if (sop_is_put(o)) {
			int err = 0;
			if (i >= hashed) {
				hashed = sops_hash(fp, ops, i, n, data, h, &err);
				next_h = 0;
			}
			if (err)
				return DRE_EINVAL;
			const uint8_t *hp = h[next_h++];
			tag = dre_fp_tag(hp);
			int rc = sop_apply(st, o, hp, tag, *prev, data, peer_bit, links, undo);
			if (rc < 0)
				return rc;
		} else {
			int rc = sop_apply(st, o, NULL, tag, *prev, data, peer_bit, links, undo);
			if (rc < 0)
				return rc;
		}
		*prev = tag;
	}
	return 0;
}

/* Check a rebuilt frame against its checksum, then hand it out. */
static int verify_out(const struct dre_vjob *vj, const dre_buf *data)
{
	if (dre_frame_sum(vj->version, data->p, data->len, vj->seed) != vj->want)
		return DRE_ECHECKSUM;
	return data->len && vj->out(vj->arg, data->p, data->len) < 0 ? DRE_EOUT : 0;
}

/* The helper thread's job: take the oldest slot in flight, check and output
 * its frame, then run its store operations.  Once a frame failed (here, or
 * before: the worker's error, which only this thread sets), nothing more goes
 * out and the frames still queued behind it store their chunks without links
 * (see dre_dec_discard): their order continues a frame that failed. */
static int work_job(void *arg)
{
	dre_dec *d = arg;
	struct dre_dwork *w = &d->w;
	struct dre_dslot *s = &w->slot[w->take++ % DRE_DEC_DEPTH];
	int failed = w->t.err != 0;
	int rc = s->verify && !failed ? verify_out(&s->vj, &s->data) : 0;
	int links = !failed && !rc;
	if (!links)
		d->prev = 0;
	int src = sops_run(d->st, w->fp, &d->prev, (struct dre_sop *)s->ops.p, s->ops.len / sizeof(struct dre_sop),
			   s->data.p, d->peer_bit, links, NULL);
	return rc ? rc : src;
}

int dre_dec_work_start(dre_dec *d)
{
	struct dre_dwork *w = &d->w;
	if (w->t.running)
		return 0;
	if (!w->fp && !(w->fp = dre_fp_new()))
		return DRE_ENOMEM;
	w->put = w->take = 0;
	return dre_worker_start(&w->t, work_job, d);
}

void dre_dec_work_stop(dre_dec *d)
{
	struct dre_dwork *w = &d->w;
	dre_worker_stop(&w->t);
	dre_fp_free(w->fp);
	w->fp = NULL;
	for (int i = 0; i < DRE_DEC_DEPTH; i++) {
		dre_buf_free(&w->slot[i].ops);
		dre_buf_free(&w->slot[i].data);
	}
}

int dre_dec_sync(dre_dec *d)
{
	int rc = dre_worker_wait(&d->w.t);
	if (rc)
		return rc;
	size_t n = d->sops.len / sizeof(struct dre_sop);
	if (n > d->sops_done)
		rc = sops_run(d->st, d->fp, &d->prev, (struct dre_sop *)d->sops.p + d->sops_done,
			      n - d->sops_done, d->out.p, d->peer_bit, 1, d->in_frame ? &d->undo : NULL);
	d->sops_done = n;
	d->cur_bytes = d->fly_bytes = d->hz_upto = 0; /* all ran */
	return rc;
}

int dre_dec_discard(dre_dec *d)
{
	int rc = dre_worker_wait(&d->w.t);
	size_t n = d->sops.len / sizeof(struct dre_sop);
	uint64_t prev = 0;
	int src = n > d->sops_done ? sops_run(d->st, d->fp, &prev, (struct dre_sop *)d->sops.p + d->sops_done,
					      n - d->sops_done, d->out.p, d->peer_bit, 0, NULL)
				   : 0;
	const struct dre_undo *u = (const struct dre_undo *)d->undo.p;
	for (size_t i = d->undo.len / sizeof *u; i-- > 0;)
		dre_store_set_next(d->st, u[i].tag, u[i].now, u[i].next);
	d->undo.len = 0;
	d->sops.len = d->sops_done = 0;
	d->cur_bytes = d->fly_bytes = d->hz_upto = 0;
	d->prev = 0; /* what follows does not continue a frame that failed */
	return rc ? rc : src;
}

void dre_dec_verify_hits(dre_dec *d)
{
	const uint64_t *tag = (const uint64_t *)d->used.p;
	size_t n = d->used.len / sizeof *tag;
	uint8_t *buf = NULL;
	for (size_t i = 0; i < n; i++) {
		dre_ent e;
		if (!dre_store_find(d->st, tag[i], &e))
			continue;
		if (!buf && !(buf = malloc(DRE_CHUNK_MAX)))
			return;
		dre_store_read(d->st, &e, buf); /* checks the payload; a bad record leaves the index */
	}
	free(buf);
	d->used.len = 0;
}

/* Swap two buffers; a keeps b's memory, emptied. */
static void buf_swap(dre_buf *a, dre_buf *b)
{
	dre_buf t = *a;
	*a = *b;
	*b = t;
	a->len = 0;
}

int dre_dec_frame_done(dre_dec *d, const struct dre_vjob *vj)
{
	struct dre_dwork *w = &d->w;
	if (!w->t.running || d->sops_done) {
		/* no helper, or this frame's operations began here (a sync
		 * emptied the ring): finish here, after the frames in flight */
		int rc = dre_worker_wait(&w->t);
		if (rc)
			return rc;
		rc = vj ? verify_out(vj, &d->out) : 0;
		if (rc) {
			dre_dec_discard(d); /* the frame's failure is what to report */
			return rc;
		}
		rc = dre_dec_sync(d);
		d->sops.len = d->sops_done = 0;
		d->undo.len = 0;
		return rc;
	}
	int rc = dre_worker_wait_below(&w->t, DRE_DEC_DEPTH);
	if (rc)
		return rc;
	/* what may not have run yet: this frame's operations, and those of
	 * the slots still pending (the last ones handed over) */
	unsigned fly = dre_worker_pending(&w->t);
	d->fly_bytes = d->cur_bytes;
	for (unsigned i = 1; i <= fly; i++)
		d->fly_bytes += w->slot[(w->put - i) % DRE_DEC_DEPTH].op_bytes;
	d->hz_upto = 0; /* look the horizon up again */
	/* the slot after the last one handed over has finished its run */
	struct dre_dslot *s = &w->slot[w->put++ % DRE_DEC_DEPTH];
	s->op_bytes = d->cur_bytes;
	d->cur_bytes = 0;
	s->verify = vj != NULL;
	if (vj)
		s->vj = *vj;
	buf_swap(&d->sops, &s->ops);
	buf_swap(&d->out, &s->data);
	dre_worker_kick(&w->t);
	return 0;
}

int dre_dec_find(dre_dec *d, uint64_t tag, dre_ent *e)
{
	if (dre_store_find(d->st, tag, e))
		return 1;
	if (dre_dec_sync(d))
		return 0;
	return dre_store_find(d->st, tag, e);
}

int dre_dec_read(dre_dec *d, uint64_t tag, dre_ent *e, uint8_t *buf, size_t max)
{
	for (int again = 0;; again = 1) {
		int rc = dre_store_read_tag(d->st, tag, max, buf, &d->rw, e);
		/* not stored yet, or found before the helper thread evicted its
		 * file: this frame's pending operations may store the chunk (again) */
		if (rc != DRE_EMISS || again || (e->tag && !(d->cur_bytes + d->fly_bytes)) || dre_dec_sync(d))
			return rc;
	}
}

#define HZ_STEP (256u << 10) /* operation bytes between two horizon lookups */

/* May the store operations not run yet evict e's data file? */
static int doomed(dre_dec *d, const dre_ent *e)
{
	uint64_t pending = d->cur_bytes + d->fly_bytes;
	if (!pending)
		return 0;
	if (pending > d->hz_upto) {
		uint32_t active;
		d->hz_upto = pending + HZ_STEP;
		d->hz = dre_store_horizon(d->st, d->hz_upto, &active);
	}
	return e->file < d->hz;
}

int dre_dec_refresh(dre_dec *d, dre_ent *e)
{
	dre_ent n;
	if (!doomed(d, e)) {
		if (e->next)
			return 1;
		if (dre_store_find(d->st, e->tag, &n) && n.next) {
			*e = n;
			return 1;
		}
	}
	if (dre_dec_sync(d) || !dre_store_find(d->st, e->tag, &n))
		return 0;
	*e = n;
	return 1;
}
