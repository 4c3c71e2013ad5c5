/* test_dre_fsum.c: the fast checksum (dre_fsum), the stream versions and the
 * store record checksums. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "../dre/dre_int.h"
#include "../dre/store_int.h"
#include "dre_util.h"

/* The SIMD version (when the CPU has one) gives the reference's value for
 * every length around the block and stripe edges, any alignment, any seed. */
static void test_fsum_matches_reference(void **state)
{
	size_t cap = 70000;
	uint8_t *buf = malloc(cap + 64);
	assert_non_null(buf);
	t_fill_random(buf, cap + 64);
	size_t lens[] = { 0, 1, 255, 256, 257, 319, 320, 1023, 1024, 1025, 1088, 2047, 2048, 2049, 4095, 65536, cap };
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
		for (size_t a = 0; a < 8; a++) {
			uint64_t seed = t_rand();
			assert_true(dre_fsum(buf + a, lens[i], seed) == dre_fsum_ref(buf + a, lens[i], seed));
		}
	for (int k = 0; k < 300; k++) {
		size_t n = t_rand() % cap, a = t_rand() % 64;
		uint64_t seed = t_rand();
		assert_true(dre_fsum(buf + a, n, seed) == dre_fsum_ref(buf + a, n, seed));
	}
	free(buf);
}

/* Taken as the input arrives, fed at random points (or not at all), the sum
 * is dre_fsum's for every length around the block edges. */
static void test_fsum_streaming(void **state)
{
	size_t cap = 20000;
	uint8_t *buf = malloc(cap);
	assert_non_null(buf);
	t_fill_random(buf, cap);
	size_t lens[] = { 0, 1, 255, 256, 1023, 1024, 1025, 2048, 2049, 3071, 3072, 3073, 8192, 8193, cap };
	for (size_t i = 0; i < sizeof lens / sizeof lens[0] + 300; i++) {
		size_t n = i < sizeof lens / sizeof lens[0] ? lens[i] : t_rand() % cap;
		uint64_t seed = t_rand();
		dre_fsum_state st;
		dre_fsum_begin(&st, seed);
		for (size_t at = 0; n && at < n && i % 5;) {
			at += 1 + t_rand() % 3000;
			dre_fsum_feed(&st, buf, at < n ? at : n);
		}
		assert_true(dre_fsum_end(&st, buf, n) == dre_fsum(buf, n, seed));
	}
	free(buf);
}

/* What a wrong rebuild looks like (a flipped bit, stripes or blocks in the
 * wrong order, another seed, a byte more) changes the sum. */
static void test_fsum_detects_changes(void **state)
{
	size_t n = 8192;
	uint8_t *p = malloc(n), *q = malloc(n);
	assert_non_null(p);
	assert_non_null(q);
	t_fill_text(p, n);
	uint64_t s = dre_fsum(p, n, 5);
	assert_true(dre_fsum(p, n, 6) != s);
	assert_true(dre_fsum(p, n - 1, 5) != s);
	for (size_t bit = 0; bit < n * 8; bit += 61) {
		p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_true(dre_fsum(p, n, 5) != s);
		p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	size_t swaps[][3] = { { 0, 64, 64 }, { 128, 640, 64 }, { 0, 1024, 1024 }, { 1000, 5000, 3000 } };
	for (size_t i = 0; i < sizeof swaps / sizeof swaps[0]; i++) {
		size_t x = swaps[i][0], y = swaps[i][1], len = swaps[i][2];
		memcpy(q, p, n);
		memcpy(q + x, p + y, len);
		memcpy(q + y, p + x, len);
		assert_true(memcmp(p, q, n) != 0);
		assert_true(dre_fsum(q, n, 5) != s);
	}
	free(p);
	free(q);
}

/* An encoder asked for version 1 (an older decoder) writes it, and decoders
 * read both versions; versions outside the range are refused. */
static void test_stream_versions(void **state)
{
	char da[64], db[64];
	dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
	assert_non_null(sa);
	assert_non_null(sb);
	size_t n = 3 << 20;
	uint8_t *p = malloc(n);
	assert_non_null(p);
	t_fill_text(p, n);
	for (int v = 0; v <= DRE_STREAM_VERSION; v++) {
		dre_enc_opts o = { .frame_max = 256 << 10, .version = v };
		dre_enc *e = dre_enc_new(sa, &o);
		dre_dec *d = dre_dec_new(sb);
		assert_non_null(e);
		assert_non_null(d);
		struct tbuf enc = { 0 }, dec = { 0 };
		assert_int_equal(t_encode(e, p, n, 100000, &enc), 0);
		assert_int_equal(enc.p[4], v ? v : DRE_STREAM_VERSION);
		assert_int_equal(t_decode(d, enc.p, enc.len, 77777, &dec), 0);
		assert_int_equal(dre_dec_finish(d), 0);
		assert_int_equal(dec.len, n);
		assert_memory_equal(dec.p, p, n);
		dre_dec_free(d);
		/* the same stream labelled with the other version fails its checksums */
		if (v) {
			enc.p[4] = (uint8_t)(v == 1 ? 2 : 1);
			d = dre_dec_new(sb);
			dec.len = 0;
			assert_int_equal(t_decode(d, enc.p, enc.len, enc.len, &dec), DRE_ECHECKSUM);
			dre_dec_free(d);
			enc.p[4] = DRE_STREAM_VERSION + 1;
			d = dre_dec_new(sb);
			assert_true(t_decode(d, enc.p, enc.len, enc.len, &dec) < 0);
			dre_dec_free(d);
		}
		dre_enc_free(e);
		free(enc.p);
		free(dec.p);
	}
	dre_enc_opts bad = { .version = DRE_STREAM_VERSION + 1 };
	assert_null(dre_enc_new(sa, &bad));
	free(p);
	t_stores_done(sa, da, sb, db);
}

/* Store records: new ones carry a dre_fsum checksum ("DRC2"); records of
 * stores written before ("DRC1", dre_sum64) still check; a damaged payload or
 * a record whose magic was switched fails either way. */
static void test_record_checksums(void **state)
{
	uint8_t p[5000], h[32], hdr[DRE_REC_HDR];
	t_fill_random(p, sizeof p);
	t_fill_random(h, sizeof h);
	uint32_t magics[] = { DRE_REC_CHUNK, DRE_REC_CHUNK_V1 };
	for (int i = 0; i < 2; i++) {
		dre_rec_header(hdr, magics[i], sizeof p, h, 42, p);
		assert_int_equal(dre_rec_check(hdr, p), 0);
		assert_int_equal(dre_rec_check(hdr, NULL), 0);
		p[4000] ^= 1;
		assert_int_equal(dre_rec_check(hdr, p), -1);
		p[4000] ^= 1;
		memcpy(hdr, &magics[!i], 4);
		assert_int_equal(dre_rec_check(hdr, p), -1);
	}
	uint64_t sum;
	dre_rec_header(hdr, DRE_REC_CHUNK_V1, sizeof p, h, 42, p);
	memcpy(&sum, hdr + 48, 8);
	assert_true(sum == dre_sum64(p, sizeof p, dre_sum64(hdr, 48, 0))); /* the format stores kept */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fsum_matches_reference),
		cmocka_unit_test(test_fsum_streaming),
		cmocka_unit_test(test_fsum_detects_changes),
		cmocka_unit_test(test_stream_versions),
		cmocka_unit_test(test_record_checksums),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
