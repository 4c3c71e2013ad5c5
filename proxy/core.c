/*
 * core.c: `wanopt core`: the datacenter side.  Accepts tunnel connections from
 * edges (mutual TLS), and for every stream they open dials the target, if the
 * `allow` list permits it (the core is never an open relay), then relays.
 * Host-name targets are resolved asynchronously and checked after resolution,
 * before any byte reaches them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "cmd.h"
#include "daemon.h"
#include "log.h"
#include "node.h"
#include "tfo.h"
#include "warm.h"

struct px_core {
	struct px_node node;
	struct px_daemon *d;
	tun_server *srv;
	struct evdns_base *dns;
	tun_conn **conns; /* connections up, for warm pushes */
	size_t nconns, capconns;
	struct px_warm warm;
	int draining;
};

/* A name target being resolved. */
struct resolving {
	struct px_core *core;
	struct px_relay *r;
	uint16_t port;
	char name[PROTO_HOSTNAME_MAX + 1];
};

static void conn_up(tun_conn *c, void *arg)
{
	struct px_core *k = arg;
	const tun_hello *h = tun_conn_hello(c);
	log_info("tunnel up: %s (version %u, store %02x%02x%02x%02x)", tun_conn_peer(c), tun_conn_version(c),
		 h->store_id[0], h->store_id[1], h->store_id[2], h->store_id[3]);
	if (k->nconns == k->capconns) {
		size_t cap = k->capconns ? k->capconns * 2 : 8;
		tun_conn **n = realloc(k->conns, cap * sizeof *n);
		if (!n)
			return;
		k->conns = n;
		k->capconns = cap;
	}
	k->conns[k->nconns++] = c;
	/* an edge dials a replacement when it gets our GOAWAY: no new streams on
	 * that one either, or every new connection at the edge would be reset
	 * (core_stream refuses while draining) instead of failing open */
	if (k->draining)
		tun_conn_goaway(c, "core shutting down");
}

static void conn_down(tun_conn *c, void *arg, const char *why)
{
	struct px_core *k = arg;
	log_warn("tunnel down: %s", why);
	for (size_t i = 0; i < k->nconns; i++)
		if (k->conns[i] == c)
			k->conns[i] = k->conns[--k->nconns];
}

static void conn_error(void *arg, const char *msg)
{
	log_warn("tunnel refused: %s", msg);
}

static unsigned core_tunnels_up(void *arg)
{
	struct px_core *k = arg;
	return k->srv ? tun_server_up(k->srv) : 0;
}

static int policy_ok(int p)
{
	return p == PROTO_POLICY_FULL || p == PROTO_POLICY_LZ ? p : PROTO_POLICY_TFO;
}

/* Check dst against `allow`, then start connecting r's LAN side to it. */
static void dial(struct px_core *k, struct px_relay *r, struct bufferevent *bev, const struct sockaddr *sa,
		 socklen_t len)
{
	const struct conf *c = px_daemon_conf(k->d);
	char dname[96];
	tfo_addr_str(sa, dname, sizeof dname);
	uint16_t port = ntohs(sa->sa_family == AF_INET ? ((const struct sockaddr_in *)sa)->sin_port
						       : ((const struct sockaddr_in6 *)sa)->sin6_port);
	if (!conf_allow_match(c, sa, port)) {
		log_warn("refused %s: not in the allow list", dname);
		px_relay_fail(r, PROTO_RST_NOT_ALLOWED, "target not allowed");
		return;
	}
	if (bufferevent_socket_connect(bev, sa, (int)len))
		px_relay_fail(r, PROTO_RST_CONNECT, "connect failed");
}

static void resolved(int err, struct evutil_addrinfo *ai, void *arg)
{
	struct resolving *rs = arg;
	if (err || !ai) {
		log_warn("resolve %s: %s", rs->name, evutil_gai_strerror(err));
		px_relay_fail(rs->r, PROTO_RST_CONNECT, "cannot resolve the target");
	} else {
		dial(rs->core, rs->r, px_relay_bev(rs->r), ai->ai_addr, ai->ai_addrlen);
	}
	if (ai)
		evutil_freeaddrinfo(ai);
	free(rs);
}

