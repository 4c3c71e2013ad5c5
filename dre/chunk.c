/* chunk.c: content-defined chunking with a gear rolling hash and FastCDC-style
 * normalized cut points.
 *
 * The hash is h = (h << 1) + gear[byte]: bit k of h depends on the last k+1
 * bytes only, so the top bits see a 64-byte window.  A cut is declared where the
 * top bits under the mask are all zero.  Before the average size the mask has
 * one bit more than log2(avg) (cuts are rarer), after it one bit less (cuts are
 * likelier): this narrows the spread of chunk sizes around avg ("normalized
 * chunking").  The first min bytes of a chunk are not tested for cuts (FastCDC's
 * skip), but the 64 bytes before min are hashed so the window is full where
 * testing starts: cut points then depend only on content, which is what makes
 * boundaries resynchronise after an insertion or deletion.
 *
 * The scan rolls two bytes per step, after FastCDC 2020 (see cdc_scan), but
 * unlike the paper it tests the hash after the odd byte itself rather than
 * with a shifted mask: every position the one-byte loop tests is tested, in
 * the same order, so the cut points stay those of h = (h << 1) + gear[byte],
 * which define the chunks already in stores (tests/test_dre_cdc.c checks this
 * against a copy of the one-byte loop).
 */
#include <pthread.h>

#include "dre_int.h"

static uint64_t gear[256];
static pthread_once_t gear_once = PTHREAD_ONCE_INIT;

/* Fill the gear table from a fixed seed (splitmix64): the table is part of the
 * chunking definition, so it must never change between releases.  Run once,
 * through gear_once: encoders are created on several threads. */
static void gear_fill(void)
{
	uint64_t x = 0x77616e6f7074ULL;
	for (int i = 0; i < 256; i++) {
		uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
		gear[i] = (z ^ (z >> 31)) | 1;
	}
}

static int log2u(uint32_t v)
{
	int b = 0;
	while ((1u << (b + 1)) <= v)
		b++;
	return b;
}

int dre_cdc_init(dre_cdc *c, uint32_t min, uint32_t avg, uint32_t max)
{
	if (min < 64 || min >= avg || avg >= max || max > DRE_CHUNK_MAX)
		return DRE_EINVAL;
	pthread_once(&gear_once, gear_fill);
	int bits = log2u(avg);
	c->min = min;
	c->avg = avg;
	c->max = max;
	c->mask_s = ~0ULL << (64 - (bits + 1));
	c->mask_l = ~0ULL << (64 - (bits - 1));
	return 0;
}

/* One two-byte step of cdc_scan at p[i + k], p[i + k + 1]: the hash after
 * the first byte (h1) and after both (h), each tested under m.  t = 2 gear[a]
 * + gear[b] is formed off the chain; the empty asm keeps the compiler from
 * reassociating h = 4 h + t into two dependent adds, so the carried hash
 * costs one lea per two bytes. */
#define CDC_STEP(k)                                                                     \
	do {                                                                            \
		uint64_t ga = gear[p[i + (k)]], t = ga * 2 + gear[p[i + (k) + 1]];      \
		__asm__("" : "+r"(t));                                                  \
		uint64_t h1 = (h << 1) + ga;                                            \
		h = (h << 2) + t;                                                       \
		if (!(h1 & m))                                                          \
			return i + (k) + 1;                                             \
		if (!(h & m))                                                           \
			return i + (k) + 2;                                             \
                                                                                        \
} while (0)

/* The first cut in p[i..end) under mask m, the hash so far in *hp: the
 * position just past the first byte after which no bit of the hash under m is
 * set, or 0 if there is none (then *hp holds the hash after p[end - 1]).
 * Two bytes a, b per step (CDC_STEP): the carried hash goes straight to
 * (h << 2) + 2 gear[a] + gear[b], and the hash after a alone, (h << 1) +
 * gear[a], is formed beside it and tested first.  Eight bytes per loop turn,
 * at fixed offsets from i, so the index moves once per turn.  An odd last
 * byte takes the one-byte step. */
static inline size_t cdc_scan(const uint8_t *p, size_t i, size_t end, uint64_t m, uint64_t *hp)
{
	uint64_t h = *hp;
	for (; i + 8 <= end; i += 8) {
		CDC_STEP(0);
		CDC_STEP(2);
		CDC_STEP(4);
		CDC_STEP(6);
	}
	for (; i + 2 <= end; i += 2)
		CDC_STEP(0);
	if (i < end) {
		h = (h << 1) + gear[p[i]];
		if (!(h & m))
			return i + 1;
	}
	*hp = h;
	return 0;
}

size_t dre_cdc_cut(const dre_cdc *c, const uint8_t *p, size_t n, int final)
{
	if (n <= c->min)
		return final ? n : 0;
	size_t lim = n < c->max ? n : c->max;
	size_t norm = c->avg < lim ? c->avg : lim;
	uint64_t h = 0;
	/* warm-up: fill the 64-byte window before min, no tests (64 is even) */
	for (size_t i = c->min - 64; i < c->min; i += 2)
		h = (h << 2) + (gear[p[i]] * 2 + gear[p[i + 1]]);
	size_t cut = cdc_scan(p, c->min, norm, c->mask_s, &h);
	if (!cut)
		cut = cdc_scan(p, norm, lim, c->mask_l, &h);
	if (cut)
		return cut;
	if (lim == c->max)
		return lim;
	return final ? n : 0;
}

int dre_cdc_cuts_at(const dre_cdc *c, const uint8_t *p, size_t len)
{
	if (len == c->max)
		return 1;
	if (len <= c->min || len > c->max)
		return 0;
	uint64_t h = 0;
	for (size_t i = len - 64; i < len; i++) /* the hash's 64-byte window */
		h = (h << 1) + gear[p[i]];
	return !(h & (len <= c->avg ? c->mask_s : c->mask_l));
}
