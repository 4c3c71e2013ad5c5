/* stats.c: the counter registry (per stream and total), its copies for the
 * renderings (stats_render.c) and the close log line.  Counters are relaxed
 * atomics so workers update them without locks; the list of open streams is
 * under a mutex. */
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stats.h"
#include "stats_int.h"

/* An empty registry; NULL when out of memory. */
struct stats *stats_create(const char *role)
{
	struct stats *s = calloc(1, sizeof *s);

	if (!s)
		return NULL;
	if (pthread_mutex_init(&s->lock, NULL)) {
		free(s);
		return NULL;
	}
	snprintf(s->role, sizeof s->role, "%s", role ? role : "");
	s->started = time(NULL);
	s->next_id = 1;
	return s;
}

/* Closes any streams left open, then frees; NULL is fine. */
void stats_free(struct stats *s)
{
	if (!s)
		return;
	while (s->head)
		stats_stream_close(s->head);
	for (int i = 0; i < STATS_TUNNEL_SLOTS; i++)
		free(s->tun[i]);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Frees a stream's memory (already unlinked). */
static void stats_stream_destroy(struct stats_stream *st)
{
	free(st->src);
	free(st->dst);
	free(st->mode);
	free(st);
}

/* Copies the labels, assigns the next id, links the stream first in the list. */
struct stats_stream *stats_stream_open(struct stats *s, const char *src, const char *dst,
				       const char *mode)
{
	struct stats_stream *st = calloc(1, sizeof *st);

	if (!st)
		return NULL;
	st->src = strdup(src ? src : "");
	st->dst = strdup(dst ? dst : "");
	st->mode = strdup(mode ? mode : "");
	if (!st->src || !st->dst || !st->mode) {
		stats_stream_destroy(st);
		return NULL;
	}
	st->reg = s;
	st->opened = time(NULL);
	pthread_mutex_lock(&s->lock);
	st->id = s->next_id++;
	st->next = s->head;
	if (s->head)
		s->head->prev = st;
	s->head = st;
	pthread_mutex_unlock(&s->lock);
	atomic_fetch_add_explicit(&s->opened, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->active, 1, memory_order_relaxed);
	return st;
}

void stats_stream_set_warm(struct stats_stream *st)
{
	if (!st)
		return;
	char *m = strdup("warm");
	pthread_mutex_lock(&st->reg->lock); /* rendering copies the labels under it */
	st->warm = 1;
	if (m) {
		free(st->mode);
		st->mode = m;
	}
	pthread_mutex_unlock(&st->reg->lock);
}

void stats_stream_set_class(struct stats_stream *st, const char *cls)
{
	if (!st)
		return;
	pthread_mutex_lock(&st->reg->lock);
	snprintf(st->cls, sizeof st->cls, "%s", cls ? cls : "");
	pthread_mutex_unlock(&st->reg->lock);
}

/* The total a warm push's counter c adds to (-1: none). */
static int warm_total(enum stats_ctr c)
{
	switch (c) {
	case STATS_LAN_IN:
		return STATS_WARM_FILE;
	case STATS_WAN_IN:
	case STATS_WAN_OUT:
		return STATS_WARM_WAN;
	case STATS_ASKS:
		return STATS_ASKS;
	default:
		return -1;
	}
}

/* Relaxed atomic adds to the stream and the total; NULL stream is a no-op. */
void stats_stream_add(struct stats_stream *st, enum stats_ctr c, uint64_t n)
{
	if (!st || (unsigned)c >= STATS_NCTR)
		return;
	atomic_fetch_add_explicit(&st->ctr[c], n, memory_order_relaxed);
	int t = st->warm ? warm_total(c) : (int)c;
	if (t >= 0)
		atomic_fetch_add_explicit(&st->reg->ctr[t], n, memory_order_relaxed);
}

/* One stream counter; 0 for a NULL stream. */
uint64_t stats_stream_get(const struct stats_stream *st, enum stats_ctr c)
{
	if (!st || (unsigned)c >= STATS_NCTR)
		return 0;
	return atomic_load_explicit(&st->ctr[c], memory_order_relaxed);
}

/* The stream's id; 0 for NULL. */
uint64_t stats_stream_id(const struct stats_stream *st)
{
	return st ? st->id : 0;
}

/* Unlinks under the lock and frees; totals keep the bytes.  NULL is fine. */
void stats_stream_close(struct stats_stream *st)
{
	if (!st)
		return;
	struct stats *s = st->reg;
	pthread_mutex_lock(&s->lock);
	if (st->prev)
		st->prev->next = st->next;
	else
		s->head = st->next;
	if (st->next)
		st->next->prev = st->prev;
	pthread_mutex_unlock(&s->lock);
	atomic_fetch_sub_explicit(&s->active, 1, memory_order_relaxed);
	stats_stream_destroy(st);
}

/* Stores a gauge value (relaxed). */
void stats_set(struct stats *s, enum stats_gauge g, uint64_t v)
{
	if ((unsigned)g < STATS_NGAUGE)
		atomic_store_explicit(&s->gauge[g], v, memory_order_relaxed);
}

void stats_add(struct stats *s, enum stats_gauge g, int64_t d)
{
	if (s && (unsigned)g < STATS_NGAUGE)
		atomic_fetch_add_explicit(&s->gauge[g], (uint64_t)d, memory_order_relaxed);
}

/* Raises a gauge to v (compare-and-swap, relaxed). */
void stats_max(struct stats *s, enum stats_gauge g, uint64_t v)
{
	if (!s || (unsigned)g >= STATS_NGAUGE)
		return;
	uint64_t cur = atomic_load_explicit(&s->gauge[g], memory_order_relaxed);
	while (cur < v && !atomic_compare_exchange_weak_explicit(&s->gauge[g], &cur, v, memory_order_relaxed,
								   memory_order_relaxed))
		;
}

int stats_tunnels_set(struct stats *s, int slot, const struct stats_tunnel *t, size_t n)
{
	if (slot < 0 || slot >= STATS_TUNNEL_SLOTS)
		return -1;
	struct stats_tunnel *copy = n ? malloc(n * sizeof *copy) : NULL;
	if (copy)
		memcpy(copy, t, n * sizeof *copy);
	pthread_mutex_lock(&s->lock);
	free(s->tun[slot]);
	s->tun[slot] = copy;
	s->ntun[slot] = copy ? n : 0;
	pthread_mutex_unlock(&s->lock);
	return n && !copy ? -1 : 0;
}

static int stats_tunnel_cmp(const void *a, const void *b)
{
	return strcmp(((const struct stats_tunnel *)a)->peer, ((const struct stats_tunnel *)b)->peer);
}

struct stats_tunnel *stats_tunnels(struct stats *s, size_t *n)
{
	size_t total = 0, k = 0;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < STATS_TUNNEL_SLOTS; i++)
		total += s->ntun[i];
	struct stats_tunnel *all = total ? malloc(total * sizeof *all) : NULL;
	for (int i = 0; all && i < STATS_TUNNEL_SLOTS; i++) {
		if (s->ntun[i]) /* else tun[i] may be NULL, which memcpy must not get even for 0 bytes */
			memcpy(all + k, s->tun[i], s->ntun[i] * sizeof *all);
		k += s->ntun[i];
	}
	pthread_mutex_unlock(&s->lock);
	*n = 0;
	if (!all)
		return NULL;
	qsort(all, total, sizeof *all, stats_tunnel_cmp);
	for (size_t i = 0; i < total; i++) {
		struct stats_tunnel *last = *n ? &all[*n - 1] : NULL;
		if (!last || strcmp(last->peer, all[i].peer))
			all[(*n)++] = all[i];
		else {
			if (all[i].rtt_us && (!last->rtt_us || all[i].rtt_us < last->rtt_us))
				last->rtt_us = all[i].rtt_us;
			if (all[i].link_bps > last->link_bps)
				last->link_bps = all[i].link_bps;
			last->pace_bps += all[i].pace_bps;
			if (all[i].cert_not_after && (!last->cert_not_after || all[i].cert_not_after < last->cert_not_after))
				last->cert_not_after = all[i].cert_not_after;
		}
	}
	return all;
}

