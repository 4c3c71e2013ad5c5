/* index.h: the in-memory chunk index of a store (tag -> location). */
#ifndef WANOPT_DRE_INDEX_H
#define WANOPT_DRE_INDEX_H

#include "dre_int.h"

typedef struct dre_idx {
	dre_ent *slot;
	size_t mask;  /* capacity - 1 (power of two) */
	size_t count; /* occupied slots */
} dre_idx;

/* Empty index with room for at least cap entries; 0 or DRE_ENOMEM. */
int dre_idx_init(dre_idx *x, size_t cap);
void dre_idx_free(dre_idx *x);
/* The entry for tag, or NULL.  Pointers are valid until the next add/del. */
dre_ent *dre_idx_get(const dre_idx *x, uint64_t tag);
/* Start loading tag's home slot into the cache (a lookup of it is coming). */
static inline void dre_idx_prefetch(const dre_idx *x, uint64_t tag)
{
	__builtin_prefetch(&x->slot[(size_t)tag & x->mask]);
}
/* The entry for tag, created zeroed (but for its tag) if absent; NULL if out of memory. */
dre_ent *dre_idx_add(dre_idx *x, uint64_t tag);
/* Remove an entry obtained from get/add. */
void dre_idx_del(dre_idx *x, dre_ent *e);
/* Memory held by the table. */
size_t dre_idx_bytes(const dre_idx *x);

#endif
