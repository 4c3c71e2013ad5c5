/*
 * node_swap.c: a node goes over to another store without a restart and
 * without cutting a stream: from a volatile store (volstore.c) back to the
 * store it is configured with once that can be opened again, and to the
 * store a reload names.
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
 *   - the store left is closed (a volatile one's directory removed), on a
 *     thread of its own, at the first tick after nothing holds it any more.  A reload back to a store
 *     left that is still open goes back to it at once.
 * A stream of a peer that still encodes for the old store's id (on a
 * connection not yet renewed) may reference what the new store lacks: its
 * decoder asks for it, as for a wiped store.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemon.h"
#include "log.h"
#include "node.h"
#include "stats.h"
#include "volstore.h"

#define SWAP_NAG 3600 /* ticks between reminders that the store is a volatile stand-in */
#define SWAP_PROBE 5  /* ticks between probes of whether the store can be opened */
#define SWAP_CLOSE_WAIT_MS 30000 /* how long a stopping node waits for stores closing */

/* Sync (unless volatile) and close a store left, remove it if volatile,
 * and log it with why. */
static void close_left(struct px_retired *r, const char *why)
{
	if (!r->temp && dre_store_sync(r->u->st))
		log_warn("store %s: final sync failed", r->dir);
	dre_store_close(r->u->st);
	free(r->u);
	if (r->temp)
		px_volstore_remove(r->dir);
	log_info("%s %s: closed%s (%s)", r->temp ? "volatile store" : "store", r->dir,
		 r->temp ? " and removed" : "", why);
}

struct close_job {
	struct px_retired r;
	struct px_node *n;
};

static void *close_main(void *arg)
{
	struct close_job *j = arg;
	close_left(&j->r, "the last stream on it ended");
	atomic_fetch_sub(&j->n->closing, 1);
	free(j);
	return NULL;
}

/* Close store left i, which nothing holds, off the loop (a large store's
 * sync and close may take a while), and forget it. */
static void retire_close(struct px_node *n, size_t i)
{
	struct close_job *j = malloc(sizeof *j);
	pthread_attr_t a;
	pthread_t t;
	int rc = !j || pthread_attr_init(&a);
	if (j)
		*j = (struct close_job){ n->retired[i], n };
	if (!rc) {
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		atomic_fetch_add(&n->closing, 1);
		if ((rc = pthread_create(&t, &a, close_main, j)))
			atomic_fetch_sub(&n->closing, 1);
		pthread_attr_destroy(&a);
	}
	if (rc) { /* no thread (or no memory): here */
		close_left(&n->retired[i], "the last stream on it ended");
		free(j);
	}
	n->retired[i] = n->retired[--n->nretired];
}

/* Keep the node's store among those left.  0, or -1 (out of memory). */
static int retire(struct px_node *n)
{
	struct px_retired *r = realloc(n->retired, (n->nretired + 1) * sizeof *r);
	if (!r)
		return -1;
	n->retired = r;
	r += n->nretired++;
	r->u = n->env.store;
	r->temp = n->store_volatile;
	snprintf(r->dir, sizeof r->dir, "%s", n->store_dir);
	return 0;
}

/* Log the move from store `from` (volatile: temp) to the node's. */
static void say_swap(const struct px_node *n, const char *from, int temp)
{
	const uint8_t *id = n->tcfg.store_id;
	log_info("store %s: %s: new streams use it from now on%s%s, and the tunnel connections are renewed so"
		 " that peers learn its id (store %02x%02x%02x%02x); streams already open finish on %s%s, %s after"
		 " the last", n->store_dir, temp ? "opened again" : "opened", temp ? "" : " in place of ",
		 temp ? "" : from, id[0], id[1], id[2], id[3], temp ? "the volatile store " : "", from,
		 temp ? "removed" : "closed");
}

/* Go over to store u (its directory: dir), holding it for n->env. */
static void swap_in(struct px_node *n, struct px_store_use *u, const char *dir)
{
	const struct conf *c = px_daemon_conf(n->d);
	if (retire(n)) {
		log_warn("store %s: out of memory to go over to it: staying on %s", dir, n->store_dir);
		if (!atomic_load(&u->holds)) { /* opened for this */
			dre_store_close(u->st);
			free(u);
		}
		return;
	}
	struct px_store_use *old = n->env.store;
	int temp = n->store_volatile;
	atomic_fetch_add(&u->holds, 1); /* n->env's */
	n->env.store = u;
	n->store = u->st;
	n->store_volatile = 0;
	char from[sizeof n->store_dir];
	snprintf(from, sizeof from, "%s", n->store_dir);
	snprintf(n->store_dir, sizeof n->store_dir, "%s", dir);
	px_volprobe_free(n->probe);
	n->probe = NULL;
	n->probe_err[0] = 0;
	/* the store's counters start from 0, as at start */
	n->io_errors = n->dir_remade = n->bad_reads = n->room = 0;
	n->untracked = n->pin_forced = n->reads_switches = 0;
	if (n->shrink)
		event_del(n->shrink); /* it worked towards the old store's size */
	stats_set(px_daemon_stats(n->d), STATS_STORE_VOLATILE, 0);
	uint64_t id = dre_store_id(u->st);
	memcpy(n->tcfg.store_id, &id, sizeof id);
	say_swap(n, from, temp);
	px_node_store_said(n, c);
	px_node_apply_size(n, c);
	if (n->restore)
		n->restore(n->role, u);
	px_store_drop(old); /* n->env's */
}

