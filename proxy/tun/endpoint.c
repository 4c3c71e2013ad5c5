/*
 * endpoint.c: tun_client (dials a peer with N parallel connections and
 * redials with exponential backoff) and tun_server (listens, accepts
 * connections from many peers).  Connections themselves live in conn.c.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "conn.h"
#include "tls.h"


struct client_slot {
	struct tun_client *c;
	int busy;                  /* a connection is running for this slot */
	unsigned backoff_ms;       /* delay before the next attempt (0: first) */
	unsigned attempt;          /* attempts so far: picks among the peer's addresses */
	struct event *retry;       /* redial timer */
};

struct tun_client {
	struct tun_ep ep;          /* first member: conn_gone casts back */
	char host[256];
	char port[8];
	char peer[300];            /* "host:port" for messages */
	int freeing;               /* being freed or drained: no redialing */
	struct client_slot slots[TUN_MAX_CONNS];
};

struct tun_server {
	struct tun_ep ep;
	struct evconnlistener *lis;
	uint16_t port;
};

/* ---- client ------------------------------------------------------------- */

/* Slot i's dial failed before connecting: the peer's name did not resolve
 * (why); redial after the backoff, and report it. */
static void client_unresolved(tun_client *c, int i, const char *why)
{
	char msg[800];

	snprintf(msg, sizeof(msg), "tunnel to %s: cannot resolve: %s", c->peer, why);
	c->ep.conn_gone(&c->ep, i, 0);
	if (c->ep.cbs.on_error)
		c->ep.cbs.on_error(c->ep.arg, msg);
}

/* Dial for slot i through the resolve hook (see tun_cbs.resolve). */
static void client_dial_hook(tun_client *c, int i)
{
	struct client_slot *s = &c->slots[i];
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char why[200];
	int rc = c->ep.cbs.resolve(c->ep.arg, s->attempt, &ss, &sl, why, sizeof why);

	if (rc == 0) {
		s->attempt++;
		tun_conn_connect(&c->ep, (struct sockaddr *)&ss, sl, c->peer, i);
	} else if (rc > 0) {
		struct timeval tv = { 0, TUN_RESOLVE_WAIT_MS * 1000 };
		s->busy = 0;
		event_add(s->retry, &tv);
	} else {
		client_unresolved(c, i, why);
	}
}

/* Dial for slot i now; successive attempts rotate through the addresses
 * the peer name resolves to (v6 and v4). */
static void client_dial(tun_client *c, int i)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *ai, *pick;
	unsigned n = 0;
	int rc;

	c->slots[i].busy = 1;
	if (c->ep.cbs.resolve) {
		client_dial_hook(c, i);
		return;
	}
	rc = getaddrinfo(c->host, c->port, &hints, &ai);
	if (rc != 0) {
		client_unresolved(c, i, gai_strerror(rc));
		return;
	}
	for (pick = ai; pick; pick = pick->ai_next)
		n++;
	n = c->slots[i].attempt++ % n;
	for (pick = ai; n--; pick = pick->ai_next)
		;
	tun_conn_connect(&c->ep, pick->ai_addr, pick->ai_addrlen, c->peer, i);
	freeaddrinfo(ai);
}

/* Redial timer of a slot. */
static void client_retry(evutil_socket_t fd, short what, void *arg)
{
	struct client_slot *s = arg;

	(void)fd; (void)what;
	client_dial(s->c, (int)(s - s->c->slots));
}

/* A connection of slot i ended: redial after a backoff that doubles on
 * every failure and restarts from the minimum after a connection was up. */
static void client_conn_gone(struct tun_ep *ep, int slot, int was_up)
{
	tun_client *c = (tun_client *)ep;
	struct client_slot *s = &c->slots[slot];
	unsigned ms, jitter;
	struct timeval tv;

	s->busy = 0;
	if (c->freeing)
		return;
	if (was_up || s->backoff_ms == 0)
		s->backoff_ms = ep->cfg.backoff_min_ms;
	else
		s->backoff_ms = s->backoff_ms * 2 > ep->cfg.backoff_max_ms ?
				ep->cfg.backoff_max_ms : s->backoff_ms * 2;
	jitter = s->backoff_ms / 4;
	ms = s->backoff_ms - jitter + (jitter ? (unsigned)random() % (2 * jitter + 1) : 0);
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	event_add(s->retry, &tv);
}

