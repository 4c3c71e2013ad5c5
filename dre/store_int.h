/* store_int.h: the store's private state, shared by store.c and recover.c. */
#ifndef WANOPT_DRE_STORE_INT_H
#define WANOPT_DRE_STORE_INT_H

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "index.h"

#define DRE_REC_HDR 56
#define DRE_REC_CHUNK 0x32435244u    /* "DRC2": a chunk, checksum dre_fsum */
#define DRE_REC_CHUNK_V1 0x31435244u /* "DRC1": a chunk, checksum dre_sum64 (read only) */
#define DRE_REC_LINK 0x314c5244u  /* "DRL1" */
#define DRE_IDX_MAGIC 0x31585244u /* "DRX1" */
#define DRE_IDX_LINK 0xffffffffu  /* len of a link entry */

/* How this process reads runs of stored chunks (rprobe.c): way is
 * DRE_READS_WINDOW or DRE_READS_MAP; window_ns and map_ns what comparing the
 * probe's 2 MiB took each way (0 where not measured: the way was forced by
 * WANOPT_STORE_READS, or the probe file could not be made). */
typedef struct dre_reads_probed {
	int way;
	uint64_t window_ns, map_ns;
	const char *ignored; /* WANOPT_STORE_READS's value if it named no way (else NULL) */
	int named;           /* 1: WANOPT_STORE_READS named the way */
} dre_reads_probed;
/* The way measured (or named) once for this process, on a nameless file in
 * dir the first time; thread-safe. */
void dre_reads_probe(const char *dir, dre_reads_probed *out);
/* Measure again (or take the way named again), for every store of the
 * process opened from now on too; thread-safe. */
void dre_reads_reprobe(const char *dir, dre_reads_probed *out);

/* Start choosing afresh from st->reads.way (at open, after a probe); lock
 * held or the store not yet shared. */
void dre_rtune_reset(dre_store *st);
/* Before reading len bytes through reader window w (NULL: not counted),
 * lock held: counts them, hands w's figures to the store every MiB (which
 * may end an epoch and change st->reads.way); a start time if this read is
 * to be timed, else 0. */
uint64_t dre_rtune_begin(dre_store *st, dre_rwin *w, uint32_t len);
/* After that read, lock or not: its time joins w's figures (t0 0: none). */
void dre_rtune_end(dre_rwin *w, uint64_t t0, uint32_t len);
/* The tuning's part of the stats; lock held. */
void dre_rtune_stats(const dre_store *st, dre_store_stats *s);

/* One entry of a .idx file, and of the active file's pending list. */
struct dre_idxent {
	uint64_t a;   /* chunk tag (link: the earlier chunk) */
	uint64_t b;   /* chunk: predecessor tag or 0; link: the later chunk */
	uint32_t off; /* record offset in the data file */
	uint32_t len; /* payload length, or DRE_IDX_LINK */
};

struct dre_sfile {
	uint32_t num;  /* file number (name) */
	int fd;
	uint64_t size; /* bytes of whole records (appended, maybe still queued) */
	uint64_t written; /* bytes the writer has written (readable through map) */
	const uint8_t *map; /* read-only mapping of the file, or NULL (pread then) */
	uint64_t map_len;
	uint64_t ents, ent_bytes; /* index entries that point here, and their payload bytes */
	uint32_t pins; /* dre_store_pin holds on it (evict.c) */
	uint64_t lost; /* bytes whose write failed (a full disk): counted in size, not on disk */
	/* 1 + the offset of its first record whose write failed (0: none):
	 * `written` stops short of it, so nothing from there on is read through
	 * the mapping.  Past a failed write the file may have a hole, and on a
	 * tmpfs that is full, reading a hole through a mapping raises SIGBUS
	 * (the page cannot be allocated); a pread of it reads zeros, whose
	 * record fails its checksum and is dropped. */
	uint64_t cut;
};

