/* stats.c: the counter registry (per stream and total) and its rendering as
 * Prometheus text and JSON.  Counters are relaxed atomics so workers update
 * them without locks; the list of open streams is under a mutex. */
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Counter names used by both renderings, indexed by enum stats_ctr. */
static const char *const stats_ctr_key[STATS_NCTR] = {
	"lan_in", "lan_out", "wan_in", "wan_out", "dre_hit_bytes", "lz_in", "lz_out", "asks",
	"warm_file_bytes", "warm_wan_bytes",
};

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

/* Every published tunnel connection, one per peer (the smallest known RTT),
 * sorted by peer; malloc'd (NULL with *n 0 when there are none or out of memory). */
static struct stats_tunnel *stats_tunnels(struct stats *s, size_t *n)
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

/* LZ input over output; 0 when nothing was compressed. */
static double stats_lz_ratio(uint64_t in, uint64_t out)
{
	return out ? (double)in / (double)out : 0;
}

/* A snapshot of counters: a stream's or the totals. */
struct stats_snap {
	uint64_t v[STATS_NCTR];
};

/* Loads an array of atomic counters. */
static void stats_snap_load(struct stats_snap *sn, _Atomic uint64_t *ctr)
{
	for (int i = 0; i < STATS_NCTR; i++)
		sn->v[i] = atomic_load_explicit(&ctr[i], memory_order_relaxed);
}

/* LAN and WAN bytes of a snapshot, both directions. */
static uint64_t snap_lan(const struct stats_snap *sn) { return sn->v[STATS_LAN_IN] + sn->v[STATS_LAN_OUT]; }
static uint64_t snap_wan(const struct stats_snap *sn) { return sn->v[STATS_WAN_IN] + sn->v[STATS_WAN_OUT]; }

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
	uint64_t lan = snap_lan(&sn), wan = snap_wan(&sn);
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

/* One listed stream: a copy taken under the lock. */
struct stats_row {
	uint64_t id;
	time_t opened;
	char src[80], dst[80], mode[16], cls[8];
	struct stats_snap sn;
};

/* Orders rows by LAN bytes, largest first. */
static int stats_row_cmp(const void *a, const void *b)
{
	uint64_t x = snap_lan(&((const struct stats_row *)a)->sn);
	uint64_t y = snap_lan(&((const struct stats_row *)b)->sn);
	return x < y ? 1 : x > y ? -1 : 0;
}

/* Copies the open streams (at most STATS_MAX_LISTED, the largest). */
static struct stats_row *stats_rows(struct stats *s, size_t *n)
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

/* Writes s as a Prometheus label value or JSON string body (same escapes:
 * backslash, double quote, newline; other control bytes as \u00XX in JSON,
 * dropped in Prometheus). */
void stats_escape(FILE *f, const char *s, int json)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '\\' || c == '"')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20 && json)
			fprintf(f, "\\u%04x", c);
		else if (c < 0x20)
			continue;
		else
			fputc(c, f);
	}
}

/* Writes HELP and TYPE lines. */
static void prom_head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP wanopt_%s %s\n# TYPE wanopt_%s %s\n", name, help, name, type);
}

/* Metrics that are one gauge's value as it is. */
struct prom_plain {
	const char *name, *type, *help;
	int gauge;
};
static const struct prom_plain prom_plains[] = {
	{ "store_fill_bytes", "gauge", "Bytes held in the chunk store.", STATS_STORE_FILL },
	{ "store_size_bytes", "gauge", "Configured store size.", STATS_STORE_SIZE },
	{ "store_evictions_total", "counter", "Chunks evicted from the store.", STATS_STORE_EVICTIONS },
	{ "store_peers", "gauge", "Peer stores whose chunks the store tracks (of 32 slots).", STATS_STORE_PEERS },
	{ "store_peers_untracked_total", "counter",
	  "Streams from peer stores that found every slot in use, sent as if those peers held every chunk.",
	  STATS_STORE_UNTRACKED },
	{ "store_pins", "gauge",
	  "Frames in flight that keep a store data file from eviction, so that the peer's asks can be answered.",
	  STATS_STORE_PINS },
	{ "store_pinned_over_max_bytes", "gauge", "The most bytes pins have kept the store over its size.",
	  STATS_STORE_PIN_OVER },
	{ "store_pins_forced_total", "counter",
	  "Pinned data files evicted all the same, the store being past its size by the most allowed.",
	  STATS_STORE_PIN_FORCED },
	{ "direct_connections_total", "counter",
	  "Connections an edge passed straight to their destination (passthrough, fail open), since start.",
	  STATS_CONN_DIRECT },
	{ "refused_connections_total", "counter",
	  "Connections an edge refused (no tunnel and fail_open = refuse, or no way there), since start.",
	  STATS_CONN_REFUSED },
	{ "handed_back_connections_total", "counter",
	  "Of the direct connections, those the core turned back before their destination got anything"
	  " (not allowed, no connection there, stream not taken), since start.",
	  STATS_CONN_HANDED },
	{ "store_room_bytes", "gauge",
	  "What the store's file system leaves it, while less than its size (the store keeps to that); 0: its size.",
	  STATS_STORE_ROOM },
};

