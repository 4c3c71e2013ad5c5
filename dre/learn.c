/* learn.c: answering a decoder's ask: resend a retained frame with every chunk
 * spelled out (LEARN frame), so the decoder stores what it lacked. */
#include "enc_int.h"

#define RETAIN_MAX 4096

/* The retained frame with sequence number seq, or NULL. */
static struct dre_ret *ret_find(dre_enc *e, uint64_t seq)
{
	for (size_t i = 0; i < e->nret; i++) {
		struct dre_ret *r = &e->ret[(e->ret_head + i) % RETAIN_MAX];
		if (r->seq == seq)
			return r;
	}
	return NULL;
}

int dre_enc_learn(dre_enc *e, uint64_t seq, dre_out_fn out, void *arg)
{
	struct dre_ret *r = e->o.retain ? ret_find(e, seq) : NULL;
	if (!r)
		return DRE_ESTATE;
	int rc = dre_enc_wait(e);
	if (rc)
		return rc;
	e->ops.len = e->lits.len = 0;
	e->litv = (dre_buf){ 0 };
	if (dre_buf_reserve(&e->ops, 24 + r->nch * 11))
		return DRE_ENOMEM;
	dre_put_u64(e->ops.p, r->seq);
	dre_put_u64(e->ops.p + 8, r->cursor);
	dre_put_u64(e->ops.p + 16, r->prev);
	e->ops.len = 24;
	size_t rawpos = 0;
	for (size_t i = 0; i < r->nch; i++) {
		struct dre_ret_ch *c = &r->ch[i];
		e->ops.p[e->ops.len++] = !c->tag ? DRE_OP_RAW : c->linked ? DRE_OP_CHUNKL : DRE_OP_CHUNK;
		e->ops.len += dre_put_varint(e->ops.p + e->ops.len, c->len);
		if (dre_buf_reserve(&e->lits, c->len))
			return DRE_ENOMEM;
		if (!c->tag) {
			if (rawpos + c->len > r->rawlen)
				return DRE_ESTATE;
			memcpy(e->lits.p + e->lits.len, r->raw + rawpos, c->len);
			rawpos += c->len;
		} else {
			dre_ent ent;
			/* the chunk may have been evicted since: then the stream cannot go on */
			if (!dre_store_find(e->st, c->tag, &ent) || ent.len != c->len ||
			    dre_store_read(e->st, &ent, e->lits.p + e->lits.len))
				return DRE_EMISS;
			dre_store_mark(e->st, c->tag, e->peer_bit);
		}
		e->lits.len += c->len;
	}
	e->stats.asks++;
	rc = dre_enc_submit(e, DRE_FT_LEARN, e->lits.len, dre_frame_sum(e->o.version, e->lits.p, e->lits.len, e->seed ^ seq ^ 1ULL << 63),
			    out, arg);
	return rc ? rc : dre_enc_wait(e); /* complete when we return */
}
