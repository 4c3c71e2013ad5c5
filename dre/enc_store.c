/* enc_store.c: the encoder's store mutations (store a new chunk, link and
 * refresh a referenced one).  Without a helper thread they happen at once.
 * With one, they are recorded in order with the frame and run on the helper
 * thread before that frame is coded and emitted, so store writes overlap the
 * next frame's chunking and hashing.  Chunks recorded but not yet stored stay
 * findable through a small pending table (current and in-flight frames), so a
 * repeat within that distance is still sent as a reference, if the file the
 * chunk lands in outlives the eviction horizon (a chunk the store held
 * already, in a file eviction drops soon, is not stored again: it goes with
 * that file). */
#include <stdlib.h>
#include <sys/types.h>

#include "enc_int.h"

#define PEND_SLOTS 4096 /* power of two; more new chunks than this per 3 frames lose only dedup */

struct dre_eop {
	uint32_t kind;  /* EOP_PUT or EOP_HIT */
	uint32_t len;   /* PUT: chunk length */
	uint64_t tag;   /* HIT: the referenced chunk */
	uint64_t prev;  /* the chunk output before it (0: none / already linked) */
	size_t data;    /* PUT: offset of the bytes in the data buffer (or the literals) */
	uint32_t lit;   /* PUT: 1 if the bytes are in the frame's literal section */
	uint8_t h[32];  /* PUT: SHA-256 */
};
enum { EOP_PUT = 1, EOP_HIT = 2 };

struct dre_pend {
	uint64_t tag;
	uint32_t len, gen;
	uint32_t file; /* the oldest file it may sit in once stored */
	uint8_t h[32];
};

/* Run recorded operations against the store, in order. */
int dre_enc_eops_run(dre_store *st, const dre_buf *eops, const dre_buf *data, const dre_buf *lits,
		     uint32_t peer_bit)
{
	const struct dre_eop *o = (const struct dre_eop *)eops->p;
	size_t n = eops->len / sizeof *o;
	for (size_t i = 0; i < n; i++, o++) {
		if (o->kind == EOP_HIT) {
			dre_store_hit(st, o->prev, o->tag);
			continue;
		}
		const uint8_t *p = (o->lit ? lits->p : data->p) + o->data;
		int rc = dre_store_add(st, o->h, p, o->len, o->prev, peer_bit, 0);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Remember a recorded chunk in the pending table; file: the oldest data file
 * it may sit in once stored.  A live entry for it keeps the older file: the
 * put recorded first decides where the chunk goes. */
static void pend_add(dre_enc *e, const uint8_t h[32], uint32_t len, uint32_t file)
{
	if (!e->pend && !(e->pend = calloc(PEND_SLOTS, sizeof *e->pend)))
		return;
	uint64_t tag = dre_fp_tag(h);
	for (size_t i = tag & (PEND_SLOTS - 1), k = 0; k < 16; k++, i = (i + 1) & (PEND_SLOTS - 1)) {
		struct dre_pend *p = &e->pend[i];
		int live = p->tag && p->gen + DRE_ENC_DEPTH >= e->pend_gen;
		if (live && p->tag != tag)
			continue; /* a live entry for another chunk */
		if (live && p->file < file)
			file = p->file;
		p->tag = tag;
		p->len = len;
		p->gen = e->pend_gen;
		p->file = file;
		memcpy(p->h, h, 32);
		return;
	}
}

int dre_enc_pending(const dre_enc *e, const uint8_t h[32], uint32_t len, uint32_t *file)
{
	if (!e->pend)
		return 0;
	uint64_t tag = dre_fp_tag(h);
	for (size_t i = tag & (PEND_SLOTS - 1), k = 0; k < 16; k++, i = (i + 1) & (PEND_SLOTS - 1)) {
		const struct dre_pend *p = &e->pend[i];
		if (p->tag == tag && p->gen + DRE_ENC_DEPTH >= e->pend_gen) {
			*file = p->file;
			return p->len == len && !memcmp(p->h, h, 32);
		}
		if (!p->tag)
			return 0;
	}
	return 0;
}

void dre_enc_pend_next(dre_enc *e)
{
	e->pend_gen++;
}

#define HORIZON_STEP (256u << 10) /* operation bytes between two horizon moves */

/* Move e->horizon for the operations recorded so far and HORIZON_STEP more. */
static void horizon_set(dre_enc *e)
{
	e->cur_allow = e->cur_bytes + HORIZON_STEP;
	e->horizon = dre_store_horizon(e->st, e->fly_bytes + e->cur_allow, &e->active);
}

void dre_enc_horizon_begin(dre_enc *e)
{
	e->cur_bytes = 0;
	if (e->ws.t.running)
		horizon_set(e);
	else /* operations run at once: the store is what the peer's will be */
		e->horizon = 0;
}

/* Count a recorded operation on len bytes; move the horizon when past what
 * it allowed for. */
static void horizon_note(dre_enc *e, uint32_t len)
{
	e->cur_bytes += DRE_STORE_OP_BYTES(len);
	if (e->cur_bytes > e->cur_allow)
		horizon_set(e);
}

int dre_enc_put(dre_enc *e, const uint8_t h[32], const uint8_t *p, uint32_t len, uint64_t prev,
		ssize_t lit_off, const dre_ent *old)
{
	if (!e->ws.t.running) /* the peer stores what it gets: mark it */
		return dre_store_add(e->st, h, p, len, prev, e->peer_bit, 0);
	/* a literal's bytes are in the frame's literal section already (which
	 * stays untouched until both helper jobs are done): no second copy */
	struct dre_eop o = { EOP_PUT, len, 0, prev, lit_off >= 0 ? (size_t)lit_off : e->edata.len,
			     lit_off >= 0, { 0 } };
	memcpy(o.h, h, 32);
	horizon_note(e, len);
	if ((lit_off < 0 && dre_buf_add(&e->edata, p, len)) || dre_buf_add(&e->eops, &o, sizeof o))
		return DRE_ENOMEM;
	/* stored already: storing it again leaves it in its file; else it is
	 * appended to the active file (this one, or a later one) */
	pend_add(e, h, len, old ? old->file : e->active);
	return 0;
}

int dre_enc_hit(dre_enc *e, uint64_t prev, uint64_t tag, uint32_t len, uint32_t file)
{
	if (!e->ws.t.running) { /* where it sits now: copied forward, maybe */
		dre_enc_retain_file(e, dre_store_hit(e->st, prev, tag));
		return 0;
	}
	dre_enc_retain_file(e, file);
	struct dre_eop o = { EOP_HIT, 0, tag, prev, 0, 0, { 0 } };
	horizon_note(e, len);
	return dre_buf_add(&e->eops, &o, sizeof o);
}
