/*
 * mux.c: streams of one tunnel connection: stream table, frame dispatch,
 * per-stream credit, round-robin DATA scheduling (owner API: stream.c).
 *
 * Flow control: a stream may send only as many DATA bytes as the peer granted
 * (initial window from its HELLO, then CREDIT/ACK); the receiver grants more
 * only when its owner reports bytes consumed.  So a slow receiver stops the
 * sender's mux from framing; the sender's queue fills to its high mark; its
 * owner sees tun_stream_room() == 0 and stops reading its source.  Each turn
 * of the scheduler gives one stream at most `quantum` bytes, so a bulk stream
 * holds the link for one frame at a time, never an interactive one's turn.
 *
 * Lifetime: a stream is in the table from OPEN until its owner freed it and
 * it finished (reset, or CLOSE sent and received).  Memory is released only
 * at the end of mux_input/mux_output (reap), never under a callback.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/buffer.h>

#include "frame.h"
#include "mux_int.h"

/* Highest stream id we open; then the connection must be replaced. */
#define MUX_LAST_SID 0xfffffff0u
/* Most bytes of control frames we queue before declaring the peer abusive. */
#define MUX_CTL_MAX (1u << 20)


/* Index of sid in the table. */
static size_t tab_slot(const mux *m, uint32_t sid)
{
	return (sid * 2654435761u) & (m->tab_size - 1);
}

/* Find a stream by id, or NULL. */
static tun_stream *tab_find(const mux *m, uint32_t sid)
{
	tun_stream *s = m->tab[tab_slot(m, sid)];

	while (s && s->sid != sid)
		s = s->hnext;
	return s;
}

/* Double the table; on allocation failure keep the old one (just slower). */
static void tab_grow(mux *m)
{
	size_t n = m->tab_size * 2;
	tun_stream **t = calloc(n, sizeof(*t)), **old = m->tab;

	if (!t)
		return;
	m->tab = t;
	m->tab_size = n;
	for (size_t i = 0; i < n / 2; i++) {
		for (tun_stream *s = old[i], *next; s; s = next) {
			next = s->hnext;
			s->hnext = t[tab_slot(m, s->sid)];
			t[tab_slot(m, s->sid)] = s;
		}
	}
	free(old);
}

/* Insert s into the table. */
static void tab_add(mux *m, tun_stream *s)
{
	if (m->tab_count >= m->tab_size)
		tab_grow(m);
	s->hnext = m->tab[tab_slot(m, s->sid)];
	m->tab[tab_slot(m, s->sid)] = s;
	m->tab_count++;
}

/* Remove s from the table. */
static void tab_del(mux *m, tun_stream *s)
{
	tun_stream **p = &m->tab[tab_slot(m, s->sid)];

	while (*p && *p != s)
		p = &(*p)->hnext;
	if (*p) {
		*p = s->hnext;
		m->tab_count--;
	}
}

/* 1 if sid is opened by us. */
static int sid_ours(const mux *m, uint32_t sid)
{
	return (int)(sid & 1) == m->cfg.odd;
}

/* Queue an encoded control frame; kick the connection. */
void mux_ctl_frame(mux *m, const tun_frame *f)
{
	int n = tun_frame_encode(f, m->scratch, sizeof(m->scratch));

	if (n > 0 && evbuffer_add(m->ctl, m->scratch, (size_t)n) == 0)
		m->ops.kick(m->arg);
}

/* Stop counting s as open (it is finished or dead). */
static void stream_uncount(tun_stream *s)
{
	if (!(s->flags & SF_COUNTED))
		return;
	s->flags &= ~SF_COUNTED;
	if (sid_ours(s->m, s->sid))
		s->m->n_ours--;
	else
		s->m->n_peer--;
}

