/* dns.h: a daemon's resolver, kept in step with its files (see dns.c). */
#ifndef WANOPT_DNS_H
#define WANOPT_DNS_H

#include <event2/dns.h>

struct event_base;
struct px_dns;

/* Send evdns's own messages to our log as "name lookups: ..." (warnings as
 * warnings, the rest as debug lines).  Once, before any thread makes a
 * resolver (libevent keeps it in a global). */
void px_dns_log_init(void);

/* A resolver on base from /etc/resolv.conf and /etc/hosts.  Before a
 * lookup it looks at both files (at most once every PX_DNS_CHECK_MS) and
 * reads them again if either changed, as the C library does; logged once
 * per process and change, whichever of its resolvers (a core's workers
 * have one each) sees it first.  NULL if libevent cannot make one. */
struct px_dns *px_dns_new(struct event_base *base);
/* A resolver over evdns, which it now owns (px_dns_free frees it): name
 * servers the caller set; no files read or watched.  NULL if out of memory
 * (evdns is then freed). */
struct px_dns *px_dns_wrap(struct evdns_base *evdns);
/* evdns_getaddrinfo() through d, after the look at the files.  With no d
 * (no resolver could be made), cb gets EVUTIL_EAI_FAIL at once and NULL is
 * returned, as for any answer that comes at once. */
struct evdns_getaddrinfo_request *px_dns_lookup(struct px_dns *d, const char *name, const char *port,
						const struct evutil_addrinfo *hints, evdns_getaddrinfo_cb cb,
						void *arg);
/* Read /etc/resolv.conf and /etc/hosts into d again now (a reload): name
 * servers replaced, hosts entries dropped and read again; lookups in flight
 * go again.  Nothing for a wrapped resolver or NULL.  A warning is logged (prefix first; none if prefix is NULL) if
 * the file is missing, lists no name server or does not read. */
void px_dns_reread(struct px_dns *d, const char *prefix);
/* Free d, failing its lookups in flight, and run base's loop once so that
 * their callbacks come (cancelled or failed lookups call back from the
 * loop; without it libevent keeps their requests).  NULL is fine. */
void px_dns_free(struct px_dns *d, struct event_base *base);

#define PX_DNS_CHECK_MS 1000

#endif
