/* index.h: the in-memory chunk index of a store (tag -> location). */
#ifndef WANOPT_DRE_INDEX_H
#define WANOPT_DRE_INDEX_H

#include "dre_int.h"

/* The table is split by a tag's top byte into DRE_IDX_PARTS parts that grow
 * (double) one at a time, so that growing copies 1/256 of the entries while
 * the store's lock is held, not all of them (12.6 million entries: 864 ms in
 * one go; 4.0-5.6 ms a part at 16 million, index.c).  1,024 parts (their
 * doublings 1.6-2.1 ms) grew slower in all, 3.5-4.8 s against 3.0-3.9 s to
 * 16 million entries, and their worst doublings were no shorter (15-23 ms
 * against 7.5-13): parts under 2 MiB get no huge pages. */
#define DRE_IDX_PARTS 256

typedef struct dre_idx_part {
	dre_ent *slot;
	size_t mask;  /* capacity - 1 (power of two) */
	size_t count; /* occupied slots */
} dre_idx_part;

typedef struct dre_idx {
	dre_idx_part part[DRE_IDX_PARTS];
	size_t count; /* occupied slots, all parts */
} dre_idx;

/* Empty index with room for at least cap entries; 0 or DRE_ENOMEM. */
int dre_idx_init(dre_idx *x, size_t cap);
void dre_idx_free(dre_idx *x);

static inline dre_idx_part *dre_idx_part_of(const dre_idx *x, uint64_t tag)
{
	return (dre_idx_part *)&x->part[tag >> 56];
}

/* The entry for tag, or NULL.  Pointers are valid until the next add/del. */
dre_ent *dre_idx_get(const dre_idx *x, uint64_t tag);
/* Lookups a pass over many tags (eviction, replay at open, peer files)
 * prefetches ahead of the one it makes: each misses the cache otherwise
 * (32 ahead was slower than 16 for eviction). */
#define DRE_IDX_AHEAD 16
/* Start loading tag's home slot into the cache (a lookup of it is coming). */
static inline void dre_idx_prefetch(const dre_idx *x, uint64_t tag)
{
	const dre_idx_part *p = dre_idx_part_of(x, tag);
	__builtin_prefetch(&p->slot[(size_t)tag & p->mask]);
}
/* The entry for tag, created zeroed (but for its tag) if absent; NULL if out of memory. */
dre_ent *dre_idx_add(dre_idx *x, uint64_t tag);
/* Remove an entry obtained from get/add.  A later entry of its part may move
 * into its slot (scans look at that slot again). */
void dre_idx_del(dre_idx *x, dre_ent *e);
/* Memory held by the table. */
size_t dre_idx_bytes(const dre_idx *x);

/* Scans.  Slot i of part p, for p < DRE_IDX_PARTS and i <= x->part[p].mask
 * (tag 0: empty). */
static inline dre_ent *dre_idx_slot(const dre_idx *x, size_t p, size_t i)
{
	return &x->part[p].slot[i];
}
/* The first entry at or after scan position *pos (start at 0), *pos moved
 * past it; NULL at the end.  A position is a part and a slot: a part that
 * grows between two calls moves its entries, so a scan that lets go of the
 * store's lock may see some twice or miss some. */
dre_ent *dre_idx_next(const dre_idx *x, uint64_t *pos);

#endif