/* 1 if s can make progress in a scheduler turn. */
static int stream_sendable(const tun_stream *s)
{
	size_t q = evbuffer_get_length(s->sendq);

	if (s->flags & SF_DEAD)
		return 0;
	if (s->flags & SF_OPEN_PENDING)
		return 1;
	if (q && s->send_credit)
		return 1;
	return (s->flags & (SF_FIN_QUEUED | SF_FIN_SENT)) == SF_FIN_QUEUED && q == 0;
}

/* Put s on the scheduler list if it has something to send: at the end, or
 * (head != 0) at the front. */
static void activate(tun_stream *s, int head)
{
	mux *m = s->m;

	if (!m || (s->flags & SF_ACTIVE) || !stream_sendable(s))
		return;
	s->flags |= SF_ACTIVE;
	if (head)
		TAILQ_INSERT_HEAD(&m->active, s, rr);
	else
		TAILQ_INSERT_TAIL(&m->active, s, rr);
	m->ops.kick(m->arg);
}

/* Put s on the scheduler list if it has something to send.  A stream that
 * was off the list and now holds at most a quarter quantum (a keystroke, a
 * request, a reply) goes first, so it waits for no bulk stream's frame; it
 * gets one turn like any other, and a stream that stays busy queues at the
 * end (mux_output re-activates it there after each turn). */
void mux_stream_activate(tun_stream *s)
{
	activate(s, s->m && !(s->flags & SF_OPEN_PENDING) && /* OPENs go out in stream id order */
			    evbuffer_get_length(s->sendq) <= s->m->cfg.quantum / 4);
}

/* Take s off the scheduler list. */
static void stream_deactivate(tun_stream *s)
{
	if (s->flags & SF_ACTIVE) {
		s->flags &= ~SF_ACTIVE;
		TAILQ_REMOVE(&s->m->active, s, rr);
	}
}

/* Mark s dead (no frames either way), dropping what it had queued. */
static void stream_kill(tun_stream *s)
{
	s->flags |= SF_DEAD;
	stream_deactivate(s);
	stream_uncount(s);
	evbuffer_drain(s->sendq, evbuffer_get_length(s->sendq));
	mux_stream_reap_check(s);
}

/* Put s on the reap list once its owner freed it and it finished. */
void mux_stream_reap_check(tun_stream *s)
{
	unsigned done = SF_FIN_SENT | SF_FIN_RCVD;

	if ((s->flags & done) == done)
		stream_uncount(s);
	if (!(s->flags & SF_OWNER_GONE) || (s->flags & SF_REAP))
		return;
	if ((s->flags & SF_DEAD) || (s->flags & done) == done) {
		s->flags |= SF_REAP;
		TAILQ_INSERT_TAIL(&s->m->reaps, s, reap);
		s->m->ops.kick(s->m->arg);
	}
}

/* Free the memory of a stream no longer in any list. */
void mux_stream_destroy(tun_stream *s)
{
	evbuffer_free(s->sendq);
	free(s);
}

/* Free every stream on the reap list. */
static void mux_reap(mux *m)
{
	tun_stream *s;

	while ((s = TAILQ_FIRST(&m->reaps))) {
		TAILQ_REMOVE(&m->reaps, s, reap);
		stream_deactivate(s);
		stream_uncount(s);
		tab_del(m, s);
		mux_stream_destroy(s);
	}
}

/* Allocate a stream with id sid and add it to the table. */
static tun_stream *stream_new(mux *m, uint32_t sid)
{
	tun_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->sendq = evbuffer_new();
	if (!s->sendq) {
		free(s);
		return NULL;
	}
	s->m = m;
	s->sid = sid;
	s->send_credit = m->peer_window;
	s->window = m->cfg.window;
	s->recv_left = s->window;
	s->flags = SF_COUNTED;
	if (sid_ours(m, sid))
		m->n_ours++;
	else
		m->n_peer++;
	tab_add(m, s);
	return s;
}

