/*
 * enc.c: the per-stream DRE encoder.  Input is cut into chunks; each chunk is
 * sent as a run continuation (RUN/SKIP: it is the chunk that followed the
 * cursor last time), a reference (REF), a delta against the data that followed
 * the cursor (DELTA), or a literal (LIT).  Frames collect about frame_max input
 * bytes; the literal section of each frame goes through the residual coder.
 * See include/dre_proto.h for the format.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "enc_int.h"

#define FRAME_DEFAULT (1u << 20)
#define CHUNK_MIN 2048
#define CHUNK_AVG 4096
#define CHUNK_MAX 16384
#define STORE_MIN 64      /* shorter pieces (flushed tails) are sent raw, never stored */
#define SKIP_MAX 3        /* how far past the cursor a run may resume */
#define WIN_CHUNKS 4      /* chunks in a delta base window */
#define DELTA_GIVEUP 2    /* failed deltas in a row before waiting for the next hit */
#define LOOKUP_AHEAD 2      /* chunks between an index prefetch and its lookup */
#define LZ_WORKERS_MAX 4    /* zstd worker threads of a threaded encoder */

static int pick_lz(const dre_enc_opts *o)
{
	switch (o->lz) {
	case DRE_LZ_NONE: return DRE_PLZ_NONE;
	case DRE_LZ_LZ4: return DRE_PLZ_LZ4;
	case DRE_LZ_ZSTD: return DRE_PLZ_ZSTD;
	}
	/* auto: zstd while the link is the bottleneck (up to ~200 Mbit/s one core
	 * keeps up with zstd -3), lz4 beyond */
	return o->link_bps && o->link_bps > 200000000ULL ? DRE_PLZ_LZ4 : DRE_PLZ_ZSTD;
}

/* The zstd level: as configured, else by link speed.  Measured on a source
 * tar: level 9 compresses at ~50 MB/s per core and cuts 15 % off level 3's
 * output; a link under 20 Mbit/s (2.5 MB/s) leaves that CPU idle anyway.
 * Level 16 (btopt, with 4 MiB tables: lz.c) cuts another 7 % off level 9's
 * output of the benchmark's reference file (324,477 vs 348,824 bytes) at
 * 5-9 MB/s of input per core: it keeps a link of up to 4 Mbit/s full while
 * the data compresses up to 10x (the reference file over a T1: 2 MB/s of
 * input, under half a core). */
static int pick_level(const dre_enc_opts *o)
{
	if (o->level)
		return o->level;
	if (o->lz == DRE_LZ_AUTO && o->link_bps && o->link_bps <= DRE_LINK_SLOW_BPS)
		return 16;
	if (o->lz == DRE_LZ_AUTO && o->link_bps && o->link_bps <= DRE_LINK_MID_BPS)
		return 9;
	return 3;
}

/* A threaded encoder is a bulk run that owns the machine: its residual is
 * coded on every processor (lz.c), at the price of a slightly larger output
 * (1.3 % on the benchmark's corpus (a), for 1.15x its encode speed), unless a
 * link of up to DRE_LINK_MID_BPS is named: the link is the bottleneck there, and
 * the output's size what counts. */
static void lz_workers(dre_enc *e)
{
	if (!e->o.threaded || (e->o.link_bps && e->o.link_bps <= DRE_LINK_MID_BPS))
		return; /* the proxy's streams come here too: no processor count for them */
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	dre_lz_set_workers(e->lz, n > LZ_WORKERS_MAX ? LZ_WORKERS_MAX : (int)n);
}

