/*
 * dec.c: the per-stream DRE decoder.  Accepts encoded bytes in any pieces,
 * parses whole frames, decompresses each frame's literal section in arrival
 * order, rebuilds the frame from its ops and the local store, and hands the
 * bytes on only once their checksum matched.  A frame that references data the
 * store lacks (or decodes to the wrong bytes) is asked for again through the
 * ask callback; later frames wait in a bounded queue until the LEARN arrives.
 */
#include <stdio.h>
#include <stdlib.h>

#include "dec_int.h"

dre_dec *dre_dec_new(dre_store *st)
{
	dre_dec *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	d->st = st;
	if (!(d->fp = dre_fp_new())) {
		dre_dec_free(d);
		return NULL;
	}
	return d;
}

static void frame_free(struct dre_qframe *f)
{
	if (!f)
		return;
	free(f->ops);
	free(f->lits);
	free(f->lzd);
	free(f);
}

/* Keep finished frames' buffers for the next frames (saves page faults): as
 * many as can be parsed ahead, and one more. */
static void frame_recycle(dre_dec *d, struct dre_qframe *f)
{
	if (d->nspare > DRE_DEC_AHEAD) {
		frame_free(f);
		return;
	}
	f->next = d->spare;
	d->spare = f;
	d->nspare++;
}

/* A frame with room for the given section sizes, recycled if possible. */
static struct dre_qframe *frame_get(dre_dec *d, size_t ops_len, size_t lit_len)
{
	struct dre_qframe *f = d->spare;
	if (f) {
		d->spare = f->next;
		d->nspare--;
	} else if (!(f = calloc(1, sizeof *f))) {
		return NULL;
	}
	/* grown by doubling: frames' sizes vary, and new memory costs page faults */
	if (f->ops_cap < ops_len + 1) {
		free(f->ops);
		f->ops_cap = ops_len + 1 > 2 * f->ops_cap ? ops_len + 1 : 2 * f->ops_cap;
		if ((f->ops = malloc(f->ops_cap)))
			dre_mem_populate(f->ops, ops_len); /* about to be filled */
	}
	if (f->lits_cap < lit_len + 1) {
		free(f->lits);
		f->lits_cap = lit_len + 1 > 2 * f->lits_cap ? lit_len + 1 : 2 * f->lits_cap;
		if ((f->lits = malloc(f->lits_cap)))
			dre_mem_populate(f->lits, lit_len);
	}
	if (!f->ops || !f->lits) {
		frame_free(f);
		return NULL;
	}
	f->next = NULL;
	f->seq = f->learn_seq = 0;
	f->inplace = 0;
	return f;
}

void dre_dec_free(dre_dec *d)
{
	if (!d)
		return;
	dre_dec_work_stop(d);
	dre_dec_lz_stop(d);
	dre_rwin_free(&d->rw);
	dre_buf_free(&d->sops);
	dre_buf_free(&d->used);
	while (d->spare) {
		struct dre_qframe *f = d->spare;
		d->spare = f->next;
		frame_free(f);
	}
	while (d->qhead) {
		struct dre_qframe *f = d->qhead;
		d->qhead = f->next;
		frame_free(f);
	}
	for (int i = 0; i < 3; i++)
		dre_lz_free(d->lz[i]);
	dre_fp_free(d->fp);
	dre_buf_free(&d->in);
	dre_buf_free(&d->out);
	dre_buf_free(&d->undo);
	free(d->win);
	free(d);
}

int dre_dec_set_threaded(dre_dec *d, int on)
{
	if (!on) {
		int rc = dre_dec_sync(d);
		dre_dec_work_stop(d);
		dre_dec_lz_stop(d);
		return rc;
	}
	int rc = dre_dec_work_start(d);
	return rc ? rc : dre_dec_lz_start(d);
}

void dre_dec_set_peer(dre_dec *d, int peer)
{
	d->peer_bit = peer >= 0 && peer < DRE_PEER_SLOTS ? 1u << peer : 0;
}

void dre_dec_set_ask(dre_dec *d, dre_ask_fn ask, void *arg)
{
	d->ask = ask;
	d->ask_arg = arg;
}

void dre_dec_set_take(dre_dec *d, dre_take_fn take)
{
	d->take = take;
}

/* Parse a frame header at p[0..n): 1 and *h filled when complete, 0 when more
 * bytes are needed, DRE_ECORRUPT when invalid. */
