/*
 * stream.c: the stream owner API of tun.h (write, room, consumed, close,
 * reset, ask, ack, free).  The frames and scheduling live in mux.c.
 */
#include <string.h>

#include <event2/buffer.h>

#include "mux_int.h"

/* Set the owner callbacks. */
void tun_stream_set_cbs(tun_stream *s, const tun_stream_cbs *cbs, void *arg)
{
	if (cbs)
		s->cbs = *cbs;
	else
		memset(&s->cbs, 0, sizeof(s->cbs));
	s->arg = arg;
}

/* Check that s accepts more bytes to send. */
static int write_check(const tun_stream *s, size_t len)
{
	if (!s->m || (s->flags & (SF_DEAD | SF_FIN_QUEUED | SF_OWNER_GONE)))
		return TUN_ECLOSED;
	if (evbuffer_get_length(s->sendq) + len > s->m->cfg.sendq_max)
		return TUN_ELIMIT;
	return TUN_OK;
}

/* After queuing: schedule, and note a full queue. */
static void write_done(tun_stream *s)
{
	if (evbuffer_get_length(s->sendq) >= s->m->cfg.sendq_hiwat)
		s->flags |= SF_WANT_WRITABLE;
	mux_stream_activate(s);
}

/* Queue bytes. */
int tun_stream_write(tun_stream *s, const void *buf, size_t len)
{
	int rc = write_check(s, len);

	if (rc != TUN_OK)
		return rc;
	if (len && evbuffer_add(s->sendq, buf, len) != 0)
		return TUN_ENOMEM;
	write_done(s);
	return TUN_OK;
}

/* Queue all of src. */
int tun_stream_write_buffer(tun_stream *s, struct evbuffer *src)
{
	int rc = write_check(s, evbuffer_get_length(src));

	if (rc != TUN_OK)
		return rc;
	if (evbuffer_add_buffer(s->sendq, src) != 0)
		return TUN_ENOMEM;
	write_done(s);
	return TUN_OK;
}

/* Room before the high mark. */
size_t tun_stream_room(const tun_stream *s)
{
	size_t q = evbuffer_get_length(s->sendq);

	if (write_check(s, 0) != TUN_OK || q >= s->m->cfg.sendq_hiwat)
		return 0;
	return s->m->cfg.sendq_hiwat - q;
}

/* Bytes queued. */
size_t tun_stream_queued(const tun_stream *s)
{
	return evbuffer_get_length(s->sendq);
}

/* Return credit for n consumed bytes, in batches of a quarter window. */
void tun_stream_consumed(tun_stream *s, size_t n)
{
	tun_frame f = { .type = PROTO_CREDIT, .sid = s->sid };

	if (!s->m || (s->flags & SF_DEAD))
		return;
	if (n > s->recv_held)
		n = (size_t)s->recv_held;
	s->recv_held -= n;
	s->recv_grant += (uint32_t)n;
	if (s->flags & SF_FIN_RCVD || s->recv_grant < s->window / 4)
		return;
	f.u.credit = s->recv_grant;
	s->recv_left += s->recv_grant;
	s->recv_grant = 0;
	mux_ctl_frame(s->m, &f);
}

/* Half-close our direction. */
int tun_stream_close(tun_stream *s)
{
	int rc = write_check(s, 0);

	if (rc != TUN_OK)
		return rc == TUN_ELIMIT ? TUN_OK : rc;
	s->flags |= SF_FIN_QUEUED;
	mux_stream_activate(s);
	return TUN_OK;
}

/* Abort s. */
void tun_stream_reset(tun_stream *s, int code)
{
	if (!s->m)
		return;
	if (code < 0 || code > PROTO_RST_MAX || code == PROTO_RST_TUNNEL_DOWN)
		code = PROTO_RST_INTERNAL;
	mux_stream_reset_local(s, (uint32_t)code);
}

/* Send ASK(seq). */
int tun_stream_ask(tun_stream *s, uint64_t seq)
{
	tun_frame f = { .type = PROTO_ASK, .sid = s->sid, .u.seq = seq };

	if (!s->m || (s->flags & SF_DEAD))
		return TUN_ECLOSED;
	mux_stream_announce(s);
	mux_ctl_frame(s->m, &f);
	return TUN_OK;
}

/* Send ACK(seq) with any credit not yet granted. */
int tun_stream_ack(tun_stream *s, uint64_t seq)
{
	tun_frame f = { .type = PROTO_ACK, .sid = s->sid, .u.ack.seq = seq };

	if (!s->m || (s->flags & SF_DEAD))
		return TUN_ECLOSED;
	mux_stream_announce(s);
	if (!(s->flags & SF_FIN_RCVD)) {
		f.u.ack.credit = s->recv_grant;
		s->recv_left += s->recv_grant;
		s->recv_grant = 0;
	}
	mux_ctl_frame(s->m, &f);
	return TUN_OK;
}

/* Release the owner's handle: a stream the owner closed and the peer closed
 * finishes sending; any other live stream is reset (CANCEL). */
void tun_stream_free(tun_stream *s)
{
	if (!s || (s->flags & SF_OWNER_GONE))
		return;
	s->flags |= SF_OWNER_GONE;
	memset(&s->cbs, 0, sizeof(s->cbs));
	if (!s->m) {
		if (!(s->flags & SF_TEARDOWN))
			mux_stream_destroy(s);
		return;
	}
	if (!(s->flags & SF_FIN_RCVD) || !(s->flags & SF_FIN_QUEUED))
		mux_stream_reset_local(s, PROTO_RST_CANCEL);   /* no-op if dead */
	mux_stream_reap_check(s);
	s->m->ops.kick(s->m->arg);
}

/* The stream id. */
uint32_t tun_stream_id(const tun_stream *s)
{
	return s->sid;
}

/* The connection, or NULL once dead. */
tun_conn *tun_stream_conn(const tun_stream *s)
{
	return s->m && !(s->flags & SF_DEAD) ? s->m->cfg.conn : NULL;
}

/* DATA counters of s. */
void tun_stream_get_stats(const tun_stream *s, tun_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->data_in = s->data_in;
	st->data_out = s->data_out;
}