dre_enc *dre_enc_new(dre_store *st, const dre_enc_opts *o)
{
	dre_enc_opts def = { 0 };
	if (!o)
		o = &def;
	if (!st && !o->no_dedup)
		return NULL;
	if (o->version && (o->version < DRE_STREAM_VERSION_MIN || o->version > DRE_STREAM_VERSION))
		return NULL;
	dre_enc *e = calloc(1, sizeof *e);
	if (!e)
		return NULL;
	e->st = st;
	e->o = *o;
	e->pin_floor = e->pin_held = DRE_PIN_NONE;
	if (!e->o.frame_max)
		e->o.frame_max = FRAME_DEFAULT;
	if (!e->o.version)
		e->o.version = DRE_STREAM_VERSION;
	if (e->o.frame_max > DRE_FRAME_RAW_MAX / 2)
		e->o.frame_max = DRE_FRAME_RAW_MAX / 2;
	e->lzkind = pick_lz(o);
	e->peer_bit = o->peer > 0 && o->peer <= DRE_PEER_SLOTS ? 1u << (o->peer - 1) : 0;
	if (getrandom(&e->seed, sizeof e->seed, 0) != sizeof e->seed)
		e->seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid();
	if (dre_cdc_init(&e->cdc, o->chunk_min ? o->chunk_min : CHUNK_MIN, o->chunk_avg ? o->chunk_avg : CHUNK_AVG,
			 o->chunk_max ? o->chunk_max : CHUNK_MAX) || !(e->fp = dre_fp_new()) ||
	    !(e->lz = dre_lz_new(e->lzkind, pick_level(o), 0)) || (o->threaded && dre_enc_work_start(e))) {
		dre_enc_free(e);
		return NULL;
	}
	lz_workers(e);
	return e;
}

const char *dre_enc_lz_name(const dre_enc *e, char *buf, size_t len)
{
	int n = dre_lz_workers(e->lz);
	if (e->lzkind == DRE_PLZ_ZSTD && n)
		snprintf(buf, len, "zstd %d on %d threads", pick_level(&e->o), n);
	else if (e->lzkind == DRE_PLZ_ZSTD)
		snprintf(buf, len, "zstd %d", pick_level(&e->o));
	else
		snprintf(buf, len, "%s", e->lzkind == DRE_PLZ_LZ4 ? "lz4" : "no LZ");
	return buf;
}

void dre_enc_free(dre_enc *e)
{
	if (!e)
		return;
	dre_enc_work_stop(e);
	dre_enc_ret_free(e);
	dre_rwin_free(&e->rw);
	dre_fp_free(e->fp);
	dre_lz_free(e->lz);
	dre_buf_free(&e->in);
	dre_buf_free(&e->in_alt);
	dre_buf_free(&e->ops);
	dre_buf_free(&e->lits);
	dre_buf_free(&e->out);
	dre_buf_free(&e->cur_ch);
	dre_buf_free(&e->eops);
	dre_buf_free(&e->edata);
	free(e->pend);
	dre_buf_free(&e->cur_raw);
	free(e->win);
	free(e->ins);
	free(e);
}

/* Does the peer hold this stored chunk (as far as we know), and will it
 * still when it reads this frame (not in a file eviction may drop first)? */
static int peer_has(const dre_enc *e, const dre_ent *ent)
{
	return (!e->peer_bit || (ent->peers & e->peer_bit)) && ent->file >= e->horizon;
}

/* The delta base window (also dre_store_match's scratch), allocated at first
 * use and given back by dre_enc_rest; NULL when out of memory (the stream
 * then loses only dedup). */
static uint8_t *enc_win(dre_enc *e)
{
	if (!e->win)
		e->win = malloc(DRE_DELTA_WIN);
	return e->win;
}

/* dre_store_match for a chunk the peer will still hold (peer_has). */
static int enc_match(dre_enc *e, uint64_t tag, const uint8_t *p, size_t max, dre_ent *ent)
{
	uint8_t *w = enc_win(e);
	return w && dre_store_match(e->st, tag, p, max, e->peer_bit, w, &e->rw, ent) && ent->file >= e->horizon;
}

