/* edge_int.h: the edge's state (edge.c, edge_warm.c). */
#ifndef WANOPT_EDGE_INT_H
#define WANOPT_EDGE_INT_H

#include "node.h"
#include "warm.h"

struct evconnlistener;
struct fwd;

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
	struct evdns_base *dns;     /* lookups of the core's and forward targets' names (names.c) */
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

/* tun_cbs.on_stream (arg: the lane): the core opened a stream towards us (warm pushes). */
void px_edge_on_stream(tun_conn *c, tun_stream *s, const tun_open_info *o, void *arg);
int px_edge_warm_start(struct px_edge *e);
void px_edge_warm_stop(struct px_edge *e);

#endif
