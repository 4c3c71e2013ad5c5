/* node.h: what an edge and a core share: the segment store, the tunnel
 * configuration from the daemon's config, WAN socket tuning, and a timer that
 * keeps the stats gauges current and the store synced. */
#ifndef WANOPT_NODE_H
#define WANOPT_NODE_H

#include <stdatomic.h>

#include <event2/event.h>

#include "conf.h"
#include "dre.h"
#include "relay.h"
#include "tun.h"

struct px_daemon;
struct px_lag;
struct event;

/* A store the node left (node_swap.c). */
struct px_retired {
	struct px_store_use *u;
	int temp;       /* a volatile store: its directory goes with it */
	char dir[4096];
};

/* The tunnel credentials in use (node_tls.c). */
struct px_node_tls {
	struct event *check; /* looks at the expiry twice a day */
	char *cert;          /* tls_cert as loaded, for messages */
	int64_t not_after;   /* its expiry (Unix time, 0: unreadable) */
	char subj[160];      /* its subject */
};

struct px_node {
	struct px_daemon *d;
	dre_store *store; /* n->env.store->st: the store new relays use */
	char store_dir[4096]; /* its directory: the configured one, or a volatile store's */
	int store_volatile;   /* 1: the configured store could not be opened (volstore.c) */
	/* whether the configured store can be opened now, while the node runs
	 * on another (a volatile one, or the store a reload moved it from),
	 * or NULL (node_swap.c) */
	struct px_volprobe *probe;
	char probe_err[512];  /* why it did not open at the last probe, as logged */
	struct px_retired *retired; /* stores it left, open while relays made on them run */
	size_t nretired;
	_Atomic unsigned closing; /* ... and closing on threads of their own */
	tun_config tcfg;
	struct px_relay_env env;
	struct event *tick;
	struct px_lag *lag; /* watches the daemon's main event loop */
	struct event *shrink; /* steps a store_size change, a file per loop pass */
	uint64_t shrink_to, shrink_evicted0; /* its target; evicted bytes at its start */
	uint64_t shrink_from; /* the size limit at its start */
	uint64_t shrink_t0_us; /* its start (px_mono_us) */
	unsigned ticks;
	int serves;     /* 1: a core: peers dial it, from ports of no meaning */
	int trim_due;   /* TRIM_ flags: streams rested or closed since the last trim (node.c) */
	int trim_waits; /* ticks the trim has waited for the heap to be less split */
	uint64_t io_errors; /* the store's I/O error count at the last tick */
	uint64_t dir_remade; /* ... and its count of directories made again */
	uint64_t bad_reads;  /* ... and of chunks found gone bad on disk */
	uint64_t room;       /* ... and what its file system left it (0: its size) */
	uint64_t untracked; /* the store's count of streams from untracked peers, likewise */
	uint64_t pin_forced; /* the store's count of pinned files evicted, likewise */
	unsigned lan_bulk;   /* lan_bulk_streams as applied (lanbuf.c) */
	uint64_t reads_switches; /* the store's count of changes of its way of reading runs, likewise */
	char name[64];
	char cc[16];
	/* link hints, set by the main thread (start, reload), read by workers */
	_Atomic uint64_t rate_bps; /* link_rate: what we send at (bit/s, 0: unknown) */
	_Atomic uint64_t rx_bps;   /* what we receive at */
	_Atomic uint32_t rtt_us;
	unsigned (*tunnels_up)(void *arg); /* role's count of live tunnel connections */
	uint64_t (*tunnel_rtt)(void *arg); /* role's tunnel RTT in us (0: unknown), or NULL */
	void (*retune)(void *arg);         /* role's px_node_retune of its connections, or NULL */
	/* after a reload changed the link hints: the role tells its tunnel
	 * endpoints (tun_*_set_link) and re-runs px_node_link_up on each
	 * connection, each on its own thread; or NULL */
	void (*relink)(void *arg);
	/* after a reload re-read the TLS credentials: the role hands t to its
	 * tunnel endpoints (tun_*_set_tls), each on its own thread, and drops
	 * the reference it is given; or NULL */
	void (*retls)(void *arg, tun_tls *t);
	/* after the node went over to another store (u, whose id is now
	 * tcfg.store_id): the role gives each of its envs other than n->env the
	 * new store (holding u for it, dropping the old), and renews its tunnel
	 * connections (tun_*_renew) so that peers learn the new id, each on its
	 * own thread; or NULL */
	void (*restore)(void *arg, struct px_store_use *u);
	void *role;
	struct px_node_tls tls;
};