/* Append an op code and up to two varints to the op list. */
static int op2(dre_enc *e, int op, int nargs, uint64_t a, uint64_t b)
{
	if (dre_buf_reserve(&e->ops, 1 + 20))
		return DRE_ENOMEM;
	uint8_t *p = e->ops.p + e->ops.len;
	size_t n = 0;
	p[n++] = (uint8_t)op;
	if (nargs > 0)
		n += dre_put_varint(p + n, a);
	if (nargs > 1)
		n += dre_put_varint(p + n, b);
	e->ops.len += n;
	return 0;
}

/* Emit the pending run of chunks or repeats of the cursor chunk, if any
 * (at most one of the two is pending). */
static int run_flush(dre_enc *e)
{
	int rc = 0;
	if (e->again)
		rc = op2(e, DRE_OP_AGAIN, 1, e->again, 0);
	else if (e->run)
		rc = e->run_skip ? op2(e, DRE_OP_SKIP, 2, e->run_skip, e->run) : op2(e, DRE_OP_RUN, 1, e->run, 0);
	e->again = e->run = e->run_skip = 0;
	return rc;
}

/* The literal section's length so far. */
static size_t lit_len(const dre_enc *e)
{
	return e->litv.p ? e->litv.len : e->lits.len;
}

/* Turn a literal view into a copy in e->lits (before appending anything
 * that is not the next input byte). */
static int lit_own(dre_enc *e)
{
	if (!e->litv.p)
		return 0;
	int rc = dre_buf_add(&e->lits, e->litv.p, e->litv.len);
	e->litv = (dre_buf){ 0 };
	return rc;
}

/* Append input bytes p[0..len) to the literal section: as a view while the
 * section is one run of input (no copy), else copied. */
static int lit_add(dre_enc *e, const uint8_t *p, size_t len)
{
	dre_buf *v = &e->litv;
	if (e->view_ok && !e->lits.len && (!v->p || p == v->p + v->len)) {
		if (!v->p)
			v->p = (uint8_t *)p; /* read only: cap 0 marks a view */
		v->len += len;
		return 0;
	}
	return lit_own(e) ? DRE_ENOMEM : dre_buf_add(&e->lits, p, len);
}

/* Does the peer's store possibly follow chunk `tag` with another chunk than
 * ours (a fork, alt.c)?  Never for an untracked peer (lock-step stores). */
static int fork_at(dre_enc *e, uint64_t tag)
{
	return e->peer_bit && dre_store_forked(e->st, tag);
}

/* Is `tag` the chunk k steps after the cursor (k < SKIP_MAX+1), through no
 * fork and from a cursor the peer still holds (past the horizon)?  Returns
 * k or -1. */
static int run_position(dre_enc *e, uint64_t tag)
{
	if ((!e->cur.next && !dre_store_find(e->st, e->cur.tag, &e->cur)) || fork_at(e, e->cur.tag) ||
	    e->cur.file < e->horizon) /* the peer may look the cursor up again and find it gone */
		return -1;
	uint64_t t = e->cur.next;
	for (int k = 0; t && k <= SKIP_MAX; k++) {
		if (t == tag)
			return k;
		dre_ent n;
		if (fork_at(e, t) || !dre_store_find(e->st, t, &n) || n.file < e->horizon)
			return -1; /* the peer walks through it */
		t = n.next;
	}
	return -1;
}

/* Chunk b follows one whose bytes just went to a tracked peer: the peer's
 * store links them (first-come), so where ours holds another successor,
 * note the peer's, which our decoder then follows for that peer's streams. */
static void note_peer_link(dre_enc *e, uint64_t b)
{
	uint64_t next;
	if (e->peer_bit && e->prev_sent && e->prev && e->prev != b && dre_store_next_of(e->st, e->prev, &next) &&
	    next && next != b)
		dre_store_peer_next_set(e->st, __builtin_ctz(e->peer_bit), e->prev, b);
}

/* A stored chunk matched (tag with full hash h): extend or start a run, or
 * a repeat of the cursor chunk (stream version 3), or REF.  Every reference
 * records a store operation (link, refresh) in stream order, as the decoder
 * runs one for every chunk it references: two stores fed the same streams
 * then evict the same chunks (wanopt dre keeps them in lock step). */
