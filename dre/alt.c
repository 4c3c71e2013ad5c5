/*
 * alt.c: chunks that broke a run, found again without SHA-256; chunks whose
 * successor depends on where they occur (forks); and successors a peer holds
 * where ours differ.
 *
 * Each stored chunk remembers the chunk that followed it when it was first
 * seen; runs follow that.  A chunk that also occurs elsewhere (a license
 * header, a block copied within an image) is followed by something else
 * there, so a repeat of the data breaks its run at each such place, and the
 * encoder identifies the next chunk the slow way: cut it, hash it, look the
 * hash up.  This table remembers the chunks found that way, twice: keyed by
 * a fast checksum of their bytes (dre_fsum), and keyed by a checksum of
 * their first 64 bytes (enc.c's prefix_key).  The next repeat compares the
 * bytes at the break with the chunk noted under their first 64 bytes, with
 * no cutting at all (also for a stream's first chunk), and failing that cuts,
 * checksums and compares the whole chunk's candidate instead of hashing: the
 * bytes must be equal, so nothing is trusted to a key.  Direct-mapped and lossy (a miss only costs
 * the slow way), in memory only, shared by every encoder on the store under
 * its lock; the decoder needs none of it, since a reference names its chunk.
 *
 * Forks: successors are first-come on each side, so where a chunk occurs in
 * several places (zeros, a common header, the chunk before an edit), which
 * successor a store holds depends on what it saw first, and a core's store
 * sees what every branch sent.  A RUN or a delta window through such a link
 * may then name other chunks at the peer than here: the frame fails its
 * checksum and costs an ask and a learn.  The store notes a chunk as a fork
 * when a link after it is refused because it already has another successor
 * (or would be its own); an encoder for a tracked peer does not rely on a
 * fork's successor (it names the next chunk).  Direct-mapped and lossy (a
 * forgotten fork only risks the ask; a chunk taken for one that is not, 48
 * bits of its tag matching, only costs a reference), in memory only; written
 * under the store's lock, read without it.
 *
 * Successors at a peer: a fork still costs an ask when the peer runs through
 * it, since its encoder follows its own successor.  Where we know that one
 * (we sent the chunk to the peer as new, followed by another than ours), it
 * is noted per peer slot, and our decoder follows it for that peer's
 * streams.  (Learns relink the store itself; noting their links as well
 * saved no ask in a three-branch model and seemed to add some under heavy
 * eviction, where notes outlive their chunks.)  Direct-mapped and lossy (a
 * forgotten one costs the ask), in memory only, under the store's lock.
 */
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

#define ALT_SLOTS (1u << 16)   /* 1 MiB */
#define FORK_SLOTS (1u << 16)  /* 256 KiB: a slot holds the tag's upper half */

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

/* A fork's slot value: the upper half of its tag, never 0 (an empty slot). */
static uint32_t fork_key(uint64_t tag)
{
	uint32_t k = (uint32_t)(tag >> 32);
	return k ? k : 1;
}

void dre_store_fork_locked(dre_store *st, uint64_t tag)
{
	uint32_t *t = __atomic_load_n(&st->forks, __ATOMIC_ACQUIRE);
	if (!t) {
		if (!(t = calloc(FORK_SLOTS, sizeof *t)))
			return;
		__atomic_store_n(&st->forks, t, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&t[tag & (FORK_SLOTS - 1)], fork_key(tag), __ATOMIC_RELAXED);
}

int dre_store_forked(dre_store *st, uint64_t tag)
{
	uint32_t *t = __atomic_load_n(&st->forks, __ATOMIC_ACQUIRE);
	return t && tag && __atomic_load_n(&t[tag & (FORK_SLOTS - 1)], __ATOMIC_RELAXED) == fork_key(tag);
}

void dre_store_forked_prefetch(dre_store *st, uint64_t tag)
{
	uint32_t *t = __atomic_load_n(&st->forks, __ATOMIC_ACQUIRE);
	if (t)
		__builtin_prefetch(&t[tag & (FORK_SLOTS - 1)]);
}

#define PNEXT_SLOTS (1u << 15) /* 512 KiB: (peer, chunk) key, successor */

/* The slot key of chunk a at peer slot `slot`, never 0. */
static uint64_t pnext_key(int slot, uint64_t a)
{
	uint64_t k = a ^ ((uint64_t)(slot + 1) * 0x9E3779B97F4A7C15ULL);
	return k ? k : 1;
}

void dre_store_peer_next_set(dre_store *st, int slot, uint64_t a, uint64_t b)
{
	if (slot < 0 || !a || !b)
		return;
	uint64_t k = pnext_key(slot, a);
	pthread_mutex_lock(&st->mu);
	if (!st->pnext)
		__atomic_store_n(&st->pnext, calloc(PNEXT_SLOTS, sizeof *st->pnext), __ATOMIC_RELEASE);
	if (st->pnext) {
		st->pnext[k & (PNEXT_SLOTS - 1)][0] = k;
		st->pnext[k & (PNEXT_SLOTS - 1)][1] = b;
	}
	pthread_mutex_unlock(&st->mu);
}

void dre_store_peer_next_forget(dre_store *st)
{
	if (st->pnext)
		memset(st->pnext, 0, PNEXT_SLOTS * sizeof *st->pnext);
}

uint64_t dre_store_peer_next(dre_store *st, int slot, uint64_t a)
{
	if (slot < 0 || !a || !__atomic_load_n(&st->pnext, __ATOMIC_ACQUIRE)) /* none noted yet: no lock */
		return 0;
	uint64_t k = pnext_key(slot, a), b = 0;
	pthread_mutex_lock(&st->mu);
	if (st->pnext && st->pnext[k & (PNEXT_SLOTS - 1)][0] == k)
		b = st->pnext[k & (PNEXT_SLOTS - 1)][1];
	pthread_mutex_unlock(&st->mu);
	return b;
}
