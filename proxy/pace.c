/* pace.c: the shared pacing caps of pace.h. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pace.h"
#include "tfo.h"

#define STALE_US (3u * PX_PACE_TICK_MS * 1000u) /* a member not updated this long has left */
#define LIMITED_PCT 75                           /* of its cap: a member sending this fast is limited by it */
#define MOVE_PCT 2                               /* a share this close to the cap in force leaves it be */

struct member {
	const void *id;
	uint64_t sent;    /* TCP_INFO bytes_sent at the last sample */
	uint64_t t_us;    /* when that was */
	uint64_t seen_us; /* last update */
	struct px_pace_use use;
};

struct group {
	uint8_t key[PX_PACE_KEY_LEN];
	struct member *m;
	size_t n, cap;
	struct group *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct group *groups; /* under mu */

uint64_t px_pace_share(const struct px_pace_use *u, size_t n, size_t i, uint64_t total_bps)
{
	if (n <= 1)
		return total_bps;
	/* what the others use, and what the members not limited use, each
	 * counted with a quarter more */
	uint64_t fair = total_bps / n, others = 0, left = 0, nlim = 0;
	for (size_t j = 0; j < n; j++) {
		uint64_t use = u[j].rate_bps + u[j].rate_bps / 4;
		others += j != i ? use : 0;
		if (u[j].limited)
			nlim++;
		else
			left += use;
	}
	if (!u[i].limited) {
		uint64_t s = u[i].rate_bps * 2, room = others < total_bps ? total_bps - others : 0;
		s = s > fair ? s : fair;
		room = room > fair ? room : fair;
		return s < room ? s : room;
	}
	uint64_t s = left < total_bps ? (total_bps - left) / nlim : 0, floor = total_bps / (4 * n);
	return s > floor ? s : floor;
}

/* The group of key, created if need be (NULL: out of memory).  Under mu. */
static struct group *group_get(const uint8_t *key)
{
	struct group *g;
	for (g = groups; g; g = g->next)
		if (!memcmp(g->key, key, PX_PACE_KEY_LEN))
			return g;
	if (!(g = calloc(1, sizeof *g)))
		return NULL;
	memcpy(g->key, key, PX_PACE_KEY_LEN);
	g->next = groups;
	groups = g;
	return g;
}

/* Unlinks and frees g, which has no members.  Under mu. */
static void group_free(struct group *g)
{
	struct group **pp = &groups;
	while (*pp != g)
		pp = &(*pp)->next;
	*pp = g->next;
	free(g->m);
	free(g);
}

/* Removes member k of g; frees g when it was the last.  Under mu. */
static void member_drop(struct group *g, size_t k)
{
	g->m[k] = g->m[--g->n];
	if (!g->n)
		group_free(g);
}

/* id's member in g, added if need be (NULL: out of memory).  Under mu. */
static struct member *member_get(struct group *g, const void *id)
{
	for (size_t k = 0; k < g->n; k++)
		if (g->m[k].id == id)
			return &g->m[k];
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 4;
		struct member *m = realloc(g->m, cap * sizeof *m);
		if (!m)
			return NULL;
		g->m = m;
		g->cap = cap;
	}
	g->m[g->n] = (struct member){ .id = id };
	return &g->m[g->n++];
}

/* Folds a sample (bytes_sent at now_us) into m, whose cap in force is
 * cap_bps (0: none). */
static void member_sample(struct member *m, uint64_t sent, uint64_t now_us, uint64_t cap_bps)
{
	if (m->t_us && now_us > m->t_us && sent >= m->sent) {
		uint64_t r = (sent - m->sent) * 8u * 1000000u / (now_us - m->t_us);
		m->use.rate_bps = m->use.rate_bps ? (m->use.rate_bps + r) / 2 : r;
		m->use.limited = cap_bps && m->use.rate_bps * 100 >= cap_bps * LIMITED_PCT;
	}
	m->sent = sent;
	m->t_us = now_us;
	m->seen_us = now_us;
}

/* id's share after a sample; 0 when out of memory.  A group of more than
 * 64 live members is shared as if it had 64.  Takes mu. */
static uint64_t group_update(const uint8_t *key, const void *id, uint64_t sent, uint64_t cap_bps, uint64_t total_bps,
			     uint64_t now_us)
{
	struct px_pace_use use[64];
	uint64_t share = 0;
	pthread_mutex_lock(&mu);
	struct group *g = group_get(key);
	struct member *m = g ? member_get(g, id) : NULL;
	if (m) {
		member_sample(m, sent, now_us, cap_bps);
		size_t n = 1;
		use[0] = m->use; /* m moves once a member is dropped: read it first */
		for (size_t k = g->n; k-- > 0;) {
			struct member *x = &g->m[k];
			if (x->id == id)
				continue;
			if (now_us > x->seen_us + STALE_US)
				member_drop(g, k); /* g keeps id's member, so it stays */
			else if (n < sizeof use / sizeof use[0])
				use[n++] = x->use;
		}
		share = px_pace_share(use, n, 0, total_bps);
	} else if (g && !g->n) {
		group_free(g);
	}
	pthread_mutex_unlock(&mu);
	return share;
}

uint64_t px_pace_update(const uint8_t key[PX_PACE_KEY_LEN], const void *id, int fd, uint64_t total_bps,
			uint64_t now_us)
{
	if (!total_bps) {
		px_pace_forget(id);
		return 0;
	}
	struct tfo_info ti;
	char err[64];
	uint64_t cap_bps = tfo_pace_get(fd);
	if (cap_bps == UINT64_MAX || tfo_info(fd, &ti, err, sizeof err))
		return 0;
	uint64_t share = group_update(key, id, ti.bytes_sent, cap_bps, total_bps, now_us);
	if (!share)
		return 0;
	uint64_t d = share > cap_bps ? share - cap_bps : cap_bps - share;
	if ((!cap_bps || d * 100 > cap_bps * MOVE_PCT) && tfo_pace_set(fd, share, err, sizeof err))
		return 0;
	return share;
}

void px_pace_forget(const void *id)
{
	pthread_mutex_lock(&mu);
	for (struct group *g = groups; g; g = g->next) {
		for (size_t k = 0; k < g->n; k++) {
			if (g->m[k].id == id) {
				member_drop(g, k); /* may free g: stop here (an id is in one group) */
				pthread_mutex_unlock(&mu);
				return;
			}
		}
	}
	pthread_mutex_unlock(&mu);
}