/* What a larger store would buy (sizing.c). */
enum { DRE_SIZING_STEPS = 3 }; /* 2x, 4x, 8x */
enum { DRE_SIZING_GONE = 64 };  /* evicted files whose clock is kept */
struct dre_ghost;
struct dre_sizing_gone {
	uint32_t num;
	uint64_t base;
};
struct dre_sizing {
	uint64_t since;      /* unix time the counts began */
	uint64_t clock;      /* data file bytes evicted, ever */
	uint64_t hit_bytes;  /* chunk bytes referenced */
	uint64_t new_bytes;  /* chunk bytes stored anew */
	uint64_t larger[DRE_SIZING_STEPS]; /* of new_bytes: estimated hits in a store 2, 4, 8 x larger */
	int shift;           /* 1 in 2^shift evicted chunks remembered */
	struct dre_ghost *ghost;
	/* the clock when each of the last files evicted went (their entries
	 * leave the index later, as the writer sweeps them out) */
	struct dre_sizing_gone gone[DRE_SIZING_GONE];
	unsigned ngone; /* files recorded in gone, ever (ring index) */
};
/* All with the store's lock held (or before it is shared). */
int dre_sizing_open(dre_store *st);
/* Save DIR/sizing; if held is the lock held, it is let go while writing. */
int dre_sizing_save(dre_store *st, pthread_mutex_t *held);
void dre_sizing_close(dre_store *st);
/* Sample for a store bounded to `limit` bytes. */
void dre_sizing_limit(dre_store *st, uint64_t limit);
/* Data file num, of `bytes` on disk, was evicted: the clock moves past it. */
void dre_sizing_file_gone(dre_store *st, uint32_t num, uint64_t bytes);
/* Entry e, of an evicted file, leaves the index: remember it (sampled) with
 * the clock at which its record went. */
void dre_sizing_evicted(dre_store *st, const dre_ent *e);
void dre_sizing_stored(dre_store *st, uint64_t tag, uint32_t len);
void dre_sizing_hit(dre_store *st, uint32_t len);

#define DRE_PEER_SLACK 65536 /* tags a peer's file may hold beyond twice the index's chunks (peers.c) */

struct dre_span {
	uint8_t *p;
	size_t n;
};

/* The way runs are read, kept by what reads cost (rtune.c); under mu. */
struct dre_rtune {
	int on;                /* the store chooses (no way given in its options or named) */
	int chosen;            /* the way that cost less when last measured; off: the way */
	int measuring;         /* this epoch times both ways, a slice each in turn */
	uint32_t epoch;        /* epochs begun */
	uint32_t every, left;  /* epochs the chosen way between two measuring ones; left of them */
	uint32_t measures;     /* measuring epochs ended */
	uint64_t bytes;        /* read this epoch */
	uint64_t slice_end;    /* measuring: the way changes when bytes reaches this */
	uint64_t ns[2], timed[2]; /* measuring: the timed reads' time and bytes, [0] windows, [1] mappings */
	uint64_t cost[2];      /* ns per MiB when last measured, likewise (0: not yet) */
	uint64_t switches;     /* times the chosen way changed */
};

