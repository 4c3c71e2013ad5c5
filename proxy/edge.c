/*
 * edge.c: `wanopt edge`: the branch side.  Accepts client connections on the
 * forward listeners (target from the rule) and on the transparent listener
 * (target = the intercepted original destination), and carries each through
 * the tunnel to the core as a stream.  When no tunnel connection is up,
 * intercepted connections go direct to their destination (fail open) and
 * explicit forwards are refused with a log line, or go direct with
 * `fail_open = direct`.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "cmd.h"
#include "daemon.h"
#include "dns.h"
#include "edge_int.h"
#include "lag.h"
#include "log.h"
#include "names.h"
#include "pace.h"
#include "tfo.h"


/* A forward rule's listener and its target. */
struct fwd {
	struct px_edge *e;
	struct evconnlistener *l;
	struct conf_forward rule;
	struct px_name *target; /* rule.target kept resolved, for policy, class and going direct */
	struct sockaddr_storage bound; /* where l listens (getsockname: not the name it was given) */
	int kept;                      /* a reload under way keeps it for a rule of the new config */
};

/* " (class ef)" for a class lane, else "". */
static const char *lane_what(const struct px_edge_lane *l, char *buf, size_t len)
{
	char n[16];
	if (l == &l->e->lane[0])
		return "";
	snprintf(buf, len, " (class %s)", tfo_dscp_name(l->dscp, n, sizeof n));
	return buf;
}

static void tun_up(tun_conn *c, void *arg)
{
	struct px_edge_lane *l = arg;
	struct px_edge *e = l->e;
	char what[32];
	log_info("tunnel up: %s (version %u)%s", tun_conn_peer(c), tun_conn_version(c), lane_what(l, what, sizeof what));
	memset(e->refused, 0, sizeof e->refused); /* the core's allow list may have changed meanwhile */
	px_node_link_up(&e->node, c, 0);
	if (e->nup < (int)(sizeof e->up / sizeof e->up[0]))
		e->up[e->nup++] = c;
}

/* The core's link changed (LINK frame). */
static void tun_link(tun_conn *c, void *arg)
{
	struct px_edge_lane *l = arg;
	px_node_link_up(&l->e->node, c, 1);
}

/* The core told its allow list (an ALLOW frame, on each connection and after
 * its reloads): intercepted connections outside it go direct at once.  A
 * list not told, or one that does not read, is dropped: the core's refusals
 * teach the edge then (edge_reset_early). */
static void tun_allow(tun_conn *c, void *arg, const uint8_t *p, size_t len)
{
	struct px_edge *e = ((struct px_edge_lane *)arg)->e;
	if (len == e->core_allow_len && e->core_allow_wire && !memcmp(p, e->core_allow_wire, len))
		return; /* the same again (another connection) */
	char why[128];
	struct conf_acl *a = conf_acl_from_wire(p, len, why, sizeof why);
	uint8_t *w = malloc(len);
	if (w)
		memcpy(w, p, len);
	if (!a && strcmp(why, "not told"))
		log_warn("tunnel %s: the core's allow list does not read (%s): not used", tun_conn_peer(c), why);
	else if (!a)
		log_info("tunnel %s: the core's allow list is too long to tell: an intercepted connection it refuses"
			 " goes direct once refused, and the next ones there from the start for %d s",
			 tun_conn_peer(c), EDGE_REFUSED_S);
	else
		log_info("tunnel %s: the core's allow list has %zu entries: intercepted connections outside it go direct",
			 tun_conn_peer(c), conf_acl_count(a));
	conf_acl_free(e->core_allow);
	free(e->core_allow_wire);
	e->core_allow = a;
	e->core_allow_wire = w;
	e->core_allow_len = w ? len : 0;
}

/* A reload changed our link hints: tell the core, and retune each connection. */
static void edge_relink(void *arg)
{
	struct px_edge *e = arg;
	for (int i = 0; i < e->nlane; i++)
		tun_client_set_link(e->lane[i].tc, e->node.rx_bps, e->node.rate_bps, e->node.rtt_us);
	for (int i = 0; i < e->nup; i++)
		px_node_link_up(&e->node, e->up[i], 0);
}

