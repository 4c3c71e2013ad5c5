/*
 * edge_peer.c: a reload that names another core (`peer`) moves the edge's
 * tunnel to it without cutting a stream.  Each lane dials the new address
 * (kept resolved in the background, as the old one was) and keeps its
 * connections to the old core, taking streams, until a connection to the
 * new one is up (tun_client_renew, make before break); they then close as
 * their streams finish.  A core that cannot be reached leaves the edge on
 * the old connections while its lanes keep dialing the new address.
 */
#include <stdio.h>
#include <string.h>

#include "edge_int.h"
#include "log.h"
#include "names.h"

int px_edge_repoint(struct px_edge *e, const struct conf *old, const struct conf *c)
{
	const struct conf_addr *a = conf_peer(c), *was = conf_peer(old);
	char to[CONF_HOST_MAX + 16], from[CONF_HOST_MAX + 16];
	if (!strcmp(a->host, was->host) && a->port == was->port)
		return 0;
	conf_addr_format(a, to, sizeof to);
	conf_addr_format(was, from, sizeof from);
	struct px_name *n = px_name_new(e->node.env.base, e->dns, a, "tunnel");
	if (!n) {
		log_error("reload: peer %s: out of memory: the tunnel stays with %s", to, from);
		return -1;
	}
	px_name_free(e->peer);
	e->peer = n;
	for (int i = 0; i < e->nlane; i++) {
		tun_client_set_peer(e->lane[i].tc, a->host, a->port);
		tun_client_renew(e->lane[i].tc, e->node.tcfg.store_id, "the edge moves to another core");
	}
	log_info("tunnel: the core is now %s (was %s): connections to it are dialed, and those to %s take"
		 " streams until one is up, then close as their streams finish", to, from, from);
	return 1;
}
