/* daemon.h: the shell shared by `wanopt edge` and `wanopt core`: command line
 * and config (exit 2 on a bad one), logging, the stats registry and its HTTP
 * server, the event loop, and the signals (SIGHUP reload, SIGTERM/SIGINT
 * drain then exit, a second one exits at once).  The role plugs in through
 * hooks, all called on the main event loop's thread. */
#ifndef WANOPT_DAEMON_H
#define WANOPT_DAEMON_H

#include "conf.h"
#include "stats.h"
#include "tun.h"

struct event_base;
struct px_daemon;

enum { PX_DAEMON_DRAIN_SECS = 30 }; /* SIGTERM: forced exit after this long */

struct px_daemon_hooks {
	/* Everything is set up (config, log level, stats server); open
	 * listeners and the tunnel.  0, or -1 to exit with status 1 (log why). */
	int (*start)(struct px_daemon *d, void *arg);
	/* SIGHUP with a valid new configuration (the shell has applied
	 * log_level and warned about keys that need a restart): apply forwards,
	 * allow, store_size, optimize, fail_open.  Return 0 to adopt c (old is
	 * freed right after: keep no pointers into it), -1 to keep old.  NULL:
	 * adopt without further action. */
	int (*reload)(struct px_daemon *d, const struct conf *old, const struct conf *c, void *arg);
	/* SIGTERM/SIGINT: stop accepting, let streams finish, then call
	 * px_daemon_exit().  NULL: exit at once. */
	void (*drain)(struct px_daemon *d, void *arg);
	/* After the loop ended, before the base is freed: release everything. */
	void (*stop)(struct px_daemon *d, void *arg);
};

/* Runs a daemon of the role with argv (argv[0] is the subcommand; -c FILE,
 * --key=value, --help).  Returns the exit status: 0 after a drain, 1 on a
 * runtime failure, 2 on a usage or configuration error. */
int px_daemon_main(enum conf_role role, int argc, char **argv,
		   const struct px_daemon_hooks *hooks, void *arg);
/* Checks that c's tls_cert, tls_key and tls_ca load (the key matching the
 * certificate): 0, or -1 with "WHERE: tls_x: ... PATH: what is wrong" in err
 * (WHERE: the key's file:line, or its --tls_x= argument). */
int px_daemon_check_tls(const struct conf *c, char *err, size_t errlen);
/* Checks that c's store is a directory, or can be made (its parent is one):
 * 0, or -1 with "WHERE: store: PATH: what is wrong" in err (WHERE: file:line
 * or the --store argument).  A daemon exits with status 2 on either check. */
int px_daemon_check_store(const struct conf *c, char *err, size_t errlen);
/* The credentials (for this daemon's side) loaded with the configuration
 * being started or reloaded, for the role's start or reload hook to take
 * (the caller owns the reference): once, then NULL; NULL outside those hooks.
 * The daemon loads them before anything is applied, to refuse a
 * configuration whose TLS files do not load. */
tun_tls *px_daemon_take_tls(struct px_daemon *d);
/* A tunnel config with only c's tls_cert, tls_key and tls_ca set. */
tun_config px_daemon_tls_files(const struct conf *c);
/* The main event loop. */
struct event_base *px_daemon_base(struct px_daemon *d);
/* The configuration in force (replaced on reload). */
const struct conf *px_daemon_conf(struct px_daemon *d);
/* The stats registry (its HTTP server runs when `stats` is set). */
struct stats *px_daemon_stats(struct px_daemon *d);
/* The stats HTTP server, or NULL when `stats` is not set. */
struct stats_http *px_daemon_http(struct px_daemon *d);
/* Ends the loop; px_daemon_main returns status. */
void px_daemon_exit(struct px_daemon *d, int status);

#endif
