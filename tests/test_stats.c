/* test_stats.c: the counter registry, its Prometheus and JSON renderings, the
 * HTTP server on a real libevent loop, and `wanopt stats` against it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <cmocka.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "../proxy/cmd.h"
#include "stats.h"
#include "test_netns.h"

/* Fills a registry with two streams of known figures. */
static struct stats *sample_registry(struct stats_stream **a, struct stats_stream **b)
{
	struct stats *s = stats_create("edge");
	assert_non_null(s);
	*a = stats_stream_open(s, "10.0.0.5:41000", "10.1.1.1:21", "full");
	*b = stats_stream_open(s, "[fd00::5]:5000", "[fd01::1]:443", "tfo");
	stats_stream_add(*a, STATS_LAN_IN, 1000);
	stats_stream_add(*a, STATS_LAN_OUT, 999000);
	stats_stream_add(*a, STATS_WAN_IN, 10000);
	stats_stream_add(*a, STATS_WAN_OUT, 40000);
	stats_stream_add(*a, STATS_DRE_HIT, 900000);
	stats_stream_add(*a, STATS_LZ_IN, 90000);
	stats_stream_add(*a, STATS_LZ_OUT, 30000);
	stats_stream_add(*a, STATS_ASKS, 2);
	stats_stream_add(*b, STATS_LAN_IN, 5000);
	stats_stream_add(*b, STATS_WAN_OUT, 5000);
	stats_set(s, STATS_STORE_FILL, 1u << 30);
	stats_set(s, STATS_STORE_SIZE, 10ull << 30);
	stats_set(s, STATS_STORE_EVICTIONS, 7);
	stats_set(s, STATS_STORE_PEERS, 3);
	stats_set(s, STATS_STORE_PEERS_HELD, 1);
	stats_set(s, STATS_STORE_UNTRACKED, 4);
	stats_set(s, STATS_STORE_PINS, 5);
	stats_set(s, STATS_STORE_PIN_OVER, 3000000);
	stats_set(s, STATS_STORE_PIN_FORCED, 1);
	stats_set(s, STATS_STORE_ROOM, 8000000000);
	stats_set(s, STATS_STORE_VOLATILE, 1);
	stats_set(s, STATS_STORE_HIT_BYTES, 600);
	stats_set(s, STATS_STORE_NEW_BYTES, 400);
	stats_set(s, STATS_STORE_LARGER_2X, 100);
	stats_set(s, STATS_STORE_LARGER_4X, 200);
	stats_set(s, STATS_STORE_LARGER_8X, 250);
	stats_set(s, STATS_TUNNEL_RTT_US, 40100);
	stats_set(s, STATS_TUNNELS_UP, 1);
	stats_set(s, STATS_TLS_NOT_AFTER, 2112345678);
	stats_max(s, STATS_LOOP_LAG_MAX_US, 5000);
	stats_max(s, STATS_LOOP_LAG_MAX_US, 120);   /* lower: the gauge keeps 5000 */
	stats_max(s, STATS_LOOP_LAG_MAX_US, 12500);
	stats_max(s, STATS_LOOP_LAG_MAX_US, 7000);
	stats_add(s, STATS_LOOP_LAG_US, 1000000); /* counts, as lag.c adds them */
	stats_add(s, STATS_LOOP_LAG_US, 250000);
	stats_add(s, STATS_LOOP_HELD, 1);
	stats_add(s, STATS_LOOP_HELD, 1);
	for (int i = 0; i < 3; i++) { /* three given the bulk buffer, one gave it back */
		stats_add(s, STATS_LAN_BULK, 1);
		stats_add(s, STATS_LAN_BULK_GIVEN, 1);
	}
	stats_add(s, STATS_LAN_BULK, -1);
	stats_add(NULL, STATS_LAN_BULK, 1); /* no registry: nothing */
	stats_set(s, STATS_STORE_READS_WINDOW_NS, 151000);
	stats_set(s, STATS_STORE_READS_MAP_NS, 186000);
	stats_set(s, STATS_STORE_READS_CHANGES, 1);
	return s;
}

