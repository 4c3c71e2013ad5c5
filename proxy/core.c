/*
 * core.c: `wanopt core`: the datacenter side.  Accepts tunnel connections from
 * edges (mutual TLS), and for every stream they open dials the target, if the
 * `allow` list permits it (the core is never an open relay), then relays.
 * Host-name targets are resolved asynchronously and checked after resolution,
 * before any byte reaches them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

#include "cmd.h"
#include "daemon.h"
#include "dns.h"
#include "lag.h"
#include "log.h"
#include "names.h"
#include "node.h"
#include "pace.h"
#include "tfo.h"
#include "warm.h"

#define WORKERS_MAX 64

struct px_core;

/* One worker: an event loop on its own thread (or the main one when there is a
 * single worker) with its own tunnel listener on the shared port (the kernel
 * spreads edges across them with SO_REUSEPORT) and its own relays.  The store
 * and stats are shared (thread-safe). */
struct worker {
	struct px_core *k;
	int idx;
	pthread_t th;
	struct px_relay_env env;
	tun_server *srv;
	struct px_dns *dns;
	tun_conn **conns; /* connections up, for warm pushes */
	size_t nconns, capconns;
	struct px_warm warm;
	atomic_uint up;
	atomic_ullong rtt_us;     /* smallest tunnel RTT of this worker's edges, for the gauge */
	struct event *rtt_ev;
	struct event *pace_ev; /* px_node_pace of conns */
	struct px_lag *lag; /* threaded workers: their loop's watchdog */
	unsigned rtt_ticks;
	int draining, drained, threaded; /* drained: idleness reported to the main thread */
};

struct px_core {
	struct px_node node;
	struct px_daemon *d;
	struct worker *w;
	struct px_warm *warms[WORKERS_MAX];
	int nw;
	atomic_int busy_workers; /* draining: workers with streams left */
	int draining;
	pthread_mutex_t allow_lock; /* the allow list as edges are told it (workers read it) */
	size_t allow_len;
	uint8_t allow[PROTO_MAX_PAYLOAD];
};

/* A name target being resolved. */
struct resolving {
	struct worker *core;
	struct px_relay *r;  /* watched: NULL once the stream is gone */
	uint16_t port;
	int dscp;
	char name[PROTO_HOSTNAME_MAX + 1];
};

/* Tell c's edge the allow list (an edge that reads it).  A reload updates
 * the list before it queues its own announcement on each worker, so a
 * connection told the old one hears the new one after. */
static void tell_allow(struct px_core *k, tun_conn *c)
{
	uint8_t buf[PROTO_MAX_PAYLOAD];
	pthread_mutex_lock(&k->allow_lock);
	size_t n = k->allow_len;
	memcpy(buf, k->allow, n);
	pthread_mutex_unlock(&k->allow_lock);
	tun_conn_send_allow(c, buf, n);
}

static void conn_up(tun_conn *c, void *arg)
{
	struct worker *k = arg;
	const tun_hello *h = tun_conn_hello(c);
	log_info("tunnel up: %s (version %u, store %02x%02x%02x%02x)", tun_conn_peer(c), tun_conn_version(c),
		 h->store_id[0], h->store_id[1], h->store_id[2], h->store_id[3]);
	px_node_link_up(&k->k->node, c, 0);
	tell_allow(k->k, c);
	if (k->nconns == k->capconns) {
		size_t cap = k->capconns ? k->capconns * 2 : 8;
		tun_conn **n = realloc(k->conns, cap * sizeof *n);
		if (!n)
			return;
		k->conns = n;
		k->capconns = cap;
	}
	k->conns[k->nconns++] = c;
	atomic_fetch_add(&k->up, 1);
	/* an edge dials a replacement when it gets our GOAWAY: no new streams on
	 * that one either, or every new connection at the edge would be reset
	 * (core_stream refuses while draining) instead of failing open */
	if (k->draining)
		tun_conn_goaway(c, "core shutting down");
}

static void conn_down(tun_conn *c, void *arg, const char *why)
{
	struct worker *k = arg;
	log_msg(tun_conn_drained(c) ? LOGL_INFO : LOGL_WARN, "tunnel down: %s", why);
	for (size_t i = 0; i < k->nconns; i++) {
		if (k->conns[i] == c) {
			k->conns[i] = k->conns[--k->nconns];
			atomic_fetch_sub(&k->up, 1);
		}
	}
	px_pace_forget(c);
}

