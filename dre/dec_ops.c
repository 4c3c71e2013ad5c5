/* dec_ops.c: executing a frame's ops against the store (see dre_proto.h). */
#include <stdlib.h>

#include "dec_int.h"

#define SKIP_LIMIT 64

struct opctx {
	dre_dec *d;
	struct dre_qframe *f;
	const uint8_t *op, *end;
	uint64_t lit;  /* literal bytes consumed */
	int stored;    /* output came from the store (REF, RUN, SKIP, DELTA) */
};

static int get_var(struct opctx *c, uint64_t *v)
{
	return dre_get_varint(&c->op, c->end, v) ? DRE_ECORRUPT : 0;
}

/* Append n literal bytes to the output. */
static int take_lits(struct opctx *c, uint64_t n)
{
	dre_dec *d = c->d;
	if (n > c->f->h.lit_len - c->lit || n > c->f->h.raw_len - d->out.len)
		return DRE_ECORRUPT;
	if (!c->f->inplace) /* else the literals are there, at out.len == lit */
		memcpy(d->out.p + d->out.len, c->f->lits + c->lit, n);
	c->lit += n;
	d->out.len += n;
	return 0;
}

void dre_dec_adopt_lits(dre_dec *d, struct dre_qframe *f)
{
	if (f->h.type != DRE_FT_DATA || f->h.lit_len != f->h.raw_len || d->out.len)
		return;
	const uint8_t *op = f->ops, *end = f->ops + f->h.ops_len;
	while (op < end) {
		int kind = *op++;
		uint64_t n;
		if ((kind != DRE_OP_LIT && kind != DRE_OP_RAW) || dre_get_varint(&op, end, &n))
			return; /* other ops, or malformed: rebuilt (and refused) as usual */
	}
	uint8_t *p = d->out.p;
	size_t cap = d->out.cap;
	d->out.p = f->lits;
	d->out.cap = f->lits_cap;
	f->lits = p;
	f->lits_cap = cap;
	f->inplace = 1;
}

/* The last len output bytes form a new chunk: have it fingerprinted and stored. */
static int new_chunk(dre_dec *d, uint32_t len)
{
	return dre_dec_sop(d, SOP_PUT, len, d->out.len - len);
}

/* Append stored chunk `tag` (*e: its entry) to the output. */
static int append_stored(struct opctx *c, uint64_t tag, dre_ent *e)
{
	dre_dec *d = c->d;
	/* a frame of no bytes has no buffer: no chunk fits (the read says how) */
	uint8_t *at = d->out.p ? d->out.p + d->out.len : NULL;
	int rc = dre_dec_read(d, tag, e, at, c->f->h.raw_len - d->out.len);
	if (rc == DRE_EMISS)
		d->lacks = 1; /* not stored, or its record is unreadable */
	if (rc)
		return rc;
	d->out.len += e->len;
	/* should the frame fail, each is read again, checked (dre_dec_verify_hits) */
	return d->ask ? dre_buf_add(&d->used, &tag, sizeof tag) : 0;
}

/* Append stored chunk `tag` to the output; it becomes the cursor. */
static int out_stored(struct opctx *c, uint64_t tag)
{
	dre_dec *d = c->d;
	dre_ent e;
	c->stored = 1; /* a miss stays a miss; a bad length is then a checksum failure */
	int rc = append_stored(c, tag, &e);
	if (rc)
		return rc;
	if (d->fs_on) /* while the chunk is in cache */
		dre_fsum_feed(&d->fs, d->out.p, d->out.len);
	d->stats.ref_bytes += e.len;
	d->cur = e;
	return dre_dec_sop(d, SOP_HIT, e.len, tag); /* len: what a copy forward appends */
}

/* The successor of chunk a in the sending peer's store where we know it
 * differs from ours (dre_store_peer_next), else 0. */
static uint64_t peer_next(dre_dec *d, uint64_t a)
{
	return d->peer_bit ? dre_store_peer_next(d->st, __builtin_ctz(d->peer_bit), a) : 0;
}

/* The chunk after the cursor, or 0. */
static uint64_t cursor_next(dre_dec *d)
{
	if (!d->cur.tag)
		return 0;
	uint64_t pn = peer_next(d, d->cur.tag);
	if (pn)
		return pn;
	return dre_dec_refresh(d, &d->cur) ? d->cur.next : 0;
}