static int parse_header(const uint8_t *p, size_t n, struct dre_fhdr *h)
{
	const uint8_t *q = p, *end = p + n;
	uint64_t v[4];
	if (n < 2)
		return 0;
	if (p[0] != DRE_FRAME_MAGIC || p[1] < DRE_FT_DATA || p[1] > DRE_FT_END)
		return DRE_ECORRUPT;
	h->type = p[1];
	q += 2;
	for (int i = 0; i < 3; i++)
		if (dre_get_varint(&q, end, &v[i]))
			return end - q >= 10 ? DRE_ECORRUPT : 0;
	if (q >= end)
		return 0;
	h->lz = *q++;
	if (dre_get_varint(&q, end, &v[3]))
		return end - q >= 10 ? DRE_ECORRUPT : 0;
	if (end - q < 8)
		return 0;
	h->sum = dre_get_u64(q);
	q += 8;
	h->raw_len = v[0];
	h->ops_len = v[1];
	h->lit_len = v[2];
	h->lz_len = v[3];
	h->hdr_len = (size_t)(q - p);
	if (h->raw_len > DRE_FRAME_RAW_MAX || h->lit_len > h->raw_len || h->lz > DRE_PLZ_ZSTD ||
	    h->ops_len > 2 * (uint64_t)h->raw_len + 64 ||
	    h->lz_len > h->lit_len + h->lit_len / 8 + 4096 ||
	    (h->lz == DRE_PLZ_NONE && h->lz_len != h->lit_len) ||
	    (h->type == DRE_FT_END && (h->raw_len || h->ops_len || h->lit_len || h->lz_len || h->sum)))
		return DRE_ECORRUPT;
	return 1;
}

/* Load a frame into a new queued frame: its ops, and its literal section
 * decompressed (or on its way, see dec_lz.c). */
static int frame_load(dre_dec *d, const struct dre_fhdr *h, const uint8_t *p, struct dre_qframe **out)
{
	struct dre_qframe *f = frame_get(d, h->ops_len, h->lit_len);
	if (!f)
		return DRE_ENOMEM;
	f->h = *h;
	d->stats.lz_in += h->lit_len; /* (as the encoder counts: residual before and after) */
	d->stats.lz_out += h->lz_len;
	memcpy(f->ops, p + h->hdr_len, h->ops_len);
	int rc = dre_dec_lz_load(d, f, p + h->hdr_len + h->ops_len);
	if (rc) {
		frame_recycle(d, f);
		return rc;
	}
	*out = f;
	return 0;
}

/* A checked frame's output goes to d->take: its new chunks are stored first
 * (that reads the output buffer), then the buffer is handed over. */
static int frame_take(dre_dec *d, void *arg)
{
	int rc = dre_dec_frame_done(d, NULL);
	if (rc)
		return rc;
	void *buf = d->out.p;
	size_t len = d->out.len;
	memset(&d->out, 0, sizeof d->out);
	int orc = d->take(arg, buf, len);
	if (orc < 0)
		return DRE_EOUT;
	if (orc > 0)
		d->paused = 1;
	return 0;
}

