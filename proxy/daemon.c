/* daemon.c: the edge/core daemon shell: configuration, logging, stats server,
 * event loop and signals; the role's work happens in its hooks. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "daemon.h"
#include "dns.h"
#include "evmem.h"
#include "log.h"
#include "tun.h"

struct px_daemon {
	enum conf_role role;
	struct conf *conf;
	struct event_base *base;
	struct stats *stats;
	struct stats_http *http;
	struct event *ev_hup, *ev_term, *ev_int, *ev_drain;
	const struct px_daemon_hooks *hooks;
	void *arg;
	int draining;
	int status;
	tun_tls *tls; /* credentials of the configuration being applied (px_daemon_take_tls) */
};

static const char *const px_role_names[] = { "edge", "core" };

/* Prints `wanopt edge|core --help`. */
static void px_daemon_usage(FILE *f, enum conf_role role)
{
	const char *r = px_role_names[role];

	fprintf(f, "usage: wanopt %s [-c FILE] [--key=value...]\n\n", r);
	if (role == CONF_EDGE)
		fprintf(f, "Runs the edge: accepts LAN connections (forwards, transparent interception)\n"
			   "and carries them through the TLS tunnel to the core, with DRE and LZ.\n");
	else
		fprintf(f, "Runs the core: accepts tunnels from edges and dials the targets they ask\n"
			   "for, when the allow list permits.\n");
	fprintf(f, "Reads FILE (-c FILE or --config=FILE; see %s.conf), then every --key=value,\n"
		   "which wins over the file (for %s, the\n"
		   "command line's entries replace the file's); a key may be written with - for _\n"
		   "(--store-size).  A key of the %s only is ignored, with a warning.\n"
		   "-c may be left out when the command line gives every required key.  A bad\n"
		   "configuration, or TLS files that do not load, print what is wrong (FILE:LINE\n"
		   "where there is one) and exit with status 2.\n"
		   "Logs go to stderr.  SIGHUP reloads (TLS files too: for tunnel connections\n"
		   "made from then on; a core also /etc/resolv.conf and /etc/hosts), SIGTERM\n"
		   "drains streams and exits.\n\n"
		   "Keys:\n", r, role == CONF_EDGE ? "forward, optimize and classify" : "allow",
		   px_role_names[!role]);
	conf_help(f, role);
	fprintf(f, "\nEnvironment:\n"
		   "  WANOPT_STORE_READS=window|map\n"
		   "      how runs of stored chunks are read: 128 KiB preads, or straight out of the\n"
		   "      store's mappings (default: whichever a probe at start, and again on\n"
		   "      SIGHUP, finds faster here, then whichever costs less on the store's own\n"
		   "      reads, timed on a sample of them; the log says which, with the figures)\n");
}

/* Ends the loop with a status. */
void px_daemon_exit(struct px_daemon *d, int status)
{
	d->status = status;
	event_base_loopexit(d->base, NULL);
}

struct event_base *px_daemon_base(struct px_daemon *d) { return d->base; }
const struct conf *px_daemon_conf(struct px_daemon *d) { return d->conf; }
struct stats_http *px_daemon_http(struct px_daemon *d)
{
	return d->http;
}

struct stats *px_daemon_stats(struct px_daemon *d) { return d->stats; }

/* c's credentials loaded for one side (client: the edge's); NULL with
 * "FILE:LINE: tls_x: ... PATH: what is wrong" in err (or "--tls_x=PATH: ..."
 * for a key from the command line), as px_daemon_check_tls gives it. */
static tun_tls *tls_load(const struct conf *c, int client, char *err, size_t errlen)
{
	tun_config t = px_daemon_tls_files(c);
	char why[768], key[16] = "";
	tun_tls *tls = tun_tls_load(&t, client, why, sizeof why);
	if (tls)
		return tls;
	size_t n = strcspn(why, ":"); /* the message names the key first */
	if (n < sizeof key)
		memcpy(key, why, n), key[n] = 0;
	const char *where = conf_where(c, key);
	if (!where)
		where = conf_path(c) ? conf_path(c) : "command line";
	snprintf(err, errlen, "%s: %s", where, why);
	return NULL;
}

/* Load c's credentials for d's side into d->tls: 0, or -1 with the error
 * as px_daemon_check_tls gives it. */
static int load_tls(struct px_daemon *d, const struct conf *c, char *err, size_t errlen)
{
	d->tls = tls_load(c, d->role == CONF_EDGE, err, errlen);
	return d->tls ? 0 : -1;
}

