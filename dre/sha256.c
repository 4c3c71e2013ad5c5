/*
 * sha256.c: SHA-256 (FIPS 180-4) with the x86 SHA extensions, one or two
 * messages at a time.
 *
 * Why not only OpenSSL: chunk fingerprints hash short messages (a few KiB),
 * where OpenSSL's EVP calls cost about 8 % on top of the block function, and
 * OpenSSL hashes one message at a time, while on the CPUs we run on the SHA
 * units are not saturated by one dependency chain: hashing two chunks
 * interleaved runs at about 1.35 times OpenSSL's speed per core (1.76 against
 * 1.30 GB/s on 5 KiB chunks, measured on the benchmark machine).  Callers
 * hand over batches of chunks (dre_sha256_ni_jobs): two lanes each take the
 * next chunk as soon as theirs is done.
 *
 * Layout, as the instructions want it: the state is two vectors, ABEF and
 * CDGH (word 0 of the vector is the lowest lane).  sha256rnds2 performs two
 * rounds from the message words plus round constants in the low 64 bits of
 * its third operand; sha256msg1/msg2 compute the message schedule four words
 * at a time: for words t..t+3 (t >= 16)
 *     W[t] = sigma1(W[t-2]) + W[t-7] + sigma0(W[t-15]) + W[t-16]
 * msg1(W[t-16..], W[t-12..]) adds the sigma0 terms, the W[t-7] words are the
 * vector (W[t-8..t-5] : W[t-4..t-1]) shifted by one word, and msg2 adds the
 * sigma1 terms (which depend on the words being computed).
 *
 * dre_sha256_accel() says whether this code may be used: the CPU must have
 * the SHA extensions and SSSE3/SSE4.1, and a self-test against OpenSSL must
 * pass.  Otherwise fp.c uses OpenSSL.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <openssl/sha.h>

#include "dre_int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

#define SHA_TARGET __attribute__((target("sha,sse4.1,ssse3")))

static const uint32_t sha_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static const uint32_t sha_h0[8] = {
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

/* Sixteen message bytes as four big-endian words. */
SHA_TARGET static inline __m128i load_be(const uint8_t *p)
{
	const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
	return _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)p), swap);
}

/* The message words of group g+1 (g >= 3), four at a time, in place of the
 * msg1 result already held in m[(g + 1) & 3]; m[g & 3] and m[(g - 1) & 3]
 * hold groups g and g-1. */
#define SHA_NEXT(m, g)                                                                                    \
	((m)[((g) + 1) & 3] = _mm_sha256msg2_epu32(                                                      \
		 _mm_add_epi32((m)[((g) + 1) & 3], _mm_alignr_epi8((m)[(g) & 3], (m)[((g) - 1) & 3], 4)), \
		 (m)[(g) & 3]))

/* Compress nb 64-byte blocks of p into the state s[0] (ABEF), s[1] (CDGH).
 * Group g covers rounds 4g..4g+3; m[g & 3] holds its message words. */
SHA_TARGET static void sha_blocks1(__m128i s[2], const uint8_t *p, size_t nb)
{
	__m128i s0 = s[0], s1 = s[1];
	for (; nb; nb--, p += 64) {
		__m128i save0 = s0, save1 = s1, m[4];
#pragma GCC unroll 16
		for (int g = 0; g < 16; g++) {
			if (g < 4)
				m[g] = load_be(p + 16 * g);
			__m128i t = _mm_add_epi32(m[g & 3], _mm_loadu_si128((const __m128i *)(sha_k + 4 * g)));
			s1 = _mm_sha256rnds2_epu32(s1, s0, t);
			if (g >= 3 && g < 15)
				SHA_NEXT(m, g);
			s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(t, 0x0E));
			if (g >= 1 && g <= 12) /* group g+3 starts from msg1(group g-1, group g) */
				m[(g - 1) & 3] = _mm_sha256msg1_epu32(m[(g - 1) & 3], m[g & 3]);
		}
		s0 = _mm_add_epi32(s0, save0);
		s1 = _mm_add_epi32(s1, save1);
	}
	s[0] = s0;
	s[1] = s1;
}

/* sha_blocks1 on two messages at once, nb blocks of each: two independent
 * dependency chains keep the SHA unit busier than one. */