/* Create a client and start dialing. */
tun_client *tun_client_new(struct event_base *base, const tun_config *cfg,
			   const char *host, uint16_t port, const tun_cbs *cbs, void *arg,
			   char *err, size_t errlen)
{
	tun_client *c = calloc(1, sizeof(*c));
	unsigned i;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		goto err_0;
	}
	if (tun_ep_init(&c->ep, base, cfg, cbs, arg, 1, err, errlen) != TUN_OK)
		goto err_1;
	if (!host || !port || strlen(host) >= sizeof(c->host)) {
		snprintf(err, errlen, "tunnel: bad peer address");
		goto err_1;
	}
	c->ep.conn_gone = client_conn_gone;
	snprintf(c->host, sizeof(c->host), "%s", host);
	snprintf(c->port, sizeof(c->port), "%u", port);
	snprintf(c->peer, sizeof(c->peer), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
	c->ep.ssl = tun_tls_ctx(&c->ep.cfg, 1, err, errlen);
	if (!c->ep.ssl)
		goto err_1;
	for (i = 0; i < c->ep.cfg.conns; i++) {
		c->slots[i].c = c;
		c->slots[i].retry = evtimer_new(base, client_retry, &c->slots[i]);
		if (!c->slots[i].retry) {
			snprintf(err, errlen, "out of memory");
			goto err_2;
		}
	}
	for (i = 0; i < c->ep.cfg.conns; i++)
		client_dial(c, (int)i);
	return c;
err_2:
	for (i = 0; i < c->ep.cfg.conns; i++)
		if (c->slots[i].retry)
			event_free(c->slots[i].retry);
	SSL_CTX_free(c->ep.ssl);
err_1:
	free(c);
err_0:
	return NULL;
}

/* Close everything and free. */
void tun_client_free(tun_client *c)
{
	if (!c)
		return;
	c->freeing = 1;
	tun_ep_close_all(&c->ep);
	for (unsigned i = 0; i < c->ep.cfg.conns; i++)
		event_free(c->slots[i].retry);
	SSL_CTX_free(c->ep.ssl);
	free(c);
}

/* Open a stream on the least loaded usable connection. */
tun_stream *tun_client_open(tun_client *c, const tun_open_info *o,
			    const tun_stream_cbs *cbs, void *arg, int *err)
{
	tun_conn *best = tun_ep_least_loaded(&c->ep);

	if (!best) {
		*err = TUN_EDOWN;
		return NULL;
	}
	return tun_conn_open(best, o, cbs, arg, err);
}

/* Connections up. */
unsigned tun_client_up(const tun_client *c)
{
	return c->ep.nup;
}

/* GOAWAY everywhere; no more dialing. */
void tun_client_drain(tun_client *c, const char *text)
{
	c->freeing = 1;
	for (unsigned i = 0; i < c->ep.cfg.conns; i++)
		event_del(c->slots[i].retry);
	tun_ep_goaway(&c->ep, text);
}

void tun_client_set_link(tun_client *c, uint64_t rx_bps, uint64_t tx_bps, uint32_t rtt_us)
{
	tun_ep_set_link(&c->ep, rx_bps, tx_bps, rtt_us);
}

/* The endpoint makes its next connections with t (its reference passes). */
static void ep_set_tls(struct tun_ep *ep, tun_tls *t)
{
	SSL_CTX_free(ep->ssl);
	ep->ssl = (SSL_CTX *)t;
}

void tun_client_set_tls(tun_client *c, tun_tls *t)
{
	ep_set_tls(&c->ep, t);
}