static int enc_hit(dre_enc *e, const dre_ent *ent, int k, uint32_t len)
{
	int rc = 0;
	if (k != 0 && e->o.version >= 3 && e->cur.tag && ent->tag == e->cur.tag) {
		if (!e->again)
			rc = run_flush(e);
		e->again++;
	} else if (k >= 0) {
		if (e->run && k == 0) {
			e->run++;
		} else {
			rc = run_flush(e);
			e->run_skip = (uint32_t)k;
			e->run = 1;
		}
	} else {
		uint8_t b[9];
		rc = run_flush(e);
		b[0] = DRE_OP_REF;
		dre_put_u64(b + 1, ent->tag);
		if (!rc)
			rc = dre_buf_add(&e->ops, b, 9);
	}
	int cont = k == 0 && e->prev == e->cur.tag; /* prev already links to it */
	int nolink = cont || e->prev == ent->tag;   /* or is it (never its own successor) */
	e->last_cont = cont;
	e->cur = *ent;
	e->delta_fails = 0;
	e->st_ref += len;
	if (!rc) /* link after prev, refresh */
		rc = dre_enc_hit(e, nolink ? 0 : e->prev, ent->tag, len, ent->file);
	note_peer_link(e, ent->tag);
	e->prev = ent->tag;
	e->prev_sent = 0;
	return rc;
}

/* Gather the base window: the cursor chunk and those following it, up to
 * WIN_CHUNKS and up to a fork.
 * Returns its length (0 if nothing usable). */
static size_t win_fill(dre_enc *e)
{
	size_t n = 0;
	uint64_t t = enc_win(e) ? e->cur.tag : 0;
	for (int i = 0; t && i < WIN_CHUNKS; i++) {
		dre_ent w;
		if (!dre_store_find(e->st, t, &w) || !peer_has(e, &w) || n + w.len > DRE_DELTA_WIN ||
		    dre_store_read_fast(e->st, &w, e->win + n, &e->rw))
			break;
		e->win_tag[i] = t;
		e->win_end[i] = (uint32_t)(n + w.len);
		e->win_n = i + 1;
		n += w.len;
		t = fork_at(e, t) ? 0 : w.next; /* the peer's window may go on elsewhere */
	}
	return n;
}

/* Try a delta of p against the window at the cursor; 1 if sent, 0 if not. */
static int enc_delta(dre_enc *e, const uint8_t *p, uint32_t len)
{
	if (!e->cur.tag || e->delta_fails >= DELTA_GIVEUP)
		return 0;
	e->win_n = 0;
	size_t wn = win_fill(e);
	if (wn && (lit_own(e) || (!e->ins && !(e->ins = malloc(DRE_DELTA_INS_MAX * sizeof *e->ins)))))
		return DRE_ENOMEM;
	size_t lits0 = e->lits.len;
	int n = wn ? dre_delta_encode(e->win, wn, p, len, e->ins, DRE_DELTA_INS_MAX, &e->lits) : -1;
	if (n < 0) {
		e->lits.len = lits0;
		e->delta_fails++;
		return 0;
	}
	if (run_flush(e) || op2(e, DRE_OP_DELTA, 2, len, (uint64_t)n) || dre_buf_reserve(&e->ops, (size_t)n * 30))
		return DRE_ENOMEM;
	uint64_t expect = 0, last_end = 0;
	for (int i = 0; i < n; i++) {
		int64_t d = (int64_t)e->ins[i].copy_off - (int64_t)expect;
		uint64_t zz = ((uint64_t)d << 1) ^ (uint64_t)(d >> 63);
		uint8_t *q = e->ops.p + e->ops.len;
		size_t k = dre_put_varint(q, e->ins[i].lit);
		k += dre_put_varint(q + k, e->ins[i].copy_len);
		k += dre_put_varint(q + k, zz);
		e->ops.len += k;
		if (e->ins[i].copy_len) {
			expect = e->ins[i].copy_off + e->ins[i].copy_len;
			last_end = expect;
		}
	}
	/* the cursor moves to the window chunk holding the last copied byte */
	for (int i = 0; i < e->win_n; i++) {
		if (last_end && last_end <= e->win_end[i]) {
			dre_ent c;
			if (dre_store_find(e->st, e->win_tag[i], &c))
				e->cur = c;
			break;
		}
	}
	e->delta_fails = 0;
	e->st_delta += len;
	return 1;
}

