/*
 * conn.c: the life of one tunnel connection.
 *
 *   client: CONNECTING --TCP up--> TLS --handshake--> HELLO --peer HELLO ok--> UP
 *   server:                        TLS --handshake--> HELLO --peer HELLO ok--> UP
 *   any state --error, timeout, EOF, bad frame--> CLOSING --output flushed--> freed
 *
 * conn_fail() is the one place a connection leaves the running states.  It
 * resets the streams (through mux_free), reports on_down (was up) or on_error
 * (was not), sends a GOAWAY naming the reason when TLS is up, and frees the
 * connection once that is flushed and the peer closed too (a lingering
 * close: input is read and dropped meanwhile, so that unread bytes never
 * make the kernel answer with a RST that destroys what we sent), or after
 * the keepalive timeout.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <linux/tcp.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include "conn_int.h"
#include "frame.h"
#include "mux.h"
#include "tls.h"

static void conn_fail(tun_conn *c, uint32_t code, const char *why);

/* Monotonic clock in microseconds. */
static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A timeval of ms milliseconds. */
static struct timeval tv_ms(unsigned ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	return tv;
}

/* Fill defaults and check ranges (see conn.h). */
int tun_ep_init(struct tun_ep *ep, struct event_base *base, const tun_config *cfg,
		const tun_cbs *cbs, void *arg, int client, char *err, size_t errlen)
{
	tun_config *c = &ep->cfg;

	memset(ep, 0, sizeof(*ep));
	ep->base = base;
	*c = *cfg;
	ep->cbs = *cbs;
	ep->arg = arg;
	ep->client = client;
	TAILQ_INIT(&ep->conns);
	LIST_INIT(&ep->lingers);
	snprintf(ep->node_name, sizeof(ep->node_name), "%s", cfg->node_name ? cfg->node_name : "wanopt");
	snprintf(ep->peer_name, sizeof(ep->peer_name), "%s", cfg->peer_name ? cfg->peer_name : "");
	snprintf(ep->refuse_name, sizeof(ep->refuse_name), "%s", cfg->refuse_name ? cfg->refuse_name : "");
	c->caps = c->caps ? c->caps : PROTO_CAP_ALL;
	c->role = c->role ? c->role : client ? PROTO_ROLE_EDGE : PROTO_ROLE_CORE;
	c->window = c->window ? c->window : PROTO_INITIAL_WINDOW;
	c->max_streams = c->max_streams ? c->max_streams : PROTO_DEFAULT_STREAMS;
	c->sendq_hiwat = c->sendq_hiwat ? c->sendq_hiwat : 256 * 1024;
	c->sendq_max = c->sendq_max ? c->sendq_max : c->sendq_hiwat + 4 * 1024 * 1024;
	c->quantum = c->quantum ? c->quantum : PROTO_MAX_PAYLOAD;
	/* the output buffer: enough to fill TLS records, small enough that
	 * scheduling decisions stay fresh */
	c->out_buffer = c->out_buffer ? c->out_buffer : 64 * 1024;
	c->keepalive_ms = c->keepalive_ms ? c->keepalive_ms : 5000;
	c->keepalive_timeout_ms = c->keepalive_timeout_ms ? c->keepalive_timeout_ms : 3 * c->keepalive_ms;
	c->keepalive_stall_ms = c->keepalive_stall_ms ? c->keepalive_stall_ms : 15000;
	if (c->keepalive_stall_ms < c->keepalive_timeout_ms)
		c->keepalive_stall_ms = c->keepalive_timeout_ms;
	c->handshake_timeout_ms = c->handshake_timeout_ms ? c->handshake_timeout_ms : 10000;
	c->backoff_min_ms = c->backoff_min_ms ? c->backoff_min_ms : 200;
	c->backoff_max_ms = c->backoff_max_ms ? c->backoff_max_ms : 30000;
	c->conns = c->conns ? c->conns : 1;
	c->version_min = c->version_min ? c->version_min : PROTO_VERSION_MIN;
	c->version_max = c->version_max ? c->version_max : PROTO_VERSION;
	if (c->window < PROTO_MIN_WINDOW || c->window > PROTO_MAX_WINDOW ||
	    c->max_streams > PROTO_MAX_STREAMS || c->conns > TUN_MAX_CONNS ||
	    c->version_min > c->version_max || c->role > PROTO_ROLE_TOOL ||
	    c->sendq_max < c->sendq_hiwat || c->backoff_min_ms > c->backoff_max_ms ||
	    c->quantum > PROTO_MAX_PAYLOAD || c->out_buffer < 1024) {
		snprintf(err, errlen, "tunnel configuration: a value is out of range");
		return TUN_EINVAL;
	}
	if (!ep->node_name[0] || (cfg->node_name && strlen(cfg->node_name) > PROTO_NAME_MAX)) {
		snprintf(err, errlen, "tunnel configuration: node name must be 1..%d characters",
			 PROTO_NAME_MAX);
		return TUN_EINVAL;
	}
	for (const char *p = ep->node_name; *p; p++) {
		if (*p < 0x21 || *p > 0x7e) {
			snprintf(err, errlen, "tunnel configuration: node name '%s' not printable", ep->node_name);
			return TUN_EINVAL;
		}
	}
	return TUN_OK;
}

