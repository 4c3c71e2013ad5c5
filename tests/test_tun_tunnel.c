/* test_tun_tunnel.c: tunnel connections over loopback with real TLS 1.3:
 * mutual authentication, refused peers (wrong CA, no certificate), version
 * mismatch, malformed frames from a peer, keepalive timeout, reconnect with
 * backoff, parallel connections.  Every wait is bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>

#include "test_tun_util.h"
#include "../proxy/tun/frame.h"

struct side {
	int up, down, errors, resets, opened;
	size_t data_bytes, data_max; /* DATA received on held streams, and its largest frame */
	unsigned nup;
	tun_open_info open;  /* the last OPEN received */
	tun_conn *conn;
	char err[1024];    /* last on_error */
	char why[1024];    /* last on_down */
};

static void on_up(tun_conn *c, void *arg)
{
	struct side *s = arg;

	s->up++;
	s->conn = c;
}

static void on_down(tun_conn *c, void *arg, const char *why)
{
	struct side *s = arg;

	(void)c;
	s->down++;
	s->conn = NULL;
	snprintf(s->why, sizeof(s->why), "%s", why);
}

static void on_error(void *arg, const char *msg)
{
	struct side *s = arg;

	s->errors++;
	snprintf(s->err, sizeof(s->err), "%s", msg);
}

/* Streams opened by a peer: held without reading; freed when reset. */
static void held_reset(tun_stream *st, void *arg, int code)
{
	(void)arg; (void)code;
	tun_stream_free(st);
}

static void held_data(tun_stream *st, void *arg, const void *buf, size_t len)
{
	struct side *s = arg;

	(void)st; (void)buf;   /* never consumed: no credit back */
	s->data_bytes += len;
	if (len > s->data_max)
		s->data_max = len;
}

static void on_stream(tun_conn *c, tun_stream *st, const tun_open_info *o, void *arg)
{
	static const tun_stream_cbs held = { .on_data = held_data, .on_reset = held_reset };

	struct side *s = arg;

	(void)c;
	s->opened++;
	s->open = *o;
	tun_stream_set_cbs(st, &held, s);
}

static const tun_cbs side_cbs = { .on_up = on_up, .on_down = on_down, .on_error = on_error,
				  .on_stream = on_stream };

static int cond_up_both(void *arg)
{
	struct side *s = arg;

	return s[0].up && s[1].up;
}

static int cond_errors_both(void *arg)
{
	struct side *s = arg;

	return s[0].errors && s[1].errors;
}

static int cond_server_err(void *arg)
{
	struct side *s = arg;

	return s->errors || s->down;
}

/* Start a core listening on an ephemeral loopback port. */
static tun_server *start_server(struct event_base *base, tun_config *cfg, struct side *s,
				uint16_t port)
{
	char err[512];
	tun_server *srv = tun_server_new(base, cfg, "127.0.0.1", port, &side_cbs, s, err, sizeof(err));

	if (!srv)
		fail_msg("server: %s", err);
	return srv;
}

static tun_client *start_client(struct event_base *base, tun_config *cfg, struct side *s,
				uint16_t port)
{
	char err[512];
	tun_client *cl = tun_client_new(base, cfg, "127.0.0.1", port, &side_cbs, s, err, sizeof(err));

	if (!cl)
		fail_msg("client: %s", err);
	return cl;
}

