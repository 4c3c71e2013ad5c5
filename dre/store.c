/*
 * store.c: the persistent segment store: append-only data files plus an
 * in-memory index (index.c), bounded in size, shared by every stream of a node.
 *
 * DIR/STORE        "wanopt-store 1" and the store id (a new id means a new,
 *                  empty store: peers use it to notice a wiped cache)
 * DIR/limit        the size limit last set ("size_limit N"): a store opened
 *                  without one keeps it instead of the default
 * DIR/lock         flock()ed while a process has the store open for writing
 * DIR/NNNNNNNN.dat records, appended; the highest-numbered file is active
 * DIR/NNNNNNNN.idx written when a data file is sealed: its records' index
 *                  entries, so a restart loads the index without reading data
 *
 * A record is a 56-byte header (magic, length, SHA-256, predecessor tag,
 * checksum over header and payload) and the payload.  A LINK record (no
 * payload) says "chunk b followed chunk a".  At open, sealed files are loaded
 * from their .idx; the active file (and any file whose .idx is missing or stale)
 * is read record by record and cut at the first record that fails its checksum:
 * a torn write is dropped, never served.  Reads check the checksum again.
 *
 * Eviction is by whole data file, oldest first; a chunk referenced while it sits
 * in the oldest quarter of the files is copied forward to the active file, so
 * what keeps being used stays (an approximation of LRU at a small copy cost).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "index.h"
#include "store_int.h"

#define DEFAULT_LIMIT (1ULL << 30)

struct dre_sfile *dre_store_file_from(dre_store *st, uint32_t num)
{
	size_t lo = 0, hi = st->nfiles;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (st->files[mid].num < num)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < st->nfiles ? &st->files[lo] : NULL;
}

static struct dre_sfile *file_find(dre_store *st, uint32_t num)
{
	struct dre_sfile *f = dre_store_file_from(st, num);
	return f && f->num == num ? f : NULL;
}

struct dre_sfile *dre_store_file(dre_store *st, uint32_t num)
{
	return file_find(st, num);
}

void dre_store_written(dre_store *st, uint32_t num, uint64_t off, uint64_t end, int rc)
{
	struct dre_sfile *f = file_find(st, num);
	if (f && rc && !f->cut)
		f->cut = off + 1;
	if (f && !rc && end > f->written && (!f->cut || end < f->cut))
		f->written = end;
}

/* Note an index entry (a chunk, or a link when len == DRE_IDX_LINK) in the
 * active file's list, written out as its .idx when the file is sealed. */
static int act_note(dre_store *st, uint64_t a, uint64_t b, uint32_t off, uint32_t len)
{
	struct dre_idxent ie = { a, b, off, len };
	return dre_buf_add(&st->act, &ie, sizeof ie);
}

/* Count index entry e in (sign 1) or out of (-1) its file's tally; lock held. */
static void tally(dre_store *st, const dre_ent *e, int sign)
{
	struct dre_sfile *f = st->nfiles && st->files[st->nfiles - 1].num == e->file ? &st->files[st->nfiles - 1]
										      : file_find(st, e->file);
	if (f) {
		f->ents += (uint64_t)(int64_t)sign;
		f->ent_bytes += (uint64_t)((int64_t)sign * e->len);
	}
}

/* A new index entry for tag, which has no live one: zeroed but for its tag,
 * whether made, or taken over from an evicted file not yet swept out.  NULL
 * if out of memory.  Lock held. */
static dre_ent *ent_new(dre_store *st, uint64_t tag)
{
	size_t had = st->idx.count;
	dre_ent *e = dre_idx_add(&st->idx, tag);
	if (e && st->idx.count == had) {
		dre_store_dead_gone(st, e);
		*e = (dre_ent){ .tag = tag };
	}
	return e;
}