/* ---- mux callbacks ------------------------------------------------------- */

/* The mux has output: run the pump from the event loop. */
static void ops_kick(void *arg)
{
	tun_conn *c = arg;

	if (c->state != CS_CLOSING)
		event_active(c->pump, EV_TIMEOUT, 0);
}

/* c is up: the connections it replaces (tun_ep_renew) take no more streams. */
static void renewed(tun_conn *c)
{
	tun_conn *o, *next;

	for (o = TAILQ_FIRST(&c->ep->conns); o; o = next) {
		next = TAILQ_NEXT(o, link);
		if (o != c && o->renewing) {
			o->renewing = 0;
			tun_conn_goaway(o, c->ep->renew_text);
		}
	}
}

/* Negotiate the version; the connection is up. */
static int ops_hello(void *arg, const tun_hello *h, char *err, size_t errlen)
{
	tun_conn *c = arg;
	const tun_config *cfg = &c->ep->cfg;
	unsigned lo = h->vmin > cfg->version_min ? h->vmin : cfg->version_min;
	unsigned hi = h->vmax < cfg->version_max ? h->vmax : cfg->version_max;
	size_t n = strlen(c->peer);

	if (lo > hi) {
		snprintf(err, errlen, "no common protocol version: peer %s speaks %u..%u, we speak %u..%u",
			 h->name, h->vmin, h->vmax, cfg->version_min, cfg->version_max);
		return TUN_EVERSION;
	}
	c->hello = *h;
	c->version = hi;
	c->caps = h->caps & cfg->caps;
	snprintf(c->peer + n, sizeof(c->peer) - n, " (%s)", h->name);
	c->state = CS_UP;
	c->ep->nup++;
	c->ep->npending--;
	event_del(c->hs_timer);
	struct timeval ka = tv_ms(cfg->keepalive_ms);
	event_add(c->ka_timer, &ka);
	c->ka_tick_us = now_us();
	c->ka_quiet_us = 0;
	mux_ping(c->m, now_us()); /* an RTT sample now, not a keepalive period later */
	renewed(c);
	if (c->ep->cbs.on_up)
		c->ep->cbs.on_up(c, c->ep->arg);
	return TUN_OK;
}

/* The peer opened a stream: hand it to the layer above. */
static void ops_stream(void *arg, tun_stream *s, const tun_open_info *o)
{
	tun_conn *c = arg;

	if (c->ep->cbs.on_stream)
		c->ep->cbs.on_stream(c, s, o, c->ep->arg);
	else
		tun_stream_reset(s, PROTO_RST_REFUSED);
}

/* RTT sample from a PONG, smoothed like TCP's SRTT (gain 1/8). */
static void ops_pong(void *arg, uint64_t val)
{
	tun_conn *c = arg;
	uint64_t now = now_us(), rtt = now > val ? now - val : 0;

	c->rtt_us = c->rtt_us ? (7 * c->rtt_us + rtt) / 8 : rtt;
}

/* The peer's link changed: keep its fields with its HELLO; tell the owner
 * (not for a repeat of what it said last). */
