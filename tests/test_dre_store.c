/* test_dre_store.c: the segment store on its own, through real store
 * directories: reserved blocks, shrinking, the eviction horizon, pins, concurrent
 * writers, and eviction's sweep of the index (the sizing estimate:
 * test_dre_sizing.c; peer slots and knowledge files: test_dre_peers.c). */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../dre/dre_int.h"
#include "../dre/store_int.h"
#include "dre_util.h"
#include "store_util.h"

/* Bytes of .dat files in store directory dir. */
static uint64_t dat_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	uint64_t sum = 0;
	for (struct dirent *de; (de = readdir(d)) != NULL;) {
		char path[512];
		struct stat sb;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		if (strstr(de->d_name, ".dat") && stat(path, &sb) == 0)
			sum += (uint64_t)sb.st_size;
	}
	closedir(d);
	return sum;
}

/* Store n random 4 KiB chunks. */
static void put_random(dre_store *st, dre_fp *fp, int n)
{
	t_put_chunks(st, fp, 4096, n, -1, NULL);
}

/* Bytes allocated to DIR/NNNNNNNN.dat of file num, its size in *size. */
static uint64_t dat_alloc(const char *dir, unsigned num, uint64_t *size)
{
	char path[512];
	struct stat sb;
	snprintf(path, sizeof path, "%s/%08x.dat", dir, num);
	assert_int_equal(stat(path, &sb), 0);
	*size = (uint64_t)sb.st_size;
	return (uint64_t)sb.st_blocks * 512;
}

/* Whether the file system under dir reserves blocks past a file's end. */
static int can_reserve(const char *dir)
{
	char path[512];
	snprintf(path, sizeof path, "%s/probe", dir);
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	assert_true(fd >= 0);
	int ok = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 1 << 20) == 0;
	close(fd);
	unlink(path);
	return ok;
}

/* The writer reserves the active data file's blocks ahead of its writes
 * (never past the file's bound), and gives back what is left past the end
 * when the file is sealed and when the store closes: sizes on the disk stay
 * what the store counts. */
static void test_store_reserve(void **state)
{
	(void)state;
	char d[64];
	uint64_t limit = 64 << 20, file_max = 2 << 20, size, round;
	dre_store *st = t_store(d, limit);
	assert_non_null(st);
	dre_fp *fp = dre_fp_new();
	put_random(st, fp, 100); /* 400 KiB into file 1 */
	dre_store_flush(st);
	uint64_t a = dat_alloc(d, 1, &size);
	if (can_reserve(d))
		assert_true(a >= file_max);
	assert_true(a <= file_max + 65536);
	put_random(st, fp, 600); /* file 1 sealed, file 2 active */
	dre_store_flush(st);
	a = dat_alloc(d, 1, &size);
	round = (size + 4095) & ~4095ULL;
	assert_true(size > file_max / 2 && size <= file_max);
	assert_true(a <= round + 8192);
	dre_store_close(st);
	a = dat_alloc(d, 2, &size);
	round = (size + 4095) & ~4095ULL;
	assert_true(size > 0);
	assert_true(a <= round + 8192);
	dre_fp_free(fp);
	t_rmstore(d);
}

/* dre_store_shrink_step evicts at most one data file per call, says 1 while
 * over the target; stores in between evict only about what they add (not
 * down to the target at once); at the end the bound is the target, saved for
 * the next open, and the evicted files are gone from the disk. */
