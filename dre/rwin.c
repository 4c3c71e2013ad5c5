/*
 * rwin.c: a reader's window on the store's data files (dre_rwin): when reads
 * run on through a data file, as a repeat's chunks do, the next 128 KiB are
 * read ahead with one pread and the following chunks come out of that.
 * Reading through the mappings instead maps each page anew after a let-go
 * (smap.c), and on some VMs the first touch of a mapped page costs more than
 * copying it: 200 MiB compared against a fresh mapping took 123 ms, read in
 * 128 KiB preads 14 ms (and a pread a chunk, 2-8 KiB, 50-160 ms).  On others
 * the copy costs more (16 ms mapped, 37 through windows): a store whose
 * probe (rprobe.c) found the mapping faster reads runs through it and uses
 * windows only where no mapping covers a record.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_int.h"

#define RWIN_LEN (128u << 10)

void dre_rwin_free(dre_rwin *w)
{
	free(w->buf);
	memset(w, 0, sizeof *w);
}

size_t dre_rwin_mem(const dre_rwin *w)
{
	return w->buf ? RWIN_LEN : 0;
}

/* The record of e in w's buffer if its header agrees with e, else NULL. */
static const uint8_t *in_window(const dre_rwin *w, const dre_ent *e)
{
	uint64_t end = e->off + DRE_REC_HDR + e->len;
	if (!w->len || w->file != e->file || e->off < w->off || end > w->off + w->len)
		return NULL;
	const uint8_t *m = w->buf + (e->off - w->off);
	return dre_rec_sound(m, e, NULL) ? NULL : m;
}

/* Fill w from e's record on (lock held; released during the pread, under
 * the mappings' read lock, which keeps the file open): 1 if the record is
 * in, 0 if not (lock held again either way). */
static int refill(dre_store *st, dre_rwin *w, const dre_ent *e)
{
	struct dre_sfile *f = dre_store_file(st, e->file);
	uint64_t end = e->off + DRE_REC_HDR + e->len;
	if (!f || end > f->written || end - e->off > RWIN_LEN || (!w->buf && !(w->buf = malloc(RWIN_LEN))))
		return 0;
	size_t n = f->written - e->off < RWIN_LEN ? (size_t)(f->written - e->off) : RWIN_LEN;
	int fd = f->fd;
	w->gen = st->map_gen;
	pthread_rwlock_rdlock(&st->maps);
	pthread_mutex_unlock(&st->mu);
	ssize_t got = pread(fd, w->buf, n, (off_t)e->off);
	pthread_rwlock_unlock(&st->maps);
	pthread_mutex_lock(&st->mu);
	w->file = e->file;
	w->off = e->off;
	w->len = got > 0 ? (uint32_t)got : 0;
	return got >= (ssize_t)(end - e->off);
}

/* Does a mapping cover e's record (lock held)? */
static int mapped(dre_store *st, const dre_ent *e)
{
	const struct dre_sfile *f = dre_store_file(st, e->file);
	return f && dre_store_covers(f, e->off, e->len);
}

const uint8_t *dre_rwin_unlock(dre_store *st, dre_rwin *w, const dre_ent *e)
{
	if (!w || (st->reads.way == DRE_READS_MAP && mapped(st, e)))
		return NULL;
	dre_ent c = *e; /* e may lie in the index, which may change during a refill */
	e = &c;
	int runs_on = e->file == w->last_file && e->off >= w->last_end && e->off - w->last_end < RWIN_LEN;
	w->last_file = e->file;
	w->last_end = e->off + DRE_REC_HDR + e->len;
	if (w->len && w->gen != st->map_gen)
		w->len = 0; /* a file closed since: maybe this one */
	const uint8_t *m = in_window(w, e);
	if (!m && runs_on && refill(st, w, e))
		m = in_window(w, e);
	if (m)
		pthread_mutex_unlock(&st->mu);
	return m;
}