/* Open the store and set up the tunnel config, tuning and gauges for the
 * daemon's configuration.  0, or -1 after logging why. */
int px_node_start(struct px_node *n, struct px_daemon *d, int role);
/* Apply a reloaded configuration's store_size (at once if larger, else a data
 * file per event loop pass: no stream waits on a large shrink) and link hints
 * (through the role's relink). */
void px_node_reload(struct px_node *n, const struct conf *c);
/* Sync and close the store, stop the timers. */
void px_node_stop(struct px_node *n);
/* Bring the store to c's store_size: at once if larger, else a data file
 * per event loop pass (a shrink under way goes on to the new size). */
void px_node_apply_size(struct px_node *n, const struct conf *c);
/* Log the figures of the store as opened (node.c). */
void px_node_store_said(struct px_node *n, const struct conf *c);

/* Once a tick (node_swap.c): while the node runs on a store other than
 * the configured one (a volatile stand-in, or the one a reload moved it
 * from), probe the configured store off the loop, and once it opens, go
 * over to it: new relays code on it, tunnel connections are renewed so that
 * peers see its id, and the store left is closed (a volatile one removed)
 * once the last relay made on it ends.  Reminds every hour of a volatile
 * store. */
void px_node_swap_tick(struct px_node *n);
/* A reload's configuration c names a store (conf_store): if it is not the
 * one the node runs on or is on its way to, go over to it as above (at
 * once, to a store it left that is still open). */
void px_node_swap_reload(struct px_node *n, const struct conf *c);
/* Wait for the stores left that are closing, and close those still open
 * (node_swap.c). */
void px_node_swap_stop(struct px_node *n);
/* Log the certificate's subject and expiry (a warning within 30 days),
 * publish the expiry, and look again twice a day.  0, or -1 after logging. */
int px_node_tls_start(struct px_node *n, const struct conf *c);
/* Re-read c's certificate, key and CA and hand them to the role (retls) for
 * the tunnel connections made from now on; if they do not load, log why
 * and keep the running ones. */
void px_node_tls_reload(struct px_node *n, const struct conf *c);
void px_node_tls_stop(struct px_node *n);
/* What c's certificate says of its expiry, into buf ("tls_cert FILE (subject)
 * valid until ..."): 0 valid for 30 days more, 1 expiring sooner, 2 expired
 * or unreadable; -1 if the files do not load (why, in buf). */
int px_node_tls_expiry(const struct conf *c, char *buf, size_t len);
/* The tun_cbs.on_fd hook: tunes WAN sockets (arg is the px_node). */
void px_node_on_fd(void *arg, int fd, int phase);
/* Every PX_RETUNE_S seconds per tunnel connection (from the thread that owns
 * it): without link hints, grow its buffers to 4 x delivery rate x min RTT
 * as TCP_INFO measures them, when the kernel's autotuning stopped short. */
#define PX_RETUNE_S 10
/* From the role's on_up and on_link (told: the peer's hints changed) and
 * relink after a reload, on the
 * connection's thread: the connection's link is the slower of our send rate
 * and the rate the peer receives at (its HELLO); pace, queue and (with a
 * round trip known) size its socket for that, and record it for the streams'
 * residual coders (tun_conn_link_bps). */
void px_node_link_up(struct px_node *n, tun_conn *c, int told);
void px_node_retune(struct px_node *n, tun_conn *c);
/* Every PX_PACE_TICK_MS (pace.h), on the thread that owns them: the tunnel
 * connections c[0..n) take their shares of their peers' pacing caps (each
 * peer's connections share 95 % of its link's rate).  A connection that goes
 * down leaves its group with px_pace_forget. */
void px_node_pace(tun_conn *const *c, size_t n);
/* A timer on base calling cb(-1, EV_TIMEOUT, arg) every PX_PACE_TICK_MS, for
 * px_node_pace; NULL (logged: the connections are then paced each at the
 * whole link rate) if it cannot be set up.  event_free it. */
struct event *px_node_pace_timer(struct event_base *base, event_callback_fn cb, void *arg);
/* Publish conns[0..nc) (the connections one thread owns) as stats tunnel
 * slot `slot`: each with its peer and RTT.  Returns the smallest known RTT
 * (us), 0 if none. */
uint64_t px_node_tunnels_publish(struct px_node *n, int slot, tun_conn *const *conns, size_t nc);

#endif
