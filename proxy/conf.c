/* conf.c: the configuration of both roles: the key table, file and
 * command-line parsing with "where: what" errors, validation, queries, reload.
 * Value parsers and the CIDR[:PORTS] matcher live in conf_acl.c. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_int.h"
#include "proto.h"

#define CONF_FILE_MAX (1u << 20)
#define CONF_LINE_MAX 4096
#define CONF_MSG_MAX 512

enum { ROLE_EDGE = 1 << CONF_EDGE, ROLE_CORE = 1 << CONF_CORE, ROLE_BOTH = 3 };

typedef int (*conf_setter)(struct conf *c, const char *v, char *msg, size_t len);

struct conf_key {
	const char *name;
	unsigned roles;
	int repeatable;
	int reloadable;
	conf_setter set;
	void (*reset)(struct conf *c); /* repeatable keys: drop entries */
	const char *help;              /* "VALUE  what it does" for --help */
};

/* Copies an error message to msg, returning -1 (setters' convention). */
static int conf_fail(char *msg, size_t len, const char *what)
{
	snprintf(msg, len, "%s", what);
	return -1;
}

/* Sets an address field. */
static int conf_set_addr(struct conf_addr *a, const char *v, char *msg, size_t len)
{
	const char *e = conf_addr_parse(v, a);
	return e ? conf_fail(msg, len, e) : 0;
}

/* Address keys: peer, listen, stats. */
static int set_peer(struct conf *c, const char *v, char *m, size_t l) { return conf_set_addr(&c->peer, v, m, l); }
static int set_listen(struct conf *c, const char *v, char *m, size_t l) { return conf_set_addr(&c->listen, v, m, l); }
static int set_stats(struct conf *c, const char *v, char *m, size_t l) { return conf_set_addr(&c->stats, v, m, l); }

/* Stores a path, relative ones taken from a file resolved against its dir. */
static int conf_set_path(struct conf *c, char **dst, const char *v, char *msg, size_t len)
{
	char *p;

	if (v[0] != '/' && c->cur == SRC_FILE && c->dir) {
		size_t n = strlen(c->dir) + strlen(v) + 2;
		p = malloc(n);
		if (p)
			snprintf(p, n, "%s/%s", c->dir, v);
	} else {
		p = strdup(v);
	}
	if (!p)
		return conf_fail(msg, len, "out of memory");
	free(*dst);
	*dst = p;
	return 0;
}

/* Path keys: store, tls_cert, tls_key, tls_ca. */
static int set_store(struct conf *c, const char *v, char *m, size_t l) { return conf_set_path(c, &c->store, v, m, l); }
static int set_cert(struct conf *c, const char *v, char *m, size_t l) { return conf_set_path(c, &c->tls_cert, v, m, l); }
static int set_key(struct conf *c, const char *v, char *m, size_t l) { return conf_set_path(c, &c->tls_key, v, m, l); }
static int set_ca(struct conf *c, const char *v, char *m, size_t l) { return conf_set_path(c, &c->tls_ca, v, m, l); }

/* store_size: at least 1 MiB. */
static int set_store_size(struct conf *c, const char *v, char *msg, size_t len)
{
	uint64_t sz;
	const char *e = conf_size_parse(v, &sz);

	if (e)
		return conf_fail(msg, len, e);
	if (sz < (1u << 20))
		return conf_fail(msg, len, "store_size too small (minimum 1M)");
	c->store_size = sz;
	return 0;
}

/* transparent = PORT. */
static int set_transparent(struct conf *c, const char *v, char *msg, size_t len)
{
	unsigned long p;

	if (conf_uint_parse(v, 1, 65535, &p))
		return conf_fail(msg, len, "expected a port (1-65535)");
	c->transparent = (uint16_t)p;
	return 0;
}