#define ALT_SEED 0x616c74ULL /* the key of a chunk in alt.c's table */

#define PREFIX_SEED 0x707265ULL /* the seed of a chunk's prefix key in alt.c's table */

/* The key under which alt.c's table holds a chunk that began where a run
 * broke: a checksum of its first cdc.min bytes, which every chunk but a
 * stream's last holds, and which tell apart the chunks that follow a common
 * block (a license header, padding) even where their first bytes are alike.
 * 0 if p[0..n) is shorter.  A twin of the bytes' checksum key: a collision
 * only costs a compare. */
static uint64_t prefix_key(const dre_enc *e, const uint8_t *p, size_t n)
{
	return n >= e->cdc.min ? dre_fsum(p, e->cdc.min, PREFIX_SEED) : 0;
}

#define PREFIX_TWIN 0x74776eULL /* key ^ this: the chunk noted under key before */

/* A run broke before p[0..len), stored as chunk `tag`: remember it by its
 * prefix key, so that the next time the run fast path compares it there
 * before cutting anything; the chunk noted there before stays the second
 * candidate (variants of a file share their first bytes). */
static void note_break(dre_enc *e, const uint8_t *p, uint32_t len, uint64_t tag)
{
	uint64_t k = prefix_key(e, p, len), old;
	if (!k)
		return;
	if ((old = dre_store_alt_get(e->st, k)) && old != tag)
		dre_store_alt_set(e->st, k ^ PREFIX_TWIN, old);
	dre_store_alt_set(e->st, k, tag);
}

/* A run broke before p[0..len): if an earlier repeat found these bytes the
 * slow way (alt.c), encode them as that chunk, compared byte for byte, with
 * no hashing.  1 if done (*rc set), 0 if not; *key: the bytes' key. */
static int enc_alt(dre_enc *e, const uint8_t *p, uint32_t len, uint64_t *key, int *rc)
{
	dre_ent ent;
	*key = dre_fsum(p, len, ALT_SEED);
	uint64_t tag = dre_store_alt_get(e->st, *key);
	if (!tag || len > DRE_DELTA_WIN || !enc_match(e, tag, p, len, &ent) ||
	    ent.len != len)
		return 0;
	int k = run_position(e, tag);
	if (k < 0)
		note_break(e, p, len, tag);
	*rc = enc_hit(e, &ent, k, len);
	if (!*rc)
		*rc = dre_enc_retain_chunk(e, tag, p, len, 1);
	return 1;
}

