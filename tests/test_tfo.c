/* test_tfo.c: socket tuning verified with getsockopt on real sockets, TCP_INFO
 * on a live loopback connection, interception listeners and the dialer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "tfo.h"
#include "test_netns.h"

/* getsockopt of an int. */
static int getint(int fd, int level, int opt)
{
	int v = -1;
	socklen_t len = sizeof v;
	assert_int_equal(getsockopt(fd, level, opt, &v, &len), 0);
	return v;
}

/* A loopback listener on an ephemeral port; *port gets it. */
static int loop_listener(int family, uint16_t *port)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	int fd = socket(family, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	if (family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)&ss;
		s->sin_family = AF_INET;
		s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof *s;
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
		s->sin6_family = AF_INET6;
		s->sin6_addr = in6addr_loopback;
		len = sizeof *s;
	}
	assert_int_equal(bind(fd, (struct sockaddr *)&ss, len), 0);
	assert_int_equal(listen(fd, 16), 0);
	len = sizeof ss;
	assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
	*port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
			: ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

/* 127.0.0.1:port. */
static struct sockaddr_in v4(uint16_t port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };
	s.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return s;
}

/* Waits until fd is writable (a non-blocking connect finished). */
static void wait_writable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	assert_int_equal(poll(&p, 1, 5000), 1);
}

struct bdp_case {
	uint64_t rate;
	uint32_t rtt;
	uint64_t want;
};

/* Bandwidth x delay x 4, floored and capped. */
static void test_bdp(void **state)
{
	static const struct bdp_case bc[] = {
		{ 0, 40000, 0 }, { 1544000, 0, 0 },
		{ 1544000, 40000, TFO_BUF_MIN },                 /* T1: 31 KB -> floor */
		{ 3000000, 300000, 450000 },                     /* highlat */
		{ 1000000000ull, 100000, 50000000 },             /* 1 Gbit/s x 100 ms */
		{ 100000000ull, 300000, 15000000 },              /* 100 Mbit/s x 300 ms */
		{ 10000000000000ull, 60000000, TFO_BUF_MAX },    /* capped */
		{ 8ull << 38, 1u << 26, TFO_BUF_MAX },          /* rate/8 x rtt = 2^64: no wrap to 0 */
	};
	for (size_t i = 0; i < sizeof bc / sizeof bc[0]; i++)
		if (tfo_bdp_bytes(bc[i].rate, bc[i].rtt) != bc[i].want)
			fail_msg("case %zu: got %llu want %llu", i,
				 (unsigned long long)tfo_bdp_bytes(bc[i].rate, bc[i].rtt),
				 (unsigned long long)bc[i].want);
}

