/*
 * wq.c: the store's write-behind queue and writer thread.
 *
 * Appending a record copies it into an in-memory block of the active data file
 * (under the store lock, a memcpy); a writer thread writes whole blocks with
 * pwrite, outside the lock, and also does the store's slow file work: sealing
 * a data file's .idx (written and fdatasync()ed), background syncs, and
 * deleting evicted files (unlinking a file of 100+ MiB in the page cache
 * takes milliseconds, spent freeing its pages) after taking their entries
 * out of the index, a batch per hold of the lock.  So a
 * thread that stores chunks (the proxy's event loop) never waits on the disk,
 * unless the writer falls DRE_WQ_CAP bytes behind: then appenders wait for it
 * (back-pressure, bounded memory).
 *
 * Until a block is written, reads of its records are served from memory.  A
 * record never spans two blocks.  Jobs run in the order queued, so a file's
 * .idx and a sync come after that file's data.  A failed write is counted
 * (io_errors, io_errno); its records then fail their checksums, or cannot be
 * read, when looked up and are dropped as misses, never served.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"

#define WQ_BLOCK (1u << 20)       /* data block size */
#define WQ_CAP (32u << 20)        /* appenders wait beyond this many bytes queued */
#define WQ_LINGER_NS 2000000      /* an idle writer waits this long for a block to fill */
#define WQ_WRITEBACK (8u << 20)   /* start kernel writeback every 8 MiB of a file */
#define WQ_PREALLOC (8u << 20)    /* blocks reserved ahead of the writes, 8 MiB at a time */
#define WQ_SPARE (WQ_CAP / WQ_BLOCK) /* written blocks kept for reuse while busy: fresh memory
					costs a page fault every 4 KiB, more than the copy into it */
#define WQ_SPARE_IDLE 4           /* ...and once the writer has been idle WQ_IDLE_S seconds */
#define WQ_IDLE_S 1

enum wq_kind {
	WQ_DATA, /* write data[0..len) at file offset off */
	WQ_IDX,  /* write the .idx of sealed file `file` (data: len entries, covering off bytes) */
	WQ_SYNC, /* fdatasync the data file, then save peer knowledge */
	WQ_UNLINK, /* delete evicted file `file` (.dat and .idx; off: the bytes it holds on disk) */
	WQ_SWEEP, /* remove evicted file `file`'s entries (off: its size) from the index */
	WQ_CLEAR, /* clear reclaimed peer slot `off`'s bit from the index */
	WQ_LETGO, /* let go of the mappings' pages (dre_store_letgo) */
	WQ_ROOM,  /* measure the room the file system leaves the store (room.c) */
};

struct dre_wjob {
	struct dre_wjob *next;
	enum wq_kind kind;
	uint32_t file;
	int fd;
	uint64_t off;
	size_t len, cap;
	uint8_t *data;
	uint64_t lim; /* data: the size the file may grow to (the store's file_max then) */
};

static struct dre_wjob *job_new(enum wq_kind kind, uint32_t file, int fd, uint64_t off, size_t cap)
{
	struct dre_wjob *j = calloc(1, sizeof *j);
	uint8_t *data = cap ? malloc(cap) : NULL;
	if (!j || (cap && !data)) {
		free(j);
		free(data);
		return NULL;
	}
	*j = (struct dre_wjob){ .kind = kind, .file = file, .fd = fd, .off = off, .cap = cap, .data = data };
	if (kind == WQ_DATA)
		dre_mem_populate(data, cap); /* filled before it is written */
	return j;
}

static void job_free(struct dre_wjob *j)
{
	if (j) {
		free(j->data);
		free(j);
	}
}

/* A written job: keep it if it is a whole data block and few are kept, else
 * free it; lock held. */
static void job_done(dre_store *st, struct dre_wjob *j)
{
	if (j->kind != WQ_DATA || j->cap != WQ_BLOCK || st->wq_nspare >= WQ_SPARE) {
		job_free(j);
		return;
	}
	j->next = st->wq_spare;
	st->wq_spare = j;
	st->wq_nspare++;
}