static void test_mutual_auth_ok(void **state)
{
	struct event_base *base = event_base_new();
	struct side s[2] = { 0 };
	tun_config sc = tt_config("core", "ca"), cc = tt_config("edge", "ca");
	tun_server *srv;
	tun_client *cl;

	(void)state;
	sc.keepalive_ms = cc.keepalive_ms = 30;
	cc.peer_name = "core";
	cc.store_id[0] = 0xab;
	srv = start_server(base, &sc, &s[0], 0);
	cl = start_client(base, &cc, &s[1], tun_server_port(srv));
	assert_true(tt_run_until(base, cond_up_both, s, 5000));
	assert_int_equal(s[0].errors + s[1].errors, 0);
	assert_string_equal(tun_conn_hello(s[0].conn)->name, "edge");
	assert_int_equal(tun_conn_hello(s[0].conn)->store_id[0], 0xab);
	assert_int_equal(tun_conn_hello(s[0].conn)->role, PROTO_ROLE_EDGE);
	assert_string_equal(tun_conn_hello(s[1].conn)->name, "core");
	assert_int_equal(tun_conn_version(s[1].conn), PROTO_VERSION);
	assert_int_equal(tun_conn_caps(s[1].conn), PROTO_CAP_ALL);
	assert_non_null(strstr(tun_conn_peer(s[0].conn), "127.0.0.1"));
	/* keepalive runs and measures an RTT; the tunnel stays up */
	int never = 0;
	tt_run_until(base, tt_flag, &never, 300);
	assert_true(tun_conn_rtt_us(s[1].conn) > 0);
	assert_int_equal(s[0].down + s[1].down, 0);
	assert_int_equal(tun_client_up(cl), 1);
	assert_int_equal(tun_server_up(srv), 1);
	tun_client_free(cl);
	tun_server_free(srv);
	event_base_free(base);
}

static void test_wrong_ca_refused(void **state)
{
	struct event_base *base = event_base_new();
	struct side s[2] = { 0 };
	tun_config sc = tt_config("core", "ca"), cc = tt_config("rogue", "ca");
	tun_server *srv = start_server(base, &sc, &s[0], 0);
	tun_client *cl = start_client(base, &cc, &s[1], tun_server_port(srv));

	(void)state;
	assert_true(tt_run_until(base, cond_errors_both, s, 5000));
	assert_int_equal(s[0].up + s[1].up, 0);
	assert_non_null(strstr(s[0].err, "tunnel from 127.0.0.1:"));
	assert_non_null(strstr(s[0].err, "certificate"));
	assert_non_null(strstr(s[1].err, "tunnel to 127.0.0.1:"));
	tun_client_free(cl);
	/* and a client that does not trust the server's CA refuses it */
	memset(s, 0, sizeof(s));
	cc = tt_config("edge", "ca2");
	cl = start_client(base, &cc, &s[1], tun_server_port(srv));
	assert_true(tt_run_until(base, cond_errors_both, s, 5000));
	assert_non_null(strstr(s[1].err, "certificate verify failed"));
	assert_int_equal(s[0].up + s[1].up, 0);
	tun_client_free(cl);
	tun_server_free(srv);
	event_base_free(base);
}

/* ---- a raw TLS peer, for what a tun_client would never do ----------------- */

struct raw {
	struct bufferevent *bev;
	int connected, closed;
	struct evbuffer *in;
};

static void raw_read(struct bufferevent *bev, void *arg)
{
	struct raw *r = arg;

	evbuffer_add_buffer(r->in, bufferevent_get_input(bev));
}

static void raw_event(struct bufferevent *bev, short what, void *arg)
{
	struct raw *r = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		r->connected = 1;
	else
		r->closed = 1;
}

/* Connect to 127.0.0.1:port with TLS; with_cert: present edge's certificate. */
static void raw_connect(struct raw *r, struct event_base *base, uint16_t port, int with_cert,
			SSL_CTX **ctxp)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	tun_config cc = tt_config("edge", "ca");

	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	SSL_CTX_load_verify_locations(ctx, cc.ca_file, NULL);
	if (with_cert) {
		assert_int_equal(SSL_CTX_use_certificate_chain_file(ctx, cc.cert_file), 1);
		assert_int_equal(SSL_CTX_use_PrivateKey_file(ctx, cc.key_file, SSL_FILETYPE_PEM), 1);
	}
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	memset(r, 0, sizeof(*r));
	r->in = evbuffer_new();
	r->bev = bufferevent_openssl_socket_new(base, -1, SSL_new(ctx), BUFFEREVENT_SSL_CONNECTING,
						BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(r->bev, raw_read, NULL, raw_event, r);
	bufferevent_enable(r->bev, EV_READ | EV_WRITE);
	assert_int_equal(bufferevent_socket_connect(r->bev, (struct sockaddr *)&sin, sizeof(sin)), 0);
	*ctxp = ctx;
}

static void raw_free(struct raw *r, SSL_CTX *ctx)
{
	bufferevent_free(r->bev);
	evbuffer_free(r->in);
	SSL_CTX_free(ctx);
}

