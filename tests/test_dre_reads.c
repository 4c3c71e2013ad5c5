/* test_dre_reads.c: how a store reads runs of stored chunks (rprobe.c,
 * rwin.c, rtune.c): the probe's measurement and its override, measuring
 * again on request, the way a store was told, a repeat read back both ways,
 * and the way chosen by what the store's own reads cost. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <fcntl.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "../dre/dec_int.h"
#include "../dre/enc_int.h"
#include "../dre/store_int.h"
#include "dre_util.h"

/* In a child process (the probe runs once per process): with
 * WANOPT_STORE_READS set to env, or unset (NULL), what the probe in dir
 * finds is written to *out. */
static void probe_in_child(const char *dir, const char *env, dre_reads_probed *out)
{
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dre_reads_probed r;
		if (env)
			setenv("WANOPT_STORE_READS", env, 1);
		else
			unsetenv("WANOPT_STORE_READS");
		dre_reads_probe(dir, &r);
		_exit(write(fds[1], &r, sizeof r) == sizeof r ? 0 : 1);
	}
	int status;
	close(fds[1]);
	assert_int_equal(read(fds[0], out, sizeof *out), sizeof *out);
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Unset, the probe measures both ways and takes the mapping only when it
 * was at least 10 % faster; set, the variable names the way and nothing is
 * measured; a name it does not know is ignored (measured again). */
static void test_probe(void **state)
{
	char d[64] = "/tmp/wanopt-test-XXXXXX";
	assert_non_null(mkdtemp(d));
	dre_reads_probed r;
	/* where the file system has no nameless files, nothing is measured */
	int fd = open(d, O_TMPFILE | O_RDWR, 0600), nameless = fd >= 0;
	if (fd >= 0)
		close(fd);
	probe_in_child(d, NULL, &r);
	if (!nameless) {
		assert_int_equal(r.way, DRE_READS_WINDOW);
		assert_true(r.window_ns == 0 && r.map_ns == 0);
		assert_int_equal(rmdir(d), 0);
		skip(); /* the rest needs a measurement */
	}
	assert_true(r.window_ns > 0 && r.map_ns > 0);
	assert_int_equal(r.way, r.map_ns * 10 < r.window_ns * 9 ? DRE_READS_MAP : DRE_READS_WINDOW);
	probe_in_child(d, "map", &r);
	assert_int_equal(r.way, DRE_READS_MAP);
	assert_true(r.window_ns == 0 && r.map_ns == 0);
	probe_in_child(d, "window", &r);
	assert_int_equal(r.way, DRE_READS_WINDOW);
	assert_true(r.window_ns == 0 && r.map_ns == 0);
	assert_null(r.ignored);
	probe_in_child(d, "mmap", &r);
	assert_true(r.window_ns > 0 && r.map_ns > 0);
	assert_non_null(r.ignored); /* a pointer of the child's: set, not read */
	/* the probe's file had no name: the directory is left empty */
	assert_int_equal(rmdir(d), 0);
}

/* A way given in the options is the store's, and its stats say so; a
 * store opened for stats only measures nothing. */
static void test_way_given(void **state)
{
	char d[64];
	dre_store_stats s;
	dre_store *st = t_store(d, 0);
	assert_non_null(st);
	dre_store_close(st);
	for (int way = DRE_READS_WINDOW; way <= DRE_READS_MAP; way++) {
		st = t_reopen_reads(d, 0, way);
		assert_non_null(st);
		dre_store_get_stats(st, &s);
		assert_int_equal(s.reads, way);
		assert_true(s.reads_window_ns == 0 && s.reads_map_ns == 0);
		dre_store_close(st);
	}
	char err[256];
	dre_store_opts o = { .readonly = 1 };
	assert_non_null(st = dre_store_open(d, &o, err, sizeof err));
	dre_store_get_stats(st, &s);
	assert_int_equal(s.reads, DRE_READS_WINDOW);
	dre_store_close(st);
	t_rmstore(d);
}

/* Measured again on request (dre_store_reprobe): the way the environment
 * names, then the other (a change: 1), the same again (0), then measured;
 * a store opened afterwards takes the process's new way; a store whose
 * options named a way, or opened read-only, does not probe (-1). */