/* A reload re-read the TLS credentials: each lane dials with them from now on. */
static void edge_retls(void *arg, tun_tls *t)
{
	struct px_edge *e = arg;
	for (int i = 0; i < e->nlane; i++)
		tun_client_set_tls(e->lane[i].tc, tun_tls_ref(t));
	tun_tls_unref(t);
}

/* The node went over to another store (in n->env already): each lane dials
 * new connections, whose HELLO carries its id, and lets the old ones go once
 * they are up. */
static void edge_restore(void *arg, struct px_store_use *u)
{
	struct px_edge *e = arg;
	(void)u;
	for (int i = 0; i < e->nlane; i++)
		tun_client_renew(e->lane[i].tc, e->node.tcfg.store_id, "the edge's store changed: connected again");
}

static void tun_down(tun_conn *c, void *arg, const char *why)
{
	struct px_edge_lane *l = arg;
	struct px_edge *e = l->e;
	char what[32];
	log_msg(tun_conn_drained(c) ? LOGL_INFO : LOGL_WARN, "tunnel down%s: %s", lane_what(l, what, sizeof what), why);
	for (int i = 0; i < e->nup; i++)
		if (e->up[i] == c)
			e->up[i] = e->up[--e->nup];
	px_pace_forget(c);
}

/* Every PX_PACE_TICK_MS: the tunnel connections share the pacing cap. */
static void edge_pace(evutil_socket_t fd, short what, void *arg)
{
	struct px_edge *e = arg;
	(void)fd; (void)what;
	px_node_pace(e->up, (size_t)e->nup);
}

/* Once a second (the node's timer): publish the tunnel connections' RTTs;
 * the smallest. */
static uint64_t edge_tunnel_rtt(void *arg)
{
	struct px_edge *e = arg;
	return px_node_tunnels_publish(&e->node, 0, e->up, (size_t)e->nup);
}

/* Every PX_RETUNE_S seconds: size the tunnel connections' buffers. */
static void edge_retune(void *arg)
{
	struct px_edge *e = arg;
	for (int i = 0; i < e->nup; i++)
		px_node_retune(&e->node, e->up[i]);
}

static void tun_error(void *arg, const char *msg)
{
	struct px_edge_lane *l = arg;
	char what[32];
	/* reconnect attempts repeat: log the first of a run, then every 30th */
	if (l->e->errors++ % 30 == 0)
		log_warn("tunnel%s: %s", lane_what(l, what, sizeof what), msg);
}

static void tun_fd(void *arg, int fd, int phase)
{
	struct px_edge_lane *l = arg;
	struct px_edge *e = l->e;
	uint32_t mark = conf_bypass_mark(px_daemon_conf(e->node.d)); /* never intercepted (intercept-nft.sh) */
	char err[128];
	if (phase == TUN_FD_PRE_CONNECT) {
		setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark); /* best effort */
		if (l->dscp && tfo_dscp_set(fd, l->dscp, err, sizeof err))
			log_warn("tunnel: cannot mark the connection: %s", err);
	}
	if (phase == TUN_FD_CONNECTED)
		e->errors = 0;
	px_node_on_fd(&e->node, fd, phase);
}

static unsigned edge_tunnels_up(void *arg)
{
	struct px_edge *e = arg;
	unsigned n = 0;
	for (int i = 0; i < e->nlane; i++)
		n += tun_client_up(e->lane[i].tc);
	return n;
}

/* tun_cbs.resolve: the core's address for a dial, from its name kept
 * resolved in the background (the event loop never waits on DNS). */
static int tun_resolve(void *arg, unsigned attempt, struct sockaddr_storage *ss, socklen_t *sl, char *why,
		       size_t len)
{
	struct px_edge *e = ((struct px_edge_lane *)arg)->e;
	if (!e->peer) {
		snprintf(why, len, "stopping");
		return -1;
	}
	int rc = px_name_get(e->peer, attempt, ss, sl);
	if (rc < 0)
		snprintf(why, len, "%s does not resolve", px_name_host(e->peer));
	return rc;
}