struct dre_store {
	pthread_mutex_t mu;
	/* held shared while a chunk is copied out of a mapping or compared
	 * after mu is released (dre_store_read_fast, dre_store_match) and while
	 * the writer lets go of a slice of the mappings' pages (without mu);
	 * exclusive to unmap one, with mu held.  Readers with mu take it after
	 * mu, never the other way round; writer-preferring, so a waiting unmap
	 * bars the let-go's next slice */
	pthread_rwlock_t maps;
	uint64_t map_gen;  /* files closed so far: changed under both locks */
	char *dir;
	int lockfd, readonly;
	int batch;                   /* dre_store_opts.batch: no early writeback (wq.c) */
	dre_reads_probed reads;      /* how runs are read (rwin.c, rprobe.c) */
	int reads_given;             /* ... as the options said: never probed */
	struct dre_rtune tune;       /* ... and kept to the cheaper (rtune.c) */
	uint64_t id;
	uint64_t limit, file_max;
	uint64_t limit_saved;        /* the limit DIR/limit holds (0: none) */
	uint64_t shrink_to;          /* the target of a shrink under way (0: none) */
	/* What the file system leaves the store (room.c): below limit when it
	 * has less room than that, else UINT64_MAX; the bound kept to is the
	 * lower of the two.  lost_bytes: live files' bytes whose writes failed;
	 * unlink_bytes: evicted files' bytes the writer has yet to delete. */
	uint64_t room, lost_bytes, unlink_bytes;
	uint64_t room_written;       /* writer only: bytes written since room was measured */
	int created;                 /* this open made the store (a new STORE file) */
	dre_idx idx;
	uint32_t live_from;      /* entries of files numbered below this were evicted... */
	uint64_t dead_ents;      /* ...and this many are still in idx, until swept (evict.c) */
	struct dre_sfile *files; /* by number, oldest first; the last is active */
	size_t nfiles, capfiles;
	dre_buf act;             /* struct dre_idxent list of the active file */
	uint64_t data_bytes, disk_bytes;
	uint64_t evicted_chunks, evicted_bytes, dropped_records, lookups, hits;
	uint64_t io_errors, bad_reads, copied_forward;
	uint64_t pin_over_max, pin_forced; /* pins: dre_store_stats */
	uint64_t dir_remade;         /* dre_store_stats */
	uint32_t sealed;             /* the data file whose .idx was last queued (0: none) */
	int io_errno;                /* errno of the last failed data file read or write */
	uint8_t peer_id[DRE_PEER_SLOTS][16]; /* store id of each peer slot */
	int npeers;
	uint32_t peers_seen;    /* slots used since saved (their files' times are renewed) */
	uint32_t peers_full;    /* slots whose file is rewritten from the index at the next save */
	uint32_t peers_clearing; /* reclaimed slots whose old bits the writer is clearing (peers.c) */
	dre_buf peer_log[DRE_PEER_SLOTS];     /* tags marked held since saved, to append to the file */
	uint64_t peer_logged[DRE_PEER_SLOTS]; /* tags in the slot's file (repeated or evicted ones too) */
	int peers_saving;        /* a save writes files with the lock released... */
	pthread_cond_t peers_cv; /* ...and signals this when done */
	int peer_users[DRE_PEER_SLOTS];     /* holders (dre_store_peer not yet put) */
	int64_t peer_last[DRE_PEER_SLOTS];  /* unix time the slot was last taken or put */
	uint64_t peers_untracked, peers_reclaimed; /* since open */
	/* write-behind (wq.c): the writer thread and its jobs, under mu */
	pthread_t wq_th;
	pthread_cond_t wq_cv;     /* work queued, or stop */
	pthread_cond_t wq_done;   /* the writer finished a job */
	int wq_inited, wq_running, wq_stop, wq_drainers;
	int wq_waiters;           /* threads waiting for the writer: it runs at full priority */
	struct dre_wjob *wq_cur;  /* data block being filled */
	struct dre_wjob *wq_head, *wq_tail; /* jobs waiting, oldest first */
	struct dre_wjob *wq_busy; /* the job being done (outside the lock) */
	uint32_t wq_forgot;       /* 1 + the file dre_wq_forget dropped jobs of, while it waits */
	uint64_t wq_bytes;        /* record bytes appended but not yet written */
	uint64_t map_read;        /* bytes read through mappings since their pages were let go */
	int wq_letgo;             /* a let-go is queued for the writer */
	int wq_room;              /* a WQ_ROOM measure is queued for the writer */
	struct dre_wjob *wq_spare; /* written data blocks kept for reuse */
	unsigned wq_nspare;
	uint32_t wq_pre_file;     /* writer only: blocks of this file are reserved... */
	uint64_t wq_pre_end;      /* ...up to here */
	uint64_t (*alt)[2];       /* chunks that broke runs (alt.c), allocated on first use */
	uint32_t *forks;          /* chunks with more than one successor (alt.c), likewise */
	uint64_t (*pnext)[2];     /* successors known at a peer (alt.c), likewise */
	struct dre_sizing sz;
};

void dre_rec_header(uint8_t h[DRE_REC_HDR], uint32_t magic, uint32_t len, const uint8_t hash[32],
		    uint64_t prev, const void *payload);
int dre_rec_check(const uint8_t h[DRE_REC_HDR], const void *payload);
int dre_rec_sound(const uint8_t h[DRE_REC_HDR], const dre_ent *e, const void *payload);
int dre_store_apply(dre_store *st, uint32_t file, const struct dre_idxent *ie);
/* 1 if index entry e belongs to an evicted file: it counts as gone from the
 * moment its file is evicted, though it leaves the index later, in batches
 * (dre_store_sweep).  Lock held. */
static inline int dre_store_dead(const dre_store *st, const dre_ent *e)
{
	return e->file < st->live_from;
}
/* The live index entry for tag, or NULL: every lookup of the store goes
 * through this.  The bits of reclaimed slots not yet cleared (peers.c) are
 * taken off the entry first, so no lookup sees them.  Lock held. */
