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
 */
#include "dre_int.h"

static uint64_t gear[256];

/* Fill the gear table once from a fixed seed (splitmix64): the table is part of
 * the chunking definition, so it must never change between releases. */
static void gear_init(void)
{
	if (gear[0])
		return;
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
	gear_init();
	int bits = log2u(avg);
	c->min = min;
	c->avg = avg;
	c->max = max;
	c->mask_s = ~0ULL << (64 - (bits + 1));
	c->mask_l = ~0ULL << (64 - (bits - 1));
	return 0;
}

size_t dre_cdc_cut(const dre_cdc *c, const uint8_t *p, size_t n, int final)
{
	if (n <= c->min)
		return final ? n : 0;
	size_t lim = n < c->max ? n : c->max;
	size_t norm = c->avg < lim ? c->avg : lim;
	size_t i = c->min - 64;
	uint64_t h = 0;
	for (; i < c->min; i++)
		h = (h << 1) + gear[p[i]];
	for (; i < norm; i++) {
		h = (h << 1) + gear[p[i]];
		if (!(h & c->mask_s))
			return i + 1;
	}
	for (; i < lim; i++) {
		h = (h << 1) + gear[p[i]];
		if (!(h & c->mask_l))
			return i + 1;
	}
	if (lim == c->max)
		return lim;
	return final ? n : 0;
}
