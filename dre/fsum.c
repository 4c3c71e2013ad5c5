/*
 * fsum.c: the frame checksum of DRE stream version 2 (dre_fsum), about three
 * times the speed of dre_sum64 on large inputs.
 *
 * Input of at least FSUM_MIN bytes is read as 64-byte stripes of eight 64-bit
 * words, sixteen stripes to a block.  For word j of stripe s of a block:
 *     k = d ^ key[s + j];  acc[j] += lo32(k) * hi32(k);  acc[j ^ 1] += d;
 * after each whole block every lane is scrambled:
 *     acc[j] = (acc[j] ^ acc[j] >> 47 ^ key[j]) * FSUM_P32  (64-bit product)
 * The last stripe is the input's last 64 bytes (overlapping what came before
 * when the length is not a multiple of 64), mixed with key[16 + j].  The
 * lanes, the length and the seed are then folded into 64 bits.  The 24 key
 * words come from the seed.  Per-stripe keys make the sum depend on the
 * order of stripes within a block, the scrambles on the order of blocks.
 * Shorter input uses dre_sum64.
 *
 * fsum_scalar is the definition; the AVX2 version computes the same value
 * (test_dre_fsum checks it against it) and is picked at run time when the
 * CPU has AVX2.  The sum can also be taken as the input arrives
 * (dre_fsum_begin/feed/end), so that each block is summed while it is still
 * in cache from whatever read it last.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "dre_int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FSUM_X86 1
#endif

#define FSUM_MIN 256
#define FSUM_STRIPES 16
#define FSUM_BLOCK (64 * FSUM_STRIPES)
#define FSUM_P32 0x9E3779B1ULL
#define FSUM_P64 0xC2B2AE3D27D4EB4FULL

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v; /* little-endian hosts only, like the rest of the format code */
}

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* The 24 key words of a seed. */
static void fsum_keys(uint64_t seed, uint64_t key[24])
{
	uint64_t x = seed;
	for (int i = 0; i < 24; i++)
		key[i] = splitmix(&x);
}

/* Fold the lanes, the length and the seed into the sum. */
static uint64_t fsum_fold(const uint64_t acc[8], size_t n, uint64_t seed)
{
	uint64_t h = (uint64_t)n * FSUM_P64 ^ seed;
	for (int j = 0; j < 8; j++) {
		h ^= acc[j];
		h = ((h << 31) | (h >> 33)) * FSUM_P64;
		h ^= h >> 29;
	}
	h ^= h >> 32;
	h *= 0x165667B19E3779F9ULL;
	return h ^ (h >> 29);
}

static void stripe_scalar(uint64_t acc[8], const uint8_t *p, const uint64_t *key)
{
	for (int j = 0; j < 8; j++) {
		uint64_t d = rd64(p + 8 * j), k = d ^ key[j];
		acc[j] += (k & 0xffffffffULL) * (k >> 32);
		acc[j ^ 1] += d;
	}
}

static void scramble_scalar(uint64_t acc[8], const uint64_t *key)
{
	for (int j = 0; j < 8; j++)
		acc[j] = (acc[j] ^ (acc[j] >> 47) ^ key[j]) * FSUM_P32;
}

/* Whole blocks p[0 .. nb * FSUM_BLOCK), each scrambled after its stripes. */
static void blocks_scalar(uint64_t acc[8], const uint8_t *p, size_t nb, const uint64_t *key)
{
	for (size_t i = 0; i < nb; i++) {
		for (int s = 0; s < FSUM_STRIPES; s++)
			stripe_scalar(acc, p + i * FSUM_BLOCK + 64 * s, key + s);
		scramble_scalar(acc, key);
	}
}

/* After the (n - 1) / FSUM_BLOCK whole blocks: the stripes left before the
 * last byte, then the last 64 bytes. */
static void tail_scalar(uint64_t acc[8], const uint8_t *p, size_t n, const uint64_t *key)
{
	size_t at = (n - 1) / FSUM_BLOCK * FSUM_BLOCK, stripes = (n - 1 - at) / 64;
	for (size_t s = 0; s < stripes; s++)
		stripe_scalar(acc, p + at + 64 * s, key + s);
	stripe_scalar(acc, p + n - 64, key + 16);
}

/* The definition: n >= FSUM_MIN. */
static uint64_t fsum_scalar(const uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t key[24], acc[8] = { 0 };
	fsum_keys(seed, key);
	blocks_scalar(acc, p, (n - 1) / FSUM_BLOCK, key);
	tail_scalar(acc, p, n, key);
	return fsum_fold(acc, n, seed);
}

#ifdef FSUM_X86
#define FSUM_STRIPE_AVX2(q, k)                                                                     \
	do {                                                                                       \
		__m256i d0 = _mm256_loadu_si256((const __m256i *)(q));                             \
		__m256i d1 = _mm256_loadu_si256((const __m256i *)((q) + 32));                      \
		__m256i k0 = _mm256_xor_si256(d0, _mm256_loadu_si256((const __m256i *)(k)));       \
		__m256i k1 = _mm256_xor_si256(d1, _mm256_loadu_si256((const __m256i *)((k) + 4))); \
		a0 = _mm256_add_epi64(a0, _mm256_mul_epu32(k0, _mm256_srli_epi64(k0, 32)));       \
		a1 = _mm256_add_epi64(a1, _mm256_mul_epu32(k1, _mm256_srli_epi64(k1, 32)));       \
		a0 = _mm256_add_epi64(a0, _mm256_shuffle_epi32(d0, 0x4E));                        \
		a1 = _mm256_add_epi64(a1, _mm256_shuffle_epi32(d1, 0x4E));                        \
	} while (0)