/* Encode one chunk p[0..len). */
static int enc_chunk(dre_enc *e, const uint8_t *p, uint32_t len, const uint8_t *hash)
{
	int rc;
	e->last_cont = 0;
	if (e->o.no_dedup || len < STORE_MIN) {
		if ((rc = run_flush(e)) || (rc = op2(e, DRE_OP_RAW, 1, len, 0)) || (rc = lit_add(e, p, len)))
			return rc;
		e->prev = 0;
		e->st_lit += len;
		return dre_enc_retain_chunk(e, 0, p, len, 0);
	}
	uint8_t h[32];
	dre_ent ent;
	uint64_t key = 0;
	if (!hash && e->cur.tag && enc_alt(e, p, len, &key, &rc))
		return rc;
	if (hash)
		memcpy(h, hash, 32);
	else if (dre_fp_sha256(e->fp, p, len, h))
		return DRE_EINVAL;
	uint64_t tag = dre_fp_tag(h);
	e->stats.hashed_bytes += len;
	int found = dre_store_find_ahead(e->st, tag, e->ahead, &ent);
	if (found && ent.len == len && peer_has(e, &ent) && dre_store_same(e->st, &ent, h)) {
		int k = e->cur.tag ? run_position(e, tag) : -1;
		if (k < 0 && key) /* the run broke here: find this chunk faster next time */
			dre_store_alt_set(e->st, key, tag);
		if (k < 0)
			note_break(e, p, len, tag);
		if ((rc = enc_hit(e, &ent, k, len)))
			return rc;
		return dre_enc_retain_chunk(e, tag, p, len, 1);
	}
	uint32_t pfile;
	if (e->horizon != UINT32_MAX && dre_enc_pending(e, h, len, &pfile) && pfile >= e->horizon &&
	    !(found && ent.file < e->horizon)) {
		/* sent moments ago, not stored yet (helper thread): a reference,
		 * unless the store may drop it before the peer reads this */
		dre_ent pe = { .tag = tag, .len = len, .file = pfile };
		if ((rc = enc_hit(e, &pe, -1, len)))
			return rc;
		return dre_enc_retain_chunk(e, tag, p, len, 0);
	}
	rc = enc_delta(e, p, len);
	if (rc < 0)
		return rc;
	ssize_t lit_off = -1;
	if (rc == 0) {
		lit_off = (ssize_t)lit_len(e);
		if ((rc = run_flush(e)) || (rc = op2(e, DRE_OP_LIT, 1, len, 0)) || (rc = lit_add(e, p, len)))
			return rc;
		e->st_lit += len;
	}
	dre_enc_retain_file(e, found ? ent.file : DRE_PIN_NONE); /* a chunk stored already stays put */
	if ((rc = dre_enc_put(e, h, p, len, e->prev, lit_off, found ? &ent : NULL)))
		return rc;
	note_peer_link(e, tag);
	e->prev = tag;
	e->prev_sent = 1;
	return dre_enc_retain_chunk(e, tag, p, len, 0);
}

/* Where a run just broke (or a stream begins), the chunk noted under the
 * next bytes' prefix key (note_break), if they are exactly it and it ends at a
 * content cut (not one a stream's end made: chunks stay aligned); 1 if so,
 * with *ent. */
static int prefix_match(dre_enc *e, const uint8_t *p, size_t max, dre_ent *ent, uint32_t *hint)
{
	uint64_t key = e->prev == e->cur.tag ? prefix_key(e, p, max) : 0, tag;
	dre_ent c;
	for (int i = 0; key && i < 2; i++, key ^= PREFIX_TWIN) {
		if (!(tag = dre_store_alt_get(e->st, key)))
			continue;
		if (enc_match(e, tag, p, max, ent) && dre_cdc_cuts_at(&e->cdc, p, ent->len))
			return 1;
		if (!*hint && dre_store_find(e->st, tag, &c) && c.len <= max && dre_cdc_cuts_at(&e->cdc, p, c.len))
			*hint = c.len;
	}
	return 0;
}

/* Where a run broke and the chunk noted under the next bytes' first ones
 * (prefix_match) was another of the same length, ending at a content cut
 * there (copies of one file, followed by different data): the chunk that
 * ends there, found as enc_alt finds it, but with no cutting.  Its length if
 * so (*rc set), else 0. */
static size_t alt_at(dre_enc *e, const uint8_t *p, uint32_t len, int *rc)
{
	uint64_t key;
	return e->cur.tag && enc_alt(e, p, len, &key, rc) ? len : 0;
}

/* Run fast path: if the next bytes are exactly the chunk after the cursor,
 * or (stream version 3, right after the cursor chunk was output) the cursor
 * chunk again, or where a run breaks the chunk noted there before
 * (prefix_match), compared with the stored bytes, send them as part of the
 * run (a REF after a fork or break) or repeat with no chunking or hashing.
 * Returns the chunk length consumed, 0 if not. */