/* Start the lanes: the main one, then one per dscp_tunnels class. */
static int lanes_start(struct px_edge *e, const struct conf *c)
{
	tun_cbs cbs = { .on_up = tun_up, .on_down = tun_down, .on_stream = px_edge_on_stream,
			.on_error = tun_error, .on_fd = tun_fd, .on_link = tun_link, .on_allow = tun_allow,
			.resolve = tun_resolve };
	const struct conf_addr *p = conf_peer(c);
	const uint8_t *cls;
	size_t n = conf_dscp_tunnels(c, &cls);
	char err[512];
	for (size_t i = 0; i <= n; i++) {
		struct px_edge_lane *l = &e->lane[i];
		tun_config cfg = e->node.tcfg;
		l->e = e;
		l->dscp = i ? cls[i - 1] : conf_dscp(c);
		if (i)
			cfg.conns = 1;
		if (!(l->tc = tun_client_new(e->node.env.base, &cfg, p->host, p->port, &cbs, l, err, sizeof err))) {
			log_error("tunnel: %s", err);
			return -1;
		}
		e->nlane = (int)i + 1;
	}
	return 0;
}

static void lanes_stop(struct px_edge *e)
{
	for (int i = 0; i < e->nlane; i++)
		tun_client_free(e->lane[i].tc);
	e->nlane = 0;
}

/* Open a stream for a client connection of class dscp (-1: unknown) on its
 * class's lane if it has one that takes new streams, else on the main lane. */
static tun_stream *lane_open(struct px_edge *e, int dscp, const tun_open_info *oi, int *rc)
{
	for (int i = 1; i < e->nlane && dscp > 0; i++) {
		if (e->lane[i].dscp != dscp)
			continue;
		tun_stream *s = tun_client_open(e->lane[i].tc, oi, &px_relay_stream_cbs, NULL, rc);
		if (s)
			return s;
		log_debug("class lane %d takes no new streams (%s): main tunnel", dscp, tun_strerror(*rc));
		break;
	}
	return tun_client_open(e->lane[0].tc, oi, &px_relay_stream_cbs, NULL, rc);
}

/* Carry an accepted client connection in class dscp (px_edge_class) to
 * target t through the tunnel.  A TUN_E* code, with fd untouched, when no
 * tunnel connection takes new streams (none up, only ones the core sent
 * GOAWAY on, as while it drains, or all at their max_streams): the caller
 * then fails open or refuses.  direct (or NULL): where the connection goes,
 * with what the client sent, should the core turn the stream back before
 * its target got anything. */
static int go_tunnel(struct px_edge *e, evutil_socket_t fd, int dscp, const tun_target *t, int policy,
		     int transparent, const char *src, const struct sockaddr *direct, socklen_t dlen)
{
	char dname[300], err[128];
	tun_open_info oi = { .policy = (uint8_t)policy, .target = *t };
	if (transparent)
		oi.flags = PROTO_OPEN_F_TRANSPARENT;
	int rc = 0;
	if (dscp >= 0) { /* the core dials the server in the client's class */
		oi.flags |= PROTO_OPEN_F_DSCP;
		oi.dscp = (uint8_t)dscp;
	}
	/* the stream first, so that failing leaves fd to the caller; the relay
	 * takes the stream's callbacks before anything can arrive on it */
	tun_stream *s = lane_open(e, dscp, &oi, &rc);
	if (!s) {
		log_debug("%s: no tunnel connection takes new streams: %s", src, tun_strerror(rc));
		return rc ? rc : TUN_EDOWN;
	}
	tun_target_format(t, dname, sizeof dname);
	tfo_tune_lan(fd, err, sizeof err);
	if (dscp > 0) /* what goes back to the client keeps its class */
		tfo_dscp_set(fd, dscp, err, sizeof err);
	struct bufferevent *bev = bufferevent_socket_new(e->node.env.base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!bev) {
		tun_stream_reset(s, PROTO_RST_INTERNAL);
		tun_stream_free(s);
		evutil_closesocket(fd);
		return 0;
	}
	struct px_relay *r = px_relay_new(&e->node.env, bev, s, policy, src, dname, 0);
	if (r && direct)
		px_relay_keep_first(r, direct, dlen);
	if (r)
		px_relay_opened(r, dscp);
	return 0;
}