static void test_reprobe(void **state)
{
	char d[64], d2[64], err[256];
	dre_store_stats s;
	dre_store *st = t_store(d, 0), *st2;
	assert_non_null(st);
	assert_int_equal(dre_store_reprobe(st), -1); /* t_store names a way */
	dre_store_get_stats(st, &s);
	int given = s.reads;
	dre_store_close(st);
	assert_non_null(st = t_reopen_reads(d, 0, DRE_READS_AUTO));
	setenv("WANOPT_STORE_READS", "window", 1);
	int rc = dre_store_reprobe(st);
	assert_true(rc == 0 || rc == 1);
	dre_store_get_stats(st, &s);
	assert_true(s.reads == DRE_READS_WINDOW && s.reads_window_ns == 0 && s.reads_map_ns == 0);
	setenv("WANOPT_STORE_READS", "map", 1);
	assert_int_equal(dre_store_reprobe(st), 1);
	dre_store_get_stats(st, &s);
	assert_int_equal(s.reads, DRE_READS_MAP);
	assert_int_equal(dre_store_reprobe(st), 0);
	unsetenv("WANOPT_STORE_READS");
	assert_non_null(st2 = t_store(d2, 0)); /* a directory for a store of AUTO */
	dre_store_close(st2);
	assert_non_null(st2 = t_reopen_reads(d2, 0, DRE_READS_AUTO));
	dre_store_get_stats(st2, &s);
	assert_int_equal(s.reads, DRE_READS_MAP); /* the process's way, not measured again */
	dre_store_close(st2);
	t_rmstore(d2);
	rc = dre_store_reprobe(st);
	dre_store_get_stats(st, &s);
	assert_int_equal(rc, s.reads != DRE_READS_MAP);
	int fd = open(d, O_TMPFILE | O_RDWR, 0600); /* nameless files: the probe measures */
	if (fd >= 0) {
		close(fd);
		assert_true(s.reads_window_ns > 0 && s.reads_map_ns > 0);
		assert_int_equal(s.reads, s.reads_map_ns * 10 < s.reads_window_ns * 9 ? DRE_READS_MAP : DRE_READS_WINDOW);
	}
	dre_store_close(st);
	assert_non_null(st = t_reopen_reads(d, 0, given));
	assert_int_equal(dre_store_reprobe(st), -1);
	dre_store_get_stats(st, &s);
	assert_int_equal(s.reads, given);
	dre_store_close(st);
	dre_store_opts o = { .readonly = 1 };
	assert_non_null(st = dre_store_open(d, &o, err, sizeof err));
	assert_int_equal(dre_store_reprobe(st), -1);
	dre_store_close(st);
	t_rmstore(d);
}

/* n bytes of text (malloc'd) and two new stores, in da and db. */
static uint8_t *text_and_stores(size_t n, char da[64], char db[64], dre_store **sa, dre_store **sb)
{
	uint8_t *p = malloc(n);
	assert_non_null(p);
	t_fill_text(p, n);
	assert_non_null(*sa = t_store(da, 0));
	assert_non_null(*sb = t_store(db, 0));
	return p;
}

/* A repeat encoded and decoded with both stores reading runs through
 * windows, then through the mappings: the same bytes back, each repeat
 * nearly all references, and the window used only the first way. */
static void test_repeat_both_ways(void **state)
{
	size_t n = 6 << 20;
	char da[64], db[64];
	dre_store *sa, *sb;
	uint8_t *p = text_and_stores(n, da, db, &sa, &sb);
	dre_enc_opts o = { .frame_max = 64 << 10 };
	size_t first = t_roundtrip(sa, sb, &o, 0, p, n, 1 << 16, NULL, NULL);
	for (int way = DRE_READS_WINDOW; way <= DRE_READS_MAP; way++) {
		dre_store_close(sa);
		dre_store_close(sb);
		assert_non_null(sa = t_reopen_reads(da, 0, way));
		assert_non_null(sb = t_reopen_reads(db, 0, way));
		dre_enc *e = dre_enc_new(sa, &o);
		dre_dec *d = dre_dec_new(sb);
		struct tbuf enc = { 0 }, dec = { 0 };
		assert_int_equal(t_encode(e, p, n, 1 << 16, &enc), 0);
		assert_true(enc.len * 50 < first);
		assert_int_equal(t_decode(d, enc.p, enc.len, 1 << 16, &dec), 0);
		assert_int_equal(dre_dec_finish(d), 0);
		assert_int_equal(dec.len, n);
		assert_memory_equal(dec.p, p, n);
		assert_int_equal(e->rw.buf != NULL, way == DRE_READS_WINDOW);
		assert_int_equal(d->rw.buf != NULL, way == DRE_READS_WINDOW);
		dre_enc_free(e);
		dre_dec_free(d);
		free(enc.p);
		free(dec.p);
	}
	t_stores_done(sa, da, sb, db);
	free(p);
}