static inline dre_ent *dre_store_ent(const dre_store *st, uint64_t tag)
{
	dre_ent *e = dre_idx_get(&st->idx, tag);
	if (!e || dre_store_dead(st, e))
		return NULL;
	e->peers &= ~st->peers_clearing;
	return e;
}
/* Index entry e, of an evicted file, is no longer counted as in the index
 * (it is deleted, or taken over by a new chunk of its tag); lock held. */
void dre_store_dead_gone(dre_store *st, const dre_ent *e);
/* Long passes over the index by the writer thread (sweeps, peer slot
 * clears) take the lock a batch at a time (lock NULL: the caller holds it
 * throughout), and pause after letting it go: a mutex let go and taken
 * straight back went to the same thread again and again, and a lookup
 * waited 97-126 ms during a 200 ms sweep of 8 million entries.  Only a
 * batch that held the lock DRE_PASS_LONG_US or more pauses: a pause after
 * every part of a small index (a table walk: 256 of them) or every sweep of
 * a small file held the writer back so far that test_sizing's estimates,
 * which then counted evictions as sweeps reached them, drifted 10-25 points
 * in 2 runs of 20 (they now count them at eviction: sizing.c). */
#define DRE_PASS_PAUSE_US 50
#define DRE_PASS_LONG_US 200
/* Microseconds on the monotonic clock. */
static inline uint64_t dre_pass_now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}
/* Takes lock (if any); returns when, for dre_pass_unlock. */
static inline uint64_t dre_pass_lock(pthread_mutex_t *lock)
{
	if (lock)
		pthread_mutex_lock(lock);
	return dre_pass_now_us();
}
/* t0: what dre_pass_lock returned. */
static inline void dre_pass_unlock(pthread_mutex_t *lock, uint64_t t0)
{
	if (lock) {
		uint64_t t1 = dre_pass_now_us();
		pthread_mutex_unlock(lock);
		if (t1 - t0 >= DRE_PASS_LONG_US)
			usleep(DRE_PASS_PAUSE_US);
	}
}
/* Remove the entries still in the index of evicted file num (`size` bytes;
 * entries of any evicted file when its .idx cannot be read).  With lock
 * NULL the caller holds the store's lock throughout; otherwise the sweep
 * takes that lock for a batch of entries at a time. */
void dre_store_sweep(dre_store *st, uint32_t num, uint64_t size, pthread_mutex_t *lock);
/* Write file num's .idx from n entries: a temp file, renamed into place, not
 * fdatasync()ed.  The .idx only saves reading its data file at the next open:
 * one that did not reach the disk whole before a crash fails its checks (size
 * of the data file, count, checksum) and the data file is scanned instead.
 * (Syncing it forced an ext4 journal commit, which waits for the data files'
 * writeback: 30 ms per 32 MiB file here, holding the writer thread, and a cold
 * encode of 200 MiB took 0.56 s instead of 0.44.)  Needs no lock. */
int dre_store_write_idx(dre_store *st, uint32_t num, uint64_t size, const struct dre_idxent *e, size_t n);
/* Seal the active file (sync, write its .idx) and start a new one. */
int dre_store_rotate(dre_store *st);
/* The store's directory was removed while in use (rm -rf): make it again,
 * with the store's identity and lock, so that new data files can be made
 * (what the open files hold stays readable until evicted).  0 or DRE_EIO. */
int dre_store_remake_dir(dre_store *st);
/* Evict (evict.c) until the data files fit the size bound; lock held.  0 or
 * an error from opening the next file. */
int dre_store_enforce_limit(dre_store *st);
/* For the writer, after a write failed for want of space: evict the oldest
 * data files while the store is over its bound (dre_store_bound), stopping at
 * one that is pinned, at the last file, or at file `busy` (the one it writes:
 * dre_wq_forget would wait for it).  Never rotates, so never waits on the
 * writer.  Lock held. */
void dre_store_evict_room(dre_store *st, uint32_t busy);
/* The bound eviction keeps the store to: its limit, or less if its file
 * system has less room (lock held). */