/* Apply a queued frame: 0 done, DRE_EMISS/DRE_ECHECKSUM askable, else fatal. */
static int frame_apply(dre_dec *d, struct dre_qframe *f, dre_out_fn out, void *arg)
{
	int lrc = dre_dec_lz_ready(d, f);
	if (lrc)
		return lrc;
	d->out.len = 0;
	dre_dec_adopt_lits(d, f);
	size_t had = d->out.cap;
	if (dre_buf_reserve(&d->out, f->h.raw_len))
		return DRE_ENOMEM;
	if (d->out.cap > had && d->lzw.t.running) /* as in_reserve: one call, not a fault a page */
		dre_mem_populate(d->out.p, f->h.raw_len);
	uint64_t key = f->h.type == DRE_FT_DATA ? f->seq : (f->learn_seq | 1ULL << 63);
	/* with a helper thread and no ask path (a miss is fatal anyway), the
	 * checksum check and the output go to the helper thread too; else the
	 * checksum is taken here, as the output grows */
	int may_defer = d->w.t.running && !d->ask;
	d->fs_on = !may_defer && d->version >= 2;
	if (d->fs_on)
		dre_fsum_begin(&d->fs, d->seed ^ key);
	d->in_frame = 1;
	d->lacks = 0;
	d->used.len = 0;
	dre_codec_stats was = d->stats; /* a frame that fails brought none of its hits */
	int rc = f->h.type == DRE_FT_DATA ? dre_dec_ops(d, f) : dre_dec_learn_ops(d, f);
	d->in_frame = 0;
	struct dre_vjob vj = { f->h.sum, d->seed ^ key, d->version, out, arg };
	int defer = !rc && may_defer;
	if (!rc && !defer &&
	    (d->fs_on ? dre_fsum_end(&d->fs, d->out.p, d->out.len)
		      : dre_frame_sum(d->version, d->out.p, d->out.len, d->seed ^ key)) != f->h.sum)
		rc = DRE_ECHECKSUM;
	if (!rc) {
		d->applied = f->h.type == DRE_FT_DATA ? f->seq : f->learn_seq;
		d->stats.out_bytes += d->out.len;
		d->stats.frames++;
		if (d->take && !d->w.t.running && d->out.len)
			return frame_take(d, arg);
		int orc = defer || !d->out.len ? 0 : out(arg, d->out.p, d->out.len);
		if (orc < 0)
			rc = DRE_EOUT;
		else if (orc > 0)
			d->paused = 1;
	}
	if (rc) {
		d->stats.ref_bytes = was.ref_bytes;
		d->stats.delta_bytes = was.delta_bytes;
		d->stats.lit_bytes = was.lit_bytes;
	}
	if (rc == DRE_ECHECKSUM || rc == DRE_EMISS)
		dre_dec_verify_hits(d); /* a stored chunk gone bad on disk? */
	/* a failed frame's new chunks are stored too (they are sound), not its links */
	int crc = rc ? dre_dec_discard(d) : dre_dec_frame_done(d, defer ? &vj : NULL);
	return rc ? rc : crc;
}

/* Parse the stream header if not yet seen: 1 done, 0 need more, <0 bad. */
static int stream_header(dre_dec *d)
{
	if (d->hdr_got)
		return 1;
	if (d->in.len - d->in_off < DRE_STREAM_HDR_LEN)
		return 0;
	const uint8_t *p = d->in.p + d->in_off;
	if (memcmp(p, DRE_STREAM_MAGIC, 4) || p[4] < DRE_STREAM_VERSION_MIN || p[5] != 0) /* flags: none yet */
		return DRE_ECORRUPT;
	if (p[4] > DRE_STREAM_VERSION)
		return DRE_EVERSION;
	d->version = p[4];
	d->seed = dre_get_u64(p + 6);
	d->in_off += DRE_STREAM_HDR_LEN;
	d->hdr_got = 1;
	return 1;
}

/* A LEARN's ops start with the number of the frame it stands for, which must
 * have been seen: 0 or DRE_ECORRUPT. */
static int learn_check(const dre_dec *d, const struct dre_fhdr *h, const uint8_t *p)
{
	uint64_t seq = h->ops_len < 24 ? 0 : dre_get_u64(p + h->hdr_len);
	return seq == 0 || seq > d->seq ? DRE_ECORRUPT : 0;
}

/* Take complete frames out of the input buffer into the queue: one at a time
 * (it is applied before the next is parsed, keeping memory flat), or up to
 * DRE_DEC_AHEAD with the decompression thread, and every one there is while
 * waiting for a LEARN.  An error found while parsing ahead is left in the
 * input and reported once the frames before it are applied. */
static int parse_frames(dre_dec *d)
{
	unsigned ahead = d->lzw.t.running ? DRE_DEC_AHEAD : 1;
	for (;;) {
		struct dre_fhdr h;
		size_t avail = d->in.len - d->in_off;
		const uint8_t *p = d->in.p + d->in_off;
		int rc = parse_header(p, avail, &h);
		if (rc > 0 && avail < h.hdr_len + h.ops_len + h.lz_len)
			return 0;
		if (rc > 0 && h.type == DRE_FT_LEARN)
			rc = learn_check(d, &h, p) ? DRE_ECORRUPT : 1;
		if (rc < 0 && d->qhead && !d->waiting && ahead > 1)
			return 0;
		if (rc <= 0)
			return rc;
		struct dre_qframe *f;
		if ((rc = frame_load(d, &h, p, &f)))
			return rc;
		if (h.type == DRE_FT_DATA)
			f->seq = ++d->seq;
		else if (h.type == DRE_FT_LEARN)
			f->learn_seq = dre_get_u64(f->ops);
		d->in_off += h.hdr_len + h.ops_len + h.lz_len;
		d->qbytes += h.ops_len + h.lit_len;
		d->qcount++;
		if (d->qtail)
			d->qtail->next = f;
		else
			d->qhead = f;
		d->qtail = f;
		if (d->qbytes > DRE_LEARN_BACKLOG && d->waiting)
			return DRE_ESTATE;
		if ((!d->waiting || d->paused) && d->qcount >= ahead)
			return 0; /* apply before parsing on */
	}
}