/* Every PX_PACE_TICK_MS on a worker's thread: its connections take their
 * shares of their edges' pacing caps (with the other workers'). */
static void worker_pace(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	(void)fd; (void)what;
	px_node_pace(w->conns, w->nconns);
}

/* An edge's link changed (LINK frame). */
static void conn_link_changed(tun_conn *c, void *arg)
{
	struct worker *k = arg;
	px_node_link_up(&k->k->node, c, 1);
}

/* On a worker's thread, after a reload changed the link hints: tell its
 * edges, and retune its connections. */
static void worker_relink(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	struct px_node *n = &w->k->node;
	tun_server_set_link(w->srv, n->rx_bps, n->rate_bps, n->rtt_us);
	for (size_t i = 0; i < w->nconns; i++)
		px_node_link_up(n, w->conns[i], 0);
}

static void core_relink(void *arg)
{
	struct px_core *k = arg;
	for (int i = 0; i < k->nw; i++)
		event_base_once(k->w[i].env.base, -1, EV_TIMEOUT, worker_relink, &k->w[i], NULL);
}

/* Reloaded TLS credentials on their way to one worker. */
struct retls_job {
	struct worker *w;
	tun_tls *t;
};

/* On a worker's thread: its listener accepts with the reloaded credentials. */
static void worker_retls(evutil_socket_t fd, short what, void *arg)
{
	struct retls_job *j = arg;
	if (j->w->srv)
		tun_server_set_tls(j->w->srv, j->t);
	else
		tun_tls_unref(j->t);
	free(j);
}

static void core_retls(void *arg, tun_tls *t)
{
	struct px_core *k = arg;
	for (int i = 0; i < k->nw; i++) {
		struct retls_job *j = malloc(sizeof *j);
		if (j)
			*j = (struct retls_job){ &k->w[i], tun_tls_ref(t) };
		if (!j || event_base_once(k->w[i].env.base, -1, EV_TIMEOUT, worker_retls, j, NULL)) {
			log_error("reload: TLS: worker %d keeps the credentials it had: out of memory", i);
			if (j)
				tun_tls_unref(j->t);
			free(j);
		}
	}
	tun_tls_unref(t);
}

/* The node's new store on its way to one worker. */
struct restore_job {
	struct worker *w;
	struct px_store_use *u; /* held for the worker's env */
};

/* On a worker's thread: new relays code on the node's new store; its edges
 * are asked to renew their connections (tun_server_renew), whose HELLO then
 * carries the store's id. */
static void worker_restore(evutil_socket_t fd, short what, void *arg)
{
	struct restore_job *j = arg;
	struct worker *w = j->w;
	struct px_store_use *old = w->env.store;
	w->env.store = j->u;
	px_store_drop(old);
	tun_server_renew(w->srv, w->k->node.tcfg.store_id, "the core's store changed: connect again");
	free(j);
}

static void core_restore(void *arg, struct px_store_use *u)
{
	struct px_core *k = arg;
	for (int i = 0; i < k->nw; i++) {
		struct restore_job *j = malloc(sizeof *j);
		if (j)
			*j = (struct restore_job){ &k->w[i], px_store_hold(u) };
		if (!j || event_base_once(k->w[i].env.base, -1, EV_TIMEOUT, worker_restore, j, NULL)) {
			log_error("store: worker %d keeps the volatile store for its streams: out of memory", i);
			if (j)
				px_store_drop(j->u);
			free(j);
		}
	}
}

/* A connection to the tunnel port refused (bad certificate, not TLS, ...):
 * logged, 20 in 10 s at most, then a count of the rest, so that a scan or
 * a flood of bad connections cannot fill the disk. */
static void conn_error(void *arg, const char *msg)
{
	static struct log_limit lim = LOG_LIMIT_INIT(20, 10);
	unsigned missed;
	int say = log_limit_take(&lim, &missed);
	if (missed)
		log_warn("tunnel refused: %u more connections refused in the last %u s, not logged one by one", missed,
			 lim.window_s);
	if (say)
		log_warn("tunnel refused: %s", msg);
}

/* On a worker's thread, once a second: publish its tunnels' RTTs (each
 * peer's, and its smallest for the gauge); every PX_RETUNE_S seconds, size
 * its connections' buffers. */
