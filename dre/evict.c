/*
 * evict.c: keeping a store within its size bound.  Eviction is by whole data
 * file, oldest first (store.c copies a chunk used while it sits in the
 * oldest quarter of the files forward, so what keeps being used stays);
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

void dre_store_unlink_file(const dre_store *st, uint32_t num)
{
	char path[4096];
	dre_store_path(st, num, "dat", path, sizeof path);
	unlink(path);
	dre_store_path(st, num, "idx", path, sizeof path);
	unlink(path);
}

/* Forget index entry e, whose file is being evicted. */
static void drop_entry(dre_store *st, dre_ent *e)
{
	dre_sizing_evicted(st, e->tag, e->len);
	st->data_bytes -= e->len;
	st->evicted_bytes += e->len;
	st->evicted_chunks++;
	dre_idx_del(&st->idx, e);
}

/* Drop the oldest data file and the index entries that still point into it. */
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
	struct dre_idxent *ents = NULL;
	size_t n = 0;
	if (dre_store_load_idx(st, f.num, f.size, &ents, &n) != 0) {
		/* no usable .idx: walk the table instead */
		for (size_t p = 0; p < DRE_IDX_PARTS; p++)
			for (size_t i = 0; i <= st->idx.part[p].mask; i++) {
				dre_ent *e = dre_idx_slot(&st->idx, p, i);
				while (e->tag && e->file == f.num)
					drop_entry(st, e); /* the slot now holds a follower: look again */
			}
	}
	for (size_t i = 0; i < n; i++) {
		/* each lookup misses the cache: load the ones a few entries on
		 * meanwhile (a file of 593,000 chunks: 103-120 ms under the lock, now
		 * 49-87; 32 ahead: 69-80) */
		if (i + DRE_IDX_AHEAD < n)
			dre_idx_prefetch(&st->idx, ents[i + DRE_IDX_AHEAD].a);
		if (ents[i].len == DRE_IDX_LINK)
			continue;
		dre_ent *e = dre_idx_get(&st->idx, ents[i].a);
		if (e && e->file == f.num)
			drop_entry(st, e);
	}
	free(ents);
	dre_store_close_file(&f);
	/* Deleted by the writer, after the lock is released.  A crash before
	 * that leaves a file of valid chunks, evicted again at the next open. */
	dre_wq_unlink(st, f.num);
	memmove(st->files, st->files + 1, (st->nfiles - 1) * sizeof *st->files);
	st->nfiles--;
	st->disk_bytes -= f.size;
	return 0;
}

int dre_store_enforce_limit(dre_store *st)
{
	while (st->disk_bytes > st->limit && st->disk_bytes > 0) {
		if (st->nfiles == 1 && st->files[0].size == 0)
			break;
		int rc = evict_oldest(st);
		if (rc)
			return rc;
	}
	return 0;
}

uint32_t dre_store_horizon(dre_store *st, uint64_t extra, uint32_t *active)
{
	pthread_mutex_lock(&st->mu);
	*active = st->nfiles ? st->files[st->nfiles - 1].num : 0;
	uint64_t total = st->disk_bytes + extra, dropped = 0;
	/* a shrink in progress takes files down to its target */
	uint64_t limit = dre_store_target(st);
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
	FILE *f = fopen(tmp, "w");
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
	while ((rc = dre_store_shrink_step(st, limit)) == 1)
		;
	return rc;
}

int dre_store_shrink_step(dre_store *st, uint64_t limit)
{
	if (!limit || st->readonly)
		return DRE_EINVAL;
	pthread_mutex_lock(&st->mu);
	st->file_max = dre_store_file_max(limit);
	dre_sizing_limit(st, limit);
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