/* Every option tfo_tune_wan promises is visible through getsockopt. */
static void test_tune_wan(void **state)
{
	char err[256], cc[16] = "";
	struct tfo_tuned t;
	struct tfo_opts o = { .rate_bps = 100000000, .rtt_us = 100000, .notsent_lowat = 65536,
			      .pace_bps = 95000000, .keepidle = 7, .keepintvl = 3, .keepcnt = 2, .user_timeout_ms = 5000 };
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	assert_int_equal(tfo_tune_wan(fd, &o, &t, err, sizeof err), 0);
	socklen_t len = sizeof cc;
	assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &len), 0);
	assert_string_equal(cc, t.cc);
	assert_string_equal(cc, tfo_cc_available("bbr") ? "bbr" : "cubic");
	assert_int_equal(t.bufsize, 5000000);
	/* The kernel reports twice the requested size (FORCE works as root;
	 * otherwise net.core.wmem_max caps it). */
	if (geteuid() == 0) {
		assert_true(getint(fd, SOL_SOCKET, SO_SNDBUF) >= 2 * 5000000);
		assert_true(getint(fd, SOL_SOCKET, SO_RCVBUF) >= 2 * 5000000);
	}
	assert_int_equal(getint(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT), 65536);
	unsigned long pace = 0;
	socklen_t plen = sizeof pace;
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &pace, &plen), 0);
	assert_int_equal(pace, 95000000 / 8);
	assert_int_equal(t.pace_bps, 95000000);
	assert_int_equal(getint(fd, IPPROTO_TCP, TCP_NODELAY), 1);
	assert_int_equal(getint(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
	assert_int_equal(getint(fd, IPPROTO_TCP, TCP_KEEPIDLE), 7);
	assert_int_equal(getint(fd, IPPROTO_TCP, TCP_KEEPINTVL), 3);
	assert_int_equal(getint(fd, IPPROTO_TCP, TCP_KEEPCNT), 2);
	assert_int_equal(getint(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 5000);
	close(fd);

	/* A told link of 100 Gbit/s and 10 s: held to buf_max. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	struct tfo_opts big = { .rate_bps = 100000000000ull, .rtt_us = 10000000, .buf_max = 1 << 20 };
	assert_int_equal(tfo_tune_wan(fd, &big, &t, err, sizeof err), 0);
	assert_int_equal(t.bufsize, 1 << 20);
	assert_true(getint(fd, SOL_SOCKET, SO_SNDBUF) <= 2 * (1 << 20));
	big.buf_max = 0;
	assert_int_equal(tfo_tune_wan(fd, &big, &t, err, sizeof err), 0);
	assert_int_equal(t.bufsize, TFO_BUF_MAX);
	close(fd);

	/* Defaults, no hints: buffers stay autotuned. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(tfo_tune_wan(fd, NULL, &t, err, sizeof err), 0);
	assert_int_equal(t.bufsize, 0);
	assert_int_equal(t.pace_bps, 0);
	plen = sizeof pace;
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &pace, &plen), 0);
	assert_true(pace == ~0UL || pace == ~0U); /* no cap */
	assert_int_equal(getint(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT), TFO_NOTSENT_LOWAT_DEFAULT);
	assert_int_equal(getint(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), TFO_USER_TIMEOUT_DEFAULT);
	close(fd);
}

/* An unknown congestion control falls back to cubic; errors fill err. */
static void test_cc_fallback(void **state)
{
	char err[256] = "", used[16];
	int fb = 0, fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_false(tfo_cc_available("no_such_cc"));
	assert_true(tfo_cc_available("cubic"));
	assert_int_equal(tfo_set_cc(fd, "no_such_cc", used, sizeof used, &fb, err, sizeof err), 0);
	assert_string_equal(used, "cubic");
	assert_int_equal(fb, 1);
	assert_int_equal(tfo_set_cc(fd, "cubic", used, sizeof used, &fb, err, sizeof err), 0);
	assert_int_equal(fb, 0);
	close(fd);
	assert_int_equal(tfo_set_cc(fd, "cubic", used, sizeof used, &fb, err, sizeof err), -1);
	assert_string_equal(err, "TCP_CONGESTION: Bad file descriptor");
	assert_int_equal(tfo_set_bufs(-1, 1000, err, sizeof err), -1);
	assert_int_equal(tfo_tune_lan(-1, err, sizeof err), -1);
	assert_string_equal(err, "TCP_NODELAY: Bad file descriptor");
}

/* TCP_INFO on a live connection; retune grows the buffers. */
static void test_info_retune(void **state)
{
	char err[256], buf[65536] = { 0 };
	uint16_t port;
	int l = loop_listener(AF_INET, &port);
	struct sockaddr_in a = v4(port);
	int c = tfo_dial((struct sockaddr *)&a, sizeof a, 0, 0, err, sizeof err);
	assert_true(c >= 0);
	wait_writable(c);
	assert_int_equal(tfo_connect_result(c, err, sizeof err), 0);
	int s = accept(l, NULL, NULL);
	assert_true(s >= 0);
	assert_int_equal(tfo_tune_lan(s, err, sizeof err), 0);
	for (int i = 0; i < 16; i++) {
		wait_writable(c);
		ssize_t n = write(c, buf, sizeof buf);
		assert_true(n > 0);
		while (read(s, buf, sizeof buf) == sizeof buf)
			break;
	}
	struct tfo_info ti;
	assert_int_equal(tfo_info(c, &ti, err, sizeof err), 0);
	assert_int_equal(ti.state, TCP_ESTABLISHED);
	assert_true(ti.rtt_us > 0);
	assert_true(ti.bytes_acked > 0);
	assert_true(ti.snd_mss > 0);
	uint64_t sz = 0;
	struct tfo_opts o = { .rate_bps = 1000000000ull };
	assert_true(tfo_retune(c, &o, &sz, err, sizeof err) >= 0);
	assert_true(sz >= TFO_BUF_MIN);
	/* sized now: a second call has nothing to grow */
	assert_int_equal(tfo_retune(c, &o, &sz, err, sizeof err), 0);
	if (geteuid() == 0)
		assert_true((uint64_t)getint(c, SOL_SOCKET, SO_SNDBUF) >= 2 * TFO_BUF_MIN);
	close(c);
	close(s);
	close(l);
	assert_int_equal(tfo_info(c, &ti, err, sizeof err), -1);
}

/* The dialer reports a refused connection through tfo_connect_result. */
static void test_dial_refused(void **state)
{
	char err[256];
	uint16_t port;
	int l = loop_listener(AF_INET, &port);
	close(l); /* nothing listens there now */
	struct sockaddr_in a = v4(port);
	int c = tfo_dial((struct sockaddr *)&a, sizeof a, 0, 0, err, sizeof err);
	assert_true(c >= 0);
	wait_writable(c);
	assert_int_equal(tfo_connect_result(c, err, sizeof err), -1);
	assert_int_equal(errno, ECONNREFUSED);
	assert_string_equal(err, "connect: Connection refused");
	close(c);
	if (geteuid() == 0) {
		c = tfo_dial((struct sockaddr *)&a, sizeof a, 0x77, 0, err, sizeof err);
		assert_true(c >= 0);
		assert_int_equal(getint(c, SOL_SOCKET, SO_MARK), 0x77);
		close(c);
	}
}

/* A TPROXY listener (dual-stack) reports the local address as the original
 * destination; a REDIRECT lookup without a NAT entry fails with a message. */
static void test_icpt_listener(void **state)
{
	char err[256], s1[64];
	struct sockaddr_in6 any = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
	enum tfo_icpt_mode mode = geteuid() == 0 ? TFO_ICPT_TPROXY : TFO_ICPT_REDIRECT;
	int l = tfo_icpt_listen((struct sockaddr *)&any, sizeof any, mode, 0, err, sizeof err);
	assert_true(l >= 0);
	struct sockaddr_in6 la;
	socklen_t len = sizeof la;
	assert_int_equal(getsockname(l, (struct sockaddr *)&la, &len), 0);
	uint16_t port = ntohs(la.sin6_port);
	if (mode == TFO_ICPT_TPROXY)
		assert_int_equal(getint(l, SOL_IP, IP_TRANSPARENT), 1);

	struct sockaddr_in a = v4(port);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof a), 0);
	struct pollfd p = { .fd = l, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 5000), 1);
	int s = accept(l, NULL, NULL);
	assert_true(s >= 0);
	struct sockaddr_storage dst;
	socklen_t dlen;
	assert_int_equal(tfo_icpt_orig_dst(s, TFO_ICPT_TPROXY, &dst, &dlen, err, sizeof err), 0);
	assert_int_equal(dst.ss_family, AF_INET); /* v4-mapped reported as IPv4 */
	assert_int_equal(dlen, sizeof(struct sockaddr_in));
	char want[64];
	snprintf(want, sizeof want, "127.0.0.1:%u", port);
	assert_string_equal(tfo_addr_str((struct sockaddr *)&dst, s1, sizeof s1), want);
	/* Connected straight to the listener: it is itself. */
	assert_true(tfo_icpt_is_self((struct sockaddr *)&dst, port));
	assert_false(tfo_icpt_is_self((struct sockaddr *)&dst, (uint16_t)(port + 1)));
	struct sockaddr_in far = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "192.0.2.1", &far.sin_addr);
	assert_false(tfo_icpt_is_self((struct sockaddr *)&far, port));
	assert_int_equal(tfo_icpt_orig_dst(s, TFO_ICPT_REDIRECT, &dst, &dlen, err, sizeof err), -1);
	assert_non_null(strstr(err, "SO_ORIGINAL_DST"));
	close(s);
	close(c);
	close(l);
}

