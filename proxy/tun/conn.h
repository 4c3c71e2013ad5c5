/*
 * conn.h: one tunnel connection (internal to proxy/tun): TCP connect (client
 * side), TLS handshake, HELLO exchange, keepalive, frames through its mux,
 * teardown.  endpoint.c builds tun_client and tun_server on top of it.
 */
#ifndef WANOPT_TUN_CONN_H
#define WANOPT_TUN_CONN_H

#include <sys/queue.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

#include "tun.h"

/* What a client and a server share: configuration, TLS context, callbacks
 * and the list of their connections. */
struct tun_ep {
	struct event_base *base;
	tun_config cfg;             /* defaults filled in; string fields not used after setup */
	char node_name[PROTO_NAME_MAX + 1];
	char peer_name[256];        /* client: expected server certificate name, "" if any */
	char refuse_name[256];      /* server: client certificate name refused, "" if none */
	tun_cbs cbs;
	void *arg;
	SSL_CTX *ssl;
	int client;                 /* 1: we connect (odd stream ids) */
	unsigned nup;               /* connections up */
	unsigned npending;          /* connections not up yet (TCP, TLS, HELLO) */
	unsigned evicted;           /* server: handshakes evicted since the last log line */
	uint64_t evict_log_us;      /* ... which was then (monotonic) */
	TAILQ_HEAD(, tun_conn) conns; /* every connection, any state */
	LIST_HEAD(, tun_linger) lingers; /* sockets closing after a failed handshake (linger.c) */
	unsigned nlinger;
	char renew_text[PROTO_GOAWAY_TEXT_MAX + 1]; /* tun_ep_renew's, for its GOAWAYs */
	/* A connection left (failed or closed) after or before being up; slot
	 * is what tun_conn_connect got.  NULL on the server. */
	void (*conn_gone)(struct tun_ep *ep, int slot, int was_up);
};

/* Fill defaults into ep->cfg from cfg, copy the names; TUN_EINVAL with err
 * filled if a value is out of range. */
int tun_ep_init(struct tun_ep *ep, struct event_base *base, const tun_config *cfg,
		const tun_cbs *cbs, void *arg, int client, char *err, size_t errlen);

/* Client: start a connection to sa; slot is handed back to conn_gone.
 * Failures are reported through on_error and conn_gone (never here). */
void tun_conn_connect(struct tun_ep *ep, const struct sockaddr *sa, socklen_t salen,
		      const char *peer, int slot);
/* Server: run the handshake on accepted socket fd from sa. */
void tun_conn_accept(struct tun_ep *ep, int fd, const struct sockaddr *sa);
/* Close every connection of ep without callbacks other than the streams'
 * on_reset. */
void tun_ep_close_all(struct tun_ep *ep);

/* tun_conn_goaway on every connection of ep that is up. */
void tun_ep_goaway(struct tun_ep *ep, const char *text);
/* Replace every connection of ep that is up and takes streams (client:
 * its slot dials another now; it takes streams until another connection is
 * up, then gets GOAWAY with text; server: GOAWAY with text now). */
void tun_ep_renew(struct tun_ep *ep, const char *text);
/* The up connection taking new streams with the fewest streams, or NULL. */
tun_conn *tun_ep_least_loaded(struct tun_ep *ep);
/* The link fields we tell peers changed: later HELLOs carry them, and a LINK
 * frame goes out on each connection up to a peer with PROTO_CAP_LINK. */
void tun_ep_set_link(struct tun_ep *ep, uint64_t rx_bps, uint64_t tx_bps, uint32_t rtt_us);

/* Keep a duplicate of fd, whose TLS handshake failed, open for a moment
 * after the caller closes fd: its write side shut (after the TLS alert
 * written), its input read and dropped until the peer's EOF, 1 s or 256 KiB,
 * so that the peer reads the alert rather than a reset.  Nothing happens if
 * ep already lingers on 64 sockets or resources fail. */
void tun_linger(struct tun_ep *ep, int fd);
/* Close ep's lingering sockets now (the endpoint is going away). */
void tun_linger_close_all(struct tun_ep *ep);

#endif