static void core_stream(tun_conn *c, tun_stream *s, const tun_open_info *o, void *arg)
{
	struct px_core *k = arg;
	char dname[300];
	if (o->flags & PROTO_OPEN_F_WARM) {
		px_warm_accept(&k->node.env, s, tun_conn_peer(c));
		return;
	}
	if (k->draining) {
		tun_stream_reset(s, PROTO_RST_REFUSED);
		tun_stream_free(s);
		return;
	}
	tun_target_format(&o->target, dname, sizeof dname);
	struct bufferevent *bev = bufferevent_socket_new(k->node.env.base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!bev) {
		tun_stream_reset(s, PROTO_RST_INTERNAL);
		tun_stream_free(s);
		return;
	}
	/* the relay exists at once: data that came with the OPEN waits in its output */
	struct px_relay *r = px_relay_new(&k->node.env, bev, s, policy_ok(o->policy), tun_conn_peer(c), dname, 1);
	if (!r)
		return;
	if (o->target.type == PROTO_ADDR_NAME) {
		struct resolving *rs = calloc(1, sizeof *rs);
		if (!rs) {
			px_relay_fail(r, PROTO_RST_INTERNAL, "out of memory");
			return;
		}
		rs->core = k;
		rs->r = r;
		snprintf(rs->name, sizeof rs->name, "%s", o->target.name);
		char port[8];
		snprintf(port, sizeof port, "%u", o->target.port);
		struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
		evdns_getaddrinfo(k->dns, rs->name, port, &hints, resolved, rs);
		return;
	}
	struct sockaddr_storage ss;
	socklen_t sl;
	memset(&ss, 0, sizeof ss);
	if (o->target.type == PROTO_ADDR_V4) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(o->target.port);
		memcpy(&a->sin_addr, o->target.addr, 4);
		sl = sizeof *a;
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(o->target.port);
		memcpy(&a->sin6_addr, o->target.addr, 16);
		sl = sizeof *a;
	}
	dial(k, r, bev, (struct sockaddr *)&ss, sl);
}

static tun_stream *core_warm_open(void *arg, int i, const tun_open_info *o, const tun_stream_cbs *cbs,
				  void *cbarg, int *err)
{
	struct px_core *k = arg;
	if ((size_t)i >= k->nconns) {
		*err = TUN_EDOWN;
		return NULL;
	}
	return tun_conn_open(k->conns[i], o, cbs, cbarg, err);
}

static int core_start(struct px_daemon *d, void *arg)
{
	struct px_core *k = arg;
	const struct conf *c = px_daemon_conf(d);
	char err[512];
	k->d = d;
	k->node.tunnels_up = core_tunnels_up;
	k->node.role = k;
	if (px_node_start(&k->node, d, PROTO_ROLE_CORE))
		return -1;
	if (!(k->dns = evdns_base_new(k->node.env.base, EVDNS_BASE_INITIALIZE_NAMESERVERS)))
		log_warn("no DNS resolver configured: host-name targets will fail");
	tun_cbs cbs = { .on_up = conn_up, .on_down = conn_down, .on_stream = core_stream,
			.on_error = conn_error, .on_fd = px_node_on_fd }; /* arg k: its node comes first */
	const struct conf_addr *l = conf_listen(c);
	k->srv = tun_server_new(k->node.env.base, &k->node.tcfg, l->host, l->port, &cbs, k, err, sizeof err);
	if (!k->srv) {
		log_error("tunnel listener %s:%u: %s", l->host, l->port, err);
		return -1;
	}
	log_info("core %s: tunnel listener on %s:%u", k->node.name, l->host, tun_server_port(k->srv));
	k->warm.env = &k->node.env;
	k->warm.open = core_warm_open;
	k->warm.arg = k;
	if (px_warm_serve(&k->warm, px_daemon_http(d)))
		log_warn("warm: cannot serve /warm on the stats address");
	return 0;
}

static int core_reload(struct px_daemon *d, const struct conf *old, const struct conf *c, void *arg)
{
	struct px_core *k = arg;
	px_node_reload(&k->node, c);
	return 0; /* allow and optimize are read from the live configuration */
}

static void core_idle(struct px_relay_env *env)
{
	struct px_core *k = (struct px_core *)((char *)env - offsetof(struct px_core, node.env));
	if (k->draining)
		px_daemon_exit(k->d, 0);
}

static void core_drain(struct px_daemon *d, void *arg)
{
	struct px_core *k = arg;
	k->draining = 1;
	for (size_t i = 0; i < k->nconns; i++)
		tun_conn_goaway(k->conns[i], "core shutting down");
	log_info("draining: %u streams left", k->node.env.active);
	k->node.env.on_idle = core_idle;
	if (!k->node.env.active)
		px_daemon_exit(d, 0);
}

static void core_stop(struct px_daemon *d, void *arg)
{
	struct px_core *k = arg;
	tun_server_free(k->srv);
	if (k->dns)
		evdns_base_free(k->dns, 1);
	free(k->conns);
	px_node_stop(&k->node);
}

int px_cmd_core(int argc, char **argv)
{
	struct px_core k;
	memset(&k, 0, sizeof k);
	struct px_daemon_hooks h = { core_start, core_reload, core_drain, core_stop };
	return px_daemon_main(CONF_CORE, argc, argv, &h, &k);
}
