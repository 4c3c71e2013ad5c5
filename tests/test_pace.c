/* test_pace.c: the shared pacing cap of proxy/pace.h: how a group's rate is
 * shared, and px_pace_update on real loopback TCP sockets. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "../proxy/pace.h"
#include "tfo.h"

#define M 1000000u

static void test_share_alone(void **state)
{
	(void)state;
	struct px_pace_use u[1] = { { 0, 0 } };
	assert_int_equal(px_pace_share(u, 1, 0, 38 * M), 38 * M);
	u[0] = (struct px_pace_use){ 50 * M, 1 };
	assert_int_equal(px_pace_share(u, 1, 0, 38 * M), 38 * M);
}

/* Two busy connections split the cap; one busy next to an idle one takes
 * what the idle one leaves; the idle one keeps an equal share to start at. */
static void test_share_two(void **state)
{
	(void)state;
	struct px_pace_use both[2] = { { 19 * M, 1 }, { 19 * M, 1 } };
	assert_int_equal(px_pace_share(both, 2, 0, 38 * M), 19 * M);
	assert_int_equal(px_pace_share(both, 2, 1, 38 * M), 19 * M);
	struct px_pace_use one[2] = { { 19 * M, 1 }, { 0, 0 } };
	assert_int_equal(px_pace_share(one, 2, 0, 38 * M), 38 * M);
	assert_int_equal(px_pace_share(one, 2, 1, 38 * M), 19 * M);
	/* an interactive one at 4 Mbit/s: counted at 5, keeps an equal share */
	struct px_pace_use some[2] = { { 30 * M, 1 }, { 4 * M, 0 } };
	assert_int_equal(px_pace_share(some, 2, 0, 38 * M), 33 * M);
	assert_int_equal(px_pace_share(some, 2, 1, 38 * M), 19 * M);
	/* next to an idle one, twice its rate, up to the whole cap */
	struct px_pace_use grow[2] = { { 12 * M, 0 }, { 0, 0 } };
	assert_int_equal(px_pace_share(grow, 2, 0, 38 * M), 24 * M);
	grow[0].rate_bps = 25 * M;
	assert_int_equal(px_pace_share(grow, 2, 0, 38 * M), 38 * M);
	/* two held back by something else (a slow source) at 16 each: each may
	 * take what the other leaves, 38 - 20, but keeps an equal share: their
	 * caps do not add up past the link's (twice their rate would be 32) */
	struct px_pace_use slow[2] = { { 16 * M, 0 }, { 16 * M, 0 } };
	assert_int_equal(px_pace_share(slow, 2, 0, 38 * M), 19 * M);
	slow[1].rate_bps = 8 * M; /* 38 - 10 = 28 left for the first */
	assert_int_equal(px_pace_share(slow, 2, 0, 38 * M), 28 * M);
}

/* A busy connection crowded out by others' use keeps a floor of 1/4n. */
static void test_share_floor(void **state)
{
	(void)state;
	struct px_pace_use u[3] = { { 1 * M, 1 }, { 20 * M, 0 }, { 20 * M, 0 } };
	assert_int_equal(px_pace_share(u, 3, 0, 36 * M), 3 * M);
	u[1].rate_bps = u[2].rate_bps = 2 * M; /* 2.5 + 2.5 counted */
	assert_int_equal(px_pace_share(u, 3, 0, 36 * M), 31 * M);
	struct px_pace_use l3[3] = { { 9 * M, 1 }, { 9 * M, 1 }, { 9 * M, 1 } };
	assert_int_equal(px_pace_share(l3, 3, 2, 36 * M), 12 * M);
}

struct pair { int a, b; };

/* A connected TCP pair over loopback. */
static struct pair tcp_pair(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	int l = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &len), 0);
	struct pair p = { socket(AF_INET, SOCK_STREAM, 0), -1 };
	assert_int_equal(connect(p.a, (struct sockaddr *)&sa, sizeof sa), 0);
	p.b = accept(l, NULL, NULL);
	assert_true(p.b >= 0);
	close(l);
	return p;
}

/* Real sockets: two connections of one peer get half each, a third of
 * another peer the whole; a connection not updated for 3 ticks leaves its
 * group, as does one forgotten; total 0 leaves the socket alone. */
static void test_update_sockets(void **state)
{
	(void)state;
	uint8_t k1[PX_PACE_KEY_LEN], k2[PX_PACE_KEY_LEN];
	memset(k1, 1, sizeof k1);
	memset(k2, 2, sizeof k2);
	struct pair p[3] = { tcp_pair(), tcp_pair(), tcp_pair() };
	uint64_t t = 1000000, tick = PX_PACE_TICK_MS * 1000u;
	assert_int_equal(px_pace_update(k1, &p[0], p[0].a, 10 * M, t), 10 * M);
	assert_int_equal(tfo_pace_get(p[0].a), 10 * M);
	assert_int_equal(px_pace_update(k1, &p[1], p[1].a, 10 * M, t), 5 * M);
	assert_int_equal(px_pace_update(k2, &p[2], p[2].a, 10 * M, t), 10 * M);
	t += tick;
	assert_int_equal(px_pace_update(k1, &p[0], p[0].a, 10 * M, t), 5 * M);
	assert_int_equal(tfo_pace_get(p[0].a), 5 * M);
	assert_int_equal(tfo_pace_get(p[1].a), 5 * M);
	assert_int_equal(tfo_pace_get(p[2].a), 10 * M);
	/* p[1] falls silent: 3 ticks on, p[0] is alone again */
	t += 3 * tick + 1;
	assert_int_equal(px_pace_update(k1, &p[0], p[0].a, 10 * M, t), 10 * M);
	assert_int_equal(px_pace_update(k1, &p[1], p[1].a, 10 * M, t), 5 * M);
	px_pace_forget(&p[1]);
	assert_int_equal(px_pace_update(k1, &p[0], p[0].a, 10 * M, t + tick), 10 * M);
	/* no rate: unpaced, and out of the group */
	assert_int_equal(px_pace_update(k1, &p[0], p[0].a, 0, t + 2 * tick), 0);
	assert_int_equal(px_pace_update(k1, &p[1], p[1].a, 10 * M, t + 2 * tick), 10 * M);
	/* a socket that cannot be read */
	assert_int_equal(px_pace_update(k2, &p[0], -1, 10 * M, t), 0);
	px_pace_forget(&p[1]);
	px_pace_forget(&p[2]);
	for (int i = 0; i < 3; i++) {
		close(p[i].a);
		close(p[i].b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_share_alone),
		cmocka_unit_test(test_share_two),
		cmocka_unit_test(test_share_floor),
		cmocka_unit_test(test_update_sockets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
