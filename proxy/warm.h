/* warm.h: pre-positioning files in the peers' stores (see warm.c). */
#ifndef WANOPT_WARM_H
#define WANOPT_WARM_H

#include "relay.h"

struct stats_http;

struct px_warm {
	struct px_relay_env *env;
	/* Open a stream to peer number i (0, 1, ...); NULL with *err once i is past
	 * the last peer or none is up. */
	tun_stream *(*open)(void *arg, int i, const tun_open_info *o, const tun_stream_cbs *cbs, void *cbarg,
			    int *err);
	/* How many peers open() can reach now. */
	int (*npeers)(void *arg);
	void *arg;
};

/* Serve POST /warm on the daemon's stats HTTP server (nothing if there is
 * none), whose thread runs http_base: each request is posted to the n
 * workers' bases (ws[i]->env->base), each pushing to its own peers. */
int px_warm_serve(struct px_warm **ws, int n, struct event_base *http_base, struct stats_http *h);
/* A peer opened a warm stream s: decode it into the store, deliver nothing. */
int px_warm_accept(struct px_relay_env *env, tun_stream *s, const char *peer);

#endif
