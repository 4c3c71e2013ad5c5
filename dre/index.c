/* index.c: the in-memory chunk index: open addressing with linear probing,
 * keyed by the chunk tag (already uniformly distributed, so used as the hash).
 * Tag 0 marks an empty slot.  Deletion shifts followers back (no tombstones). */
#include <stdlib.h>

#include "index.h"

int dre_idx_init(dre_idx *x, size_t cap)
{
	size_t c = 1024;
	while (c < cap)
		c <<= 1;
	x->slot = calloc(c, sizeof *x->slot);
	if (!x->slot)
		return DRE_ENOMEM;
	/* write every page now: fresh calloc'd memory maps the shared zero page,
	 * lookups read it in, and the first add to each page would then pay a
	 * copy-on-write fault with a TLB flush on every CPU running a thread */
	for (size_t i = 0; i < c * sizeof *x->slot; i += 4096)
		((volatile uint8_t *)x->slot)[i] = 0;
	x->mask = c - 1;
	x->count = 0;
	return 0;
}

void dre_idx_free(dre_idx *x)
{
	free(x->slot);
	x->slot = NULL;
	x->count = x->mask = 0;
}

dre_ent *dre_idx_get(const dre_idx *x, uint64_t tag)
{
	for (size_t i = (size_t)tag & x->mask;; i = (i + 1) & x->mask) {
		dre_ent *e = &x->slot[i];
		if (e->tag == tag)
			return e;
		if (!e->tag)
			return NULL;
	}
}

/* Double the table and reinsert every entry. */
static int idx_grow(dre_idx *x)
{
	dre_idx n;
	if (dre_idx_init(&n, (x->mask + 1) * 2))
		return DRE_ENOMEM;
	for (size_t i = 0; i <= x->mask; i++) {
		if (!x->slot[i].tag)
			continue;
		size_t j = (size_t)x->slot[i].tag & n.mask;
		while (n.slot[j].tag)
			j = (j + 1) & n.mask;
		n.slot[j] = x->slot[i];
	}
	n.count = x->count;
	free(x->slot);
	*x = n;
	return 0;
}

dre_ent *dre_idx_add(dre_idx *x, uint64_t tag)
{
	if ((x->count + 1) * 4 > (x->mask + 1) * 3 && idx_grow(x))
		return NULL;
	size_t i = (size_t)tag & x->mask;
	while (x->slot[i].tag && x->slot[i].tag != tag)
		i = (i + 1) & x->mask;
	if (!x->slot[i].tag) {
		memset(&x->slot[i], 0, sizeof x->slot[i]);
		x->slot[i].tag = tag;
		x->count++;
	}
	return &x->slot[i];
}

void dre_idx_del(dre_idx *x, dre_ent *e)
{
	size_t i = (size_t)(e - x->slot);
	size_t j = i;
	x->count--;
	for (;;) {
		x->slot[i].tag = 0;
		for (;;) {
			j = (j + 1) & x->mask;
			if (!x->slot[j].tag)
				return;
			size_t home = (size_t)x->slot[j].tag & x->mask;
			/* slot j may move to i if its home is not in the cyclic range (i, j] */
			if (i <= j ? (home <= i || home > j) : (home <= i && home > j))
				break;
		}
		x->slot[i] = x->slot[j];
		i = j;
	}
}

size_t dre_idx_bytes(const dre_idx *x)
{
	return (x->mask + 1) * sizeof *x->slot;
}