/* forward = LISTEN -> TARGET. */
static int set_forward(struct conf *c, const char *v, char *msg, size_t len)
{
	char lbuf[CONF_LINE_MAX];
	struct conf_forward f;
	const char *arrow = strstr(v, "->"), *e;
	size_t n;

	if (!arrow)
		return conf_fail(msg, len, "expected LISTEN_HOST:PORT -> TARGET_HOST:PORT");
	if (strstr(arrow + 2, "->") || strchr(v, ','))
		return conf_fail(msg, len, "one LISTEN_HOST:PORT -> TARGET_HOST:PORT per forward line (the key repeats)");
	n = (size_t)(arrow - v);
	while (n && isspace((unsigned char)v[n - 1]))
		n--;
	memcpy(lbuf, v, n);
	lbuf[n] = 0;
	if ((e = conf_addr_parse(lbuf, &f.listen))) {
		snprintf(msg, len, "listen address: %s", e);
		return -1;
	}
	arrow += 2;
	while (isspace((unsigned char)*arrow))
		arrow++;
	if ((e = conf_addr_parse(arrow, &f.target))) {
		snprintf(msg, len, "target address: %s", e);
		return -1;
	}
	if (c->nfwd == c->capfwd) { /* doubling: thousands of forwards cost no copy each */
		size_t cap = c->capfwd ? 2 * c->capfwd : 8;
		struct conf_fwd_ent *nv = realloc(c->fwd, cap * sizeof *nv);
		if (!nv)
			return conf_fail(msg, len, "out of memory");
		c->fwd = nv;
		c->capfwd = cap;
	}
	c->fwd[c->nfwd].f = f;
	c->fwd[c->nfwd].where = NULL;
	c->nfwd++;
	return 0;
}

/* Drops every forward. */
static void reset_forward(struct conf *c)
{
	for (size_t i = 0; i < c->nfwd; i++)
		free(c->fwd[i].where);
	free(c->fwd);
	c->fwd = NULL;
	c->nfwd = c->capfwd = 0;
}

/* Appends s to a string array. */
static int conf_strv_add(char ***v, size_t *n, const char *s)
{
	char *d = strdup(s);
	char **nv = d ? realloc(*v, (*n + 1) * sizeof *nv) : NULL;

	if (!nv) {
		free(d);
		return -1;
	}
	*v = nv;
	(*v)[(*n)++] = d;
	return 0;
}

/* allow = CIDR[:PORTS], ... */
static int set_allow(struct conf *c, const char *v, char *msg, size_t len)
{
	if (conf_tlist_parse(&c->allow, v, msg, len) < 0)
		return -1;
	if (conf_strv_add(&c->allow_text, &c->nallow_text, v) < 0)
		return conf_fail(msg, len, "out of memory");
	return 0;
}

/* Drops the allow list. */
static void reset_allow(struct conf *c)
{
	conf_tlist_clear(&c->allow);
	for (size_t i = 0; i < c->nallow_text; i++)
		free(c->allow_text[i]);
	free(c->allow_text);
	c->allow_text = NULL;
	c->nallow_text = 0;
}

/* optimize = MODE [CIDR[:PORTS], ...] */
static int set_optimize(struct conf *c, const char *v, char *msg, size_t len)
{
	size_t wl = strcspn(v, " \t");
	const char *rest = v + wl;
	int mode = -1;

	for (int i = 0; i < 4; i++)
		if (strlen(conf_optimize_name((enum conf_optimize)i)) == wl &&
		    !strncmp(v, conf_optimize_name((enum conf_optimize)i), wl))
			mode = i;
	if (mode < 0)
		return conf_fail(msg, len, "expected full, lz, tfo or passthrough, "
				 "then optional CIDR[:PORTS], ...");
	struct conf_opt_rule *nv = realloc(c->opt, (c->nopt + 1) * sizeof *nv);
	if (!nv)
		return conf_fail(msg, len, "out of memory");
	c->opt = nv;
	struct conf_opt_rule *r = &c->opt[c->nopt];
	memset(r, 0, sizeof *r);
	r->mode = (enum conf_optimize)mode;
	while (isspace((unsigned char)*rest))
		rest++;
	if (*rest && conf_tlist_parse(&r->targets, rest, msg, len) < 0) {
		conf_tlist_clear(&r->targets);
		return -1;
	}
	if (!(r->text = strdup(v))) {
		conf_tlist_clear(&r->targets);
		return conf_fail(msg, len, "out of memory");
	}
	c->nopt++;
	return 0;
}

/* Drops every optimize rule. */
static void reset_optimize(struct conf *c)
{
	for (size_t i = 0; i < c->nopt; i++) {
		conf_tlist_clear(&c->opt[i].targets);
		free(c->opt[i].text);
	}
	free(c->opt);
	c->opt = NULL;
	c->nopt = 0;
}