static void ops_link(void *arg, uint64_t bps, uint64_t tx_bps, uint32_t rtt_us)
{
	tun_conn *c = arg;

	if (c->hello.link_bps == bps && c->hello.link_tx_bps == tx_bps && c->hello.link_rtt_us == rtt_us)
		return;
	c->hello.link_bps = bps;
	c->hello.link_tx_bps = tx_bps;
	c->hello.link_rtt_us = rtt_us;
	if (c->state == CS_UP && c->ep->cbs.on_link)
		c->ep->cbs.on_link(c, c->ep->arg);
}

/* The peer's allow list (unchecked payload): to the owner. */
static void ops_allow(void *arg, const uint8_t *p, uint16_t len)
{
	tun_conn *c = arg;

	if (c->state == CS_UP && c->ep->cbs.on_allow)
		c->ep->cbs.on_allow(c, c->ep->arg, p, len);
}

/* c takes no new streams: its client slot dials a replacement now. */
static void conn_detach_slot(tun_conn *c)
{
	int slot = c->slot;

	if (slot >= 0 && c->ep->conn_gone) {
		c->slot = -1;
		c->ep->conn_gone(c->ep, slot, 1);
	}
}

/* The peer goes away: take no new streams here; keep its reason.  Or it
 * asks for a replacement (a client's only): as tun_ep_renew. */
static void ops_goaway(void *arg, uint32_t code, const char *text)
{
	tun_conn *c = arg;

	if (code == PROTO_GOAWAY_RENEW) {
		if (c->slot >= 0 && !c->goaway_sent) {
			snprintf(c->ep->renew_text, sizeof(c->ep->renew_text), "renewed as asked: %.200s", text);
			c->renewing = 1;
			conn_detach_slot(c);
		}
		return;
	}
	c->goaway_rcvd = 1;
	snprintf(c->goaway_text, sizeof(c->goaway_text), "%s", text[0] ? text : "no reason given");
	(void)code;
	conn_detach_slot(c);
}

static const mux_ops conn_mux_ops = {
	.kick = ops_kick, .on_hello = ops_hello, .on_stream = ops_stream,
	.on_pong = ops_pong, .on_goaway = ops_goaway, .on_link = ops_link, .on_allow = ops_allow,
};

/* ---- event callbacks ----------------------------------------------------- */

/* Move frames from the mux into the TLS output. */
static void conn_pump(evutil_socket_t fd, short what, void *arg)
{
	tun_conn *c = arg;

	(void)fd; (void)what;
	if (!c->m || c->state == CS_CLOSING)
		return;
	mux_output(c->m, bufferevent_get_output(c->bev), conn_share(c));
	if (c->state == CS_UP && (c->goaway_rcvd || c->goaway_sent) && mux_streams(c->m) == 0 && !mux_pending(c->m)) {
		c->drained = 1;
		conn_fail(c, PROTO_GOAWAY_NORMAL, "drained after GOAWAY");
	}
}

/* Frames arrived. */
static void conn_read(struct bufferevent *bev, void *arg)
{
	tun_conn *c = arg;
	char err[256];
	uint32_t code;

	if (c->state == CS_CLOSING || !c->m) {
		evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
		return;
	}
	c->last_rx_us = now_us();
	if (mux_input(c->m, bufferevent_get_input(bev), &code, err, sizeof(err)) != TUN_OK) {
		conn_fail(c, code, err);
		return;
	}
	conn_pump(-1, 0, c);
}

/* Free c: no callbacks. */
static void conn_destroy(tun_conn *c)
{
	TAILQ_REMOVE(&c->ep->conns, c, link);
	mux_free(c->m);
	if (c->bev)
		bufferevent_free(c->bev);
	else if (c->fd >= 0)
		close(c->fd);
	event_free(c->pump);
	event_free(c->hs_timer);
	event_free(c->ka_timer);
	if (c->conn_ev)
		event_free(c->conn_ev);
	free(c);
}

/* Output drained: more frames, or the end of CLOSING. */
static void conn_write(struct bufferevent *bev, void *arg)
{
	tun_conn *c = arg;

	if (c->state == CS_CLOSING) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0 && !c->shut_wr) {
			c->shut_wr = 1;
			shutdown(bufferevent_getfd(bev), SHUT_WR);
		}
		return;
	}
	conn_pump(-1, 0, c);
}

