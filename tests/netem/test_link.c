/* test_link.c: the link model on a virtual clock: serialisation, delay, the
 * drop-tail queue, seeded loss within its binomial interval, jitter bounds
 * and order. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "link.h"

static struct wn_dir dir(uint64_t rate, uint64_t delay_us, uint64_t jitter_us, double loss,
			 uint64_t limit)
{
	struct wn_dir d = { .rate_bps = rate, .delay_ns = delay_us * 1000,
			    .jitter_ns = jitter_us * 1000, .loss = loss, .limit_bytes = limit };
	return d;
}

/* A packet is due after its serialisation plus the delay; back-to-back
 * packets leave one serialisation time apart. */
static void test_timing(void **state)
{
	struct wn_dir d = dir(8000000, 20000, 0, 0, 100000);    /* 1 byte per µs */
	struct wn_link l;
	unsigned char pkt[1500] = { 0x45 };
	struct wn_pkt *p;

	wn_link_init(&l, &d, 1);
	assert_int_equal(wn_link_offer(&l, pkt, 1000, 0), WN_PASS);
	assert_int_equal(wn_link_offer(&l, pkt, 500, 0), WN_PASS);
	assert_int_equal(wn_link_next_due(&l), 1000000 + 20000000);
	assert_int_equal(wn_link_backlog(&l, 0), 1500);
	assert_null(wn_link_pop_due(&l, 20999999));
	p = wn_link_pop_due(&l, 21000000);
	assert_non_null(p);
	assert_int_equal(p->len, 1000);
	assert_int_equal(p->data[0], 0x45);
	free(p);
	assert_int_equal(wn_link_next_due(&l), 1500000 + 20000000);
	/* a packet arriving after the link went idle starts at its arrival */
	assert_int_equal(wn_link_offer(&l, pkt, 100, 5000000), WN_PASS);
	p = wn_link_pop_due(&l, UINT64_MAX - 1);
	free(p);
	p = wn_link_pop_due(&l, UINT64_MAX - 1);
	assert_int_equal(p->due_ns, 5000000 + 100000 + 20000000);
	free(p);
	assert_int_equal(l.c.out_pkts, 3);
	assert_int_equal(l.c.out_bytes, 1600);
	wn_link_clear(&l);
}

/* The queue holds at most limit bytes of unsent data; the rest is dropped. */
static void test_drop_tail(void **state)
{
	struct wn_dir d = dir(8000000, 0, 0, 0, 3000);
	struct wn_link l;
	unsigned char pkt[1500] = { 0 };

	wn_link_init(&l, &d, 1);
	assert_int_equal(wn_link_offer(&l, pkt, 1500, 0), WN_PASS);
	assert_int_equal(wn_link_offer(&l, pkt, 1500, 0), WN_PASS);
	assert_int_equal(wn_link_offer(&l, pkt, 1, 0), WN_DROP_QUEUE);
	/* 1000 µs later 1000 bytes have left: room for 1000 more */
	assert_int_equal(wn_link_offer(&l, pkt, 1000, 1000000), WN_PASS);
	assert_int_equal(wn_link_offer(&l, pkt, 1, 1000000), WN_DROP_QUEUE);
	assert_int_equal(l.c.drop_queue, 2);
	assert_int_equal(l.c.max_backlog, 3000);
	assert_int_equal(wn_link_offer(&l, pkt, 0, 0), WN_DROP_BAD);
	assert_int_equal(wn_link_offer(&l, pkt, WN_MAX_PKT + 1, 0), WN_DROP_BAD);
	wn_link_clear(&l);
	wn_link_clear(NULL);
}

/* Loss is seeded (same seed, same drops) and within the 99.9 % binomial interval. */
static void test_loss(void **state)
{
	const int n = 200000;
	const double rates[] = { 0.002, 0.01, 0.2 };
	unsigned char pkt[64] = { 0 };

	for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
		struct wn_dir d = dir(0, 0, 0, rates[r], 1 << 20);
		struct wn_link a, b;
		double mean = n * rates[r], sd = sqrt(n * rates[r] * (1 - rates[r]));

		wn_link_init(&a, &d, 42);
		wn_link_init(&b, &d, 42);
		for (int i = 0; i < n; i++) {
			enum wn_verdict va = wn_link_offer(&a, pkt, sizeof pkt, (uint64_t)i);

			assert_int_equal(va, wn_link_offer(&b, pkt, sizeof pkt, (uint64_t)i));
			if (va == WN_PASS) {
				free(wn_link_pop_due(&a, UINT64_MAX - 1));
				free(wn_link_pop_due(&b, UINT64_MAX - 1));
			}
		}
		assert_true(fabs((double)a.c.drop_loss - mean) < 3.29 * sd);
		wn_link_clear(&a);
		wn_link_clear(&b);
	}
}

/* Jitter stays within +-jitter of the delay, spreads over the range, and
 * never reorders packets. */
static void test_jitter(void **state)
{
	struct wn_dir d = dir(0, 30000, 8000, 0, 1 << 20);
	struct wn_link l;
	unsigned char pkt[100] = { 0 };
	uint64_t prev = 0, lo = UINT64_MAX, hi = 0;

	wn_link_init(&l, &d, 7);
	for (uint64_t i = 0; i < 10000; i++) {
		uint64_t now = i * 20000000;     /* 20 ms apart: order never clamps */
		struct wn_pkt *p;
		int64_t extra;

		assert_int_equal(wn_link_offer(&l, pkt, sizeof pkt, now), WN_PASS);
		p = wn_link_pop_due(&l, UINT64_MAX - 1);
		assert_true(p->due_ns >= prev);
		prev = p->due_ns;
		extra = (int64_t)(p->due_ns - now) - 30000000;
		assert_true(extra <= 8000000);
		if ((uint64_t)(extra + 8000000) < lo) lo = (uint64_t)(extra + 8000000);
		if ((uint64_t)(extra + 8000000) > hi) hi = (uint64_t)(extra + 8000000);
		free(p);
	}
	assert_true(hi > 15000000);       /* reached near +8 ms */
	assert_true(lo < 1000000);        /* reached near -8 ms */
	wn_link_clear(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timing),
		cmocka_unit_test(test_drop_tail),
		cmocka_unit_test(test_loss),
		cmocka_unit_test(test_jitter),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