/* Free kept blocks beyond `keep`; lock held. */
static void spares_free(dre_store *st, unsigned keep)
{
	while (st->wq_nspare > keep) {
		struct dre_wjob *j = st->wq_spare;
		st->wq_spare = j->next;
		st->wq_nspare--;
		job_free(j);
	}
}

/* A data block for `file` at `off`, of cap bytes (a kept one if it fits);
 * lock held. */
static struct dre_wjob *block_new(dre_store *st, uint32_t file, int fd, uint64_t off, size_t cap)
{
	struct dre_wjob *j = st->wq_spare;
	if (cap != WQ_BLOCK || !j)
		return job_new(WQ_DATA, file, fd, off, cap);
	st->wq_spare = j->next;
	st->wq_nspare--;
	*j = (struct dre_wjob){ .kind = WQ_DATA, .file = file, .fd = fd, .off = off, .cap = cap, .data = j->data };
	return j;
}

/* Queue j behind the others; lock held. */
static void push(dre_store *st, struct dre_wjob *j)
{
	if (st->wq_tail)
		st->wq_tail->next = j;
	else
		st->wq_head = j;
	st->wq_tail = j;
	pthread_cond_signal(&st->wq_cv);
}

/* Queue j ahead of the others; lock held. */
static void push_front(dre_store *st, struct dre_wjob *j)
{
	j->next = st->wq_head;
	st->wq_head = j;
	if (!st->wq_tail)
		st->wq_tail = j;
	pthread_cond_signal(&st->wq_cv);
}

/* Queue the block being filled, if it holds anything; lock held. */
static void seal_cur(dre_store *st)
{
	struct dre_wjob *j = st->wq_cur;
	if (j && j->len) {
		st->wq_cur = NULL;
		push(st, j);
	}
}

/* Unlink job j's file is deleted, or will not be by this job: its bytes
 * leave st->unlink_bytes (room.c); lock held. */
static void unlink_gone(dre_store *st, const struct dre_wjob *j)
{
	st->unlink_bytes -= j->off < st->unlink_bytes ? j->off : st->unlink_bytes;
}

/* The errno of a failed call (EIO if it set none). */
static int fail_errno(void)
{
	return errno ? errno : EIO;
}

/* Reserve the file's blocks a window ahead of data job j (writer thread
 * only): ext4 takes a quarter of the time to write into reserved blocks that
 * it takes with delayed allocation, page by page.  FALLOC_FL_KEEP_SIZE leaves
 * the file's size, which recovery reads, alone; the reserve past the end is
 * given back when the file is sealed or the store closed (dre_wq_trim).  A
 * failure (a file system without fallocate, a full disk) is ignored: the
 * write itself then reports. */
static void prealloc(dre_store *st, const struct dre_wjob *j)
{
	uint64_t end = j->off + j->len;
	if (j->file == st->wq_pre_file && end <= st->wq_pre_end)
		return;
	uint64_t to = (end + WQ_PREALLOC - 1) & ~(uint64_t)(WQ_PREALLOC - 1);
	if (to > j->lim)
		to = j->lim > end ? j->lim : end;
	(void)!fallocate(j->fd, FALLOC_FL_KEEP_SIZE, (off_t)j->off, (off_t)(to - j->off));
	st->wq_pre_file = j->file;
	st->wq_pre_end = to;
}

void dre_wq_trim(int fd, uint64_t size)
{
	struct stat sb;
	if (fd >= 0 && !fstat(fd, &sb) && (uint64_t)sb.st_size == size)
		(void)!ftruncate(fd, (off_t)size);
}

/* Do one job, without the lock (except a sync's peer save): 0, or the errno
 * of what failed. */