/* TLS handshake done: start the HELLO exchange. */
static void conn_tls_up(tun_conn *c)
{
	const tun_config *cfg = &c->ep->cfg;
	tun_hello h = { .vmin = cfg->version_min, .vmax = cfg->version_max, .caps = cfg->caps,
			.window = cfg->window, .max_streams = cfg->max_streams, .role = cfg->role,
			.link_bps = cfg->link_rx_bps, .link_tx_bps = cfg->link_tx_bps,
			.link_rtt_us = cfg->link_rtt_us };
	mux_cfg mc = { .conn = c, .odd = c->ep->client, .window = cfg->window,
		       .max_streams = cfg->max_streams, .sendq_hiwat = cfg->sendq_hiwat,
		       .sendq_max = cfg->sendq_max, .quantum = cfg->quantum };

	memcpy(h.store_id, cfg->store_id, sizeof(h.store_id));
	snprintf(h.name, sizeof(h.name), "%s", c->ep->node_name);
	c->m = mux_new(&mc, &conn_mux_ops, c);
	if (!c->m || mux_send_hello(c->m, &h) != TUN_OK) {
		conn_fail(c, PROTO_GOAWAY_INTERNAL, "out of memory");
		return;
	}
	c->state = CS_HELLO;
	c->last_rx_us = now_us();
	conn_pump(-1, 0, c);
}

/* TLS connected, or the connection failed/closed. */
static void conn_event(struct bufferevent *bev, short what, void *arg)
{
	tun_conn *c = arg;
	char why[512], reason[400];

	if (what & BEV_EVENT_CONNECTED) {
		if (c->state == CS_TLS)
			conn_tls_up(c);
		return;
	}
	if (c->state == CS_CLOSING) {
		conn_destroy(c);
		return;
	}
	c->io_dead = 1;
	tun_tls_reason(bev, what, reason, sizeof(reason));
	if (c->goaway_rcvd)
		snprintf(why, sizeof(why), "peer went away: %s", c->goaway_text);
	else
		snprintf(why, sizeof(why), "%s%s", c->state == CS_TLS ? "TLS handshake failed: " : "",
			 reason);
	conn_fail(c, PROTO_GOAWAY_PROTOCOL, why);
}

/* Handshake deadline passed, or the closing flush took too long. */
static void conn_hs_timeout(evutil_socket_t fd, short what, void *arg)
{
	tun_conn *c = arg;

	(void)fd; (void)what;
	if (c->state == CS_CLOSING)
		conn_destroy(c);
	else
		conn_fail(c, PROTO_GOAWAY_TIMEOUT, "handshake timeout");
}

/* The keepalive's look at the connection's TCP (TCP_INFO), every tick:
 * *heard_ms since the peer's TCP last sent us a segment (data or an ACK, in
 * order or not; UINT32_MAX if unknown); returns 1 if a loss was being
 * repaired within the last within_ms: we retransmitted, or its segments
 * arrived out of order. */
static int tcp_repairing(tun_conn *c, uint64_t now, unsigned within_ms, uint32_t *heard_ms)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int fd = tun_conn_fd(c);

	memset(&ti, 0, sizeof(ti)); /* an older kernel fills less */
	*heard_ms = UINT32_MAX;
	if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return 0;
	*heard_ms = ti.tcpi_last_ack_recv < ti.tcpi_last_data_recv ? ti.tcpi_last_ack_recv : ti.tcpi_last_data_recv;
	if (ti.tcpi_total_retrans != c->ka_retrans || ti.tcpi_rcv_ooopack != c->ka_ooo) {
		c->ka_retrans = ti.tcpi_total_retrans;
		c->ka_ooo = ti.tcpi_rcv_ooopack;
		c->ka_loss_us = now;
	}
	return c->ka_loss_us && now - c->ka_loss_us <= (uint64_t)within_ms * 1000;
}

/* The peer's silence at this keepalive tick (us): time since its last frame,
 * where each gap between our ticks counts for at most two keepalive
 * intervals.  A gap longer than that means our own loop was held (a long
 * callback, the process stopped or not scheduled): the peer was not heard
 * because we did not listen, and a healthy tunnel must not be dropped for
 * it.  An edge stopped for 1.5 s while idle used to give up on its tunnel on
 * waking, resetting every stream.  A peer that is really gone is still
 * noticed, a tick or two later; even if every tick comes late. */
