/* stats_cli.c: `wanopt stats [--json] [--stats=HOST:PORT] [-c FILE]`: fetches
 * a running node's figures and prints them as a table (parsed from the
 * Prometheus page) or as the raw JSON document. */
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "conf.h"
#include "stats.h"

#define SCLI_DEFAULT_ADDR "127.0.0.1:9471"

/* One sample of /metrics with the labels the table uses. */
struct scli_sample {
	char name[64];
	char dir[8], role[16], id[24], src[96], dst[96], mode[16], cls[8], peer[64], size[8], way[8];
	double v;
};

/* Totals and per-stream rows gathered from the page. */
struct scli_row {
	char id[24], src[96], dst[96], mode[16], cls[8];
	double lan, wan, red, hit, lz;
};

struct scli_page {
	char role[16];
	double lan[2], wan[2], red, hit, lz, asks, opened, active;
	double fill, size, room, vol, evict, rtt, up, uptime, warm_file, warm_wan, lag, holds;
	double bulk, bulk_given; /* LAN sockets with the bulk receive buffer: now, since start */
	double direct, refused;  /* edge: connections not through the tunnel, since start */
	double handed;           /* ... of the direct ones, turned back by the core */
	double reads_mapped, read_cost[2]; /* how the store reads runs; per MiB through windows, mappings */
	double pins, pin_over, pin_forced; /* frames in flight keeping store files; most bytes over; forced */
	double hit_ratio, larger[3], new_bytes; /* the store's, and the estimate for 2x, 4x, 8x */
	double cert_exp; /* when the tunnel certificate expires (Unix time, 0: unknown) */
	struct { unsigned n; double at; char peer[64], last[64]; } peer_exp; /* peers' certificates within
								  STATS_CERT_WARN_DAYS (last: the
								  peer counted last, its class cut) */
	struct scli_row *rows;
	size_t nrows;
	struct { char peer[64]; double rtt, link, pace; } peers[8]; /* the first 8 tunnel peers */
	size_t npeers, morepeers;
};

#define SCLI_CERT_WARN (STATS_CERT_WARN_DAYS * 86400.0) /* seconds: certificates this close are mentioned */

/* Reads a quoted label value at *p (after the opening quote) into out. */
static int scli_label_value(const char **p, char *out, size_t len)
{
	size_t n = 0;
	const char *s = *p;

	for (; *s && *s != '"'; s++) {
		char c = *s;
		if (c == '\\' && s[1]) {
			c = *++s == 'n' ? '\n' : *s;
		}
		if (n + 1 < len)
			out[n++] = c;
	}
	out[n] = 0;
	if (*s != '"')
		return -1;
	*p = s + 1;
	return 0;
}

/* Parses `name{k="v",...} value`; 0 on success, -1 for comments/garbage. */
static int scli_parse_line(const char *line, struct scli_sample *sm)
{
	const char *p = line;
	size_t n = strcspn(p, "{ ");

	memset(sm, 0, sizeof *sm);
	if (line[0] == '#' || n == 0 || n >= sizeof sm->name)
		return -1;
	memcpy(sm->name, p, n);
	p += n;
	if (*p == '{') {
		for (p++; *p && *p != '}';) {
			char key[16], *dst = NULL;
			size_t kl = strcspn(p, "=");
			size_t cap = 0;
			if (kl >= sizeof key || p[kl] != '=' || p[kl + 1] != '"')
				return -1;
			memcpy(key, p, kl);
			key[kl] = 0;
			p += kl + 2;
			if (!strcmp(key, "dir")) dst = sm->dir, cap = sizeof sm->dir;
			else if (!strcmp(key, "role")) dst = sm->role, cap = sizeof sm->role;
			else if (!strcmp(key, "id")) dst = sm->id, cap = sizeof sm->id;
			else if (!strcmp(key, "src")) dst = sm->src, cap = sizeof sm->src;
			else if (!strcmp(key, "dst")) dst = sm->dst, cap = sizeof sm->dst;
			else if (!strcmp(key, "mode")) dst = sm->mode, cap = sizeof sm->mode;
			else if (!strcmp(key, "class")) dst = sm->cls, cap = sizeof sm->cls;
			else if (!strcmp(key, "peer")) dst = sm->peer, cap = sizeof sm->peer;
			else if (!strcmp(key, "size")) dst = sm->size, cap = sizeof sm->size;
			else if (!strcmp(key, "way")) dst = sm->way, cap = sizeof sm->way;
			char skip[256];
			if (scli_label_value(&p, dst ? dst : skip, dst ? cap : sizeof skip) < 0)
				return -1;
			if (*p == ',')
				p++;
		}
		if (*p++ != '}')
			return -1;
	}
	return sscanf(p, " %lf", &sm->v) == 1 ? 0 : -1;
}