/* Rounds of the repeat p[0..n) through an encoder on sa and a decoder on
 * sb: the same bytes back each time. */
static void repeat_rounds(dre_store *sa, dre_store *sb, const uint8_t *p, size_t n, int rounds)
{
	dre_enc_opts o = { .frame_max = 64 << 10 };
	dre_enc *e = dre_enc_new(sa, &o);
	dre_dec *d = dre_dec_new(sb);
	assert_non_null(e);
	assert_non_null(d);
	for (int r = 0; r < rounds; r++) {
		struct tbuf enc = { 0 }, dec = { 0 };
		assert_int_equal(t_encode(e, p, n, 1 << 16, &enc), 0);
		assert_int_equal(t_decode(d, enc.p, enc.len, 1 << 16, &dec), 0);
		assert_int_equal(dec.len, n);
		assert_memory_equal(dec.p, p, n);
		free(enc.p);
		free(dec.p);
	}
	assert_int_equal(dre_dec_finish(d), 0);
	dre_enc_free(e);
	dre_dec_free(d);
}

/* The stats of st after its first measuring epoch (rtune.c: 64 MiB read):
 * both ways timed, and the way chosen the cheaper, unless it cost 0.9 times
 * as much as the way it started from or more. */
static void assert_tuned(dre_store *st, int first)
{
	dre_store_stats s;
	dre_store_get_stats(st, &s);
	assert_int_equal(s.reads_tuned, 1);
	assert_true(s.reads_window_cost > 0 && s.reads_map_cost > 0);
	uint64_t mine = first == DRE_READS_MAP ? s.reads_map_cost : s.reads_window_cost;
	uint64_t other = first == DRE_READS_MAP ? s.reads_window_cost : s.reads_map_cost;
	int moved = other * 10 < mine * 9;
	assert_int_equal(s.reads, moved ? (first == DRE_READS_MAP ? DRE_READS_WINDOW : DRE_READS_MAP) : first);
	assert_int_equal(s.reads_switches, moved);
}

/* Stores that choose their way time their own reads (rtune.c): after 80
 * MiB compared by the encoder's store and copied out by the decoder's,
 * each took the way its reads found cheaper, and every byte came back
 * right meanwhile (the way changes under the readers, a slice at a time);
 * stores whose way the environment names or the options give time
 * nothing and keep it. */
static void test_tune(void **state)
{
	size_t n = 4 << 20;
	char da[64], db[64];
	dre_store *sa, *sb;
	uint8_t *p = text_and_stores(n, da, db, &sa, &sb);
	repeat_rounds(sa, sb, p, n, 1); /* stored at both ends */
	dre_store_close(sa);
	dre_store_close(sb);
	dre_reads_probed r;
	unsetenv("WANOPT_STORE_READS");
	dre_reads_reprobe(da, &r); /* the process's way measured, not named */
	assert_non_null(sa = t_reopen_reads(da, 0, DRE_READS_AUTO));
	assert_non_null(sb = t_reopen_reads(db, 0, DRE_READS_AUTO));
	dre_store_stats s;
	dre_store_get_stats(sa, &s);
	assert_true(s.reads_tuned && s.reads == r.way && s.reads_window_cost == 0 && s.reads_switches == 0);
	repeat_rounds(sa, sb, p, n, 20);
	assert_tuned(sa, r.way);
	assert_tuned(sb, r.way);
	for (int way = DRE_READS_WINDOW; way <= DRE_READS_MAP; way++) {
		dre_store_close(sa);
		dre_store_close(sb);
		setenv("WANOPT_STORE_READS", way == DRE_READS_MAP ? "map" : "window", 1);
		dre_reads_reprobe(da, &r);
		assert_non_null(sa = t_reopen_reads(da, 0, DRE_READS_AUTO));
		assert_non_null(sb = t_reopen_reads(db, 0, way)); /* given */
		repeat_rounds(sa, sb, p, n, 17);
		for (int i = 0; i < 2; i++) {
			dre_store_get_stats(i ? sb : sa, &s);
			assert_true(!s.reads_tuned && s.reads == way && s.reads_switches == 0);
			assert_true(s.reads_window_cost == 0 && s.reads_map_cost == 0);
		}
	}
	unsetenv("WANOPT_STORE_READS");
	t_stores_done(sa, da, sb, db);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe),
		cmocka_unit_test(test_way_given),
		cmocka_unit_test(test_reprobe),
		cmocka_unit_test(test_repeat_both_ways),
		cmocka_unit_test(test_tune),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