/* log_level = error|warn|info|debug. */
static int set_log_level(struct conf *c, const char *v, char *msg, size_t len)
{
	if (log_level_parse(v, &c->log_level) < 0)
		return conf_fail(msg, len, "expected error, warn, info or debug");
	return 0;
}

/* fail_open = refuse|direct. */
static int set_fail_open(struct conf *c, const char *v, char *msg, size_t len)
{
	if (!strcmp(v, "refuse"))
		c->fail_open = CONF_FAIL_REFUSE;
	else if (!strcmp(v, "direct"))
		c->fail_open = CONF_FAIL_DIRECT;
	else
		return conf_fail(msg, len, "expected refuse or direct");
	return 0;
}

/* congestion = bbr|cubic. */
static int set_congestion(struct conf *c, const char *v, char *msg, size_t len)
{
	if (!strcmp(v, "bbr"))
		c->cc = CONF_CC_BBR;
	else if (!strcmp(v, "cubic"))
		c->cc = CONF_CC_CUBIC;
	else
		return conf_fail(msg, len, "expected bbr or cubic");
	return 0;
}

/* link_rate = RATE, or DOWN/UP (bit/s). */
static int set_link_rate(struct conf *c, const char *v, char *msg, size_t len)
{
	const char *e = conf_link_rate_parse(v, &c->link_rate_rx, &c->link_rate);
	return e ? conf_fail(msg, len, e) : 0;
}

/* link_rtt = DURATION. */
static int set_link_rtt(struct conf *c, const char *v, char *msg, size_t len)
{
	const char *e = conf_rtt_parse(v, &c->link_rtt);
	return e ? conf_fail(msg, len, e) : 0;
}

/* bypass_mark = 1..0xffffffff (decimal or 0x hex). */
static int set_bypass_mark(struct conf *c, const char *v, char *msg, size_t len)
{
	const char *e = conf_mark_parse(v, &c->bypass_mark);
	return e ? conf_fail(msg, len, e) : 0;
}

/* A whole number in lo..hi into *dst; anything else is an error naming the
 * bounds. */
static int conf_set_uint(unsigned *dst, const char *v, unsigned long lo, unsigned long hi, char *msg, size_t len)
{
	unsigned long n;
	const char *e = conf_uint_parse(v, lo, hi, &n);
	if (e)
		return conf_fail(msg, len, e);
	*dst = (unsigned)n;
	return 0;
}

/* Number keys: tunnels 1..16, max_streams 1..PROTO_MAX_STREAMS, workers
 * 0..256 (0: one per CPU), protocol_max 1..PROTO_VERSION, lan_bulk_streams
 * 0..CONF_LAN_BULK_MAX. */
static int set_tunnels(struct conf *c, const char *v, char *m, size_t l) { return conf_set_uint(&c->tunnels, v, 1, 16, m, l); }
static int set_max_streams(struct conf *c, const char *v, char *m, size_t l) { return conf_set_uint(&c->max_streams, v, 1, PROTO_MAX_STREAMS, m, l); }
static int set_workers(struct conf *c, const char *v, char *m, size_t l) { return conf_set_uint(&c->workers, v, 0, 256, m, l); }
static int set_protocol_max(struct conf *c, const char *v, char *m, size_t l) { return conf_set_uint(&c->protocol_max, v, PROTO_VERSION_MIN, PROTO_VERSION, m, l); }
static int set_lan_bulk(struct conf *c, const char *v, char *m, size_t l) { return conf_set_uint(&c->lan_bulk_streams, v, 0, CONF_LAN_BULK_MAX, m, l); }

