/*
 * edge_direct.c: the edge's client connections that do not go through the
 * tunnel: turned away with a reset, or sent direct to their destination (fail
 * open, passthrough, outside the core's allow list), including a connection
 * the core reset before its destination got any of it (px_edge_take_refused):
 * what the edge read of it goes there first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "daemon.h"
#include "edge_int.h"
#include "log.h"
#include "proto.h"
#include "relay.h"
#include "tfo.h"

#define DIRECT_CONNECT_SECS 10

/* Turn an accepted client connection away with a RST: a plain close would
 * read as an empty but complete answer (an empty download, an empty file). */
static void reset_client(evutil_socket_t fd)
{
	struct linger lg = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	evutil_closesocket(fd);
}

void px_edge_refuse(struct px_edge *e, evutil_socket_t fd)
{
	stats_add(px_daemon_stats(e->node.d), STATS_CONN_REFUSED, 1);
	reset_client(fd);
}

/* A direct connection being dialed: the client waits (unread) until the
 * target accepts, so a refusal reaches it as a reset, not as a clean close.
 * first: what was read of the client already (or NULL), to go first. */
struct direct_dial {
	struct px_edge *e;
	evutil_socket_t fd, out;
	struct evbuffer *first;
	char src[128], dname[300];
};

/* Join the client fd and the connected target socket out, first's bytes
 * (if any) ahead of the client's next ones; frees dd. */
static void splice_direct(struct direct_dial *dd)
{
	struct px_relay_env *env = &dd->e->node.env;
	struct bufferevent *a = bufferevent_socket_new(env->base, dd->fd, BEV_OPT_CLOSE_ON_FREE);
	struct bufferevent *b = bufferevent_socket_new(env->base, dd->out, BEV_OPT_CLOSE_ON_FREE);
	if (!a || !b || (dd->first && bufferevent_write_buffer(b, dd->first))) {
		log_warn("%s -> %s: direct connection failed: out of memory", dd->src, dd->dname);
		struct linger lg = { 1, 0 };
		setsockopt(dd->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
		if (a)
			bufferevent_free(a);
		else
			evutil_closesocket(dd->fd);
		if (b)
			bufferevent_free(b);
		else
			evutil_closesocket(dd->out);
	} else {
		px_splice_new(env, a, b, dd->src, dd->dname);
	}
	if (dd->first)
		evbuffer_free(dd->first);
	free(dd);
}

static void direct_dialed(evutil_socket_t out, short what, void *arg)
{
	struct direct_dial *dd = arg;
	struct px_relay_env *env = &dd->e->node.env;
	char err[256] = "timed out";
	if ((what & EV_TIMEOUT) || tfo_connect_result(out, err, sizeof err) < 0) {
		log_warn("%s -> %s: direct connection failed: %s", dd->src, dd->dname, err);
		reset_client(dd->fd); /* counted as gone direct */
		evutil_closesocket(out);
		if (dd->first)
			evbuffer_free(dd->first);
		free(dd);
	} else {
		splice_direct(dd);
	}
	if (--env->active == 0 && env->on_idle)
		env->on_idle(env);
}

int px_edge_class(const struct px_edge *e, evutil_socket_t fd, const struct sockaddr *dst, uint16_t port)
{
	int own = tfo_dscp_peer(fd);
	if (own > 0)
		return own;
	int rule = conf_classify(px_daemon_conf(e->d), dst, port);
	return rule >= 0 ? rule : own;
}

void px_edge_go_direct(struct px_edge *e, evutil_socket_t fd, int dscp, const struct sockaddr *dst,
		       socklen_t dlen, const char *src, const char *dname, struct evbuffer *first)
{
	char err[256];
	stats_add(px_daemon_stats(e->node.d), STATS_CONN_DIRECT, 1);
	if (dscp > 0) /* the direct connection keeps the client's class, both ways */
		tfo_dscp_set(fd, dscp, err, sizeof err);
	int out = tfo_dial(dst, dlen, conf_bypass_mark(px_daemon_conf(e->node.d)), dscp, err, sizeof err);
	struct direct_dial *dd = out < 0 ? NULL : calloc(1, sizeof *dd);
	struct timeval tv = { DIRECT_CONNECT_SECS, 0 };
	if (dd) {
		*dd = (struct direct_dial){ .e = e, .fd = fd, .out = out, .first = first };
		snprintf(dd->src, sizeof dd->src, "%s", src);
		snprintf(dd->dname, sizeof dd->dname, "%s", dname);
		e->node.env.active++;
		if (!event_base_once(e->node.env.base, out, EV_WRITE, direct_dialed, dd, &tv))
			return;
		e->node.env.active--;
		free(dd);
		snprintf(err, sizeof err, "out of memory");
	}
	log_warn("%s -> %s: direct connection failed: %s", src, dname, err);
	px_edge_refuse(e, fd);
	if (out >= 0)
		evutil_closesocket(out);
	if (first)
		evbuffer_free(first);
}

void px_edge_take_refused(struct px_edge *e, struct px_relay_handoff *h)
{
	char dname[96];
	const char *why = h->code == PROTO_RST_NOT_ALLOWED ? "the core's allow list refuses it"
			  : h->code == PROTO_RST_CONNECT  ? "the core cannot connect to it"
							  : "the core did not take the stream";
	/* (draining too: the client connection came before the drain) */
	tfo_addr_str(h->to, dname, sizeof dname);
	log_info("%s -> %s: going direct: %s (the %zu bytes read go first)", h->src, dname, why,
		 evbuffer_get_length(h->first));
	stats_add(px_daemon_stats(e->node.d), STATS_CONN_HANDED, 1);
	px_edge_go_direct(e, h->fd, px_edge_class(e, h->fd, h->to, tfo_addr_port(h->to)), h->to, h->tolen, h->src,
			  dname, h->first);
}