/* The row for a stream id, appended when new. */
static struct scli_row *scli_row(struct scli_page *pg, const struct scli_sample *sm)
{
	for (size_t i = 0; i < pg->nrows; i++)
		if (!strcmp(pg->rows[i].id, sm->id))
			return &pg->rows[i];
	struct scli_row *nr = realloc(pg->rows, (pg->nrows + 1) * sizeof *nr);
	if (!nr)
		return NULL;
	pg->rows = nr;
	struct scli_row *r = &pg->rows[pg->nrows++];
	memset(r, 0, sizeof *r);
	snprintf(r->id, sizeof r->id, "%s", sm->id);
	snprintf(r->src, sizeof r->src, "%s", sm->src);
	snprintf(r->dst, sizeof r->dst, "%s", sm->dst);
	snprintf(r->mode, sizeof r->mode, "%s", sm->mode);
	snprintf(r->cls, sizeof r->cls, "%s", sm->cls);
	return r;
}

/* Files one per-stream sample into its row. */
static void scli_stream_sample(struct scli_page *pg, const struct scli_sample *sm)
{
	struct scli_row *r = scli_row(pg, sm);
	const char *n = sm->name + strlen("wanopt_stream_");

	if (!r)
		return;
	if (!strcmp(n, "lan_bytes")) r->lan = sm->v;
	else if (!strcmp(n, "wan_bytes")) r->wan = sm->v;
	else if (!strcmp(n, "reduction_percent")) r->red = sm->v;
	else if (!strcmp(n, "dre_hit_bytes")) r->hit = sm->v;
	else if (!strcmp(n, "lz_ratio")) r->lz = sm->v;
}

/* A peer certificate expiring soon: counted once per peer (its connections
 * of each class come together, the peer's name first), the earliest kept. */
static void scli_peer_exp(struct scli_page *pg, const struct scli_sample *sm)
{
	const char *cls = strstr(sm->peer, " class ");
	char base[64];
	snprintf(base, sizeof base, "%.*s", cls ? (int)(cls - sm->peer) : (int)strlen(sm->peer), sm->peer);
	int same = pg->peer_exp.n && !strcmp(base, pg->peer_exp.last);
	snprintf(pg->peer_exp.last, sizeof pg->peer_exp.last, "%s", base);
	if (!same)
		pg->peer_exp.n++;
	if ((pg->peer_exp.n == 1 && !same) || sm->v < pg->peer_exp.at) {
		pg->peer_exp.at = sm->v;
		snprintf(pg->peer_exp.peer, sizeof pg->peer_exp.peer, "%s", sm->peer);
	}
}

