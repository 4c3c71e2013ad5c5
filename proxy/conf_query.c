/* conf_query.c: reading a parsed configuration: queries, the allow and
 * optimize matchers, what a reload cannot change, and the config dump. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_int.h"

static const char *const conf_opt_names[] = { "full", "lz", "tfo", "passthrough" };
static const char *const conf_role_names[] = { "edge", "core" };

/* Address differs (including set/unset). */
static int conf_addr_differs(const struct conf_addr *a, const struct conf_addr *b)
{
	return a->port != b->port || strcmp(a->host, b->host);
}

/* Appends 'key k' to the list in buf ("'peer', 'stats'"); counts it. */
static void restart_note(char *buf, size_t len, int k, int *n)
{
	size_t used = strlen(buf);
	if (used < len)
		snprintf(buf + used, len - used, "%s'%s'", *n ? ", " : "", conf_key_name(k));
	++*n;
}

int conf_restart_keep(const struct conf *old, struct conf *c, char *keys, size_t keyslen)
{
	int n = 0;
#define KEEP(k, differs, keep)                         \
	if (differs) {                                  \
		restart_note(keys, keyslen, k, &n);     \
		keep;                                   \
	}
	if (keyslen)
		*keys = 0;
	KEEP(K_LISTEN, conf_addr_differs(&old->listen, &c->listen), c->listen = old->listen);
	KEEP(K_STATS, conf_addr_differs(&old->stats, &c->stats), c->stats = old->stats);
	KEEP(K_TRANSPARENT, old->transparent != c->transparent, c->transparent = old->transparent);
	KEEP(K_CONGESTION, old->cc != c->cc, c->cc = old->cc);
	KEEP(K_TUNNELS, old->tunnels != c->tunnels, c->tunnels = old->tunnels);
	KEEP(K_WORKERS, old->workers != c->workers, c->workers = old->workers);
	KEEP(K_PROTOCOL_MAX, old->protocol_max != c->protocol_max, c->protocol_max = old->protocol_max);
	KEEP(K_BYPASS_MARK, old->bypass_mark != c->bypass_mark, c->bypass_mark = old->bypass_mark);
	KEEP(K_MAX_STREAMS, old->max_streams != c->max_streams, c->max_streams = old->max_streams);
	KEEP(K_DSCP, old->dscp != c->dscp, c->dscp = old->dscp);
	KEEP(K_DSCP_TUNNELS, old->ndscp_tun != c->ndscp_tun || memcmp(old->dscp_tun, c->dscp_tun, c->ndscp_tun),
	     (c->ndscp_tun = old->ndscp_tun, memcpy(c->dscp_tun, old->dscp_tun, sizeof c->dscp_tun)));
#undef KEEP
	return n;
}