/* Every key; index order is the dump order.  Fewer than 32 (src/where). */
static const struct conf_key conf_keys[] = {
	{ "peer",        ROLE_EDGE, 0, 0, set_peer, NULL, "HOST:PORT  the core's tunnel address (required)" },
	{ "listen",      ROLE_CORE, 0, 0, set_listen, NULL, "HOST:PORT  tunnel listener for edges (required)" },
	{ "forward",     ROLE_EDGE, 1, 1, set_forward, reset_forward, "LISTEN_HOST:PORT -> TARGET_HOST:PORT  explicit forward (repeatable)" },
	{ "transparent", ROLE_EDGE, 0, 0, set_transparent, NULL, "PORT  TPROXY/REDIRECT listener (see intercept-nft.sh)" },
	{ "allow",       ROLE_CORE, 1, 1, set_allow, reset_allow, "CIDR[:PORTS], ...  targets edges may reach; none given: nothing (repeatable)" },
	{ "store",       ROLE_BOTH, 0, 0, set_store, NULL, "DIR  chunk store directory (required)" },
	{ "store_size",  ROLE_BOTH, 0, 1, set_store_size, NULL, "SIZE  store capacity, K/M/G/T (default 10G)" },
	{ "tls_cert",    ROLE_BOTH, 0, 1, set_cert, NULL, "FILE  this node's certificate (required)" },
	{ "tls_key",     ROLE_BOTH, 0, 1, set_key, NULL, "FILE  its private key (required)" },
	{ "tls_ca",      ROLE_BOTH, 0, 1, set_ca, NULL, "FILE  the CA that signs the peer's certificate (required)" },
	{ "stats",       ROLE_BOTH, 0, 0, set_stats, NULL, "HOST:PORT  HTTP server for /metrics, /stats.json and (from loopback) warm requests" },
	{ "log_level",   ROLE_BOTH, 0, 1, set_log_level, NULL, "error|warn|info|debug  (default info)" },
	{ "optimize",    ROLE_EDGE, 1, 1, set_optimize, reset_optimize, "MODE [CIDR[:PORTS], ...]  full|lz|tfo|passthrough per destination (repeatable)" },
	{ "fail_open",   ROLE_EDGE, 0, 1, set_fail_open, NULL, "refuse|direct  forwards while the tunnel is down (default refuse)" },
	{ "link_rate",   ROLE_BOTH, 0, 1, set_link_rate, NULL, "RATE|DOWN/UP  WAN rate hint in bit/s, e.g. 1.544M or 20M/2M" },
	{ "link_rtt",    ROLE_BOTH, 0, 1, set_link_rtt, NULL, "TIME  WAN round-trip hint, e.g. 40ms (a bare number is milliseconds)" },
	{ "congestion",  ROLE_BOTH, 0, 0, set_congestion, NULL, "bbr|cubic  tunnel congestion control (default bbr)" },
	{ "tunnels",     ROLE_EDGE, 0, 0, set_tunnels, NULL, "N  parallel tunnel connections, 1-16 (default 1)" },
	{ "workers",     ROLE_CORE, 0, 0, set_workers, NULL, "N  worker threads, edges spread across them; 0 = one per CPU (default 0)" },
	{ "protocol_max", ROLE_BOTH, 0, 0, set_protocol_max, NULL, "N  newest tunnel protocol version to offer (default: the newest built in)" },
	{ "bypass_mark", ROLE_EDGE, 0, 0, set_bypass_mark, NULL, "MARK  SO_MARK of the edge's own sockets, which interception rules skip (default 0x2; intercept-nft.sh --bypass)" },
	{ "max_streams", ROLE_BOTH, 0, 0, set_max_streams, NULL, "N  streams the peer may have open at once on each tunnel connection, 1-16384 (default 16384)" },
	{ "dscp",        ROLE_EDGE, 0, 0, conf_set_dscp, NULL, "CLASS  DSCP of the main tunnel connections: csN, afXY, ef or 0-63 (default: unmarked)" },
	{ "dscp_tunnels", ROLE_EDGE, 0, 0, conf_set_dscp_tunnels, NULL, "CLASS, ...  DSCP classes that get a tunnel connection of their own, marked so; clients' connections in that class ride it (default none)" },
	{ "lan_bulk_streams", ROLE_BOTH, 0, 1, set_lan_bulk, NULL, "N  streams of the process whose LAN socket may hold a 16 MiB receive buffer at once, while their sender outpaces the proxy; 0-1024, 0 = none (default 8)" },
	{ "classify",    ROLE_EDGE, 1, 1, conf_set_classify, conf_reset_classify, "CLASS CIDR[:PORTS], ...  class of unmarked client connections to these targets: they ride its dscp_tunnels connection, the server is dialed in it (repeatable; first match wins)" },
};
#define CONF_NKEYS (sizeof conf_keys / sizeof conf_keys[0])

