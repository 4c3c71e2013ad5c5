/* stats_render.c: the registry of stats.c rendered as Prometheus text (the
 * /metrics page) and as JSON (`wanopt stats --json`, /stats.json). */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stats.h"
#include "stats_int.h"

/* Counter names in JSON, indexed by enum stats_ctr. */
static const char *const stats_ctr_key[STATS_NCTR] = {
	"lan_in", "lan_out", "wan_in", "wan_out", "dre_hit_bytes", "lz_in", "lz_out", "asks",
	"warm_file_bytes", "warm_wan_bytes",
};

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
	{ "store_volatile", "gauge",
	  "1: the configured store could not be opened, and the node runs on a volatile store in memory"
	  " (empty at start, gone at exit) until restarted.",
	  STATS_STORE_VOLATILE },
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
	fprintf(f, "wanopt_reduction_percent %.2f\n", stats_reduction(stats_snap_lan(&t), stats_snap_wan(&t)));
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
			double v[] = { (double)stats_snap_lan(sn), (double)stats_snap_wan(sn),
				       stats_reduction(stats_snap_lan(sn), stats_snap_wan(sn)),
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
		stats_reduction(stats_snap_lan(sn), stats_snap_wan(sn)),
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
	fprintf(f, "\"store\":{\"fill_bytes\":%llu,\"size_bytes\":%llu,\"room_bytes\":%llu,\"volatile\":%llu,"
		"\"evictions\":%llu,\"hit_bytes\":%llu,\"new_bytes\":%llu,\"hit_ratio\":%.4f,"
		"\"larger_hit_ratio\":{\"2x\":%.4f,\"4x\":%.4f,\"8x\":%.4f},"
		"\"peers\":%llu,\"peers_held\":%llu,\"peers_untracked\":%llu,"
		"\"pins\":%llu,\"pinned_over_max\":%llu,\"pins_forced\":%llu,"
		"\"reads\":{\"way\":\"%s\",\"window_ns_per_mib\":%llu,\"map_ns_per_mib\":%llu,\"changes\":%llu}},",
		G(STATS_STORE_FILL), G(STATS_STORE_SIZE), G(STATS_STORE_ROOM), G(STATS_STORE_VOLATILE),
		G(STATS_STORE_EVICTIONS),
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