SHA_TARGET static void sha_blocks2(__m128i a[2], const uint8_t *p, __m128i b[2], const uint8_t *q, size_t nb)
{
	__m128i a0 = a[0], a1 = a[1], b0 = b[0], b1 = b[1];
	for (; nb; nb--, p += 64, q += 64) {
		__m128i sa0 = a0, sa1 = a1, sb0 = b0, sb1 = b1, m[4], n[4];
#pragma GCC unroll 16
		for (int g = 0; g < 16; g++) {
			if (g < 4) {
				m[g] = load_be(p + 16 * g);
				n[g] = load_be(q + 16 * g);
			}
			__m128i k = _mm_loadu_si128((const __m128i *)(sha_k + 4 * g));
			__m128i t = _mm_add_epi32(m[g & 3], k), u = _mm_add_epi32(n[g & 3], k);
			a1 = _mm_sha256rnds2_epu32(a1, a0, t);
			b1 = _mm_sha256rnds2_epu32(b1, b0, u);
			if (g >= 3 && g < 15) {
				SHA_NEXT(m, g);
				SHA_NEXT(n, g);
			}
			a0 = _mm_sha256rnds2_epu32(a0, a1, _mm_shuffle_epi32(t, 0x0E));
			b0 = _mm_sha256rnds2_epu32(b0, b1, _mm_shuffle_epi32(u, 0x0E));
			if (g >= 1 && g <= 12) {
				m[(g - 1) & 3] = _mm_sha256msg1_epu32(m[(g - 1) & 3], m[g & 3]);
				n[(g - 1) & 3] = _mm_sha256msg1_epu32(n[(g - 1) & 3], n[g & 3]);
			}
		}
		a0 = _mm_add_epi32(a0, sa0);
		a1 = _mm_add_epi32(a1, sa1);
		b0 = _mm_add_epi32(b0, sb0);
		b1 = _mm_add_epi32(b1, sb1);
	}
	a[0] = a0;
	a[1] = a1;
	b[0] = b0;
	b[1] = b1;
}
#undef SHA_NEXT

/* The initial hash value in ABEF/CDGH form. */
SHA_TARGET static void sha_init(__m128i s[2])
{
	__m128i abcd = _mm_loadu_si128((const __m128i *)sha_h0);
	__m128i efgh = _mm_loadu_si128((const __m128i *)(sha_h0 + 4));
	abcd = _mm_shuffle_epi32(abcd, 0xB1); /* b a d c */
	efgh = _mm_shuffle_epi32(efgh, 0x1B); /* h g f e */
	s[0] = _mm_alignr_epi8(abcd, efgh, 8);    /* f e b a: ABEF from the top */
	s[1] = _mm_blend_epi16(efgh, abcd, 0xF0); /* h g d c: CDGH */
}

/* The digest of a state: words A..H, big-endian. */
SHA_TARGET static void sha_out(const __m128i s[2], uint8_t out[32])
{
	__m128i feba = _mm_shuffle_epi32(s[0], 0x1B), dchg = _mm_shuffle_epi32(s[1], 0xB1);
	__m128i abcd = _mm_blend_epi16(feba, dchg, 0xF0), efgh = _mm_alignr_epi8(dchg, feba, 8);
	const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
	_mm_storeu_si128((__m128i *)out, _mm_shuffle_epi8(abcd, swap));
	_mm_storeu_si128((__m128i *)(out + 16), _mm_shuffle_epi8(efgh, swap));
}

/* The last n % 64 bytes of p[0..n) with the padding and the bit length, as
 * one or two blocks in buf; returns how many. */
static size_t sha_tail(const uint8_t *p, size_t n, uint8_t buf[128])
{
	size_t r = n & 63, nb = r < 56 ? 1 : 2;
	uint64_t bits = (uint64_t)n << 3;
	memset(buf, 0, 128);
	if (r)
		memcpy(buf, p + n - r, r);
	buf[r] = 0x80;
	for (int i = 0; i < 8; i++)
		buf[nb * 64 - 1 - i] = (uint8_t)(bits >> (8 * i));
	return nb;
}

SHA_TARGET static void sha_ni_1(const void *p, size_t n, uint8_t out[32])
{
	__m128i s[2];
	uint8_t t[128];
	sha_init(s);
	sha_blocks1(s, p, n / 64);
	sha_blocks1(s, t, sha_tail(p, n, t));
	sha_out(s, out);
}

/* One of the two lanes of sha_ni_jobs: a message in progress. */
struct sha_lane {
	__m128i s[2];
	const uint8_t *p; /* next block: in the message, then in tail */
	size_t nb;        /* blocks left from p */
	int in_tail;
	struct dre_sha_job *job; /* NULL: idle */
	uint8_t tail[128];
};

/* Start lane l on the next job, if any; skip to its padded tail (and past
 * finished messages) while it has no whole blocks left. */