static int op_run(struct opctx *c, uint64_t skip, uint64_t count)
{
	dre_dec *d = c->d;
	if (skip > SKIP_LIMIT)
		return DRE_ECORRUPT;
	for (uint64_t i = 0; i < skip; i++) {
		uint64_t t = cursor_next(d);
		if (!t || !dre_dec_find(d, t, &d->cur))
			return DRE_EMISS;
	}
	for (uint64_t i = 0; i < count; i++) {
		if (d->out.len >= c->f->h.raw_len)
			return DRE_ECORRUPT;
		uint64_t t = cursor_next(d);
		if (!t)
			return DRE_EMISS;
		int rc = out_stored(c, t);
		if (rc)
			return rc;
	}
	return 0;
}

/* AGAIN: the cursor chunk, count times more (stream version 3). */
static int op_again(struct opctx *c, uint64_t count)
{
	dre_dec *d = c->d;
	if (d->version < 3 || !count || count > c->f->h.raw_len)
		return DRE_ECORRUPT;
	if (!d->cur.tag)
		return DRE_EMISS;
	for (uint64_t i = 0; i < count; i++) {
		if (d->out.len >= c->f->h.raw_len)
			return DRE_ECORRUPT;
		int rc = out_stored(c, d->cur.tag);
		if (rc)
			return rc;
	}
	return 0;
}

/* Make the window cover [0, need) by reading further chunks of the chain. */
static int win_cover(dre_dec *d, uint64_t need)
{
	if (need > DRE_DELTA_WIN)
		return DRE_ECORRUPT;
	if (!d->win && !(d->win = malloc(DRE_DELTA_WIN + DRE_CHUNK_MAX)))
		return DRE_ENOMEM;
	while (d->win_len < need) {
		if (d->win_cnt == (int)(sizeof d->win_tag / sizeof d->win_tag[0]))
			return DRE_ECORRUPT;
		dre_ent e;
		uint64_t t;
		if (d->win_cnt == 0) {
			t = d->win_tag[0];
		} else if ((t = peer_next(d, d->win_tag[d->win_cnt - 1])) != 0) {
			/* the sender's successor */
		} else if (!dre_dec_find(d, d->win_tag[d->win_cnt - 1], &e) || !dre_dec_refresh(d, &e) ||
			   !(t = e.next)) {
			return DRE_EMISS;
		}
		int rc = t ? dre_dec_read(d, t, &e, d->win + d->win_len, DRE_DELTA_WIN - d->win_len) : DRE_EMISS;
		if (rc)
			return rc;
		d->win_tag[d->win_cnt] = t;
		d->win_len += e.len;
		d->win_end[d->win_cnt++] = d->win_len;
	}
	return 0;
}

/* DELTA/DELTAR: rebuild a chunk from copies out of the window starting at
 * chunk `start`, and literals. */
static int op_delta(struct opctx *c, uint64_t start)
{
	dre_dec *d = c->d;
	uint64_t len, n;
	int rc;
	if ((rc = get_var(c, &len)) || (rc = get_var(c, &n)))
		return rc;
	if (!len || len > DRE_CHUNK_MAX || n > DRE_DELTA_INS_MAX || len > c->f->h.raw_len - d->out.len)
		return DRE_ECORRUPT;
	if (!start)
		return DRE_EMISS;
	c->stored = 1;
	d->win_tag[0] = start;
	d->win_cnt = 0;
	d->win_len = 0;
	size_t begin = d->out.len;
	int64_t expect = 0, last_end = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t lit, clen, zz;
		if ((rc = get_var(c, &lit)) || (rc = get_var(c, &clen)) || (rc = get_var(c, &zz)))
			return rc;
		if (lit > len || clen > len || d->out.len - begin + lit + clen > len)
			return DRE_ECORRUPT;
		if ((rc = take_lits(c, lit)))
			return rc;
		int64_t off = expect + (int64_t)((zz >> 1) ^ (~(zz & 1) + 1));
		if (!clen)
			continue;
		if (off < 0 || (uint64_t)off + clen > DRE_DELTA_WIN)
			return DRE_ECORRUPT;
		if ((rc = win_cover(d, (uint64_t)off + clen)))
			return rc;
		memcpy(d->out.p + d->out.len, d->win + off, clen);
		d->out.len += clen;
		expect = last_end = off + (int64_t)clen;
	}
	if (d->out.len - begin != len)
		return DRE_ECORRUPT;
	for (int i = 0; i < d->win_cnt && last_end; i++) {
		if ((uint64_t)last_end <= d->win_end[i]) {
			dre_dec_find(d, d->win_tag[i], &d->cur);
			break;
		}
	}
	d->stats.delta_bytes += len;
	return new_chunk(d, (uint32_t)len);
}