static void worker_rtt(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	if (++w->rtt_ticks % PX_RETUNE_S == 0)
		for (size_t i = 0; i < w->nconns; i++)
			px_node_retune(&w->k->node, w->conns[i]);
	atomic_store(&w->rtt_us, px_node_tunnels_publish(&w->k->node, w->idx, w->conns, w->nconns));
}

static uint64_t core_tunnel_rtt(void *arg)
{
	struct px_core *k = arg;
	uint64_t best = 0;
	for (int i = 0; i < k->nw; i++) {
		uint64_t r = atomic_load(&k->w[i].rtt_us);
		if (r && (!best || r < best))
			best = r;
	}
	return best;
}

static unsigned core_tunnels_up(void *arg)
{
	struct px_core *k = arg;
	unsigned n = 0;
	for (int i = 0; i < k->nw; i++)
		n += atomic_load(&k->w[i].up);
	return n;
}

static int policy_ok(int p)
{
	return p == PROTO_POLICY_FULL || p == PROTO_POLICY_LZ ? p : PROTO_POLICY_TFO;
}

/* Check dst against `allow`, then start connecting r's LAN side to it, in
 * class dscp (0: unmarked). */
static void dial(struct worker *w, struct px_relay *r, struct bufferevent *bev, const struct sockaddr *sa,
		 socklen_t len, int dscp)
{
	const struct conf *c = px_daemon_conf(w->k->d);
	char dname[96];
	tfo_addr_str(sa, dname, sizeof dname);
	if (!conf_allow_match(c, sa, tfo_addr_port(sa))) {
		log_warn("refused %s, asked for by %s: not in the allow list", dname, px_relay_src(r));
		px_relay_fail(r, PROTO_RST_NOT_ALLOWED, "target not allowed");
		return;
	}
	if (dscp > 0 && bufferevent_getfd(bev) < 0) {
		char err[128] = "cannot hand the socket to libevent";
		int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd >= 0 && (tfo_dscp_set(fd, dscp, err, sizeof err) || bufferevent_setfd(bev, fd))) {
			log_debug("%s: unmarked: %s", dname, err);
			close(fd);
		}
	}
	if (bufferevent_socket_connect(bev, sa, (int)len))
		px_relay_fail(r, PROTO_RST_CONNECT, "connect failed");
}

static void resolved(int err, struct evutil_addrinfo *ai, void *arg)
{
	struct resolving *rs = arg;
	if (rs->r)
		px_relay_watch(rs->r, NULL);
	if (!rs->r) {
		/* the stream went (reset by the peer, tunnel down) while the name was looked up */
	} else if (err || !ai) {
		log_warn("resolve %s, asked for by %s: %s", rs->name, px_relay_src(rs->r), evutil_gai_strerror(err));
		px_relay_fail(rs->r, PROTO_RST_CONNECT, "cannot resolve the target");
	} else {
		/* the first address `allow` admits (a name may resolve to several,
		 * e.g. ::1 and 127.0.0.1); none: the first, to be refused and logged */
		const struct conf *c = px_daemon_conf(rs->core->k->d);
		struct evutil_addrinfo *pick = ai;
		for (struct evutil_addrinfo *a = ai; a; a = a->ai_next) {
			if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) &&
			    conf_allow_match(c, a->ai_addr, tfo_addr_port(a->ai_addr))) {
				pick = a;
				break;
			}
		}
		dial(rs->core, rs->r, px_relay_bev(rs->r), pick->ai_addr, pick->ai_addrlen, rs->dscp);
	}

	if (ai)
		evutil_freeaddrinfo(ai);
	free(rs);
}