/* Send a valid HELLO from the raw peer. */
static void raw_hello(struct raw *r, uint16_t vmin, uint16_t vmax)
{
	tun_frame f = { .type = PROTO_HELLO };
	uint8_t buf[TUN_FRAME_MAX];
	int n;

	f.u.hello = (tun_hello){ .vmin = vmin, .vmax = vmax, .caps = PROTO_CAP_ALL,
				 .window = PROTO_INITIAL_WINDOW, .max_streams = 100,
				 .role = PROTO_ROLE_EDGE, .name = "raw" };
	n = tun_frame_encode(&f, buf, sizeof(buf));
	assert_true(n > 0);
	bufferevent_write(r->bev, buf, (size_t)n);
}

static void test_no_client_cert_refused(void **state)
{
	struct event_base *base = event_base_new();
	struct side s = { 0 };
	tun_config sc = tt_config("core", "ca");
	tun_server *srv = start_server(base, &sc, &s, 0);
	struct raw r;
	SSL_CTX *ctx;

	(void)state;
	raw_connect(&r, base, tun_server_port(srv), 0, &ctx);
	assert_true(tt_run_until(base, cond_server_err, &s, 5000));
	assert_int_equal(s.up, 0);
	assert_non_null(strstr(s.err, "tunnel from 127.0.0.1:"));
	assert_non_null(strstr(s.err, "did not return a certificate"));
	assert_true(tt_run_until(base, tt_flag, &r.closed, 5000));
	raw_free(&r, ctx);
	tun_server_free(srv);
	event_base_free(base);
}

static void test_version_mismatch(void **state)
{
	struct event_base *base = event_base_new();
	struct side s[2] = { 0 };
	tun_config sc = tt_config("core", "ca"), cc = tt_config("edge", "ca");
	tun_server *srv;
	tun_client *cl;

	(void)state;
	cc.version_min = cc.version_max = PROTO_VERSION + 1;
	srv = start_server(base, &sc, &s[0], 0);
	cl = start_client(base, &cc, &s[1], tun_server_port(srv));
	assert_true(tt_run_until(base, cond_errors_both, s, 5000));
	assert_int_equal(s[0].up + s[1].up, 0);
	char want[128];
	snprintf(want, sizeof want, "no common protocol version: peer edge speaks %d..%d, we speak %d..%d",
		 PROTO_VERSION + 1, PROTO_VERSION + 1, PROTO_VERSION_MIN, PROTO_VERSION);
	assert_non_null(strstr(s[0].err, want));
	assert_non_null(strstr(s[1].err, "no common protocol version"));
	tun_client_free(cl);
	/* overlapping ranges interoperate at the highest common version */
	memset(s, 0, sizeof(s));
	cc.version_min = 1;
	cc.version_max = PROTO_VERSION + 3;
	cl = start_client(base, &cc, &s[1], tun_server_port(srv));
	assert_true(tt_run_until(base, cond_up_both, s, 5000));
	assert_int_equal(tun_conn_version(s[1].conn), PROTO_VERSION);
	tun_client_free(cl);
	tun_server_free(srv);
	event_base_free(base);
}

/* Raw peer sends HELLO then `bad` bytes: the server closes that tunnel with
 * a GOAWAY naming the reason, and keeps serving others. */
static void malformed_case(struct event_base *base, tun_server *srv, struct side *s,
			   int hello, const char *bad, size_t badlen, const char *reason)
{
	struct raw r;
	SSL_CTX *ctx;
	char got[2048];
	size_t n;

	memset(s, 0, sizeof(*s));
	raw_connect(&r, base, tun_server_port(srv), 1, &ctx);
	assert_true(tt_run_until(base, tt_flag, &r.connected, 5000));
	if (hello)
		raw_hello(&r, 1, 1);
	bufferevent_write(r.bev, bad, badlen);
	if (!tt_run_until(base, tt_flag, &r.closed, 5000))
		fail_msg("case '%s': peer not closed; server up %d down %d err '%s' why '%s'",
			 reason, s->up, s->down, s->err, s->why);
	assert_true(tt_run_until(base, cond_server_err, s, 5000));
	const char *msg = hello ? s->why : s->err;
	if (!strstr(msg, reason) || !strstr(msg, "tunnel from 127.0.0.1:"))
		fail_msg("server said '%s', expected '%s'", msg, reason);
	/* the GOAWAY carried the reason to the peer */
	n = evbuffer_get_length(r.in);
	if (n > sizeof(got) - 1)
		n = sizeof(got) - 1;
	evbuffer_remove(r.in, got, n);
	for (size_t i = 0; i < n; i++)
		if (!got[i])
			got[i] = ' ';
	got[n] = 0;
	if (!strstr(got, reason))
		fail_msg("GOAWAY text does not carry '%s'", reason);
	raw_free(&r, ctx);
}