/* Files one node-wide sample. */
static void scli_total_sample(struct scli_page *pg, const struct scli_sample *sm)
{
	static const struct { const char *name; size_t off; } map[] = {
#define M(n, f) { "wanopt_" n, offsetof(struct scli_page, f) }
		M("reduction_percent", red), M("dre_hit_bytes_total", hit), M("lz_ratio", lz),
		M("asks_total", asks), M("streams_opened_total", opened), M("active_streams", active),
		M("store_fill_bytes", fill), M("store_size_bytes", size), M("store_room_bytes", room),
		M("store_volatile", vol),
		M("store_evictions_total", evict), M("tunnel_rtt_seconds", rtt),
		M("tunnels_up", up), M("uptime_seconds", uptime),
		M("warm_file_bytes_total", warm_file), M("warm_wan_bytes_total", warm_wan),
		M("store_hit_ratio", hit_ratio), M("store_new_bytes_total", new_bytes),
		M("loop_lag_max_seconds", lag), M("loop_holds_total", holds), M("lan_bulk_buffers", bulk),
		M("lan_bulk_buffers_total", bulk_given), M("store_reads_mapped", reads_mapped),
		M("tls_cert_expiry_timestamp_seconds", cert_exp), M("store_pins", pins),
		M("store_pinned_over_max_bytes", pin_over), M("store_pins_forced_total", pin_forced),
		M("direct_connections_total", direct), M("refused_connections_total", refused),
		M("handed_back_connections_total", handed),
#undef M
	};
	int out = !strcmp(sm->dir, "out");

	if (!strcmp(sm->name, "wanopt_lan_bytes_total"))
		pg->lan[out] = sm->v;
	else if (!strcmp(sm->name, "wanopt_wan_bytes_total"))
		pg->wan[out] = sm->v;
	else if (!strcmp(sm->name, "wanopt_info"))
		snprintf(pg->role, sizeof pg->role, "%s", sm->role);
	else if (!strcmp(sm->name, "wanopt_tunnel_peer_rtt_seconds") && pg->npeers < 8) {
		snprintf(pg->peers[pg->npeers].peer, sizeof pg->peers[0].peer, "%s", sm->peer);
		pg->peers[pg->npeers++].rtt = sm->v;
	} else if (!strcmp(sm->name, "wanopt_tunnel_peer_rtt_seconds")) {
		pg->morepeers++;
	} else if (!strcmp(sm->name, "wanopt_tunnel_peer_link_bits_per_second") ||
		   !strcmp(sm->name, "wanopt_tunnel_peer_pace_bits_per_second")) {
		int pace = strstr(sm->name, "_pace_") != NULL;
		for (size_t i = 0; i < pg->npeers; i++)
			if (!strncmp(pg->peers[i].peer, sm->peer, sizeof pg->peers[i].peer - 1)) /* kept as cut */
				*(pace ? &pg->peers[i].pace : &pg->peers[i].link) = sm->v;
	} else if (!strcmp(sm->name, "wanopt_tunnel_peer_cert_expiry_timestamp_seconds") && sm->v > 0 &&
		   sm->v - (double)time(NULL) < SCLI_CERT_WARN) {
		scli_peer_exp(pg, sm);
	} else if (!strcmp(sm->name, "wanopt_store_read_seconds_per_mib")) {
		pg->read_cost[!strcmp(sm->way, "map")] = sm->v;
	} else if (!strcmp(sm->name, "wanopt_store_larger_hit_ratio")) {
		int i = !strcmp(sm->size, "2x") ? 0 : !strcmp(sm->size, "4x") ? 1 : !strcmp(sm->size, "8x") ? 2 : -1;
		if (i >= 0)
			pg->larger[i] = sm->v;
	}
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (!strcmp(sm->name, map[i].name))
			*(double *)(void *)((char *)pg + map[i].off) = sm->v;
}

/* Parses a whole /metrics page. */
static void scli_parse(char *text, struct scli_page *pg)
{
	struct scli_sample sm;
	char *save = NULL;

	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (scli_parse_line(line, &sm) < 0)
			continue;
		if (!strncmp(sm.name, "wanopt_stream_", 14))
			scli_stream_sample(pg, &sm);
		else
			scli_total_sample(pg, &sm);
	}
}

/* Traffic bytes, decimal units. */
static const char *scli_bytes(double v, char *buf, size_t len)
{
	return stats_bytes_str(v, 0, buf, len);
}