/* The node-wide metrics. */
static void prom_totals(FILE *f, struct stats *s)
{
	struct stats_snap t;

	stats_snap_load(&t, s->ctr);
	prom_head(f, "lan_bytes_total", "counter", "Bytes read from (in) and written to (out) LAN sockets.");
	fprintf(f, "wanopt_lan_bytes_total{dir=\"in\"} %llu\nwanopt_lan_bytes_total{dir=\"out\"} %llu\n",
		(unsigned long long)t.v[STATS_LAN_IN], (unsigned long long)t.v[STATS_LAN_OUT]);
	prom_head(f, "wan_bytes_total", "counter", "Tunnel payload bytes received (in) and sent (out).");
	fprintf(f, "wanopt_wan_bytes_total{dir=\"in\"} %llu\nwanopt_wan_bytes_total{dir=\"out\"} %llu\n",
		(unsigned long long)t.v[STATS_WAN_IN], (unsigned long long)t.v[STATS_WAN_OUT]);
	prom_head(f, "reduction_percent", "gauge", "100 x (1 - WAN bytes / LAN bytes) since start.");
	fprintf(f, "wanopt_reduction_percent %.2f\n", stats_reduction(snap_lan(&t), snap_wan(&t)));
	prom_head(f, "dre_hit_bytes_total", "counter", "Stream bytes that crossed the tunnel as references to stored chunks, either direction (encoded or decoded here).");
	fprintf(f, "wanopt_dre_hit_bytes_total %llu\n", (unsigned long long)t.v[STATS_DRE_HIT]);
	prom_head(f, "lz_bytes_total", "counter", "Bytes into (in) and out of (out) LZ compression.");
	fprintf(f, "wanopt_lz_bytes_total{dir=\"in\"} %llu\nwanopt_lz_bytes_total{dir=\"out\"} %llu\n",
		(unsigned long long)t.v[STATS_LZ_IN], (unsigned long long)t.v[STATS_LZ_OUT]);
	prom_head(f, "lz_ratio", "gauge", "LZ input bytes / output bytes since start.");
	fprintf(f, "wanopt_lz_ratio %.3f\n", stats_lz_ratio(t.v[STATS_LZ_IN], t.v[STATS_LZ_OUT]));
	prom_head(f, "asks_total", "counter", "Frames asked for again because the decoder lacked data they referenced.");
	fprintf(f, "wanopt_asks_total %llu\n", (unsigned long long)t.v[STATS_ASKS]);
	prom_head(f, "warm_file_bytes_total", "counter",
		  "File bytes pre-positioned from here (wanopt warm); not in the LAN, WAN, DRE or LZ totals.");
	fprintf(f, "wanopt_warm_file_bytes_total %llu\n", (unsigned long long)t.v[STATS_WARM_FILE]);
	prom_head(f, "warm_wan_bytes_total", "counter", "Tunnel payload bytes of pre-positioning, either direction.");
	fprintf(f, "wanopt_warm_wan_bytes_total %llu\n", (unsigned long long)t.v[STATS_WARM_WAN]);
}

/* A per-peer gauge of the tunnel peers t[0..n): name (after "wanopt_"), with
 * help, valued by each peer's uint64_t at offset off of its struct; a peer
 * whose value is 0 (unknown) is left out. */
static void prom_peer_u64(FILE *f, const struct stats_tunnel *t, size_t n, const char *name, const char *help,
			  size_t off)
{
	prom_head(f, name, "gauge", help);
	for (size_t i = 0; i < n && i < STATS_MAX_LISTED; i++) {
		uint64_t v;
		memcpy(&v, (const char *)&t[i] + off, sizeof v);
		if (!v)
			continue;
		fprintf(f, "wanopt_%s{peer=\"", name);
		stats_escape(f, t[i].peer, 0);
		fprintf(f, "\"} %llu\n", (unsigned long long)v);
	}
}

