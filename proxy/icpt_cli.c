/* icpt_cli.c: `wanopt intercept`: checks transparent interception rules.  It
 * accepts intercepted connections on a TPROXY or REDIRECT listener, logs each
 * one's original destination and carries it there directly, unoptimized, with
 * the code the edge's fail-open uses when the tunnel is down (px_splice). */
#include <arpa/inet.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "cmd.h"
#include "conf.h"
#include "log.h"
#include "relay.h"
#include "tfo.h"

struct icpt {
	struct event_base *base;
	struct px_relay_env env; /* the splices' (fail-open's own code) */
	enum tfo_icpt_mode mode;
	uint16_t port;
	uint32_t mark;
	long remaining; /* connections to serve before exiting; <0: forever */
	long accepted;
};

/* No connection is open any more: exit if --count were served. */
static void icpt_idle(struct px_relay_env *env)
{
	struct icpt *ic = (struct icpt *)((char *)env - offsetof(struct icpt, env));
	if (ic->remaining > 0 && ic->accepted >= ic->remaining)
		event_base_loopexit(ic->base, NULL);
}

/* Accepted: read the original destination, dial it directly, relay. */
static void icpt_accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *peer,
			   int plen, void *arg)
{
	struct icpt *ic = arg;
	struct sockaddr_storage dst;
	socklen_t dlen;
	char err[256], s1[64], s2[64];
	int out = -1;

	if (tfo_icpt_orig_dst(fd, ic->mode, &dst, &dlen, err, sizeof err) < 0) {
		log_warn("from %s: %s", tfo_addr_str(peer, s1, sizeof s1), err);
		goto fail;
	}
	if (tfo_icpt_is_self((struct sockaddr *)&dst, ic->port)) {
		log_warn("from %s: connected to the listener itself, not intercepted; closing",
			 tfo_addr_str(peer, s1, sizeof s1));
		goto fail;
	}
	int dscp = tfo_dscp_peer(fd); /* kept both ways, as the edge does */
	if (dscp > 0)
		tfo_dscp_set(fd, dscp, err, sizeof err);
	out = tfo_dial((struct sockaddr *)&dst, dlen, ic->mark, dscp, err, sizeof err);
	if (out < 0 || tfo_tune_lan(fd, err, sizeof err) < 0) {
		log_warn("from %s: %s", tfo_addr_str(peer, s1, sizeof s1), err);
		goto fail;
	}
	char label[160];
	snprintf(label, sizeof label, "%s -> %s", tfo_addr_str(peer, s1, sizeof s1),
		 tfo_addr_str((struct sockaddr *)&dst, s2, sizeof s2));
	struct bufferevent *a = bufferevent_socket_new(ic->base, fd, BEV_OPT_CLOSE_ON_FREE);
	struct bufferevent *b = a ? bufferevent_socket_new(ic->base, out, BEV_OPT_CLOSE_ON_FREE) : NULL;
	if (!b) {
		log_warn("%s: out of memory", label);
		if (a)
			bufferevent_free(a);
		else
			close(fd);
		close(out);
		return;
	}
	log_info("intercepted %s (original destination), passing through directly", label);
	ic->accepted++;
	px_splice_new(&ic->env, a, b, tfo_addr_str(peer, s1, sizeof s1), s2);
	return;
fail:
	if (out >= 0)
		close(out);
	close(fd);
}

/* SIGINT/SIGTERM: stop. */
static void icpt_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopexit(arg, NULL);
}

/* The --help text. */
static void icpt_usage(FILE *f)
{
	fprintf(f,
		"usage: wanopt intercept --port=PORT [--mode=tproxy|redirect] [--listen=ADDR]\n"
		"                        [--mark=N] [--count=N] [--log_level=LEVEL]\n\n"
		"Checks transparent interception rules (see conf/intercept-nft.sh): listens on\n"
		"PORT like the edge's `transparent` listener, logs the original destination of\n"
		"every intercepted connection and passes it through directly, unoptimized (what\n"
		"the edge does in fail-open).  Needs CAP_NET_ADMIN for tproxy and --mark.\n\n"
		"  --port=PORT     listener port (the rules' target port)\n"
		"  --mode=MODE     tproxy (default; IP_TRANSPARENT) or redirect (SO_ORIGINAL_DST)\n"
		"  --listen=ADDR   bind address (default [::], IPv4 and IPv6)\n"
		"  --mark=N        SO_MARK for the direct connections (rules skip marked packets)\n"
		"  --count=N       exit once N connections were served and none is open\n");
}

/* An option's parse: 0, or -1 with what is wrong (e) on stderr. */
static int icpt_bad(const char *opt, const char *v, const char *e)
{
	if (e)
		fprintf(stderr, "wanopt intercept: --%s=%s: %s\n", opt, v, e);
	return e ? -1 : 0;
}