/* Prints the table. */
static void scli_print(const struct scli_page *pg, const char *addr)
{
	char a[16], b[16], c[16], d[16];
	long up = (long)pg->uptime;

	char rtt[32] = "-"; /* none measured while the tunnel is down */
	if (pg->up > 0 || pg->rtt > 0)
		snprintf(rtt, sizeof rtt, "%.1f ms", pg->rtt * 1000);
	printf("wanopt %s at %s: up %ldh%02ldm%02lds, %s, tunnel RTT %s\n", pg->role[0] ? pg->role : "?", addr,
	       up / 3600, up / 60 % 60, up % 60, pg->up > 0 ? "tunnel up" : "tunnel down", rtt);
	int links = 0;
	for (size_t i = 0; i < pg->npeers; i++)
		links |= pg->peers[i].link > 0;
	for (size_t i = 0; (pg->npeers > 1 || links) && i < pg->npeers; i++) {
		char link[64] = "";
		if (pg->peers[i].link > 0)
			snprintf(link, sizeof link, ", sending at %.4g Mbit/s", pg->peers[i].link / 1e6);
		if (pg->peers[i].link > 0 && pg->peers[i].pace > 0)
			snprintf(link + strlen(link), sizeof link - strlen(link), " (paced at %.4g)", pg->peers[i].pace / 1e6);
		printf("%s%s %.1f ms%s%s", i ? "; " : "tunnel peers: ", pg->peers[i].peer, pg->peers[i].rtt * 1000,
		       link, i + 1 < pg->npeers ? "" : pg->morepeers ? "; ...\n" : "\n");
	}
	printf("store %s of %s (%.1f %%), %.0f evictions; streams %.0f active, %.0f opened\n",
	       stats_bytes_str(pg->fill, 1, a, sizeof a), stats_bytes_str(pg->size, 1, b, sizeof b),
	       pg->size > 0 ? 100 * pg->fill / pg->size : 0.0, pg->evict, pg->active, pg->opened);
	if (pg->vol > 0)
		printf("store VOLATILE: the configured store could not be opened (see the log): a store in memory,"
		       " empty at start and gone at exit, stands in until the node is restarted\n");
	if (pg->room > 0) /* the file system leaves the store less than its size */
		printf("store kept to %s: all its file system leaves it now (it grows back as space frees up)\n",
		       stats_bytes_str(pg->room, 1, a, sizeof a));
	if (pg->new_bytes > 0) /* nothing stored yet: no ratio to speak of */
		printf("store hit ratio %.1f %%; a store 2x / 4x / 8x as large: %.1f / %.1f / %.1f %% (estimated)\n",
		       100 * pg->hit_ratio, 100 * pg->larger[0], 100 * pg->larger[1], 100 * pg->larger[2]);
	if (pg->pin_over > 0) /* the store went past its size for frames in flight */
		printf("store pins: %.0f now (frames in flight keeping data files); the most they kept it over its"
		       " size: %s; pinned files evicted all the same: %.0f\n", pg->pins,
		       stats_bytes_str(pg->pin_over, 1, a, sizeof a), pg->pin_forced);
	if (pg->lag >= 0.1) /* shorter holds are routine; a tunnel gives up after 1 s without a frame */
		printf("longest event loop stall since start: %.0f ms (%.0f of 500 ms or more)\n", pg->lag * 1000,
		       pg->holds);
	if (pg->read_cost[0] > 0 || pg->read_cost[1] > 0) /* timed by the store (dre/rtune.c) */
		printf("store reads runs %s: %.0f us per MiB through 128 KiB preads, %.0f through the mapping"
		       " (timed on its own reads)\n", pg->reads_mapped > 0 ? "through its mapping" : "through 128 KiB preads",
		       pg->read_cost[0] * 1e6, pg->read_cost[1] * 1e6);
	double left = pg->cert_exp > 0 ? pg->cert_exp - (double)time(NULL) : 1e18;
	if (left < SCLI_CERT_WARN) /* node_tls.c warns in the log from then on too */
		printf(left > 0 ? "tunnel certificate expires in %.0f days: renew it, then reload\n"
				: "tunnel certificate EXPIRED %.0f days ago: new tunnel connections fail\n",
		       fabs(left) / 86400);
	double first = pg->peer_exp.at - (double)time(NULL);
	if (pg->peer_exp.n) /* the peers' own logs say so too */
		printf("%u tunnel peer(s) with a certificate expiring within %d days; the first: %s, %s %.0f days\n",
		       pg->peer_exp.n, STATS_CERT_WARN_DAYS, pg->peer_exp.peer, first > 0 ? "in" : "EXPIRED", fabs(first) / 86400);
	if (pg->direct > 0 || pg->refused > 0) /* passthrough, or the tunnel was down */
		printf("connections not through the tunnel since start: %.0f direct (%.0f turned back by the core),"
		       " %.0f refused\n", pg->direct, pg->handed, pg->refused);
	if (pg->bulk_given > 0) /* LAN senders faster than us (lanbuf.c) */
		printf("bulk LAN receive buffers: %.0f held now, %.0f given since start\n", pg->bulk, pg->bulk_given);
	putchar('\n');
	printf("%-8s %12s %12s %10s %12s %9s %6s\n", "", "LAN", "WAN", "reduction", "DRE hits",
	       "LZ ratio", "asks");
	char lz[16] = "-"; /* nothing compressed yet: no ratio, as in the close lines */
	if (pg->lz > 0)
		snprintf(lz, sizeof lz, "%.2fx", pg->lz);
	printf("%-8s %12s %12s %8.1f %% %12s %9s %6.0f\n\n", "total",
	       scli_bytes(pg->lan[0] + pg->lan[1], a, sizeof a),
	       scli_bytes(pg->wan[0] + pg->wan[1], b, sizeof b), pg->red,
	       scli_bytes(pg->hit, c, sizeof c), lz, pg->asks);
	if (pg->warm_file > 0 || pg->warm_wan > 0) /* not in the totals above */
		printf("pre-positioning (wanopt warm): %s of files pushed from here, %s WAN\n\n",
		       scli_bytes(pg->warm_file, a, sizeof a), scli_bytes(pg->warm_wan, b, sizeof b));
	if (!pg->nrows)
		return;
	int cls = 0; /* a CLASS column when any stream has one */
	for (size_t i = 0; i < pg->nrows; i++)
		cls |= pg->rows[i].cls[0] != 0;
	printf("%6s  %-46s %-11s%s%10s %10s %7s %10s\n", "ID", "SOURCE -> DESTINATION", "MODE",
	       cls ? " CLASS  " : " ", "LAN", "WAN", "RED %", "DRE hits");
	for (size_t i = 0; i < pg->nrows; i++) {
		const struct scli_row *r = &pg->rows[i];
		char path[200], cl[16] = " ";
		snprintf(path, sizeof path, "%s -> %s", r->src, r->dst);
		if (cls)
			snprintf(cl, sizeof cl, " %-6s ", r->cls[0] ? r->cls : "-");
		printf("%6s  %-46s %-11s%s%10s %10s %7.1f %10s\n", r->id, path, r->mode, cl,
		       scli_bytes(r->lan, a, sizeof a), scli_bytes(r->wan, b, sizeof b), r->red,
		       scli_bytes(r->hit, d, sizeof d));
	}
}

