/* test_tun_mux.c: streams through a real tunnel pair over loopback TLS:
 * byte-exact transfer of many concurrent streams both ways with half-close;
 * a slow receiver bounds the sender's buffering; an interactive stream gets
 * through while a bulk stream saturates the tunnel; ASK/ACK/RESET routing;
 * GOAWAY; a store change renewing the connections.  Every wait is bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <event2/buffer.h>

#include "test_tun_util.h"
#include "../proxy/tun/frame.h"
#include "../proxy/tun/mux.h"

/* ---- a pair of endpoints -------------------------------------------------- */

struct owner;

struct pair {
	struct event_base *base;
	tun_server *srv;
	tun_client *cl;
	int up[2];
	tun_conn *sconn;
	/* what the server side does with a stream the edge opens */
	void (*accept)(struct pair *p, tun_stream *s, const tun_open_info *o);
	struct owner *sowners;   /* server-side owners, indexed by port - 1 */
};

static tun_conn *g_last_up; /* the client connection last up */

static void pair_up(tun_conn *c, void *arg)
{
	int *up = arg;

	g_last_up = c;
	*up = 1;
}

static void pair_srv_up(tun_conn *c, void *arg)
{
	struct pair *p = arg;

	p->up[0] = 1;
	p->sconn = c;
}

static void pair_stream(tun_conn *c, tun_stream *s, const tun_open_info *o, void *arg)
{
	struct pair *p = arg;

	(void)c;
	p->accept(p, s, o);
}

static void pair_down(tun_conn *c, void *arg, const char *why)
{
	(void)c; (void)arg;
	fprintf(stderr, "  down: %s\n", why);
}

static int cond_pair_up(void *arg)
{
	struct pair *p = arg;

	return p->up[0] && p->up[1];
}

/* Scheduling settings and capabilities for the edge in the next pair_start
 * (0: defaults). */
static size_t g_quantum, g_out_buffer;
static uint32_t g_caps;
static unsigned g_backoff_min;

/* Start a core and an edge; srv_window: the core's per-stream window. */
static void pair_start(struct pair *p, uint32_t srv_window, size_t cl_hiwat)
{
	tun_config sc = tt_config("core", "ca"), cc = tt_config("edge", "ca");
	tun_cbs scb = { .on_up = pair_srv_up, .on_stream = pair_stream, .on_down = pair_down };
	tun_cbs ccb = { .on_up = pair_up, .on_down = pair_down };
	char err[512];

	sc.window = srv_window;
	cc.sendq_hiwat = cl_hiwat;
	cc.quantum = g_quantum;
	cc.out_buffer = g_out_buffer;
	cc.caps = g_caps;
	if (g_backoff_min)
		cc.backoff_min_ms = cc.backoff_max_ms = g_backoff_min;
	g_last_up = NULL;
	p->base = event_base_new();
	p->srv = tun_server_new(p->base, &sc, "127.0.0.1", 0, &scb, p, err, sizeof(err));
	if (!p->srv)
		fail_msg("%s", err);
	p->cl = tun_client_new(p->base, &cc, "127.0.0.1", tun_server_port(p->srv), &ccb,
			       &p->up[1], err, sizeof(err));
	if (!p->cl)
		fail_msg("%s", err);
	assert_true(tt_run_until(p->base, cond_pair_up, p, 5000));
}

static void pair_stop(struct pair *p)
{
	tun_client_free(p->cl);
	tun_server_free(p->srv);
	event_base_free(p->base);
}

/* ---- a stream owner that sends a pattern and checks the peer's ------------- */

struct owner {
	tun_stream *s;
	size_t to_send, sent;     /* our direction */
	size_t expect, got;       /* the peer's direction */
	uint8_t seed_out, seed_in;
	int hold;                 /* 1: do not consume (slow receiver) */
	size_t held;
	int closed_sent, closed_rcvd, reset, bad;
	int echo;                 /* 1: send back what arrives */
	int keep_open;            /* 1: never close our direction */
	double last_rx_ms;
	uint64_t ask, ack;
};

