/* learn.c: the frames an encoder keeps until the decoder acknowledges them
 * (when retaining), and answering a decoder's ask: resend a retained frame
 * with every chunk spelled out (LEARN frame), so the decoder stores what it
 * lacked. */
#include <stdlib.h>

#include "enc_int.h"

/* ---- the ring of retained frames ---- */

static void ret_frame_free(dre_enc *e, struct dre_ret *r)
{
	dre_store_unpin(e->st, r->pin);
	free(r->ch);
	free(r->raw);
	memset(r, 0, sizeof *r);
}

/* Every retained frame and the ring. */
void dre_enc_ret_free(dre_enc *e)
{
	dre_enc_retain_begin(e); /* the pin of a frame being built */
	for (size_t i = 0; i < e->nret; i++)
		ret_frame_free(e, &e->ret[(e->ret_head + i) % e->ret_cap]);
	free(e->ret);
	e->ret = NULL;
	e->nret = e->ret_cap = e->ret_head = 0;
}

void dre_enc_retain_begin(dre_enc *e)
{
	e->cur_ch.len = e->cur_raw.len = 0;
	dre_store_unpin(e->st, e->pin_held);
	e->pin_floor = e->pin_held = DRE_PIN_NONE;
}

void dre_enc_retain_file(dre_enc *e, uint32_t file)
{
	if (!e->o.retain)
		return;
	if (file == DRE_PIN_NONE) { /* lands in the active file at the time, or a later one */
		if (e->pin_floor != DRE_PIN_NONE)
			return; /* no older than any file pinned already */
		if (!e->ws.t.running) {
			e->pin_floor = e->pin_held = dre_store_pin_newest(e->st);
			return;
		}
		file = e->active;
	}
	if (file >= e->pin_floor)
		return;
	uint32_t held = dre_store_pin(e->st, file); /* before letting go of the later one */
	dre_store_unpin(e->st, e->pin_held);
	e->pin_floor = file;
	e->pin_held = held;
}

/* Note a chunk of the frame being built (enc_int.h). */
int dre_enc_retain_chunk(dre_enc *e, uint64_t tag, const uint8_t *p, uint32_t len, int held)
{
	if (!e->o.retain)
		return 0;
	/* a reference was just made (enc_hit set the cursor): note where it sits */
	int at = tag && held && e->cur.tag == tag;
	struct dre_ret_ch c = { tag, len, tag && e->last_cont, tag && held, at ? e->cur.file : DRE_PIN_NONE,
				at ? e->cur.off : 0 };
	if (dre_buf_add(&e->cur_ch, &c, sizeof c))
		return DRE_ENOMEM;
	return tag ? 0 : dre_buf_add(&e->cur_raw, p, len);
}

/* Double the ring of retained frames (most streams retain a few). */
static int ret_grow(dre_enc *e)
{
	size_t cap = e->ret_cap ? 2 * e->ret_cap : 16;
	struct dre_ret *n = calloc(cap, sizeof *n);
	if (!n)
		return DRE_ENOMEM;
	for (size_t i = 0; i < e->nret; i++)
		n[i] = e->ret[(e->ret_head + i) % e->ret_cap];
	free(e->ret);
	e->ret = n;
	e->ret_cap = cap;
	e->ret_head = 0;
	return 0;
}

/* Keep the built frame's chunk list for learns; the oldest goes when full. */
int dre_enc_retain_frame(dre_enc *e)
{
	if (!e->o.retain)
		return 0;
	if (e->nret == e->ret_cap && e->ret_cap < DRE_RETAIN_MAX && ret_grow(e))
		return DRE_ENOMEM;
	if (e->nret == e->ret_cap) {
		ret_frame_free(e, &e->ret[e->ret_head]);
		e->ret_head = (e->ret_head + 1) % e->ret_cap;
		e->nret--;
	}
	struct dre_ret *r = &e->ret[(e->ret_head + e->nret++) % e->ret_cap];
	r->seq = e->seq;
	r->cursor = e->cur.tag;
	r->prev = e->frame_prev;
	r->nch = e->cur_ch.len / sizeof(struct dre_ret_ch);
	r->ch = (struct dre_ret_ch *)e->cur_ch.p;
	r->raw = e->cur_raw.p;
	r->rawlen = e->cur_raw.len;
	r->pin = e->pin_held; /* the frame keeps the pin taken while it was built */
	e->pin_floor = e->pin_held = DRE_PIN_NONE;
	memset(&e->cur_ch, 0, sizeof e->cur_ch);
	memset(&e->cur_raw, 0, sizeof e->cur_raw);
	return 0;
}

/* The decoder has frames up to seq: they need no learn any more. */
void dre_enc_ack(dre_enc *e, uint64_t seq)
{
	while (e->nret && e->ret[e->ret_head].seq <= seq) {
		ret_frame_free(e, &e->ret[e->ret_head]);
		e->ret_head = (e->ret_head + 1) % e->ret_cap;
		e->nret--;
	}
}

/* ---- learns ---- */


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
/* The record of chunk ent went bad on disk (the store dropped it, maybe
 * before the ask): its payload may still be right (the damage in its
 * header), as the frame's compare found.  If the payload at its place (a
 * file the frame's pin keeps) hashes to its tag, take it into dst and store
 * it anew; 0 then, else DRE_EMISS. */
static int learn_salvage(dre_enc *e, const dre_ent *ent, uint8_t *dst)
{
	uint8_t h[32];
	if (dre_store_read_raw(e->st, ent, dst) || dre_fp_sha256(e->fp, dst, ent->len, h) ||
	    dre_fp_tag(h) != ent->tag)
		return DRE_EMISS;
	return dre_store_add(e->st, h, dst, ent->len, 0, 0, 0) < 0 ? DRE_EMISS : 0;
}

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
		dre_ent ent, was = { .tag = c->tag, .file = c->file, .off = c->off, .len = c->len };
		/* the chunk may have been evicted since: then the stream cannot go on */
		int found = dre_store_find(e->st, c->tag, &ent) && ent.len == c->len;
		if (found ? dre_store_read(e->st, &ent, dst) && learn_salvage(e, &ent, dst)
			  : c->file == DRE_PIN_NONE || learn_salvage(e, &was, dst))
			return DRE_EMISS;
		/* (salvaged from where it sat: stored anew, the peer not known to hold it) */
		held = found && !full && e->o.version >= 3 && c->held && (!e->peer_bit || (ent.peers & e->peer_bit));
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