/* The --help text. */
static void scli_usage(FILE *f)
{
	fprintf(f,
		"usage: wanopt stats [--json] [--stats=HOST:PORT | -c FILE]\n\n"
		"Shows the figures of a running edge or core: LAN and WAN bytes, reduction,\n"
		"DRE hits, LZ ratio, asks, store fill and evictions, the store's hit ratio and\n"
		"an estimate of it with a store 2, 4 and 8 times as large, tunnel RTT (each\n"
		"peer's when there are several), pre-positioning (wanopt warm, counted apart\n"
		"from the clients' traffic), and every open stream.  The address is --stats, else the\n"
		"`stats` key of the config FILE, else " SCLI_DEFAULT_ADDR ".  The same data is\n"
		"served for monitoring at http://HOST:PORT/metrics (Prometheus) and\n"
		"/stats.json.\n\n"
		"  --json            print the JSON document instead of the table\n"
		"  --stats=HOST:PORT the node's stats address\n"
		"  -c FILE           read the address from an edge or core config file\n");
}

/* The `stats` address of an edge or core config file into a. */
static int scli_addr_from_conf(const char *path, struct conf_addr *a)
{
	char err[1024], *argv[] = { "stats", "-c", (char *)path };
	struct conf *c = conf_from_args(CONF_EDGE, 3, argv, err, sizeof err);

	if (!c)
		c = conf_from_args(CONF_CORE, 3, argv, err, sizeof err);
	if (!c || !conf_stats(c)) {
		fprintf(stderr, "wanopt stats: %s\n", c ? "no 'stats' key in the config" : err);
		conf_free(c);
		return -1;
	}
	*a = *conf_stats(c);
	conf_free(c);
	return 0;
}

/* Options into a and json; 0, 2 on usage error, -1 for --help (done). */
static int scli_opts(int argc, char **argv, struct conf_addr *a, int *json)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' }, { "stats", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	const char *e;
	int o;

	conf_addr_parse(SCLI_DEFAULT_ADDR, a);
	while ((o = getopt_long(argc, argv, "c:h", lo, NULL)) != -1) {
		switch (o) {
		case 'j': *json = 1; break;
		case 's':
			if ((e = conf_addr_parse(optarg, a))) {
				fprintf(stderr, "wanopt stats: --stats=%s: %s\n", optarg, e);
				return 2;
			}
			break;
		case 'c':
			if (scli_addr_from_conf(optarg, a) < 0)
				return 2;
			break;
		case 'h': scli_usage(stdout); return -1;
		default: scli_usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "wanopt stats: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	return 0;
}

/* `wanopt stats`: 0 printed, 1 node unreachable, 2 usage error. */
int px_cmd_stats(int argc, char **argv)
{
	struct conf_addr a;
	struct scli_page pg = { .rows = NULL };
	char err[512], as[CONF_HOST_MAX + 16], *body = NULL;
	int json = 0, rc = scli_opts(argc, argv, &a, &json);

	if (rc)
		return rc < 0 ? 0 : rc;
	conf_addr_format(&a, as, sizeof as);
	if (stats_fetch(a.host, a.port, json ? "/stats.json" : "/metrics", 5000, &body,
			err, sizeof err) < 0) {
		fprintf(stderr, "wanopt stats: %s: %s%s\n", as, err,
			strcmp(as, SCLI_DEFAULT_ADDR) ? ""
						       : "\n(the default address, the example edge.conf's `stats`; a daemon"
							 " serves stats only where its `stats` key says: -c FILE or"
							 " --stats=HOST:PORT)");
		return 1;
	}
	if (json) {
		fputs(body, stdout);
	} else {
		scli_parse(body, &pg);
		scli_print(&pg, as);
		free(pg.rows);
	}
	free(body);
	return 0;
}