/* Counters per stream and total; closing keeps the totals. */
static void test_counters(void **state)
{
	struct stats_stream *a, *b;
	char buf[256];
	struct stats *s = sample_registry(&a, &b);
	assert_int_equal(stats_stream_id(a), 1);
	assert_int_equal(stats_stream_id(b), 2);
	assert_int_equal(stats_stream_get(a, STATS_LAN_OUT), 999000);
	assert_int_equal(stats_total(s, STATS_LAN_IN), 6000);
	assert_int_equal(stats_total(s, STATS_WAN_OUT), 45000);
	assert_int_equal(stats_active(s), 2);
	assert_string_equal(stats_stream_summary(a, buf, sizeof buf),
			    "lan 1.0 MB wan 50.0 KB (95.0 % less) dre hits 900.0 KB lz 3.00x asks 2");
	stats_stream_close(b);
	assert_int_equal(stats_active(s), 1);
	assert_int_equal(stats_total(s, STATS_WAN_OUT), 45000);
	stats_stream_add(NULL, STATS_LAN_IN, 5);
	stats_stream_close(NULL);
	assert_true(stats_reduction(0, 10) == 0);
	assert_true(stats_reduction(100, 25) == 75);
	stats_free(s); /* closes a */
	stats_free(NULL);
}

struct adder {
	struct stats *s;
	int n;
};

/* Opens, counts into and closes streams from a thread. */
static void *adder_main(void *arg)
{
	struct adder *ad = arg;
	for (int i = 0; i < ad->n; i++) {
		struct stats_stream *st = stats_stream_open(ad->s, "a", "b", "full");
		for (int k = 0; k < 10; k++)
			stats_stream_add(st, STATS_LAN_IN, 3);
		stats_stream_close(st);
	}
	return NULL;
}

/* Concurrent updates from several threads add up exactly. */
static void test_threads(void **state)
{
	struct stats *s = stats_create("core");
	pthread_t t[4];
	struct adder ad = { s, 2000 };
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, adder_main, &ad);
	for (int i = 0; i < 4; i++) {
		char *p = stats_render_prom(s); /* rendering while streams come and go */
		free(p);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(stats_total(s, STATS_LAN_IN), 4 * 2000 * 30);
	assert_int_equal(stats_active(s), 0);
	stats_free(s);
}

/* Tunnel peers: every publisher's connections, one line per peer (the
 * smallest known RTT, the sum of the pacing caps, the earliest certificate
 * expiry), sorted; a publisher's new list replaces its old one. */