/* The smoothed RTT to each tunnel peer, the rate sent to it, its pacing cap
 * and its certificate's expiry. */
static void prom_tunnels(FILE *f, struct stats *s)
{
	size_t n;
	struct stats_tunnel *t = stats_tunnels(s, &n);
	if (!n)
		return;
	prom_head(f, "tunnel_peer_rtt_seconds", "gauge",
		  "Smoothed round-trip time to each tunnel peer (TCP_INFO; the smallest over its connections).");
	for (size_t i = 0; i < n && i < STATS_MAX_LISTED; i++) {
		fputs("wanopt_tunnel_peer_rtt_seconds{peer=\"", f);
		stats_escape(f, t[i].peer, 0);
		fprintf(f, "\"} %.6f\n", (double)t[i].rtt_us / 1e6);
	}
	prom_peer_u64(f, t, n, "tunnel_peer_link_bits_per_second",
		      "The rate sent to each tunnel peer at (link_rate, or the slower one the peer told; unknown: absent).",
		      offsetof(struct stats_tunnel, link_bps));
	prom_peer_u64(f, t, n, "tunnel_peer_pace_bits_per_second",
		      "The pacing cap of the connections to each tunnel peer, summed (a share of 95 % of the link rate;"
		      " unpaced: absent).",
		      offsetof(struct stats_tunnel, pace_bps));
	prom_peer_u64(f, t, n, "tunnel_peer_cert_expiry_timestamp_seconds",
		      "When each tunnel peer's certificate expires (Unix time; the earliest over its connections).",
		      offsetof(struct stats_tunnel, cert_not_after));
	free(t);
}

/* How the store reads runs of stored chunks (dre/rtune.c). */
static void prom_reads(FILE *f, _Atomic uint64_t *g)
{
#define G(i) (unsigned long long)atomic_load(&g[i])
	prom_head(f, "store_reads_mapped", "gauge",
		  "1: runs of stored chunks are read through the store's mappings; 0: through 128 KiB preads.");
	fprintf(f, "wanopt_store_reads_mapped %llu\n", G(STATS_STORE_READS_MAPPED));
	prom_head(f, "store_read_seconds_per_mib", "gauge",
		  "What the store's own reads cost per MiB each way when last timed (0: not timed).");
	fprintf(f, "wanopt_store_read_seconds_per_mib{way=\"window\"} %.6f\n", G(STATS_STORE_READS_WINDOW_NS) / 1e9);
	fprintf(f, "wanopt_store_read_seconds_per_mib{way=\"map\"} %.6f\n", G(STATS_STORE_READS_MAP_NS) / 1e9);
	prom_head(f, "store_read_way_changes_total", "counter", "Times the store changed its way of reading runs.");
	fprintf(f, "wanopt_store_read_way_changes_total %llu\n", G(STATS_STORE_READS_CHANGES));
#undef G
}

/* The store's hit ratio (step 0) or the estimate for a store 2, 4, 8 x as
 * large (steps 1-3), from the sizing gauges. */
static double stats_hit_ratio(_Atomic uint64_t *g, int step)
{
	double hit = (double)atomic_load(&g[STATS_STORE_HIT_BYTES]);
	double all = hit + (double)atomic_load(&g[STATS_STORE_NEW_BYTES]);
	if (step)
		hit += (double)atomic_load(&g[STATS_STORE_LARGER_2X + step - 1]);
	return all > 0 ? hit / all : 0;
}

static void prom_sizing(FILE *f, _Atomic uint64_t *g)
{
	prom_head(f, "store_reference_bytes_total", "counter",
		  "Chunk bytes sent or received as references to the store (kept across restarts).");
	fprintf(f, "wanopt_store_reference_bytes_total %llu\n",
		(unsigned long long)atomic_load(&g[STATS_STORE_HIT_BYTES]));
	prom_head(f, "store_new_bytes_total", "counter", "Chunk bytes stored anew (kept across restarts).");
	fprintf(f, "wanopt_store_new_bytes_total %llu\n",
		(unsigned long long)atomic_load(&g[STATS_STORE_NEW_BYTES]));
	prom_head(f, "store_hit_ratio", "gauge", "Referenced / (referenced + stored anew) chunk bytes.");
	fprintf(f, "wanopt_store_hit_ratio %.4f\n", stats_hit_ratio(g, 0));
	prom_head(f, "store_larger_hit_ratio", "gauge",
		  "Estimated hit ratio with a store 2, 4 or 8 times as large (from evicted chunks that came back).");
	for (int i = 1; i <= 3; i++)
		fprintf(f, "wanopt_store_larger_hit_ratio{size=\"%dx\"} %.4f\n", 1 << i, stats_hit_ratio(g, i));
}

