/* lag.h: how long an event loop is held.  A callback that runs long, or a
 * process the kernel does not schedule, delays every other event of its
 * loop: tunnel keepalives (an edge gives up on a tunnel after 1 s without a
 * frame), relays, stats.  A px_lag is a short timer on one event base that
 * measures how late it fires: the longest delay since start goes to the
 * STATS_LOOP_LAG_MAX_US gauge, every delay to the STATS_LOOP_LAG_US count
 * (its rate: the share of the time loops are held), each delay of
 * PX_LAG_WARN_MS or more to a warning and the STATS_LOOP_HELD count.  Create, use and free a px_lag on its base's thread. */
#ifndef WANOPT_LAG_H
#define WANOPT_LAG_H

#include <stdint.h>

struct event_base;
struct stats;
/* Microseconds on the monotonic clock: for durations in logs and stats. */
uint64_t px_mono_us(void);

struct px_lag;

#define PX_LAG_TICK_MS 100
#define PX_LAG_WARN_MS 500

/* Starts watching base; name ("edge", "core worker 2") goes into warnings.
 * NULL when out of memory (nothing is watched then). */
struct px_lag *px_lag_start(struct event_base *base, struct stats *s, const char *name);
/* Stops watching and frees; NULL is fine. */
void px_lag_free(struct px_lag *l);

#endif