static uint64_t quiet_time(tun_conn *c, uint64_t now)
{
	uint64_t cap = 2000ull * c->ep->cfg.keepalive_ms;
	uint64_t from = c->ka_tick_us;

	if (c->last_rx_us >= c->ka_tick_us) { /* heard since the last tick */
		c->ka_quiet_us = 0;
		from = c->last_rx_us;
	}
	if (now > from)
		c->ka_quiet_us += now - from < cap ? now - from : cap;
	c->ka_tick_us = now;
	return c->ka_quiet_us;
}

/* Keepalive tick: fail on silence, else PING with our clock.  No frame for
 * keepalive_timeout_ms is fatal, except while TCP is repairing a loss and
 * the peer's TCP still sends: on a lossy link under load, frames (our PONGs
 * too) wait behind a lost segment until its retransmission arrives, longer
 * than a short timeout.  That is tolerated up to keepalive_stall_ms.  A dead
 * path or host, or a frozen peer process, is noticed after the timeout; a
 * dead process at once (its kernel closes the connection). */
static void conn_keepalive(evutil_socket_t fd, short what, void *arg)
{
	tun_conn *c = arg;
	const tun_config *cfg = &c->ep->cfg;
	uint64_t now = now_us(), quiet_ms = quiet_time(c, now) / 1000;
	uint32_t heard_ms;
	int repairing = tcp_repairing(c, now, cfg->keepalive_timeout_ms, &heard_ms);
	int heard = heard_ms <= cfg->keepalive_timeout_ms;
	char why[128];

	(void)fd; (void)what;
	if (quiet_ms > cfg->keepalive_timeout_ms && !(repairing && heard && quiet_ms <= cfg->keepalive_stall_ms)) {
		snprintf(why, sizeof(why), "keepalive timeout: %s for %llu ms%s",
			 heard ? "no frame" : "nothing received", (unsigned long long)quiet_ms,
			 !heard ? "" : repairing ? " (stalled behind lost packets)" : " (its TCP still answers)");
		conn_fail(c, PROTO_GOAWAY_TIMEOUT, why);
		return;
	}
	mux_ping(c->m, now);
}

/* ---- state changes -------------------------------------------------------- */

