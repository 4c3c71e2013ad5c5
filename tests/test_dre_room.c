/* test_dre_room.c: a store on a file system with less room than its size
 * (dre/room.c): the room worked out from the file system's figures, the
 * store evicting down to it (and its horizon knowing it would), writes lost
 * to a full disk (and no mapped reads past one), the floor, and letting go
 * once the room is back.  The
 * figures are given, not measured, so that the test is the same on any disk;
 * the writer, idle once drained, measures nothing meanwhile -- except when
 * asked to (test_room_later, which needs a disk with room). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include <cmocka.h>

#include "../dre/dre_int.h"
#include "../dre/store_int.h"
#include "dre_util.h"

#define MiB (1ull << 20)
#define FS_TOTAL (128 * MiB) /* reserve: 1/64, 2 MiB */

/* Tell st (lock held) that its file system has `avail` bytes free of
 * FS_TOTAL, as the writer would after a write with result rc. */
static void fs_says(dre_store *st, uint64_t avail, uint32_t file, size_t len, int rc)
{
	struct statvfs fs;
	memset(&fs, 0, sizeof fs);
	fs.f_frsize = 1; /* bytes as blocks: the figures exact */
	fs.f_blocks = FS_TOTAL;
	fs.f_bavail = avail;
	dre_store_room_note(st, file, len, rc, &fs);
}

/* Store n MiB of new data in st and wait until it is written. */
static void store_new(dre_store *st, size_t n)
{
	size_t len = n * MiB;
	uint8_t *p = malloc(len);
	struct tbuf o = { 0 };
	assert_non_null(p);
	t_fill_random(p, len);
	dre_enc *e = dre_enc_new(st, NULL);
	assert_int_equal(t_encode(e, p, len, 1 << 20, &o), 0);
	dre_enc_free(e);
	free(o.p);
	free(p);
	pthread_mutex_lock(&st->mu);
	dre_wq_drain(st);
	pthread_mutex_unlock(&st->mu);
}

static uint64_t room_of(dre_store *st)
{
	dre_store_stats s;
	dre_store_get_stats(st, &s);
	return s.room;
}

static void test_room(void **state)
{
	(void)state;
	char dir[64];
	dre_store *st = t_store(dir, 64 * MiB); /* data files of 2 MiB */
	assert_non_null(st);
	store_new(st, 24);
	pthread_mutex_lock(&st->mu);
	uint64_t held = st->disk_bytes;
	assert_true(held > 24 * MiB && st->wq_bytes == 0);

	/* room to spare: the limit stands */
	fs_says(st, 100 * MiB, 0, 0, 0);
	assert_int_equal(dre_store_bound(st), 64 * MiB);
	/* the disk filled up by others: the store keeps to what it holds, less
	 * the reserve, and evicts down to it */
	fs_says(st, 0, 0, 0, 0);
	assert_int_equal(st->room, held - 2 * MiB);
	/* the horizon (what an encoder may still refer to) knows it too: the
	 * files the room will not keep are not safe */
	uint32_t oldest = st->files[0].num, act;
	pthread_mutex_unlock(&st->mu);
	uint32_t hz = dre_store_horizon(st, 0, &act);
	assert_true(hz > oldest && hz != UINT32_MAX);
	pthread_mutex_lock(&st->mu);
	assert_int_equal(dre_store_enforce_limit(st), 0);
	assert_int_equal(st->files[0].num, hz);
	assert_true(st->disk_bytes <= held - 2 * MiB);
	assert_true(st->disk_bytes > held - 2 * MiB - 3 * MiB); /* whole files, oldest first */
	/* the evicted files still hold their space until the writer deletes
	 * them: that space counts as the store's, not as gone */
	assert_true(st->unlink_bytes >= 2 * MiB);
	fs_says(st, 0, 0, 0, 0);
	assert_int_equal(st->room, held - 2 * MiB);
	dre_wq_drain(st);
	assert_int_equal(st->unlink_bytes, 0);
	pthread_mutex_unlock(&st->mu);
	assert_int_equal(room_of(st), held - 2 * MiB);

	/* a write lost to the full disk: its bytes are not on disk */
	pthread_mutex_lock(&st->mu);
	uint32_t active = st->files[st->nfiles - 1].num;
	uint64_t before = st->disk_bytes;
	fs_says(st, 0, active, MiB, ENOSPC);
	assert_int_equal(st->lost_bytes, MiB);
	assert_int_equal(st->room, before - MiB - 2 * MiB);
	/* a write to a file evicted meanwhile counts for nothing */
	fs_says(st, 0, st->files[0].num - 1, MiB, ENOSPC);
	assert_int_equal(st->lost_bytes, MiB);

	/* never below four data files */
	fs_says(st, 0, 0, 0, 0);
	st->lost_bytes = st->disk_bytes; /* as if nothing had reached the disk */
	fs_says(st, 0, 0, 0, 0);
	assert_int_equal(st->room, 4 * st->file_max);
	st->lost_bytes = MiB;

	/* space freed: let go of only once the room is a sixteenth above the
	 * limit (no flapping at the limit) */
	uint64_t on_disk = st->disk_bytes - MiB;
	fs_says(st, 64 * MiB - on_disk + 2 * MiB + 2 * MiB, 0, 0, 0);
	assert_int_equal(st->room, 64 * MiB);
	fs_says(st, 64 * MiB - on_disk + 2 * MiB + 4 * MiB, 0, 0, 0);
	assert_int_equal(st->room, UINT64_MAX);
	pthread_mutex_unlock(&st->mu);
	assert_int_equal(room_of(st), 0);
	/* ...and kept to again as soon as it is below */
	pthread_mutex_lock(&st->mu);
	fs_says(st, 64 * MiB - on_disk + 2 * MiB - MiB, 0, 0, 0);
	assert_int_equal(st->room, 63 * MiB);
	pthread_mutex_unlock(&st->mu);

	dre_store_close(st);
	t_rmstore(dir);
}