/* Reset s from our side with code (RESET is sent if the peer knows s). */
void mux_stream_reset_local(tun_stream *s, uint32_t code)
{
	tun_frame f = { .type = PROTO_RESET, .sid = s->sid, .u.reset = code };

	if (s->flags & SF_DEAD)
		return;
	if (!(s->flags & SF_OPEN_PENDING))
		mux_ctl_frame(s->m, &f);
	stream_kill(s);
}

/* ---- input ------------------------------------------------------------ */

/* Record a protocol error; returns code. */
static int perr(char *err, size_t errlen, int code, const char *what, const tun_frame *f)
{
	snprintf(err, errlen, "%s (frame type %u, stream %u)", what, f->type, f->sid);
	return code;
}

/* HELLO: remember the peer's limits and let the connection check it. */
static int in_hello(mux *m, const tun_frame *f, char *err, size_t errlen)
{
	int rc;

	if (m->hello_rcvd)
		return perr(err, errlen, TUN_EPROTO, "second HELLO", f);
	/* set first: on_hello may report the connection up and open streams */
	m->hello_rcvd = 1;
	m->peer_window = f->u.hello.window;
	m->peer_max_streams = f->u.hello.max_streams;
	rc = m->ops.on_hello(m->arg, &f->u.hello, err, errlen);
	if (rc != TUN_OK)
		m->hello_rcvd = 0;
	return rc;
}

/* OPEN: a new stream from the peer. */
static int in_open(mux *m, const tun_frame *f, char *err, size_t errlen)
{
	tun_stream *s;
	tun_frame rst = { .type = PROTO_RESET, .sid = f->sid, .u.reset = PROTO_RST_REFUSED };

	if (sid_ours(m, f->sid))
		return perr(err, errlen, TUN_EPROTO, "OPEN with one of our stream ids", f);
	if (f->sid <= m->peer_last)
		return perr(err, errlen, TUN_EPROTO, "OPEN of a stream id not above the last", f);
	m->peer_last = f->sid;
	if (m->goaway_sent || m->n_peer >= m->cfg.max_streams || !m->ops.on_stream) {
		mux_ctl_frame(m, &rst);
		return TUN_OK;
	}
	s = stream_new(m, f->sid);
	if (!s) {
		rst.u.reset = PROTO_RST_INTERNAL;
		mux_ctl_frame(m, &rst);
		return TUN_OK;
	}
	if (m->recv_window > s->window) { /* a larger window than our HELLO's */
		tun_frame cr = { .type = PROTO_CREDIT, .sid = f->sid, .u.credit = m->recv_window - s->window };
		s->recv_left += cr.u.credit;
		s->window = m->recv_window;
		mux_ctl_frame(m, &cr);
	}
	m->ops.on_stream(m->arg, s, &f->u.open);
	return TUN_OK;
}

/* Grant inc bytes of send credit to s. */
static void add_credit(tun_stream *s, uint32_t inc)
{
	s->send_credit += inc;
	mux_stream_activate(s);
}

/* DATA for s. */
static int in_data(mux *m, tun_stream *s, const tun_frame *f, char *err, size_t errlen)
{
	if (s->flags & SF_FIN_RCVD)
		return perr(err, errlen, TUN_EPROTO, "DATA after CLOSE", f);
	if (f->len > s->recv_left)
		return perr(err, errlen, TUN_EFLOW, "DATA beyond the granted credit", f);
	s->recv_left -= f->len;
	s->recv_held += f->len;
	s->data_in += f->len;
	m->st.data_in += f->len;
	if (s->cbs.on_data && !(s->flags & SF_OWNER_GONE))
		s->cbs.on_data(s, s->arg, f->payload, f->len);
	else
		tun_stream_consumed(s, f->len);
	return TUN_OK;
}