static void test_shrink_steps(void **state)
{
	char da[64];
	uint64_t mb = 1 << 20, to = 2 * mb;
	dre_store *st = t_store(da, 16 * mb); /* 1 MiB data files */
	dre_fp *fp = dre_fp_new();
	put_random(st, fp, 2500); /* ~10 MiB */
	dre_store_stats s0, s1;
	int steps = 0, rc;
	do {
		dre_store_get_stats(st, &s0);
		rc = dre_store_shrink_step(st, to, 0);
		assert_true(rc == 0 || rc == 1);
		dre_store_get_stats(st, &s1);
		assert_true(s1.files + 1 >= s0.files);
		assert_int_equal(rc, s1.disk_bytes > to);
		assert_int_equal(s1.size_limit, to); /* the stats give the target throughout */
		if (rc) {
			put_random(st, fp, 8);
			dre_store_get_stats(st, &s0);
			assert_true(s0.disk_bytes + mb + 8 * 4200 >= s1.disk_bytes);
		}
	} while (rc == 1 && ++steps < 100);
	print_message("shrink 16 -> 2 MiB: %d steps\n", steps);
	assert_true(steps >= 4 && steps < 100);
	assert_int_equal(s1.size_limit, to);
	char err[256];
	assert_int_equal(dre_store_check(st, err, sizeof err), 0);
	assert_int_equal(dre_store_shrink_step(st, 0, 0), DRE_EINVAL);
	dre_store_close(st);
	assert_true(dat_bytes(da) <= to);
	st = t_reopen(da, 0);
	dre_store_get_stats(st, &s1);
	assert_int_equal(s1.size_limit, to);
	dre_fp_free(fp);
	dre_store_close(st);
	t_rmstore(da);
}

/* The number of the oldest data file in store directory dir. */
static uint32_t oldest_file(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	uint32_t best = UINT32_MAX;
	for (struct dirent *de; (de = readdir(d)) != NULL;) {
		unsigned num;
		char ext[8];
		if (sscanf(de->d_name, "%8x.%3s", &num, ext) == 2 && !strcmp(ext, "dat") && num < best)
			best = num;
	}
	closedir(d);
	return best;
}

/* dre_store_horizon: every file it calls safe outlives `extra` more bytes of
 * store operations (the file it names is still there after them); with room
 * to spare it is the oldest file; it never moves back as extra grows; what is
 * stored after it lands in the active file it names or a later one. */
static void test_horizon(void **state)
{
	char da[64];
	dre_store *st = t_store(da, 2 << 20);
	dre_fp *fp = dre_fp_new();
	uint8_t p[4096], h[32];
	uint64_t prev = 0;
	for (int round = 0; round < 40; round++) {
		uint64_t extra = (t_rand() % 600 + 1) * DRE_STORE_OP_BYTES(sizeof p);
		dre_store_stats s;
		dre_store_get_stats(st, &s);
		dre_store_flush(st); /* evicted files are deleted by the writer thread */
		uint32_t act, a2, hz = dre_store_horizon(st, extra, &act), oldest = oldest_file(da);
		assert_true(dre_store_horizon(st, extra / 2, &a2) <= hz && hz <= dre_store_horizon(st, 2 * extra, &a2));
		assert_int_equal(a2, act);
		assert_true(act >= oldest && (hz == UINT32_MAX || act >= hz));
		if (s.disk_bytes + extra <= s.size_limit)
			assert_int_equal(hz, oldest);
		for (uint64_t put = 0; put + DRE_STORE_OP_BYTES(sizeof p) <= extra; put += DRE_STORE_OP_BYTES(sizeof p)) {
			t_fill_random(p, sizeof p);
			dre_ent e;
			assert_int_equal(dre_fp_sha256(fp, p, sizeof p, h), 0);
			assert_true(dre_store_put_after(st, h, p, sizeof p, prev, &e) >= 0);
			assert_true(e.file >= act);
			prev = dre_fp_tag(h);
		}
		/* file hz is there (UINT32_MAX: even the active file may have gone) */
		dre_store_flush(st);
		assert_true(hz == UINT32_MAX || oldest_file(da) <= hz);
	}
	dre_fp_free(fp);
	dre_store_close(st);
	t_rmstore(da);
}

/* Store a random 4 KiB chunk after prev; its entry in *e, its tag returned. */
static uint64_t put_one(dre_store *st, dre_fp *fp, uint64_t prev, dre_ent *e)
{
	uint8_t p[4096], h[32];
	t_fill_random(p, sizeof p);
	assert_int_equal(dre_fp_sha256(fp, p, sizeof p, h), 0);
	assert_true(dre_store_put_after(st, h, p, sizeof p, prev, e) >= 0);
	return dre_fp_tag(h);
}