/* One op of a DATA frame. */
static int op_one(struct opctx *c)
{
	dre_dec *d = c->d;
	uint64_t a, b;
	int rc;
	switch (*c->op++) {
	case DRE_OP_LIT:
	case DRE_OP_RAW: {
		int stored = c->op[-1] == DRE_OP_LIT;
		if ((rc = get_var(c, &a)))
			return rc;
		if (!a || a > DRE_CHUNK_MAX)
			return DRE_ECORRUPT;
		if ((rc = take_lits(c, a)))
			return rc;
		d->stats.lit_bytes += a;
		if (!stored)
			return dre_dec_sop(d, SOP_BREAK, 0, 0);
		return new_chunk(d, (uint32_t)a);
	}
	case DRE_OP_REF:
		if (c->end - c->op < 8)
			return DRE_ECORRUPT;
		a = dre_get_u64(c->op);
		c->op += 8;
		return out_stored(c, a);
	case DRE_OP_RUN:
		return get_var(c, &a) ? DRE_ECORRUPT : op_run(c, 0, a);
	case DRE_OP_SKIP:
		return get_var(c, &a) || get_var(c, &b) ? DRE_ECORRUPT : op_run(c, a, b);
	case DRE_OP_AGAIN:
		return get_var(c, &a) ? DRE_ECORRUPT : op_again(c, a);
	case DRE_OP_DELTA:
		return op_delta(c, d->cur.tag);
	case DRE_OP_DELTAR:
		if (c->end - c->op < 8)
			return DRE_ECORRUPT;
		a = dre_get_u64(c->op);
		c->op += 8;
		return op_delta(c, a);
	}
	return DRE_ECORRUPT;
}

/* Chunk successors are first-come on each side, so with concurrent streams
 * the two stores can disagree on what follows a chunk: a RUN or a delta window
 * then yields chunks of other lengths, and the frame's lengths stop adding up.
 * Once the frame has used the store, such an inconsistency is reported as a
 * checksum failure (askable: the LEARN carries the real bytes), not as a
 * corrupt stream. */
int dre_dec_ops(dre_dec *d, struct dre_qframe *f)
{
	struct opctx c = { d, f, f->ops, f->ops + f->h.ops_len, 0, 0 };
	int rc = 0;
	while (c.op < c.end && !rc)
		rc = op_one(&c);
	if (!rc && (d->out.len != f->h.raw_len || c.lit != f->h.lit_len))
		rc = DRE_ECORRUPT;
	return rc == DRE_ECORRUPT && c.stored ? DRE_ECHECKSUM : rc;
}

/* HELD/HELDL of a LEARN (stream version 3): the named chunk from our store,
 * appended to the output; *len: its length.  DRE_EMISS if we lack it (the
 * caller asks again for every chunk's bytes). */
static int learn_held(struct opctx *c, uint64_t *len)
{
	dre_dec *d = c->d;
	dre_ent e;
	if (d->version < 3 || c->end - c->op < 8)
		return DRE_ECORRUPT;
	uint64_t tag = dre_get_u64(c->op);
	c->op += 8;
	int rc = append_stored(c, tag, &e);
	if (!rc) {
		*len = e.len;
		c->d->stats.ref_bytes += e.len; /* it crossed by name */
	}
	return rc;
}

int dre_dec_learn_ops(dre_dec *d, struct dre_qframe *f)
{
	struct opctx c = { d, f, f->ops + 24, f->ops + f->h.ops_len, 0, 0 };
	uint64_t cursor = dre_get_u64(f->ops + 8);
	/* the sender's chunk before this frame, whatever a failed attempt left */
	int prc = dre_dec_sop(d, SOP_PREV, 0, dre_get_u64(f->ops + 16));
	if (prc)
		return prc;
	while (c.op < c.end) {
		int op = *c.op++, rc;
		uint64_t len;
		if (op == DRE_OP_HELD || op == DRE_OP_HELDL) {
			if ((rc = learn_held(&c, &len)))
				return rc;
		} else if ((op != DRE_OP_CHUNK && op != DRE_OP_CHUNKL && op != DRE_OP_RAW) || get_var(&c, &len) ||
			   !len || len > DRE_CHUNK_MAX || take_lits(&c, len)) {
			return DRE_ECORRUPT;
		} else {
			d->stats.lit_bytes += len;
		}
		if (op == DRE_OP_RAW)
			rc = dre_dec_sop(d, SOP_BREAK, 0, 0);
		else
			rc = dre_dec_sop(d, op == DRE_OP_CHUNKL || op == DRE_OP_HELDL ? SOP_PUTL : SOP_PUT, (uint32_t)len,
					 d->out.len - len);
		if (rc)
			return rc;
	}
	if (d->out.len != f->h.raw_len || c.lit != f->h.lit_len)
		return DRE_ECORRUPT;
	memset(&d->cur, 0, sizeof d->cur);
	if (cursor)
		dre_dec_find(d, cursor, &d->cur);
	return 0;
}
