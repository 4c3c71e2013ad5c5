/* test_dre_cdc.c: content-defined chunking: boundaries resynchronise after
 * edits, and the fast cut loop matches a byte-at-a-time reference exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "../dre/dre_int.h"
#include "dre_util.h"

/* Cut points after an insertion are the old ones, shifted, within a few chunks. */
static void test_cdc_resync(void **state)
{
	dre_cdc c;
	assert_int_equal(dre_cdc_init(&c, 2048, 4096, 16384), 0);
	assert_int_not_equal(dre_cdc_init(&c, 4096, 2048, 16384), 0);
	size_t n = 1 << 20, ins = 300000;
	uint8_t *a = malloc(n), *b = malloc(n + 50);
	t_fill_random(a, n);
	memcpy(b, a, ins);
	t_fill_random(b + ins, 50);
	memcpy(b + ins + 50, a + ins, n - ins);
	size_t cuts_a[2048], na = 0, cuts_b[2048], nb = 0;
	for (size_t pos = 0; pos < n; na++)
		cuts_a[na] = pos += dre_cdc_cut(&c, a + pos, n - pos, 1);
	for (size_t pos = 0; pos < n + 50; nb++)
		cuts_b[nb] = pos += dre_cdc_cut(&c, b + pos, n + 50 - pos, 1);
	for (size_t i = 0; i < na; i++) {
		size_t len = cuts_a[i] - (i ? cuts_a[i - 1] : 0);
		assert_true(len <= 16384);
		assert_true(len >= 2048 || cuts_a[i] == n);
	}
	/* every cut of a beyond the edit + 2 chunks exists in b, 50 bytes later */
	size_t missing = 0, checked = 0, j = 0;
	for (size_t i = 0; i < na; i++) {
		if (cuts_a[i] < ins + 2 * 16384)
			continue;
		checked++;
		while (j < nb && cuts_b[j] < cuts_a[i] + 50)
			j++;
		if (j == nb || cuts_b[j] != cuts_a[i] + 50)
			missing++;
	}
	assert_true(checked > 100);
	assert_int_equal(missing, 0);
	/* before the edit the cuts are identical */
	for (size_t i = 0; i < na && cuts_a[i] < ins; i++)
		assert_true(cuts_a[i] == cuts_b[i]);
	free(a);
	free(b);
}

/* The gear table as chunk.c first defined it (splitmix64 from a fixed seed). */
static uint64_t ref_gear[256];
static void ref_gear_fill(void)
{
	uint64_t x = 0x77616e6f7074ULL;
	for (int i = 0; i < 256; i++) {
		uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
		ref_gear[i] = (z ^ (z >> 31)) | 1;
	}
}

/* The cut rule one byte at a time, as first written: stores hold chunks cut
 * by it, so dre_cdc_cut must return exactly this. */
static size_t ref_cdc_cut(const dre_cdc *c, const uint8_t *p, size_t n, int final)
{
	if (n <= c->min)
		return final ? n : 0;
	size_t lim = n < c->max ? n : c->max;
	size_t norm = c->avg < lim ? c->avg : lim;
	size_t i = c->min - 64;
	uint64_t h = 0;
	for (; i < c->min; i++)
		h = (h << 1) + ref_gear[p[i]];
	for (; i < norm; i++) {
		h = (h << 1) + ref_gear[p[i]];
		if (!(h & c->mask_s))
			return i + 1;
	}
	for (; i < lim; i++) {
		h = (h << 1) + ref_gear[p[i]];
		if (!(h & c->mask_l))
			return i + 1;
	}
	if (lim == c->max)
		return lim;
	return final ? n : 0;
}

/* dre_cdc_cut against the reference on p[0..n), final 0 and 1; returns the
 * reference cut for final=1.  seen[region][d % 8] counts true cuts by the
 * region (before/after avg) and their distance d from its start: the scan
 * takes eight bytes a turn, two a step (odd d: the first byte of a step). */
static size_t cdc_check(const dre_cdc *c, const uint8_t *p, size_t n, size_t seen[2][8])
{
	size_t want[2];
	for (int f = 0; f < 2; f++) {
		want[f] = ref_cdc_cut(c, p, n, f);
		size_t got = dre_cdc_cut(c, p, n, f);
		if (got != want[f])
			fail_msg("cdc %u/%u/%u n %zu final %d: cut %zu, want %zu", c->min, c->avg, c->max, n, f,
				 got, want[f]);
	}
	/* dre_cdc_cuts_at tells a content cut from one the input's end made */
	if (want[0] && !dre_cdc_cuts_at(c, p, want[0]))
		fail_msg("cdc %u/%u/%u: a cut at %zu not recognised", c->min, c->avg, c->max, want[0]);
	if (!want[0] && want[1] && dre_cdc_cuts_at(c, p, want[1]))
		fail_msg("cdc %u/%u/%u: the input's end %zu taken for a cut", c->min, c->avg, c->max, want[1]);
	size_t cut = want[0]; /* without final, below max: a tested cut */
	if (cut && cut < c->max) {
		int late = cut > c->avg;
		seen[late][(cut - (late ? c->avg : c->min)) % 8]++;
	}
	return want[1];
}