/* The role took what it wanted of d->tls: drop the rest. */
static void drop_tls(struct px_daemon *d)
{
	tun_tls_unref(d->tls);
	d->tls = NULL;
}

tun_tls *px_daemon_take_tls(struct px_daemon *d)
{
	tun_tls *t = d->tls;
	d->tls = NULL;
	return t;
}

/* SIGHUP: re-read the configuration; the role applies what it can. */
static void px_daemon_on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct px_daemon *d = arg;
	char err[1024], keys[256];
	struct conf *c = conf_reload(d->conf, err, sizeof err);

	if (!c || px_daemon_check_store(c, err, sizeof err) || load_tls(d, c, err, sizeof err)) {
		/* all of the file, or none of it */
		log_error("reload: %s; keeping the running configuration", err);
		conf_free(c);
		return;
	}
	log_set_level(conf_log_level(c));
	for (size_t i = 0; conf_ignored(c, i); i++)
		log_warn("%s", conf_ignored(c, i)); /* as at start: a key of the other role */
	int n = conf_restart_keep(d->conf, c, keys, sizeof keys);
	if (n)
		log_warn("reload: %s changed; %s effect after a restart (running with the old value%s)", keys,
			 n > 1 ? "they take" : "it takes", n > 1 ? "s" : "");
	int rc = d->hooks->reload ? d->hooks->reload(d, d->conf, c, d->arg) : 0;
	drop_tls(d);
	if (rc < 0) {
		log_error("reload: not applied; keeping the running configuration");
		log_set_level(conf_log_level(d->conf));
		conf_free(c);
		return;
	}
	conf_free(d->conf);
	d->conf = c;
	stats_set(d->stats, STATS_STORE_SIZE, conf_store_size(c));
	log_info("reloaded %s", conf_path(c) ? conf_path(c) : "the command line");
}

/* The drain took too long: exit anyway. */
static void px_daemon_on_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct px_daemon *d = arg;

	log_warn("drain: still busy after %d s; exiting", PX_DAEMON_DRAIN_SECS);
	px_daemon_exit(d, 0);
}

/* SIGTERM/SIGINT: drain once; a second signal exits at once. */
static void px_daemon_on_term(evutil_socket_t sig, short what, void *arg)
{
	struct px_daemon *d = arg;
	struct timeval tv = { PX_DAEMON_DRAIN_SECS, 0 };

	if (d->draining || !d->hooks->drain) {
		log_info("%s: exiting", strsignal((int)sig));
		px_daemon_exit(d, 0);
		return;
	}
	d->draining = 1;
	log_info("%s: draining (again to exit now)", strsignal((int)sig));
	d->ev_drain = evtimer_new(d->base, px_daemon_on_drain_timeout, d);
	if (d->ev_drain)
		evtimer_add(d->ev_drain, &tv);
	d->hooks->drain(d, d->arg);
}

/* Event base, signal events, stats registry and server. */
static int px_daemon_setup(struct px_daemon *d)
{
	char err[512];
	const struct conf_addr *sa = conf_stats(d->conf);

	if (!(d->base = event_base_new()) || !(d->stats = stats_create(px_role_names[d->role])))
		return log_error("out of memory"), -1;
	d->ev_hup = evsignal_new(d->base, SIGHUP, px_daemon_on_hup, d);
	d->ev_term = evsignal_new(d->base, SIGTERM, px_daemon_on_term, d);
	d->ev_int = evsignal_new(d->base, SIGINT, px_daemon_on_term, d);
	if (!d->ev_hup || !d->ev_term || !d->ev_int || evsignal_add(d->ev_hup, NULL) ||
	    evsignal_add(d->ev_term, NULL) || evsignal_add(d->ev_int, NULL))
		return log_error("cannot install signal handlers"), -1;
	stats_set(d->stats, STATS_STORE_SIZE, conf_store_size(d->conf));
	if (sa && !(d->http = stats_http_start(d->base, d->stats, sa->host, sa->port, err, sizeof err)))
		return log_error("%s", err), -1;
	return 0;
}

/* Frees everything setup made (each part may be missing). */
static void px_daemon_teardown(struct px_daemon *d)
{
	struct event *evs[] = { d->ev_hup, d->ev_term, d->ev_int, d->ev_drain };

	for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
		if (evs[i])
			event_free(evs[i]);
	stats_http_free(d->http);
	stats_free(d->stats);
	if (d->base)
		event_base_free(d->base);
	conf_free(d->conf);
}

