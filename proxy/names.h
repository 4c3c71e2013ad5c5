/* names.h: host names kept resolved in the background (see names.c). */
#ifndef WANOPT_NAMES_H
#define WANOPT_NAMES_H

#include <sys/socket.h>

#include "conf.h"

struct event_base;
struct px_dns;
struct px_name;

/* Keep a's host resolved for `what` (named in log lines): a numeric address
 * at once; a name through dns (lookups on base's loop, never blocking it),
 * again every PX_NAME_REFRESH_S seconds, every PX_NAME_RETRY_S after a
 * failure (logged once, and its recovery).  NULL if out of memory. */
struct px_name *px_name_new(struct event_base *base, struct px_dns *dns, const struct conf_addr *a,
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

#define PX_NAME_ADDRS 8
#define PX_NAME_REFRESH_S 60
#define PX_NAME_RETRY_S 5

#endif