void tun_client_set_peer(tun_client *c, const char *host, uint16_t port)
{
	if (strlen(host) >= sizeof(c->host))
		return; /* (conf keeps names shorter) */
	snprintf(c->host, sizeof(c->host), "%s", host);
	snprintf(c->port, sizeof(c->port), "%u", port);
	snprintf(c->peer, sizeof(c->peer), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
}

void tun_client_renew(tun_client *c, const uint8_t *store_id, const char *text)
{
	memcpy(c->ep.cfg.store_id, store_id, sizeof(c->ep.cfg.store_id));
	if (!c->freeing)
		tun_ep_renew(&c->ep, text);
}

/* ---- server ------------------------------------------------------------- */

/* A connection arrived. */
static void server_accept(struct evconnlistener *lis, evutil_socket_t fd,
			  struct sockaddr *sa, int salen, void *arg)
{
	tun_server *s = arg;

	(void)lis; (void)salen;
	tun_conn_accept(&s->ep, fd, sa);
}

/* Create, tune (on_fd), bind and listen on the first address of host:port. */
static int server_listen(tun_server *s, const char *host, uint16_t port, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char p[8];
	int fd, one = 1, rc;

	snprintf(p, sizeof(p), "%u", port);
	if (!host || !*host || !strcmp(host, "*")) { /* any address: the dual-stack wildcard, IPv4 too */
		host = NULL;
		hints.ai_family = AF_INET6;
		if (getaddrinfo(host, p, &hints, &ai) != 0)
			hints.ai_family = AF_UNSPEC; /* no IPv6 here */
		else
			freeaddrinfo(ai);
	}
	rc = getaddrinfo(host, p, &hints, &ai);
	if (rc != 0) {
		snprintf(err, errlen, "listen %s:%u: %s", host ? host : "*", port, gai_strerror(rc));
		return TUN_EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto err_1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (s->ep.cbs.on_fd)
		s->ep.cbs.on_fd(s->ep.arg, fd, TUN_FD_LISTEN);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		goto err_2;
	s->lis = evconnlistener_new(s->ep.base, server_accept, s,
				    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 512, fd);
	if (!s->lis)
		goto err_2;
	if (s->ep.cbs.on_error)
		tun_lguard_watch(s->lis, "tunnel listener", s->ep.cbs.on_error, s->ep.arg);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
							  : ((struct sockaddr_in *)&ss)->sin_port);
	freeaddrinfo(ai);
	return TUN_OK;
err_2:
	close(fd);
err_1:
	snprintf(err, errlen, "listen %s:%u: %s", host ? host : "*", port, strerror(errno));
	freeaddrinfo(ai);
	return TUN_ESYS;
}

/* Create a server listening on host:port. */
tun_server *tun_server_new(struct event_base *base, const tun_config *cfg,
			   const char *host, uint16_t port, const tun_cbs *cbs, void *arg,
			   char *err, size_t errlen)
{
	tun_server *s = calloc(1, sizeof(*s));

	if (!s) {
		snprintf(err, errlen, "out of memory");
		goto err_0;
	}
	if (tun_ep_init(&s->ep, base, cfg, cbs, arg, 0, err, errlen) != TUN_OK)
		goto err_1;
	s->ep.ssl = tun_tls_ctx(&s->ep.cfg, 0, err, errlen);
	if (!s->ep.ssl)
		goto err_1;
	if (server_listen(s, host, port, err, errlen) != TUN_OK)
		goto err_2;
	return s;
err_2:
	SSL_CTX_free(s->ep.ssl);
err_1:
	free(s);
err_0:
	return NULL;
}

/* Close the listener and every connection; free. */
void tun_server_free(tun_server *s)
{
	if (!s)
		return;
	tun_lguard_free_listener(s->lis);
	tun_ep_close_all(&s->ep);
	SSL_CTX_free(s->ep.ssl);
	free(s);
}

/* Stop accepting; GOAWAY everywhere. */
void tun_server_drain(tun_server *s, const char *text)
{
	if (s->lis)
		evconnlistener_disable(s->lis);
	tun_ep_goaway(&s->ep, text);
}

void tun_server_set_link(tun_server *s, uint64_t rx_bps, uint64_t tx_bps, uint32_t rtt_us)
{
	tun_ep_set_link(&s->ep, rx_bps, tx_bps, rtt_us);
}

void tun_server_set_tls(tun_server *s, tun_tls *t)
{
	ep_set_tls(&s->ep, t);
}

void tun_server_renew(tun_server *s, const uint8_t *store_id, const char *text)
{
	memcpy(s->ep.cfg.store_id, store_id, sizeof(s->ep.cfg.store_id));
	tun_ep_renew(&s->ep, text);
}

void tun_server_unlisten(tun_server *s)
{
	if (s->lis)
		evconnlistener_free(s->lis);
	s->lis = NULL;
}

/* The bound port. */
uint16_t tun_server_port(const tun_server *s)
{
	return s->port;
}

/* Connections up. */
unsigned tun_server_up(const tun_server *s)
{
	return s->ep.nup;
}
