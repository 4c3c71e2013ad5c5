/*
 * node_swap.c: a node on a volatile store (volstore.c) goes back to the
 * store it is configured with once that can be opened again, without a
 * restart and without cutting a stream.
 *
 * Every few seconds a probe, on a thread of its own, checks that the
 * store's directory takes a write that reaches the disk and that no process
 * holds its lock, and then opens it (a large store takes a while to open;
 * a failing disk may hang).  Once it is open, the node goes over to it:
 *   - relays made from then on code on it; relays made before keep the
 *     volatile store until they end (each holds the store it was made on);
 *   - the tunnel connections are renewed (tun_*_renew): our HELLO carries
 *     the store's id, so a peer must see a new connection to track what the
 *     new store holds.  An edge dials new connections first and sends the
 *     old ones GOAWAY once one is up; a core sends GOAWAY, and its edges
 *     dial again.  Streams on the old connections finish there;
 *   - the volatile store is closed and its directory removed at the first
 *     tick after nothing holds it any more.
 * A stream of a peer that still encodes for the volatile store's id (on a
 * connection not yet renewed) may reference what the new store lacks: its
 * decoder asks for it, as for a wiped store.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "daemon.h"
#include "log.h"
#include "node.h"
#include "stats.h"
#include "volstore.h"

#define SWAP_NAG 3600 /* ticks between reminders that the store is a volatile stand-in */
#define SWAP_PROBE 5  /* ticks between probes of whether the store can be opened again */

/* Close the volatile store left behind and remove its directory. */
static void retire_close(struct px_node *n, const char *why)
{
	if (!n->retired)
		return;
	dre_store_close(n->retired->st);
	free(n->retired);
	n->retired = NULL;
	px_volstore_remove(n->retired_dir);
	log_info("volatile store %s: closed and removed (%s)", n->retired_dir, why);
}

/* Go over from the volatile store to st, the configured store, opened. */
static void swap_in(struct px_node *n, dre_store *st)
{
	const struct conf *c = px_daemon_conf(n->d);
	struct px_store_use *u = calloc(1, sizeof *u);
	if (!u) {
		log_warn("store %s: opened again, but out of memory to go over to it: closed", conf_store(c));
		dre_store_close(st);
		return;
	}
	u->st = st;
	atomic_init(&u->holds, 1); /* n->env's */
	n->retired = n->env.store;
	snprintf(n->retired_dir, sizeof n->retired_dir, "%s", n->store_dir);
	n->env.store = n->use = u;
	n->store = st;
	n->store_volatile = 0;
	snprintf(n->store_dir, sizeof n->store_dir, "%s", conf_store(c));
	px_volprobe_free(n->probe);
	n->probe = NULL;
	/* the new store's counters start from 0, as at start */
	n->io_errors = n->dir_remade = n->bad_reads = n->room = 0;
	n->untracked = n->pin_forced = n->reads_switches = 0;
	if (n->shrink)
		event_del(n->shrink); /* it worked towards the volatile store's size */
	stats_set(px_daemon_stats(n->d), STATS_STORE_VOLATILE, 0);
	uint64_t id = dre_store_id(st);
	memcpy(n->tcfg.store_id, &id, sizeof id);
	log_info("store %s: opened again: new streams use it from now on, and the tunnel connections are renewed"
		 " so that peers learn its id (store %02x%02x%02x%02x); streams already open finish on the volatile"
		 " store %s, removed after the last", n->store_dir, n->tcfg.store_id[0], n->tcfg.store_id[1],
		 n->tcfg.store_id[2], n->tcfg.store_id[3], n->retired_dir);
	px_node_store_said(n, c);
	px_node_apply_size(n, c);
	if (n->restore)
		n->restore(n->role, u);
	px_store_drop(n->retired); /* n->env's */
}

/* Probe the configured store; go over to it once it opens. */
static void swap_probe(struct px_node *n)
{
	const struct conf *c = px_daemon_conf(n->d);
	char err[sizeof n->probe_err];
	if (!n->probe)
		return;
	snprintf(err, sizeof err, "%s", n->probe_err);
	dre_store *st = px_volprobe_take(n->probe, err, sizeof err);
	if (st) {
		swap_in(n, st);
		return;
	}
	if (*err && strcmp(err, n->probe_err))
		log_warn("store %s: takes writes again, but does not open: %s (probed again every %d s)",
			 conf_store(c), err, SWAP_PROBE);
	snprintf(n->probe_err, sizeof n->probe_err, "%s", err);
	if (n->ticks % SWAP_PROBE == 0)
		px_volprobe_poll(n->probe, conf_store_size(c));
}

void px_node_swap_tick(struct px_node *n)
{
	if (n->retired && !atomic_load(&n->retired->holds))
		retire_close(n, "the last stream on it ended");
	if (!n->store_volatile)
		return;
	swap_probe(n);
	if (n->store_volatile && n->ticks && n->ticks % SWAP_NAG == 0)
		log_warn("store %s: still running on the volatile store in memory that stands in for %s (it could"
			 " not be opened at start, nor since)%s%s", n->store_dir, conf_store(px_daemon_conf(n->d)),
			 *n->probe_err ? ": " : "", n->probe_err);
}

void px_node_swap_stop(struct px_node *n)
{
	retire_close(n, "the node stops");
}