int conf_ignore(struct conf *c, const char *where, int k, char *err, size_t errlen)
{
	char **v = realloc(c->ignored, (c->nignored + 1) * sizeof *v);
	if (v)
		c->ignored = v;
	if (!v || asprintf(&v[c->nignored], "%s: '%s' has no effect on %s (it is for the %s only): ignored",
			   where, conf_key_name(k), c->role == CONF_EDGE ? "an edge" : "a core",
			   conf_role_names[!c->role]) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c->nignored++;
	return 0;
}

const char *conf_ignored(const struct conf *c, size_t i)
{
	return i < c->nignored ? c->ignored[i] : NULL;
}

/* Queries: plain reads of the parsed fields (contracts in conf.h).  Unset
 * addresses read as NULL. */
enum conf_role conf_role(const struct conf *c) { return c->role; }
const char *conf_path(const struct conf *c) { return c->path; }
const struct conf_addr *conf_peer(const struct conf *c) { return c->src[K_PEER] ? &c->peer : NULL; }
const struct conf_addr *conf_listen(const struct conf *c) { return c->src[K_LISTEN] ? &c->listen : NULL; }
const struct conf_addr *conf_stats(const struct conf *c) { return c->src[K_STATS] ? &c->stats : NULL; }
size_t conf_forward_count(const struct conf *c) { return c->nfwd; }
const struct conf_forward *conf_forward(const struct conf *c, size_t i) { return i < c->nfwd ? &c->fwd[i].f : NULL; }
uint16_t conf_transparent_port(const struct conf *c) { return c->transparent; }
const char *conf_store(const struct conf *c) { return c->store; }
uint64_t conf_store_size(const struct conf *c) { return c->store_size; }
const char *conf_tls_cert(const struct conf *c) { return c->tls_cert; }
const char *conf_tls_key(const struct conf *c) { return c->tls_key; }
const char *conf_tls_ca(const struct conf *c) { return c->tls_ca; }
enum log_level conf_log_level(const struct conf *c) { return c->log_level; }
enum conf_fail_open conf_fail_open(const struct conf *c) { return c->fail_open; }
uint64_t conf_link_rate(const struct conf *c) { return c->link_rate; }
uint64_t conf_link_rate_rx(const struct conf *c) { return c->link_rate_rx; }
uint32_t conf_link_rtt(const struct conf *c) { return c->link_rtt; }
enum conf_cc conf_congestion(const struct conf *c) { return c->cc; }
unsigned conf_tunnels(const struct conf *c) { return c->tunnels; }
unsigned conf_max_streams(const struct conf *c) { return c->max_streams; }
uint32_t conf_bypass_mark(const struct conf *c) { return c->bypass_mark; }
unsigned conf_workers(const struct conf *c) { return c->workers; }
unsigned conf_lan_bulk_streams(const struct conf *c) { return c->lan_bulk_streams; }
unsigned conf_protocol_max(const struct conf *c) { return c->protocol_max; }

/* The allow list against one destination; NULL addr never matches. */
int conf_allow_match(const struct conf *c, const struct sockaddr *addr, uint16_t port)
{
	return addr && conf_tlist_match(&c->allow, addr, port);
}

/* First matching targeted rule, else the last untargeted one, else full. */
enum conf_optimize conf_optimize_for(const struct conf *c, const struct sockaddr *addr,
				     uint16_t port)
{
	enum conf_optimize dflt = CONF_OPT_FULL;

	for (size_t i = 0; i < c->nopt; i++) {
		if (c->opt[i].targets.n == 0)
			dflt = c->opt[i].mode;
		else if (conf_tlist_match(&c->opt[i].targets, addr, port))
			return c->opt[i].mode;
	}
	return dflt;
}

/* Returns the mode's config name. */
const char *conf_optimize_name(enum conf_optimize o)
{
	return (unsigned)o < 4 ? conf_opt_names[o] : "?";
}

/* Returns the congestion control's config (and kernel) name. */
const char *conf_cc_name(enum conf_cc cc)
{
	return cc == CONF_CC_CUBIC ? "cubic" : "bbr";
}

/* Writes a size with the largest exact binary suffix. */
static void conf_dump_size(FILE *f, uint64_t v)
{
	static const char sfx[] = "KMGT";
	int i = -1;

	while (i < 3 && v && !(v & 1023)) {
		v >>= 10;
		i++;
	}
	if (i < 0)
		fprintf(f, "%llu", (unsigned long long)v);
	else
		fprintf(f, "%llu%c", (unsigned long long)v, sfx[i]);
}

/* Writes "key = host:port" when set. */
static void conf_dump_addr(FILE *f, const char *key, const struct conf_addr *a)
{
	char b[CONF_HOST_MAX + 16];

	if (a)
		fprintf(f, "%s = %s\n", key, conf_addr_format(a, b, sizeof b));
}

/* Writes "key = value" when value is set. */
static void conf_dump_str(FILE *f, const char *key, const char *v)
{
	if (v)
		fprintf(f, "%s = %s\n", key, v);
}

/* Writes the role's keys in config-file syntax. */
static void conf_dump_to(const struct conf *c, FILE *f)
{
	char b1[CONF_HOST_MAX + 16], b2[CONF_HOST_MAX + 16];

	fprintf(f, "# effective %s configuration\n", conf_role_names[c->role]);
	conf_dump_addr(f, "peer", conf_peer(c));
	conf_dump_addr(f, "listen", conf_listen(c));
	for (size_t i = 0; i < c->nfwd; i++)
		fprintf(f, "forward = %s -> %s\n", conf_addr_format(&c->fwd[i].f.listen, b1, sizeof b1),
			conf_addr_format(&c->fwd[i].f.target, b2, sizeof b2));
	if (c->transparent)
		fprintf(f, "transparent = %u\n", c->transparent);
	for (size_t i = 0; i < c->nallow_text; i++)
		fprintf(f, "allow = %s\n", c->allow_text[i]);
	conf_dump_str(f, "store", c->store);
	fprintf(f, "store_size = ");
	conf_dump_size(f, c->store_size);
	fputc('\n', f);
	conf_dump_str(f, "tls_cert", c->tls_cert);
	conf_dump_str(f, "tls_key", c->tls_key);
	conf_dump_str(f, "tls_ca", c->tls_ca);
	conf_dump_addr(f, "stats", conf_stats(c));
	fprintf(f, "log_level = %s\n", log_level_name(c->log_level));
	for (size_t i = 0; c->role == CONF_EDGE && i < c->nopt; i++) /* a core ignores them */
		fprintf(f, "optimize = %s\n", c->opt[i].text);
	if (c->role == CONF_EDGE)
		fprintf(f, "fail_open = %s\n", c->fail_open == CONF_FAIL_DIRECT ? "direct" : "refuse");
	if (c->link_rate && c->link_rate_rx != c->link_rate)
		fprintf(f, "link_rate = %llu/%llu\n", (unsigned long long)c->link_rate_rx,
			(unsigned long long)c->link_rate);
	else if (c->link_rate)
		fprintf(f, "link_rate = %llu\n", (unsigned long long)c->link_rate);
	if (c->link_rtt)
		fprintf(f, "link_rtt = %uus\n", c->link_rtt);
	fprintf(f, "congestion = %s\n", conf_cc_name(c->cc));
	if (c->role == CONF_EDGE)
		fprintf(f, "tunnels = %u\n", c->tunnels);
	if (c->role == CONF_CORE) /* an edge ignores it */
		fprintf(f, "workers = %u\n", c->workers);
	fprintf(f, "max_streams = %u\n", c->max_streams);
	if (c->protocol_max)
		fprintf(f, "protocol_max = %u\n", c->protocol_max);
	if (c->lan_bulk_streams != CONF_LAN_BULK_DEFAULT)
		fprintf(f, "lan_bulk_streams = %u\n", c->lan_bulk_streams);
	if (c->role == CONF_EDGE && c->bypass_mark != CONF_BYPASS_MARK_DEFAULT)
		fprintf(f, "bypass_mark = 0x%x\n", (unsigned)c->bypass_mark);
	conf_qos_dump(c, f);
}

/* The effective configuration as config-file text (malloc'd). */
char *conf_dump(const struct conf *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	conf_dump_to(c, f);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
