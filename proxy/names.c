/*
 * names.c: host names kept resolved in the background, so that an edge's
 * event loop never waits on DNS (a forward's target is resolved for its
 * optimize/classify rules and for going direct; with the name server across
 * a WAN that is down, a blocking lookup held every stream for seconds).
 * Lookups go through the daemon's resolver (dns.c: libevent's evdns, from
 * resolv.conf and hosts); the result is kept and looked up again periodically.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "dns.h"
#include "log.h"
#include "names.h"

/* One lookup in flight; outlives a cancelled name (the callback frees it). */
struct lookup {
	struct px_name *n; /* NULL once cancelled */
};

struct px_name {
	struct px_dns *dns;
	struct conf_addr a;
	char what[CONF_HOST_MAX + 48];
	struct event *timer;
	struct lookup *lk;
	struct evdns_getaddrinfo_request *req; /* lk's, to cancel */
	struct sockaddr_storage ss[PX_NAME_ADDRS];
	socklen_t sl[PX_NAME_ADDRS];
	int have;   /* addresses in ss[] (kept when a later lookup fails) */
	int failed; /* the last lookup failed */
};

static void name_lookup(struct px_name *n);

static void name_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what;
	name_lookup(arg);
}

/* evdns answered (or the lookup was cancelled). */
static void name_done(int rc, struct evutil_addrinfo *ai, void *arg)
{
	struct lookup *lk = arg;
	struct px_name *n = lk->n;
	free(lk);
	if (!n) {
		if (ai)
			evutil_freeaddrinfo(ai);
		return;
	}
	n->lk = NULL;
	n->req = NULL;
	if (rc == 0 && ai) {
		n->have = 0;
		for (struct evutil_addrinfo *p = ai; p && n->have < PX_NAME_ADDRS; p = p->ai_next) {
			if (p->ai_addrlen > sizeof n->ss[0])
				continue;
			memcpy(&n->ss[n->have], p->ai_addr, p->ai_addrlen);
			n->sl[n->have++] = (socklen_t)p->ai_addrlen;
		}
		if (n->failed)
			log_info("%s: %s resolves again", n->what, n->a.host);
		n->failed = 0;
	} else if (!n->failed) {
		log_warn("%s: %s does not resolve: %s (looked up again every %d s%s)", n->what, n->a.host,
			 evutil_gai_strerror(rc), PX_NAME_RETRY_S, n->have ? "; the addresses it had still used" : "");
		n->failed = 1;
	}
	if (ai)
		evutil_freeaddrinfo(ai);
	struct timeval tv = { n->failed ? PX_NAME_RETRY_S : PX_NAME_REFRESH_S, 0 };
	event_add(n->timer, &tv);
}

/* Start a lookup of n's name (the answer may come at once). */
static void name_lookup(struct px_name *n)
{
	struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	char port[8];
	struct lookup *lk = calloc(1, sizeof *lk);
	if (!lk) {
		struct timeval tv = { PX_NAME_RETRY_S, 0 };
		event_add(n->timer, &tv);
		return;
	}
	lk->n = n;
	n->lk = lk;
	snprintf(port, sizeof port, "%u", n->a.port);
	struct evdns_getaddrinfo_request *r = px_dns_lookup(n->dns, n->a.host, port, &hints, name_done, lk);
	if (n->lk == lk) /* not answered at once */
		n->req = r;
}

/* A numeric host (IPv4, or IPv6 without brackets) into n, without DNS. */
static int name_numeric(struct px_name *n)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *res;
	char port[8];
	snprintf(port, sizeof port, "%u", n->a.port);
	if (getaddrinfo(n->a.host, port, &hints, &res) != 0)
		return -1;
	memcpy(&n->ss[0], res->ai_addr, res->ai_addrlen);
	n->sl[0] = res->ai_addrlen;
	n->have = 1;
	freeaddrinfo(res);
	return 0;
}

struct px_name *px_name_new(struct event_base *base, struct px_dns *dns, const struct conf_addr *a,
			    const char *what)
{
	struct px_name *n = calloc(1, sizeof *n);
	if (!n)
		return NULL;
	n->dns = dns;
	n->a = *a;
	snprintf(n->what, sizeof n->what, "%s", what);
	if (name_numeric(n) == 0)
		return n;
	if (!(n->timer = evtimer_new(base, name_timer, n))) {
		free(n);
		return NULL;
	}
	name_lookup(n);
	return n;
}

int px_name_get(const struct px_name *n, unsigned i, struct sockaddr_storage *ss, socklen_t *sl)
{
	if (!n->have)
		return n->failed ? -1 : 1;
	i %= (unsigned)n->have;
	memcpy(ss, &n->ss[i], n->sl[i]);
	*sl = n->sl[i];
	return 0;
}

void px_name_refresh(struct px_name *n)
{
	if (!n->timer || n->lk)
		return; /* a numeric address, or a lookup on its way */
	event_del(n->timer);
	name_lookup(n);
}

void px_name_seed(struct px_name *n, const struct px_name *from)
{
	if (n->have || !from->have || strcmp(n->a.host, from->a.host) || n->a.port != from->a.port)
		return;
	memcpy(n->ss, from->ss, sizeof n->ss);
	memcpy(n->sl, from->sl, sizeof n->sl);
	n->have = from->have;
}

const char *px_name_host(const struct px_name *n)
{
	return n->a.host;
}

void px_name_free(struct px_name *n)
{
	if (!n)
		return;
	if (n->lk) {
		n->lk->n = NULL; /* its callback still comes (EVUTIL_EAI_CANCEL), and frees it */
		if (n->req)
			evdns_getaddrinfo_cancel(n->req);
	}
	if (n->timer)
		event_free(n->timer);
	free(n);
}
