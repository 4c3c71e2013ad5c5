/*
 * mux.h: the stream multiplexer of one tunnel connection (internal to
 * proxy/tun).  It turns frames from the peer into stream callbacks and stream
 * writes into frames, with per-stream credit and round-robin scheduling.  It
 * knows nothing about sockets or TLS: the connection feeds it the received
 * bytes (mux_input) and asks it for bytes to send (mux_output) whenever its
 * output buffer runs low or the mux kicks it.
 */
#ifndef WANOPT_TUN_MUX_H
#define WANOPT_TUN_MUX_H

#include <stddef.h>
#include <stdint.h>

#include "tun.h"

typedef struct mux mux;

/* Calls from the mux to its connection. */
typedef struct mux_ops {
	/* Output is pending: call mux_output soon (may be called often). */
	void (*kick)(void *arg);
	/* The peer's HELLO arrived: check it; non-zero (a tun_err, with err
	 * filled) fails the connection. */
	int (*on_hello)(void *arg, const tun_hello *h, char *err, size_t errlen);
	/* The peer opened a stream. */
	void (*on_stream)(void *arg, tun_stream *s, const tun_open_info *o);
	/* A PONG echoed val. */
	void (*on_pong)(void *arg, uint64_t val);
	/* The peer sent GOAWAY. */
	void (*on_goaway)(void *arg, uint32_t code, const char *text);
	/* The peer sent LINK: its link fields are now bps (in), tx_bps, rtt_us. */
	void (*on_link)(void *arg, uint64_t bps, uint64_t tx_bps, uint32_t rtt_us);
	void (*on_allow)(void *arg, const uint8_t *p, uint16_t len); /* ALLOW payload, unchecked */
} mux_ops;

typedef struct mux_cfg {
	tun_conn *conn;        /* returned by tun_stream_conn */
	int odd;               /* 1: we open odd stream ids (the connecting side) */
	uint32_t window;       /* per-stream credit we grant */
	uint32_t max_streams;  /* streams the peer may have open at once */
	size_t sendq_hiwat;    /* per-stream send queue high mark */
	size_t sendq_max;      /* per-stream send queue hard limit */
	size_t quantum;        /* DATA bytes per stream per scheduling turn */
} mux_cfg;

/* Create a mux; NULL if out of memory.  cfg and ops are copied. */
mux *mux_new(const mux_cfg *cfg, const mux_ops *ops, void *arg);
/* Free; every unfinished stream gets on_reset(PROTO_RST_TUNNEL_DOWN); all stay
 * dead handles for their owners to free.  Accepts NULL. */
void mux_free(mux *m);
/* Queue our HELLO (first thing to send). */
int mux_send_hello(mux *m, const tun_hello *h);
/* Queue a LINK frame (our link fields changed). */
void mux_send_link(mux *m, uint64_t bps, uint64_t tx_bps, uint32_t rtt_us);
/* Send an ALLOW frame of len (2..PROTO_MAX_PAYLOAD) payload bytes. */
void mux_send_allow(mux *m, const uint8_t *p, uint16_t len);
/* Credit granted to each stream the peer opens from now on (see
 * tun_conn_set_recv_window). */
uint32_t mux_set_recv_window(mux *m, uint32_t window);
/* DATA bytes per stream per scheduling turn from now on (1..PROTO_MAX_PAYLOAD). */
void mux_set_quantum(mux *m, size_t quantum);
/* Decode and dispatch every complete frame in `in` (drains what it used).
 * TUN_OK, or a tun_err with err filled and *goaway set to the PROTO_GOAWAY_*
 * code to send; then the connection must be closed. */
int mux_input(mux *m, struct evbuffer *in, uint32_t *goaway, char *err, size_t errlen);
/* Append frames to out until it holds at least `target` bytes or nothing is
 * left to send: control frames first, then DATA round-robin over streams. */
void mux_output(mux *m, struct evbuffer *out, size_t target);
/* 1 if frames are waiting to go out. */
int mux_pending(const mux *m);
/* Queue a PING carrying val. */
void mux_ping(mux *m, uint64_t val);
/* Queue GOAWAY: refuse streams the peer opens after this. */
void mux_goaway(mux *m, uint32_t code, const char *text);
/* Queue a GOAWAY with PROTO_GOAWAY_RENEW: the peer dials a replacement;
 * streams go on being taken here. */
void mux_renew(mux *m, const char *text);
/* 1 once the peer's HELLO was accepted. */
int mux_ready(const mux *m);
/* Open a stream (see tun_conn_open). */
tun_stream *mux_open(mux *m, const tun_open_info *o, const tun_stream_cbs *cbs,
		     void *arg, int *err);
/* Streams open (either side, not yet finished). */
unsigned mux_streams(const mux *m);
/* Stream ids we can still open; at 0 mux_open fails with TUN_ELIMIT. */
uint32_t mux_ids_left(const mux *m);
/* The highest stream id the peer opened (0: none): a GOAWAY's last. */
uint32_t mux_peer_last(const mux *m);
/* Counters of the mux. */
void mux_get_stats(const mux *m, tun_stats *st);

#endif
