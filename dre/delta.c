/* delta.c: encode a changed chunk as copies from a base window (the data the
 * peer holds around the last matching chunk) plus inserted literals.
 *
 * Greedy matching: every 4th base position is indexed by a hash of the 8 bytes
 * there (a match of MINMATCH bytes always covers an indexed position), matches
 * are extended both ways, and before any hash lookup the continuation of the
 * previous copy is tried, so an insertion costs two copies however repetitive
 * the data around it. */
#include <stdlib.h>

#include "dre_int.h"

#define HBITS 14
#define STEP 4
#define MINMATCH 16   /* a copy costs ~4 bytes of ops: shorter ones are not worth it */
#define INS_COST 4

static inline uint32_t h8(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return (uint32_t)((v * 0x9E3779B185EBCA87ULL) >> (64 - HBITS));
}

/* Length of the common run of a and b, at most n. */
static size_t common(const uint8_t *a, const uint8_t *b, size_t n)
{
	size_t i = 0;
	while (i + 8 <= n) {
		uint64_t x, y;
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		if (x != y)
			return i + (size_t)(__builtin_ctzll(x ^ y) >> 3);
		i += 8;
	}
	while (i < n && a[i] == b[i])
		i++;
	return i;
}

struct matcher {
	const uint8_t *base, *tgt;
	size_t base_n, tgt_n;
	uint32_t *tab;
};

/* Best match at target position t: base offset in *bo, back extension (into
 * pending literals from lit_start) in *back; returns the forward length. */
static size_t match_at(const struct matcher *m, size_t t, size_t lit_start, size_t expect,
		       size_t *bo, size_t *back)
{
	size_t fwd = 0, b = 0;
	if (expect < m->base_n)
		fwd = common(m->tgt + t, m->base + expect, m->tgt_n - t < m->base_n - expect ? m->tgt_n - t
											 : m->base_n - expect);
	if (fwd >= MINMATCH) {
		b = expect;
	} else {
		uint32_t c = t + 8 <= m->tgt_n ? m->tab[h8(m->tgt + t)] : UINT32_MAX;
		if (c == UINT32_MAX)
			return 0;
		size_t lim = m->tgt_n - t < m->base_n - c ? m->tgt_n - t : m->base_n - c;
		fwd = common(m->tgt + t, m->base + c, lim);
		b = c;
	}
	size_t k = 0;
	while (t - k > lit_start && b > k && m->tgt[t - k - 1] == m->base[b - k - 1])
		k++;
	*bo = b;
	*back = k;
	return fwd;
}

int dre_delta_encode(const uint8_t *base, size_t base_n, const uint8_t *tgt, size_t tgt_n,
		     dre_delta_ins *ins, int max_ins, dre_buf *lits)
{
	if (base_n < MINMATCH || tgt_n < MINMATCH)
		return -1;
	struct matcher m = { base, tgt, base_n, tgt_n, malloc(sizeof(uint32_t) << HBITS) };
	if (!m.tab)
		return -1;
	memset(m.tab, 0xff, sizeof(uint32_t) << HBITS);
	for (size_t i = 0; i + 8 <= base_n; i += STEP)
		m.tab[h8(base + i)] = (uint32_t)i;
	int n = 0;
	size_t t = 0, lit_start = 0, lit_total = 0, expect = 0;
	while (t < tgt_n) {
		size_t bo = 0, back = 0, fwd = match_at(&m, t, lit_start, expect, &bo, &back);
		if (fwd + back < MINMATCH) {
			t++;
			continue;
		}
		if (n == max_ins)
			goto fail;
		size_t lit = t - back - lit_start;
		ins[n++] = (dre_delta_ins){ (uint32_t)lit, (uint32_t)(bo - back), (uint32_t)(fwd + back) };
		lit_total += lit;
		t += fwd;
		lit_start = t;
		expect = bo + fwd;
	}
	if (lit_start < tgt_n) {
		if (n == max_ins)
			goto fail;
		ins[n++] = (dre_delta_ins){ (uint32_t)(tgt_n - lit_start), 0, 0 };
		lit_total += tgt_n - lit_start;
	}
	free(m.tab);
	/* worth it only if it clearly beats sending the chunk as a literal */
	if (lit_total + (size_t)n * INS_COST > tgt_n / 2)
		return -1;
	size_t pos = 0;
	for (int i = 0; i < n; i++) {
		if (dre_buf_add(lits, tgt + pos, ins[i].lit))
			return -1;
		pos += ins[i].lit + ins[i].copy_len;
	}
	return n;
fail:
	free(m.tab);
	return -1;
}