/* Probe the configured store; go over to it once it opens. */
static void swap_probe(struct px_node *n)
{
	const char *dir = px_volprobe_dir(n->probe);
	char err[sizeof n->probe_err];
	snprintf(err, sizeof err, "%s", n->probe_err);
	dre_store *st = px_volprobe_take(n->probe, err, sizeof err);
	struct px_store_use *u = st ? calloc(1, sizeof *u) : NULL;
	if (u) {
		u->st = st;
		char to[sizeof n->store_dir];
		snprintf(to, sizeof to, "%s", dir); /* (the probe goes) */
		swap_in(n, u, to);
		return;
	}
	if (st) {
		log_warn("store %s: opened, but out of memory to go over to it: closed", dir);
		dre_store_close(st);
	}
	if (*err && strcmp(err, n->probe_err))
		log_warn("store %s cannot be used yet: %s (streams use %s meanwhile; tried again every %d s)", dir,
			 err, n->store_dir, SWAP_PROBE);
	snprintf(n->probe_err, sizeof n->probe_err, "%s", err);
	if (n->ticks % SWAP_PROBE == 0)
		px_volprobe_poll(n->probe, conf_store_size(px_daemon_conf(n->d)));
}

void px_node_swap_tick(struct px_node *n)
{
	for (size_t i = n->nretired; i-- > 0;)
		if (!atomic_load(&n->retired[i].u->holds))
			retire_close(n, i);
	if (n->probe)
		swap_probe(n);
	if (n->store_volatile && n->ticks && n->ticks % SWAP_NAG == 0)
		log_warn("store %s: still running on the volatile store in memory that stands in for %s (it could"
			 " not be opened at start, nor since)%s%s", n->store_dir, conf_store(px_daemon_conf(n->d)),
			 *n->probe_err ? ": " : "", n->probe_err);
}

/* Whether paths a and b name the same directory. */
static int same_dir(const char *a, const char *b)
{
	struct stat sa, sb;
	if (stat(a, &sa) || stat(b, &sb))
		return !strcmp(a, b);
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void px_node_swap_reload(struct px_node *n, const struct conf *c)
{
	const char *to = conf_store(c);
	if (n->probe && !strcmp(px_volprobe_dir(n->probe), to))
		return; /* on its way there already */
	if (!n->store_volatile && same_dir(n->store_dir, to)) {
		if (n->probe)
			log_info("store %s: the node stays on it (no longer going over to %s)", to,
				 px_volprobe_dir(n->probe));
		px_volprobe_free(n->probe);
		n->probe = NULL;
		n->probe_err[0] = 0;
		snprintf(n->store_dir, sizeof n->store_dir, "%s", to);
		return;
	}
	for (size_t i = 0; i < n->nretired; i++) {
		struct px_retired r = n->retired[i];
		if (r.temp || !same_dir(r.dir, to))
			continue;
		n->retired[i] = n->retired[--n->nretired]; /* still open: back to it at once */
		swap_in(n, r.u, to);
		return;
	}
	px_volprobe_free(n->probe);
	n->probe_err[0] = 0;
	if (!(n->probe = px_volprobe_new(to))) {
		log_error("store %s: cannot go over to it: out of memory (streams use %s)", to, n->store_dir);
		return;
	}
	px_volprobe_poll(n->probe, conf_store_size(c));
	log_info("store %s: going over to it once it opens (probed every %d s; streams use %s meanwhile)", to,
		 SWAP_PROBE, n->store_dir);
}

void px_node_swap_stop(struct px_node *n)
{
	/* stores closing on their threads: done within the drain's bound */
	for (int i = 0; atomic_load(&n->closing) && i < SWAP_CLOSE_WAIT_MS / 10; i++)
		usleep(10000);
	while (n->nretired)
		close_left(&n->retired[--n->nretired], "the node stops");
	free(n->retired);
	n->retired = NULL;
}