static void core_stream(tun_conn *c, tun_stream *s, const tun_open_info *o, void *arg)
{
	struct worker *k = arg;
	char dname[300];
	if (o->flags & PROTO_OPEN_F_WARM) {
		px_warm_accept(&k->env, s, tun_conn_peer(c));
		return;
	}
	if (k->draining) {
		tun_stream_reset(s, PROTO_RST_REFUSED);
		tun_stream_free(s);
		return;
	}
	tun_target_format(&o->target, dname, sizeof dname);
	/* the client's class, as the edge read it; from an edge that does not
	 * send it, the class of the connection the stream came on */
	int dscp = o->flags & PROTO_OPEN_F_DSCP ? o->dscp : tun_conn_fd(c) < 0 ? 0 : tfo_dscp_get(tun_conn_fd(c));
	struct bufferevent *bev = bufferevent_socket_new(k->env.base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!bev) {
		tun_stream_reset(s, PROTO_RST_INTERNAL);
		tun_stream_free(s);
		return;
	}
	/* the relay exists at once: data that came with the OPEN waits in its output */
	struct px_relay *r = px_relay_new(&k->env, bev, s, policy_ok(o->policy), tun_conn_peer(c), dname, 1);
	if (!r)
		return;
	px_relay_opened(r, dscp);
	if (o->target.type == PROTO_ADDR_NAME) {
		struct resolving *rs = calloc(1, sizeof *rs);
		if (!rs) {
			px_relay_fail(r, PROTO_RST_INTERNAL, "out of memory");
			return;
		}
		rs->core = k;
		px_relay_watch(r, &rs->r); /* the stream may go before the answer comes */
		rs->dscp = dscp;
		snprintf(rs->name, sizeof rs->name, "%s", o->target.name);
		char port[8];
		snprintf(port, sizeof port, "%u", o->target.port);
		struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
		px_dns_lookup(k->dns, rs->name, port, &hints, resolved, rs);
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
	dial(k, r, bev, (struct sockaddr *)&ss, sl, dscp);
}

static int core_warm_peers(void *arg)
{
	return (int)((struct worker *)arg)->nconns;
}

static tun_stream *core_warm_open(void *arg, int i, const tun_open_info *o, const tun_stream_cbs *cbs,
				  void *cbarg, int *err)
{
	struct worker *k = arg;
	if ((size_t)i >= k->nconns) {
		*err = TUN_EDOWN;
		return NULL;
	}
	return tun_conn_open(k->conns[i], o, cbs, cbarg, err);
}

/* Socket hook: every worker's listener shares the port. */
static void worker_fd(void *arg, int fd, int phase)
{
	struct worker *w = arg;
	int one = 1, dscp;
	char err[128];
	if (phase == TUN_FD_LISTEN && w->k->nw > 1)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
	if (phase == TUN_FD_LISTEN)
		tfo_dscp_recv_on(fd);
	/* a connection answers in the class the edge marked it with (dscp_tunnels) */
	if (phase == TUN_FD_ACCEPTED && (dscp = tfo_dscp_peer(fd)) > 0 && tfo_dscp_set(fd, dscp, err, sizeof err))
		log_warn("tunnel: cannot mark a connection: %s", err);
	px_node_on_fd(&w->k->node, fd, phase);
}

static void worker_idle(struct px_relay_env *env);

/* Set a worker up on base: DNS, tunnel listener, warm.  0 or -1 (logged). */
static int worker_init(struct px_core *k, struct worker *w, struct event_base *base)
{
	const struct conf *c = px_daemon_conf(k->d);
	const struct conf_addr *l = conf_listen(c);
	char err[512];
	w->k = k;
	w->env = k->node.env;
	px_store_hold(w->env.store);
	w->env.base = base;
	w->env.coder = NULL; /* its own, on its own loop */
	w->env.active = 0;
	w->env.on_idle = worker_idle;
	if (!(w->dns = px_dns_new(base)))
		log_warn("no DNS resolver configured: host-name targets will fail");
	tun_cbs cbs = { .on_up = conn_up, .on_down = conn_down, .on_stream = core_stream,
			.on_error = conn_error, .on_fd = worker_fd, .on_link = conn_link_changed };
	w->srv = tun_server_new(base, &k->node.tcfg, l->host, l->port, &cbs, w, err, sizeof err);
	if (!w->srv) {
		log_error("tunnel listener %s:%u: %s", l->host, l->port, err);
		return -1;
	}
	struct timeval sec = { 1, 0 };
	if ((w->rtt_ev = event_new(base, -1, EV_PERSIST, worker_rtt, w)))
		event_add(w->rtt_ev, &sec);
	w->pace_ev = px_node_pace_timer(base, worker_pace, w);
	if (base != k->node.env.base) {
		char name[32];
		snprintf(name, sizeof name, "core worker %d", w->idx);
		w->lag = px_lag_start(base, k->node.env.stats, name);
	}
	w->warm.env = &w->env;
	w->warm.open = core_warm_open;
	w->warm.npeers = core_warm_peers;
	w->warm.arg = w;
	k->warms[w->idx] = &w->warm;
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	event_base_dispatch(w->env.base);
	return NULL;
}

/* Log it if an allow list's announcement (ALLOW payload w) is "not told":
 * too long for one frame. */
static void allow_untold_note(const uint8_t *w)
{
	if ((w[0] << 8 | w[1]) == PROTO_ALLOW_UNTOLD)
		log_info("allow: the list is too long to tell the edges (over %d bytes): they learn from the"
			 " core's refusals which intercepted connections to send direct", PROTO_MAX_PAYLOAD);
}

/* How many workers: `workers`, 0 meaning one per CPU; one if the port is
 * ephemeral (listeners could not share it). */
static int worker_count(const struct conf *c)
{
	long n = conf_workers(c);
	if (!n)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1 || conf_listen(c)->port == 0)
		n = 1;
	return n > WORKERS_MAX ? WORKERS_MAX : (int)n;
}

