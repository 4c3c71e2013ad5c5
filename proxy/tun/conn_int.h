/*
 * conn_int.h: the tunnel connection struct, shared by conn.c (its life) and
 * conn_link.c (its link-dependent queues).  Internal to proxy/tun.
 */
#ifndef WANOPT_TUN_CONN_INT_H
#define WANOPT_TUN_CONN_INT_H

#include "conn.h"

enum conn_state {
	CS_CONNECTING,  /* client: TCP connect in progress */
	CS_TLS,         /* TLS handshake in progress */
	CS_HELLO,       /* TLS up, our HELLO queued, waiting for the peer's */
	CS_UP,          /* HELLO exchanged: streams flow */
	CS_CLOSING,     /* failed or closed: flushing a GOAWAY, reading to EOF, then freed */
};

/* Stream ids left when a connection retires (GOAWAY, replaced, drained). */
#define CONN_RETIRE_IDS 1024u
/* Most connections of a server still in their handshake: unauthenticated
 * peers cannot make it hold more. */
#define CONN_MAX_PENDING 256
/* Most encrypted input read before the frames are processed. */
#define CONN_IN_MAX (256u * 1024)

struct tun_conn {
	enum conn_state state;
	struct tun_ep *ep;
	int slot;                   /* client slot, -1 on the server */
	int fd;                     /* while CONNECTING; then owned by bev */
	struct bufferevent *bev;    /* TLS, from CS_TLS on */
	struct event *conn_ev;      /* CONNECTING: socket writable */
	struct event *hs_timer;     /* handshake deadline, then the closing deadline */
	struct event *ka_timer;     /* keepalive (UP) */
	struct event *pump;         /* deferred mux_output */
	struct mux *m;              /* from CS_HELLO until CLOSING */
	tun_hello hello;            /* the peer's */
	unsigned version;
	uint32_t caps;
	int goaway_rcvd;            /* the peer sent GOAWAY: no new streams here */
	int goaway_sent;            /* we sent GOAWAY: close once the streams are done */
	int renewing;               /* replaced (tun_ep_renew): GOAWAY once another connection is up */
	int drained;                /* closed once its streams were done after a GOAWAY */
	int io_dead;                /* the socket failed or hit EOF: nothing to flush */
	int shut_wr;                /* CLOSING: output flushed, TCP write side shut */
	char goaway_text[PROTO_GOAWAY_TEXT_MAX + 1];
	uint64_t last_rx_us, rtt_us;
	uint64_t link_bps;          /* tun_conn_set_link's rate (0: none) */
	size_t out_buffer;          /* frame bytes kept queued for TLS */
	size_t quantum;             /* tun_conn_set_link's turn (0: the config's) */
	tun_shared shared;          /* the queues while two streams or more are open */
	int shared_on;              /* they apply now */
	uint32_t ka_retrans, ka_ooo; /* TCP_INFO loss counters at the last keepalive tick */
	uint64_t ka_loss_us;         /* when they last moved */
	uint64_t ka_tick_us;         /* the last keepalive tick */
	uint64_t ka_quiet_us;        /* the peer's silence, as counted by quiet_time */
	tun_stats st;               /* the mux's counters, kept when it is freed */
	char peer[PROTO_NAME_MAX + 80];
	TAILQ_ENTRY(tun_conn) link;
};

/* Switch c's queues between their one-stream and shared values as its open
 * streams go past one or back (tun_conn_set_shared); returns the frame bytes
 * to keep queued for TLS now.  Called before each pump. */
size_t conn_share(tun_conn *c);

#endif
