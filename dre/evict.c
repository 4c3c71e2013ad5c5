/*
 * evict.c: keeping a store within its size bound.  Eviction is by whole data
 * file, oldest first (store.c copies a chunk used while it sits in the
 * oldest quarter of the files forward, so what keeps being used stays).
 * An evicted file's chunks are gone for every lookup at once (live_from),
 * and the writer thread sweeps its entries out of the index afterwards;
 * dre_store_horizon tells an encoder which files may go before its peer
 * reads what it sends now.  The bound persists in DIR/limit; lowering it
 * at run time can be done a file at a time (dre_store_shrink_step), so that
 * no thread waits on the store lock for the whole of a large shrink.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "index.h"
#include "store_int.h"

_Static_assert(DRE_STORE_OP_BYTES(0) == 2 * DRE_REC_HDR, "a store operation appends two record headers");

void dre_store_unlink_data(const dre_store *st, uint32_t num)
{
	char path[4096];
	dre_store_path(st, num, "dat", path, sizeof path);
	unlink(path);
}

void dre_store_unlink_file(const dre_store *st, uint32_t num)
{
	char path[4096];
	dre_store_unlink_data(st, num);
	dre_store_path(st, num, "idx", path, sizeof path);
	unlink(path);
}

void dre_store_dead_gone(dre_store *st, const dre_ent *e)
{
	dre_sizing_evicted(st, e);
	st->dead_ents--;
}

/* Delete index entry e, of an evicted file; lock held. */
static void drop_dead(dre_store *st, dre_ent *e)
{
	dre_store_dead_gone(st, e);
	dre_idx_del(&st->idx, e);
}

/* Delete the entries of evicted file num listed in its .idx, ents[*at..n),
 * at most max of them; *at moves past them.  Lock held. */
static void drop_listed(dre_store *st, uint32_t num, const struct dre_idxent *ents, size_t n, size_t *at,
			size_t max)
{
	size_t i = *at, end = n - i > max ? i + max : n;
	for (; i < end; i++) {
		/* each lookup misses the cache: load the ones a few entries on
		 * meanwhile (a file of 593,000 chunks: 103-120 ms under the lock, now
		 * 49-87; 32 ahead: 69-80) */
		if (i + DRE_IDX_AHEAD < n)
			dre_idx_prefetch(&st->idx, ents[i + DRE_IDX_AHEAD].a);
		if (ents[i].len == DRE_IDX_LINK)
			continue;
		dre_ent *e = dre_idx_get(&st->idx, ents[i].a);
		if (e && e->file == num)
			drop_dead(st, e);
	}
	*at = i;
}

/* Delete every entry of an evicted file from part p of the index; lock held. */
static void drop_part(dre_store *st, size_t p)
{
	for (size_t i = 0; i <= st->idx.part[p].mask; i++) {
		dre_ent *e = dre_idx_slot(&st->idx, p, i);
		while (e->tag && dre_store_dead(st, e))
			drop_dead(st, e); /* the slot now holds a follower: look again */
	}
}

/* Entries per hold of the lock when sweeping from a .idx: about 1 ms. */
#define SWEEP_BATCH 8192

void dre_store_sweep(dre_store *st, uint32_t num, uint64_t size, pthread_mutex_t *lock)
{
	struct dre_idxent *ents = NULL;
	size_t n = 0, at = 0;
	/* without a usable .idx, walk the table a part at a time */
	int listed = dre_store_load_idx(st, num, size, &ents, &n) == 0;
	for (size_t p = 0; listed ? at < n : p < DRE_IDX_PARTS; p++) {
		uint64_t t0 = dre_pass_lock(lock);
		if (listed)
			drop_listed(st, num, ents, n, &at, SWEEP_BATCH);
		else
			drop_part(st, p);
		dre_pass_unlock(lock, t0);
	}
	free(ents);
}

/* Drop the oldest data file.  Its index entries count as gone at once
 * (live_from), and leave the index afterwards: the writer sweeps them out a
 * batch at a time, so no thread waits for all of them (a file of 190,000
 * entries, the default chunk size's 1 GiB file, held the lock for 15-30 ms,
 * and reading its .idx came on top). */
static int evict_oldest(dre_store *st)
{
	if (st->nfiles < 2) {
		int rc = dre_store_rotate(st);
		if (rc)
			return rc;
	}
	uint32_t num = st->files[0].num;
	dre_wq_forget(st, num);
	if (st->nfiles < 2 || st->files[0].num != num)
		return 0; /* changed while we waited for the writer: the caller looks again */
	struct dre_sfile f = st->files[0];
	st->live_from = st->files[1].num;
	st->dead_ents += f.ents;
	st->data_bytes -= f.ent_bytes;
	st->evicted_bytes += f.ent_bytes;
	st->evicted_chunks += f.ents;
	dre_sizing_file_gone(st, f.num, f.size);
	uint64_t on_disk = dre_store_room_evicted(st, &f);
	dre_store_close_file(st, &f);
	memmove(st->files, st->files + 1, (st->nfiles - 1) * sizeof *st->files);
	st->nfiles--;
	st->disk_bytes -= f.size;
	if (dre_wq_sweep(st, f.num, f.size))
		dre_store_sweep(st, f.num, f.size, NULL);
	/* Deleted by the writer, after the lock is released.  A crash before
	 * that leaves a file of valid chunks, evicted again at the next open. */
	dre_wq_unlink(st, f.num, on_disk);
	return 0;
}