/* Class names both ways. */
static void test_dscp_names(void **state)
{
	static const struct { const char *in; int v; const char *name; } k[] = {
		{ "ef", 46, "ef" }, { "EF", 46, "ef" }, { "af11", 10, "af11" }, { "af43", 38, "af43" },
		{ "cs0", 0, "cs0" }, { "cs7", 56, "cs7" }, { "default", 0, "cs0" }, { "44", 44, "44" },
		{ "0x2e", 46, "ef" }, { "63", 63, "63" }, { "12", 12, "af12" },
		{ "af14", -1, NULL }, { "af51", -1, NULL }, { "cs8", -1, NULL }, { "64", -1, NULL },
		{ "-1", -1, NULL }, { "", -1, NULL }, { "ef1", -1, NULL }, { "4x", -1, NULL },
	};
	char b[16];
	for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
		if (tfo_dscp_parse(k[i].in) != k[i].v)
			fail_msg("'%s': %d, want %d", k[i].in, tfo_dscp_parse(k[i].in), k[i].v);
		if (k[i].name)
			assert_string_equal(tfo_dscp_name(k[i].v, b, sizeof b), k[i].name);
	}
}

/* A connection from a client marking its packets with class `dscp` to a
 * listener of family lfam (the client: cfam, v4 on a v6 listener is mapped);
 * the accepted socket reads the class, marks itself with it, reads it back. */