/* Byte k of the pattern with seed z. */
static uint8_t pat(size_t k, uint8_t z)
{
	return (uint8_t)(k * 31 + z * 7 + (k >> 13));
}

/* Queue pattern bytes while the stream has room; close when all is queued. */
static void owner_pump(struct owner *o)
{
	static uint8_t buf[65536];

	while (o->sent < o->to_send) {
		size_t n = tun_stream_room(o->s), left = o->to_send - o->sent;
		if (n == 0)
			return;
		if (n > sizeof(buf))
			n = sizeof(buf);
		if (n > left)
			n = left;
		for (size_t i = 0; i < n; i++)
			buf[i] = pat(o->sent + i, o->seed_out);
		assert_int_equal(tun_stream_write(o->s, buf, n), TUN_OK);
		o->sent += n;
	}
	if (!o->closed_sent && !o->keep_open) {
		assert_int_equal(tun_stream_close(o->s), TUN_OK);
		o->closed_sent = 1;
	}
}

static void o_data(tun_stream *s, void *arg, const void *buf, size_t len)
{
	struct owner *o = arg;
	const uint8_t *b = buf;

	for (size_t i = 0; i < len && !o->bad; i++)
		if (b[i] != pat(o->got + i, o->seed_in))
			o->bad = 1;
	o->got += len;
	o->last_rx_ms = tt_now_ms();
	if (o->echo)
		tun_stream_write(s, buf, len);
	if (o->hold)
		o->held += len;
	else
		tun_stream_consumed(s, len);
}

static void o_close(tun_stream *s, void *arg)
{
	struct owner *o = arg;

	(void)s;
	o->closed_rcvd = 1;
}

static void o_reset(tun_stream *s, void *arg, int code)
{
	struct owner *o = arg;

	(void)s;
	o->reset = code + 1000;
}

static void o_writable(tun_stream *s, void *arg)
{
	(void)s;
	owner_pump(arg);
}

static void o_ask(tun_stream *s, void *arg, uint64_t seq)
{
	(void)s;
	((struct owner *)arg)->ask = seq;
}

static void o_ack(tun_stream *s, void *arg, uint64_t seq)
{
	(void)s;
	((struct owner *)arg)->ack = seq;
}

static const tun_stream_cbs owner_cbs = {
	.on_data = o_data, .on_close = o_close, .on_reset = o_reset,
	.on_writable = o_writable, .on_ask = o_ask, .on_ack = o_ack,
};

/* Open stream number i (target port i + 1) from the edge. */
static void owner_open(struct pair *p, struct owner *o, unsigned i)
{
	tun_open_info oi = { .policy = PROTO_POLICY_FULL };
	int err;

	tun_target_parse(&oi.target, "192.0.2.7", (uint16_t)(i + 1));
	o->s = tun_client_open(p->cl, &oi, &owner_cbs, o, &err);
	if (!o->s)
		fail_msg("open %u: %s", i, tun_strerror(err));
	owner_pump(o);
}

/* Server side: adopt the stream with the owner prepared for its port. */
static void accept_owner(struct pair *p, tun_stream *s, const tun_open_info *oi)
{
	struct owner *o = &p->sowners[oi->target.port - 1];

	o->s = s;
	tun_stream_set_cbs(s, &owner_cbs, o);
	owner_pump(o);
}

/* ---- byte-exact transfer -------------------------------------------------- */

#define NSTREAMS 48

struct xfer {
	struct owner c[NSTREAMS], s[NSTREAMS];
};

static int cond_xfer_done(void *arg)
{
	struct xfer *x = arg;

	for (int i = 0; i < NSTREAMS; i++)
		if (!x->c[i].closed_rcvd || !x->s[i].closed_rcvd || x->c[i].reset || x->s[i].reset)
			return x->c[i].reset || x->s[i].reset;
	return 1;
}