/* Unlink f (whose predecessor in the queue is prev, or NULL) and recycle it. */
static void queue_drop(dre_dec *d, struct dre_qframe *prev, struct dre_qframe *f)
{
	dre_dec_lz_ready(d, f); /* the thread is done with it */
	if (prev)
		prev->next = f->next;
	else
		d->qhead = f->next;
	if (d->qtail == f)
		d->qtail = prev;
	d->qbytes -= f->h.ops_len + f->h.lit_len;
	d->qcount--;
	frame_recycle(d, f);
}

/* While waiting for a learn: apply it if it has arrived (it may sit behind
 * frames that came after the failed one).  1 applied, 0 not there yet.  A
 * learn that named chunks we lack too is asked for once more, in full. */
static int queue_learn(dre_dec *d, dre_out_fn out, void *arg)
{
	struct dre_qframe *prev = NULL, *f = d->qhead;
	while (f && !(f->h.type == DRE_FT_LEARN && f->learn_seq == d->wait_seq)) {
		prev = f;
		f = f->next;
	}
	if (!f)
		return 0;
	int rc = frame_apply(d, f, out, arg);
	queue_drop(d, prev, f);
	if ((rc == DRE_EMISS || rc == DRE_ECHECKSUM) && d->version >= 3 && !d->wait_full) {
		d->wait_full = d->full_asks = 1; /* the sender's idea of what we hold is stale */
		d->stats.asks++;
		d->ask(d->ask_arg, d->wait_seq | DRE_ASK_FULL);
		return 0;
	}
	if (rc)
		return rc;
	d->waiting = d->wait_full = 0;
	return 1;
}

/* Run queued frames in order; a frame that lacks data is asked for and
 * dropped, and the queue then waits for its LEARN. */
static int queue_run(dre_dec *d, dre_out_fn out, void *arg)
{
	for (;;) {
		if (d->waiting) {
			if (d->paused)
				return 0;
			int rc = queue_learn(d, out, arg);
			if (rc <= 0)
				return rc;
			continue;
		}
		if (d->lzw.t.running && !d->paused && d->qcount < DRE_DEC_AHEAD) {
			int rc = parse_frames(d); /* keep the decompression thread busy */
			if (rc < 0)
				return rc;
		}
		struct dre_qframe *f = d->qhead;
		if (!f || d->paused)
			return 0;
		if (f->h.type == DRE_FT_LEARN || f->h.type == DRE_FT_END) {
			int rc = dre_dec_lz_ready(d, f);
			if (f->h.type == DRE_FT_END)
				d->ended = 1; /* everything before it is applied */
			queue_drop(d, NULL, f); /* a LEARN: answers an ask already satisfied */
			if (rc)
				return rc;
			continue;
		}
		if (d->ended) {
			queue_drop(d, NULL, f);
			return DRE_ECORRUPT; /* data after the end */
		}
		int rc = frame_apply(d, f, out, arg);
		if ((rc == DRE_EMISS || rc == DRE_ECHECKSUM) && d->ask) {
			/* a chunk we lack would be named again by a light learn */
			d->wait_full = (d->lacks || d->full_asks) && d->version >= 3;
			d->waiting = 1;
			d->wait_seq = f->seq;
			d->stats.asks++;
			d->ask(d->ask_arg, f->seq | (d->wait_full ? DRE_ASK_FULL : 0));
			rc = 0;
		}
		queue_drop(d, NULL, f);
		if (rc)
			return rc;
	}
}

/* Room for n more input bytes in d->in.  A threaded (command-line) decoder
 * fills what it grows at once: its pages come in one call, not a fault each. */
static int in_reserve(dre_dec *d, size_t n)
{
	size_t had = d->in.cap;
	if (dre_buf_reserve(&d->in, n))
		return DRE_ENOMEM;
	if (d->in.cap > had && d->lzw.t.running)
		dre_mem_populate(d->in.p + d->in.len, d->in.cap - d->in.len);
	return 0;
}