/* Apply one index entry to the in-memory index (open-time replay and writes). */
int dre_store_apply(dre_store *st, uint32_t file, const struct dre_idxent *ie)
{
	if (ie->len == DRE_IDX_LINK) {
		/* link records are written only when they change the successor
		 * (unset, or relinked): the latest one holds */
		dre_ent *e = dre_store_ent(st, ie->a);
		if (e)
			e->next = ie->b;
		return 0;
	}
	dre_ent *e = dre_store_ent(st, ie->a);
	if (e) {
		st->data_bytes -= e->len;
		tally(st, e, -1);
	} else if (!(e = ent_new(st, ie->a))) {
		return DRE_ENOMEM;
	}
	e->file = file;
	e->off = ie->off;
	e->len = ie->len;
	st->data_bytes += e->len;
	tally(st, e, 1);
	if (ie->b) {
		dre_ent *p = dre_store_ent(st, ie->b);
		if (p && !p->next)
			p->next = ie->a;
		else if (p && p->next != ie->a)
			dre_store_fork_locked(st, ie->b);
	}
	return 0;
}

/* Append one record to the active file (through the write-behind queue),
 * rotating first if it would overflow.  On success, file and off say where it
 * went. */
static int append_rec(dre_store *st, const uint8_t *hdr, const void *payload, uint32_t len,
		      uint32_t *file, uint32_t *off)
{
	struct dre_sfile *f = &st->files[st->nfiles - 1];
	if (f->size && f->size + DRE_REC_HDR + len > st->file_max) {
		int rc = dre_store_rotate(st);
		if (rc)
			return rc;
		f = &st->files[st->nfiles - 1];
	}
	if (dre_wq_append(st, f, hdr, payload, len))
		return DRE_ENOMEM;
	uint64_t want = DRE_REC_HDR + (uint64_t)len;
	*file = f->num;
	*off = (uint32_t)f->size;
	f->size += want;
	st->disk_bytes += want;
	return 0;
}

int dre_store_find(dre_store *st, uint64_t tag, dre_ent *out)
{
	return dre_store_find_ahead(st, tag, 0, out);
}

int dre_store_find_ahead(dre_store *st, uint64_t tag, uint64_t ahead, dre_ent *out)
{
	pthread_mutex_lock(&st->mu);
	if (ahead)
		dre_idx_prefetch(&st->idx, ahead);
	dre_ent *e = dre_store_ent(st, tag);
	st->lookups++;
	if (e) {
		*out = *e;
		st->hits++;
	}
	pthread_mutex_unlock(&st->mu);
	return e != NULL;
}

/* Write a chunk record (header hdr, payload p) and index it; the caller holds
 * the lock. */
static int put_locked(dre_store *st, const uint8_t *hdr, const uint8_t h[32], const void *p,
		      uint32_t len, uint64_t prev, dre_ent *out)
{
	uint32_t file, off;
	uint64_t tag = dre_fp_tag(h);
	int rc = append_rec(st, hdr, p, len, &file, &off);
	if (rc)
		return rc;
	struct dre_idxent ie = { tag, prev, off, len };
	if (act_note(st, tag, prev, off, len) || dre_store_apply(st, file, &ie))
		return DRE_ENOMEM;
	dre_sizing_stored(st, tag, len);
	rc = dre_store_enforce_limit(st);
	dre_ent *e = dre_store_ent(st, tag);
	if (e)
		*out = *e;
	else
		memset(out, 0, sizeof *out);
	return rc;
}

/* The data on disk of chunk cur went bad: forget the chunk rather than serve
 * it.  Its successor goes with it: stored again, it gets the next one seen,
 * and a peer may still hold the old one, so note it as a fork (no run through
 * it, alt.c).  Lock held. */
static void drop_rotten_locked(dre_store *st, dre_ent *cur)
{
	st->data_bytes -= cur->len;
	st->bad_reads++;
	tally(st, cur, -1);
	dre_store_fork_locked(st, cur->tag);
	dre_idx_del(&st->idx, cur);
}