static void test_many_streams_byte_exact(void **state)
{
	static const size_t sizes[] = { 0, 1, 100, 16383, 16384, 16385, 65536, 100000,
					1 << 20, 3 << 20, 5 << 20, 7 };
	static struct xfer x;
	struct pair p = { .accept = accept_owner, .sowners = x.s };
	size_t total = 0;

	(void)state;
	memset(&x, 0, sizeof(x));
	for (unsigned i = 0; i < NSTREAMS; i++) {
		size_t up = sizes[i % 12], down = sizes[(i * 5 + 3) % 12];
		x.c[i] = (struct owner){ .to_send = up, .expect = down, .seed_out = (uint8_t)i,
					 .seed_in = (uint8_t)(i + 100) };
		x.s[i] = (struct owner){ .to_send = down, .expect = up, .seed_out = (uint8_t)(i + 100),
					 .seed_in = (uint8_t)i };
		total += up + down;
	}
	pair_start(&p, 0, 0);
	double t0 = tt_now_ms();
	for (unsigned i = 0; i < NSTREAMS; i++)
		owner_open(&p, &x.c[i], i);
	assert_true(tt_run_until(p.base, cond_xfer_done, &x, 90000));
	double dt = tt_now_ms() - t0;
	for (int i = 0; i < NSTREAMS; i++) {
		if (x.c[i].reset || x.s[i].reset || x.c[i].bad || x.s[i].bad ||
		    x.c[i].got != x.c[i].expect || x.s[i].got != x.s[i].expect)
			fail_msg("stream %d: reset %d/%d bad %d/%d got %zu/%zu of %zu/%zu", i,
				 x.c[i].reset, x.s[i].reset, x.c[i].bad, x.s[i].bad,
				 x.c[i].got, x.s[i].got, x.c[i].expect, x.s[i].expect);
	}
	fprintf(stderr, "  %d streams, %.1f MB both ways in %.0f ms\n", NSTREAMS, total / 1e6, dt);
	tun_stats cs, ss, st;
	tun_conn *cconn = tun_stream_conn(x.c[0].s);
	tun_stream_get_stats(x.c[10].s, &st);
	assert_int_equal(st.data_out, x.c[10].to_send);
	assert_int_equal(st.data_in, x.c[10].expect);
	/* both directions closed: freeing finishes them without a reset */
	for (int i = 0; i < NSTREAMS; i++) {
		tun_stream_free(x.c[i].s);
		tun_stream_free(x.s[i].s);
	}
	int never = 0;
	tt_run_until(p.base, tt_flag, &never, 50);
	assert_int_equal(tun_conn_streams(p.sconn), 0);
	/* counters agree on both ends once nothing is in flight */
	tun_conn_get_stats(cconn, &cs);
	tun_conn_get_stats(p.sconn, &ss);
	assert_int_equal(cs.data_out + cs.data_in, total);
	assert_int_equal(cs.data_out, ss.data_in);
	assert_int_equal(cs.bytes_out, ss.bytes_in);
	assert_int_equal(cs.bytes_in, ss.bytes_out);
	assert_true(cs.bytes_out > cs.data_out);
	pair_stop(&p);
}

/* ---- slow receiver ------------------------------------------------------- */

/* A holding receiver r drains: all total bytes from sender c flow, exact;
 * then both streams and the pair are freed. */
static void drain_exact(struct pair *p, struct owner *r, struct owner *c, size_t total)
{
	r->hold = 0;
	tun_stream_consumed(r->s, r->held);
	assert_true(tt_run_until(p->base, tt_flag, &r->closed_rcvd, 30000));
	assert_int_equal(r->got, total);
	assert_false(r->bad);
	tun_stream_free(c->s);
	tun_stream_free(r->s);
	pair_stop(p);
}

static void test_slow_receiver_bounds_sender(void **state)
{
	static struct owner so[1], co;
	struct pair p = { .accept = accept_owner, .sowners = so };
	const uint32_t window = 64 * 1024;
	const size_t hiwat = 128 * 1024, total = 8 << 20;
	int never = 0;

	(void)state;
	memset(so, 0, sizeof(so));
	co = (struct owner){ .to_send = total, .seed_out = 1 };
	so[0] = (struct owner){ .expect = total, .seed_in = 1, .hold = 1 };
	pair_start(&p, window, hiwat);
	owner_open(&p, &co, 0);
	tt_run_until(p.base, tt_flag, &never, 500);
	/* the receiver got exactly one window; the sender stopped pulling */
	assert_int_equal(so[0].got, window);
	assert_true(tun_stream_queued(co.s) <= hiwat);
	assert_int_equal(tun_stream_room(co.s), 0);
	assert_true(co.sent <= window + hiwat);
	fprintf(stderr, "  receiver held %zu, sender queued %zu, produced %zu of %zu\n",
		so[0].got, tun_stream_queued(co.s), co.sent, total);
	drain_exact(&p, &so[0], &co, total);
}

