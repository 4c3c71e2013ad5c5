/* conf.h: the edge and core configuration: a `key = value` file plus
 * `--key=value` command-line overrides (the command line wins), validated as a
 * whole.  Errors read "FILE:LINE: what is wrong" or "--key=value: what is
 * wrong"; the daemon prints them and exits with status 2.
 *
 * File syntax: one `key = value` per line; blank lines and lines starting
 * with '#' are ignored, as is anything after " #".  Addresses are HOST:PORT
 * with IPv6 in brackets ([::1]:80).  Repeatable keys (forward, allow, optimize,
 * classify) accumulate; any of them given on the command line replaces the
 * file's entries for that key.  Unknown keys and keys of the other role are
 * errors. */
#ifndef WANOPT_CONF_H
#define WANOPT_CONF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "log.h"

enum conf_role { CONF_EDGE, CONF_CORE };

/* Per-stream treatment, chosen by `optimize` rules. */
enum conf_optimize {
	CONF_OPT_FULL = 0,    /* DRE + LZ (default) */
	CONF_OPT_LZ,          /* LZ only */
	CONF_OPT_TFO,         /* through the tuned tunnel, no DRE or LZ */
	CONF_OPT_PASSTHROUGH, /* not through the tunnel: direct, untouched */
};

/* What an edge does with a forward when the tunnel is down (intercepted
 * connections always go direct). */
enum conf_fail_open {
	CONF_FAIL_REFUSE = 0, /* close the client connection, log a line (default) */
	CONF_FAIL_DIRECT,     /* dial the target from the edge */
};

enum conf_cc { CONF_CC_BBR = 0, CONF_CC_CUBIC };

#define CONF_HOST_MAX 256
/* Most DSCP classes dscp_tunnels may list. */
#define CONF_DSCP_TUNNELS_MAX 8

/* An unresolved address: host is a name or a numeric address (IPv6 without
 * brackets); port is in host byte order, 1..65535. */
struct conf_addr {
	char host[CONF_HOST_MAX];
	uint16_t port;
};

/* One `forward = LISTEN -> TARGET` rule. */
struct conf_forward {
	struct conf_addr listen; /* where the edge accepts clients */
	struct conf_addr target; /* what the core dials */
};

struct conf;

/* Parses a whole configuration: text (the file's content, may be NULL) named
 * name in messages, then the override args ("--key=value" each).  Returns the
 * configuration or NULL with err set. */
struct conf *conf_parse(enum conf_role role, const char *name, const char *text,
			int nargs, char *const *args, char *err, size_t errlen);
/* Parses a daemon command line (argv[0] is the subcommand): "-c FILE",
 * "-cFILE", "--config=FILE" and any number of "--key=value".  Returns NULL
 * with err set on any error. */
struct conf *conf_from_args(enum conf_role role, int argc, char *const *argv,
			    char *err, size_t errlen);
/* Re-reads the same file and arguments (for SIGHUP); the old configuration is
 * untouched.  The caller applies forwards, store_size and log_level from the
 * result and can use conf_restart_keep() to warn about the rest. */
struct conf *conf_reload(const struct conf *c, char *err, size_t errlen);
/* The keys that take effect only on a restart and differ between the running
 * configuration old and the reloaded c: how many, their names in keys
 * ("'peer', 'stats'"; truncated to keyslen), and c takes old's values for
 * them, so that the configuration adopted says what runs (and a later
 * reload still tells them apart from the file). */
int conf_restart_keep(const struct conf *old, struct conf *c, char *keys, size_t keyslen);
/* The i-th key c sets that only the other role uses, as a warning ("WHERE:
 * 'key' has no effect on a core (it is for the edge only): ignored"), or
 * NULL past the last.  Such a key is accepted, not an error: configs
 * written while optimize and workers were keys of both roles have them, and
 * make install keeps an installed config (conf/README.md). */
const char *conf_ignored(const struct conf *c, size_t i);
/* Frees; NULL is fine. */
void conf_free(struct conf *c);

/* Writes every key of the role with its syntax and meaning (for --help). */
void conf_help(FILE *f, enum conf_role role);

/* Queries.  Unset addresses return NULL; unset strings return NULL. */
enum conf_role conf_role(const struct conf *c);
const char *conf_path(const struct conf *c);            /* the -c file, or NULL */
/* Where key was last given: "FILE:LINE", or the "--key=value" argument;
 * NULL if it was not (or is no key). */