/* Why go_tunnel's code `why` kept a connection out of the tunnel. */
static const char *why_no_tunnel(int why)
{
	return why == TUN_ELIMIT ? "every tunnel connection has max_streams streams open" : "tunnel to the core is down";
}

static int policy_of(enum conf_optimize o)
{
	switch (o) {
	case CONF_OPT_LZ: return PROTO_POLICY_LZ;
	case CONF_OPT_TFO: return PROTO_POLICY_TFO;
	case CONF_OPT_PASSTHROUGH: return PROTO_POLICY_PASSTHROUGH;
	default: return PROTO_POLICY_FULL;
	}
}

static void fwd_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *peer, int plen,
		       void *arg)
{
	struct fwd *f = arg;
	struct px_edge *e = f->e;
	const struct conf *c = px_daemon_conf(e->d);
	char src[96], dname[300];
	tfo_addr_str(peer, src, sizeof src);
	conf_addr_format(&f->rule.target, dname, sizeof dname);
	tun_target t;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char err[256];
	int resolved = px_name_get(f->target, 0, &ss, &sl) == 0; /* never waits on DNS */
	if (!resolved)
		snprintf(err, sizeof err, "%s does not resolve (yet)", f->rule.target.host);
	const struct sockaddr *to = resolved ? (struct sockaddr *)&ss : NULL;
	int policy = policy_of(conf_optimize_for(c, to, f->rule.target.port));
	int dscp = px_edge_class(e, fd, to, f->rule.target.port);
	if (e->draining) {
		px_edge_refuse(e, fd);
		return;
	}
	int why = TUN_EDOWN;
	if (policy != PROTO_POLICY_PASSTHROUGH && edge_tunnels_up(e)) {
		if (tun_target_parse(&t, f->rule.target.host, f->rule.target.port)) {
			log_warn("%s -> %s: bad target", src, dname);
			px_edge_refuse(e, fd);
			return;
		}
		/* with fail_open = direct, a stream the core turns back goes direct too */
		int back = resolved && conf_fail_open(c) == CONF_FAIL_DIRECT;
		if ((why = go_tunnel(e, fd, dscp, &t, policy, 0, src, back ? to : NULL, sl)) == 0)
			return;
	}
	/* passthrough, or no tunnel connection takes new streams */
	if (policy == PROTO_POLICY_PASSTHROUGH || conf_fail_open(c) == CONF_FAIL_DIRECT) {
		if (resolved) {
			px_edge_go_direct(e, fd, dscp, (struct sockaddr *)&ss, sl, src, dname, NULL);
			return;
		}
		log_warn("%s -> %s: cannot go direct: %s", src, dname, err);
	} else {
		log_warn("%s -> %s: refused: %s (fail_open = refuse)", src, dname, why_no_tunnel(why));
	}
	px_edge_refuse(e, fd);
}

/* Slot of destination dst in e->refused. */
static size_t refused_slot(const char *dst)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *dst; dst++)
		h = (h ^ (uint8_t)*dst) * 1099511628211ULL;
	return h % EDGE_REFUSED_SLOTS;
}

/* The core reset a stream to dst before dst got any of it: if its allow
 * list refuses dst, the next connections there go direct from the start.
 * h: an intercepted client connection with all it sent, to go direct. */
static void edge_reset_early(struct px_relay_env *env, const char *dst, int code, struct px_relay_handoff *h)
{
	struct px_edge *e = (struct px_edge *)((char *)env - offsetof(struct px_edge, node.env));
	if (code == PROTO_RST_NOT_ALLOWED) {
		size_t i = refused_slot(dst);
		snprintf(e->refused[i].dst, sizeof e->refused[i].dst, "%s", dst);
		e->refused[i].until_us = px_mono_us() + EDGE_REFUSED_S * 1000000ull;
	}
	if (h)
		px_edge_take_refused(e, h);
}

/* Whether the core refused dst lately (an intercepted connection there then goes direct). */
static int edge_refused(const struct px_edge *e, const char *dst)
{
	size_t i = refused_slot(dst);
	return e->refused[i].until_us > px_mono_us() && !strcmp(e->refused[i].dst, dst);
}