SHA_TARGET static void lane_feed(struct sha_lane *l, struct dre_sha_job **next, struct dre_sha_job *end)
{
	for (;;) {
		if (!l->job) {
			if (*next == end)
				return;
			l->job = (*next)++;
			sha_init(l->s);
			l->p = l->job->p;
			l->nb = l->job->n / 64;
			l->in_tail = 0;
		}
		if (l->nb)
			return;
		if (!l->in_tail) {
			l->nb = sha_tail(l->job->p, l->job->n, l->tail);
			l->p = l->tail;
			l->in_tail = 1;
		} else {
			sha_out(l->s, l->job->out);
			l->job = NULL;
		}
	}
}

/* Hash jobs[0..n) two at a time: a lane that finishes its message takes the
 * next one, so messages of different lengths leave unpaired blocks only at
 * the very end. */
SHA_TARGET static void sha_ni_jobs(struct dre_sha_job *jobs, size_t n)
{
	struct sha_lane a = { .job = NULL }, b = { .job = NULL };
	struct dre_sha_job *next = jobs, *end = jobs + n;
	lane_feed(&a, &next, end);
	lane_feed(&b, &next, end);
	while (a.job && b.job) {
		size_t k = a.nb < b.nb ? a.nb : b.nb;
		sha_blocks2(a.s, a.p, b.s, b.p, k);
		a.p += 64 * k;
		b.p += 64 * k;
		a.nb -= k;
		b.nb -= k;
		lane_feed(&a, &next, end);
		lane_feed(&b, &next, end);
	}
	for (struct sha_lane *l = a.job ? &a : &b; l->job; lane_feed(l, &next, end)) {
		sha_blocks1(l->s, l->p, l->nb);
		l->nb = 0;
	}
}

static int sha_cpu_ok(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1))
		return 0;
	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
}
#endif /* x86-64 */

static int sha_accel;
static pthread_once_t sha_once = PTHREAD_ONCE_INIT;

/* Use the SHA-extension code only if the CPU has it and it passes a known
 * answer test: every length from 0 to 300 bytes (all padding cases, one to
 * five blocks) and a few longer ones, hashed in batches where the lanes
 * change messages at every point and one at a time (the two must agree),
 * then the 305 digests hashed together must give KAT.  KAT was computed with
 * Python's hashlib (OpenSSL), not by this code:
 *   buf = bytes(((i * 2654435761) >> 13) & 0xff for i in range(16448))
 *   n_i = i if i < 300 else (1000, 4095, 4096, 4097, 16384)[i - 300]
 *   KAT = sha256(b"".join(sha256(buf[i % 61:][:n_i]).digest() for i in range(305)))
 * (No OpenSSL call here: initialising it costs a millisecond per process.) */
static void sha_pick(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (!sha_cpu_ok())
		return;
	enum { NLONG = 5, NJOB = 300 + NLONG };
	static const size_t longer[NLONG] = { 1000, 4095, 4096, 4097, 16384 };
	static const uint8_t kat[32] = { 0xb3, 0xde, 0x8f, 0x91, 0xbe, 0xed, 0xff, 0x78, 0x8c, 0x1e, 0x3c,
					 0x83, 0xd8, 0xc8, 0x9c, 0xe9, 0x19, 0xe0, 0x11, 0x9c, 0x1d, 0xe4,
					 0xb5, 0x71, 0x23, 0xa4, 0x4c, 0xf5, 0x51, 0x26, 0x5d, 0x12 };
	static uint8_t buf[16384 + 64], outs[NJOB][32];
	struct dre_sha_job jobs[NJOB];
	uint8_t one[32];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	for (size_t i = 0; i < NJOB; i++)
		jobs[i] = (struct dre_sha_job){ buf + i % 61, i < 300 ? i : longer[i - 300], outs[i] };
	sha_ni_jobs(jobs, NJOB);
	for (size_t i = 0; i < NJOB; i++) {
		sha_ni_1(jobs[i].p, jobs[i].n, one);
		if (memcmp(one, outs[i], 32))
			return;
	}
	sha_ni_1(outs, sizeof outs, one);
	if (memcmp(one, kat, 32))
		return;
	sha_accel = 1;
#endif
}

int dre_sha256_accel(void)
{
	pthread_once(&sha_once, sha_pick);
	return sha_accel;
}

#if defined(__x86_64__) && defined(__GNUC__)
void dre_sha256_ni(const void *p, size_t n, uint8_t out[32])
{
	sha_ni_1(p, n, out);
}

void dre_sha256_ni_jobs(struct dre_sha_job *jobs, size_t n)
{
	sha_ni_jobs(jobs, n);
}
#else
void dre_sha256_ni(const void *p, size_t n, uint8_t out[32])
{
	SHA256(p, n, out);
}

void dre_sha256_ni_jobs(struct dre_sha_job *jobs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		SHA256(jobs[i].p, jobs[i].n, jobs[i].out);
}
#endif