static int run_job(dre_store *st, struct dre_wjob *j)
{
	int rc = 0;
	errno = 0;
	switch (j->kind) {
	case WQ_DATA: {
		prealloc(st, j);
		rc = dre_write_all(j->fd, j->data, j->len, (int64_t)j->off) ? fail_errno() : 0;
		uint64_t end = j->off + j->len, mark = end & ~(uint64_t)(WQ_WRITEBACK - 1);
		/* start writeback of each 8 MiB as it fills, without waiting: dirty
		 * pages never pile up to where the kernel throttles us for seconds
		 * (unless a batch run: see dre_store_opts) */
		if (!rc && mark > j->off && !st->batch)
			sync_file_range(j->fd, (off_t)(mark - WQ_WRITEBACK), WQ_WRITEBACK, SYNC_FILE_RANGE_WRITE);
		break;
	}
	case WQ_IDX:
		dre_wq_trim(j->fd, j->off);
		rc = dre_store_write_idx(st, j->file, j->off, (const struct dre_idxent *)j->data, j->len) ? fail_errno()
													 : 0;
		break;
	case WQ_SYNC:
		rc = fdatasync(j->fd) ? fail_errno() : 0;
		pthread_mutex_lock(&st->mu);
		if (dre_store_save_peers(st) && !rc)
			rc = EIO;
		if (dre_sizing_save(st, &st->mu) && !rc)
			rc = EIO;
		pthread_mutex_unlock(&st->mu);
		break;
	case WQ_UNLINK:
		dre_store_unlink_file(st, j->file);
		break;
	case WQ_SWEEP:
		dre_store_sweep(st, j->file, j->off, &st->mu);
		break;
	case WQ_CLEAR:
		dre_store_clear_slot(st, (int)j->off, &st->mu);
		break;
	case WQ_LETGO:
		dre_store_letgo(st, &st->mu);
		break;
	case WQ_ROOM: /* measured by writer_main */
		break;
	}
	return rc;
}

/* Wait on wq_cv for at most ns nanoseconds; pthread_cond_timedwait's result.
 * Lock held. */
static int wait_ns(dre_store *st, long long ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ns += ts.tv_nsec;
	ts.tv_sec += (time_t)(ns / 1000000000);
	ts.tv_nsec = (long)(ns % 1000000000);
	return pthread_cond_timedwait(&st->wq_cv, &st->mu, &ts);
}

#define WQ_EARLY_MAX 64 /* evicted data files deleted ahead of their turn, per failed write */

/* With the file system's figures just measured in *fs (after a data job
 * on file `busy` failed for want of space, or by a WQ_ROOM job: busy
 * UINT32_MAX): work out the room the file system leaves the store (a failed
 * job's bytes still queued, not on disk), evict the oldest data files beyond
 * it (not `busy`), and delete the data of every evicted file now, ahead of
 * its unlink job's turn behind the queue (dre_wq_forget took every other
 * job on an evicted file out of it; the .idx, which its sweep reads, is left
 * to the unlink job).  1 if that deleted any, so a failed job is worth
 * writing again.  Writer thread; lock held, released around the deletions. */
static int room_make(dre_store *st, uint32_t busy, const struct statvfs *fs)
{
	dre_store_room_note(st, busy, 0, 0, fs);
	dre_store_evict_room(st, busy);
	uint32_t nums[WQ_EARLY_MAX];
	int n = 0;
	for (struct dre_wjob *u = st->wq_head; u && n < WQ_EARLY_MAX; u = u->next)
		if (u->kind == WQ_UNLINK && u->off) {
			unlink_gone(st, u); /* its bytes are free once deleted below */
			u->off = 0;
			nums[n++] = u->file;
		}
	if (!n)
		return 0;
	pthread_mutex_unlock(&st->mu);
	for (int i = 0; i < n; i++)
		dre_store_unlink_data(st, nums[i]);
	pthread_mutex_lock(&st->mu);
	return 1;
}

/* Take the next job, waiting for one; NULL when told to stop and all is done.
 * Lock held. */