static void test_malformed_frame_closes_tunnel(void **state)
{
	struct event_base *base = event_base_new();
	struct side s = { 0 }, c = { 0 };
	tun_config sc = tt_config("core", "ca"), cc = tt_config("edge", "ca");
	tun_server *srv = start_server(base, &sc, &s, 0);
	tun_client *cl;

	(void)state;
	malformed_case(base, srv, &s, 1, "\xff\0\0\0\0\0\0\0", 8, "unknown frame type 255");
	malformed_case(base, srv, &s, 1, "\x03\0\0\x04\0\0\0\x01" "abcd", 12, "never opened");
	malformed_case(base, srv, &s, 1, "\x03\0\x7f\xff\0\0\0\x01", 8, "over limit");
	malformed_case(base, srv, &s, 0, "\x09\0\0\x08\0\0\0\0" "12345678", 16, "first frame is not HELLO");
	/* a DATA beyond the credit: OPEN, then more than the initial window */
	{
		static char big[PROTO_INITIAL_WINDOW + 2 * (PROTO_MAX_PAYLOAD + 8) + 64];
		tun_frame f = { .type = PROTO_OPEN, .sid = 1 };
		size_t off;
		int n;

		tun_target_parse(&f.u.open.target, "127.0.0.1", 9);
		n = tun_frame_encode(&f, (uint8_t *)big, sizeof(big));
		off = (size_t)n;
		while (off + 8 + PROTO_MAX_PAYLOAD <= sizeof(big)) {
			tun_frame_header((uint8_t *)big + off, PROTO_DATA, 1, PROTO_MAX_PAYLOAD);
			off += 8 + PROTO_MAX_PAYLOAD;
		}
		malformed_case(base, srv, &s, 1, big, off, "beyond the granted credit");
	}
	/* the server still serves a well-behaved edge */
	cl = start_client(base, &cc, &c, tun_server_port(srv));
	assert_true(tt_run_until(base, tt_flag, &c.up, 5000));
	tun_client_free(cl);
	tun_server_free(srv);
	event_base_free(base);
}

/* A peer that stops answering PINGs while its TCP still acknowledges them
 * (a frozen process, no loss to explain the silence) is declared dead after
 * the timeout, not the stall bound. */
static void test_keepalive_timeout(void **state)
{
	struct event_base *base = event_base_new();
	struct side s = { 0 };
	tun_config sc = tt_config("core", "ca");
	tun_server *srv;
	struct raw r;
	SSL_CTX *ctx;

	(void)state;
	sc.keepalive_ms = 50;
	sc.keepalive_timeout_ms = 300;
	srv = start_server(base, &sc, &s, 0);
	raw_connect(&r, base, tun_server_port(srv), 1, &ctx);
	assert_true(tt_run_until(base, tt_flag, &r.connected, 5000));
	raw_hello(&r, 1, 1);    /* then never answers a PING */
	assert_true(tt_run_until(base, tt_flag, &s.up, 5000));
	double t0 = tt_now_ms();
	assert_true(tt_run_until(base, tt_flag, &s.down, 5000));
	assert_true(tt_now_ms() - t0 < 2000);
	assert_non_null(strstr(s.why, "keepalive timeout: no frame for"));
	assert_non_null(strstr(s.why, "(its TCP still answers)"));
	raw_free(&r, ctx);
	tun_server_free(srv);
	event_base_free(base);
}

struct rst_owner {
	int reset_code, resets;
};