static void dscp_case(int lfam, int cfam, int dscp)
{
	char err[128];
	uint16_t port;
	int l = loop_listener(lfam, &port), one = 1;
	tfo_dscp_recv_on(l);
	if (lfam == AF_INET6 && cfam == AF_INET) { /* a dual-stack listener instead */
		close(l);
		struct sockaddr_in6 any = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
		l = socket(AF_INET6, SOCK_STREAM, 0);
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		assert_int_equal(bind(l, (struct sockaddr *)&any, sizeof any), 0);
		assert_int_equal(listen(l, 4), 0);
		socklen_t len = sizeof any;
		getsockname(l, (struct sockaddr *)&any, &len);
		port = ntohs(any.sin6_port);
		tfo_dscp_recv_on(l);
	}
	int c = socket(cfam, SOCK_STREAM, 0);
	assert_int_equal(tfo_dscp_set(c, dscp, err, sizeof err), 0);
	assert_int_equal(tfo_dscp_get(c), dscp);
	if (cfam == AF_INET) {
		struct sockaddr_in a = v4(port);
		assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof a), 0);
	} else {
		struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = in6addr_loopback };
		assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof a), 0);
	}
	int s = accept(l, NULL, NULL);
	assert_true(s >= 0);
	assert_int_equal(send(c, "x", 1, 0), 1);
	char b;
	assert_int_equal(recv(s, &b, 1, 0), 1);
	if (tfo_dscp_peer(s) != dscp)
		fail_msg("listener family %d, client %d: peer class %d, want %d", lfam, cfam, tfo_dscp_peer(s), dscp);
	assert_int_equal(tfo_dscp_get(s), 0);
	assert_int_equal(tfo_dscp_set(s, dscp, err, sizeof err), 0);
	assert_int_equal(tfo_dscp_get(s), dscp);
	close(s);
	close(c);
	close(l);
}

/* The client's class read on the accepted socket: IPv4, IPv6, mapped IPv4;
 * an unmarked client reads as 0. */
static void test_dscp_peer(void **state)
{
	dscp_case(AF_INET, AF_INET, 46);
	dscp_case(AF_INET6, AF_INET6, 34);
	dscp_case(AF_INET6, AF_INET, 10);
	dscp_case(AF_INET, AF_INET, 0);
}

/* Formatting of both families. */
static void test_addr_str(void **state)
{
	char b[64];
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(443) };
	inet_pton(AF_INET6, "2001:db8::1", &s6.sin6_addr);
	assert_string_equal(tfo_addr_str((struct sockaddr *)&s6, b, sizeof b), "[2001:db8::1]:443");
	struct sockaddr_in s4 = v4(80);
	assert_string_equal(tfo_addr_str((struct sockaddr *)&s4, b, sizeof b), "127.0.0.1:80");
	inet_pton(AF_INET6, "::ffff:10.99.1.2", &s6.sin6_addr); /* an IPv4 client of a [::] listener */
	assert_string_equal(tfo_addr_str((struct sockaddr *)&s6, b, sizeof b), "10.99.1.2:443");
}

int main(void)
{
	private_netns();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bdp),
		cmocka_unit_test(test_tune_wan),
		cmocka_unit_test(test_cc_fallback),
		cmocka_unit_test(test_info_retune),
		cmocka_unit_test(test_dial_refused),
		cmocka_unit_test(test_icpt_listener),
		cmocka_unit_test(test_addr_str),
		cmocka_unit_test(test_dscp_names),
		cmocka_unit_test(test_dscp_peer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
