/* edge_int.h: the edge's state (edge.c, edge_warm.c). */
#ifndef WANOPT_EDGE_INT_H
#define WANOPT_EDGE_INT_H

#include <sys/socket.h>

#include "node.h"
#include "warm.h"

struct evbuffer;
struct evconnlistener;
struct fwd;
struct px_relay_handoff;

/* A set of tunnel connections to the core: the main one (lane 0, `tunnels`
 * connections) or one of a dscp_tunnels class (one connection), its sockets
 * marked with the lane's class at both ends (the core reflects it). */
struct px_edge_lane {
	struct px_edge *e;
	tun_client *tc;
	int dscp; /* 0: unmarked */
};

#define EDGE_REFUSED_SLOTS 256
#define EDGE_REFUSED_S 600

struct px_edge {
	struct px_node node;
	struct px_daemon *d;
	struct px_edge_lane lane[1 + CONF_DSCP_TUNNELS_MAX];
	int nlane;
	struct fwd **fwd;
	size_t nfwd;
	struct px_dns *dns;         /* lookups of the core's and forward targets' names (names.c) */
	struct px_name *peer;       /* the core's address (`peer`), kept resolved */
	struct evconnlistener *tp;  /* transparent listener */
	struct px_warm warm;
	int draining;
	unsigned errors;            /* tunnel errors since the last connect */
	tun_conn *up[TUN_MAX_CONNS + CONF_DSCP_TUNNELS_MAX]; /* tunnel connections up, every lane */
	int nup;
	struct event *pace_ev;       /* px_node_pace of up[] */
	/* intercepted destinations the core's allow list refused lately: they go
	 * direct (forgotten after EDGE_REFUSED_S, or when a tunnel comes up) */
	struct { char dst[80]; uint64_t until_us; } refused[EDGE_REFUSED_SLOTS];
	/* the core's allow list as it told it (ALLOW), or NULL: not told (an
	 * older core, or too long); its payload, to log a change once */
	struct conf_acl *core_allow;
	uint8_t *core_allow_wire;
	size_t core_allow_len;
};

/* edge_peer.c */
/* A reload changed `peer` from old's to c's: the lanes dial the new core and
 * let the old connections go once one to it is up.  0: unchanged, 1: moved,
 * -1: cannot (logged; the tunnel stays). */
int px_edge_repoint(struct px_edge *e, const struct conf *old, const struct conf *c);

/* edge_direct.c */
/* Turn client connection fd away with a reset, counted as refused. */
void px_edge_refuse(struct px_edge *e, evutil_socket_t fd);
/* The class of a client connection to dst:port: its own when it arrived
 * marked, else that of the first classify rule for dst:port, else unmarked
 * (0, or -1 when its packets' class could not be read).  dst may be NULL. */
int px_edge_class(const struct px_edge *e, evutil_socket_t fd, const struct sockaddr *dst, uint16_t port);
/* Send client connection fd direct to dst in class dscp (px_edge_class):
 * fail open, passthrough.  The splice starts once the target accepted
 * (counted as active meanwhile, so a drain waits for it); the client is
 * reset if it does not.  first: bytes already read from the client, sent
 * ahead of its next ones (taken and freed), or NULL. */
void px_edge_go_direct(struct px_edge *e, evutil_socket_t fd, int dscp, const struct sockaddr *dst,
		       socklen_t dlen, const char *src, const char *dname, struct evbuffer *first);
/* A client connection the core reset before its destination got any of it
 * (px_relay_untouched: not allowed, cannot connect, stream not taken), with
 * what the edge read of it (relay hand_over): direct to h->to (the original
 * destination, or a fail_open = direct forward's target), those bytes
 * first. */
void px_edge_take_refused(struct px_edge *e, struct px_relay_handoff *h);

/* tun_cbs.on_stream (arg: the lane): the core opened a stream towards us (warm pushes). */
void px_edge_on_stream(tun_conn *c, tun_stream *s, const tun_open_info *o, void *arg);
int px_edge_warm_start(struct px_edge *e);
void px_edge_warm_stop(struct px_edge *e);

#endif
