/* names.h: host names kept resolved in the background (see names.c). */
#ifndef WANOPT_NAMES_H
#define WANOPT_NAMES_H

#include <sys/socket.h>

#include "conf.h"

struct event_base;
struct evdns_base;
struct px_name;

/* Keep a's host resolved for `what` (named in log lines): a numeric address
 * at once; a name through dns (lookups on base's loop, never blocking it),
 * again every PX_NAME_REFRESH_S seconds, every PX_NAME_RETRY_S after a
 * failure (logged once, and its recovery).  NULL if out of memory. */
struct px_name *px_name_new(struct event_base *base, struct evdns_base *dns, const struct conf_addr *a,
			    const char *what);
/* Address i (modulo how many the name resolved to, at most PX_NAME_ADDRS,
 * in the resolver's order; kept when a later lookup fails) into *ss and
 * *sl: 0; 1 while the first lookup runs; -1 if none ever resolved. */
int px_name_get(const struct px_name *n, unsigned i, struct sockaddr_storage *ss, socklen_t *sl);
/* Look n up again now (a reload); the addresses held stay until it answers. */
void px_name_refresh(struct px_name *n);
/* If n has no address yet and from is the same host and port, n starts
 * with from's addresses (a reload made n anew: a name server out of reach
 * then must not cost what was known). */
void px_name_seed(struct px_name *n, const struct px_name *from);
/* n's host, as given. */
const char *px_name_host(const struct px_name *n);
/* Stop and free n (a lookup in flight is cancelled); NULL is fine. */
void px_name_free(struct px_name *n);

/* Free dns, failing its lookups in flight, and run base's loop once so
 * that their callbacks come (cancelled or failed lookups call back from the
 * loop; without it libevent keeps their requests).  NULL is fine. */
void px_dns_free(struct evdns_base *dns, struct event_base *base);

/* Read /etc/resolv.conf and /etc/hosts into dns again (a reload): name
 * servers replaced, hosts entries dropped and read again; lookups in flight
 * go again.  A warning is logged (prefix first; none if prefix is NULL)
 * if the file is missing, lists no name server or does not read. */
void px_dns_reread(struct evdns_base *dns, const char *prefix);

#define PX_NAME_ADDRS 8
#define PX_NAME_REFRESH_S 60
#define PX_NAME_RETRY_S 5

#endif