const char *conf_where(const struct conf *c, const char *key);
const struct conf_addr *conf_peer(const struct conf *c);   /* edge: the core's tunnel */
const struct conf_addr *conf_listen(const struct conf *c); /* core: tunnel listener */
const struct conf_addr *conf_stats(const struct conf *c);  /* stats HTTP server */
size_t conf_forward_count(const struct conf *c);
const struct conf_forward *conf_forward(const struct conf *c, size_t i);
uint16_t conf_transparent_port(const struct conf *c);      /* 0 when unset */
const char *conf_store(const struct conf *c);
uint64_t conf_store_size(const struct conf *c);            /* bytes */
const char *conf_tls_cert(const struct conf *c);
const char *conf_tls_key(const struct conf *c);
const char *conf_tls_ca(const struct conf *c);
enum log_level conf_log_level(const struct conf *c);
enum conf_fail_open conf_fail_open(const struct conf *c);
uint64_t conf_link_rate(const struct conf *c);             /* bit/s this host sends at, 0 = unknown */
uint64_t conf_link_rate_rx(const struct conf *c);          /* bit/s it receives at, 0 = unknown */
uint32_t conf_link_rtt(const struct conf *c);              /* microseconds, 0 = unknown */
enum conf_cc conf_congestion(const struct conf *c);
unsigned conf_tunnels(const struct conf *c);               /* 1..16 */
unsigned conf_max_streams(const struct conf *c);           /* 1..PROTO_MAX_STREAMS */
/* Edge: the DSCP its main tunnel connections carry (0: unmarked). */
int conf_dscp(const struct conf *c);
/* Edge: the DSCP classes with a tunnel connection of their own; *classes
 * points at them (valid while c lives).  Returns how many. */
size_t conf_dscp_tunnels(const struct conf *c, const uint8_t **classes);
uint32_t conf_bypass_mark(const struct conf *c);           /* edge: SO_MARK of its own sockets */
unsigned conf_workers(const struct conf *c);               /* 0 = one per CPU */
/* Streams of the process whose LAN socket may hold the bulk receive buffer
 * at once (proxy/lanbuf.c): 0..CONF_LAN_BULK_MAX. */
unsigned conf_lan_bulk_streams(const struct conf *c);
#define CONF_LAN_BULK_DEFAULT 8
#define CONF_LAN_BULK_MAX 1024
unsigned conf_protocol_max(const struct conf *c);          /* 0 = the newest built in */

/* 1 when the allow list admits addr (AF_INET or AF_INET6; the sockaddr's own
 * port is ignored) on port (host order); IPv4-mapped IPv6 addresses match as
 * IPv4.  An empty list admits nothing. */
int conf_allow_match(const struct conf *c, const struct sockaddr *addr, uint16_t port);

/* The allow list as a core announces it to edges (an ALLOW frame's payload,
 * proto.h) into buf (cap >= 2): its length; a list that does not fit in cap
 * is written as PROTO_ALLOW_UNTOLD (2 bytes). */
size_t conf_allow_wire(const struct conf *c, uint8_t *buf, size_t cap);
/* A core's allow list as an edge keeps it. */
struct conf_acl;
/* Reads an ALLOW payload; NULL with what is wrong in msg when it is not one
 * ("not told": PROTO_ALLOW_UNTOLD). */
struct conf_acl *conf_acl_from_wire(const uint8_t *p, size_t len, char *msg, size_t msglen);
/* Whether the list admits addr:port (a NULL addr: no). */
int conf_acl_match(const struct conf_acl *a, const struct sockaddr *addr, uint16_t port);
/* Its number of entries. */
size_t conf_acl_count(const struct conf_acl *a);
void conf_acl_free(struct conf_acl *a);
/* The optimize mode for a destination: the first `optimize` rule with targets
 * that matches, else the last rule without targets, else CONF_OPT_FULL.
 * addr may be NULL (only port-only rules can then match). */
enum conf_optimize conf_optimize_for(const struct conf *c, const struct sockaddr *addr,
				     uint16_t port);
const char *conf_optimize_name(enum conf_optimize o);
/* The class (0-63) of the first `classify` rule matching a destination, or
 * -1 when none does; addr may be NULL (only port-only rules can then match).
 * The edge gives it to client connections that arrive unmarked. */
int conf_classify(const struct conf *c, const struct sockaddr *addr, uint16_t port);
const char *conf_cc_name(enum conf_cc cc);

/* Writes "host:port" ("[v6]:port" for IPv6) into buf; returns buf. */
char *conf_addr_format(const struct conf_addr *a, char *buf, size_t len);
/* Resolves a (getaddrinfo, blocking; passive for listeners: an empty or "*"
 * host means any address) into ss.  0, or -1 with err set. */
int conf_addr_resolve(const struct conf_addr *a, int passive, struct sockaddr_storage *ss,
		      socklen_t *sslen, char *err, size_t errlen);
/* Parses "HOST:PORT" into a; NULL on success, else a static message. */
const char *conf_addr_parse(const char *s, struct conf_addr *a);
/* Parses a size with optional K/M/G/T suffix (powers of 1024, optional "B" or
 * "iB"); NULL on success, else a static message. */
const char *conf_size_parse(const char *s, uint64_t *out);
/* Parses an unsigned decimal in [lo, hi]; NULL or a message (valid until
 * the thread's next call). */
const char *conf_uint_parse(const char *s, unsigned long lo, unsigned long hi, unsigned long *out);
/* Parses a socket mark, 1..0xffffffff in decimal or 0x hex; NULL or a message. */
const char *conf_mark_parse(const char *s, uint32_t *out);
/* The effective configuration in config-file syntax (relative paths shown
 * resolved); a malloc'd string, NULL if out of memory. */
char *conf_dump(const struct conf *c);

#endif
