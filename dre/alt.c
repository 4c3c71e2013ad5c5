/*
 * alt.c: chunks that broke a run, found again without SHA-256.
 *
 * Each stored chunk remembers the chunk that followed it when it was first
 * seen; runs follow that.  A chunk that also occurs elsewhere (a license
 * header, a block copied within an image) is followed by something else
 * there, so a repeat of the data breaks its run at each such place, and the
 * encoder identifies the next chunk the slow way: cut it, hash it, look the
 * hash up.  This table remembers the chunks found that way, keyed by a fast
 * checksum of their bytes (dre_fsum), so the next repeat cuts, checksums and
 * compares the candidate's stored bytes instead of hashing: the bytes must be
 * equal, so nothing is trusted to the checksum.  Direct-mapped and lossy (a
 * miss only costs the slow way), in memory only, shared by every encoder on
 * the store under its lock; the decoder needs none of it, since a reference
 * names its chunk.
 */
#include <stdlib.h>

#include "store_int.h"

#define ALT_SLOTS (1u << 16) /* 1 MiB */

void dre_store_alt_set(dre_store *st, uint64_t key, uint64_t tag)
{
	pthread_mutex_lock(&st->mu);
	if (!st->alt)
		st->alt = calloc(ALT_SLOTS, sizeof *st->alt);
	if (st->alt) {
		st->alt[key & (ALT_SLOTS - 1)][0] = key;
		st->alt[key & (ALT_SLOTS - 1)][1] = tag;
	}
	pthread_mutex_unlock(&st->mu);
}

uint64_t dre_store_alt_get(dre_store *st, uint64_t key)
{
	uint64_t tag = 0;
	pthread_mutex_lock(&st->mu);
	if (st->alt && st->alt[key & (ALT_SLOTS - 1)][0] == key)
		tag = st->alt[key & (ALT_SLOTS - 1)][1];
	pthread_mutex_unlock(&st->mu);
	return tag;
}