/* Fill p[0..n) with data of kind k (0..8): random, zeros, periods 2, 3, 65
 * and 4096, a two-letter alphabet, text, mostly zeros. */
static void cdc_fill(uint8_t *p, size_t n, int k)
{
	static const size_t period[] = { 0, 0, 2, 3, 65, 4096 };
	t_fill_random(p, n);
	if (k == 7)
		t_fill_text(p, n);
	for (size_t i = 0; i < n; i++) {
		if (k == 1)
			p[i] = 0;
		else if (k >= 2 && k <= 5)
			p[i] = p[i % period[k]];
		else if (k == 6)
			p[i] &= 1;
		else if (k == 8 && p[i] % 61)
			p[i] = 0;
	}
}

/* The two-byte scan cuts where the one-byte loop cuts: whole streams cut
 * chunk after chunk, and prefixes of every length near min, avg and max and
 * of random lengths at random offsets, for sizes odd and even. */
static void test_cdc_matches_reference(void **state)
{
	static const uint32_t sets[][3] = { { 2048, 4096, 16384 }, { 64, 65, 66 }, { 65, 66, 67 },
					    { 64, 128, 256 }, { 65, 129, 257 }, { 100, 333, 1001 },
					    { 777, 4095, 9999 }, { 8191, 65536, DRE_CHUNK_MAX } };
	size_t len = 1 << 20;
	uint8_t *buf = malloc(len);
	ref_gear_fill();
	dre_cdc c;
	assert_int_equal(dre_cdc_init(&c, 2048, 4096, 16384), 0);
	assert_true(c.mask_s == 0xFFF8000000000000ULL && c.mask_l == 0xFFE0000000000000ULL);
	for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
		assert_int_equal(dre_cdc_init(&c, sets[s][0], sets[s][1], sets[s][2]), 0);
		size_t seen[2][8] = { { 0 } };
		for (int k = 0; k < 9; k++) {
			cdc_fill(buf, len, k);
			for (size_t pos = 0; pos < len;)
				pos += cdc_check(&c, buf + pos, len - pos, seen);
			const size_t at[] = { c.min, c.avg, c.max };
			for (int a = 0; a < 3; a++)
				for (size_t n = at[a] - 3; n <= at[a] + 3; n++)
					cdc_check(&c, buf + t_rand() % 64, n, seen);
			for (int r = 0; r < 200; r++) {
				size_t n = t_rand() % (c.max + 100);
				cdc_check(&c, buf + t_rand() % (len - n), n, seen);
			}
		}
		/* every position of the eight-byte turn cuts, before and after avg */
		for (int r = 0; r < 16 && c.avg - c.min >= 64 && c.max - c.avg >= 64; r++)
			if (!seen[r / 8][r % 8])
				fail_msg("cdc %u/%u/%u: no cut at %d mod 8 %s avg", c.min, c.avg, c.max, r % 8,
					 r < 8 ? "before" : "after");
	}
	free(buf);
}

/* Store what encoding p[0..n) leaves in a fresh store: chunks and bytes. */
static void chunks_stored(const uint8_t *p, size_t n, int threaded, dre_store_stats *s)
{
	char dir[64];
	dre_store *st = t_store(dir, 0);
	assert_non_null(st);
	dre_enc_opts o = { .frame_max = 256 << 10, .threaded = threaded };
	dre_enc *e = dre_enc_new(st, &o);
	assert_non_null(e);
	struct tbuf enc = { 0 };
	assert_int_equal(t_encode(e, p, n, 300000, &enc), 0);
	dre_enc_free(e);
	dre_store_get_stats(st, s);
	dre_store_close(st);
	t_rmstore(dir);
	free(enc.p);
}

/* The threaded encoder cuts new data ahead on two threads, the second
 * starting mid-frame (enc_prep.c): it must store exactly the chunks the
 * one-thread encoder does, for text, random bytes and uniform runs (where
 * the two threads' cuts never meet). */
static void test_prep_cuts_like_one_thread(void **state)
{
	size_t n = 3 << 20;
	uint8_t *p = malloc(n);
	assert_non_null(p);
	for (int kind = 0; kind < 3; kind++) {
		if (kind == 0)
			t_fill_text(p, n);
		else if (kind == 1)
			t_fill_random(p, n);
		else
			for (size_t i = 0; i < n; i++)
				p[i] = (uint8_t)(i / 100000 % 2 ? 0x55 : i % 7); /* runs of periodic bytes */
		dre_store_stats a, b;
		chunks_stored(p, n, 0, &a);
		chunks_stored(p, n, 1, &b);
		assert_true(a.chunks > (kind < 2 ? 500u : 20u)); /* the runs dedupe */
		assert_int_equal(a.chunks, b.chunks);
		assert_int_equal(a.data_bytes, b.data_bytes);
	}
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cdc_resync),
		cmocka_unit_test(test_cdc_matches_reference),
		cmocka_unit_test(test_prep_cuts_like_one_thread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