static inline uint64_t dre_store_bound(const dre_store *st)
{
	return st->room < st->limit ? st->room : st->limit;
}
/* After a data write of len bytes to file num by the writer (rc: 0 or the
 * errno of its failure), with the file system's figures in *fs if it
 * measured them (else NULL): note a failed write's bytes as lost, and work
 * out the room the file system leaves the store (room.c).  Lock held. */
struct statvfs;
void dre_store_room_note(dre_store *st, uint32_t num, size_t len, int rc, const struct statvfs *fs);
/* Whether the writer should measure the file system after writing len
 * bytes with result rc (every DRE_ROOM_EVERY bytes, and on a failure).
 * Writer thread only. */
int dre_store_room_due(dre_store *st, size_t len, int rc);
/* An evicted file's figures leave the room's (lock held); returns the bytes
 * it holds on disk, which dre_wq_unlink gives back once it is deleted. */
uint64_t dre_store_room_evicted(dre_store *st, const struct dre_sfile *f);
/* The bound the store keeps to, or is shrinking to (lock held). */
static inline uint64_t dre_store_target(const dre_store *st)
{
	return st->shrink_to ? st->shrink_to : st->limit;
}
/* The data file size for a store bounded to `limit` bytes (1 MiB-1 GiB). */
uint64_t dre_store_file_max(uint64_t limit);
/* The limit saved in DIR/limit, or 0 if none (or unreadable). */
uint64_t dre_store_limit_load(const char *dir);
/* Save st->limit in DIR/limit if it differs from what is there
 * (st->limit_saved; temp + rename): 0 or DRE_EIO. */
int dre_store_limit_save(dre_store *st);
/* Delete data file num's .dat and .idx (needs no lock). */
void dre_store_unlink_file(const dre_store *st, uint32_t num);
/* Delete data file num's .dat alone (needs no lock). */
void dre_store_unlink_data(const dre_store *st, uint32_t num);
/* Read file num's .idx if it is intact and covers `size` bytes: 0 and a
 * malloc()ed array, or -1. */
int dre_store_load_idx(dre_store *st, uint32_t num, uint64_t size, struct dre_idxent **out, size_t *n);
/* Map file f for reading (map_len bytes: its size, or the most it may grow
 * to while active); without a mapping, reads use pread. */
void dre_store_map(struct dre_sfile *f, uint64_t map_len);
/* Unmap (once no copy out of the mapping or read into a window runs) and
 * close file f; lock held. */
void dre_store_close_file(dre_store *st, struct dre_sfile *f);
/* Can the record at off (header and len payload bytes) of file f be read
 * through its mapping (mapped, and written up to its end)?  Lock held. */
int dre_store_covers(const struct dre_sfile *f, uint64_t off, uint32_t len);
/* The mapped bytes of the record at off (header and len payload bytes) of
 * file f, or NULL if not (yet) readable through the mapping; counts them
 * towards the next let-go of the mappings' pages (smap.c).  Lock held. */
const uint8_t *dre_store_mapped(dre_store *st, const struct dre_sfile *f, uint64_t off, uint32_t len);
/* Data file num, or NULL (lock held). */
struct dre_sfile *dre_store_file(dre_store *st, uint32_t num);
/* The oldest data file numbered num or later, or NULL (lock held). */
struct dre_sfile *dre_store_file_from(dre_store *st, uint32_t num);
/* The record (header and payload) of e, sound, out of window w, read into
 * it if this read runs on from w's last: then the lock is released.  NULL
 * (lock still held): read it another way (rwin.c).  A store whose runs are
 * read through the mappings (st->reads) takes no window where the mapping
 * covers e: NULL then. */
const uint8_t *dre_rwin_unlock(dre_store *st, dre_rwin *w, const dre_ent *e);
/* The writer wrote file num's bytes [off, end) (rc 0), or failed to
 * (rc: the errno); lock held.  What is read through the mapping ends
 * before the first failed write (dre_sfile.cut). */
void dre_store_written(dre_store *st, uint32_t num, uint64_t off, uint64_t end, int rc);
/* DIR/NNNNNNNN.ext of data file num. */
void dre_store_path(const dre_store *st, uint32_t num, const char *ext, char *out, size_t len);
/* Write the knowledge files of peers that changed, and renew the time of
 * those seen since (lock held). */
int dre_store_save_peers(dre_store *st);
/* Forget every successor noted at a peer (alt.c; a peer slot changed hands;
 * lock held). */