/* Lists the role's keys with their syntax, one per line. */
void conf_help(FILE *f, enum conf_role role)
{
	for (size_t i = 0; i < CONF_NKEYS; i++) {
		const char *h = conf_keys[i].help, *sp = strstr(h, "  ");
		if (!(conf_keys[i].roles & (1u << role)))
			continue;
		fprintf(f, "  --%s=%.*s\n      %s%s\n", conf_keys[i].name, (int)(sp - h), h, sp + 2,
			conf_keys[i].reloadable ? "; reloaded on SIGHUP" : "");
	}
}

/* Names a key index for messages elsewhere in the module. */
const char *conf_key_name(int k)
{
	return k >= 0 && (size_t)k < CONF_NKEYS ? conf_keys[k].name : "?";
}

/* Index of key (with '-' read as '_'), or -1. */
static int conf_key_find(const char *key)
{
	char k[32];
	size_t n = strlen(key);

	if (n >= sizeof k)
		return -1;
	for (size_t i = 0; i <= n; i++)
		k[i] = key[i] == '-' ? '_' : key[i];
	for (size_t i = 0; i < CONF_NKEYS; i++)
		if (!strcmp(conf_keys[i].name, k))
			return (int)i;
	return -1;
}

const char *conf_where(const struct conf *c, const char *key)
{
	int k = conf_key_find(key);
	return k < 0 ? NULL : c->where[k];
}

/* Applies one "key = value" coming from src; where names it in messages. */
static int conf_apply(struct conf *c, const char *where, const char *key, const char *val,
		      enum conf_src src, char *err, size_t errlen)
{
	char msg[CONF_MSG_MAX];
	int i = conf_key_find(key);

	if (i < 0) {
		snprintf(err, errlen, "%s: unknown key '%s'", where, key);
		return -1;
	}
	const struct conf_key *k = &conf_keys[i];
	if (!(k->roles & (1u << c->role)))
		return conf_ignore(c, where, i, err, errlen); /* warned about, not an error: see conf.h */
	if (!*val) {
		snprintf(err, errlen, "%s: '%s' needs a value", where, k->name);
		return -1;
	}
	size_t vlen = strlen(val);
	if (vlen >= 2 && (*val == '"' || *val == '\'') && val[vlen - 1] == *val) {
		snprintf(err, errlen, "%s: '%s': quotes would be part of the value: write it without them", where,
			 k->name);
		return -1;
	}
	for (const unsigned char *q = (const unsigned char *)val; *q; q++) {
		if ((*q < 0x20 && *q != '\t') || *q == 0x7f) {
			snprintf(err, errlen, "%s: '%s': control character 0x%02x in the value", where, k->name, *q);
			return -1;
		}
		/* what a file would read as a comment cannot be a value anywhere */
		if (*q == '#' && (q == (const unsigned char *)val || isspace(q[-1]))) {
			snprintf(err, errlen, "%s: '%s': a '#' at the start of a value or after a space begins a comment",
				 where, k->name);
			return -1;
		}
	}
	if (k->repeatable && src == SRC_ARGS && c->src[i] == SRC_FILE)
		k->reset(c);
	if (!k->repeatable && c->src[i] == src) {
		snprintf(err, errlen, "%s: '%s' given twice (first at %s)", where, k->name,
			 c->where[i]);
		return -1;
	}
	c->cur = src;
	if (k->set(c, val, msg, sizeof msg) < 0) {
		snprintf(err, errlen, "%s: %s: %s", where, k->name, msg);
		return -1;
	}
	char *w = strdup(where);
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (i == K_FORWARD)
		c->fwd[c->nfwd - 1].where = strdup(w);
	free(c->where[i]);
	c->where[i] = w;
	c->src[i] = (unsigned char)src;
	return 0;
}

/* Trims spaces at both ends in place; returns the new start. */
static char *conf_trim(char *s)
{
	size_t n;

	while (isspace((unsigned char)*s))
		s++;
	n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = 0;
	return s;
}

/* Parses one file line (NUL-terminated, modifiable).  A comment starts at a
 * '#' that begins the line or follows whitespace or the '='. */
static int conf_line(struct conf *c, const char *where, char *line, char *err, size_t errlen)
{
	char *p = line;

	for (char *h = p; (h = strchr(h, '#')); h++) {
		if (h == p || isspace((unsigned char)h[-1]) || h[-1] == '=') {
			*h = 0;
			break;
		}
	}
	p = conf_trim(p);
	if (!*p)
		return 0;
	char *eq = strchr(p, '=');
	if (!eq) {
		snprintf(err, errlen, "%s: expected 'key = value'", where);
		return -1;
	}
	*eq = 0;
	char *key = conf_trim(p), *val = conf_trim(eq + 1);
	if (!*key) {
		snprintf(err, errlen, "%s: expected 'key = value'", where);
		return -1;
	}
	return conf_apply(c, where, key, val, SRC_FILE, err, errlen);
}