/* Decode what d->in holds, n bytes of it new (dre_dec_write's contract). */
static int in_run(dre_dec *d, size_t n, dre_out_fn out, void *arg)
{
	d->stats.in_bytes += n;
	d->paused = 0;
	int rc;
	for (;;) {
		size_t before = d->in_off;
		if ((rc = stream_header(d)) <= 0)
			break;
		if ((rc = parse_frames(d)) < 0)
			break;
		if ((rc = queue_run(d, out, arg)))
			break;
		if (d->in_off == before || d->paused)
			break;
	}
	if (d->in_off) {
		memmove(d->in.p, d->in.p + d->in_off, d->in.len - d->in_off);
		d->in.len -= d->in_off;
		d->in_off = 0;
	}
	if (rc < 0)
		d->err = rc;
	return rc < 0 ? rc : 0;
}

int dre_dec_write(dre_dec *d, const void *buf, size_t n, dre_out_fn out, void *arg)
{
	if (d->err)
		return d->err;
	if (n && in_reserve(d, n))
		return d->err = DRE_ENOMEM;
	if (n)
		dre_buf_add(&d->in, buf, n); /* room reserved: cannot fail */
	return in_run(d, n, out, arg);
}

void *dre_dec_space(dre_dec *d, size_t min, size_t *room)
{
	if (in_reserve(d, min ? min : 1))
		return NULL;
	*room = d->in.cap - d->in.len;
	return d->in.p + d->in.len;
}

int dre_dec_commit(dre_dec *d, size_t n, dre_out_fn out, void *arg)
{
	if (d->err)
		return d->err;
	if (n > d->in.cap - d->in.len)
		return d->err = DRE_ESTATE;
	d->in.len += n;
	return in_run(d, n, out, arg);
}

int dre_dec_finish(dre_dec *d)
{
	int rc = dre_dec_sync(d); /* also: no callback comes after this returns */
	if (d->err)
		return d->err;
	if ((d->err = rc))
		return d->err;
	if (d->in.len || d->qhead || d->waiting)
		return d->waiting || d->qhead ? DRE_EMISS : DRE_ECORRUPT;
	return DRE_OK;
}

int dre_dec_ended(const dre_dec *d)
{
	/* not while part of a frame after the END waits for its rest (a LEARN,
	 * or a second END from an older peer): finishing then would fail */
	return d->ended && !d->qhead && !d->waiting && !d->err && d->in.len == d->in_off;
}

int dre_dec_paused(const dre_dec *d)
{
	return d->paused;
}

int dre_dec_waiting(const dre_dec *d)
{
	return d->waiting;
}

int dre_dec_rest(dre_dec *d)
{
	if (d->qhead || d->in.len > d->in_off || d->waiting || d->w.t.running || d->lzw.t.running)
		return 0;
	while (d->spare) {
		struct dre_qframe *f = d->spare;
		d->spare = f->next;
		frame_free(f);
	}
	d->nspare = 0;
	dre_buf_free(&d->in);
	d->in_off = 0;
	dre_buf_free(&d->sops);
	dre_buf_free(&d->used);
	d->sops_done = 0;
	dre_buf_free(&d->undo);
	if (!d->out.len)
		dre_buf_free(&d->out);
	free(d->win);
	d->win = NULL;
	dre_rwin_free(&d->rw);
	return 1;
}

size_t dre_dec_mem(const dre_dec *d)
{
	size_t n = sizeof *d + d->in.cap + d->sops.cap + d->undo.cap + d->out.cap +
		   (d->win ? DRE_DELTA_WIN + DRE_CHUNK_MAX : 0) + dre_rwin_mem(&d->rw);
	for (int i = 0; i < 3; i++)
		n += dre_lz_mem(d->lz[i]);
	for (const struct dre_qframe *f = d->spare; f; f = f->next)
		n += sizeof *f + f->ops_cap + f->lits_cap + f->lzd_cap;
	return n;
}

size_t dre_dec_buffered(const dre_dec *d)
{
	return d->in.len - d->in_off + (size_t)d->qbytes;
}

uint64_t dre_dec_applied(const dre_dec *d)
{
	return d->applied;
}

void dre_dec_get_stats(const dre_dec *d, dre_codec_stats *s)
{
	*s = d->stats;
}