/* A larger window set on the connection after HELLO (tun_conn_set_recv_window,
 * for a peer that told us a long fat link): streams the peer opens get it as
 * CREDIT after their OPEN; the receiver holding, it got exactly that much;
 * draining, everything flows exact (credit comes back in its quarters). */
static void test_recv_window_per_connection(void **state)
{
	static struct owner so[1], co;
	struct pair p = { .accept = accept_owner, .sowners = so };
	const uint32_t window = 64 * 1024, larger = 320 * 1024;
	const size_t total = 8 << 20;
	int never = 0;

	(void)state;
	memset(so, 0, sizeof(so));
	co = (struct owner){ .to_send = total, .seed_out = 3 };
	so[0] = (struct owner){ .expect = total, .seed_in = 3, .hold = 1 };
	pair_start(&p, window, 128 * 1024);
	tun_conn_set_recv_window(p.sconn, 1000);  /* never below the HELLO's */
	tun_conn_set_recv_window(p.sconn, larger);
	owner_open(&p, &co, 0);
	tt_run_until(p.base, tt_flag, &never, 500);
	assert_int_equal(so[0].got, larger);
	drain_exact(&p, &so[0], &co, total);
}

/* ---- interactive vs bulk ------------------------------------------------- */

struct rtt_probe {
	struct owner *o;
	size_t want;
};

static int cond_echoed(void *arg)
{
	struct rtt_probe *r = arg;

	return r->o->got >= r->want || r->o->reset;
}

/* An interactive echo stream against a saturating bulk stream. */
static void interactive_run(size_t quantum, size_t out_buffer)
{
	static struct owner so[2], bulk, inter;
	struct pair p = { .accept = accept_owner, .sowners = so };
	uint8_t msg[100];
	double worst = 0, sum = 0;
	const int rounds = 20;

	g_quantum = quantum;
	g_out_buffer = out_buffer;
	memset(so, 0, sizeof(so));
	bulk = (struct owner){ .to_send = SIZE_MAX / 2, .seed_out = 9 };
	so[0] = (struct owner){ .expect = SIZE_MAX / 2, .seed_in = 9 };
	inter = (struct owner){ .seed_in = 0, .keep_open = 1 };
	so[1] = (struct owner){ .seed_in = 0, .echo = 1, .keep_open = 1 };
	pair_start(&p, 0, 0);
	g_quantum = g_out_buffer = 0;
	owner_open(&p, &bulk, 0);
	int never = 0;
	tt_run_until(p.base, tt_flag, &never, 300);   /* the bulk stream saturates */
	size_t bulk_before = so[0].got;
	assert_true(bulk_before > (1 << 20));
	owner_open(&p, &inter, 1);
	for (int r = 0; r < rounds; r++) {
		struct rtt_probe pr = { .o = &inter, .want = (size_t)(r + 1) * sizeof(msg) };
		for (size_t i = 0; i < sizeof(msg); i++)
			msg[i] = pat(r * sizeof(msg) + i, 0);
		double t0 = tt_now_ms();
		assert_int_equal(tun_stream_write(inter.s, msg, sizeof(msg)), TUN_OK);
		assert_true(tt_run_until(p.base, cond_echoed, &pr, 5000));
		double rtt = tt_now_ms() - t0;
		sum += rtt;
		if (rtt > worst)
			worst = rtt;
	}
	size_t bulk_moved = so[0].got - bulk_before;
	fprintf(stderr, "  quantum %zu, out buffer %zu: interactive RTT avg %.2f ms, worst %.2f ms; "
		"bulk moved %.1f MB meanwhile\n", quantum, out_buffer, sum / rounds, worst, bulk_moved / 1e6);
	assert_false(inter.bad);
	assert_false(so[0].bad);
	assert_true(worst < 500);
	assert_true(bulk_moved > 0);
	tun_stream_free(bulk.s);
	tun_stream_free(inter.s);
	pair_stop(&p);
	for (int i = 0; i < 2; i++)
		assert_int_equal(so[i].reset, 1000 + PROTO_RST_TUNNEL_DOWN);
	tun_stream_free(so[0].s);
	tun_stream_free(so[1].s);
}

