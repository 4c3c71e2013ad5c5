/* index.c: the in-memory chunk index: open addressing with linear probing,
 * keyed by the chunk tag (already uniformly distributed, so used as the hash:
 * its top byte picks the part, its low bits the home slot in the part).  Tag
 * 0 marks an empty slot.  Deletion shifts followers back (no tombstones). */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "index.h"

#define PART_MIN 256 /* slots of a part at least */
#define MAP_MIN (64u << 10)  /* parts of this many bytes or more get their own mapping */
#define HUGE (2u << 20)      /* a transparent huge page */

/* Write a zero to every page of p[0..n). */
static void touch_pages(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i += 4096)
		((volatile uint8_t *)p)[i] = 0;
}

/* Zeroed memory for a part of n bytes, every page of it written now, or
 * NULL.  Fresh memory maps the shared zero page: lookups would read it in,
 * and the first add to each page would then pay a copy-on-write fault with
 * a TLB flush on every CPU running a thread.  Faults are dear on this kind
 * of VM (2 MiB touched a page at a time: 5.4-5.5 ms, 10 us a fault), so a
 * part of MAP_MIN or more is mapped on its own and its pages are made in one
 * call (MADV_POPULATE_WRITE: 0.26 ms for 2 MiB), in huge pages where it
 * spans some (the system's THP defrag setting says how hard the kernel
 * tries for them).  Growing to 16 million entries (parts of 4 MiB at the
 * end), the last doublings held the lock 11.6-12.9 ms at the median with
 * pages touched one by one, 6.2-7.4 made in one call, 4.0-5.6 in huge pages
 * (5 runs each).  Lookups were no faster in huge pages: 32 million took
 * 2.0-2.4 s either way. */
static void *part_mem(size_t n)
{
	if (n < MAP_MIN) {
		uint8_t *p = calloc(1, n);
		if (p)
			touch_pages(p, n);
		return p;
	}
	/* a mapping of n + align holds an align-aligned piece of n bytes */
	size_t align = n < HUGE ? 4096 : HUGE;
	uint8_t *m = mmap(NULL, n + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	uint8_t *p = (uint8_t *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
	if (p > m)
		munmap(m, (size_t)(p - m));
	munmap(p + n, (size_t)(m + align - p));
	if (align == HUGE)
		madvise(p, n, MADV_HUGEPAGE); /* a hint: 4 KiB pages if refused */
	if (dre_mem_populate(p, n)) /* before Linux 5.14: a page at a time */
		touch_pages(p, n);
	return p;
}

/* Give back what part_mem(n) returned. */
static void part_mem_free(void *p, size_t n)
{
	if (n < MAP_MIN)
		free(p);
	else if (p)
		munmap(p, n);
}

static size_t part_size(const dre_idx_part *p)
{
	return (p->mask + 1) * sizeof(dre_ent);
}

/* An empty part of at least cap slots. */
static int part_init(dre_idx_part *p, size_t cap)
{
	size_t c = PART_MIN;
	while (c < cap)
		c <<= 1;
	p->slot = part_mem(c * sizeof *p->slot);
	if (!p->slot)
		return DRE_ENOMEM;
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
				part_mem_free(x->part[i].slot, part_size(&x->part[i]));
			return DRE_ENOMEM;
		}
	}
	return 0;
}

void dre_idx_free(dre_idx *x)
{
	for (size_t i = 0; i < DRE_IDX_PARTS; i++) {
		part_mem_free(x->part[i].slot, part_size(&x->part[i]));
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
	part_mem_free(p->slot, part_size(p));
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
		b += part_size(&x->part[i]);
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