/* Parses the options into ic and the bind address; 0, or 2 on a usage error. */
static int icpt_opts(int argc, char **argv, struct icpt *ic, struct sockaddr_storage *ss,
		     socklen_t *sslen)
{
	static const struct option lo[] = {
		{ "port", required_argument, NULL, 'p' }, { "mode", required_argument, NULL, 'm' },
		{ "listen", required_argument, NULL, 'l' }, { "mark", required_argument, NULL, 'k' },
		{ "count", required_argument, NULL, 'n' }, { "log_level", required_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct sockaddr_in6 *any = (struct sockaddr_in6 *)ss;
	enum log_level lvl;
	unsigned long n;
	int o;

	memset(ss, 0, sizeof *ss);
	any->sin6_family = AF_INET6;
	*sslen = sizeof *any;
	ic->mode = TFO_ICPT_TPROXY;
	ic->remaining = -1;
	while ((o = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (o) {
		case 'p':
			if (icpt_bad("port", optarg, conf_uint_parse(optarg, 1, 65535, &n)))
				return 2;
			ic->port = (uint16_t)n;
			break;
		case 'm':
			if (strcmp(optarg, "tproxy") && strcmp(optarg, "redirect"))
				return fprintf(stderr, "wanopt intercept: --mode: tproxy or redirect\n"), 2;
			ic->mode = strcmp(optarg, "tproxy") ? TFO_ICPT_REDIRECT : TFO_ICPT_TPROXY;
			break;
		case 'l': {
			struct addrinfo hints = { .ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_STREAM }, *r;
			if (getaddrinfo(optarg, NULL, &hints, &r))
				return fprintf(stderr, "wanopt intercept: --listen: bad address\n"), 2;
			memcpy(ss, r->ai_addr, r->ai_addrlen);
			*sslen = r->ai_addrlen;
			freeaddrinfo(r);
			break;
		}
		case 'k':
			if (icpt_bad("mark", optarg, conf_mark_parse(optarg, &ic->mark)))
				return 2;
			break;
		case 'n':
			if (icpt_bad("count", optarg, conf_uint_parse(optarg, 1, 1000000000UL, &n)))
				return 2;
			ic->remaining = (long)n;
			break;
		case 'v':
			if (log_level_parse(optarg, &lvl) < 0)
				return fprintf(stderr, "wanopt intercept: --log_level: bad level\n"), 2;
			log_set_level(lvl);
			break;
		case 'h': icpt_usage(stdout); exit(0);
		default: icpt_usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "wanopt intercept: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!ic->port) {
		fprintf(stderr, "wanopt intercept: --port=PORT is required (--help for usage)\n");
		return 2;
	}
	((struct sockaddr_in *)ss)->sin_port = htons(ic->port); /* same offset for v6 */
	return 0;
}

/* `wanopt intercept`: serves until signalled or --count; 1 when it cannot listen. */
int px_cmd_intercept(int argc, char **argv)
{
	struct icpt ic = { 0 };
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct evconnlistener *l = NULL;
	struct event *sig[2] = { NULL, NULL };
	char err[256];
	int rc = 1, fd;

	if ((rc = icpt_opts(argc, argv, &ic, &ss, &sslen)) != 0)
		return rc;
	rc = 1;
	log_set_ident("intercept");
	signal(SIGPIPE, SIG_IGN);
	if ((fd = tfo_icpt_listen((struct sockaddr *)&ss, sslen, ic.mode, 0, err, sizeof err)) < 0) {
		log_error("listen on port %u: %s", ic.port, err);
		return 1;
	}
	if (!(ic.base = event_base_new()))
		goto err_fd;
	ic.env.base = ic.base;
	ic.env.on_idle = icpt_idle;
	l = evconnlistener_new(ic.base, icpt_accept_cb, &ic, LEV_OPT_CLOSE_ON_FREE, -1, fd);
	if (!l)
		goto err_base;
	sig[0] = evsignal_new(ic.base, SIGINT, icpt_signal_cb, ic.base);
	sig[1] = evsignal_new(ic.base, SIGTERM, icpt_signal_cb, ic.base);
	if (!sig[0] || !sig[1] || evsignal_add(sig[0], NULL) || evsignal_add(sig[1], NULL))
		goto err_sig;
	log_info("listening on port %u (%s)", ic.port, ic.mode == TFO_ICPT_TPROXY ? "tproxy" : "redirect");
	rc = event_base_dispatch(ic.base) < 0;
err_sig:
	for (int i = 0; i < 2; i++)
		if (sig[i])
			event_free(sig[i]);
	evconnlistener_free(l);
	fd = -1;
err_base:
	event_base_free(ic.base);
err_fd:
	if (fd >= 0)
		close(fd);
	return rc;
}