static void test_interactive_not_stalled_by_bulk(void **state)
{
	(void)state;
	interactive_run(0, 0);
	interactive_run(4096, 8192);   /* as configured for a slow link */
}

/* ---- fairness between bulk streams -------------------------------------- */

static void test_round_robin_fair(void **state)
{
	static struct owner so[4], co[4];
	struct pair p = { .accept = accept_owner, .sowners = so };
	size_t lo = SIZE_MAX, hi = 0;
	int never = 0;

	(void)state;
	memset(so, 0, sizeof(so));
	for (int i = 0; i < 4; i++) {
		co[i] = (struct owner){ .to_send = SIZE_MAX / 2, .seed_out = (uint8_t)i };
		so[i] = (struct owner){ .expect = SIZE_MAX / 2, .seed_in = (uint8_t)i };
	}
	pair_start(&p, 0, 0);
	for (unsigned i = 0; i < 4; i++)
		owner_open(&p, &co[i], i);
	tt_run_until(p.base, tt_flag, &never, 400);
	for (int i = 0; i < 4; i++) {
		assert_false(so[i].bad);
		lo = so[i].got < lo ? so[i].got : lo;
		hi = so[i].got > hi ? so[i].got : hi;
	}
	fprintf(stderr, "  4 bulk streams: least %.1f MB, most %.1f MB\n", lo / 1e6, hi / 1e6);
	assert_true(lo > (1 << 20));
	assert_true(lo * 10 >= hi * 8);   /* within 20 % of each other */
	for (int i = 0; i < 4; i++)
		tun_stream_free(co[i].s);
	/* freed without closing: an abort the core's owners hear about */
	assert_true(tt_run_until(p.base, tt_flag, &so[3].reset, 5000));
	assert_int_equal(so[0].reset, 1000 + PROTO_RST_CANCEL);
	for (int i = 0; i < 4; i++)
		tun_stream_free(so[i].s);
	pair_stop(&p);
}

/* ---- a sparse stream goes before a busy one ----------------------------- */

static void nop_kick(void *arg)
{
	(void)arg;
}

static int ok_hello(void *arg, const tun_hello *h, char *err, size_t errlen)
{
	(void)arg, (void)h, (void)err, (void)errlen;
	return 0;
}

/* The stream id of the first DATA frame in out (0 if none); drains out. */
static uint32_t first_data_sid(struct evbuffer *out)
{
	tun_fdec d;
	tun_frame f;
	size_t n = evbuffer_get_length(out), off = 0, used;
	uint8_t *p = evbuffer_pullup(out, -1);
	uint32_t sid = 0;

	tun_fdec_init(&d);
	while (!sid && off < n && tun_fdec_feed(&d, p + off, n - off, &used, &f) > 0) {
		off += used;
		if (f.type == PROTO_DATA)
			sid = f.sid;
	}
	evbuffer_drain(out, n);
	return sid;
}

/* A stream that was idle and queues a few bytes (a request, a reply) is sent
 * in the next output, before a bulk stream's next quantum: it waits only for
 * what the connection already holds, not for the bulk stream's turn. */
