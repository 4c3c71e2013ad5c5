/* edge_warm.c: the edge's side of pre-positioning: accepting the core's warm
 * streams, and pushing files to the core. */
#include "daemon.h"
#include "edge_int.h"
#include "log.h"

void px_edge_on_stream(tun_conn *c, tun_stream *s, const tun_open_info *o, void *arg)
{
	struct px_edge *e = ((struct px_edge_lane *)arg)->e;
	if (!(o->flags & PROTO_OPEN_F_WARM)) {
		/* only the edge dials targets for its clients: a core never opens relays here */
		log_warn("tunnel %s: refused a stream that is not a warm push", tun_conn_peer(c));
		tun_stream_reset(s, PROTO_RST_REFUSED);
		tun_stream_free(s);
		return;
	}
	px_warm_accept(&e->node.env, s, tun_conn_peer(c));
}

static tun_stream *edge_warm_open(void *arg, int i, const tun_open_info *o, const tun_stream_cbs *cbs,
				  void *cbarg, int *err)
{
	struct px_edge *e = arg;
	if (i > 0) {
		*err = TUN_EDOWN;
		return NULL;
	}
	return tun_client_open(e->lane[0].tc, o, cbs, cbarg, err);
}

static int edge_warm_peers(void *arg)
{
	struct px_edge *e = arg;
	return tun_client_up(e->lane[0].tc) ? 1 : 0;
}

int px_edge_warm_start(struct px_edge *e)
{
	e->warm.env = &e->node.env;
	e->warm.open = edge_warm_open;
	e->warm.npeers = edge_warm_peers;
	e->warm.arg = e;
	static struct px_warm *ws[1];
	ws[0] = &e->warm;
	return px_warm_serve(ws, 1, e->node.env.base, px_daemon_http(e->d));
}

void px_edge_warm_stop(struct px_edge *e)
{
	e->warm.open = NULL;
}