int dre_store_enforce_limit(dre_store *st)
{
	uint64_t bound = dre_store_bound(st);
	while (st->disk_bytes > bound && st->disk_bytes > 0) {
		if (st->nfiles == 1 && st->files[0].size == 0)
			break;
		if (st->files[0].pins) { /* a frame in flight may need its chunks back */
			uint64_t over = st->disk_bytes - bound;
			if (over <= DRE_PIN_SLACK) {
				if (over > st->pin_over_max)
					st->pin_over_max = over;
				break;
			}
			st->pin_forced++;
		}
		int rc = evict_oldest(st);
		if (rc)
			return rc;
	}
	return 0;
}

void dre_store_evict_room(dre_store *st, uint32_t busy)
{
	uint64_t bound = dre_store_bound(st);
	while (!st->readonly && st->disk_bytes > bound && st->nfiles >= 2 && st->files[0].num != busy &&
	       !st->files[0].pins && !evict_oldest(st))
		;
}

uint32_t dre_store_pin(dre_store *st, uint32_t file)
{
	if (file == DRE_PIN_NONE)
		return file;
	pthread_mutex_lock(&st->mu);
	struct dre_sfile *f = dre_store_file_from(st, file);
	uint32_t num = f ? f->num : DRE_PIN_NONE;
	if (f)
		f->pins++;
	pthread_mutex_unlock(&st->mu);
	return num;
}

void dre_store_unpin(dre_store *st, uint32_t file)
{
	if (file == DRE_PIN_NONE)
		return;
	pthread_mutex_lock(&st->mu);
	struct dre_sfile *f = dre_store_file(st, file);
	if (f && f->pins)
		f->pins--;
	/* the store may be over its bound for this pin alone: back within it */
	if (f == st->files && !f->pins && !st->readonly && st->disk_bytes > dre_store_bound(st))
		dre_store_enforce_limit(st); /* an error shows at the next store operation */
	pthread_mutex_unlock(&st->mu);
}

uint32_t dre_store_pin_newest(dre_store *st)
{
	pthread_mutex_lock(&st->mu);
	uint32_t num = DRE_PIN_NONE;
	if (st->nfiles) {
		st->files[st->nfiles - 1].pins++;
		num = st->files[st->nfiles - 1].num;
	}
	pthread_mutex_unlock(&st->mu);
	return num;
}

uint32_t dre_store_horizon(dre_store *st, uint64_t extra, uint32_t *active)
{
	pthread_mutex_lock(&st->mu);
	*active = st->nfiles ? st->files[st->nfiles - 1].num : 0;
	uint64_t total = st->disk_bytes + extra, dropped = 0;
	/* a shrink in progress takes files down to its target, and a file
	 * system with less room down to that (room.c) */
	uint64_t limit = dre_store_target(st);
	if (st->room < limit)
		limit = st->room;
	size_t i = 0;
	/* dre_store_enforce_limit drops whole files, oldest first, while over the limit */
	while (i < st->nfiles && total - dropped > limit)
		dropped += st->files[i++].size;
	/* all of them: the active file too, and with it what is appended there next */
	uint32_t num = i < st->nfiles ? st->files[i].num : UINT32_MAX;
	pthread_mutex_unlock(&st->mu);
	return num;
}

uint64_t dre_store_file_max(uint64_t limit)
{
	uint64_t f = limit / 32;
	if (f < (1u << 20))
		f = 1u << 20;
	if (f > (1u << 30))
		f = 1u << 30;
	return f;
}

uint64_t dre_store_limit_load(const char *dir)
{
	char path[4200];
	unsigned long long v = 0;
	snprintf(path, sizeof path, "%s/limit", dir);
	FILE *f = fopen(path, "r");
	if (f && fscanf(f, "size_limit %llu", &v) != 1)
		v = 0;
	if (f)
		fclose(f);
	return v;
}

int dre_store_limit_save(dre_store *st)
{
	char path[4200], tmp[4300];
	if (st->readonly || st->limit_saved == st->limit)
		return 0;
	snprintf(path, sizeof path, "%s/limit", st->dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = dre_fopen_w(tmp, "w");
	int rc = !f || fprintf(f, "size_limit %llu\n", (unsigned long long)st->limit) < 0;
	if (f && fclose(f))
		rc = 1;
	if (!rc && rename(tmp, path))
		rc = 1;
	if (rc)
		unlink(tmp);
	else
		st->limit_saved = st->limit;
	return rc ? DRE_EIO : 0;
}

int dre_store_set_limit(dre_store *st, uint64_t limit)
{
	int rc;
	while ((rc = dre_store_shrink_step(st, limit, 0)) == 1)
		;
	return rc;
}

int dre_store_shrink_step(dre_store *st, uint64_t limit, int wait_pins)
{
	if (!limit || st->readonly)
		return DRE_EINVAL;
	pthread_mutex_lock(&st->mu);
	st->file_max = dre_store_file_max(limit);
	dre_sizing_limit(st, limit);
	if (st->disk_bytes > limit && st->nfiles && st->files[0].pins) {
		if (wait_pins) { /* the frames in flight are acknowledged within a round trip or so */
			if (st->limit > st->disk_bytes)
				st->limit = st->disk_bytes; /* meanwhile no growth */
			pthread_mutex_unlock(&st->mu);
			return 2;
		}
		st->pin_forced++; /* evicted all the same: counted */
	}
	int rc = st->disk_bytes > limit ? evict_oldest(st) : 0;
	/* until the target is reached, the bound is what the files hold now:
	 * appends in between evict only what they add */
	int over = st->disk_bytes > limit;
	st->limit = over ? st->disk_bytes : limit;
	st->shrink_to = over ? limit : 0;
	if (!rc && !over)
		rc = dre_store_limit_save(st);
	pthread_mutex_unlock(&st->mu);
	return rc ? rc : over;
}