static void test_tunnel_peers(void **state)
{
	struct stats *s = stats_create("core");
	struct stats_tunnel w0[] = { { "10.0.2.1:40000", 300000, 0, 0, 0 },
				     { "10.0.1.1:40000", 0, 1544000, 733400, 2000000300 } };
	struct stats_tunnel w1[] = { { "10.0.1.1:40000", 40100, 0, 733400, 2000000100 },
				     { "[fd00::3]:40000", 90000, 0, 0, 0 } };
	struct stats_tunnel gone[] = { { "10.9.9.9:1", 1, 0, 0, 0 } };
	assert_int_equal(stats_tunnels_set(s, 0, w0, 2), 0);
	assert_int_equal(stats_tunnels_set(s, 1, gone, 1), 0);
	assert_int_equal(stats_tunnels_set(s, 1, w1, 2), 0);
	assert_int_equal(stats_tunnels_set(s, STATS_TUNNEL_SLOTS, w1, 2), -1);
	char *p = stats_render_prom(s);
	const char *want = "wanopt_tunnel_peer_rtt_seconds{peer=\"10.0.1.1:40000\"} 0.040100\n"
			   "wanopt_tunnel_peer_rtt_seconds{peer=\"10.0.2.1:40000\"} 0.300000\n"
			   "wanopt_tunnel_peer_rtt_seconds{peer=\"[fd00::3]:40000\"} 0.090000\n";
	/* the link: known for one peer (from either of its connections) */
	const char *link = "wanopt_tunnel_peer_link_bits_per_second{peer=\"10.0.1.1:40000\"} 1544000\n";
	/* two connections sharing 95 % of it */
	const char *pace = "wanopt_tunnel_peer_pace_bits_per_second{peer=\"10.0.1.1:40000\"} 1466800\n";
	/* the earlier of its two connections' certificates; unknown elsewhere: absent */
	const char *cert = "wanopt_tunnel_peer_cert_expiry_timestamp_seconds{peer=\"10.0.1.1:40000\"} 2000000100\n";
	if (!strstr(p, want) || !strstr(p, link) || !strstr(p, pace) || !strstr(p, cert) || strstr(p, "10.9.9.9") ||
	    strstr(p, "pace_bits_per_second{peer=\"10.0.2.1") || strstr(p, "expiry_timestamp_seconds{peer=\"10.0.2.1"))
		fail_msg("tunnel peers in /metrics:\n%s", p);
	free(p);
	p = stats_render_json(s);
	assert_non_null(strstr(p, "\"peers\":[{\"peer\":\"10.0.1.1:40000\",\"rtt_us\":40100,\"link_bps\":1544000,"
				  "\"pace_bps\":1466800,\"cert_not_after\":2000000100},"
				  "{\"peer\":\"10.0.2.1:40000\",\"rtt_us\":300000,\"link_bps\":0,\"pace_bps\":0,"
				  "\"cert_not_after\":0},"
				  "{\"peer\":\"[fd00::3]:40000\",\"rtt_us\":90000,\"link_bps\":0,\"pace_bps\":0,"
				  "\"cert_not_after\":0}]"));
	free(p);
	assert_int_equal(stats_tunnels_set(s, 0, NULL, 0), 0);
	assert_int_equal(stats_tunnels_set(s, 1, NULL, 0), 0);
	p = stats_render_prom(s);
	assert_null(strstr(p, "tunnel_peer_rtt"));
	free(p);
	stats_free(s);
}

/* A warm push's bytes go to the warm totals only; the stream shows as "warm"
 * with its own counters. */
static void test_warm_stream(void **state)
{
	struct stats *s = stats_create("core");
	struct stats_stream *c = stats_stream_open(s, "10.0.0.5:41000", "10.1.1.1:21", "full");
	struct stats_stream *w = stats_stream_open(s, "warm", "/srv/image", "full");
	stats_stream_set_warm(w);
	stats_stream_add(c, STATS_LAN_IN, 1000);
	stats_stream_add(c, STATS_WAN_OUT, 100);
	stats_stream_add(w, STATS_LAN_IN, 5000);
	stats_stream_add(w, STATS_WAN_OUT, 700);
	stats_stream_add(w, STATS_WAN_IN, 20);
	stats_stream_add(w, STATS_DRE_HIT, 4000);
	stats_stream_add(w, STATS_LZ_IN, 1000);
	stats_stream_add(w, STATS_ASKS, 1);
	assert_int_equal(stats_total(s, STATS_LAN_IN), 1000);
	assert_int_equal(stats_total(s, STATS_WAN_OUT), 100);
	assert_int_equal(stats_total(s, STATS_WAN_IN), 0);
	assert_int_equal(stats_total(s, STATS_DRE_HIT), 0);
	assert_int_equal(stats_total(s, STATS_LZ_IN), 0);
	assert_int_equal(stats_total(s, STATS_ASKS), 1);
	assert_int_equal(stats_total(s, STATS_WARM_FILE), 5000);
	assert_int_equal(stats_total(s, STATS_WARM_WAN), 720);
	assert_int_equal(stats_stream_get(w, STATS_LAN_IN), 5000);
	char *p = stats_render_prom(s);
	if (!strstr(p, "wanopt_reduction_percent 90.00\n") || !strstr(p, "wanopt_warm_file_bytes_total 5000\n") ||
	    !strstr(p, "wanopt_warm_wan_bytes_total 720\n") ||
	    !strstr(p, "wanopt_stream_lan_bytes{id=\"2\",src=\"warm\",dst=\"/srv/image\",mode=\"warm\"} 5000\n"))
		fail_msg("warm push in /metrics:\n%s", p);
	free(p);
	stats_stream_close(c);
	stats_stream_close(w);
	stats_free(s);
}