/* A frame for an existing stream s. */
static int in_stream(mux *m, tun_stream *s, const tun_frame *f, char *err, size_t errlen)
{
	int cb = !(s->flags & SF_OWNER_GONE);

	switch (f->type) {
	case PROTO_DATA:
		return in_data(m, s, f, err, errlen);
	case PROTO_CLOSE:
		if (s->flags & SF_FIN_RCVD)
			return perr(err, errlen, TUN_EPROTO, "second CLOSE", f);
		s->flags |= SF_FIN_RCVD;
		if (cb && s->cbs.on_close)
			s->cbs.on_close(s, s->arg);
		mux_stream_reap_check(s);
		return TUN_OK;
	case PROTO_RESET:
		stream_kill(s);
		if (cb && s->cbs.on_reset)
			s->cbs.on_reset(s, s->arg, (int)f->u.reset);
		return TUN_OK;
	case PROTO_CREDIT:
		add_credit(s, f->u.credit);
		return TUN_OK;
	case PROTO_ACK:
		add_credit(s, f->u.ack.credit);
		if (cb && s->cbs.on_ack)
			s->cbs.on_ack(s, s->arg, f->u.ack.seq);
		return TUN_OK;
	case PROTO_ASK:
		if (cb && s->cbs.on_ask)
			s->cbs.on_ask(s, s->arg, f->u.seq);
		return TUN_OK;
	}
	return perr(err, errlen, TUN_EPROTO, "unexpected frame", f);
}

/* GOAWAY from the peer: our streams above its last accepted id are refused.
 * The connection hears first, so owners reopening from on_reset go elsewhere.
 * PROTO_GOAWAY_RENEW only goes to the connection. */
static void in_goaway(mux *m, const tun_frame *f)
{
	if (f->u.goaway.code == PROTO_GOAWAY_RENEW) { /* a request: streams go on here */
		if (m->ops.on_goaway)
			m->ops.on_goaway(m->arg, f->u.goaway.code, f->u.goaway.text);
		return;
	}
	m->goaway_rcvd = 1;
	m->goaway_last = f->u.goaway.last_sid;
	if (m->ops.on_goaway)
		m->ops.on_goaway(m->arg, f->u.goaway.code, f->u.goaway.text);
	for (size_t i = 0; i < m->tab_size; i++) {
		for (tun_stream *s = m->tab[i]; s; s = s->hnext) {
			if (!sid_ours(m, s->sid) || s->sid <= m->goaway_last || (s->flags & SF_DEAD))
				continue;
			stream_kill(s);
			if (!(s->flags & SF_OWNER_GONE) && s->cbs.on_reset)
				s->cbs.on_reset(s, s->arg, PROTO_RST_REFUSED);
		}
	}
}

/* Route one decoded frame. */
static int dispatch(mux *m, const tun_frame *f, char *err, size_t errlen)
{
	tun_stream *s;
	tun_frame pong = { .type = PROTO_PONG };

	if (!m->hello_rcvd && f->type != PROTO_HELLO)
		return perr(err, errlen, TUN_EPROTO, "first frame is not HELLO", f);
	switch (f->type) {
	case PROTO_HELLO: return in_hello(m, f, err, errlen);
	case PROTO_OPEN: return in_open(m, f, err, errlen);
	case PROTO_PING:
		pong.u.ping = f->u.ping;
		mux_ctl_frame(m, &pong);
		return TUN_OK;
	case PROTO_PONG:
		if (m->ops.on_pong)
			m->ops.on_pong(m->arg, f->u.ping);
		return TUN_OK;
	case PROTO_GOAWAY:
		in_goaway(m, f);
		return TUN_OK;
	case PROTO_LINK:
		if (m->ops.on_link)
			m->ops.on_link(m->arg, f->u.link.bps, f->u.link.tx_bps, f->u.link.rtt_us);
		return TUN_OK;
	case PROTO_ALLOW:
		if (m->ops.on_allow)
			m->ops.on_allow(m->arg, f->payload, f->len);
		return TUN_OK;
	}
	s = tab_find(m, f->sid);
	if (!s) {
		/* frames for streams that already finished are dropped */
		if (sid_ours(m, f->sid) ? f->sid < m->next_sid : f->sid <= m->peer_last)
			return TUN_OK;
		return perr(err, errlen, TUN_EPROTO, "frame for a stream never opened", f);
	}
	if (s->flags & SF_DEAD)
		return TUN_OK;
	return in_stream(m, s, f, err, errlen);
}