/* One total counter. */
uint64_t stats_total(const struct stats *s, enum stats_ctr c)
{
	if ((unsigned)c >= STATS_NCTR)
		return 0;
	return atomic_load_explicit(&s->ctr[c], memory_order_relaxed);
}

/* Streams open now. */
uint64_t stats_active(const struct stats *s)
{
	return atomic_load_explicit(&s->active, memory_order_relaxed);
}

/* Percentage of LAN bytes that did not cross the WAN; 0 for no LAN bytes. */
double stats_reduction(uint64_t lan, uint64_t wan)
{
	if (!lan)
		return 0;
	return 100.0 * (1.0 - (double)wan / (double)lan);
}

double stats_lz_ratio(uint64_t in, uint64_t out)
{
	return out ? (double)in / (double)out : 0;
}

void stats_snap_load(struct stats_snap *sn, _Atomic uint64_t *ctr)
{
	for (int i = 0; i < STATS_NCTR; i++)
		sn->v[i] = atomic_load_explicit(&ctr[i], memory_order_relaxed);
}

const char *stats_bytes_str(double v, int binary, char *buf, size_t len)
{
	static const char *const dec[] = { "B", "KB", "MB", "GB", "TB", "PB" };
	static const char *const bin[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double step = binary ? 1024 : 1000;
	int u = 0;

	while (v >= step && u < 5) {
		v /= step;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, binary ? bin[u] : dec[u]);
	return buf;
}

/* Traffic bytes, decimal units ("1.2 MB"). */
static const char *stats_human(uint64_t v, char *buf, size_t len)
{
	return stats_bytes_str((double)v, 0, buf, len);
}

/* Formats a stream's figures for its close log line; returns buf. */
char *stats_stream_summary(const struct stats_stream *st, char *buf, size_t len)
{
	struct stats_snap sn;
	char a[16], b[16], c[16];

	if (!st) {
		snprintf(buf, len, "-");
		return buf;
	}
	stats_snap_load(&sn, ((struct stats_stream *)st)->ctr);
	uint64_t lan = stats_snap_lan(&sn), wan = stats_snap_wan(&sn);
	char red[48], lz[24];
	/* a tiny stream costs more on the WAN (framing) than it carries: say so */
	if (!lan || wan > lan)
		snprintf(red, sizeof red, "%s", !lan ? "nothing carried" : "framing exceeds data");
	else
		snprintf(red, sizeof red, "%.1f %% less", stats_reduction(lan, wan));
	if (sn.v[STATS_LZ_IN])
		snprintf(lz, sizeof lz, "%.2fx", stats_lz_ratio(sn.v[STATS_LZ_IN], sn.v[STATS_LZ_OUT]));
	else
		snprintf(lz, sizeof lz, "-");
	snprintf(buf, len, "lan %s wan %s (%s) dre hits %s lz %s asks %llu", stats_human(lan, a, sizeof a),
		 stats_human(wan, b, sizeof b), red, stats_human(sn.v[STATS_DRE_HIT], c, sizeof c), lz,
		 (unsigned long long)sn.v[STATS_ASKS]);
	return buf;
}

/* Orders rows by LAN bytes, largest first. */
static int stats_row_cmp(const void *a, const void *b)
{
	uint64_t x = stats_snap_lan(&((const struct stats_row *)a)->sn);
	uint64_t y = stats_snap_lan(&((const struct stats_row *)b)->sn);
	return x < y ? 1 : x > y ? -1 : 0;
}

struct stats_row *stats_rows(struct stats *s, size_t *n)
{
	size_t cap = 64, cnt = 0;
	struct stats_row *rows = malloc(cap * sizeof *rows), *nr;

	if (!rows)
		return NULL;
	pthread_mutex_lock(&s->lock);
	for (struct stats_stream *st = s->head; st; st = st->next) {
		if (cnt == cap) {
			if (!(nr = realloc(rows, 2 * cap * sizeof *rows)))
				break;
			rows = nr;
			cap *= 2;
		}
		struct stats_row *r = &rows[cnt++];
		r->id = st->id;
		r->opened = st->opened;
		snprintf(r->src, sizeof r->src, "%s", st->src);
		snprintf(r->dst, sizeof r->dst, "%s", st->dst);
		snprintf(r->mode, sizeof r->mode, "%s", st->mode);
		memcpy(r->cls, st->cls, sizeof r->cls);
		stats_snap_load(&r->sn, st->ctr);
	}
	pthread_mutex_unlock(&s->lock);
	qsort(rows, cnt, sizeof *rows, stats_row_cmp);
	*n = cnt > STATS_MAX_LISTED ? STATS_MAX_LISTED : cnt;
	return rows;
}