/* Prometheus text: totals, gauges and per-stream samples with labels. */
static void test_render(void **state)
{
	struct stats_stream *a, *b;
	struct stats *s = sample_registry(&a, &b);
	stats_stream_set_class(b, "af41");
	char *p = stats_render_prom(s);
	static const char *const want[] = {
		"# TYPE wanopt_lan_bytes_total counter\n",
		"wanopt_lan_bytes_total{dir=\"in\"} 6000\n",
		"wanopt_lan_bytes_total{dir=\"out\"} 999000\n",
		"wanopt_wan_bytes_total{dir=\"out\"} 45000\n",
		"wanopt_reduction_percent 94.53\n",
		"wanopt_dre_hit_bytes_total 900000\n",
		"wanopt_lz_ratio 3.000\n",
		"wanopt_asks_total 2\n",
		"wanopt_info{role=\"edge\"} 1\n",
		"wanopt_active_streams 2\n",
		"wanopt_store_fill_bytes 1073741824\n",
		"wanopt_store_evictions_total 7\n",
		"wanopt_store_peers 3\n",
		"wanopt_store_peers_untracked_total 4\n",
		"wanopt_store_pins 5\n",
		"wanopt_store_pinned_over_max_bytes 3000000\n",
		"# TYPE wanopt_store_pins_forced_total counter\n",
		"wanopt_store_pins_forced_total 1\n",
		"# TYPE wanopt_store_room_bytes gauge\n",
		"wanopt_store_room_bytes 8000000000\n",
		"# TYPE wanopt_store_volatile gauge\n",
		"wanopt_store_volatile 1\n",
		"wanopt_store_reference_bytes_total 600\n",
		"wanopt_store_new_bytes_total 400\n",
		"wanopt_store_hit_ratio 0.6000\n",
		"wanopt_store_larger_hit_ratio{size=\"2x\"} 0.7000\n",
		"wanopt_store_larger_hit_ratio{size=\"8x\"} 0.8500\n",
		"wanopt_tunnel_rtt_seconds 0.040100\n",
		"# TYPE wanopt_tls_cert_expiry_timestamp_seconds gauge\n",
		"wanopt_tls_cert_expiry_timestamp_seconds 2112345678\n",
		"wanopt_loop_lag_max_seconds 0.012500\n",
		"# TYPE wanopt_loop_lag_seconds_total counter\n",
		"wanopt_loop_lag_seconds_total 1.250000\n",
		"# TYPE wanopt_loop_holds_total counter\n",
		"wanopt_loop_holds_total 2\n",
		"# TYPE wanopt_lan_bulk_buffers gauge\n",
		"wanopt_lan_bulk_buffers 2\n",
		"# TYPE wanopt_lan_bulk_buffers_total counter\n",
		"wanopt_lan_bulk_buffers_total 3\n",
		"# TYPE wanopt_store_reads_mapped gauge\n",
		"wanopt_store_reads_mapped 0\n",
		"wanopt_store_read_seconds_per_mib{way=\"window\"} 0.000151\n",
		"wanopt_store_read_seconds_per_mib{way=\"map\"} 0.000186\n",
		"# TYPE wanopt_store_read_way_changes_total counter\n",
		"wanopt_store_read_way_changes_total 1\n",
		"wanopt_stream_lan_bytes{id=\"1\",src=\"10.0.0.5:41000\",dst=\"10.1.1.1:21\",mode=\"full\"} 1000000\n",
		"wanopt_stream_reduction_percent{id=\"2\",src=\"[fd00::5]:5000\",dst=\"[fd01::1]:443\",mode=\"tfo\",class=\"af41\"} 0.000\n",
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		if (!strstr(p, want[i]))
			fail_msg("missing from /metrics: %s\n%s", want[i], p);
	free(p);
	p = stats_render_json(s);
	assert_non_null(strstr(p, "{\"role\":\"edge\",\"uptime_s\":"));
	assert_non_null(strstr(p, "\"total\":{\"lan_in\":6000,\"lan_out\":999000,\"wan_in\":10000,"
				  "\"wan_out\":45000,\"dre_hit_bytes\":900000,\"lz_in\":90000,"
				  "\"lz_out\":30000,\"asks\":2,\"warm_file_bytes\":0,\"warm_wan_bytes\":0,"
				  "\"reduction_pct\":94.53,\"lz_ratio\":3.000,"
				  "\"streams_opened\":2,\"active_streams\":2}"));
	assert_non_null(strstr(p, "\"store\":{\"fill_bytes\":1073741824,\"size_bytes\":10737418240,\"room_bytes\":8000000000,\"volatile\":1,"
				  "\"evictions\":7,\"hit_bytes\":600,\"new_bytes\":400,\"hit_ratio\":0.6000,"
				  "\"larger_hit_ratio\":{\"2x\":0.7000,\"4x\":0.8000,\"8x\":0.8500},"
				  "\"peers\":3,\"peers_held\":1,\"peers_untracked\":4,"
				  "\"pins\":5,\"pinned_over_max\":3000000,\"pins_forced\":1,"
				  "\"reads\":{\"way\":\"window\",\"window_ns_per_mib\":151000,"
				  "\"map_ns_per_mib\":186000,\"changes\":1}},"
				  "\"tunnel\":{\"rtt_us\":40100,\"up\":1,\"cert_not_after\":2112345678,\"peers\":[]},\"loop_lag_max_us\":12500,"
				  "\"loop_lag_us\":1250000,\"loop_holds\":2,\"lan_bulk_buffers\":{\"held\":2,\"given\":3},"));
	assert_non_null(strstr(p, "{\"id\":1,\"src\":\"10.0.0.5:41000\",\"dst\":\"10.1.1.1:21\","
				  "\"mode\":\"full\",\"class\":\"\",\"age_s\":"));
	assert_non_null(strstr(p, "\"dst\":\"[fd01::1]:443\",\"mode\":\"tfo\",\"class\":\"af41\",\"age_s\":"));
	free(p);
	/* Label values are escaped. */
	struct stats_stream *q = stats_stream_open(s, "a\"b", "c\\d", "e\nf");
	p = stats_render_prom(s);
	assert_non_null(strstr(p, "src=\"a\\\"b\",dst=\"c\\\\d\",mode=\"e\\nf\""));
	free(p);
	stats_stream_close(q);
	stats_free(s);
}

/* A server loop on its own thread. */
struct server {
	struct event_base *base;
	struct stats_http *h;
	pthread_t t;
};

static void *server_main(void *arg)
{
	struct server *sv = arg;
	event_base_loop(sv->base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

/* Captures what fn writes to descriptor fd (1 or 2). */
static char *capture(int fd, int (*fn)(int, char **), int argc, char **argv, int *rc)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *tmp = tmpfile(), *f = fd == 1 ? stdout : stderr;
	int saved = dup(fd);
	fflush(f);
	dup2(fileno(tmp), fd);
	*rc = fn(argc, argv);
	fflush(f);
	dup2(saved, fd);
	close(saved);
	long n = ftell(tmp);
	rewind(tmp);
	buf = calloc(1, (size_t)n + 1);
	len = fread(buf, 1, (size_t)n, tmp);
	buf[len] = 0;
	fclose(tmp);
	return buf;
}

/* The HTTP server answers /metrics, /stats.json and 404; `wanopt stats`
 * prints the table and the JSON. */
static void test_http(void **state)
{
	struct stats_stream *a, *b;
	struct stats *s = sample_registry(&a, &b);
	struct server sv;
	char err[256], *body = NULL, addr[64];
	int rc;

	sv.base = event_base_new();
	sv.h = stats_http_start(sv.base, s, "127.0.0.1", 0, err, sizeof err);
	assert_non_null(sv.h);
	uint16_t port = stats_http_port(sv.h);
	assert_true(port > 0);
	pthread_create(&sv.t, NULL, server_main, &sv);

	assert_int_equal(stats_fetch("127.0.0.1", port, "/metrics", 5000, &body, err, sizeof err), 0);
	assert_non_null(strstr(body, "wanopt_lan_bytes_total{dir=\"in\"} 6000\n"));
	free(body);
	assert_int_equal(stats_fetch("127.0.0.1", port, "/stats.json", 5000, &body, err, sizeof err), 0);
	assert_int_equal(strncmp(body, "{\"role\":\"edge\"", 14), 0);
	free(body);
	assert_int_equal(stats_fetch("127.0.0.1", port, "/nope", 5000, &body, err, sizeof err), -1);
	assert_string_equal(err, "GET /nope: HTTP status 404");

	snprintf(addr, sizeof addr, "--stats=127.0.0.1:%u", port);
	char *argv[] = { "stats", addr, NULL };
	char *out = capture(1, px_cmd_stats, 2, argv, &rc);
	assert_int_equal(rc, 0);
	static const char *const want[] = {
		"wanopt edge at 127.0.0.1:", "tunnel up, tunnel RTT 40.1 ms\n",
		"store 1.0 GiB of 10.0 GiB (10.0 %), 7 evictions; streams 2 active, 2 opened\n",
		"store hit ratio 60.0 %; a store 2x / 4x / 8x as large: 70.0 / 80.0 / 85.0 % (estimated)\n",
		"store pins: 5 now (frames in flight keeping data files); the most they kept it over its size: 2.9 MiB;"
		" pinned files evicted all the same: 1\n",
		"total          1.0 MB      55.0 KB     94.5 %     900.0 KB     3.00x      2\n",
		"10.0.0.5:41000 -> 10.1.1.1:21", "[fd00::5]:5000 -> [fd01::1]:443",
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		if (!strstr(out, want[i]))
			fail_msg("missing from the table: '%s'\n%s", want[i], out);
	free(out);
	char *jargv[] = { "stats", "--json", addr, NULL };
	optind = 0;
	out = capture(1, px_cmd_stats, 3, jargv, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(strncmp(out, "{\"role\":\"edge\"", 14), 0);
	free(out);

	/* IPv6 too. */
	struct stats_http *h6 = stats_http_start(sv.base, s, "::1", 0, err, sizeof err);
	assert_non_null(h6);
	assert_int_equal(stats_fetch("::1", stats_http_port(h6), "/stats.json", 5000, &body, err,
				     sizeof err), 0);
	free(body);

	event_base_loopbreak(sv.base);
	pthread_join(sv.t, NULL);
	stats_http_free(sv.h);
	stats_http_free(h6);
	event_base_free(sv.base);
	/* Nothing listening any more: the client fails cleanly. */
	optind = 0;
	out = capture(1, px_cmd_stats, 2, argv, &rc);
	assert_int_equal(rc, 1);
	free(out);
	stats_free(s);
}

/* Usage errors: one line naming the command and what is wrong. */
static void test_cli_usage(void **state)
{
	char *bad[] = { "wanopt stats", "--stats=bogus", NULL }, *extra[] = { "wanopt stats", "foo", NULL };
	int rc;
	optind = 0;
	char *out = capture(2, px_cmd_stats, 2, bad, &rc);
	assert_int_equal(rc, 2);
	assert_string_equal(out, "wanopt stats: --stats=bogus: expected HOST:PORT\n");
	free(out);
	optind = 0;
	out = capture(2, px_cmd_stats, 2, extra, &rc);
	assert_int_equal(rc, 2);
	assert_string_equal(out, "wanopt stats: unexpected argument 'foo'\n");
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counters),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_render),
		cmocka_unit_test(test_tunnel_peers),
		cmocka_unit_test(test_warm_stream),
		cmocka_unit_test(test_http),
		cmocka_unit_test(test_cli_usage),
	};
	private_netns();
	evthread_use_pthreads();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