static void owner_reset(tun_stream *st, void *arg, int code)
{
	struct rst_owner *o = arg;

	(void)st;
	o->resets++;
	o->reset_code = code;
}

static void test_reconnect_backoff_and_down(void **state)
{
	struct event_base *base = event_base_new();
	struct side s[2] = { 0 };
	tun_config sc = tt_config("core", "ca"), cc = tt_config("edge", "ca");
	tun_server *srv = start_server(base, &sc, &s[0], 0);
	uint16_t port = tun_server_port(srv);
	tun_stream_cbs scb = { .on_reset = owner_reset };
	struct rst_owner own = { 0 };
	tun_open_info oi = { .policy = PROTO_POLICY_FULL };
	tun_client *cl;
	tun_stream *st;
	int err, never = 0;

	(void)state;
	tun_server_free(srv);   /* nothing listens on port now */
	cl = start_client(base, &cc, &s[1], port);
	tt_run_until(base, tt_flag, &never, 300);
	/* refused attempts, spaced by a backoff growing 20 -> 200 ms: a few, not hundreds */
	assert_true(s[1].errors >= 2 && s[1].errors <= 12);
	assert_non_null(strstr(s[1].err, "Connection refused"));
	st = tun_client_open(cl, &oi, &scb, &own, &err);
	assert_null(st);
	assert_int_equal(err, TUN_EDOWN);
	srv = start_server(base, &sc, &s[0], port);
	assert_true(tt_run_until(base, cond_up_both, s, 5000));
	tun_target_parse(&oi.target, "10.0.0.1", 80);
	st = tun_client_open(cl, &oi, &scb, &own, &err);
	assert_non_null(st);
	/* the core goes away: the edge's streams are reset, the tunnel redials */
	tun_server_free(srv);
	assert_true(tt_run_until(base, tt_flag, &s[1].down, 5000));
	fprintf(stderr, "  edge saw: %s\n", s[1].why);
	assert_non_null(strstr(s[1].why, "tunnel to 127.0.0.1:"));
	assert_int_equal(own.resets, 1);
	assert_int_equal(own.reset_code, PROTO_RST_TUNNEL_DOWN);
	assert_null(tun_stream_conn(st));
	assert_int_equal(tun_stream_write(st, "x", 1), TUN_ECLOSED);
	tun_stream_free(st);
	memset(s, 0, sizeof(s));
	srv = start_server(base, &sc, &s[0], port);
	assert_true(tt_run_until(base, cond_up_both, s, 5000));
	tun_client_free(cl);
	tun_server_free(srv);
	event_base_free(base);
}

static int cond_three(void *arg)
{
	struct side *s = arg;

	return s[0].up == 3 && s[1].up == 3;
}

static void test_parallel_connections(void **state)
{
	struct event_base *base = event_base_new();
	struct side s[2] = { 0 };
	tun_config sc = tt_config("core", "ca"), cc = tt_config("edge", "ca");
	tun_server *srv = start_server(base, &sc, &s[0], 0);
	tun_client *cl;
	tun_open_info oi = { .policy = PROTO_POLICY_FULL };
	tun_stream *st[6];
	int err;

	(void)state;
	cc.conns = 3;
	cl = start_client(base, &cc, &s[1], tun_server_port(srv));
	assert_true(tt_run_until(base, cond_three, s, 5000));
	assert_int_equal(tun_client_up(cl), 3);
	assert_int_equal(tun_server_up(srv), 3);
	tun_target_parse(&oi.target, "10.0.0.1", 80);
	/* streams spread over the connections (least loaded first) */
	for (int i = 0; i < 6; i++) {
		st[i] = tun_client_open(cl, &oi, NULL, NULL, &err);
		assert_non_null(st[i]);
	}
	for (int i = 0; i < 6; i++)
		assert_int_equal(tun_conn_streams(tun_stream_conn(st[i])), 2);
	for (int i = 0; i < 6; i++)
		tun_stream_free(st[i]);
	tun_client_free(cl);
	tun_server_free(srv);
	event_base_free(base);
}

static int cond_opened(void *arg)
{
	return ((struct side *)arg)->opened > 0;
}

/* A client's DiffServ class rides in OPEN to a peer that has PROTO_CAP_DSCP;
 * to one without it (an older core) the OPEN goes without it, and the
 * stream is still opened. */