/* Map an input error to the GOAWAY code that reports it. */
static uint32_t goaway_code(int rc)
{
	return rc == TUN_EFLOW ? PROTO_GOAWAY_FLOW :
	       rc == TUN_EVERSION ? PROTO_GOAWAY_VERSION : PROTO_GOAWAY_PROTOCOL;
}

/* Decode and dispatch everything in `in`. */
int mux_input(mux *m, struct evbuffer *in, uint32_t *goaway, char *err, size_t errlen)
{
	struct evbuffer_iovec v;
	tun_frame f;
	size_t used;
	int rc = TUN_OK;

	while (rc == TUN_OK && evbuffer_peek(in, -1, NULL, &v, 1) > 0 && v.iov_len) {
		rc = tun_fdec_feed(&m->dec, v.iov_base, v.iov_len, &used, &f);
		evbuffer_drain(in, used);
		m->st.bytes_in += used;
		if (rc < 0)
			snprintf(err, errlen, "malformed frame: %s", tun_fdec_error(&m->dec));
		else if (rc == 1)
			rc = dispatch(m, &f, err, errlen);
		if (rc == TUN_OK && evbuffer_get_length(m->ctl) > MUX_CTL_MAX) {
			snprintf(err, errlen, "peer does not read its control frames");
			rc = TUN_EPROTO;
		}
	}
	mux_reap(m);
	*goaway = goaway_code(rc);
	return rc;
}

/* ---- output ----------------------------------------------------------- */

/* Queue s's OPEN now (before a control frame about s): control frames
 * leave ahead of stream turns, and the peer must know s first. */
void mux_stream_announce(tun_stream *s)
{
	tun_frame f = { .type = PROTO_OPEN, .sid = s->sid, .u.open = s->open };

	if (!(s->flags & SF_OPEN_PENDING))
		return;
	s->flags &= ~SF_OPEN_PENDING;
	mux_ctl_frame(s->m, &f);
}

/* Give s one scheduler turn: OPEN, up to a quantum of DATA, CLOSE. */
static void stream_turn(mux *m, tun_stream *s, struct evbuffer *out)
{
	tun_frame f = { .type = PROTO_OPEN, .sid = s->sid, .u.open = s->open };
	size_t n = evbuffer_get_length(s->sendq);
	uint8_t hdr[PROTO_HDR_LEN];
	int len;

	if (s->flags & SF_OPEN_PENDING) {
		s->flags &= ~SF_OPEN_PENDING;
		len = tun_frame_encode(&f, m->scratch, sizeof(m->scratch));
		if (len > 0)
			evbuffer_add(out, m->scratch, (size_t)len);
	}
	if (n > s->send_credit)
		n = (size_t)s->send_credit;
	if (n > m->cfg.quantum)
		n = m->cfg.quantum;
	if (n) {
		tun_frame_header(hdr, PROTO_DATA, s->sid, (uint16_t)n);
		evbuffer_add(out, hdr, sizeof(hdr));
		evbuffer_remove_buffer(s->sendq, out, n);
		s->send_credit -= n;
		s->data_out += n;
		m->st.data_out += n;
	}
	if ((s->flags & (SF_FIN_QUEUED | SF_FIN_SENT)) == SF_FIN_QUEUED &&
	    evbuffer_get_length(s->sendq) == 0) {
		tun_frame_header(hdr, PROTO_CLOSE, s->sid, 0);
		evbuffer_add(out, hdr, sizeof(hdr));
		s->flags |= SF_FIN_SENT;
		mux_stream_reap_check(s);
	}
}

