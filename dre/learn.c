/* learn.c: answering a decoder's ask: resend a retained frame with every chunk
 * spelled out (LEARN frame), so the decoder stores what it lacked. */
#include "enc_int.h"

/* The retained frame with sequence number seq, or NULL. */
static struct dre_ret *ret_find(dre_enc *e, uint64_t seq)
{
	for (size_t i = 0; i < e->nret; i++) {
		struct dre_ret *r = &e->ret[(e->ret_head + i) % e->ret_cap];
		if (r->seq == seq)
			return r;
	}
	return NULL;
}

/* Append chunk c of a retained frame to the learn: its bytes to raw (the
 * frame as decoded, for the checksum), and an op naming it (HELD, HELDL: the
 * peer holds it) or spelling it out in the literal section; *rawpos walks the
 * retained bytes of chunks that were never stored. */
static int learn_chunk(dre_enc *e, const struct dre_ret *r, const struct dre_ret_ch *c, int full, dre_buf *raw,
		       size_t *rawpos)
{
	if (dre_buf_reserve(raw, c->len) || dre_buf_reserve(&e->ops, 1 + 10))
		return DRE_ENOMEM;
	uint8_t *dst = raw->p + raw->len;
	int held = 0;
	if (!c->tag) {
		if (*rawpos + c->len > r->rawlen)
			return DRE_ESTATE;
		memcpy(dst, r->raw + *rawpos, c->len);
		*rawpos += c->len;
	} else {
		dre_ent ent;
		/* the chunk may have been evicted since: then the stream cannot go on */
		if (!dre_store_find(e->st, c->tag, &ent) || ent.len != c->len || dre_store_read(e->st, &ent, dst))
			return DRE_EMISS;
		held = !full && e->o.version >= 3 && c->held && (!e->peer_bit || (ent.peers & e->peer_bit));
		if (!held)
			dre_store_mark(e->st, c->tag, e->peer_bit);
	}
	raw->len += c->len;
	uint8_t *op = e->ops.p + e->ops.len;
	if (held) {
		op[0] = c->linked ? DRE_OP_HELDL : DRE_OP_HELD;
		dre_put_u64(op + 1, c->tag);
		e->ops.len += 9;
		return 0;
	}
	op[0] = !c->tag ? DRE_OP_RAW : c->linked ? DRE_OP_CHUNKL : DRE_OP_CHUNK;
	e->ops.len += 1 + dre_put_varint(op + 1, c->len);
	return dre_buf_add(&e->lits, dst, c->len);
}

int dre_enc_learn(dre_enc *e, uint64_t seq, dre_out_fn out, void *arg)
{
	int full = (seq & DRE_ASK_FULL) != 0;
	seq &= ~DRE_ASK_FULL;
	struct dre_ret *r = e->o.retain ? ret_find(e, seq) : NULL;
	if (!r)
		return DRE_ESTATE;
	int rc = dre_enc_wait(e);
	if (rc)
		return rc;
	e->ops.len = e->lits.len = 0;
	e->litv = (dre_buf){ 0 };
	if (dre_buf_reserve(&e->ops, 24))
		return DRE_ENOMEM;
	dre_put_u64(e->ops.p, r->seq);
	dre_put_u64(e->ops.p + 8, r->cursor);
	dre_put_u64(e->ops.p + 16, r->prev);
	e->ops.len = 24;
	dre_buf raw = { 0 };
	size_t rawpos = 0;
	for (size_t i = 0; i < r->nch && !rc; i++)
		rc = learn_chunk(e, r, &r->ch[i], full, &raw, &rawpos);
	if (!rc) {
		e->stats.asks++;
		rc = dre_enc_submit(e, DRE_FT_LEARN, raw.len,
				    dre_frame_sum(e->o.version, raw.p, raw.len, e->seed ^ seq ^ 1ULL << 63), out, arg);
	}
	if (!rc)
		rc = dre_enc_wait(e); /* complete when we return (raw is freed) */
	dre_buf_free(&raw);
	return rc;
}