/* Gauges: streams, store, tunnel, uptime. */
static void prom_gauges(FILE *f, struct stats *s)
{
	_Atomic uint64_t *g = s->gauge;
#define G(i) (unsigned long long)atomic_load_explicit(&g[i], memory_order_relaxed)
	prom_head(f, "info", "gauge", "The role of this node.");
	fputs("wanopt_info{role=\"", f);
	stats_escape(f, s->role, 0);
	fputs("\"} 1\n", f);
	prom_head(f, "streams_opened_total", "counter", "Streams opened since start.");
	fprintf(f, "wanopt_streams_opened_total %llu\n", (unsigned long long)atomic_load(&s->opened));
	prom_head(f, "active_streams", "gauge", "Streams open now.");
	fprintf(f, "wanopt_active_streams %llu\n", (unsigned long long)stats_active(s));
	for (size_t i = 0; i < sizeof prom_plains / sizeof prom_plains[0]; i++) {
		const struct prom_plain *m = &prom_plains[i];
		prom_head(f, m->name, m->type, m->help);
		fprintf(f, "wanopt_%s %llu\n", m->name, G(m->gauge));
	}
	prom_sizing(f, g);
	prom_head(f, "tunnel_rtt_seconds", "gauge",
		  "Smoothed round-trip time of the tunnel (TCP_INFO; the smallest over its connections).");
	fprintf(f, "wanopt_tunnel_rtt_seconds %.6f\n", (double)G(STATS_TUNNEL_RTT_US) / 1e6);
	prom_tunnels(f, s);
	prom_head(f, "tunnels_up", "gauge", "Tunnel connections established.");
	fprintf(f, "wanopt_tunnels_up %llu\n", G(STATS_TUNNELS_UP));
	prom_head(f, "tls_cert_expiry_timestamp_seconds", "gauge",
		  "When this node's tunnel certificate expires (Unix time; as loaded at start or the last reload).");
	fprintf(f, "wanopt_tls_cert_expiry_timestamp_seconds %llu\n", G(STATS_TLS_NOT_AFTER));
	prom_head(f, "loop_lag_max_seconds", "gauge",
		  "Longest an event loop was held since start (a long callback, or not scheduled).");
	fprintf(f, "wanopt_loop_lag_max_seconds %.6f\n", (double)G(STATS_LOOP_LAG_MAX_US) / 1e6);
	prom_head(f, "loop_lag_seconds_total", "counter",
		  "Time event loops were held past their timers, summed over the loops (its rate: the share of the"
		  " time they were held).");
	fprintf(f, "wanopt_loop_lag_seconds_total %.6f\n", (double)G(STATS_LOOP_LAG_US) / 1e6);
	prom_head(f, "loop_holds_total", "counter",
		  "Times an event loop was held 500 ms or more (each logged; a tunnel gives up after 1 s without a"
		  " frame).");
	fprintf(f, "wanopt_loop_holds_total %llu\n", G(STATS_LOOP_HELD));
	prom_head(f, "lan_bulk_buffers", "gauge",
		  "LAN sockets holding the bulk receive buffer now (their sender outpaces the proxy).");
	fprintf(f, "wanopt_lan_bulk_buffers %llu\n", G(STATS_LAN_BULK));
	prom_head(f, "lan_bulk_buffers_total", "counter", "LAN sockets given the bulk receive buffer since start.");
	fprintf(f, "wanopt_lan_bulk_buffers_total %llu\n", G(STATS_LAN_BULK_GIVEN));
	prom_reads(f, s->gauge);
	prom_head(f, "uptime_seconds", "gauge", "Seconds since start.");
	fprintf(f, "wanopt_uptime_seconds %lld\n", (long long)(time(NULL) - s->started));
#undef G
}