/* The original destination of intercepted connection fd: REDIRECT leaves a
 * NAT record, TPROXY keeps it as the socket's own address.  0, or -1 with
 * err set. */
static int orig_dst(evutil_socket_t fd, struct sockaddr_storage *dst, socklen_t *dl, char *err, size_t errlen)
{
	*dl = sizeof *dst;
	if (!tfo_icpt_orig_dst(fd, TFO_ICPT_REDIRECT, dst, dl, err, errlen))
		return 0;
	*dl = sizeof *dst;
	return tfo_icpt_orig_dst(fd, TFO_ICPT_TPROXY, dst, dl, err, errlen);
}

static void tp_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *peer, int plen, void *arg)
{
	struct px_edge *e = arg;
	const struct conf *c = px_daemon_conf(e->d);
	struct sockaddr_storage dst;
	socklen_t dl;
	char src[96], dname[96], err[256];
	tfo_addr_str(peer, src, sizeof src);
	if (orig_dst(fd, &dst, &dl, err, sizeof err)) {
		log_warn("%s: no original destination: %s", src, err);
		px_edge_refuse(e, fd);
		return;
	}
	tfo_addr_str((struct sockaddr *)&dst, dname, sizeof dname);
	if (tfo_icpt_is_self((struct sockaddr *)&dst, conf_transparent_port(c)) || e->draining) {
		log_warn("%s -> %s: refused: connection to the interception port itself", src, dname);
		px_edge_refuse(e, fd);
		return;
	}
	uint16_t port = tfo_addr_port((struct sockaddr *)&dst);
	int policy = policy_of(conf_optimize_for(c, (struct sockaddr *)&dst, port));
	int dscp = px_edge_class(e, fd, (struct sockaddr *)&dst, port);
	tun_target t;
	char tname[300] = "";
	int why = TUN_EDOWN, bad = tun_target_from_sockaddr(&t, (struct sockaddr *)&dst);
	if (!bad)
		tun_target_format(&t, tname, sizeof tname);
	if (policy != PROTO_POLICY_PASSTHROUGH && e->core_allow &&
	    !conf_acl_match(e->core_allow, (struct sockaddr *)&dst, port)) {
		log_info("%s -> %s: going direct: outside the core's allow list", src, dname);
		px_edge_go_direct(e, fd, dscp, (struct sockaddr *)&dst, dl, src, dname, NULL);
		return;
	}
	if (policy != PROTO_POLICY_PASSTHROUGH && !bad && edge_refused(e, tname)) {
		log_info("%s -> %s: going direct: the core's allow list refuses it", src, dname);
		px_edge_go_direct(e, fd, dscp, (struct sockaddr *)&dst, dl, src, dname, NULL);
		return;
	}
	if (policy == PROTO_POLICY_PASSTHROUGH || !edge_tunnels_up(e) || bad ||
	    (why = go_tunnel(e, fd, dscp, &t, policy, 1, src, (struct sockaddr *)&dst, dl))) {
		if (policy != PROTO_POLICY_PASSTHROUGH)
			log_info("%s -> %s: %s: going direct (fail open)", src, dname, why_no_tunnel(why));
		px_edge_go_direct(e, fd, dscp, (struct sockaddr *)&dst, dl, src, dname, NULL);
	}
}

/* Free forward f: its listener closes. */
static void fwd_free(struct fwd *f)
{
	if (!f)
		return;
	tun_lguard_free_listener(f->l);
	px_name_free(f->target);
	free(f);
}

/* What forward rule r's log lines and lookups call it: "forward LISTEN". */
static const char *fwd_what(const struct conf_forward *r, char *buf, size_t len)
{
	char la[CONF_HOST_MAX + 16];
	snprintf(buf, len, "forward %s", conf_addr_format(&r->listen, la, sizeof la));
	return buf;
}

/* A listener for forward rule r at its listen address (at, of length
 * atlen, if the caller resolved it already, else resolved here), its target
 * kept resolved; NULL after logging on failure. */