static void test_sparse_stream_first(void **state)
{
	mux_cfg cfg = { .odd = 1, .window = 1u << 20, .max_streams = 16, .sendq_hiwat = 1u << 20,
			.sendq_max = 4u << 20, .quantum = 4096 };
	mux_ops ops = { .kick = nop_kick, .on_hello = ok_hello };
	tun_frame hello = { .type = PROTO_HELLO, .u.hello = { .vmin = PROTO_VERSION_MIN, .vmax = PROTO_VERSION,
							       .window = 1u << 20, .max_streams = 16,
							       .role = PROTO_ROLE_CORE, .name = "core" } };
	tun_open_info oi = { .policy = PROTO_POLICY_FULL };
	static uint8_t big[64 << 10], small[100], buf[TUN_FRAME_MAX];
	char err[256];
	uint32_t goaway = 0;
	int e = 0;

	(void)state;
	mux *m = mux_new(&cfg, &ops, NULL);
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
	assert_non_null(m);
	int len = tun_frame_encode(&hello, buf, sizeof buf);
	assert_true(len > 0);
	evbuffer_add(in, buf, (size_t)len);
	assert_int_equal(mux_input(m, in, &goaway, err, sizeof err), TUN_OK);
	assert_int_equal(tun_target_parse(&oi.target, "127.0.0.1", 80), TUN_OK);
	tun_stream *bulk = mux_open(m, &oi, NULL, NULL, &e), *live = mux_open(m, &oi, NULL, NULL, &e);
	assert_non_null(bulk);
	assert_non_null(live);
	assert_int_equal(tun_stream_write(bulk, big, sizeof big), TUN_OK);
	mux_output(m, out, 4096); /* the OPENs (live's without data), a bulk quantum */
	assert_int_equal(first_data_sid(out), tun_stream_id(bulk));
	for (int round = 0; round < 3; round++) {
		mux_output(m, out, 4096); /* bulk alone: it stays busy */
		assert_int_equal(first_data_sid(out), tun_stream_id(bulk));
		assert_int_equal(tun_stream_write(live, small, sizeof small), TUN_OK);
		mux_output(m, out, 4096);
		assert_int_equal(first_data_sid(out), tun_stream_id(live));
	}
	tun_stream_free(bulk);
	tun_stream_free(live);
	mux_free(m);
	evbuffer_free(in);
	evbuffer_free(out);
}

/* ---- control routing and GOAWAY ------------------------------------------ */

static int cond_has_stream(void *arg)
{
	return ((struct owner *)arg)->s != NULL;
}

struct up_count {
	tun_client *cl;
	unsigned want;
};

static int cond_client_up(void *arg)
{
	struct up_count *u = arg;

	return tun_client_up(u->cl) == u->want;
}

static void test_ask_ack_reset_goaway(void **state)
{
	static struct owner so[4], co[4];
	struct pair p = { .accept = accept_owner, .sowners = so };
	int never = 0;

	(void)state;
	memset(so, 0, sizeof(so));
	memset(co, 0, sizeof(co));
	for (int i = 0; i < 4; i++)
		co[i].keep_open = so[i].keep_open = 1;
	pair_start(&p, 0, 0);
	/* ASK travels edge -> core, ACK core -> edge, on the right stream */
	owner_open(&p, &co[0], 0);
	assert_int_equal(tun_stream_ask(co[0].s, 7), TUN_OK);
	assert_true(tt_run_until(p.base, tt_flag, &so[0].ask, 5000));
	assert_int_equal(so[0].ask, 7);
	assert_int_equal(tun_stream_ack(so[0].s, 9), TUN_OK);
	assert_true(tt_run_until(p.base, tt_flag, &co[0].ack, 5000));
	assert_int_equal(co[0].ack, 9);
	/* the core refuses a target: the edge's owner hears why */
	owner_open(&p, &co[1], 1);
	assert_true(tt_run_until(p.base, cond_has_stream, &so[1], 5000));
	tun_stream_reset(so[1].s, PROTO_RST_CONNECT);
	assert_true(tt_run_until(p.base, tt_flag, &co[1].reset, 5000));
	assert_int_equal(co[1].reset, 1000 + PROTO_RST_CONNECT);
	assert_int_equal(tun_stream_write(co[1].s, "x", 1), TUN_ECLOSED);
	tun_stream_free(co[1].s);
	tun_stream_free(so[1].s);
	/* the edge abandons a stream: the core's owner gets a CANCEL */
	owner_open(&p, &co[2], 2);
	assert_true(tt_run_until(p.base, cond_has_stream, &so[2], 5000));
	tun_stream_free(co[2].s);
	assert_true(tt_run_until(p.base, tt_flag, &so[2].reset, 5000));
	assert_int_equal(so[2].reset, 1000 + PROTO_RST_CANCEL);
	tun_stream_free(so[2].s);
	/* GOAWAY from the core: the edge dials a replacement connection for new
	 * streams; the open stream goes on; the old connection closes when drained */
	tun_conn *old = tun_stream_conn(co[0].s);
	tun_conn_goaway(p.sconn, "draining for reload");
	struct up_count uc = { p.cl, 2 };
	assert_true(tt_run_until(p.base, cond_client_up, &uc, 5000));
	owner_open(&p, &co[3], 3);
	assert_true(tun_stream_conn(co[3].s) != old);
	for (int i = 0; i < 4; i++)
		assert_int_equal(tun_stream_write(co[0].s, (uint8_t[]){ pat((size_t)i, 0) }, 1), TUN_OK);
	tt_run_until(p.base, tt_flag, &never, 100);
	assert_int_equal(so[0].got, 4);
	assert_false(so[0].bad);
	tun_stream_free(co[0].s);
	tun_stream_free(so[0].s);
	uc.want = 1;
	assert_true(tt_run_until(p.base, cond_client_up, &uc, 5000));
	assert_true(tt_run_until(p.base, cond_has_stream, &so[3], 5000));
	tun_stream_free(co[3].s);
	tun_stream_free(so[3].s);
	pair_stop(&p);
}