/* Call on_writable if s was full and has drained to half its high mark. */
static void stream_writable_check(tun_stream *s)
{
	if (!(s->flags & SF_WANT_WRITABLE) ||
	    evbuffer_get_length(s->sendq) > s->m->cfg.sendq_hiwat / 2)
		return;
	s->flags &= ~SF_WANT_WRITABLE;
	if (!(s->flags & (SF_OWNER_GONE | SF_DEAD)) && s->cbs.on_writable)
		s->cbs.on_writable(s, s->arg);
}

/* Fill out up to target bytes. */
void mux_output(mux *m, struct evbuffer *out, size_t target)
{
	tun_stream *s;
	size_t len0 = evbuffer_get_length(out);

	mux_reap(m);
	while (evbuffer_get_length(out) < target) {
		if (evbuffer_get_length(m->ctl)) {
			evbuffer_add_buffer(out, m->ctl);
			continue;
		}
		s = TAILQ_FIRST(&m->active);
		if (!s)
			break;
		stream_deactivate(s);
		stream_turn(m, s, out);
		activate(s, 0);
		stream_writable_check(s);
	}
	m->st.bytes_out += evbuffer_get_length(out) - len0;
	mux_reap(m);
}

/* 1 if frames are waiting. */
int mux_pending(const mux *m)
{
	return evbuffer_get_length(m->ctl) || !TAILQ_EMPTY(&m->active);
}

/* ---- mux lifecycle and connection frames ---------------------------------- */

/* Create a mux. */
mux *mux_new(const mux_cfg *cfg, const mux_ops *ops, void *arg)
{
	mux *m = calloc(1, sizeof(*m));

	if (!m)
		goto err_0;
	m->cfg = *cfg;
	m->ops = *ops;
	m->arg = arg;
	m->tab_size = 256;
	m->tab = calloc(m->tab_size, sizeof(*m->tab));
	if (!m->tab)
		goto err_1;
	m->ctl = evbuffer_new();
	if (!m->ctl)
		goto err_2;
	TAILQ_INIT(&m->active);
	TAILQ_INIT(&m->reaps);
	m->next_sid = cfg->odd ? 1 : 2;
	if (!m->cfg.quantum || m->cfg.quantum > PROTO_MAX_PAYLOAD)
		m->cfg.quantum = PROTO_MAX_PAYLOAD;
	tun_fdec_init(&m->dec);
	return m;
err_2:
	free(m->tab);
err_1:
	free(m);
err_0:
	return NULL;
}

/* Detach every stream, notify the owners, free the mux. */
void mux_free(mux *m)
{
	tun_stream *list = NULL, *s, *next;

	if (!m)
		return;
	for (size_t i = 0; i < m->tab_size; i++) {
		for (s = m->tab[i]; s; s = next) {
			next = s->hnext;
			s->m = NULL;
			s->flags |= SF_DEAD | SF_TEARDOWN;
			s->hnext = list;
			list = s;
		}
	}
	for (s = list; s; s = next) {
		next = s->hnext;
		/* a stream finished both ways lost nothing: no reset for it */
		if (!(s->flags & SF_OWNER_GONE) && s->cbs.on_reset &&
		    (s->flags & (SF_FIN_SENT | SF_FIN_RCVD)) != (SF_FIN_SENT | SF_FIN_RCVD))
			s->cbs.on_reset(s, s->arg, PROTO_RST_TUNNEL_DOWN);
		s->flags &= ~SF_TEARDOWN;
		if (s->flags & SF_OWNER_GONE)
			mux_stream_destroy(s);
	}
	evbuffer_free(m->ctl);
	free(m->tab);
	free(m);
}

/* Queue our HELLO. */
int mux_send_hello(mux *m, const tun_hello *h)
{
	tun_frame f = { .type = PROTO_HELLO, .u.hello = *h };

	if (tun_frame_encode(&f, m->scratch, sizeof(m->scratch)) < 0)
		return TUN_EINVAL;
	mux_ctl_frame(m, &f);
	return TUN_OK;
}