void dre_store_peer_next_forget(dre_store *st);
/* Load DIR/peers/ after the index is built. */
void dre_store_load_peers(dre_store *st);
/* Lock DIR, read or create its STORE file, load every data file. */
int dre_store_recover(dre_store *st, int create, char *err, size_t errlen);

/* ---- write-behind queue (wq.c).  Unless said otherwise, call with mu held. */
/* Start the writer thread (mu not held): 0 or DRE_ENOMEM. */
int dre_wq_start(dre_store *st);
/* Write out everything queued, end the thread, free the queue (mu not held;
 * accepts a store whose writer never started). */
void dre_wq_stop(dre_store *st);
/* Queue a record (header + len payload bytes) for offset f->size of file f;
 * the caller then advances f->size.  0 or DRE_ENOMEM. */
int dre_wq_append(dre_store *st, const struct dre_sfile *f, const uint8_t *hdr, const void *payload,
		  uint32_t len);
/* Queue the writing of sealed file f's .idx (covering its f->size bytes)
 * from the entries in ents, which the queue takes over (ents is left empty);
 * the blocks reserved past its end are given back first. */
int dre_wq_seal_idx(dre_store *st, const struct dre_sfile *f, dre_buf *ents);
/* Give back the blocks reserved past the end of data file fd, if it is `size`
 * bytes long (any thread; the writer must be done with the file). */
void dre_wq_trim(int fd, uint64_t size);
/* Queue an fdatasync of file f and a save of peer knowledge. */
int dre_wq_sync_later(dre_store *st, const struct dre_sfile *f);
/* If the record at off of file is still queued, copy its header (and len
 * payload bytes into buf, when buf) and return 1; else 0. */
int dre_wq_read(const dre_store *st, uint32_t file, uint64_t off, uint8_t *hdr, void *buf, uint32_t len);
/* Wait (releasing mu) while the writer is too far behind. */
void dre_wq_throttle(dre_store *st);
/* Wait (releasing mu) until everything queued is written. */
void dre_wq_drain(dre_store *st);
/* Drop queued jobs of a file about to be deleted; waits (releasing mu) if the
 * writer is busy with one.  Meanwhile the file's records whose writes were
 * dropped are missing, and read as misses (st->wq_forgot), not I/O errors. */
void dre_wq_forget(dre_store *st, uint32_t file);
/* Have the writer delete evicted file `file` (at once if it cannot);
 * `bytes`, what it holds on disk, leave st->unlink_bytes once it is. */
void dre_wq_unlink(dre_store *st, uint32_t file, uint64_t bytes);
/* Have the writer sweep evicted file `file` (`size` bytes) out of the index
 * (dre_store_sweep), before a dre_wq_unlink of it queued next; 0, or -1 if it
 * cannot (then the caller sweeps). */
int dre_wq_sweep(dre_store *st, uint32_t file, uint64_t size);
/* Have the writer clear reclaimed peer slot `slot`'s bits from the index
 * (dre_store_clear_slot); 0, or -1 if it cannot (then the caller clears). */
int dre_wq_clear_slot(dre_store *st, int slot);
/* Have the writer let go of the mappings' pages (dre_store_letgo), unless
 * that is queued already; 0, or -1 if it cannot (then the caller does it).
 * Lock held. */
int dre_wq_letgo(dre_store *st);
/* Have the writer measure the room the file system leaves the store, ahead
 * of what is queued, and evict what is beyond it (unless one such measure
 * is queued already or there is no writer): 0 or DRE_ENOMEM. */
int dre_wq_room(dre_store *st);
/* Let go of the pages of every data file's mapping (MADV_DONTNEED: they stay
 * in the page cache, out of this process's resident set).  With `lock` (the
 * store's, not held), the madvise calls run outside it, under the mappings'
 * read lock; with lock NULL the caller holds the store's lock throughout. */
void dre_store_letgo(dre_store *st, pthread_mutex_t *lock);
/* Take slot's bit off every index entry, a part of the index per hold of
 * `lock` (with lock NULL the caller holds the store's lock throughout), then
 * set it again on the entries marked for the slot's new peer meanwhile, and
 * let lookups and marks use the slot again (peers.c). */
void dre_store_clear_slot(dre_store *st, int slot, pthread_mutex_t *lock);

#endif
