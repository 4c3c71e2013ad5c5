/* enc_work.c: turning an encoder's ops and literals into a frame on the wire:
 * residual coding (skipped for incompressible literals), header, checksum.
 * Runs on the encoder's helper thread when it has one, so that coding frame N
 * overlaps cutting and fingerprinting frame N+1. */
#include <stdlib.h>

#include "enc_int.h"

/* Write the stream header once, before the first frame. */
static int put_stream_header(dre_enc *e, dre_out_fn out, void *arg)
{
	if (e->hdr_sent)
		return 0;
	uint8_t h[DRE_STREAM_HDR_LEN];
	memcpy(h, DRE_STREAM_MAGIC, 4);
	h[4] = (uint8_t)e->o.version;
	h[5] = 0;
	dre_put_u64(h + 6, e->seed);
	e->hdr_sent = 1;
	e->stats.out_bytes += sizeof h;
	return out(arg, h, sizeof h) ? DRE_EOUT : 0;
}

#define RAW_INLINE_MAX 4096 /* raw literal sections up to this go in the header's piece */

/* Start a frame in e->out (reserving `room` more bytes): its header up to
 * the lz kind, then a gap for the literal section's length (a varint of up to
 * 10 bytes), the sum and ops_len bytes of ops; *gap is where the gap begins,
 * and the literal section goes from e->out.len on. */
static int frame_begin(dre_enc *e, int type, size_t raw_n, size_t ops_len, size_t lit_len, int lz, size_t room,
		       size_t *gap)
{
	e->out.len = 0;
	if (dre_buf_reserve(&e->out, DRE_FRAME_HDR_MAX + ops_len + room))
		return DRE_ENOMEM;
	uint8_t *h = e->out.p;
	size_t n = 0;
	h[n++] = DRE_FRAME_MAGIC;
	h[n++] = (uint8_t)type;
	n += dre_put_varint(h + n, raw_n);
	n += dre_put_varint(h + n, ops_len);
	n += dre_put_varint(h + n, lit_len);
	h[n++] = (uint8_t)lz;
	*gap = n;
	e->out.len = n + 10 + 8 + ops_len;
	return 0;
}

/* Fill the gap frame_begin left with the literal section's length lz_n, the
 * sum and the ops, moving what follows down so that the frame is contiguous. */
static void frame_close(dre_enc *e, size_t gap, size_t lz_n, uint64_t sum, const dre_buf *ops)
{
	uint8_t v[10], *h = e->out.p;
	size_t vn = dre_put_varint(v, lz_n), body = gap + 10 + 8 + ops->len;
	memmove(h + gap + vn + 8 + ops->len, h + body, e->out.len - body);
	memcpy(h + gap, v, vn);
	dre_put_u64(h + gap + vn, sum);
	if (ops->len)
		memcpy(h + gap + vn + 8, ops->p, ops->len);
	e->out.len -= 10 - vn;
}

/* Assemble and emit one frame from ops and lits (see dre_proto.h).  Raw
 * literals beyond RAW_INLINE_MAX go out as a second piece, not copied. */
static int emit(dre_enc *e, int type, size_t raw_n, uint64_t sum, const dre_buf *ops, const dre_buf *lits,
		dre_out_fn out, void *arg)
{
	int rc = put_stream_header(e, out, arg);
	if (rc || !type)
		return rc;
	int lz = e->lzkind;
	if (lits->len < DRE_LZ_MIN || (lz != DRE_PLZ_NONE && dre_lz_incompressible(lits->p, lits->len)))
		lz = DRE_PLZ_NONE;
	size_t gap;
	if (frame_begin(e, type, raw_n, ops->len, lits->len, lz, (lz == DRE_PLZ_NONE ? 0 : lits->len) + 64, &gap))
		return DRE_ENOMEM;
	size_t body = e->out.len;
	if (lits->len && lz != DRE_PLZ_NONE && (rc = dre_lz_compress(e->lz, lits->p, lits->len, &e->out)))
		return rc;
	size_t lz_n = lz == DRE_PLZ_NONE ? lits->len : e->out.len - body;
	frame_close(e, gap, lz_n, sum, ops);
	e->stats.lz_in += lits->len;
	e->stats.lz_out += lz_n;
	e->stats.out_bytes += e->out.len + (lz == DRE_PLZ_NONE ? lits->len : 0);
	/* a few raw bytes go with the header: a second piece can cost the tunnel
	 * a record and a packet of its own */
	int apart = lz == DRE_PLZ_NONE && lits->len > RAW_INLINE_MAX;
	if (lz == DRE_PLZ_NONE && !apart && lits->len && dre_buf_add(&e->out, lits->p, lits->len))
		return DRE_ENOMEM;
	if (out(arg, e->out.p, e->out.len))
		return DRE_EOUT;
	return apart && out(arg, lits->p, lits->len) ? DRE_EOUT : 0;
}

int dre_enc_emit_lz_end(dre_enc *e, uint64_t sum, dre_out_fn out, void *arg)
{
	static const dre_buf no_ops = { 0 };
	size_t gap;
	if (frame_begin(e, DRE_FT_DATA, 0, 0, 0, e->lzkind, 0, &gap))
		return DRE_ENOMEM;
	size_t body = e->out.len;
	int rc = dre_lz_end(e->lz, &e->out);
	if (rc)
		return rc;
	size_t lz_n = e->out.len - body;
	frame_close(e, gap, lz_n, sum, &no_ops);
	e->stats.lz_out += lz_n;
	e->stats.out_bytes += e->out.len;
	return out(arg, e->out.p, e->out.len) ? DRE_EOUT : 0;
}