static struct fwd *fwd_open(struct px_edge *e, const struct conf_forward *r, const struct sockaddr_storage *at,
			    socklen_t atlen)
{
	struct fwd *f = calloc(1, sizeof *f);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char err[256], ta[CONF_HOST_MAX + 16], what[CONF_HOST_MAX + 32];
	if (!f)
		return NULL;
	f->e = e;
	f->rule = *r;
	fwd_what(r, what, sizeof what);
	if (at) {
		ss = *at;
		sl = atlen;
	} else if (conf_addr_resolve(&f->rule.listen, 1, &ss, &sl, err, sizeof err)) {
		log_error("%s: %s", what, err);
		free(f);
		return NULL;
	}
	f->l = evconnlistener_new_bind(e->node.env.base, fwd_accept, f, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, -1,
				       (struct sockaddr *)&ss, (int)sl);
	socklen_t bl = sizeof f->bound;
	if (!f->l || getsockname(evconnlistener_get_fd(f->l), (struct sockaddr *)&f->bound, &bl)) {
		log_error("%s: cannot listen: %s", what, strerror(errno));
		if (f->l)
			evconnlistener_free(f->l);
		free(f);
		return NULL;
	}
	log_info("%s -> %s", what, conf_addr_format(&f->rule.target, ta, sizeof ta));
	if (!(f->target = px_name_new(e->node.env.base, e->dns, &f->rule.target, what))) {
		fwd_free(f);
		return NULL;
	}
	tfo_dscp_recv_on(evconnlistener_get_fd(f->l));
	tun_lguard_watch(f->l, what, log_warn_cb, NULL);
	return f;
}

/* Open one listener per forward rule; -1 after logging on failure. */
static int open_forwards(struct px_edge *e, const struct conf *c)
{
	size_t n = conf_forward_count(c);
	e->fwd = calloc(n ? n : 1, sizeof *e->fwd);
	if (!e->fwd)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!(e->fwd[e->nfwd++] = fwd_open(e, conf_forward(c, i), NULL, 0)))
			return -1;
	return 0;
}

static void close_forwards(struct px_edge *e)
{
	for (size_t i = 0; i < e->nfwd; i++)
		fwd_free(e->fwd[i]);
	free(e->fwd);
	e->fwd = NULL;
	e->nfwd = 0;
}

static int open_transparent(struct px_edge *e, uint16_t port)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = IN6ADDR_ANY_INIT };
	char err[256];
	int fd = tfo_icpt_listen((struct sockaddr *)&a, sizeof a, TFO_ICPT_TPROXY, 1024, err, sizeof err);
	if (fd < 0) {
		log_error("transparent port %u: %s", port, err);
		return -1;
	}
	e->tp = evconnlistener_new(e->node.env.base, tp_accept, e, LEV_OPT_CLOSE_ON_FREE, -1, fd);
	if (!e->tp) {
		close(fd);
		return -1;
	}
	log_info("transparent interception on port %u", port);
	tun_lguard_watch(e->tp, "transparent port", log_warn_cb, NULL);
	return 0;
}

static int edge_start(struct px_daemon *d, void *arg)
{
	struct px_edge *e = arg;
	const struct conf *c = px_daemon_conf(d);
	e->d = d;
	e->node.tunnels_up = edge_tunnels_up;
	e->node.tunnel_rtt = edge_tunnel_rtt;
	e->node.retune = edge_retune;
	e->node.relink = edge_relink;
	e->node.retls = edge_retls;
	e->node.restore = edge_restore;
	e->node.env.on_refused = edge_reset_early;
	e->node.role = e;
	if (px_node_start(&e->node, d, PROTO_ROLE_EDGE))
		return -1;
	/* a dead tunnel must be noticed within a second, for fail-open: silence
	 * past the timeout is seen at the next tick, 0.7-0.9 s after the last
	 * frame (with 250 and 1000 it took 1.0-1.25 s) */
	e->node.tcfg.keepalive_ms = 200;
	e->node.tcfg.keepalive_timeout_ms = 700;
	e->node.tcfg.backoff_max_ms = 5000;
	e->node.tcfg.peer_name = PKI_CORE_NAME;
	const struct conf_addr *p = conf_peer(c);
	if (!(e->dns = px_dns_new(e->node.env.base)) ||
	    !(e->peer = px_name_new(e->node.env.base, e->dns, p, "tunnel")))
		return -1;
	if (lanes_start(e, c))
		return -1;
	e->pace_ev = px_node_pace_timer(e->node.env.base, edge_pace, e);
	char pa[300];
	log_info("edge %s: tunnel to %s", e->node.name, conf_addr_format(p, pa, sizeof pa));
	if (open_forwards(e, c))
		return -1;
	if (conf_transparent_port(c) && open_transparent(e, conf_transparent_port(c)))
		return -1;
	if (px_edge_warm_start(e))
		log_warn("warm: cannot serve /warm on the stats address");
	return 0;
}