/* Chunk e (fingerprint h, bytes p[0..len)) is stored already: 1 if its
 * stored copy (where mapped) holds exactly that, else 0, the copy dropped
 * (it went bad on disk; a peer's learn brings such a chunk back).  Lock held. */
static int present_sound_locked(dre_store *st, dre_ent *e, const uint8_t h[32], const void *p, uint32_t len)
{
	struct dre_sfile *f = file_find(st, e->file);
	const uint8_t *m = f && e->len == len ? dre_store_mapped(st, f, e->off, len) : NULL;
	if (!m || (!memcmp(m + 8, h, 32) && !memcmp(m + DRE_REC_HDR, p, len)))
		return 1;
	drop_rotten_locked(st, e);
	return 0;
}

int dre_store_put_after(dre_store *st, const uint8_t h[32], const void *p, uint32_t len,
			uint64_t prev, dre_ent *out)
{
	if (st->readonly || !len || len > DRE_CHUNK_MAX)
		return DRE_EINVAL;
	uint8_t hdr[DRE_REC_HDR];
	dre_rec_header(hdr, DRE_REC_CHUNK, len, h, prev, p); /* before locking: it reads all of p */
	pthread_mutex_lock(&st->mu);
	dre_wq_throttle(st);
	int rc;
	dre_ent *e = dre_store_ent(st, dre_fp_tag(h));
	if (e && !present_sound_locked(st, e, h, p, len))
		e = NULL; /* its stored copy went bad: dropped, and stored anew below */
	if (e) {
		*out = *e;
		rc = 0;
	} else {
		rc = put_locked(st, hdr, h, p, len, prev, out);
		if (rc == 0)
			rc = 1;
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int dre_store_add(dre_store *st, const uint8_t h[32], const void *p, uint32_t len, uint64_t prev,
		  uint32_t bits, int relink)
{
	dre_ent e;
	uint64_t tag = dre_fp_tag(h);
	int rc = dre_store_put_after(st, h, p, len, prev, &e);
	if (rc == DRE_EIO)
		return 0; /* no new data file could be made (counted): not stored, as a chunk whose write failed */
	if (rc < 0)
		return rc;
	if (prev && relink)
		dre_store_relink(st, prev, tag);
	else if (prev && rc == 0)
		dre_store_link(st, prev, tag); /* was stored already: link as for a reference */
	dre_store_mark(st, tag, bits);
	return 0;
}

/* Read header and payload of e's record and check them (the payload's
 * checksum only if verify); caller holds the lock. */
static int read_locked(dre_store *st, const dre_ent *e, uint8_t hdr[DRE_REC_HDR], void *buf, int verify)
{
	dre_ent *cur = dre_store_ent(st, e->tag);
	if (!cur)
		return DRE_EMISS;
	struct dre_sfile *f = file_find(st, cur->file);
	if (!f)
		return DRE_EMISS;
	struct iovec iov[2] = { { hdr, DRE_REC_HDR }, { buf, cur->len } };
	ssize_t want = DRE_REC_HDR + (buf ? cur->len : 0);
	const uint8_t *m = dre_store_mapped(st, f, cur->off, cur->len);
	if (m) {
		memcpy(hdr, m, DRE_REC_HDR);
		if (buf)
			memcpy(buf, m + DRE_REC_HDR, cur->len);
	} else if (st->wq_forgot == cur->file + 1) {
		/* evicted as we speak (evict_oldest): its unwritten records are
		 * gone, and the index entries go next */
		return DRE_EMISS;
	} else if (!dre_wq_read(st, cur->file, cur->off, hdr, buf, cur->len)) {
		ssize_t got = preadv(f->fd, iov, buf ? 2 : 1, cur->off);
		if (got != want) {
			/* e.g. its write failed (a full disk): a miss, which the
			 * peer can answer, not an error that ends the stream */
			st->io_errors++;
			if (got < 0 || !st->io_errno)
				st->io_errno = got < 0 ? errno : EIO; /* short: keep the write's errno */
			memset(hdr, 0, DRE_REC_HDR);
		}
	}
	if (dre_rec_sound(hdr, cur, verify ? buf : NULL)) {
		drop_rotten_locked(st, cur);
		return DRE_EMISS;
	}
	return 0;
}

int dre_store_read(dre_store *st, const dre_ent *e, void *buf)
{
	uint8_t hdr[DRE_REC_HDR];
	pthread_mutex_lock(&st->mu);
	int rc = read_locked(st, e, hdr, buf, 1);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int dre_store_read_raw(dre_store *st, const dre_ent *e, void *buf)
{
	pthread_mutex_lock(&st->mu);
	struct dre_sfile *f = file_find(st, e->file);
	const uint8_t *m = f ? dre_store_mapped(st, f, e->off, e->len) : NULL;
	int rc = f ? 0 : DRE_EMISS;
	if (m)
		memcpy(buf, m + DRE_REC_HDR, e->len);
	else if (f && pread(f->fd, buf, e->len, e->off + DRE_REC_HDR) != (ssize_t)e->len)
		rc = DRE_EMISS;
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* The mapped record of index entry cur if its header is sound, with the
 * lock released and the mappings' read lock taken (the caller reads it, then
 * releases that); else NULL, lock still held (read_locked reads the record,
 * or drops it as bad). */
static const uint8_t *mapped_unlock(dre_store *st, const dre_ent *cur)
{
	struct dre_sfile *f = file_find(st, cur->file);
	const uint8_t *m = f ? dre_store_mapped(st, f, cur->off, cur->len) : NULL;
	if (!m || dre_rec_sound(m, cur, NULL))
		return NULL;
	pthread_rwlock_rdlock(&st->maps);
	pthread_mutex_unlock(&st->mu);
	return m;
}

/* The copy out of a mapping runs after the lock is released: the chunks of
 * a repeat are most of what a decoder does, and the helper thread's hit
 * bookkeeping waited for them on the lock (futex waits and wakes took a
 * fifth of decoding a repeat).  This is dre_store_read_fast after the
 * lookup: cur is e->tag's entry (or NULL); called with the lock held,
 * returns with it released. */
static int read_fast_ways(dre_store *st, const dre_ent *e, dre_ent *cur, void *buf, dre_rwin *w)
{
	uint8_t hdr[DRE_REC_HDR];
	if (cur && w) {
		dre_ent c = *cur;
		const uint8_t *m = dre_rwin_unlock(st, w, &c);
		if (m) {
			memcpy(buf, m + DRE_REC_HDR, c.len);
			return 0;
		}
		cur = dre_store_ent(st, e->tag); /* the lock may have been let go meanwhile */
	}
	uint32_t len = cur ? cur->len : 0;
	const uint8_t *m = cur ? mapped_unlock(st, cur) : NULL;
	if (m) {
		memcpy(buf, m + DRE_REC_HDR, len);
		pthread_rwlock_unlock(&st->maps);
		return 0;
	}
	int rc = read_locked(st, e, hdr, buf, 0);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* read_fast_ways, timed now and then (rtune.c); the same contract. */
static int read_fast_unlock(dre_store *st, const dre_ent *e, dre_ent *cur, void *buf, dre_rwin *w)
{
	uint32_t len = cur ? cur->len : 0;
	uint64_t t0 = dre_rtune_begin(st, w, len);
	int rc = read_fast_ways(st, e, cur, buf, w);
	dre_rtune_end(w, t0, len);
	return rc;
}

int dre_store_read_fast(dre_store *st, const dre_ent *e, void *buf, dre_rwin *w)
{
	pthread_mutex_lock(&st->mu);
	return read_fast_unlock(st, e, dre_store_ent(st, e->tag), buf, w);
}

int dre_store_read_tag(dre_store *st, uint64_t tag, size_t max, void *buf, dre_rwin *w, dre_ent *out)
{
	pthread_mutex_lock(&st->mu);
	dre_ent *cur = dre_store_ent(st, tag);
	st->lookups++;
	if (!cur)
		out->tag = 0;
	if (!cur || cur->len > max) {
		pthread_mutex_unlock(&st->mu);
		return cur ? DRE_ECORRUPT : DRE_EMISS;
	}
	st->hits++;
	*out = *cur;
	if (cur->next) /* a run's decoder looks up the successor next: it loads during the copy */
		dre_idx_prefetch(&st->idx, cur->next);
	return read_fast_unlock(st, out, cur, buf, w);
}

/* 1 if the chunk of index entry *cur is stored as exactly p[0..cur->len),
 * compared in place where the mapping covers it, after the lock is
 * released (as dre_store_read_fast copies); else read into scratch, which
 * may drop a bad record and with it the entry.  Called with the lock held;
 * returns with it released. */
static int equal_ways(dre_store *st, dre_ent e, const void *p, void *scratch, dre_rwin *w)
{
	uint8_t hdr[DRE_REC_HDR];
	const uint8_t *m = dre_rwin_unlock(st, w, &e);
	if (m)
		return !memcmp(m + DRE_REC_HDR, p, e.len);
	m = mapped_unlock(st, &e);
	int eq;
	if (m) {
		eq = !memcmp(m + DRE_REC_HDR, p, e.len);
		pthread_rwlock_unlock(&st->maps);
		return eq;
	}
	eq = file_find(st, e.file) && !read_locked(st, &e, hdr, scratch, 0) && !memcmp(scratch, p, e.len);
	pthread_mutex_unlock(&st->mu);
	return eq;
}

/* equal_ways, timed now and then (rtune.c); the same contract. */
static int equal_unlock(dre_store *st, dre_ent e, const void *p, void *scratch, dre_rwin *w)
{
	uint64_t t0 = dre_rtune_begin(st, w, e.len);
	int eq = equal_ways(st, e, p, scratch, w);
	dre_rtune_end(w, t0, e.len);
	return eq;
}

int dre_store_match(dre_store *st, uint64_t tag, const void *p, size_t max, uint32_t bits, void *scratch,
		    dre_rwin *w, dre_ent *out)
{
	pthread_mutex_lock(&st->mu);
	dre_ent *cur = dre_store_ent(st, tag);
	st->lookups++;
	if (!cur || cur->len > max || (bits && !(cur->peers & bits))) {
		pthread_mutex_unlock(&st->mu);
		return 0;
	}
	*out = *cur;
	st->hits++;
	/* a run next looks up the successor, and whether this chunk is a
	 * fork: both load during the compare */
	if (cur->next)
		dre_idx_prefetch(&st->idx, cur->next);
	dre_store_forked_prefetch(st, tag);
	return equal_unlock(st, *cur, p, scratch, w);
}

int dre_store_same(dre_store *st, const dre_ent *e, const uint8_t h[32])
{
	uint8_t hdr[DRE_REC_HDR], *buf = NULL;
	pthread_mutex_lock(&st->mu);
	dre_ent *cur = dre_store_ent(st, e->tag);
	struct dre_sfile *f = cur ? file_find(st, cur->file) : NULL;
	const uint8_t *m = f ? dre_store_mapped(st, f, cur->off, cur->len) : NULL;
	int rc;
	if (m) { /* checked in place */
		memcpy(hdr, m, DRE_REC_HDR);
		if ((rc = dre_rec_sound(hdr, cur, m + DRE_REC_HDR) ? DRE_EMISS : 0))
			drop_rotten_locked(st, cur);
	} else {
		buf = cur ? malloc(cur->len) : NULL;
		rc = buf ? read_locked(st, e, hdr, buf, 1) : DRE_EMISS;
	}
	pthread_mutex_unlock(&st->mu);
	free(buf);
	return rc == 0 && memcmp(hdr + 8, h, 32) == 0;
}

/* Make b (0: none) the successor of index entry e (chunk a), with a LINK
 * record so that a reopen replays it; lock held. */
static void set_next_locked(dre_store *st, dre_ent *e, uint64_t a, uint64_t b)
{
	uint8_t hdr[DRE_REC_HDR], ab[32] = { 0 };
	uint32_t file, off;
	memcpy(ab, &a, 8);
	memcpy(ab + 8, &b, 8);
	dre_rec_header(hdr, DRE_REC_LINK, 0, ab, 0, NULL);
	e->next = b;
	if (append_rec(st, hdr, NULL, 0, &file, &off) == 0)
		act_note(st, a, b, 0, DRE_IDX_LINK);
}

/* Record b as a's successor if a has none (LINK record), else note a as a
 * fork if b is not that successor (or is a itself); lock held. */
static void link_locked(dre_store *st, uint64_t a, uint64_t b)
{
	dre_ent *e = a && b ? dre_store_ent(st, a) : NULL;
	if (e && !e->next && a != b)
		set_next_locked(st, e, a, b);
	else if (e && e->next != b)
		dre_store_fork_locked(st, a);
}

int dre_store_next_of(dre_store *st, uint64_t tag, uint64_t *next)
{
	pthread_mutex_lock(&st->mu);
	dre_ent *e = tag ? dre_store_ent(st, tag) : NULL;
	if (e)
		*next = e->next;
	pthread_mutex_unlock(&st->mu);
	return e != NULL;
}

void dre_store_set_next(dre_store *st, uint64_t a, uint64_t expect, uint64_t b)
{
	if (st->readonly || !a || a == b)
		return;
	pthread_mutex_lock(&st->mu);
	dre_ent *e = dre_store_ent(st, a);
	if (e && e->next == expect && e->next != b)
		set_next_locked(st, e, a, b);
	pthread_mutex_unlock(&st->mu);
}

void dre_store_relink(dre_store *st, uint64_t a, uint64_t b)
{
	if (st->readonly || !a || !b || a == b)
		return;
	pthread_mutex_lock(&st->mu);
	dre_ent *e = dre_store_ent(st, a);
	if (e && e->next != b) {
		if (e->next)
			dre_store_fork_locked(st, a);
		e->next = 0;
		link_locked(st, a, b);
	}
	pthread_mutex_unlock(&st->mu);
}

void dre_store_link(dre_store *st, uint64_t a, uint64_t b)
{
	if (st->readonly)
		return;
	pthread_mutex_lock(&st->mu);
	link_locked(st, a, b);
	pthread_mutex_unlock(&st->mu);
}

/* Copy chunk e forward if it sits in the oldest quarter of the files; the
 * data file it sits in then.  Lock held. */
static uint32_t touch_locked(dre_store *st, const dre_ent *e)
{
	if (st->readonly || st->nfiles < 4)
		return e->file;
	dre_ent *cur = dre_store_ent(st, e->tag);
	if (cur && cur->file < st->files[st->nfiles / 4].num) {
		uint8_t hdr[DRE_REC_HDR], *buf = malloc(cur->len);
		if (buf && read_locked(st, cur, hdr, buf, 1) == 0) {
			uint32_t file, off, len = cur->len;
			uint8_t h2[DRE_REC_HDR];
			dre_rec_header(h2, DRE_REC_CHUNK, len, hdr + 8, 0, buf);
			if (append_rec(st, h2, buf, len, &file, &off) == 0 &&
			    act_note(st, e->tag, 0, off, len) == 0 &&
			    (cur = dre_store_ent(st, e->tag)) != NULL) {
				tally(st, cur, -1);
				cur->file = file;
				cur->off = off;
				tally(st, cur, 1);
				st->copied_forward++;
			}
		}
		free(buf);
		cur = dre_store_ent(st, e->tag); /* the append may have moved entries */
	}
	return cur ? cur->file : DRE_PIN_NONE;
}

uint32_t dre_store_hit(dre_store *st, uint64_t prev, uint64_t tag)
{
	uint32_t file = DRE_PIN_NONE;
	pthread_mutex_lock(&st->mu);
	if (!st->readonly)
		link_locked(st, prev, tag);
	dre_ent *e = dre_store_ent(st, tag);
	if (e && !st->readonly) {
		dre_ent copy = *e;
		dre_sizing_hit(st, e->len);
		file = touch_locked(st, &copy);
	} else if (e) {
		file = e->file;
	}
	pthread_mutex_unlock(&st->mu);
	return file;
}

int dre_store_sync(dre_store *st)
{
	if (st->readonly)
		return 0;
	pthread_mutex_lock(&st->mu);
	dre_wq_drain(st);
	int rc = st->nfiles && fdatasync(st->files[st->nfiles - 1].fd) ? DRE_EIO : 0;
	if (!rc)
		rc = dre_store_save_peers(st);
	if (!rc)
		rc = dre_sizing_save(st, &st->mu);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

void dre_store_flush(dre_store *st)
{
	if (st->readonly)
		return;
	pthread_mutex_lock(&st->mu);
	dre_wq_drain(st);
	pthread_mutex_unlock(&st->mu);
}

int dre_store_sync_later(dre_store *st)
{
	if (st->readonly)
		return 0;
	pthread_mutex_lock(&st->mu);
	int rc = st->nfiles ? dre_wq_sync_later(st, &st->files[st->nfiles - 1]) : 0;
	pthread_mutex_unlock(&st->mu);
	return rc;
}

void dre_store_get_stats(dre_store *st, dre_store_stats *s)
{
	pthread_mutex_lock(&st->mu);
	memset(s, 0, sizeof *s);
	s->chunks = st->idx.count - st->dead_ents;
	s->data_bytes = st->data_bytes;
	s->disk_bytes = st->disk_bytes;
	s->size_limit = dre_store_target(st);
	s->room = st->room != UINT64_MAX ? st->room : 0;
	s->index_bytes = dre_idx_bytes(&st->idx) + st->act.cap + st->nfiles * sizeof *st->files;
	s->files = st->nfiles;
	s->evicted_chunks = st->evicted_chunks;
	s->evicted_bytes = st->evicted_bytes;
	s->pin_over_max = st->pin_over_max;
	s->pin_forced = st->pin_forced;
	for (size_t i = 0; i < st->nfiles; i++)
		s->pins += st->files[i].pins;
	s->dropped_records = st->dropped_records;
	s->lookups = st->lookups;
	s->hits = st->hits;
	s->io_errors = st->io_errors;
	s->io_errno = st->io_errno;
	s->dir_remade = st->dir_remade;
	s->bad_reads = st->bad_reads;
	s->peers = (uint32_t)st->npeers;
	for (int i = 0; i < st->npeers; i++)
		s->peers_held += st->peer_users[i] > 0;
	s->peers_untracked = st->peers_untracked;
	s->peers_reclaimed = st->peers_reclaimed;
	s->sizing_since = st->sz.since;
	s->hit_bytes = st->sz.hit_bytes;
	s->new_bytes = st->sz.new_bytes;
	for (int i = 0; i < DRE_SIZING_STEPS; i++)
		s->larger_hit_bytes[i] = st->sz.larger[i];
	s->reads_window_ns = st->reads.window_ns;
	s->reads_map_ns = st->reads.map_ns;
	s->reads_ignored = st->reads.ignored;
	dre_rtune_stats(st, s);
	pthread_mutex_unlock(&st->mu);
}

uint64_t dre_store_id(const dre_store *st)
{
	return st->id;
}

dre_store *dre_store_open(const char *dir, const dre_store_opts *o, char *err, size_t errlen)
{
	dre_store_opts def = { 0 };
	if (!o)
		o = &def;
	dre_store *st = calloc(1, sizeof *st);
	if (!st) {
		dre_seterr(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&st->mu, NULL);
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	/* an unmap waiting bars new readers (letgo_slices' next slice) */
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&st->maps, &ra);
	pthread_rwlockattr_destroy(&ra);
	pthread_cond_init(&st->peers_cv, NULL);
	st->lockfd = -1;
	st->readonly = o->readonly;
	st->batch = o->batch;
	st->limit_saved = dre_store_limit_load(dir);
	uint64_t saved = o->size_limit ? 0 : st->limit_saved;
	st->limit = o->size_limit ? o->size_limit : saved ? saved : DEFAULT_LIMIT;
	st->file_max = dre_store_file_max(st->limit);
	st->room = UINT64_MAX; /* until the writer measures (room.c) */
	if (!(st->dir = strdup(dir)) || dre_idx_init(&st->idx, 1u << 16)) {
		dre_seterr(err, errlen, "out of memory");
		goto fail;
	}
	if (dre_store_recover(st, o->create, err, errlen))
		goto fail;
	st->reads_given = o->reads != DRE_READS_AUTO;
	if (o->reads)
		st->reads.way = o->reads;
	else if (!st->readonly)
		dre_reads_probe(dir, &st->reads);
	dre_rtune_reset(st);
	/* a store made before limits were saved, opened without one: keep what
	 * it holds rather than evict it down to the default, and save nothing */
	int unknown = !o->size_limit && !saved && !st->created;
	if (unknown && st->disk_bytes > st->limit)
		st->limit = st->disk_bytes;
	dre_store_load_peers(st);
	if (dre_sizing_open(st)) {
		dre_seterr(err, errlen, "out of memory");
		goto fail;
	}
	if (!st->readonly && dre_wq_start(st)) {
		dre_seterr(err, errlen, "%s: cannot start the writer thread", dir);
		goto fail;
	}
	if (!st->readonly && !o->keep) {
		/* the room its file system leaves it now (room.c), so that a store
		 * opened on a full disk keeps to it from its first write on */
		struct statvfs fs;
		int measured = !statvfs(dir, &fs);
		/* the writer runs: its queue is shared (evicting queues deletions) */
		pthread_mutex_lock(&st->mu);
		if (measured)
			dre_store_room_note(st, 0, 0, 0, &fs);
		int rc = dre_store_enforce_limit(st);
		pthread_mutex_unlock(&st->mu);
		if (rc) {
			dre_seterr(err, errlen, "%s: cannot evict down to the size limit", dir);
			goto fail;
		}
	}
	if (!o->keep && !unknown && dre_store_limit_save(st)) {
		dre_seterr(err, errlen, "%s/limit: %s", dir, strerror(errno));
		goto fail;
	}
	return st;
fail:
	dre_store_close(st);
	return NULL;
}

void dre_store_close(dre_store *st)
{
	if (!st)
		return;
	dre_wq_stop(st);
	if (st->nfiles && !st->readonly)
		dre_wq_trim(st->files[st->nfiles - 1].fd, st->files[st->nfiles - 1].size);
	dre_sizing_save(st, NULL);
	dre_sizing_close(st);
	for (size_t i = 0; i < st->nfiles; i++)
		dre_store_close_file(st, &st->files[i]);
	if (st->lockfd >= 0)
		close(st->lockfd);
	free(st->files);
	dre_buf_free(&st->act);
	dre_idx_free(&st->idx);
	free(st->alt);
	free(st->forks);
	free(st->pnext);
	for (int i = 0; i < DRE_PEER_SLOTS; i++)
		dre_buf_free(&st->peer_log[i]);
	pthread_cond_destroy(&st->peers_cv);
	pthread_mutex_destroy(&st->mu);
	pthread_rwlock_destroy(&st->maps);
	free(st->dir);
	free(st);
}