static int cond_server_drained(void *arg)
{
	struct pair *p = arg;

	return tun_server_up(p->srv) == 0 && tun_client_up(p->cl) == 0;
}

static void test_drain(void **state)
{
	static struct owner so[1], co;
	struct pair p = { .accept = accept_owner, .sowners = so };
	int never = 0;

	(void)state;
	memset(so, 0, sizeof(so));
	co = (struct owner){ .to_send = 3 << 20, .expect = 1 << 20, .seed_out = 3, .seed_in = 4 };
	so[0] = (struct owner){ .to_send = 1 << 20, .expect = 3 << 20, .seed_out = 4, .seed_in = 3 };
	pair_start(&p, 0, 0);
	owner_open(&p, &co, 0);
	assert_true(tt_run_until(p.base, cond_has_stream, &so[0], 5000));
	/* the core drains: the running stream completes, then all closes */
	tun_server_drain(p.srv, "shutting down");
	tun_client_drain(p.cl, "shutting down");
	if (!tt_run_until(p.base, tt_flag, &so[0].closed_rcvd, 10000) ||
	    !tt_run_until(p.base, tt_flag, &co.closed_rcvd, 10000))
		fail_msg("core got %zu/%zu reset %d sent %zu; edge got %zu/%zu reset %d sent %zu queued %zu",
			 so[0].got, so[0].expect, so[0].reset, so[0].sent, co.got, co.expect, co.reset,
			 co.sent, tun_stream_queued(co.s));
	assert_int_equal(so[0].got, co.to_send);
	assert_int_equal(co.got, so[0].to_send);
	assert_false(so[0].bad || co.bad);
	assert_int_equal(so[0].reset + co.reset, 0);
	tun_stream_free(co.s);
	tun_stream_free(so[0].s);
	assert_true(tt_run_until(p.base, cond_server_drained, &p, 5000));
	tt_run_until(p.base, tt_flag, &never, 100);
	assert_int_equal(tun_client_up(p.cl), 0);   /* no redial */
	pair_stop(&p);
}

/* The client connection last up is not `old` and its server's HELLO
 * carries store id `id`. */
struct renewed {
	tun_conn *old;
	uint8_t id[PROTO_STORE_ID_LEN];
};

static int cond_renewed(void *arg)
{
	struct renewed *r = arg;

	return g_last_up && g_last_up != r->old &&
	       !memcmp(tun_conn_hello(g_last_up)->store_id, r->id, sizeof r->id);
}