static int same_addr(const struct conf_addr *a, const struct conf_addr *b)
{
	return a->port == b->port && !strcmp(a->host, b->host);
}

/* reopen_forwards' second half, which cannot fail: c's rule i goes to the
 * old forward kept[i] (its target names[i] if set, else looked up again), or
 * is nf[i]; the old forwards not kept close; nf becomes e->fwd. */
static void commit_forwards(struct px_edge *e, const struct conf *c, struct fwd **nf, struct fwd **kept,
			    struct px_name **names)
{
	size_t n = conf_forward_count(c);
	for (size_t i = 0; i < n; i++) {
		struct fwd *f = kept[i];
		char what[CONF_HOST_MAX + 32], ta[CONF_HOST_MAX + 16];
		if (!f)
			continue;
		f->rule = *conf_forward(c, i);
		if (names[i]) {
			px_name_free(f->target);
			f->target = names[i];
		} else {
			px_name_refresh(f->target);
		}
		log_info("%s -> %s (listening still)", fwd_what(&f->rule, what, sizeof what),
			 conf_addr_format(&f->rule.target, ta, sizeof ta));
		nf[i] = f;
	}
	for (size_t j = 0; j < e->nfwd; j++) {
		if (!e->fwd[j]->kept)
			fwd_free(e->fwd[j]);
		else
			e->fwd[j]->kept = 0;
	}
	free(e->fwd);
	e->fwd = nf;
	e->nfwd = n;
}

/* Whether old forward f is free to keep for a listener at ss: not kept for
 * another rule yet, and bound there (the address it bound, not the name it
 * was given, whose address may have moved since). */
static int fwd_free_at(const struct fwd *f, const struct sockaddr_storage *ss)
{
	return !f->kept && evutil_sockaddr_cmp((const struct sockaddr *)ss, (const struct sockaddr *)&f->bound, 1) == 0;
}

/* The old forward, not yet kept, listening where c's rule r (the i-th)
 * resolves to now (left in *ss, *sl for fwd_open; *sl 0 if r does not
 * resolve: fwd_open says), marked kept; NULL if none.  The old i-th is
 * looked at first: a config whose forwards kept their order costs one
 * comparison a rule (2,000 forwards reloaded in 3.1 s, the loop held,
 * when every rule looked at every old forward and the rules before it). */
static struct fwd *fwd_kept(struct px_edge *e, const struct conf_forward *r, size_t i,
			    struct sockaddr_storage *ss, socklen_t *sl)
{
	char err[256];
	*sl = sizeof *ss;
	if (conf_addr_resolve(&r->listen, 1, ss, sl, err, sizeof err)) {
		*sl = 0;
		return NULL;
	}
	struct fwd *f = NULL;
	if (i < e->nfwd && fwd_free_at(e->fwd[i], ss))
		f = e->fwd[i];
	for (size_t j = 0; j < e->nfwd && !f; j++)
		if (fwd_free_at(e->fwd[j], ss))
			f = e->fwd[j];
	if (f)
		f->kept = 1;
	return f;
}

/* A reload's forward listeners, kept open where c's listen addresses,
 * resolved now, are those they are bound to (closing and opening one again
 * refused the connections arriving meanwhile and reset those in its
 * backlog: 139 of 6,023 connections over 60 reloads in 3.5 s), taking c's
 * rule; c's new ones opened first, so that if one
 * cannot listen nothing changed (-1); the rest closed.  A target that
 * changed is looked up anew, starting with the addresses an old forward to
 * the same name had; one that did not is looked up again. */