/* -1 (err set) if a socket of another process listens on tunnel address l
 * already.  The workers' listeners share the port with SO_REUSEPORT, which
 * lets any process of the same user share it too: a second core started on
 * the same address ran silently, and each new edge connection went to one
 * of the two at random.  A bind without it fails then. */
static int listen_taken(const struct conf_addr *l, char *err, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	int one = 1;
	if (!l->port || conf_addr_resolve(l, 1, &ss, &sl, err, len))
		return 0; /* (port 0: ours alone; a bad address: the listener says why) */
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* as the listener: TIME_WAIT is no owner */
	int e = bind(fd, (struct sockaddr *)&ss, sl) ? errno : 0;
	close(fd);
	if (e != EADDRINUSE)
		return 0;
	snprintf(err, len, "address already in use (another wanopt core?)");
	return -1;
}

static int core_start(struct px_daemon *d, void *arg)
{
	struct px_core *k = arg;
	const struct conf *c = px_daemon_conf(d);
	k->d = d;
	k->node.tunnels_up = core_tunnels_up;
	k->node.tunnel_rtt = core_tunnel_rtt;
	k->node.role = k;
	k->node.relink = core_relink;
	k->node.retls = core_retls;
	k->node.restore = core_restore;
	pthread_mutex_init(&k->allow_lock, NULL);
	k->allow_len = conf_allow_wire(c, k->allow, sizeof k->allow); /* before any worker runs */
	allow_untold_note(k->allow);
	if (px_node_start(&k->node, d, PROTO_ROLE_CORE))
		return -1;
	k->node.tcfg.refuse_name = PKI_CORE_NAME; /* a core's certificate posing as an edge's */
	k->nw = worker_count(c);
	char err[256], la[CONF_HOST_MAX + 16];
	if (listen_taken(conf_listen(c), err, sizeof err)) {
		log_error("tunnel listener %s: %s", conf_addr_format(conf_listen(c), la, sizeof la), err);
		return -1;
	}
	if (!(k->w = calloc((size_t)k->nw, sizeof *k->w)))
		return -1;
	for (int i = 0; i < k->nw; i++) {
		struct worker *w = &k->w[i];
		w->idx = i;
		struct event_base *base = k->nw == 1 ? k->node.env.base : event_base_new();
		if (!base || worker_init(k, w, base))
			return -1;
	}
	for (int i = 0; k->nw > 1 && i < k->nw; i++) {
		if (pthread_create(&k->w[i].th, NULL, worker_main, &k->w[i])) {
			log_error("cannot start worker threads");
			return -1;
		}
		k->w[i].threaded = 1;
	}
	struct conf_addr l = *conf_listen(c);
	l.port = tun_server_port(k->w[0].srv);
	log_info("core %s: tunnel listener on %s, %d worker%s", k->node.name, conf_addr_format(&l, la, sizeof la),
		 k->nw, k->nw > 1 ? "s" : "");
	if (px_warm_serve(k->warms, k->nw, k->node.env.base, px_daemon_http(d)))
		log_warn("warm: cannot serve /warm on the stats address");
	return 0;
}

/* A reloaded allow list on its way to one worker's edges. */
struct reallow_job {
	struct worker *w;
	size_t len;
	uint8_t wire[];
};

/* On a worker's thread: tell its edges the reloaded allow list. */
static void worker_reallow(evutil_socket_t fd, short what, void *arg)
{
	struct reallow_job *j = arg;
	for (size_t i = 0; i < j->w->nconns; i++)
		tun_conn_send_allow(j->w->conns[i], j->wire, j->len);
	free(j);
}