/* Writes one per-stream sample with the stream's labels. */
static void prom_stream_sample(FILE *f, const struct stats_row *r, const char *name, double v,
			       int integer)
{
	fprintf(f, "wanopt_stream_%s{id=\"%llu\",src=\"", name, (unsigned long long)r->id);
	stats_escape(f, r->src, 0);
	fputs("\",dst=\"", f);
	stats_escape(f, r->dst, 0);
	fputs("\",mode=\"", f);
	stats_escape(f, r->mode, 0);
	if (r->cls[0]) /* unmarked streams have no class label (Prometheus: the same as "") */
		fprintf(f, "\",class=\"%s", r->cls);
	fprintf(f, integer ? "\"} %.0f\n" : "\"} %.3f\n", v);
}

/* Per-stream metric families. */
static void prom_streams(FILE *f, const struct stats_row *rows, size_t n)
{
	static const struct { const char *name, *help; } fam[] = {
		{ "lan_bytes", "Stream LAN bytes, both directions." },
		{ "wan_bytes", "Stream tunnel payload bytes, both directions." },
		{ "reduction_percent", "Stream 100 x (1 - WAN / LAN)." },
		{ "dre_hit_bytes", "Stream bytes that crossed as references, either direction." },
		{ "lz_ratio", "Stream LZ input / output." },
		{ "asks", "Stream frames asked for again." },
	};
	for (size_t k = 0; k < sizeof fam / sizeof fam[0]; k++) {
		fprintf(f, "# HELP wanopt_stream_%s %s\n# TYPE wanopt_stream_%s gauge\n",
			fam[k].name, fam[k].help, fam[k].name);
		for (size_t i = 0; i < n; i++) {
			const struct stats_snap *sn = &rows[i].sn;
			double v[] = { (double)snap_lan(sn), (double)snap_wan(sn),
				       stats_reduction(snap_lan(sn), snap_wan(sn)),
				       (double)sn->v[STATS_DRE_HIT],
				       stats_lz_ratio(sn->v[STATS_LZ_IN], sn->v[STATS_LZ_OUT]),
				       (double)sn->v[STATS_ASKS] };
			prom_stream_sample(f, &rows[i], fam[k].name, v[k], k != 2 && k != 4);
		}
	}
}

/* Opens a memory stream, runs fill, returns the string. */
static char *stats_to_string(struct stats *s, void (*fill)(FILE *, struct stats *))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fill(f, s);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* The full Prometheus page. */
static void prom_fill(FILE *f, struct stats *s)
{
	size_t n = 0;
	struct stats_row *rows = stats_rows(s, &n);

	prom_totals(f, s);
	prom_gauges(f, s);
	if (rows)
		prom_streams(f, rows, n);
	free(rows);
}

/* Prometheus text of the registry (malloc'd). */
char *stats_render_prom(struct stats *s)
{
	return stats_to_string(s, prom_fill);
}

/* The counters of a snapshot as JSON members (the first n), with the
 * derived figures. */
static void json_counters(FILE *f, const struct stats_snap *sn, int n)
{
	for (int i = 0; i < n; i++)
		fprintf(f, "\"%s\":%llu,", stats_ctr_key[i], (unsigned long long)sn->v[i]);
	fprintf(f, "\"reduction_pct\":%.2f,\"lz_ratio\":%.3f",
		stats_reduction(snap_lan(sn), snap_wan(sn)),
		stats_lz_ratio(sn->v[STATS_LZ_IN], sn->v[STATS_LZ_OUT]));
}

/* One stream object. */
static void json_stream(FILE *f, const struct stats_row *r, time_t now)
{
	fprintf(f, "{\"id\":%llu,\"src\":\"", (unsigned long long)r->id);
	stats_escape(f, r->src, 1);
	fputs("\",\"dst\":\"", f);
	stats_escape(f, r->dst, 1);
	fputs("\",\"mode\":\"", f);
	stats_escape(f, r->mode, 1);
	fprintf(f, "\",\"class\":\"%s\",\"age_s\":%lld,", r->cls, (long long)(now - r->opened));
	json_counters(f, &r->sn, STATS_WARM_FILE); /* a stream's own: no warm totals */
	fputc('}', f);
}