/* The core's store changes (tun_server_renew): an edge reading
 * PROTO_GOAWAY_RENEW dials a new connection, whose HELLO carries the new
 * id, while the old one goes on taking streams (none refused meanwhile);
 * once the new one is up, new streams go there and the old one closes as
 * its streams finish.  An edge without the capability gets a plain GOAWAY
 * and dials again all the same. */
static void test_renew(void **state)
{
	static struct owner so[3], co[3];
	int never = 0;

	(void)state;
	for (int caps = 0; caps < 2; caps++) {
		struct pair p = { .accept = accept_owner, .sowners = so };
		memset(so, 0, sizeof(so));
		memset(co, 0, sizeof(co));
		for (int i = 0; i < 3; i++) {
			so[i] = (struct owner){ .to_send = 1 << 16, .expect = 1 << 16, .seed_out = 2, .seed_in = 1 };
			co[i] = (struct owner){ .to_send = 1 << 16, .expect = 1 << 16, .seed_out = 1, .seed_in = 2 };
		}
		g_caps = caps ? PROTO_CAP_ALL & ~PROTO_CAP_RENEW : 0;
		g_backoff_min = 300; /* the replacement is dialed 225-375 ms after the request */
		pair_start(&p, 0, 0);
		g_caps = 0;
		g_backoff_min = 0;
		co[0].keep_open = so[0].keep_open = 1;
		owner_open(&p, &co[0], 0);
		assert_true(tt_run_until(p.base, cond_has_stream, &so[0], 5000));
		tun_conn *old = tun_stream_conn(co[0].s);
		struct renewed r = { old, { 1, 2, 3, 4, 5, 6, 7, 8 } };
		tun_server_renew(p.srv, r.id, "store changed");
		if (!caps) { /* the renewing connection still takes a stream, once the request arrived */
			tt_run_until(p.base, tt_flag, &never, 100);
			owner_open(&p, &co[1], 1);
			assert_ptr_equal(tun_stream_conn(co[1].s), old);
		}
		assert_true(tt_run_until(p.base, cond_renewed, &r, 5000));
		owner_open(&p, &co[2], 2);
		assert_ptr_equal(tun_stream_conn(co[2].s), g_last_up);
		for (int i = caps ? 2 : 1; i < 3; i++) {
			assert_true(tt_run_until(p.base, tt_flag, &co[i].closed_rcvd, 5000));
			assert_true(tt_run_until(p.base, tt_flag, &so[i].closed_rcvd, 5000));
			assert_int_equal(co[i].got, 1 << 16);
			assert_int_equal(so[i].got, 1 << 16);
		}
		uint8_t b = pat(1 << 16, co[0].seed_out);
		assert_int_equal(tun_stream_write(co[0].s, &b, 1), TUN_OK);
		tt_run_until(p.base, tt_flag, &never, 100);
		assert_int_equal(so[0].got, (1 << 16) + 1); /* the old connection's stream went on */
		for (int i = 0; i < 3; i++) {
			assert_false(so[i].bad || co[i].bad);
			assert_int_equal(so[i].reset + co[i].reset, 0);
		}
		assert_int_equal(tun_client_up(p.cl), 2);
		for (int i = 0; i < 3; i++) {
			tun_stream_free(co[i].s);
			tun_stream_free(so[i].s);
		}
		struct up_count uc = { p.cl, 1 };
		assert_true(tt_run_until(p.base, cond_client_up, &uc, 5000)); /* the old one closed */
		pair_stop(&p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_streams_byte_exact),
		cmocka_unit_test(test_slow_receiver_bounds_sender),
		cmocka_unit_test(test_recv_window_per_connection),
		cmocka_unit_test(test_interactive_not_stalled_by_bulk),
		cmocka_unit_test(test_round_robin_fair),
		cmocka_unit_test(test_sparse_stream_first),
		cmocka_unit_test(test_ask_ack_reset_goaway),
		cmocka_unit_test(test_drain),
		cmocka_unit_test(test_renew),
	};
	return cmocka_run_group_tests(tests, tt_setup, tt_teardown);
}
