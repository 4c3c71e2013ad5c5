/* test_dre_sha.c: chunk fingerprints (fp.c, sha256.c) are SHA-256, one or
 * two messages at a time, whichever implementation the CPU gets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>
#include <openssl/sha.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "../dre/dre_int.h"
#include "dre_util.h"

/* FIPS 180-4 examples: "abc" and the two-block message, and the empty string. */
static void test_known_answers(void **state)
{
	static const struct {
		const char *msg, *hex;
	} kat[] = {
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
	};
	dre_fp *fp = dre_fp_new();
	assert_non_null(fp);
	for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
		uint8_t h[32], h2[32];
		char hex[65];
		assert_int_equal(dre_fp_sha256(fp, kat[i].msg, strlen(kat[i].msg), h), 0);
		for (int k = 0; k < 32; k++)
			snprintf(hex + 2 * k, 3, "%02x", h[k]);
		assert_string_equal(hex, kat[i].hex);
		size_t j = (i + 1) % 3;
		struct dre_sha_job jobs[2] = { { (const uint8_t *)kat[j].msg, strlen(kat[j].msg), h2 },
					       { (const uint8_t *)kat[i].msg, strlen(kat[i].msg), h } };
		assert_int_equal(dre_fp_sha256_jobs(fp, jobs, 2), 0);
		for (int k = 0; k < 32; k++)
			snprintf(hex + 2 * k, 3, "%02x", h[k]);
		assert_string_equal(hex, kat[i].hex);
	}
	dre_fp_free(fp);
}

/* Every length from 0 to 1,100 (all padding cases around 56 and 64) and
 * random lengths up to the largest chunk, at odd alignments: the same
 * digests as OpenSSL's SHA256(), one at a time and in batches of 1 to 20
 * messages of mixed lengths (so the two lanes change messages at every
 * point of each other's). */
static void test_matches_openssl(void **state)
{
	size_t cap = DRE_CHUNK_MAX + 200;
	uint8_t *buf = malloc(cap), got[20][32], want[20][32];
	assert_non_null(buf);
	t_fill_random(buf, cap);
	dre_fp *fp = dre_fp_new();
	assert_non_null(fp);
	for (size_t k = 0; k < 1100 + 2000; k++) {
		size_t n = k < 1100 ? k : t_rand() % DRE_CHUNK_MAX, a = t_rand() % 64;
		SHA256(buf + a, n, want[0]);
		assert_int_equal(dre_fp_sha256(fp, buf + a, n, got[0]), 0);
		assert_memory_equal(got[0], want[0], 32);
	}
	for (int round = 0; round < 400; round++) {
		struct dre_sha_job jobs[20];
		size_t nj = 1 + t_rand() % 20;
		for (size_t i = 0; i < nj; i++) {
			size_t n = t_rand() % (i % 3 ? 300 : DRE_CHUNK_MAX), a = t_rand() % 64;
			jobs[i] = (struct dre_sha_job){ buf + a, n, got[i] };
			SHA256(buf + a, n, want[i]);
		}
		assert_int_equal(dre_fp_sha256_jobs(fp, jobs, nj), 0);
		for (size_t i = 0; i < nj; i++)
			assert_memory_equal(got[i], want[i], 32);
	}
	dre_fp_free(fp);
	free(buf);
}

/* On a CPU with the SHA extensions they are used (so the tests above test
 * them); WANOPT_SHA=openssl selects OpenSSL, and the tests above pass again
 * through that path. */
static void test_paths(void **state)
{
	int cpu = 0;
#if defined(__x86_64__)
	unsigned a, b, c, d;
	cpu = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
#endif
	assert_int_equal(dre_sha256_accel(), cpu);
	assert_int_equal(dre_fp_accel(), cpu);
	setenv("WANOPT_SHA", "openssl", 1);
	assert_int_equal(dre_fp_accel(), 0);
	test_known_answers(state);
	test_matches_openssl(state);
	unsetenv("WANOPT_SHA");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_answers),
		cmocka_unit_test(test_matches_openssl),
		cmocka_unit_test(test_paths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