/* Every connection costs a descriptor (two at an edge going direct): raise
 * the soft limit to the hard one, as servers do, and say when even that is
 * low for a proxy. */
static void px_daemon_raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			rl.rlim_cur = was;
	}
	if (rl.rlim_cur < 4096)
		log_warn("open files limit is %llu: about that many client connections at most "
			 "(raise it with LimitNOFILE= in the unit, or ulimit -n)", (unsigned long long)rl.rlim_cur);
}

/* True when argv asks for help. */
static int px_daemon_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
	return 0;
}

tun_config px_daemon_tls_files(const struct conf *c)
{
	return (tun_config){ .cert_file = conf_tls_cert(c), .key_file = conf_tls_key(c), .ca_file = conf_tls_ca(c) };
}

int px_daemon_check_tls(const struct conf *c, char *err, size_t errlen)
{
	tun_tls *t = tls_load(c, 1, err, errlen);
	if (!t)
		return -1;
	tun_tls_unref(t);
	return 0;
}

/* Why dir cannot be a store directory (made if missing), or NULL if it can. */
static const char *store_dir_problem(const char *dir)
{
	struct stat sb;
	if (!stat(dir, &sb))
		return S_ISDIR(sb.st_mode) ? NULL : "not a directory";
	if (errno != ENOENT)
		return strerror(errno);
	if (!lstat(dir, &sb))
		return "a symbolic link to nothing"; /* the store would not be made through it */
	char up[PATH_MAX]; /* made with its parents: the nearest that exists must be a directory */
	snprintf(up, sizeof up, "%s", dir);
	for (char *slash; (slash = strrchr(up, '/')) != NULL;) {
		slash[slash == up] = 0; /* "/x": the root */
		if (*up && !stat(up, &sb))
			return S_ISDIR(sb.st_mode) ? NULL : "a parent is not a directory";
		if (slash == up)
			break;
	}
	return NULL;
}

int px_daemon_check_store(const struct conf *c, char *err, size_t errlen)
{
	const char *why = store_dir_problem(conf_store(c));
	if (!why)
		return 0;
	const char *where = conf_where(c, "store");
	snprintf(err, errlen, "%s: store: %s: %s", where ? where : "command line", conf_store(c), why);
	return -1;
}

/* libevent's own messages (its resolver's "nameserver ... has failed", say)
 * as lines of our log, at the matching level. */
static void libevent_log(int severity, const char *msg)
{
	enum log_level l = severity == EVENT_LOG_DEBUG ? LOGL_DEBUG : severity == EVENT_LOG_MSG ? LOGL_INFO
			 : severity == EVENT_LOG_WARN ? LOGL_WARN : LOGL_ERROR;
	log_msg(l, "libevent: %s", msg);
}

int px_daemon_main(enum conf_role role, int argc, char **argv,
		   const struct px_daemon_hooks *hooks, void *arg)
{
	struct px_daemon d = { .role = role, .hooks = hooks, .arg = arg, .status = 1 };
	char err[1024];

	if (px_daemon_wants_help(argc, argv)) {
		px_daemon_usage(stdout, role);
		return 0;
	}
	if (!(d.conf = conf_from_args(role, argc, argv, err, sizeof err)) || load_tls(&d, d.conf, err, sizeof err) ||
	    px_daemon_check_store(d.conf, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		drop_tls(&d);
		conf_free(d.conf);
		return 2;
	}
	log_set_ident(px_role_names[role]);
	log_set_level(conf_log_level(d.conf));
	event_set_log_callback(libevent_log);
	px_dns_log_init();
	for (size_t i = 0; conf_ignored(d.conf, i); i++)
		log_warn("%s", conf_ignored(d.conf, i));
	signal(SIGPIPE, SIG_IGN);
	px_daemon_raise_nofile();
	if (px_evmem_install() < 0)
		log_warn("cannot reserve address space for libevent's small records: they share the heap"
			 " (handing memory back after a burst of connections takes longer)");
	evthread_use_pthreads();
	if (px_daemon_setup(&d) < 0)
		goto out;
	int rc = hooks->start ? hooks->start(&d, arg) : 0;
	drop_tls(&d);
	if (rc < 0)
		goto out_stop;
	log_info("started (%s)", conf_path(d.conf) ? conf_path(d.conf) : "command line");
	d.status = 0;
	if (event_base_dispatch(d.base) < 0)
		d.status = 1;
out_stop:
	if (hooks->stop)
		hooks->stop(&d, arg);
out:
	drop_tls(&d);
	px_daemon_teardown(&d);
	return d.status;
}
