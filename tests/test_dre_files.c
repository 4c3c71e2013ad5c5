/* test_dre_files.c: the store's directory and files as the system sees
 * them: private modes whatever the umask, the directory removed while in use,
 * a record gone bad mid-file, and a data file that cannot be made. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../dre/dre_int.h"
#include "../dre/store_int.h"
#include "dre_util.h"
#include "store_util.h"

/* Every directory and file of dir (recursively) is its owner's alone. */
static void assert_private(const char *dir, int *seen)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	for (struct dirent *de; (de = readdir(d)) != NULL;) {
		char path[512];
		struct stat sb;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		assert_int_equal(lstat(path, &sb), 0);
		if (sb.st_mode & 077)
			fail_msg("%s: mode %o", path, (unsigned)(sb.st_mode & 07777));
		++*seen;
		if (S_ISDIR(sb.st_mode))
			assert_private(path, seen);
	}
	closedir(d);
}

/* A store holds the traffic it saw: under a umask that lets others read,
 * its directory (and the parents it had to make) and every file it writes
 * (data, identity, lock, limit, sizing, peer journals) are still its
 * owner's alone. */
static void test_private_files(void **state)
{
	(void)state;
	char d[64], sub[128];
	mode_t old = umask(022);
	strcpy(d, "/tmp/wanopt-test-XXXXXX");
	assert_non_null(mkdtemp(d));
	t_dir_note(d, 1);
	snprintf(sub, sizeof sub, "%s/a/b/store", d); /* made with its parents */
	dre_store *st = t_reopen(sub, 4u << 20);
	assert_non_null(st);
	dre_fp *fp = dre_fp_new();
	uint8_t id[16];
	static uint64_t tags[300];
	memset(id, 0x3a, 16);
	int s = dre_store_peer(st, id);
	assert_true(s >= 0);
	t_put_marked(st, fp, s, 300, tags);
	assert_int_equal(dre_store_set_limit(st, 2u << 20), 0);
	assert_int_equal(dre_store_sync(st), 0);
	dre_store_peer_put(st, s);
	dre_store_close(st);
	struct stat sb;
	assert_int_equal(stat(sub, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	int seen = 0;
	assert_private(d, &seen);
	assert_true(seen >= 7);
	umask(old);
	dre_fp_free(fp);
	t_rmstore(d);
}

/* The store's directory removed while in use (rm -rf): the next data file
 * makes it again, with the store's identity and lock; the store goes on
 * (nothing fails), says so in its stats, and opens again afterwards with
 * what it stored since. */
static void test_dir_removed(void **state)
{
	(void)state;
	char d[64], path[128];
	dre_store *st = t_store(d, 4u << 20);
	dre_fp *fp = dre_fp_new();
	uint64_t tags[600];
	t_put_chunks(st, fp, 4096, 300, -1, NULL);
	assert_int_equal(dre_store_sync(st), 0);
	t_rmtree(d);
	t_put_chunks(st, fp, 4096, 600, -1, tags); /* rotates: the directory is made again */
	dre_store_stats s;
	dre_store_get_stats(st, &s);
	assert_int_equal(s.dir_remade, 1);
	snprintf(path, sizeof path, "%s/STORE", d);
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(stat(d, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	dre_ent e;
	assert_true(dre_store_find(st, tags[599], &e));
	assert_int_equal(dre_store_sync(st), 0);
	dre_store_close(st);
	assert_non_null(st = t_reopen(d, 4u << 20));
	assert_true(dre_store_find(st, tags[599], &e));
	dre_store_close(st);
	dre_fp_free(fp);
	t_rmstore(d);
}

/* A record gone bad in the middle of a data file the store recovers by
 * scanning (the active one, or one whose .idx is gone) costs that record
 * only: the scan goes on at the next sound one, and the file is kept whole.
 * Only a torn tail (nothing sound after it) is cut.  Before, the first bad
 * record cut the rest of the file. */
static void test_rot_mid_file(void **state)
{
	(void)state;
	char d[64], path[128];
	dre_store *st = t_store(d, 0);
	dre_fp *fp = dre_fp_new();
	t_put_chunks(st, fp, 4096, 100, -1, NULL);
	assert_int_equal(dre_store_sync(st), 0);
	dre_store_close(st);
	snprintf(path, sizeof path, "%s/00000001.dat", d);
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	off_t size = sb.st_size;
	FILE *f = fopen(path, "r+b");
	assert_non_null(f);
	long rec = 56 + 4096;
	t_flip(f, 50 * rec + 56 + 100, 0x10); /* chunk 50's payload (no links: all records alike) */
	fclose(f);
	assert_int_equal(truncate(path, size - 1000), 0); /* and a torn tail */
	assert_non_null(st = t_reopen(d, 0));
	dre_store_stats s;
	dre_store_get_stats(st, &s);
	assert_int_equal(s.chunks, 98);
	assert_int_equal(s.dropped_records, 2);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, 99 * rec);
	dre_store_close(st);
	dre_fp_free(fp);
	t_rmstore(d);
}

/* n random 4 KiB chunks through dre_store_add, as a stream's codec stores
 * them (it must not fail); their tags into tags[0..n) if given. */
static void add_chunks(dre_store *st, dre_fp *fp, int n, uint64_t *tags)
{
	uint8_t p[4096], h[32];
	for (int i = 0; i < n; i++) {
		t_fill_random(p, sizeof p);
		assert_int_equal(dre_fp_sha256(fp, p, sizeof p, h), 0);
		assert_int_equal(dre_store_add(st, h, p, sizeof p, 0, 0, 0), 0);
		if (tags)
			tags[i] = dre_fp_tag(h);
	}
}

/* The next data file cannot be made (here a directory in its way): the
 * chunks that wanted it are not stored, counted as I/O errors, and nothing
 * fails; the file before keeps its index (sealed once, not again with no
 * entries at each retry), and once the way is clear the store goes on. */
static void test_new_file_fails(void **state)
{
	(void)state;
	char d[64], path[128];
	dre_store *st = t_store(d, 4u << 20);
	dre_fp *fp = dre_fp_new();
	snprintf(path, sizeof path, "%s/00000002.dat", d);
	assert_int_equal(mkdir(path, 0700), 0);
	uint64_t tags[600];
	add_chunks(st, fp, 600, tags); /* 2.4 MB: past the first file's 1 MiB */
	dre_store_stats s;
	dre_store_get_stats(st, &s);
	assert_true(s.io_errors > 0);
	uint64_t chunks = s.chunks;
	assert_true(chunks > 100 && chunks < 600);
	assert_int_equal(rmdir(path), 0);
	add_chunks(st, fp, 50, NULL);
	dre_store_get_stats(st, &s);
	assert_int_equal(s.chunks, chunks + 50);
	assert_int_equal(dre_store_sync(st), 0);
	dre_store_close(st);
	assert_non_null(st = t_reopen(d, 4u << 20));
	dre_store_get_stats(st, &s);
	assert_int_equal(s.chunks, chunks + 50);
	dre_ent e;
	assert_true(dre_store_find(st, tags[0], &e));
	dre_store_close(st);
	dre_fp_free(fp);
	t_rmstore(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_private_files),
		cmocka_unit_test(test_dir_removed),
		cmocka_unit_test(test_rot_mid_file),
		cmocka_unit_test(test_new_file_fails),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