/* A pinned data file (and every later one) outlives what would evict it,
 * the store past its size meanwhile; letting go of the pin brings the store
 * back within its size at once.  A chunk used from the oldest quarter is
 * copied forward, and dre_store_hit says where it sits now, so a frame
 * referencing it pins that file, not the old one. */
static void test_pins(void **state)
{
	char da[64];
	uint64_t limit = 4 << 20;
	dre_store *st = t_store(da, limit);
	dre_fp *fp = dre_fp_new();
	dre_ent x, e;
	uint64_t tx = put_one(st, fp, 0, &x);
	assert_int_equal(dre_store_pin(st, x.file), x.file);
	put_random(st, fp, 2 * (int)(limit >> 12)); /* twice the store's size */
	dre_store_stats s;
	dre_store_get_stats(st, &s);
	assert_int_equal(s.pins, 1);
	assert_true(s.disk_bytes > 2 * limit && s.pin_over_max >= s.disk_bytes - limit);
	assert_true(dre_store_find(st, tx, &e) && e.file == x.file);
	uint32_t now = dre_store_hit(st, 0, tx); /* from the oldest file: copied forward */
	assert_true(now > x.file);
	uint32_t newest = dre_store_pin_newest(st);
	assert_int_equal(now, newest);
	dre_store_unpin(st, newest);
	dre_store_unpin(st, x.file);
	dre_store_get_stats(st, &s);
	assert_int_equal(s.pins, 0);
	assert_true(s.disk_bytes <= limit);
	assert_int_equal(s.pin_forced, 0);
	assert_true(dre_store_find(st, tx, &e) && e.file == now);
	/* a file evicted already: the oldest live one is pinned instead */
	uint32_t got = dre_store_pin(st, x.file);
	assert_true(got > x.file && got != DRE_PIN_NONE);
	dre_store_unpin(st, got);
	assert_int_equal(dre_store_pin(st, DRE_PIN_NONE), DRE_PIN_NONE);
	dre_store_get_stats(st, &s);
	assert_int_equal(s.pins, 0);
	/* a shrink that waits for pins evicts nothing while the oldest file is
	 * pinned (2: later), and goes on once it is not */
	put_random(st, fp, (int)(limit >> 12));
	dre_store_get_stats(st, &s);
	uint64_t before = s.evicted_bytes, forced = s.pin_forced;
	uint32_t p0 = dre_store_pin(st, 0);
	assert_int_equal(dre_store_shrink_step(st, limit / 4, 1), 2);
	assert_int_equal(dre_store_shrink_step(st, limit / 4, 1), 2);
	dre_store_get_stats(st, &s);
	assert_int_equal(s.evicted_bytes, before);
	dre_store_unpin(st, p0);
	int rc;
	while ((rc = dre_store_shrink_step(st, limit / 4, 1)) == 1)
		;
	assert_int_equal(rc, 0);
	dre_store_get_stats(st, &s);
	assert_true(s.evicted_bytes > before && s.disk_bytes <= limit / 4);
	assert_int_equal(s.pin_forced, forced);
	dre_fp_free(fp);
	dre_store_close(st);
	t_rmstore(da);
}

/* Two threads store and read back chunks at once in a tiny store, so records
 * are read while still queued for the writer and files are evicted while the
 * writer works: every read gives the exact bytes or "evicted", and the store
 * stays consistent, also after a restart.  Chunks stored a while ago are read
 * and compared again through the calls that copy out of a mapping after the
 * store lock is released, while the other thread's puts evict their files. */
struct conc_arg {
	dre_store *st;
	uint64_t seed;
	int bad;
	int windowed; /* its rereads went through a read window */
};

#define CONC_BACK 64 /* how far back the second reads go */

/* The len bytes of chunk i, drawn from x. */
static void conc_fill(uint8_t *p, uint64_t x, uint32_t len, int i)
{
	for (uint32_t k = 0; k < len; k++)
		p[k] = (uint8_t)((x >> (k % 56)) + k * 131 + i);
}

/* Read chunk e (i, drawn from x) back through the unlocked paths: 1 if a
 * read or compare gave anything but its bytes or "evicted". */