static void test_open_class_needs_cap(void **state)
{
	(void)state;
	for (int old = 0; old < 2; old++) {
		struct event_base *base = event_base_new();
		struct side s[2] = { 0 };
		tun_config sc = tt_config("core", "ca"), cc = tt_config("edge", "ca");
		if (old)
			sc.caps = PROTO_CAP_ALL & ~PROTO_CAP_DSCP;
		tun_server *srv = start_server(base, &sc, &s[0], 0);
		tun_client *cl = start_client(base, &cc, &s[1], tun_server_port(srv));
		tun_open_info oi = { .policy = PROTO_POLICY_FULL, .flags = PROTO_OPEN_F_DSCP, .dscp = 46 };
		int err;
		assert_true(tt_run_until(base, cond_up_both, s, 5000));
		assert_int_equal(!!(tun_conn_caps(s[1].conn) & PROTO_CAP_DSCP), !old);
		tun_target_parse(&oi.target, "10.0.0.1", 80);
		tun_stream *st = tun_client_open(cl, &oi, NULL, NULL, &err);
		assert_non_null(st);
		assert_int_equal(tun_stream_write(st, "x", 1), 0);
		assert_true(tt_run_until(base, cond_opened, &s[0], 5000));
		assert_int_equal(s[0].errors + s[0].down, 0);
		assert_int_equal(s[0].open.flags, old ? 0 : PROTO_OPEN_F_DSCP);
		assert_int_equal(s[0].open.dscp, old ? 0 : 46);
		tun_stream_free(st);
		tun_client_free(cl);
		tun_server_free(srv);
		event_base_free(base);
	}
}

static void test_ipv6_and_server_name(void **state)
{
	struct event_base *base = event_base_new();
	struct side s[2] = { 0 };
	tun_config sc = tt_config("core", "ca"), cc = tt_config("edge", "ca");
	char err[512];
	tun_server *srv = tun_server_new(base, &sc, "::1", 0, &side_cbs, &s[0], err, sizeof(err));
	tun_client *cl;

	(void)state;
	if (!srv) {
		fprintf(stderr, "  no IPv6 loopback (%s): skipped\n", err);
		event_base_free(base);
		skip();
	}
	cc.peer_name = "core";
	cl = tun_client_new(base, &cc, "::1", tun_server_port(srv), &side_cbs, &s[1], err, sizeof(err));
	assert_non_null(cl);
	assert_true(tt_run_until(base, cond_up_both, s, 5000));
	assert_non_null(strstr(tun_conn_peer(s[0].conn), "[::1]:"));
	assert_non_null(strstr(tun_conn_peer(s[1].conn), "[::1]:"));
	tun_client_free(cl);
	/* a server whose certificate does not carry the expected name is refused */
	memset(s, 0, sizeof(s));
	cc.peer_name = "core.other.example";
	cl = tun_client_new(base, &cc, "::1", tun_server_port(srv), &side_cbs, &s[1], err, sizeof(err));
	assert_true(tt_run_until(base, tt_flag, &s[1].errors, 5000));
	assert_non_null(strstr(s[1].err, "hostname mismatch"));
	assert_non_null(strstr(s[1].err, "it must carry the name core.other.example")); /* the name required */
	assert_int_equal(s[1].up, 0);
	tun_client_free(cl);
	tun_server_free(srv);
	/* a server refusing clients whose certificate carries its role's name:
	 * its own certificate, posing as a client's, is refused in the handshake
	 * (logged there; the client hears a bad_certificate alert) */
	memset(s, 0, sizeof(s));
	sc.refuse_name = "core";
	srv = tun_server_new(base, &sc, "::1", 0, &side_cbs, &s[0], err, sizeof(err));
	assert_non_null(srv);
	tun_config posing = tt_config("core", "ca");
	cl = tun_client_new(base, &posing, "::1", tun_server_port(srv), &side_cbs, &s[1], err, sizeof(err));
	assert_true(tt_run_until(base, tt_flag, &s[0].errors, 5000));
	assert_non_null(strstr(s[0].err, "its certificate carries the name core"));
	assert_null(strstr(s[0].err, "certificate verify failed")); /* said once, by name */
	assert_true(tt_run_until(base, tt_flag, &s[1].errors, 5000));
	assert_non_null(strstr(s[1].err, "alert bad certificate"));
	assert_non_null(strstr(s[1].err, "the peer refused the connection"));
	assert_int_equal(s[0].up + s[1].up, 0);
	tun_client_free(cl);
	memset(s, 0, sizeof(s)); /* an edge's certificate still gets in */
	cc.peer_name = "core";
	cl = tun_client_new(base, &cc, "::1", tun_server_port(srv), &side_cbs, &s[1], err, sizeof(err));
	assert_true(tt_run_until(base, cond_up_both, s, 5000));
	tun_client_free(cl);
	tun_server_free(srv);
	event_base_free(base);
}