static struct dre_wjob *next_job(dre_store *st)
{
	int lingered = 0;
	for (;;) {
		if (st->wq_head) {
			struct dre_wjob *j = st->wq_head;
			if (!(st->wq_head = j->next))
				st->wq_tail = NULL;
			j->next = NULL;
			return j;
		}
		int have = st->wq_cur && st->wq_cur->len;
		if (have && (lingered || st->wq_stop || st->wq_drainers)) {
			seal_cur(st);
			continue;
		}
		if (st->wq_stop && !have)
			return NULL;
		if (have) {
			/* let a trickle of small records gather into one write */
			wait_ns(st, WQ_LINGER_NS);
			lingered = 1;
		} else if (st->wq_nspare > WQ_SPARE_IDLE) {
			/* idle with a burst's blocks kept: give them back after a while */
			if (wait_ns(st, WQ_IDLE_S * 1000000000LL) == ETIMEDOUT)
				spares_free(st, WQ_SPARE_IDLE);
		} else {
			pthread_cond_wait(&st->wq_cv, &st->mu);
		}
	}
}

/* The writer is write-behind, off every stream's path: it runs WQ_NICE
 * steps below its creator, so that on a busy host the threads that rebuild
 * and send data come first (`wanopt dre decode` of new data on 2 cores: 7 %
 * faster) -- except while a thread waits for it (a full queue, a drain, an
 * eviction), when it runs at its creator's priority. */
#define WQ_NICE 8

struct writer_prio {
	id_t tid;
	int base, low; /* the creator's nice; 1 while lowered */
};

/* Lower or restore the writer's priority; best effort (a sandbox may refuse). */
static void writer_prio_set(struct writer_prio *p, int low)
{
	if (p->low == low || p->base == INT32_MIN)
		return;
	int n = p->base + (low ? WQ_NICE : 0);
	(void)setpriority(PRIO_PROCESS, p->tid, n > 19 ? 19 : n);
	p->low = low;
}

