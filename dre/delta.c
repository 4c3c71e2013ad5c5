/* delta.c: encode a changed chunk as copies from a base window (the data the
 * peer holds that followed the last matching chunk) plus inserted literals.
 * Greedy matching with a hash of 8-byte windows over every base position;
 * matches are extended both ways.  The base is small (a few chunks), so
 * indexing it all is cheap. */
#include <stdlib.h>

#include "dre_int.h"

#define HBITS 15
#define MINMATCH 16   /* a copy costs ~4 bytes of ops: shorter ones are not worth it */
#define INS_COST 4

static inline uint32_t h8(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return (uint32_t)((v * 0x9E3779B185EBCA87ULL) >> (64 - HBITS));
}

/* Append one instruction; -1 when max_ins is reached. */
static int add_ins(dre_delta_ins *ins, int *n, int max, uint32_t lit, uint32_t off, uint32_t len)
{
	if (*n >= max)
		return -1;
	ins[(*n)++] = (dre_delta_ins){ lit, off, len };
	return 0;
}

int dre_delta_encode(const uint8_t *base, size_t base_n, const uint8_t *tgt, size_t tgt_n,
		     dre_delta_ins *ins, int max_ins, dre_buf *lits)
{
	if (base_n < MINMATCH || tgt_n < MINMATCH)
		return -1;
	uint32_t *tab = malloc(sizeof(uint32_t) << HBITS);
	if (!tab)
		return -1;
	memset(tab, 0xff, sizeof(uint32_t) << HBITS);
	for (size_t i = 0; i + 8 <= base_n; i++)
		tab[h8(base + i)] = (uint32_t)i;
	int n = 0;
	size_t t = 0, lit_start = 0, lit_total = 0;
	while (t + 8 <= tgt_n) {
		uint32_t b = tab[h8(tgt + t)];
		if (b == UINT32_MAX || memcmp(base + b, tgt + t, 8)) {
			t++;
			continue;
		}
		size_t fwd = 8;
		while (t + fwd < tgt_n && b + fwd < base_n && tgt[t + fwd] == base[b + fwd])
			fwd++;
		size_t back = 0;
		while (t - back > lit_start && b > back && tgt[t - back - 1] == base[b - back - 1])
			back++;
		if (fwd + back < MINMATCH) {
			t++;
			continue;
		}
		size_t lit = t - back - lit_start;
		if (add_ins(ins, &n, max_ins, (uint32_t)lit, (uint32_t)(b - back), (uint32_t)(fwd + back)))
			goto fail;
		lit_total += lit;
		t += fwd;
		lit_start = t;
	}
	if (lit_start < tgt_n) {
		if (add_ins(ins, &n, max_ins, (uint32_t)(tgt_n - lit_start), 0, 0))
			goto fail;
		lit_total += tgt_n - lit_start;
	}
	/* worth it only if it clearly beats sending the chunk as a literal */
	if (lit_total + (size_t)n * INS_COST > tgt_n / 2)
		goto fail;
	free(tab);
	size_t pos = 0;
	for (int i = 0; i < n; i++) {
		if (dre_buf_add(lits, tgt + pos, ins[i].lit))
			return -1;
		pos += ins[i].lit + ins[i].copy_len;
	}
	return n;
fail:
	free(tab);
	return -1;
}