static int fd_phases[5];

/* Tuning hook: count phases; share listening ports between servers. */
static void on_fd_hook(void *arg, int fd, int phase)
{
	int one = 1;

	(void)arg;
	fd_phases[phase]++;
	if (phase == TUN_FD_LISTEN)
		assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)), 0);
}

static void test_fd_hook_and_reuseport(void **state)
{
	struct event_base *base = event_base_new();
	struct side s[3] = { 0 };
	tun_config sc = tt_config("core", "ca"), cc = tt_config("edge", "ca");
	tun_cbs cbs = side_cbs;
	char err[512];
	tun_server *a, *b;
	tun_client *cl;

	(void)state;
	cbs.on_fd = on_fd_hook;
	a = tun_server_new(base, &sc, "127.0.0.1", 0, &cbs, &s[0], err, sizeof(err));
	assert_non_null(a);
	/* a second worker's server on the same port */
	b = tun_server_new(base, &sc, "127.0.0.1", tun_server_port(a), &cbs, &s[1], err, sizeof(err));
	if (!b)
		fail_msg("second server: %s", err);
	cc.conns = 4;
	cl = tun_client_new(base, &cc, "127.0.0.1", tun_server_port(a), &cbs, &s[2], err, sizeof(err));
	assert_non_null(cl);
	assert_true(tt_run_until(base, tt_flag, &s[2].up, 5000));
	int never = 0;
	tt_run_until(base, tt_flag, &never, 200);
	assert_int_equal(s[0].up + s[1].up, 4);
	assert_int_equal(fd_phases[TUN_FD_LISTEN], 2);
	assert_int_equal(fd_phases[TUN_FD_PRE_CONNECT], 4);
	assert_int_equal(fd_phases[TUN_FD_CONNECTED], 4);
	assert_int_equal(fd_phases[TUN_FD_ACCEPTED], 4);
	tun_client_free(cl);
	tun_server_free(a);
	tun_server_free(b);
	event_base_free(base);
}

static int cond_data(void *arg)
{
	return ((struct side *)arg)->data_bytes >= 8000;
}

/* Write 8000 bytes on each of n streams of c, wait until the server's side s
 * has them all; returns the largest DATA frame it got. */
static size_t send_each(struct event_base *base, tun_stream **st, int n, struct side *s)
{
	static const uint8_t buf[8000];

	s->data_bytes = s->data_max = 0;
	for (int i = 0; i < n; i++)
		assert_int_equal(tun_stream_write(st[i], buf, sizeof buf), 0);
	assert_true(tt_run_until(base, cond_data, s, 5000));
	int never = 0;
	tt_run_until(base, tt_flag, &never, 50 * (n - 1));
	assert_int_equal(s->data_bytes, 8000 * (size_t)n);
	return s->data_max;
}

static int notsent_lowat(tun_conn *c)
{
	int v = -1;
	socklen_t len = sizeof v;

	assert_int_equal(getsockopt(tun_conn_fd(c), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, &len), 0);
	return v;
}

/* tun_conn_set_shared: while a connection carries two streams, their turns
 * and the socket's NOTSENT_LOWAT take the shared values; with one stream
 * again, the link's. */
