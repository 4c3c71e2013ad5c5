/* index.c: the in-memory chunk index: open addressing with linear probing,
 * keyed by the chunk tag (already uniformly distributed, so used as the hash:
 * its top byte picks the part, its low bits the home slot in the part).  Tag
 * 0 marks an empty slot.  Deletion shifts followers back (no tombstones). */
#include <stdlib.h>

#include "index.h"

#define PART_MIN 256 /* slots of a part at least */

/* An empty part of at least cap slots. */
static int part_init(dre_idx_part *p, size_t cap)
{
	size_t c = PART_MIN;
	while (c < cap)
		c <<= 1;
	p->slot = calloc(c, sizeof *p->slot);
	if (!p->slot)
		return DRE_ENOMEM;
	/* write every page now: fresh calloc'd memory maps the shared zero page,
	 * lookups read it in, and the first add to each page would then pay a
	 * copy-on-write fault with a TLB flush on every CPU running a thread */
	for (size_t i = 0; i < c * sizeof *p->slot; i += 4096)
		((volatile uint8_t *)p->slot)[i] = 0;
	p->mask = c - 1;
	p->count = 0;
	return 0;
}

int dre_idx_init(dre_idx *x, size_t cap)
{
	x->count = 0;
	for (size_t i = 0; i < DRE_IDX_PARTS; i++) {
		if (part_init(&x->part[i], cap / DRE_IDX_PARTS)) {
			while (i--)
				free(x->part[i].slot);
			return DRE_ENOMEM;
		}
	}
	return 0;
}

void dre_idx_free(dre_idx *x)
{
	for (size_t i = 0; i < DRE_IDX_PARTS; i++) {
		free(x->part[i].slot);
		x->part[i] = (dre_idx_part){ 0 };
	}
	x->count = 0;
}

dre_ent *dre_idx_get(const dre_idx *x, uint64_t tag)
{
	const dre_idx_part *p = dre_idx_part_of(x, tag);
	for (size_t i = (size_t)tag & p->mask;; i = (i + 1) & p->mask) {
		dre_ent *e = &p->slot[i];
		if (e->tag == tag)
			return e;
		if (!e->tag)
			return NULL;
	}
}

/* Double part p and reinsert its entries. */
static int part_grow(dre_idx_part *p)
{
	dre_idx_part n;
	if (part_init(&n, (p->mask + 1) * 2))
		return DRE_ENOMEM;
	for (size_t i = 0; i <= p->mask; i++) {
		if (!p->slot[i].tag)
			continue;
		size_t j = (size_t)p->slot[i].tag & n.mask;
		while (n.slot[j].tag)
			j = (j + 1) & n.mask;
		n.slot[j] = p->slot[i];
	}
	n.count = p->count;
	free(p->slot);
	*p = n;
	return 0;
}

dre_ent *dre_idx_add(dre_idx *x, uint64_t tag)
{
	dre_idx_part *p = dre_idx_part_of(x, tag);
	if ((p->count + 1) * 4 > (p->mask + 1) * 3 && part_grow(p))
		return NULL;
	size_t i = (size_t)tag & p->mask;
	while (p->slot[i].tag && p->slot[i].tag != tag)
		i = (i + 1) & p->mask;
	if (!p->slot[i].tag) {
		memset(&p->slot[i], 0, sizeof p->slot[i]);
		p->slot[i].tag = tag;
		p->count++;
		x->count++;
	}
	return &p->slot[i];
}

void dre_idx_del(dre_idx *x, dre_ent *e)
{
	dre_idx_part *p = dre_idx_part_of(x, e->tag);
	size_t i = (size_t)(e - p->slot);
	size_t j = i;
	p->count--;
	x->count--;
	for (;;) {
		p->slot[i].tag = 0;
		for (;;) {
			j = (j + 1) & p->mask;
			if (!p->slot[j].tag)
				return;
			size_t home = (size_t)p->slot[j].tag & p->mask;
			/* slot j may move to i if its home is not in the cyclic range (i, j] */
			if (i <= j ? (home <= i || home > j) : (home <= i && home > j))
				break;
		}
		p->slot[i] = p->slot[j];
		i = j;
	}
}

size_t dre_idx_bytes(const dre_idx *x)
{
	size_t b = 0;
	for (size_t i = 0; i < DRE_IDX_PARTS; i++)
		b += (x->part[i].mask + 1) * sizeof(dre_ent);
	return b;
}

dre_ent *dre_idx_next(const dre_idx *x, uint64_t *pos)
{
	uint64_t k = *pos;
	while ((k >> 32) < DRE_IDX_PARTS) {
		const dre_idx_part *p = &x->part[k >> 32];
		size_t i = (size_t)(k & 0xffffffffu);
		if (i > p->mask) {
			k = ((k >> 32) + 1) << 32;
			continue;
		}
		k++;
		if (p->slot[i].tag) {
			*pos = k;
			return &p->slot[i];
		}
	}
	*pos = k;
	return NULL;
}