static void buf_swap(dre_buf *a, dre_buf *b)
{
	dre_buf t = *a;
	*a = *b;
	*b = t;
	a->len = 0;
}

int dre_enc_wait(dre_enc *e)
{
	int a = dre_worker_wait(&e->w.t), b = dre_worker_wait(&e->ws.t);
	e->fly_in = 0;
	return a ? a : b;
}

int dre_enc_submit(dre_enc *e, int type, size_t raw_n, uint64_t sum, dre_out_fn out, void *arg)
{
	return dre_enc_submit_src(e, type, raw_n, sum, NULL, out, arg);
}

/* Wait until a slot is free for the next frame: the frame DRE_ENC_DEPTH
 * back is done -- or every frame, when this one or one in flight lies in
 * e->in (enc_in.c keeps one such frame in place at most: in_busy).  Then
 * only the frames still pending, and this one, are in flight: fly_bytes. */
static int slot_wait(dre_enc *e)
{
	int in_buf = e->busy_p != NULL, rc;
	if (in_buf || e->fly_in)
		rc = dre_enc_wait(e);
	else if (!(rc = dre_worker_wait_below(&e->w.t, DRE_ENC_DEPTH)))
		rc = dre_worker_wait_below(&e->ws.t, DRE_ENC_DEPTH);
	if (rc)
		return rc;
	e->fly_in = in_buf;
	unsigned fly = dre_worker_pending(&e->ws.t);
	e->fly_bytes = e->cur_bytes;
	for (unsigned i = 1; i <= fly; i++)
		e->fly_bytes += e->slot[(e->put - i) % DRE_ENC_DEPTH].op_bytes;
	return 0;
}

int dre_enc_submit_src(dre_enc *e, int type, size_t raw_n, uint64_t sum, const uint8_t *src, dre_out_fn out,
		       void *arg)
{
	if (src && !e->w.t.running)
		sum = dre_frame_sum(e->o.version, src, raw_n, sum);
	if (!e->w.t.running) {
		int rc = emit(e, type, raw_n, sum, &e->ops, e->litv.p ? &e->litv : &e->lits, out, arg);
		e->litv = (dre_buf){ 0 };
		return rc;
	}
	int rc = slot_wait(e);
	if (rc)
		return rc;
	struct dre_eslot *s = &e->slot[e->put++ % DRE_ENC_DEPTH];
	s->litv = e->litv;
	e->litv = (dre_buf){ 0 };
	s->src = src;
	if (s->litv.p || src)
		e->view_busy = 1;
	/* frame N's coding and its store writes run on two threads while this
	 * one cuts and hashes frame N+1 */
	buf_swap(&e->ops, &s->ops);
	buf_swap(&e->lits, &s->lits);
	buf_swap(&e->eops, &s->eops);
	buf_swap(&e->edata, &s->edata);
	s->op_bytes = e->cur_bytes;
	e->cur_bytes = 0;
	dre_enc_pend_next(e);
	s->type = type;
	s->raw_n = raw_n;
	s->sum = sum;
	s->out = out;
	s->arg = arg;
	dre_worker_kick(&e->ws.t);
	dre_worker_kick(&e->w.t);
	return 0;
}

/* Helper thread jobs, each taking the slots in order: code and emit the
 * frame handed over; run its store operations. */
static int job_emit(void *arg)
{
	dre_enc *e = arg;
	struct dre_eslot *s = &e->slot[e->w.take++ % DRE_ENC_DEPTH];
	if (s->src) /* the seed in s->sum becomes the checksum */
		s->sum = dre_frame_sum(e->o.version, s->src, s->raw_n, s->sum);
	return emit(e, s->type, s->raw_n, s->sum, &s->ops, s->litv.p ? &s->litv : &s->lits, s->out, s->arg);
}

static int job_store(void *arg)
{
	dre_enc *e = arg;
	const struct dre_eslot *s = &e->slot[e->ws.take++ % DRE_ENC_DEPTH];
	return dre_enc_eops_run(e->st, &s->eops, &s->edata, s->litv.p ? &s->litv : &s->lits, e->peer_bit);
}

static void slot_free(struct dre_eslot *s)
{
	dre_buf_free(&s->ops);
	dre_buf_free(&s->lits);
	dre_buf_free(&s->eops);
	dre_buf_free(&s->edata);
}

int dre_enc_work_start(dre_enc *e)
{
	int rc = dre_worker_start(&e->ws.t, job_store, e);
	if (!rc && (rc = dre_worker_start(&e->w.t, job_emit, e)))
		dre_worker_stop(&e->ws.t);
	if (!rc && (rc = dre_enc_prep_start(e)))
		dre_enc_work_stop(e);
	e->prep_want = 1;
	return rc;
}

void dre_enc_work_stop(dre_enc *e)
{
	dre_worker_stop(&e->w.t);
	dre_worker_stop(&e->ws.t);
	for (int i = 0; i < DRE_ENC_DEPTH; i++)
		slot_free(&e->slot[i]);
	dre_enc_prep_stop(e);
}
