/* stats_int.h: the registry's types, shared by stats.c (the registry) and
 * stats_render.c (its Prometheus and JSON renderings); not for other modules. */
#ifndef WANOPT_STATS_INT_H
#define WANOPT_STATS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "stats.h"

struct stats_stream {
	struct stats *reg;
	struct stats_stream *prev, *next;
	uint64_t id;
	time_t opened;
	char *src, *dst, *mode;
	char cls[8]; /* DSCP class name, "" when unmarked */
	int warm;
	_Atomic uint64_t ctr[STATS_NCTR];
};

struct stats {
	char role[16];
	time_t started;
	pthread_mutex_t lock;
	struct stats_stream *head; /* open streams, newest first */
	uint64_t next_id;
	_Atomic uint64_t opened, active;
	_Atomic uint64_t ctr[STATS_NCTR];
	_Atomic uint64_t gauge[STATS_NGAUGE];
	struct stats_tunnel *tun[STATS_TUNNEL_SLOTS]; /* under lock */
	size_t ntun[STATS_TUNNEL_SLOTS];
};

/* A snapshot of counters: a stream's or the totals. */
struct stats_snap {
	uint64_t v[STATS_NCTR];
};

/* One listed stream: a copy taken under the lock. */
struct stats_row {
	uint64_t id;
	time_t opened;
	char src[80], dst[80], mode[16], cls[8];
	struct stats_snap sn;
};

/* LAN and WAN bytes of a snapshot, both directions. */
static inline uint64_t stats_snap_lan(const struct stats_snap *sn)
{
	return sn->v[STATS_LAN_IN] + sn->v[STATS_LAN_OUT];
}

static inline uint64_t stats_snap_wan(const struct stats_snap *sn)
{
	return sn->v[STATS_WAN_IN] + sn->v[STATS_WAN_OUT];
}

/* LZ input over output; 0 when nothing was compressed. */
double stats_lz_ratio(uint64_t in, uint64_t out);
/* Loads an array of atomic counters. */
void stats_snap_load(struct stats_snap *sn, _Atomic uint64_t *ctr);
/* Copies the open streams (at most STATS_MAX_LISTED, the largest); malloc'd,
 * NULL when out of memory. */
struct stats_row *stats_rows(struct stats *s, size_t *n);
/* Every published tunnel connection, one per peer (the smallest known RTT),
 * sorted by peer; malloc'd (NULL with *n 0 when there are none or out of memory). */
struct stats_tunnel *stats_tunnels(struct stats *s, size_t *n);

#endif
