/* edge_int.h: the edge's state (edge.c, edge_warm.c). */
#ifndef WANOPT_EDGE_INT_H
#define WANOPT_EDGE_INT_H

#include "node.h"
#include "warm.h"

struct evconnlistener;
struct fwd;

struct px_edge {
	struct px_node node;
	struct px_daemon *d;
	tun_client *tc;
	struct fwd **fwd;
	size_t nfwd;
	struct evconnlistener *tp;  /* transparent listener */
	struct px_warm warm;
	int draining;
	unsigned errors;            /* tunnel errors since the last connect */
	tun_conn *up[16];           /* tunnel connections up (tunnels <= 16) */
	int nup;
};

/* tun_cbs.on_stream: the core opened a stream towards us (warm pushes). */
void px_edge_on_stream(tun_conn *c, tun_stream *s, const tun_open_info *o, void *arg);
int px_edge_warm_start(struct px_edge *e);
void px_edge_warm_stop(struct px_edge *e);

#endif
