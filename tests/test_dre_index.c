/* test_dre_index.c: the store's in-memory chunk index on its own: adds,
 * lookups, deletes (with followers shifted back, across the end of a part),
 * scans, and parts that grow one at a time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../dre/index.h"
#include "dre_util.h"

#define N 200000

/* A random tag (never 0) in part `part`, or in any part if part < 0. */
static uint64_t tag_in(int part)
{
	uint64_t t = ((uint64_t)t_rand() << 32 ^ (uint64_t)t_rand()) | 1;
	return part < 0 ? t : (t & ~(0xffULL << 56)) | (uint64_t)part << 56;
}

/* Every tag of tags[0..n) is found, with its len, or not, as `in` says. */
static void check_all(const dre_idx *x, const uint64_t *tags, const char *in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		dre_ent *e = dre_idx_get(x, tags[i]);
		if (in[i] && (!e || e->len != (uint32_t)i))
			fail_msg("tag %zu (%016llx) lost", i, (unsigned long long)tags[i]);
		if (!in[i] && e)
			fail_msg("tag %zu (%016llx) deleted but found", i, (unsigned long long)tags[i]);
	}
}

/* Adds and deletes in random order keep every entry findable; a scan sees
 * each entry once. */
static void test_idx_add_del_scan(void **state)
{
	(void)state;
	dre_idx x;
	uint64_t *tags = malloc(N * sizeof *tags);
	char *in = calloc(N, 1);
	assert_int_equal(dre_idx_init(&x, 1u << 16), 0);
	for (size_t i = 0; i < N; i++) {
		tags[i] = tag_in(i % 4 ? -1 : 7); /* a quarter in part 7: it grows further */
		dre_ent *e = dre_idx_add(&x, tags[i]);
		assert_non_null(e);
		e->len = (uint32_t)i;
		in[i] = 1;
	}
	assert_int_equal(x.count, N);
	check_all(&x, tags, in, N);
	for (size_t k = 0; k < N / 2; k++) {
		size_t i = t_rand() % N;
		if (!in[i])
			continue;
		dre_idx_del(&x, dre_idx_get(&x, tags[i]));
		in[i] = 0;
	}
	size_t left = 0;
	for (size_t i = 0; i < N; i++)
		left += in[i];
	assert_int_equal(x.count, left);
	check_all(&x, tags, in, N);
	size_t seen = 0;
	dre_ent *e;
	for (uint64_t pos = 0; (e = dre_idx_next(&x, &pos));) {
		assert_true(e->len < N && in[e->len] == 1 && tags[e->len] == e->tag);
		in[e->len] = 2; /* seen once */
		seen++;
	}
	assert_int_equal(seen, left);
	dre_idx_free(&x);
	free(tags);
	free(in);
}

/* Tags whose home is a part's last slots wrap around its end; deleting them
 * in any order shifts the followers back across the end. */
static void test_idx_wrap(void **state)
{
	(void)state;
	dre_idx x;
	enum { W = 40 };
	uint64_t tags[W];
	char in[W];
	assert_int_equal(dre_idx_init(&x, 0), 0);
	size_t mask = x.part[3].mask;
	for (size_t i = 0; i < W; i++) {
		/* homes: the last four slots of part 3 */
		tags[i] = (tag_in(3) & ~(uint64_t)mask) | (mask - i % 4);
		dre_ent *e = dre_idx_add(&x, tags[i]);
		assert_non_null(e);
		e->len = (uint32_t)i;
		in[i] = 1;
	}
	assert_int_equal(x.part[3].mask, mask); /* no growth: the test is about the wrap */
	for (size_t k = 0; k < W; k++) {
		size_t i = (k * 17) % W; /* 17 and 40 are coprime: each once */
		dre_idx_del(&x, dre_idx_get(&x, tags[i]));
		in[i] = 0;
		check_all(&x, tags, in, W);
	}
	assert_int_equal(x.count, 0);
	dre_idx_free(&x);
}

/* A part grows alone: filling one part leaves the others' tables as they
 * were, and the memory figure follows. */
static void test_idx_parts_grow_alone(void **state)
{
	(void)state;
	dre_idx x;
	assert_int_equal(dre_idx_init(&x, 1u << 16), 0);
	size_t before = dre_idx_bytes(&x), m0 = x.part[0].mask, m1 = x.part[1].mask;
	const dre_ent *other = x.part[1].slot;
	for (size_t i = 0; i < 10 * (m0 + 1); i++)
		assert_non_null(dre_idx_add(&x, tag_in(0)));
	assert_true(x.part[0].mask >= 8 * m0);
	assert_true(x.part[1].mask == m1 && x.part[1].slot == other);
	assert_int_equal(dre_idx_bytes(&x), before + (x.part[0].mask - m0) * sizeof(dre_ent));
	dre_idx_free(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idx_add_del_scan),
		cmocka_unit_test(test_idx_wrap),
		cmocka_unit_test(test_idx_parts_grow_alone),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
