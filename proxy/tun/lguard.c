/* lguard.c: keeps a listener from spinning when accept fails.
 *
 * libevent's listener tries accept again as soon as it returns, while the
 * connection that could not be taken stays queued: out of descriptors (EMFILE,
 * ENFILE) or memory, that is a busy loop that also logs a warning per try
 * (millions a minute).  A guarded listener instead stops accepting for
 * PAUSE_MS, the queued connections waiting in the kernel's backlog until
 * descriptors are free, and its owner hears of it once per REPORT_S with a
 * count, as nginx does.
 *
 * The error callback libevent calls only gets the listener's own argument, so
 * guards are found by listener in a small table (a node has a few listeners). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "tun.h"

#define PAUSE_MS 250
#define REPORT_S 10
#define GUARDS_MAX 64

struct guard {
	struct evconnlistener *l;
	struct event *resume;
	char what[96];
	tun_lguard_report_fn report;
	void *arg;
	uint64_t unsaid;   /* failures since the last report */
	time_t said;       /* when the last report went out (0: never) */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct guard *guards[GUARDS_MAX];

static struct guard *find(const struct evconnlistener *l)
{
	for (int i = 0; i < GUARDS_MAX; i++)
		if (guards[i] && guards[i]->l == l)
			return guards[i];
	return NULL;
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct guard *g = arg;
	(void)fd;
	(void)what;
	evconnlistener_enable(g->l);
}

/* Says what failed, at most once per REPORT_S, with the count in between. */
static void report(struct guard *g, int err)
{
	time_t now = time(NULL);
	g->unsaid++;
	if (g->said && now - g->said < REPORT_S)
		return;
	char msg[256];
	if (g->unsaid > 1)
		snprintf(msg, sizeof msg, "%s: cannot accept: %s (%llu times in the last %lld s); new connections wait",
			 g->what, strerror(err), (unsigned long long)g->unsaid, (long long)(now - g->said));
	else
		snprintf(msg, sizeof msg, "%s: cannot accept: %s; new connections wait in the backlog, retried every %d ms",
			 g->what, strerror(err), PAUSE_MS);
	g->report(g->arg, msg);
	g->said = now;
	g->unsaid = 0;
}

static void error_cb(struct evconnlistener *l, void *arg)
{
	int err = EVUTIL_SOCKET_ERROR();
	(void)arg;
	pthread_mutex_lock(&lock);
	struct guard *g = find(l);
	pthread_mutex_unlock(&lock);
	if (!g) {
		evconnlistener_disable(l); /* not ours to leave spinning either */
		return;
	}
	evconnlistener_disable(l);
	struct timeval tv = { 0, PAUSE_MS * 1000 };
	event_add(g->resume, &tv);
	report(g, err);
}

int tun_lguard_watch(struct evconnlistener *l, const char *what, tun_lguard_report_fn fn, void *arg)
{
	struct guard *g = calloc(1, sizeof *g);
	if (!g)
		return TUN_ENOMEM;
	g->l = l;
	g->report = fn;
	g->arg = arg;
	snprintf(g->what, sizeof g->what, "%s", what);
	if (!(g->resume = event_new(evconnlistener_get_base(l), -1, 0, resume_cb, g))) {
		free(g);
		return TUN_ENOMEM;
	}
	pthread_mutex_lock(&lock);
	int i = 0;
	while (i < GUARDS_MAX && guards[i])
		i++;
	if (i < GUARDS_MAX)
		guards[i] = g;
	pthread_mutex_unlock(&lock);
	if (i == GUARDS_MAX) {
		event_free(g->resume);
		free(g);
		return TUN_ELIMIT;
	}
	evconnlistener_set_error_cb(l, error_cb);
	return TUN_OK;
}

void tun_lguard_free_listener(struct evconnlistener *l)
{
	if (!l)
		return;
	tun_lguard_forget(l);
	evconnlistener_free(l);
}

void tun_lguard_forget(struct evconnlistener *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&lock);
	struct guard *g = NULL;
	for (int i = 0; i < GUARDS_MAX && !g; i++)
		if (guards[i] && guards[i]->l == l) {
			g = guards[i];
			guards[i] = NULL;
		}
	pthread_mutex_unlock(&lock);
	if (!g)
		return;
	evconnlistener_set_error_cb(l, NULL);
	event_free(g->resume);
	free(g);
}