/* An evicted file's lost bytes leave the count with it. */
static void test_room_evicted(void **state)
{
	(void)state;
	char dir[64];
	dre_store *st = t_store(dir, 64 * MiB);
	assert_non_null(st);
	store_new(st, 12);
	pthread_mutex_lock(&st->mu);
	fs_says(st, 0, st->files[0].num, MiB, ENOSPC);
	assert_int_equal(st->lost_bytes, MiB);
	struct dre_sfile f = st->files[0];
	assert_int_equal(dre_store_room_evicted(st, &f), f.size - MiB);
	assert_int_equal(st->lost_bytes, 0);
	pthread_mutex_unlock(&st->mu);
	dre_store_close(st);
	t_rmstore(dir);
}

/* A write that failed (a full disk) leaves a hole the file may keep: past
 * it nothing is read through the mapping, even once later writes to the
 * file succeed (on a full tmpfs, reading a hole through a mapping raises
 * SIGBUS); what was written before it still is. */
static void test_room_cut(void **state)
{
	(void)state;
	char dir[64];
	dre_store *st = t_store(dir, 64 * MiB);
	assert_non_null(st);
	store_new(st, 1);
	pthread_mutex_lock(&st->mu);
	struct dre_sfile *f = &st->files[st->nfiles - 1];
	uint64_t w = f->written;
	assert_true(w > 4096 && dre_store_covers(f, 0, 1024));
	dre_store_written(st, f->num, w, w + 4096, ENOSPC);
	dre_store_written(st, f->num, w + 4096, w + 8192, 0);
	assert_int_equal(f->written, w);
	assert_false(dre_store_covers(f, w + 4096, 1024));
	assert_true(dre_store_covers(f, 0, 1024));
	dre_store_written(st, f->num, w + 8192, w + 12288, ENOSPC); /* the first failure counts */
	assert_int_equal(f->cut, w + 1);
	pthread_mutex_unlock(&st->mu);
	dre_store_close(st);
	t_rmstore(dir);
}

/* Asked to (dre_store_room_later), the writer measures the file system
 * the store is on, with nothing written: a room given by figures that the
 * real disk does not impose is let go of. */
static void test_room_later(void **state)
{
	(void)state;
	char dir[64];
	dre_store *st = t_store(dir, 64 * MiB);
	assert_non_null(st);
	store_new(st, 12);
	struct statvfs fs;
	assert_int_equal(statvfs(dir, &fs), 0);
	if ((uint64_t)fs.f_bavail * fs.f_frsize < 256 * MiB) {
		dre_store_close(st);
		t_rmstore(dir);
		skip(); /* the real disk would keep the store smaller too */
	}
	pthread_mutex_lock(&st->mu);
	fs_says(st, 0, 0, 0, 0);
	assert_true(st->room < 64 * MiB);
	dre_wq_drain(st); /* nothing queued: the writer measures nothing by itself */
	assert_true(st->room < 64 * MiB);
	pthread_mutex_unlock(&st->mu);
	assert_int_equal(dre_store_room_later(st), 0);
	assert_int_equal(dre_store_room_later(st), 0); /* one measure queued, not two */
	dre_store_flush(st);
	assert_int_equal(room_of(st), 0);
	pthread_mutex_lock(&st->mu);
	assert_int_equal(st->wq_room, 0);
	pthread_mutex_unlock(&st->mu);
	dre_store_close(st);
	t_rmstore(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_room),
		cmocka_unit_test(test_room_evicted),
		cmocka_unit_test(test_room_cut),
		cmocka_unit_test(test_room_later),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	t_dirs_left();
	return rc;
}