static int reopen_forwards(struct px_edge *e, const struct conf *c)
{
	size_t n = conf_forward_count(c), nold = e->nfwd;
	struct fwd **nf = calloc(n ? n : 1, sizeof *nf), **kept = calloc(n ? n : 1, sizeof *kept);
	struct px_name **names = calloc(n ? n : 1, sizeof *names);
	int rc = nf && kept && names ? 0 : -1;
	for (size_t i = 0; i < n && !rc; i++) {
		const struct conf_forward *r = conf_forward(c, i);
		char what[CONF_HOST_MAX + 32];
		struct sockaddr_storage ss;
		socklen_t sl;
		kept[i] = fwd_kept(e, r, i, &ss, &sl);
		if (!kept[i])
			rc = (nf[i] = fwd_open(e, r, sl ? &ss : NULL, sl)) ? 0 : -1;
		else if (!same_addr(&kept[i]->rule.target, &r->target))
			rc = (names[i] = px_name_new(e->node.env.base, e->dns, &r->target, fwd_what(r, what, sizeof what)))
				     ? 0 : -1;
	}
	for (size_t i = 0; i < n && nf && names; i++) { /* seeded while the old names are there */
		struct px_name *t = names[i] ? names[i] : nf[i] ? nf[i]->target : NULL;
		for (size_t j = 0; j < nold && t && !rc; j++)
			px_name_seed(t, e->fwd[j]->target);
		if (rc) {
			fwd_free(nf[i]);
			px_name_free(names[i]);
		}
	}
	for (size_t j = 0; rc && j < nold; j++)
		e->fwd[j]->kept = 0;
	if (rc)
		log_error("reload: forward listeners failed; keeping the old configuration");
	else
		commit_forwards(e, c, nf, kept, names);
	free(kept);
	free(names);
	if (rc)
		free(nf);
	return rc;
}

static int edge_reload(struct px_daemon *d, const struct conf *old, const struct conf *c, void *arg)
{
	struct px_edge *e = arg;
	px_dns_reread(e->dns, "reload: ");
	px_name_refresh(e->peer);
	if (reopen_forwards(e, c))
		return -1;
	px_node_reload(&e->node, c); /* only once the reload is sure to be kept */
	(void)px_edge_repoint(e, old, c);
	return 0;
}

static void edge_idle(struct px_relay_env *env)
{
	struct px_edge *e = (struct px_edge *)((char *)env - offsetof(struct px_edge, node.env));
	if (e->draining)
		px_daemon_exit(e->d, 0);
}

static void edge_drain(struct px_daemon *d, void *arg)
{
	struct px_edge *e = arg;
	e->draining = 1;
	close_forwards(e);
	tun_lguard_free_listener(e->tp);
	e->tp = NULL;
	log_info("draining: %u connection%s left", e->node.env.active, e->node.env.active == 1 ? "" : "s");
	e->node.env.on_idle = edge_idle;
	if (!e->node.env.active)
		px_daemon_exit(d, 0);
}

static void edge_stop(struct px_daemon *d, void *arg)
{
	struct px_edge *e = arg;
	close_forwards(e);
	px_name_free(e->peer);
	e->peer = NULL;
	px_dns_free(e->dns, e->node.env.base); /* first: its callbacks come while all else is there */
	e->dns = NULL;
	tun_lguard_free_listener(e->tp);
	lanes_stop(e);
	if (e->pace_ev)
		event_free(e->pace_ev);
	px_edge_warm_stop(e);
	px_node_stop(&e->node);
	conf_acl_free(e->core_allow);
	free(e->core_allow_wire);
}

int px_cmd_edge(int argc, char **argv)
{
	struct px_edge e;
	memset(&e, 0, sizeof e);
	struct px_daemon_hooks h = { edge_start, edge_reload, edge_drain, edge_stop };
	return px_daemon_main(CONF_EDGE, argc, argv, &h, &e);
}