static size_t run_fast(dre_enc *e, const uint8_t *p, size_t n, uint32_t *hint)
{
	size_t max = n < DRE_DELTA_WIN ? n : DRE_DELTA_WIN;
	dre_ent ent;
	int k = -1, cur = e->cur.tag && (e->cur.next || dre_store_find(e->st, e->cur.tag, &e->cur));
	if (cur && e->cur.next && enc_match(e, e->cur.next, p, max, &ent))
		k = fork_at(e, e->cur.tag) || e->cur.file < e->horizon ? -1 : 0; /* as in run_position */
	else if (cur && e->o.version >= 3 && e->prev == e->cur.tag && enc_match(e, e->cur.tag, p, max, &ent))
		k = -1;
	else if (prefix_match(e, p, max, &ent, hint))
		k = e->cur.tag ? run_position(e, ent.tag) : -1; /* a few chunks on (SKIP), or a REF */
	else
		return 0;
	if (enc_hit(e, &ent, k, ent.len) || dre_enc_retain_chunk(e, ent.tag, p, ent.len, 1))
		return 0;
	return ent.len;
}

int dre_enc_frame(dre_enc *e, const uint8_t *p, size_t n, int final, size_t *used, dre_out_fn out, void *arg)
{
	size_t pos = 0;
	uint64_t fresh = e->st_lit + e->st_delta;
	int rc = 0;
	/* the checksum (version 2) is taken chunk by chunk, while each is in
	 * cache; a frame left in place for a helper thread leaves it to that */
	dre_fsum_state fs;
	int src_sum = e->view_ok && e->w.t.running;
	int fs_on = !src_sum && e->o.version >= 2;
	if (fs_on)
		dre_fsum_begin(&fs, e->seed ^ (e->seq + 1)); /* the frame's number once sent */
	e->ops.len = e->lits.len = 0;
	e->litv = (dre_buf){ 0 };
	dre_enc_retain_begin(e);
	e->frame_prev = e->prev;
	e->prep.n = 0;
	dre_enc_horizon_begin(e);
	if (!e->o.no_dedup && e->prep_want && (rc = dre_enc_prep(e, p, n, final)))
		return rc;
	size_t lit_max = e->o.frame_lit_max ? e->o.frame_lit_max : SIZE_MAX;
	while (pos < n && pos < e->o.frame_max && e->st_lit + e->st_delta - fresh < lit_max && !rc) {
		uint32_t hint = 0;
		size_t c = e->o.no_dedup ? 0 : run_fast(e, p + pos, n - pos, &hint);
		if (!c && hint && !e->prep.n && !e->prep.pending && (c = alt_at(e, p + pos, hint, &rc)) && rc)
			break;
		if (c) {
			pos += c;
			if (fs_on)
				dre_fsum_feed(&fs, p, pos);
			continue;
		}
		uint32_t plen = 0;
		const uint8_t *h = e->prep.n || e->prep.pending ? dre_enc_prep_get(e, pos, &plen) : NULL;
		c = h ? plen
		      : e->o.no_dedup ? (n - pos < e->cdc.max ? n - pos : e->cdc.max)
				      : dre_cdc_cut(&e->cdc, p + pos, n - pos, final);
		if (!c)
			break;
		if (!e->o.no_dedup)
			e->stats.cut_bytes += c;
		/* new data: each lookup misses the cache; load a later one's meanwhile */
		e->ahead = h ? dre_enc_prep_ahead(e, LOOKUP_AHEAD) : 0;
		rc = enc_chunk(e, p + pos, (uint32_t)c, h);
		pos += c;
		if (fs_on)
			dre_fsum_feed(&fs, p, pos);
	}
	int prc = dre_enc_prep_end(e); /* the helper is done with this frame */
	if (!rc)
		rc = prc;
	/* hash the next frame ahead if most of this one was new data */
	e->prep_want = 2 * (e->st_lit + e->st_delta - fresh) > pos;
	if (!rc)
		rc = run_flush(e);
	if (rc || !pos)
		return rc;
	e->seq++;
	e->stats.frames++;
	e->stats.in_bytes += pos;
	*used = pos;
	if ((rc = dre_enc_retain_frame(e)))
		return rc;
	if (e->view_ok) { /* the input stays put while a helper reads it (see in_compact) */
		uintptr_t a = (uintptr_t)p, b = (uintptr_t)e->in.p;
		e->busy_p = e->in.p && a >= b && a < b + e->in.cap ? e->in.p : NULL;
		e->busy_off = e->busy_p ? a - b : 0;
	}
	if (src_sum)
		return dre_enc_submit_src(e, DRE_FT_DATA, pos, e->seed ^ e->seq, p, out, arg);
	uint64_t sum = fs_on ? dre_fsum_end(&fs, p, pos) : dre_frame_sum(e->o.version, p, pos, e->seed ^ e->seq);
	return dre_enc_submit(e, DRE_FT_DATA, pos, sum, out, arg);
}