static void test_shared_queues(void **state)
{
	struct event_base *base = event_base_new();
	struct side s[2] = { 0 };
	tun_config sc = tt_config("core", "ca"), cc = tt_config("edge", "ca");
	tun_server *srv = start_server(base, &sc, &s[0], 0);
	tun_client *cl = start_client(base, &cc, &s[1], tun_server_port(srv));
	tun_open_info oi = { .policy = PROTO_POLICY_FULL };
	tun_shared sh = { .quantum = 1024, .out_buffer = 1024, .notsent_lowat = 2048, .notsent_solo = 8192 };
	tun_stream *st[2];
	int err;

	(void)state;
	assert_true(tt_run_until(base, cond_up_both, s, 5000));
	tun_conn *c = s[1].conn;
	tun_conn_set_link(c, 1544000, 4096, 4096);
	tun_conn_set_shared(c, &sh);
	tun_target_parse(&oi.target, "10.0.0.1", 80);
	for (int i = 0; i < 2; i++)
		assert_non_null(st[i] = tun_conn_open(c, &oi, NULL, NULL, &err));
	assert_int_equal(send_each(base, st, 2, &s[0]), 1024);
	assert_int_equal(notsent_lowat(c), 2048);
	tun_stream_reset(st[1], PROTO_RST_CANCEL);
	tun_stream_free(st[1]);
	assert_int_equal(send_each(base, st, 1, &s[0]), 4096);
	assert_int_equal(notsent_lowat(c), 8192);
	tun_conn_set_shared(c, NULL); /* off: two streams keep the link's turns */
	assert_non_null(st[1] = tun_conn_open(c, &oi, NULL, NULL, &err));
	assert_int_equal(send_each(base, st, 2, &s[0]), 4096);
	for (int i = 0; i < 2; i++)
		tun_stream_free(st[i]);
	tun_client_free(cl);
	tun_server_free(srv);
	event_base_free(base);
}

static void test_handshake_timeout(void **state)
{
	struct event_base *base = event_base_new();
	struct side s = { 0 };
	tun_config sc = tt_config("core", "ca");
	struct sockaddr_in sin = { .sin_family = AF_INET };
	tun_server *srv;
	int fd;

	(void)state;
	sc.handshake_timeout_ms = 200;
	srv = start_server(base, &sc, &s, 0);
	/* a TCP peer that never starts TLS */
	sin.sin_port = htons(tun_server_port(srv));
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	double t0 = tt_now_ms();
	assert_true(tt_run_until(base, tt_flag, &s.errors, 5000));
	assert_true(tt_now_ms() - t0 < 2000);
	assert_non_null(strstr(s.err, "handshake timeout"));
	close(fd);
	tun_server_free(srv);
	event_base_free(base);
}

static void test_bad_config(void **state)
{
	struct event_base *base = event_base_new();
	tun_config cc = tt_config("edge", "ca");
	char err[512];

	(void)state;
	cc.key_file = "/nonexistent/edge.key";
	assert_null(tun_client_new(base, &cc, "127.0.0.1", 1, &side_cbs, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "/nonexistent/edge.key"));
	cc = tt_config("edge", "ca");
	cc.key_file = tt_config("core", "ca").key_file;   /* not edge's key */
	assert_null(tun_client_new(base, &cc, "127.0.0.1", 1, &side_cbs, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "is not the key of the certificate in tls_cert"));
	cc = tt_config("edge", "ca");
	cc.window = 10;
	assert_null(tun_client_new(base, &cc, "127.0.0.1", 1, &side_cbs, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "out of range"));
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mutual_auth_ok),
		cmocka_unit_test(test_open_class_needs_cap),
		cmocka_unit_test(test_wrong_ca_refused),
		cmocka_unit_test(test_no_client_cert_refused),
		cmocka_unit_test(test_version_mismatch),
		cmocka_unit_test(test_malformed_frame_closes_tunnel),
		cmocka_unit_test(test_keepalive_timeout),
		cmocka_unit_test(test_reconnect_backoff_and_down),
		cmocka_unit_test(test_parallel_connections),
		cmocka_unit_test(test_shared_queues),
		cmocka_unit_test(test_ipv6_and_server_name),
		cmocka_unit_test(test_bad_config),
		cmocka_unit_test(test_handshake_timeout),
		cmocka_unit_test(test_fd_hook_and_reuseport),
	};
	return cmocka_run_group_tests(tests, tt_setup, tt_teardown);
}