static int conc_reread(dre_store *st, const dre_ent *e, uint64_t x, int i, uint8_t *p, uint8_t *q, dre_rwin *w)
{
	dre_ent m;
	conc_fill(p, x, e->len, i);
	int rc = dre_store_read_fast(st, e, q, w);
	if (rc == 0 ? memcmp(p, q, e->len) != 0 : rc != DRE_EMISS)
		return 1;
	/* by tag: its entry too, or not stored (tag 0), or evicted since */
	memset(q, 0, e->len);
	rc = dre_store_read_tag(st, e->tag, e->len, q, w, &m);
	if (rc == 0 ? m.tag != e->tag || m.len != e->len || memcmp(p, q, e->len) != 0
		    : rc != DRE_EMISS || (m.tag && m.tag != e->tag))
		return 1;
	rc = dre_store_read_tag(st, e->tag, e->len - 1, q, w, &m); /* too long for the room */
	if (rc != DRE_ECORRUPT && !(rc == DRE_EMISS && !m.tag))
		return 1;
	if (dre_store_match(st, e->tag, p, e->len, 0, q, w, &m) && m.len != e->len)
		return 1;
	p[e->len / 2] ^= 1; /* one bit off: never equal */
	return dre_store_match(st, e->tag, p, e->len, 0, q, w, &m);
}

static void *conc_main(void *vp)
{
	struct conc_arg *a = vp;
	dre_fp *fp = dre_fp_new();
	uint8_t *p = malloc(8192), *q = malloc(8192), h[32];
	uint64_t x = a->seed, prev = 0, xs[CONC_BACK];
	dre_ent es[CONC_BACK];
	dre_rwin rw = { 0 }; /* most rereads run on through a file: through it */
	for (int i = 0; i < 3000 && fp && p && q; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint32_t len = 1 + (uint32_t)(x % 8192);
		conc_fill(p, x, len, i);
		dre_fp_sha256(fp, p, len, h);
		dre_ent e;
		if (dre_store_put_after(a->st, h, p, len, prev, &e) < 0) {
			a->bad++;
			continue;
		}
		int rc = dre_store_read(a->st, &e, q);
		if (rc == 0 ? e.len != len || memcmp(p, q, len) : rc != DRE_EMISS)
			a->bad++;
		prev = dre_fp_tag(h);
		if (i >= CONC_BACK)
			a->bad += conc_reread(a->st, &es[i % CONC_BACK], xs[i % CONC_BACK], i - CONC_BACK, p, q,
					      i % 8 ? &rw : NULL);
		es[i % CONC_BACK] = e;
		xs[i % CONC_BACK] = x;
	}
	a->windowed = rw.buf != NULL;
	dre_rwin_free(&rw);
	free(p);
	free(q);
	dre_fp_free(fp);
	return NULL;
}

/* A third thread lets go of the mappings' pages over and over, as the
 * store's writer does every MAP_LINGER bytes read, while files are unmapped
 * by evictions; in a store that probes, every 16th round it also probes
 * again (as a daemon does on SIGHUP), told each way in turn through
 * WANOPT_STORE_READS (no other thread reads the environment meanwhile), so
 * the way runs are read flips under the readers.  In a store that times
 * its reads (rtune.c) it counts the changes of way its slices make. */
struct letgo_arg {
	dre_store *st;
	atomic_int *done;
	int tuned;
	int rounds, reprobes, flips;
};

static void *letgo_main(void *vp)
{
	struct letgo_arg *a = vp;
	int way = 0;
	while (!atomic_load(a->done)) {
		dre_store_letgo(a->st, &a->st->mu);
		if (a->tuned) {
			pthread_mutex_lock(&a->st->mu);
			a->flips += way && way != a->st->reads.way;
			way = a->st->reads.way;
			pthread_mutex_unlock(&a->st->mu);
			sched_yield();
			continue;
		}
		if (a->rounds++ % 16)
			continue;
		setenv("WANOPT_STORE_READS", a->reprobes % 2 ? "map" : "window", 1);
		int rc = dre_store_reprobe(a->st);
		a->reprobes += rc >= 0;
		a->flips += rc == 1;
	}
	unsetenv("WANOPT_STORE_READS");
	return NULL;
}