#define FSUM_SCRAMBLE_AVX2(a, k)                                                                   \
	do {                                                                                       \
		__m256i x = _mm256_xor_si256(_mm256_xor_si256(a, _mm256_srli_epi64(a, 47)),        \
					     _mm256_loadu_si256((const __m256i *)(k)));            \
		a = _mm256_add_epi64(_mm256_mul_epu32(x, p32),                                     \
				     _mm256_slli_epi64(_mm256_mul_epu32(_mm256_srli_epi64(x, 32), p32), 32)); \
	} while (0)

/* blocks_scalar with AVX2: lanes 0-3 in a0, 4-7 in a1. */
__attribute__((target("avx2"))) static void blocks_avx2(uint64_t acc[8], const uint8_t *p, size_t nb,
							 const uint64_t *key)
{
	__m256i a0 = _mm256_loadu_si256((const __m256i *)acc), a1 = _mm256_loadu_si256((const __m256i *)(acc + 4));
	const __m256i p32 = _mm256_set1_epi64x((long long)FSUM_P32);
	for (size_t i = 0; i < nb; i++) {
		const uint8_t *b = p + i * FSUM_BLOCK;
		for (int s = 0; s < FSUM_STRIPES; s++)
			FSUM_STRIPE_AVX2(b + 64 * s, key + s);
		FSUM_SCRAMBLE_AVX2(a0, key);
		FSUM_SCRAMBLE_AVX2(a1, key + 4);
	}
	_mm256_storeu_si256((__m256i *)acc, a0);
	_mm256_storeu_si256((__m256i *)(acc + 4), a1);
}

/* tail_scalar with AVX2. */
__attribute__((target("avx2"))) static void tail_avx2(uint64_t acc[8], const uint8_t *p, size_t n,
						       const uint64_t *key)
{
	__m256i a0 = _mm256_loadu_si256((const __m256i *)acc), a1 = _mm256_loadu_si256((const __m256i *)(acc + 4));
	size_t at = (n - 1) / FSUM_BLOCK * FSUM_BLOCK, stripes = (n - 1 - at) / 64;
	for (size_t s = 0; s < stripes; s++)
		FSUM_STRIPE_AVX2(p + at + 64 * s, key + s);
	FSUM_STRIPE_AVX2(p + n - 64, key + 16);
	_mm256_storeu_si256((__m256i *)acc, a0);
	_mm256_storeu_si256((__m256i *)(acc + 4), a1);
}
#undef FSUM_STRIPE_AVX2
#undef FSUM_SCRAMBLE_AVX2
#endif

static void (*fsum_blocks)(uint64_t *, const uint8_t *, size_t, const uint64_t *) = blocks_scalar;
static void (*fsum_tail)(uint64_t *, const uint8_t *, size_t, const uint64_t *) = tail_scalar;
static pthread_once_t fsum_once = PTHREAD_ONCE_INIT;

static void fsum_pick(void)
{
#ifdef FSUM_X86
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2")) {
		fsum_blocks = blocks_avx2;
		fsum_tail = tail_avx2;
	}
#endif
}

uint64_t dre_fsum(const void *p, size_t n, uint64_t seed)
{
	if (n < FSUM_MIN)
		return dre_sum64(p, n, seed);
	pthread_once(&fsum_once, fsum_pick);
	uint64_t key[24], acc[8] = { 0 };
	fsum_keys(seed, key);
	fsum_blocks(acc, p, (n - 1) / FSUM_BLOCK, key);
	fsum_tail(acc, p, n, key);
	return fsum_fold(acc, n, seed);
}

void dre_fsum_begin(dre_fsum_state *st, uint64_t seed)
{
	pthread_once(&fsum_once, fsum_pick);
	memset(st->acc, 0, sizeof st->acc);
	fsum_keys(seed, st->key);
	st->seed = seed;
	st->blocks = 0;
}

void dre_fsum_feed(dre_fsum_state *st, const void *p, size_t avail)
{
	/* block i is a whole block of the final sum once more input follows it
	 * (whole blocks are those before the last byte) */
	size_t nb = avail ? (avail - 1) / FSUM_BLOCK : 0;
	if (nb > st->blocks) {
		fsum_blocks(st->acc, (const uint8_t *)p + st->blocks * FSUM_BLOCK, nb - st->blocks, st->key);
		st->blocks = nb;
	}
}

uint64_t dre_fsum_end(dre_fsum_state *st, const void *p, size_t n)
{
	if (n < FSUM_MIN)
		return dre_sum64(p, n, st->seed);
	dre_fsum_feed(st, p, n);
	fsum_tail(st->acc, p, n, st->key);
	return fsum_fold(st->acc, n, st->seed);
}

uint64_t dre_fsum_ref(const void *p, size_t n, uint64_t seed)
{
	return n < FSUM_MIN ? dre_sum64(p, n, seed) : fsum_scalar(p, n, seed);
}