void mux_send_allow(mux *m, const uint8_t *p, uint16_t len)
{
	tun_frame f = { .type = PROTO_ALLOW, .len = len, .payload = p };

	mux_ctl_frame(m, &f);
}

void mux_send_link(mux *m, uint64_t bps, uint64_t tx_bps, uint32_t rtt_us)
{
	tun_frame f = { .type = PROTO_LINK, .u.link = { bps, tx_bps, rtt_us } };

	mux_ctl_frame(m, &f);
}

uint32_t mux_set_recv_window(mux *m, uint32_t window)
{
	m->recv_window = window < m->cfg.window ? m->cfg.window : window > PROTO_MAX_WINDOW ? PROTO_MAX_WINDOW : window;
	return m->recv_window;
}

void mux_set_quantum(mux *m, size_t quantum)
{
	m->cfg.quantum = quantum && quantum <= PROTO_MAX_PAYLOAD ? quantum : PROTO_MAX_PAYLOAD;
}

/* Queue a PING. */
void mux_ping(mux *m, uint64_t val)
{
	tun_frame f = { .type = PROTO_PING, .u.ping = val };

	mux_ctl_frame(m, &f);
}

/* Queue a GOAWAY frame with code and text. */
static void goaway_frame(mux *m, uint32_t code, const char *text)
{
	tun_frame f = { .type = PROTO_GOAWAY };

	f.u.goaway.last_sid = mux_peer_last(m);
	f.u.goaway.code = code;
	snprintf(f.u.goaway.text, sizeof(f.u.goaway.text), "%s", text ? text : "");
	for (char *p = f.u.goaway.text; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			*p = '?';
	mux_ctl_frame(m, &f);
}

/* Queue a GOAWAY: the peer's streams are refused from now on. */
void mux_goaway(mux *m, uint32_t code, const char *text)
{
	m->goaway_sent = 1;
	goaway_frame(m, code, text);
}

void mux_renew(mux *m, const char *text)
{
	goaway_frame(m, PROTO_GOAWAY_RENEW, text);
}

/* 1 once the peer's HELLO was accepted. */
int mux_ready(const mux *m)
{
	return m->hello_rcvd;
}

/* Stream ids we can still open (ids are u32 and never reused). */
uint32_t mux_ids_left(const mux *m)
{
	return m->next_sid >= MUX_LAST_SID ? 0 : (MUX_LAST_SID - m->next_sid) / 2;
}

uint32_t mux_peer_last(const mux *m)
{
	return m->peer_last;
}

/* Counters. */
void mux_get_stats(const mux *m, tun_stats *st)
{
	*st = m->st;
}

/* Streams open. */
unsigned mux_streams(const mux *m)
{
	return m->n_ours + m->n_peer;
}

/* Open a stream; its OPEN goes out on its first turn, with its first data. */
tun_stream *mux_open(mux *m, const tun_open_info *o, const tun_stream_cbs *cbs,
		     void *arg, int *err)
{
	tun_stream *s;
	tun_frame chk = { .type = PROTO_OPEN, .sid = 1, .u.open = *o };

	*err = !m->hello_rcvd ? TUN_EDOWN : m->goaway_rcvd ? TUN_EGOAWAY :
	       m->n_ours >= m->peer_max_streams || mux_ids_left(m) == 0 ? TUN_ELIMIT :
	       tun_frame_encode(&chk, m->scratch, sizeof(m->scratch)) < 0 ? TUN_EINVAL : TUN_OK;
	if (*err != TUN_OK)
		return NULL;
	s = stream_new(m, m->next_sid);
	if (!s) {
		*err = TUN_ENOMEM;
		return NULL;
	}
	m->next_sid += 2;
	s->open = *o;
	s->flags |= SF_OPEN_PENDING;
	tun_stream_set_cbs(s, cbs, arg);
	mux_stream_activate(s);
	return s;
}