/* The run in a store whose runs are read the way `reads` says: through
 * windows, the rereads that run on take one (7 in 8 pass one); through the
 * mappings, none; measured (DRE_READS_AUTO), again and again meanwhile;
 * CONC_TUNED: as its reads cost, a way a slice in the first 64 MiB. */
#define CONC_TUNED (-1)
static void store_concurrent(int reads)
{
	int tuned = reads == CONC_TUNED;
	if (tuned) {
		dre_reads_probed r;
		unsetenv("WANOPT_STORE_READS");
		dre_reads_reprobe("/tmp", &r); /* the process's way: measured, not named */
		reads = DRE_READS_AUTO;
	}
	char d[64], err[256];
	strcpy(d, "/tmp/wanopt-test-XXXXXX");
	assert_non_null(mkdtemp(d));
	dre_store *st = t_reopen_reads(d, 3 << 20, reads);
	assert_non_null(st);
	struct conc_arg a[2] = { { st, 0x1234567, 0, 0 }, { st, 0x7654321, 0, 0 } };
	pthread_t th[2], lt;
	atomic_int done = 0;
	struct letgo_arg la = { st, &done, tuned, 0, 0, 0 };
	assert_int_equal(pthread_create(&lt, NULL, letgo_main, &la), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, conc_main, &a[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	atomic_store(&done, 1);
	pthread_join(lt, NULL);
	assert_int_equal(a[0].bad + a[1].bad, 0);
	if (reads != DRE_READS_AUTO)
		assert_int_equal(a[0].windowed + a[1].windowed, reads == DRE_READS_WINDOW ? 2 : 0);
	assert_true(la.rounds > 0 || tuned);
	assert_true(reads == DRE_READS_AUTO ? la.flips > 1 : la.reprobes == 0);
	dre_store_stats s;
	dre_store_get_stats(st, &s);
	assert_true(s.evicted_chunks > 0);
	assert_int_equal(s.io_errors, 0);
	assert_int_equal(dre_store_check(st, err, sizeof err), 0);
	uint64_t chunks = s.chunks;
	dre_store_close(st);
	dre_store_opts o = { .size_limit = 3 << 20 };
	st = dre_store_open(d, &o, err, sizeof err);
	assert_non_null(st);
	dre_store_get_stats(st, &s);
	assert_int_equal(s.chunks, chunks);
	assert_int_equal(s.dropped_records, 0);
	assert_int_equal(dre_store_check(st, err, sizeof err), 0);
	dre_store_close(st);
	t_rmstore(d);
}

static void test_store_concurrent(void **state)
{
	store_concurrent(DRE_READS_WINDOW);
	store_concurrent(DRE_READS_MAP);
	store_concurrent(DRE_READS_AUTO);
	store_concurrent(CONC_TUNED);
}


/* A sealed file's .idx is written without fdatasync: one that did not reach
 * the disk whole before a crash (empty, a byte changed, gone, another file's)
 * must fail its checks at the next open, and its data file be scanned
 * instead: every chunk is found again, with its bytes. */
#define IDX_N 1200
static void test_idx_damaged(void **state)
{
	(void)state;
	char d[64], err[256], path[512], other[512];
	dre_store *st = t_store(d, 32u << 20); /* files of 1 MiB: 4 sealed, a fifth active */
	dre_fp *fp = dre_fp_new();
	static uint8_t h[IDX_N][32];
	uint8_t p[4096], q[4096];
	for (int i = 0; i < IDX_N; i++) {
		memset(p, 0, sizeof p);
		memcpy(p, &i, sizeof i);
		p[4095] = (uint8_t)i;
		dre_ent e;
		assert_int_equal(dre_fp_sha256(fp, p, sizeof p, h[i]), 0);
		assert_true(dre_store_put_after(st, h[i], p, sizeof p, 0, &e) >= 0);
	}
	dre_store_close(st);
	int damaged = 0;
	for (unsigned num = 4; num >= 1; num--) { /* 4 first: it takes 3's intact .idx */
		snprintf(path, sizeof path, "%s/%08x.idx", d, num);
		struct stat sb;
		assert_int_equal(stat(path, &sb), 0);
		damaged++;
		if (num == 1) { /* empty */
			assert_int_equal(truncate(path, 0), 0);
		} else if (num == 2) { /* a byte changed */
			int fd = open(path, O_RDWR);
			uint8_t b;
			assert_true(fd >= 0);
			assert_int_equal(pread(fd, &b, 1, sb.st_size / 2), 1);
			b ^= 0x40;
			assert_int_equal(pwrite(fd, &b, 1, sb.st_size / 2), 1);
			close(fd);
		} else if (num == 3) { /* gone */
			assert_int_equal(unlink(path), 0);
		} else { /* another file's */
			snprintf(other, sizeof other, "%s/%08x.idx", d, num - 1);
			char cmd[1100];
			snprintf(cmd, sizeof cmd, "cp %s %s", other, path);
			assert_int_equal(system(cmd), 0);
		}
	}
	assert_int_equal(damaged, 4);
	dre_store_opts o = { .size_limit = 32u << 20 };
	st = dre_store_open(d, &o, err, sizeof err);
	assert_non_null(st);
	dre_store_stats s;
	dre_store_get_stats(st, &s);
	assert_int_equal(s.chunks, IDX_N);
	for (int i = 0; i < IDX_N; i++) {
		dre_ent e;
		assert_int_equal(dre_store_find(st, dre_fp_tag(h[i]), &e), 1);
		assert_int_equal(dre_store_read(st, &e, q), 0);
		assert_int_equal(e.len, sizeof q);
		assert_int_equal(memcmp(q, &i, sizeof i), 0);
		assert_int_equal(q[4095], (uint8_t)i);
	}
	assert_int_equal(dre_store_check(st, err, sizeof err), 0);
	dre_fp_free(fp);
	dre_store_close(st);
	t_rmstore(d);
}

/* Evict the oldest data file, with the store's lock held by the caller: the
 * writer cannot sweep its entries out of the index until the lock is let
 * go.  Returns the evicted file's number. */
static uint32_t evict_one_locked(dre_store *st)
{
	uint32_t num = st->files[0].num;
	uint64_t limit = st->limit;
	st->limit = st->disk_bytes - 1;
	assert_int_equal(dre_store_enforce_limit(st), 0);
	st->limit = limit;
	assert_true(st->files[0].num > num);
	return num;
}

/* Entries of tags[0..n) that count as live (dre_store_ent), and how many of
 * the others are still in the index, in *dead; lock held. */
static int live_of(dre_store *st, const uint64_t *tags, int n, int *dead)
{
	int live = 0;
	*dead = 0;
	for (int i = 0; i < n; i++) {
		if (dre_store_ent(st, tags[i]))
			live++;
		else if (dre_idx_get(&st->idx, tags[i]))
			(*dead)++;
	}
	return live;
}

/* Store chunk p (len bytes, SHA-256 h) as a record of the active file the way
 * a put does, and index it there (lock held, as in put_locked). */
static void put_record_locked(dre_store *st, const uint8_t h[32], const uint8_t *p, uint32_t len)
{
	struct dre_sfile *f = &st->files[st->nfiles - 1];
	uint8_t hdr[DRE_REC_HDR];
	dre_rec_header(hdr, DRE_REC_CHUNK, len, h, 0, p);
	assert_int_equal(dre_wq_append(st, f, hdr, p, len), 0);
	struct dre_idxent ie = { dre_fp_tag(h), 0, (uint32_t)f->size, len };
	f->size += DRE_REC_HDR + len;
	st->disk_bytes += DRE_REC_HDR + len;
	assert_int_equal(dre_store_apply(st, f->num, &ie), 0);
}

/* Eviction: an evicted file's chunks are gone for every lookup at once, and
 * its entries leave the index after, swept by the writer once the lock is
 * free (from its .idx, or over the whole table when that is missing).  A
 * chunk stored again before its old entry is swept takes the entry over,
 * with nothing of the old one (peer bits, successor).  Stats and the check's
 * per-file counts stay exact throughout. */
#define EV_N 2400
static void test_evict_sweep(void **state)
{
	(void)state;
	char d[64], err[256];
	dre_store *st = t_store(d, 8u << 20); /* files of 1 MiB: about 250 chunks each */
	dre_fp *fp = dre_fp_new();
	static uint64_t tags[EV_N];
	static uint8_t data[EV_N][2048];
	uint8_t h[32], q[2048];
	for (int i = 0; i < EV_N; i++) {
		t_fill_random(data[i], sizeof data[i]);
		dre_ent e;
		assert_int_equal(dre_fp_sha256(fp, data[i], sizeof data[i], h), 0);
		assert_int_equal(dre_store_put_after(st, h, data[i], sizeof data[i], 0, &e), 1);
		tags[i] = dre_fp_tag(h);
	}
	dre_store_flush(st); /* every sealed file's .idx is written */
	dre_store_stats s0, s;
	dre_store_get_stats(st, &s0);
	assert_int_equal(s0.chunks, EV_N);
	char path[512];
	snprintf(path, sizeof path, "%s/%08x.idx", d, st->files[1].num);
	assert_int_equal(unlink(path), 0); /* the second eviction walks the table */
	uint64_t evicted = s0.evicted_chunks;
	for (int round = 0; round < 2; round++) {
		pthread_mutex_lock(&st->mu);
		int dead, before = live_of(st, tags, EV_N, &dead);
		uint32_t num = evict_one_locked(st);
		int live = live_of(st, tags, EV_N, &dead);
		assert_true(live < before && dead == before - live);
		assert_int_equal(st->dead_ents, dead);
		assert_int_equal(st->idx.count - st->dead_ents, live);
		evicted += (uint64_t)dead;
		/* the first evicted chunk, stored anew before it is swept */
		int k = 0;
		while (dre_store_ent(st, tags[k]) || !dre_idx_get(&st->idx, tags[k]))
			k++;
		dre_ent *old = dre_idx_get(&st->idx, tags[k]);
		assert_true(old->file == num);
		old->peers = 5;
		old->next = tags[0];
		uint64_t bytes = st->data_bytes;
		assert_int_equal(dre_fp_sha256(fp, data[k], sizeof data[k], h), 0);
		put_record_locked(st, h, data[k], sizeof data[k]);
		dre_ent *e = dre_store_ent(st, tags[k]);
		assert_non_null(e);
		assert_true(e->peers == 0 && e->next == 0 && e->file == st->files[st->nfiles - 1].num);
		assert_int_equal(st->dead_ents, dead - 1);
		assert_int_equal(st->data_bytes, bytes + sizeof data[k]);
		pthread_mutex_unlock(&st->mu);
		dre_store_flush(st); /* waits for the sweep */
		dre_store_get_stats(st, &s);
		assert_int_equal(s.chunks, live + 1);
		assert_int_equal(s.evicted_chunks, evicted);
		pthread_mutex_lock(&st->mu);
		assert_int_equal(st->dead_ents, 0);
		assert_int_equal(live_of(st, tags, EV_N, &dead), live + 1);
		assert_int_equal(dead, 0);
		pthread_mutex_unlock(&st->mu);
		dre_ent f;
		assert_int_equal(dre_store_find(st, tags[k], &f), 1);
		assert_int_equal(dre_store_read(st, &f, q), 0);
		assert_memory_equal(q, data[k], sizeof q);
		assert_int_equal(dre_store_check(st, err, sizeof err), 0);
	}
	uint64_t chunks = s.chunks;
	dre_store_close(st);
	st = t_reopen(d, 8u << 20);
	dre_store_get_stats(st, &s);
	assert_int_equal(s.chunks, chunks);
	assert_int_equal(dre_store_check(st, err, sizeof err), 0);
	dre_fp_free(fp);
	dre_store_close(st);
	t_rmstore(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_store_reserve),
		cmocka_unit_test(test_shrink_steps),
		cmocka_unit_test(test_horizon),
		cmocka_unit_test(test_pins),
		cmocka_unit_test(test_store_concurrent),
		cmocka_unit_test(test_idx_damaged),
		cmocka_unit_test(test_evict_sweep),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