static void *writer_main(void *arg)
{
	dre_store *st = arg;
	struct writer_prio prio = { .tid = (id_t)syscall(SYS_gettid), .base = INT32_MIN };
	errno = 0;
	int n = getpriority(PRIO_PROCESS, prio.tid);
	if (n != -1 || !errno)
		prio.base = n;
	pthread_mutex_lock(&st->mu);
	struct dre_wjob *j;
	while ((j = next_job(st))) {
		st->wq_busy = j;
		int low = !st->wq_waiters;
		pthread_mutex_unlock(&st->mu);
		writer_prio_set(&prio, low);
		int rc = run_job(st, j);
		struct statvfs fs;
		int measured = j->kind == WQ_DATA ? dre_store_room_due(st, j->len, rc) && !fstatvfs(j->fd, &fs)
						  : j->kind == WQ_ROOM && !statvfs(st->dir, &fs);
		/* a data or .idx write that found the disk full: the disk filled
		 * since the writer last measured it (others wrote to it) */
		int full = (rc == ENOSPC || rc == EDQUOT) && (j->kind == WQ_DATA || j->kind == WQ_IDX);
		if (full && !measured)
			measured = !fstatvfs(j->fd, &fs);
		pthread_mutex_lock(&st->mu);
		if (full && measured && room_make(st, j->file, &fs)) { /* write it again rather than lose it */
			pthread_mutex_unlock(&st->mu);
			rc = run_job(st, j);
			measured = j->kind == WQ_DATA && !fstatvfs(j->fd, &fs);
			pthread_mutex_lock(&st->mu);
		}
		if (rc) {
			st->io_errors++;
			st->io_errno = rc;
		}
		st->wq_busy = NULL;
		if (j->kind == WQ_DATA) {
			st->wq_bytes -= j->len;
			dre_store_written(st, j->file, j->off, j->off + j->len, rc);
			dre_store_room_note(st, j->file, j->len, rc, measured ? &fs : NULL);
		} else if (j->kind == WQ_UNLINK) {
			unlink_gone(st, j);
		} else if (j->kind == WQ_ROOM) {
			st->wq_room = 0;
			st->room_written = 0;
			if (measured) /* and give back what is beyond the room now */
				room_make(st, UINT32_MAX, &fs);
		}
		job_done(st, j);
		pthread_cond_broadcast(&st->wq_done);
	}
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

int dre_wq_start(dre_store *st)
{
	pthread_cond_init(&st->wq_cv, NULL);
	pthread_cond_init(&st->wq_done, NULL);
	st->wq_inited = 1;
	if (pthread_create(&st->wq_th, NULL, writer_main, st))
		return DRE_ENOMEM;
	st->wq_running = 1;
	return 0;
}

void dre_wq_stop(dre_store *st)
{
	if (st->wq_running) {
		pthread_mutex_lock(&st->mu);
		st->wq_stop = 1;
		pthread_cond_signal(&st->wq_cv);
		pthread_mutex_unlock(&st->mu);
		pthread_join(st->wq_th, NULL);
		st->wq_running = 0;
	}
	for (struct dre_wjob *j = st->wq_head, *n; j; j = n) {
		n = j->next;
		job_free(j);
	}
	job_free(st->wq_cur);
	spares_free(st, 0);
	st->wq_head = st->wq_tail = st->wq_cur = NULL;
	if (st->wq_inited) {
		pthread_cond_destroy(&st->wq_cv);
		pthread_cond_destroy(&st->wq_done);
		st->wq_inited = 0;
	}
}

int dre_wq_append(dre_store *st, const struct dre_sfile *f, const uint8_t *hdr, const void *payload,
		  uint32_t len)
{
	size_t want = DRE_REC_HDR + (size_t)len;
	struct dre_wjob *j = st->wq_cur;
	if (j && (j->file != f->num || j->off + j->len != f->size || j->len + want > j->cap)) {
		seal_cur(st);
		j = NULL;
	}
	if (!j) {
		if (!(j = block_new(st, f->num, f->fd, f->size, want > WQ_BLOCK ? want : WQ_BLOCK)))
			return DRE_ENOMEM;
		j->lim = st->file_max;
		st->wq_cur = j;
	}
	memcpy(j->data + j->len, hdr, DRE_REC_HDR);
	if (len)
		memcpy(j->data + j->len + DRE_REC_HDR, payload, len);
	j->len += want;
	st->wq_bytes += want;
	if (j->len + DRE_REC_HDR + 4096 > j->cap) {
		seal_cur(st); /* full: hand it over now */
	} else if (st->wq_drainers) {
		/* a drain is waiting for the queue to empty, and the writer may be
		 * asleep with nothing to do when it last looked: hand this over */
		seal_cur(st);
		pthread_cond_signal(&st->wq_cv);
	}
	return 0;
}

int dre_wq_seal_idx(dre_store *st, const struct dre_sfile *f, dre_buf *ents)
{
	struct dre_wjob *j = job_new(WQ_IDX, f->num, f->fd, f->size, 0);
	if (!j)
		return DRE_ENOMEM;
	seal_cur(st);
	j->data = ents->p;
	j->len = ents->len / sizeof(struct dre_idxent);
	j->cap = ents->cap;
	*ents = (dre_buf){ 0 };
	push(st, j);
	return 0;
}

int dre_wq_sync_later(dre_store *st, const struct dre_sfile *f)
{
	struct dre_wjob *j = job_new(WQ_SYNC, f->num, f->fd, 0, 0);
	if (!j)
		return DRE_ENOMEM;
	seal_cur(st);
	push(st, j);
	return 0;
}

void dre_wq_unlink(dre_store *st, uint32_t file, uint64_t bytes)
{
	struct dre_wjob *j = st->wq_running ? job_new(WQ_UNLINK, file, -1, bytes, 0) : NULL;
	if (!j) {
		dre_store_unlink_file(st, file);
		return;
	}
	st->unlink_bytes += bytes;
	push(st, j);
}

int dre_wq_sweep(dre_store *st, uint32_t file, uint64_t size)
{
	struct dre_wjob *j = st->wq_running ? job_new(WQ_SWEEP, file, -1, size, 0) : NULL;
	if (!j)
		return -1;
	push(st, j);
	return 0;
}

int dre_wq_clear_slot(dre_store *st, int slot)
{
	struct dre_wjob *j = st->wq_running ? job_new(WQ_CLEAR, 0, -1, (uint64_t)slot, 0) : NULL;
	if (!j)
		return -1;
	push(st, j);
	return 0;
}

int dre_wq_letgo(dre_store *st)
{
	if (st->wq_letgo)
		return 0; /* one queued already */
	struct dre_wjob *j = st->wq_running && !st->wq_stop ? job_new(WQ_LETGO, 0, -1, 0, 0) : NULL;
	if (!j)
		return -1;
	st->wq_letgo = 1;
	push(st, j);
	return 0;
}

int dre_wq_room(dre_store *st)
{
	if (st->wq_room || !st->wq_running || st->wq_stop)
		return 0; /* one queued already, or no writer to do it */
	struct dre_wjob *j = job_new(WQ_ROOM, 0, -1, 0, 0);
	if (!j)
		return DRE_ENOMEM;
	st->wq_room = 1;
	push_front(st, j); /* what is queued is counted as not on disk yet */
	return 0;
}

/* The queued or in-flight data block holding [off, off+n) of file, or NULL. */
static const struct dre_wjob *find_block(const dre_store *st, uint32_t file, uint64_t off, size_t n)
{
	const struct dre_wjob *cand[2] = { st->wq_cur, st->wq_busy };
	for (int i = 0; i < 2; i++) {
		const struct dre_wjob *j = cand[i];
		if (j && j->kind == WQ_DATA && j->file == file && off >= j->off && off + n <= j->off + j->len)
			return j;
	}
	for (const struct dre_wjob *j = st->wq_head; j; j = j->next)
		if (j->kind == WQ_DATA && j->file == file && off >= j->off && off + n <= j->off + j->len)
			return j;
	return NULL;
}

int dre_wq_read(const dre_store *st, uint32_t file, uint64_t off, uint8_t *hdr, void *buf, uint32_t len)
{
	if (!st->wq_cur && !st->wq_busy && !st->wq_head)
		return 0;
	const struct dre_wjob *j = find_block(st, file, off, DRE_REC_HDR + (buf ? (size_t)len : 0));
	if (!j)
		return 0;
	const uint8_t *p = j->data + (off - j->off);
	memcpy(hdr, p, DRE_REC_HDR);
	if (buf && len)
		memcpy(buf, p + DRE_REC_HDR, len);
	return 1;
}

void dre_wq_throttle(dre_store *st)
{
	st->wq_waiters++;
	while (st->wq_running && st->wq_bytes > WQ_CAP)
		pthread_cond_wait(&st->wq_done, &st->mu);
	st->wq_waiters--;
}

void dre_wq_drain(dre_store *st)
{
	if (!st->wq_running)
		return;
	st->wq_drainers++;
	st->wq_waiters++;
	seal_cur(st);
	pthread_cond_signal(&st->wq_cv);
	while (st->wq_head || st->wq_busy || (st->wq_cur && st->wq_cur->len))
		pthread_cond_wait(&st->wq_done, &st->mu);
	st->wq_waiters--;
	st->wq_drainers--;
}

/* Is j work on file `file` (a peer-slot clear, a let-go or a measure names
 * no file)? */
static int on_file(const struct dre_wjob *j, uint32_t file)
{
	return j->file == file && j->kind != WQ_CLEAR && j->kind != WQ_LETGO && j->kind != WQ_ROOM;
}

void dre_wq_forget(dre_store *st, uint32_t file)
{
	struct dre_wjob **pp = &st->wq_head, *j;
	st->wq_tail = NULL;
	while ((j = *pp)) {
		if (on_file(j, file)) {
			*pp = j->next;
			if (j->kind == WQ_DATA)
				st->wq_bytes -= j->len;
			else if (j->kind == WQ_UNLINK)
				unlink_gone(st, j);
			job_free(j);
		} else {
			st->wq_tail = j;
			pp = &j->next;
		}
	}
	if (st->wq_cur && st->wq_cur->file == file) {
		st->wq_bytes -= st->wq_cur->len;
		job_free(st->wq_cur);
		st->wq_cur = NULL;
	}
	st->wq_waiters++;
	st->wq_forgot = file + 1;
	while (st->wq_busy && on_file(st->wq_busy, file))
		pthread_cond_wait(&st->wq_done, &st->mu);
	st->wq_forgot = 0;
	st->wq_waiters--;
}
