/* relay.h: one client connection carried through the tunnel: a LAN socket
 * bound to a tunnel stream, with a DRE encoder towards the WAN and a decoder
 * from it (policy full or lz), or raw bytes (tfo).  Also the plain splice used
 * when a connection goes direct (fail open, passthrough).
 *
 * Backpressure both ways: LAN reading stops while the stream's send queue is
 * full; decoding pauses and tunnel credit is withheld while the LAN socket's
 * output is above its high mark.  Every byte arrives intact or both ends are
 * reset.  All on one event base thread, but for a slow link's bulk coding,
 * which runs on the env's coder thread (coder.h). */
#ifndef WANOPT_RELAY_H
#define WANOPT_RELAY_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "dre.h"
#include "tun.h"

struct event_base;
struct bufferevent;
struct stats;
struct px_coder;
struct px_relay_handoff;
struct evbuffer;

/* A segment store as relays use it: each env whose store it is holds it,
 * and each relay made on it, until it ends.  A node that goes over to
 * another store (from a volatile one to its own, or to one a reload names:
 * node_swap.c) closes the one it left once nothing holds it. */
struct px_store_use {
	dre_store *st;           /* thread-safe */
	_Atomic unsigned holds;
};

/* One more holder of u (NULL: nothing); u. */
static inline struct px_store_use *px_store_hold(struct px_store_use *u)
{
	if (u)
		atomic_fetch_add(&u->holds, 1);
	return u;
}

/* A holder of u lets go (NULL: nothing); whoever closes u reads holds. */
static inline void px_store_drop(struct px_store_use *u)
{
	if (u)
		atomic_fetch_sub(&u->holds, 1);
}

/* What every relay of a node (or of one worker thread) shares. */
struct px_relay_env {
	struct event_base *base;
	struct px_store_use *store; /* the store new relays code on (each env holds it) */
	struct stats *stats;    /* the stats registry (thread-safe) */
	uint64_t link_bps;      /* WAN rate hint for the residual coder (0: unknown) */
	unsigned active;        /* relays alive on this env */
	struct px_coder *coder; /* codes slow links' bulk off the loop (made on first use) */
	void (*on_idle)(struct px_relay_env *env); /* active dropped to 0 (drain) */
	/* the peer reset a stream to dst (as px_relay_new was given it) before
	 * its target got any of it (px_relay_untouched(code): not allowed,
	 * cannot connect, stream not taken).  h: the client connection handed
	 * over to go elsewhere (px_relay_keep_first), which the callee then
	 * owns, or NULL: the client is reset */
	void (*on_refused)(struct px_relay_env *env, const char *dst, int code, struct px_relay_handoff *h);
};

/* Whether a stream reset with code never reached its target: the peer
 * refused it by its allow list, could not connect to the target, or did not
 * take the stream (limits, draining, GOAWAY).  Its client's bytes may then
 * go elsewhere. */
int px_relay_untouched(int code);

/* A client connection whose stream the peer reset before the target got
 * any of it (px_relay_untouched), with every byte the client sent so far,
 * in order: what was read (`first`) and what was not (still in the
 * socket).  The client was sent nothing. */
struct px_relay_handoff {
	int fd;                 /* the client's socket: the callee closes it */
	struct evbuffer *first; /* the bytes read from it: the callee frees it */
	const char *src;        /* px_relay_new's src */
	int code;               /* the reset's code */
	const struct sockaddr *to; /* px_relay_keep_first's */
	socklen_t tolen;
};

struct px_relay;

/* At most n streams of the process may hold the bulk LAN receive buffer
 * at once (lanbuf.c; the lan_bulk_streams key); thread-safe. */
void px_lanbuf_set_max(unsigned n);

/* How many codecs gave memory back because their streams were quiet since the
 * last call (then 0), and in *freed how many were freed with their closed
 * streams: the node then returns freed heap pages to the system
 * (malloc_trim). */
unsigned px_relay_rests_take(unsigned *freed);

/* Bind a connected (or connecting) LAN bufferevent to stream s, which carries
 * policy (enum proto_policy).  src/dst label the connection in stats and logs.
 * connecting: the LAN socket is still connecting (core side); call
 * px_relay_connected when it is.  Takes ownership of bev and s; on failure
 * both are released and NULL returned. */
struct px_relay *px_relay_new(struct px_relay_env *env, struct bufferevent *bev, tun_stream *s,
			      int policy, const char *src, const char *dst, int connecting);
/* Keep a copy of the LAN bytes r reads, up to PX_RELAY_FIRST_MAX, until
 * the peer shows it took the stream (anything from it on the stream: data,
 * an acknowledgement, an ASK, a CLOSE).  Should the peer reset the stream
 * before its target got any of it, on_refused gets the client connection
 * to send to `to` (the edge: direct) instead of a reset.  Past the limit
 * the copy is dropped and a refusal resets the client, as without it.  Call
 * right after px_relay_new, before the loop runs. */
#define PX_RELAY_FIRST_MAX (256u << 10)
void px_relay_keep_first(struct px_relay *r, const struct sockaddr *to, socklen_t tolen);
/* Call once r is set up: logs its one line at open, "open SRC -> DST
 * (POLICY[, CODER][, class C])", and names the class in its stats listing;
 * the class shown when dscp > 0. */
void px_relay_opened(const struct px_relay *r, int dscp);
/* The LAN connection (core side) came up: start reading from it. */
void px_relay_connected(struct px_relay *r);
/* The LAN connection (core side) failed: reset the stream with code. */
void px_relay_fail(struct px_relay *r, int code, const char *why);
/* r carries a warm push (either end; call before it moves data): its stats
 * count as pre-positioning, not as client traffic (stats_stream_set_warm). */
void px_relay_set_warm(struct px_relay *r);
/* Free what env holds (its coder, its hold on its store); every relay of
 * env must be gone. */
void px_relay_env_close(struct px_relay_env *env);
/* While r lives, *slot points to it; when r is freed (a reset from the peer,
 * the tunnel going down), *slot becomes NULL.  One slot per relay; NULL
 * stops watching. */
void px_relay_watch(struct px_relay *r, struct px_relay **slot);
/* Who asked for r's stream: the tunnel peer, or the LAN client (px_relay_new's src). */
const char *px_relay_src(const struct px_relay *r);
/* The LAN bufferevent of r. */
struct bufferevent *px_relay_bev(struct px_relay *r);
/* The tunnel stream callbacks a relay installs (for tun_*_open). */
extern const tun_stream_cbs px_relay_stream_cbs;
/* Attach the stream after px_relay_new was given s == NULL (edge: the stream
 * is opened with the relay as callback argument).  On failure r is released
 * (both ends reset). */
void px_relay_attach(struct px_relay *r, tun_stream *s);

/* Splice two sockets directly (fail open, passthrough): a pair of
 * bufferevents pointing at each other with watermarks.  b may still be
 * connecting, and its output may hold the client's first bytes already
 * (counted as sent up).  Takes ownership of both. */
int px_splice_new(struct px_relay_env *env, struct bufferevent *a, struct bufferevent *b,
		  const char *src, const char *dst);

#endif