void dre_enc_get_stats(const dre_enc *e, dre_codec_stats *s)
{
	dre_enc_wait((dre_enc *)e);
	*s = e->stats;
	s->ref_bytes = e->st_ref;
	s->delta_bytes = e->st_delta;
	s->lit_bytes = e->st_lit;
}

int dre_enc_rest(dre_enc *e, dre_out_fn out, void *arg)
{
	if (e->w.t.running)
		return 0; /* threaded: a command-line run, not a long-lived stream */
	int rc = dre_enc_flush(e, out, arg);
	if (!rc && e->ended) {
		/* no more DATA frames: nobody needs the end, unless a LEARN may
		 * still come, which must continue the residual stream the peer
		 * is in (a new one would break its decoding): then it stays */
		if (!e->nret) {
			e->out.len = 0;
			rc = dre_lz_end(e->lz, &e->out);
		}
	} else if (!rc && dre_lz_open(e->lz)) {
		dre_enc_retain_begin(e);
		e->frame_prev = e->prev;
		e->seq++;
		e->stats.frames++;
		if (!(rc = dre_enc_retain_frame(e)))
			rc = dre_enc_emit_lz_end(e, dre_frame_sum(e->o.version, "", 0, e->seed ^ e->seq), out, arg);
	}
	if (rc)
		return rc;
	dre_buf *b[] = { &e->ops, &e->lits, &e->out, &e->cur_ch, &e->cur_raw, &e->eops, &e->edata };
	for (size_t i = 0; i < sizeof b / sizeof *b; i++)
		dre_buf_free(b[i]);
	free(e->win);
	e->win = NULL;
	e->win_n = 0;
	free(e->ins); /* 48 KiB */
	e->ins = NULL;
	dre_rwin_free(&e->rw);
	if (!e->nret) {
		free(e->ret);
		e->ret = NULL;
		e->ret_cap = e->ret_head = 0;
	}
	return 0;
}

size_t dre_enc_mem(const dre_enc *e)
{
	const dre_buf *b[] = { &e->in, &e->ops, &e->lits, &e->out, &e->cur_ch, &e->cur_raw, &e->eops, &e->edata };
	size_t n = sizeof *e + dre_lz_mem(e->lz) + (e->win ? DRE_DELTA_WIN : 0) + e->ret_cap * sizeof *e->ret +
		   dre_rwin_mem(&e->rw) + (e->ins ? DRE_DELTA_INS_MAX * sizeof *e->ins : 0);
	for (size_t i = 0; i < e->nret; i++)
		n += e->ret[(e->ret_head + i) % e->ret_cap].rawlen;
	for (size_t i = 0; i < sizeof b / sizeof *b; i++)
		n += b[i]->cap;
	return n;
}

uint64_t dre_enc_seq(const dre_enc *e)
{
	return e->seq;
}