/* Leave the running states (see the top of the file). */
static void conn_fail(tun_conn *c, uint32_t code, const char *why)
{
	struct tun_ep *ep = c->ep;
	int was_up = c->state == CS_UP, tls = c->state >= CS_HELLO;
	tun_frame ga = { .type = PROTO_GOAWAY, .u.goaway.code = code };
	uint8_t buf[TUN_FRAME_MAX];
	char msg[700];
	int n;

	if (c->state == CS_CLOSING)
		return;
	snprintf(msg, sizeof(msg), "tunnel %s %s: %s", ep->client ? "to" : "from", c->peer, why);
	c->state = CS_CLOSING;
	event_del(c->ka_timer);
	event_del(c->hs_timer);
	if (was_up)
		ep->nup--;
	else
		ep->npending--;
	if (c->m) {
		mux_get_stats(c->m, &c->st);
		ga.u.goaway.last_sid = mux_peer_last(c->m); /* the peer's streams that may have run */
	}
	mux_free(c->m);        /* streams get on_reset(TUNNEL_DOWN) */
	c->m = NULL;
	if (ep->conn_gone && c->slot >= 0)
		ep->conn_gone(ep, c->slot, was_up);
	if (was_up && ep->cbs.on_down)
		ep->cbs.on_down(c, ep->arg, msg);
	else if (!was_up && ep->cbs.on_error)
		ep->cbs.on_error(ep->arg, msg);
	if (!tls || c->io_dead) {
		if (!tls && !ep->client && c->bev)
			tun_linger(ep, bufferevent_getfd(c->bev)); /* the peer hears our alert */
		conn_destroy(c);
		return;
	}
	snprintf(ga.u.goaway.text, sizeof(ga.u.goaway.text), "%.200s", why);
	for (char *p = ga.u.goaway.text; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			*p = '?';
	n = tun_frame_encode(&ga, buf, sizeof(buf));
	if (n > 0)
		bufferevent_write(c->bev, buf, (size_t)n);
	bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
	bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
	struct timeval tv = tv_ms(ep->cfg.keepalive_timeout_ms);
	event_add(c->hs_timer, &tv);
}

/* Allocate a connection in state st and put it on ep's list. */
static tun_conn *conn_new(struct tun_ep *ep, enum conn_state st, int fd, int slot)
{
	tun_conn *c = calloc(1, sizeof(*c));

	if (!c)
		goto err_0;
	c->pump = event_new(ep->base, -1, 0, conn_pump, c);
	c->hs_timer = evtimer_new(ep->base, conn_hs_timeout, c);
	c->ka_timer = event_new(ep->base, -1, EV_PERSIST, conn_keepalive, c);
	if (!c->pump || !c->hs_timer || !c->ka_timer)
		goto err_1;
	c->ep = ep;
	c->out_buffer = ep->cfg.out_buffer;
	c->state = st;
	c->fd = fd;
	c->slot = slot;
	TAILQ_INSERT_TAIL(&ep->conns, c, link);
	ep->npending++;
	struct timeval tv = tv_ms(ep->cfg.handshake_timeout_ms);
	event_add(c->hs_timer, &tv);
	return c;
err_1:
	if (c->pump)
		event_free(c->pump);
	if (c->hs_timer)
		event_free(c->hs_timer);
	if (c->ka_timer)
		event_free(c->ka_timer);
	free(c);
err_0:
	return NULL;
}

/* Wrap the connected socket in TLS and start the handshake. */
static void conn_start_tls(tun_conn *c)
{
	struct tun_ep *ep = c->ep;
	SSL *ssl = SSL_new(ep->ssl);

	if (!ssl) {
		conn_fail(c, PROTO_GOAWAY_INTERNAL, "SSL_new failed");
		return;
	}
	if (ep->client && ep->peer_name[0])
		SSL_set1_host(ssl, ep->peer_name);
	if (!ep->client && ep->refuse_name[0] && tun_tls_refuse(ssl, ep->refuse_name) != 0) {
		SSL_free(ssl);
		conn_fail(c, PROTO_GOAWAY_INTERNAL, "SSL_set_ex_data failed");
		return;
	}
	c->bev = bufferevent_openssl_socket_new(ep->base, c->fd, ssl,
		ep->client ? BUFFEREVENT_SSL_CONNECTING : BUFFEREVENT_SSL_ACCEPTING,
		BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev) {
		SSL_free(ssl);
		conn_fail(c, PROTO_GOAWAY_INTERNAL, "bufferevent_openssl_socket_new failed");
		return;
	}
	c->fd = -1;   /* owned by the bufferevent now */
	/* a peer vanishing without close_notify reads as EOF, not as an SSL error */
	bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
	c->state = CS_TLS;
	bufferevent_setcb(c->bev, conn_read, conn_write, conn_event, c);
	bufferevent_setwatermark(c->bev, EV_WRITE, c->out_buffer / 2, 0);
	bufferevent_setwatermark(c->bev, EV_READ, 0, CONN_IN_MAX);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

/* The client socket became writable: connect finished or failed. */
static void conn_connected(evutil_socket_t fd, short what, void *arg)
{
	tun_conn *c = arg;
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	char why[256];

	(void)what;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		soerr = errno;
	if (soerr) {
		snprintf(why, sizeof(why), "connect: %s", strerror(soerr));
		conn_fail(c, PROTO_GOAWAY_INTERNAL, why);
		return;
	}
	if (c->ep->cbs.on_fd)
		c->ep->cbs.on_fd(c->ep->arg, fd, TUN_FD_CONNECTED);
	conn_start_tls(c);
}

/* Start a client connection (see conn.h). */
void tun_conn_connect(struct tun_ep *ep, const struct sockaddr *sa, socklen_t salen,
		      const char *peer, int slot)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	tun_conn *c;
	char why[256];

	if (fd < 0 || !(c = conn_new(ep, CS_CONNECTING, fd, slot))) {
		snprintf(why, sizeof(why), "tunnel to %s: %s", peer,
			 fd < 0 ? strerror(errno) : "out of memory");
		if (fd >= 0)
			close(fd);
		if (ep->conn_gone)
			ep->conn_gone(ep, slot, 0);
		if (ep->cbs.on_error)
			ep->cbs.on_error(ep->arg, why);
		return;
	}
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	if (ep->cbs.on_fd)
		ep->cbs.on_fd(ep->arg, fd, TUN_FD_PRE_CONNECT);
	if (connect(fd, sa, salen) < 0 && errno != EINPROGRESS) {
		snprintf(why, sizeof(why), "connect: %s", strerror(errno));
		conn_fail(c, PROTO_GOAWAY_INTERNAL, why);
		return;
	}
	c->conn_ev = event_new(ep->base, fd, EV_WRITE, conn_connected, c);
	if (!c->conn_ev || event_add(c->conn_ev, NULL) < 0)
		conn_fail(c, PROTO_GOAWAY_INTERNAL, "event_new failed");
}

/* CONN_MAX_PENDING handshakes in progress: the oldest still in its TLS
 * handshake (never authenticated) goes to make room, so that connections
 * that send nothing (or dribble) cannot keep real peers out; logged once a
 * second at most.  0, or -1 if every one is past TLS (the new one is refused). */
static int evict_oldest_handshake(struct tun_ep *ep, const char *newcomer)
{
	tun_conn *c;
	TAILQ_FOREACH(c, &ep->conns, link)
		if (c->state == CS_TLS)
			break;
	if (!c)
		return -1;
	ep->npending--;
	c->state = CS_CLOSING;
	conn_destroy(c);
	ep->evicted++;
	uint64_t now = now_us();
	if (now - ep->evict_log_us >= 1000000 && ep->cbs.on_error) {
		char why[256];
		snprintf(why, sizeof(why), "tunnel from %s: %u handshakes in progress: the oldest unauthenticated"
			 " ones dropped to make room (%u since the last such line)", newcomer, CONN_MAX_PENDING,
			 ep->evicted);
		ep->evicted = 0;
		ep->evict_log_us = now;
		ep->cbs.on_error(ep->arg, why);
	}
	return 0;
}

/* Start the server side of an accepted connection (see conn.h). */
void tun_conn_accept(struct tun_ep *ep, int fd, const struct sockaddr *sa)
{
	tun_conn *c;
	char why[160], addr[80];

	tun_sockaddr_format(sa, addr, sizeof(addr));
	if (ep->npending >= CONN_MAX_PENDING && evict_oldest_handshake(ep, addr)) {
		close(fd);
		if (ep->cbs.on_error && now_us() - ep->evict_log_us >= 1000000) { /* once a second */
			ep->evict_log_us = now_us();
			snprintf(why, sizeof(why), "tunnel from %s: refused: %u handshakes in progress",
				 addr, ep->npending);
			ep->cbs.on_error(ep->arg, why);
		}
		return;
	}
	c = conn_new(ep, CS_TLS, fd, -1);
	if (!c) {
		close(fd);
		return;
	}
	snprintf(c->peer, sizeof(c->peer), "%s", addr);
	if (ep->cbs.on_fd)
		ep->cbs.on_fd(ep->arg, fd, TUN_FD_ACCEPTED);
	conn_start_tls(c);
}

/* Free every connection (see conn.h). */
void tun_ep_close_all(struct tun_ep *ep)
{
	tun_conn *c;

	while ((c = TAILQ_FIRST(&ep->conns))) {
		if (c->state == CS_UP)
			ep->nup--;
		else if (c->state != CS_CLOSING)
			ep->npending--;
		c->state = CS_CLOSING;
		conn_destroy(c);
	}
	tun_linger_close_all(ep);
}

/* ---- public accessors ----------------------------------------------------- */

/* GOAWAY on every connection that is up; each closes once drained. */
void tun_ep_goaway(struct tun_ep *ep, const char *text)
{
	tun_conn *c, *next;

	for (c = TAILQ_FIRST(&ep->conns); c; c = next) {
		next = TAILQ_NEXT(c, link);
		tun_conn_goaway(c, text);
	}
}

int tun_conn_drained(const tun_conn *c)
{
	return c->drained;
}

/* See conn.h. */
void tun_ep_renew(struct tun_ep *ep, const char *text)
{
	tun_conn *c, *next;

	snprintf(ep->renew_text, sizeof(ep->renew_text), "%s", text);
	for (c = TAILQ_FIRST(&ep->conns); c; c = next) {
		next = TAILQ_NEXT(c, link);
		if (c->state != CS_UP || c->goaway_rcvd || c->goaway_sent)
			continue;
		if (c->slot < 0) { /* a server's: the client dials */
			if (c->caps & PROTO_CAP_RENEW)
				mux_renew(c->m, text);
			else
				tun_conn_goaway(c, text);
			continue;
		}
		c->renewing = 1;
		conn_detach_slot(c);
	}
}

/* New link fields: for the HELLOs of later connections, and in a LINK frame
 * on each connection up whose peer reads them. */
void tun_ep_set_link(struct tun_ep *ep, uint64_t rx_bps, uint64_t tx_bps, uint32_t rtt_us)
{
	tun_conn *c;

	ep->cfg.link_rx_bps = rx_bps;
	ep->cfg.link_tx_bps = tx_bps;
	ep->cfg.link_rtt_us = rtt_us;
	TAILQ_FOREACH(c, &ep->conns, link)
		if (c->state == CS_UP && (c->hello.caps & PROTO_CAP_LINK))
			mux_send_link(c->m, rx_bps, tx_bps, rtt_us);
}

/* See tun.h. */
int tun_conn_send_allow(tun_conn *c, const uint8_t *p, size_t len)
{
	if (c->state != CS_UP || !(c->hello.caps & PROTO_CAP_ALLOW))
		return 0;
	if (len < 2 || len > PROTO_MAX_PAYLOAD)
		return -1;
	mux_send_allow(c->m, p, (uint16_t)len);
	return 1;
}

/* The up connection taking new streams with the fewest streams, or NULL. */
tun_conn *tun_ep_least_loaded(struct tun_ep *ep)
{
	tun_conn *best = NULL, *c;

	TAILQ_FOREACH(c, &ep->conns, link) {
		if (c->state != CS_UP || c->goaway_rcvd || c->goaway_sent)
			continue;
		if (!best || mux_streams(c->m) < mux_streams(best->m))
			best = c;
	}
	return best;
}

uint32_t tun_conn_set_recv_window(tun_conn *c, uint32_t window)
{
	return c->m ? mux_set_recv_window(c->m, window) : 0;
}

/* Accessors (see tun.h): plain reads of the connection's fields. */
const char *tun_conn_peer(const tun_conn *c) { return c->peer; }
uint64_t tun_conn_link_bps(const tun_conn *c) { return c->link_bps; }
const tun_hello *tun_conn_hello(const tun_conn *c) { return c->state == CS_UP ? &c->hello : NULL; }
unsigned tun_conn_version(const tun_conn *c) { return c->version; }
uint32_t tun_conn_caps(const tun_conn *c) { return c->caps; }
uint64_t tun_conn_rtt_us(const tun_conn *c) { return c->rtt_us; }
int tun_conn_fd(const tun_conn *c) { return c->bev ? bufferevent_getfd(c->bev) : c->fd; }
unsigned tun_conn_streams(const tun_conn *c) { return c->m ? mux_streams(c->m) : 0; }

/* Counters of c (kept after its mux is gone). */
void tun_conn_get_stats(const tun_conn *c, tun_stats *st)
{
	if (c->m)
		mux_get_stats(c->m, st);
	else
		*st = c->st;
}

/* Open a stream on c. */
tun_stream *tun_conn_open(tun_conn *c, const tun_open_info *o,
			  const tun_stream_cbs *cbs, void *arg, int *err)
{
	if (c->state != CS_UP) {
		*err = TUN_EDOWN;
		return NULL;
	}
	tun_stream *s;

	if (c->goaway_rcvd || c->goaway_sent) {
		*err = TUN_EGOAWAY;
		return NULL;
	}
	tun_open_info oc = *o;
	if (!(c->caps & PROTO_CAP_DSCP)) /* a peer that would refuse the flag */
		oc.flags &= (uint8_t)~PROTO_OPEN_F_DSCP;
	s = mux_open(c->m, &oc, cbs, arg, err);
	if (s && mux_ids_left(c->m) < CONN_RETIRE_IDS) {
		/* ids running out: retire c, a fresh connection takes over */
		tun_conn_goaway(c, "stream ids exhausted: reconnecting");
		conn_detach_slot(c);
	}
	return s;
}

/* Send GOAWAY on c. */
void tun_conn_goaway(tun_conn *c, const char *text)
{
	if (!c->m || c->state != CS_UP || c->goaway_sent)
		return;
	c->goaway_sent = 1;
	mux_goaway(c->m, PROTO_GOAWAY_NORMAL, text);   /* kicks the pump: closes if idle */
}