/* The tunnel peers as JSON objects (without the brackets). */
static void json_tunnels(FILE *f, struct stats *s)
{
	size_t n;
	struct stats_tunnel *t = stats_tunnels(s, &n);
	for (size_t i = 0; i < n && i < STATS_MAX_LISTED; i++) {
		fputs(i ? ",{\"peer\":\"" : "{\"peer\":\"", f);
		stats_escape(f, t[i].peer, 1);
		fprintf(f, "\",\"rtt_us\":%llu,\"link_bps\":%llu,\"pace_bps\":%llu,\"cert_not_after\":%llu}",
			(unsigned long long)t[i].rtt_us, (unsigned long long)t[i].link_bps,
			(unsigned long long)t[i].pace_bps, (unsigned long long)t[i].cert_not_after);
	}
	free(t);
}

/* The full JSON document. */
static void json_fill(FILE *f, struct stats *s)
{
	struct stats_snap t;
	size_t n = 0;
	struct stats_row *rows = stats_rows(s, &n);
	time_t now = time(NULL);
#define G(i) (unsigned long long)atomic_load_explicit(&s->gauge[i], memory_order_relaxed)

	stats_snap_load(&t, s->ctr);
	fputs("{\"role\":\"", f);
	stats_escape(f, s->role, 1);
	fprintf(f, "\",\"uptime_s\":%lld,\"total\":{", (long long)(now - s->started));
	json_counters(f, &t, STATS_NCTR);
	fprintf(f, ",\"streams_opened\":%llu,\"active_streams\":%llu},",
		(unsigned long long)atomic_load(&s->opened), (unsigned long long)stats_active(s));
	fprintf(f, "\"store\":{\"fill_bytes\":%llu,\"size_bytes\":%llu,\"room_bytes\":%llu,\"evictions\":%llu,"
		"\"hit_bytes\":%llu,\"new_bytes\":%llu,\"hit_ratio\":%.4f,"
		"\"larger_hit_ratio\":{\"2x\":%.4f,\"4x\":%.4f,\"8x\":%.4f},"
		"\"peers\":%llu,\"peers_held\":%llu,\"peers_untracked\":%llu,"
		"\"pins\":%llu,\"pinned_over_max\":%llu,\"pins_forced\":%llu,"
		"\"reads\":{\"way\":\"%s\",\"window_ns_per_mib\":%llu,\"map_ns_per_mib\":%llu,\"changes\":%llu}},",
		G(STATS_STORE_FILL), G(STATS_STORE_SIZE), G(STATS_STORE_ROOM), G(STATS_STORE_EVICTIONS),
		G(STATS_STORE_HIT_BYTES),
		G(STATS_STORE_NEW_BYTES), stats_hit_ratio(s->gauge, 0), stats_hit_ratio(s->gauge, 1),
		stats_hit_ratio(s->gauge, 2), stats_hit_ratio(s->gauge, 3), G(STATS_STORE_PEERS),
		G(STATS_STORE_PEERS_HELD), G(STATS_STORE_UNTRACKED), G(STATS_STORE_PINS), G(STATS_STORE_PIN_OVER),
		G(STATS_STORE_PIN_FORCED), G(STATS_STORE_READS_MAPPED) ? "map" : "window",
		G(STATS_STORE_READS_WINDOW_NS), G(STATS_STORE_READS_MAP_NS), G(STATS_STORE_READS_CHANGES));
	fprintf(f, "\"tunnel\":{\"rtt_us\":%llu,\"up\":%llu,\"cert_not_after\":%llu,\"peers\":[",
		G(STATS_TUNNEL_RTT_US), G(STATS_TUNNELS_UP), G(STATS_TLS_NOT_AFTER));
	json_tunnels(f, s);
	fprintf(f, "]},\"loop_lag_max_us\":%llu,\"loop_lag_us\":%llu,\"loop_holds\":%llu,\"lan_bulk_buffers\":{\"held\":%llu,\"given\":%llu},"
		"\"connections\":{\"direct\":%llu,\"refused\":%llu,\"handed_back\":%llu},\"streams\":[",
		G(STATS_LOOP_LAG_MAX_US), G(STATS_LOOP_LAG_US), G(STATS_LOOP_HELD), G(STATS_LAN_BULK),
		G(STATS_LAN_BULK_GIVEN), G(STATS_CONN_DIRECT),
		G(STATS_CONN_REFUSED), G(STATS_CONN_HANDED));
	for (size_t i = 0; rows && i < n; i++) {
		if (i)
			fputc(',', f);
		json_stream(f, &rows[i], now);
	}
	fputs("]}\n", f);
	free(rows);
#undef G
}

/* JSON document of the registry (malloc'd). */
char *stats_render_json(struct stats *s)
{
	return stats_to_string(s, json_fill);
}