/* Parses the file text line by line. */
static int conf_text(struct conf *c, const char *name, const char *text, char *err, size_t errlen)
{
	char line[CONF_LINE_MAX], where[CONF_LINE_MAX];
	unsigned lineno = 0;

	if (!strncmp(text, "\xef\xbb\xbf", 3))
		text += 3; /* a UTF-8 byte-order mark, as some editors write */
	while (*text) {
		size_t n = strcspn(text, "\n");
		lineno++;
		snprintf(where, sizeof where, "%s:%u", name, lineno);
		if (n >= sizeof line) {
			snprintf(err, errlen, "%s: line too long (max %d bytes)", where, CONF_LINE_MAX - 1);
			return -1;
		}
		memcpy(line, text, n);
		line[n] = 0;
		if (n && line[n - 1] == '\r')
			line[n - 1] = 0;
		if (conf_line(c, where, line, err, errlen) < 0)
			return -1;
		text += n + (text[n] == '\n');
	}
	return 0;
}

/* Applies "--key=value" overrides. */
static int conf_overrides(struct conf *c, int nargs, char *const *args, char *err, size_t errlen)
{
	char kbuf[64];

	for (int i = 0; i < nargs; i++) {
		const char *a = args[i], *eq = strchr(a, '=');
		if (strncmp(a, "--", 2) || !eq || eq == a + 2 || (size_t)(eq - a - 2) >= sizeof kbuf) {
			snprintf(err, errlen, "%.200s: expected --key=value", a);
			return -1;
		}
		memcpy(kbuf, a + 2, (size_t)(eq - a - 2));
		kbuf[eq - a - 2] = 0;
		char where[256], *val = strdup(eq + 1);
		if (!val) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		snprintf(where, sizeof where, "%.200s", a);
		/* trimmed as in a file, so a value means the same in both places */
		int rc = conf_apply(c, where, kbuf, conf_trim(val), SRC_ARGS, err, errlen);
		free(val);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* Missing required keys and cross-key conflicts. */
static int conf_validate(struct conf *c, char *err, size_t errlen)
{
	static const int edge_req[] = { K_PEER, K_STORE, K_TLS_CERT, K_TLS_KEY, K_TLS_CA, -1 };
	static const int core_req[] = { K_LISTEN, K_STORE, K_TLS_CERT, K_TLS_KEY, K_TLS_CA, -1 };
	const int *req = c->role == CONF_EDGE ? edge_req : core_req;
	const char *src = c->name ? c->name : "command line";

	for (; *req >= 0; req++) {
		if (c->src[*req] == SRC_UNSET) {
			snprintf(err, errlen, "%s: missing required key '%s'%s", src,
				 conf_keys[*req].name, c->name ? "" : " (no -c FILE given)");
			return -1;
		}
	}
	if (c->role == CONF_EDGE && !c->nfwd && !c->transparent) {
		snprintf(err, errlen, "%s: nothing to accelerate: give 'forward' or 'transparent'", src);
		return -1;
	}
	return conf_listeners_clash(c, err, errlen);
}

/* Allocates a configuration with defaults and a copy of the overrides. */
static struct conf *conf_new(enum conf_role role, const char *name, int nargs, char *const *args)
{
	struct conf *c = calloc(1, sizeof *c);

	if (!c)
		return NULL;
	c->role = role;
	c->store_size = 10ull << 30;
	c->log_level = LOGL_INFO;
	c->tunnels = 1;
	c->max_streams = PROTO_MAX_STREAMS;
	c->lan_bulk_streams = CONF_LAN_BULK_DEFAULT;
	c->bypass_mark = CONF_BYPASS_MARK_DEFAULT;
	if (name && !(c->name = strdup(name)))
		goto fail;
	if (nargs > 0 && !(c->args = calloc((size_t)nargs, sizeof *c->args)))
		goto fail;
	for (c->nargs = 0; c->nargs < nargs; c->nargs++)
		if (!(c->args[c->nargs] = strdup(args[c->nargs])))
			goto fail;
	return c;
fail:
	conf_free(c);
	return NULL;
}

/* The directory part of a path, or NULL when it has none. */
static char *conf_dirname(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return NULL;
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

/* File text first, then overrides, then validation; NULL with err on any error. */
struct conf *conf_parse(enum conf_role role, const char *name, const char *text,
			int nargs, char *const *args, char *err, size_t errlen)
{
	struct conf *c = conf_new(role, text ? (name ? name : "config") : NULL, nargs, args);
	char *dir = NULL;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (text) {
		dir = conf_dirname(c->name);
		c->dir = dir;
		if (conf_text(c, c->name, text, err, errlen) < 0)
			goto fail;
	}
	c->dir = NULL;
	if (conf_overrides(c, nargs, args, err, errlen) < 0 || conf_validate(c, err, errlen) < 0)
		goto fail;
	free(dir);
	return c;
fail:
	free(dir);
	conf_free(c);
	return NULL;
}

/* Reads a whole file (at most CONF_FILE_MAX bytes, no NUL bytes). */
static char *conf_read_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t n;

	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	if (!(buf = malloc(CONF_FILE_MAX + 1))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	n = fread(buf, 1, CONF_FILE_MAX + 1, f);
	if (ferror(f) || n > CONF_FILE_MAX || memchr(buf, 0, n)) {
		snprintf(err, errlen, "%s: %s", path, ferror(f) ? strerror(errno) :
			 n > CONF_FILE_MAX ? "file too large" : "file contains a NUL byte");
		free(buf);
		buf = NULL;
		goto out;
	}
	buf[n] = 0;
out:
	fclose(f);
	return buf;
}

/* Reads the file (if any) and parses it with the overrides; keeps the path. */
static struct conf *conf_load(enum conf_role role, const char *path, int nargs,
			      char *const *args, char *err, size_t errlen)
{
	char *text = NULL;
	struct conf *c;

	if (path && !(text = conf_read_file(path, err, errlen)))
		return NULL;
	c = conf_parse(role, path, text, nargs, args, err, errlen);
	free(text);
	if (c && path && !(c->path = strdup(path))) {
		conf_free(c);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	return c;
}

/* Splits argv into the -c file and the --key=value overrides, then loads. */
struct conf *conf_from_args(enum conf_role role, int argc, char *const *argv,
			    char *err, size_t errlen)
{
	const char *path = NULL;
	char **ov = calloc((size_t)(argc > 0 ? argc : 1), sizeof *ov);
	int nov = 0;
	struct conf *c = NULL;

	if (!ov) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-c") || !strcmp(a, "--config")) {
			if (i + 1 >= argc) {
				snprintf(err, errlen, "%s: needs a FILE", a);
				goto out;
			}
			path = argv[++i];
		} else if (!strncmp(a, "-c", 2) && a[2]) {
			path = a + 2;
		} else if (!strncmp(a, "--config=", 9)) {
			path = a + 9;
		} else if (!strncmp(a, "--", 2)) {
			ov[nov++] = argv[i];
		} else {
			snprintf(err, errlen, "%.200s: unexpected argument (expected -c FILE or --key=value)", a);
			goto out;
		}
	}
	c = conf_load(role, path, nov, ov, err, errlen);
out:
	free(ov);
	return c;
}

/* Re-reads c's file with c's overrides into a new configuration. */
struct conf *conf_reload(const struct conf *c, char *err, size_t errlen)
{
	return conf_load(c->role, c->path, c->nargs, c->args, err, errlen);
}

/* Frees everything the configuration owns; NULL is fine. */
void conf_free(struct conf *c)
{
	if (!c)
		return;
	reset_forward(c);
	reset_allow(c);
	reset_optimize(c);
	conf_reset_classify(c);
	for (int i = 0; i < c->nargs; i++)
		free(c->args[i]);
	free(c->args);
	for (size_t i = 0; i < CONF_NKEYS; i++)
		free(c->where[i]);
	for (size_t i = 0; i < c->nignored; i++)
		free(c->ignored[i]);
	free(c->ignored);
	free(c->store);
	free(c->tls_cert);
	free(c->tls_key);
	free(c->tls_ca);
	free(c->path);
	free(c->name);
	free(c);
}