/* The allow list changed (its announcement differs): tell every edge. */
static void reload_allow(struct px_core *k, const struct conf *c)
{
	uint8_t b[PROTO_MAX_PAYLOAD];
	size_t nb = conf_allow_wire(c, b, sizeof b);
	pthread_mutex_lock(&k->allow_lock);
	int same = nb == k->allow_len && !memcmp(b, k->allow, nb);
	memcpy(k->allow, b, nb);
	k->allow_len = nb;
	pthread_mutex_unlock(&k->allow_lock);
	if (same)
		return;
	allow_untold_note(b);
	for (int i = 0; i < k->nw; i++) {
		struct reallow_job *j = malloc(sizeof *j + nb);
		if (!j) {
			log_warn("reload: the edges of worker %d are not told the new allow list: out of memory", i);
			continue;
		}
		j->w = &k->w[i];
		j->len = nb;
		memcpy(j->wire, b, nb);
		if (event_base_once(k->w[i].env.base, -1, EV_TIMEOUT, worker_reallow, j, NULL))
			free(j);
	}
}

/* On a worker's thread: read /etc/resolv.conf and /etc/hosts again (a
 * reload); lookups in flight go again to the name servers now listed. */
static void worker_redns(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	if (!w->dns) {
		w->dns = px_dns_new(w->env.base);
		return;
	}
	px_dns_reread(w->dns, w->idx == 0 ? "reload: " : NULL);
}

static int core_reload(struct px_daemon *d, const struct conf *old, const struct conf *c, void *arg)
{
	struct px_core *k = arg;
	px_node_reload(&k->node, c);
	reload_allow(k, c);
	for (int i = 0; i < k->nw; i++)
		event_base_once(k->w[i].env.base, -1, EV_TIMEOUT, worker_redns, &k->w[i], NULL);
	return 0; /* allow is read from the live configuration */
}

/* On the main thread: one more worker has no streams left. */
static void worker_done(evutil_socket_t fd, short what, void *arg)
{
	struct px_core *k = arg;
	if (atomic_fetch_sub(&k->busy_workers, 1) == 1)
		px_daemon_exit(k->d, 0);
}

static void worker_idle(struct px_relay_env *env)
{
	struct worker *w = (struct worker *)((char *)env - offsetof(struct worker, env));
	if (w->draining && !w->drained) {
		w->drained = 1;
		event_base_once(w->k->node.env.base, -1, EV_TIMEOUT, worker_done, w->k, NULL);
	}
}

/* On a worker's thread: refuse new streams and tunnels (a replacement an edge
 * dials after our GOAWAY is refused, so it backs off and fails open rather
 * than reconnecting in a loop), tell edges, wait for the rest. */
static void worker_drain(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	w->draining = 1;
	tun_server_unlisten(w->srv);
	for (size_t i = 0; i < w->nconns; i++)
		tun_conn_goaway(w->conns[i], "core shutting down");
	if (!w->env.active)
		worker_idle(&w->env);
}

static void core_drain(struct px_daemon *d, void *arg)
{
	struct px_core *k = arg;
	k->draining = 1;
	atomic_store(&k->busy_workers, k->nw);
	for (int i = 0; i < k->nw; i++)
		event_base_once(k->w[i].env.base, -1, EV_TIMEOUT, worker_drain, &k->w[i], NULL);
	log_info("draining");
}

static void core_stop(struct px_daemon *d, void *arg)
{
	struct px_core *k = arg;
	for (int i = 0; k->w && i < k->nw; i++) {
		struct worker *w = &k->w[i];
		if (w->threaded) {
			event_base_loopexit(w->env.base, NULL);
			pthread_join(w->th, NULL);
		}
		if (w->rtt_ev)
			event_free(w->rtt_ev);
		if (w->pace_ev)
			event_free(w->pace_ev);
		px_lag_free(w->lag);
		tun_server_free(w->srv);
		px_dns_free(w->dns, w->env.base); /* (LeakSanitizer: 648 bytes a lookup without the loop's run) */
		free(w->conns);
		px_relay_env_close(&w->env);
		if (w->env.base && w->env.base != k->node.env.base)
			event_base_free(w->env.base);
	}
	free(k->w);
	px_node_stop(&k->node);
}

int px_cmd_core(int argc, char **argv)
{
	struct px_core k;
	memset(&k, 0, sizeof k);
	struct px_daemon_hooks h = { core_start, core_reload, core_drain, core_stop };
	return px_daemon_main(CONF_CORE, argc, argv, &h, &k);
}
