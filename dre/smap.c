/*
 * smap.c: the store's read-only mappings of its data files: made, unmapped
 * (under the exclusive side of st->maps, so no copy out of one runs at that
 * moment), and their pages let go every so many bytes read, by the store's
 * writer thread where there is one.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store_int.h"

void dre_store_map(struct dre_sfile *f, uint64_t map_len)
{
	f->map = NULL;
	f->map_len = 0;
	if (!map_len)
		return;
	/* MAP_SHARED: what pwrite puts in the page cache shows through at once.
	 * Only bytes below `written` are ever read, never a page past the end
	 * of the file. */
	void *m = mmap(NULL, map_len, PROT_READ, MAP_SHARED, f->fd, 0);
	if (m == MAP_FAILED)
		return;
	f->map = m;
	f->map_len = map_len;
}

void dre_store_close_file(dre_store *st, struct dre_sfile *f)
{
	/* a read window's pread (rwin.c) uses the descriptor under the read
	 * lock, and the generation voids windows on the file */
	pthread_rwlock_wrlock(&st->maps);
	if (f->map)
		munmap((void *)f->map, f->map_len);
	f->map = NULL;
	close(f->fd);
	st->map_gen++;
	pthread_rwlock_unlock(&st->maps);
}

#define LETGO_SLICE (32u << 20) /* pages let go per hold of the mappings' read lock */

/* Let go of sp[0..n) (snapshot of mapping generation gen) a slice per
 * hold of the read lock, so an unmap waits for one slice at most; stops if
 * an unmap came in between: its range may hold another mapping by then. */
static void letgo_slices(dre_store *st, const struct dre_span *sp, size_t n, uint64_t gen)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t off = 0; off < sp[i].n; off += LETGO_SLICE) {
			pthread_rwlock_rdlock(&st->maps);
			int live = st->map_gen == gen;
			if (live)
				madvise(sp[i].p + off, sp[i].n - off < LETGO_SLICE ? sp[i].n - off : LETGO_SLICE,
					MADV_DONTNEED);
			pthread_rwlock_unlock(&st->maps);
			if (!live)
				return;
		}
	}
}

void dre_store_letgo(dre_store *st, pthread_mutex_t *lock)
{
	struct dre_span *sp = NULL;
	size_t n = 0;
	if (lock) {
		pthread_mutex_lock(lock);
		st->wq_letgo = 0;
		sp = malloc((st->nfiles + 1) * sizeof *sp);
	}
	if (!sp) { /* no lock, or no memory: all of it under the lock */
		for (size_t i = 0; i < st->nfiles; i++)
			if (st->files[i].map)
				madvise((void *)st->files[i].map, st->files[i].map_len, MADV_DONTNEED);
		if (lock)
			pthread_mutex_unlock(lock);
		return;
	}
	for (size_t i = 0; i < st->nfiles; i++)
		if (st->files[i].map)
			sp[n++] = (struct dre_span){ (uint8_t *)st->files[i].map, st->files[i].map_len };
	uint64_t gen = st->map_gen; /* changes only under both locks */
	pthread_mutex_unlock(lock);
	letgo_slices(st, sp, n, gen);
	free(sp);
}

/* The mapped bytes of record at off (header and len payload bytes) of file
 * f, or NULL if not (yet) readable through the mapping.  Every MAP_LINGER
 * bytes read (MAP_LINGER_BATCH in a one-shot run: `wanopt dre decode` of
 * the (a) repeat peaked at 101 MiB with 256 MiB, 50.5 with 32, no faster:
 * 1.07x the time, 15 alternating runs), the mappings' pages are let go:
 * they stay in the page cache,
 * but do not pile up in this process's resident set (as file pages:
 * RssFile, shared).  Each page let go is mapped again when next read, a
 * fault per 16 pages, 10 us each on this kind of VM, so letting go less
 * often speeds up data read again and again: 200 MiB of repeated data went
 * through the pair on loopback in 0.234-0.267 s with 256 MiB, 0.276-0.298
 * with 32 (bench/proxy_bench.py, 3 alternating runs).  The let-go takes
 * time with the pages it lets go (4.6-6.0 ms for 32 MiB, 15-26 for 200,
 * 30-40 for 512), so the store's writer does it (dre_wq_letgo), not the
 * thread that reads, an event loop's, which did until 2026-12-05 and let
 * go every 32 MiB for that reason.  Lock held. */
#define MAP_LINGER (256u << 20)
#define MAP_LINGER_BATCH (32u << 20)
int dre_store_covers(const struct dre_sfile *f, uint64_t off, uint32_t len)
{
	uint64_t end = off + DRE_REC_HDR + len;
	return f->map && end <= f->written && end <= f->map_len;
}

const uint8_t *dre_store_mapped(dre_store *st, const struct dre_sfile *f, uint64_t off, uint32_t len)
{
	if (!dre_store_covers(f, off, len))
		return NULL;
	if ((st->map_read += len) > (st->batch ? MAP_LINGER_BATCH : MAP_LINGER)) {
		st->map_read = 0;
		if (dre_wq_letgo(st))
			dre_store_letgo(st, NULL);
	}
	return f->map + off;
}

