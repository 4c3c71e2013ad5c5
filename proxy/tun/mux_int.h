/*
 * mux_int.h: internals shared by mux.c (frames, scheduling) and stream.c (the
 * stream owner API).  Not for use outside proxy/tun.
 */
#ifndef WANOPT_TUN_MUX_INT_H
#define WANOPT_TUN_MUX_INT_H

#include <sys/queue.h>

#include "frame.h"
#include "mux.h"

/* Stream flags (one word; the stream's state is their combination). */
enum stream_flag {
	SF_OPEN_PENDING = 1 << 0,  /* our OPEN not framed yet (stream unknown to the peer) */
	SF_FIN_QUEUED = 1 << 1,    /* owner closed: CLOSE goes after the queued bytes */
	SF_FIN_SENT = 1 << 2,      /* our CLOSE framed */
	SF_FIN_RCVD = 1 << 3,      /* the peer's CLOSE arrived */
	SF_DEAD = 1 << 4,          /* reset either way, or tunnel down: no more frames */
	SF_OWNER_GONE = 1 << 5,    /* owner called free: no more callbacks */
	SF_ACTIVE = 1 << 6,        /* on the scheduler list */
	SF_WANT_WRITABLE = 1 << 7, /* queue hit the high mark: on_writable due */
	SF_REAP = 1 << 8,          /* on the reap list */
	SF_COUNTED = 1 << 9,       /* counted in the open-stream totals */
	SF_TEARDOWN = 1 << 10,     /* mux_free is notifying: free only marks */
};

struct tun_stream {
	mux *m;                    /* NULL once the connection is gone */
	uint32_t sid;
	unsigned flags;            /* enum stream_flag */
	tun_stream_cbs cbs;
	void *arg;
	struct evbuffer *sendq;    /* owner bytes not yet framed */
	uint64_t send_credit;      /* DATA bytes we may still send */
	uint32_t window;           /* our receive window: credit granted back in quarters of it */
	uint32_t recv_left;        /* DATA bytes the peer may still send */
	uint64_t recv_held;        /* delivered to the owner, not consumed yet */
	uint32_t recv_grant;       /* consumed, not yet granted back */
	tun_open_info open;        /* for our OPEN */
	uint64_t data_in, data_out; /* DATA payload bytes */
	tun_stream *hnext;         /* hash chain */
	TAILQ_ENTRY(tun_stream) rr;   /* scheduler list */
	TAILQ_ENTRY(tun_stream) reap; /* reap list */
};

TAILQ_HEAD(stream_list, tun_stream);

struct mux {
	mux_cfg cfg;
	mux_ops ops;
	void *arg;
	tun_stream **tab;          /* hash table of streams by id */
	size_t tab_size;           /* power of two */
	size_t tab_count;
	unsigned n_ours, n_peer;   /* open streams by opener */
	uint32_t next_sid;         /* our next stream id */
	uint32_t peer_last;        /* highest stream id the peer opened */
	int hello_rcvd;
	uint32_t peer_window, peer_max_streams;
	uint32_t recv_window;      /* granted to streams the peer opens (>= cfg.window) */
	int goaway_sent, goaway_rcvd;
	uint32_t goaway_last;      /* peer's GOAWAY: last of our ids it accepted */
	struct evbuffer *ctl;      /* encoded control frames, sent first */
	struct stream_list active; /* streams with something to send */
	struct stream_list reaps;  /* finished streams to free */
	tun_stats st;
	tun_fdec dec;
	uint8_t scratch[TUN_FRAME_MAX];
};

/* Queue an encoded control frame and kick the connection. */
void mux_ctl_frame(mux *m, const tun_frame *f);
/* Put s on the scheduler list if it has something to send. */
void mux_stream_activate(tun_stream *s);
/* Queue s's OPEN at once if it is still pending. */
void mux_stream_announce(tun_stream *s);
/* Reset s from our side with code (RESET goes out if the peer knows s). */
void mux_stream_reset_local(tun_stream *s, uint32_t code);
/* Queue s for freeing once its owner freed it and it finished. */
void mux_stream_reap_check(tun_stream *s);
/* Free the memory of a stream that is in no list. */
void mux_stream_destroy(tun_stream *s);

#endif
