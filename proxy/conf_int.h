/* conf_int.h: internals shared by conf.c (keys, files, arguments) and
 * conf_acl.c (address/port lists, value parsers).  Not a public header. */
#ifndef WANOPT_CONF_INT_H
#define WANOPT_CONF_INT_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include "conf.h"

/* An inclusive port range, host order. */
struct conf_ports {
	uint16_t lo, hi;
};

/* One CIDR[:PORTS] or :PORTS item. */
struct conf_target {
	int family;          /* AF_INET, AF_INET6, or 0 for any address */
	uint8_t addr[16];    /* network address (4 bytes used for AF_INET) */
	unsigned prefix;     /* prefix length in bits */
	struct conf_ports *ports; /* NULL with nports 0: every port */
	size_t nports;
};

/* A parsed list of targets. */
struct conf_tlist {
	struct conf_target *v;
	size_t n;
};

/* Parses "CIDR[:PORTS], ..." appending to l; 0, or -1 with msg set. */
int conf_tlist_parse(struct conf_tlist *l, const char *s, char *msg, size_t msglen);
/* Frees the items of l and empties it. */
void conf_tlist_clear(struct conf_tlist *l);
/* 1 when some item of l admits (addr, port); addr may be NULL. */
int conf_tlist_match(const struct conf_tlist *l, const struct sockaddr *addr, uint16_t port);
/* Parses a rate ("1.544M", "100Mbit", "10G") in bit/s; NULL or a message. */
const char *conf_rate_parse(const char *s, uint64_t *out);
/* Parses a link's rates: "RATE" (*down = *up) or "DOWN/UP"; NULL or a message. */
const char *conf_link_rate_parse(const char *s, uint64_t *down, uint64_t *up);
/* Parses a duration ("40ms", "0.3s", "500us"; bare numbers are ms) in us. */
const char *conf_rtt_parse(const char *s, uint32_t *out);


/* Where a key's value came from. */
enum conf_src { SRC_UNSET = 0, SRC_FILE, SRC_ARGS };

struct conf_fwd_ent {
	struct conf_forward f;
	char *where;
};

struct conf_opt_rule {
	enum conf_optimize mode;
	struct conf_tlist targets; /* empty: the default rule */
	char *text;
};

/* A classify rule: unmarked client connections to targets are in class dscp. */
struct conf_class_rule {
	int dscp;
	struct conf_tlist targets; /* never empty */
	char *text;
};

struct conf {
	enum conf_role role;
	char *path;           /* -c file (NULL if none) */
	char *name;           /* how the file is named in messages */
	int nargs;
	char **args;          /* the overrides, kept for reload */
	struct conf_addr peer, listen, stats;
	struct conf_fwd_ent *fwd;
	size_t nfwd, capfwd;
	uint16_t transparent;
	char *store, *tls_cert, *tls_key, *tls_ca;
	uint64_t store_size;
	enum log_level log_level;
	enum conf_fail_open fail_open;
	uint64_t link_rate;     /* bit/s this host sends at (link_rate's UP) */
	uint64_t link_rate_rx;  /* bit/s it receives at (DOWN; = link_rate when one is given) */
	uint32_t link_rtt;
	enum conf_cc cc;
	unsigned tunnels, workers, max_streams;
	unsigned lan_bulk_streams; /* CONF_LAN_BULK_DEFAULT unless given */
	uint32_t bypass_mark;   /* SO_MARK of the edge's own sockets (CONF_BYPASS_MARK_DEFAULT) */
	unsigned protocol_max;  /* 0: the newest this build speaks */
	int dscp;               /* edge: the main tunnel connections' class (0: unmarked) */
	uint8_t dscp_tun[CONF_DSCP_TUNNELS_MAX]; /* edge: classes with a tunnel connection of their own */
	unsigned ndscp_tun;
	struct conf_tlist allow;
	char **allow_text;
	size_t nallow_text;
	struct conf_opt_rule *opt;
	size_t nopt;
	struct conf_class_rule *cls; /* edge: classify rules, first match wins */
	size_t ncls;
	char **ignored;       /* "WHERE: 'key' has no effect on ...: ignored", in order */
	size_t nignored;
	/* parse state */
	const char *dir;      /* directory of the file, for relative paths */
	enum conf_src cur;    /* source of the entry being parsed */
	unsigned char src[32];
	char *where[32];
};

/* The edge's SO_MARK unless bypass_mark says otherwise (intercept-nft.sh's --bypass default). */
#define CONF_BYPASS_MARK_DEFAULT 0x2

/* Key indices, in the order of conf_keys[]. */
enum {
	K_PEER, K_LISTEN, K_FORWARD, K_TRANSPARENT, K_ALLOW, K_STORE, K_STORE_SIZE,
	K_TLS_CERT, K_TLS_KEY, K_TLS_CA, K_STATS, K_LOG_LEVEL, K_OPTIMIZE, K_FAIL_OPEN,
	K_LINK_RATE, K_LINK_RTT, K_CONGESTION, K_TUNNELS, K_WORKERS, K_PROTOCOL_MAX, K_BYPASS_MARK,
	K_MAX_STREAMS, K_DSCP, K_DSCP_TUNNELS, K_LAN_BULK_STREAMS, K_CLASSIFY,
};

/* conf_qos.c: the dscp, dscp_tunnels and classify keys (setters and the
 * reset as in conf_keys[]). */
int conf_set_dscp(struct conf *c, const char *v, char *msg, size_t len);
int conf_set_dscp_tunnels(struct conf *c, const char *v, char *msg, size_t len);
int conf_set_classify(struct conf *c, const char *v, char *msg, size_t len);
void conf_reset_classify(struct conf *c);
void conf_qos_dump(const struct conf *c, FILE *f);

/* conf_query.c: notes that where set key k, which c's role does not use
 * (a warning, see conf_ignored); 0, or -1 with "out of memory" in err. */
int conf_ignore(struct conf *c, const char *where, int k, char *err, size_t errlen);

/* The name of key index k (K_*). */
const char *conf_key_name(int k);

/* The listeners of c (forwards, stats, the transparent port, the core's
 * tunnel listener) must not take each other's ports (conf_listen.c): 0, or
 * -1 with err naming the first that clashes and the one before it. */
int conf_listeners_clash(struct conf *c, char *err, size_t errlen);

#endif
