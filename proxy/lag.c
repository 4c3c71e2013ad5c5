/* lag.c: the event loop watchdog of lag.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <event2/event.h>

#include "lag.h"
#include "log.h"
#include "stats.h"

struct px_lag {
	struct event *ev;
	struct stats *stats;
	uint64_t due_us; /* when the timer should fire next (monotonic) */
	char name[48];
};

uint64_t px_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Every PX_LAG_TICK_MS: how late this tick is, is how long the loop was
 * held (by a callback, or by not being scheduled) beyond the tick. */
static void lag_tick(evutil_socket_t fd, short what, void *arg)
{
	struct px_lag *l = arg;
	uint64_t now = px_mono_us(), late = now > l->due_us ? now - l->due_us : 0;

	(void)fd; (void)what;
	l->due_us = now + PX_LAG_TICK_MS * 1000u;
	stats_max(l->stats, STATS_LOOP_LAG_MAX_US, late);
	stats_add(l->stats, STATS_LOOP_LAG_US, (int64_t)late);
	if (late >= PX_LAG_WARN_MS * 1000u) {
		stats_add(l->stats, STATS_LOOP_HELD, 1);
		log_warn("%s: event loop held for %llu ms (a long callback, or the process was not scheduled);"
			 " tunnel keepalives and relays waited that long", l->name,
			 (unsigned long long)(late / 1000));
	}
}

struct px_lag *px_lag_start(struct event_base *base, struct stats *s, const char *name)
{
	struct px_lag *l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	l->stats = s;
	snprintf(l->name, sizeof l->name, "%s", name);
	struct timeval tv = { 0, PX_LAG_TICK_MS * 1000 };
	if (!(l->ev = event_new(base, -1, EV_PERSIST, lag_tick, l)) || event_add(l->ev, &tv)) {
		px_lag_free(l);
		return NULL;
	}
	l->due_us = px_mono_us() + PX_LAG_TICK_MS * 1000u;
	return l;
}

void px_lag_free(struct px_lag *l)
{
	if (!l)
		return;
	if (l->ev)
		event_free(l->ev);
	free(l);
}
