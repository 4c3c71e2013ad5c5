/* test_dre_peers.c: the store's peers: slots given and reclaimed, knowledge
 * files as journals, and clearing a reclaimed slot's bits from the index in
 * the background (dre/peers.c). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../dre/dre_int.h"
#include "../dre/index.h"
#include "../dre/store_int.h"
#include "dre_util.h"
#include "store_util.h"

enum { K = 200 }; /* chunks */

/* The peer bits of tag's index entry as they are, with no lookup's clean-up. */
static uint32_t raw_bits(dre_store *st, uint64_t tag)
{
	pthread_mutex_lock(&st->mu);
	dre_ent *e = dre_idx_get(&st->idx, tag);
	uint32_t b = e ? e->peers : 0;
	pthread_mutex_unlock(&st->mu);
	return b;
}

/* Entries of the whole index carrying bit. */
static size_t with_bit(dre_store *st, uint32_t bit)
{
	size_t n = 0;
	uint64_t pos = 0;
	const dre_ent *e;
	pthread_mutex_lock(&st->mu);
	while ((e = dre_idx_next(&st->idx, &pos)))
		n += !!(e->peers & bit);
	pthread_mutex_unlock(&st->mu);
	return n;
}

/* Delete the knowledge file of peer id in store dir. */
static void peer_unlink(const char *dir, const uint8_t id[16])
{
	char path[512];
	int n = snprintf(path, sizeof path, "%s/peers/", dir);
	for (int i = 0; i < 16; i++)
		n += snprintf(path + n, sizeof path - (size_t)n, "%02x", id[i]);
	assert_int_equal(unlink(path), 0);
}

/* Store K random chunks, marked held by slots a and b. */
static void put_held(dre_store *st, int a, int b, uint64_t tags[K])
{
	dre_fp *fp = dre_fp_new();
	uint8_t p[512], h[32];
	dre_ent e;
	for (int i = 0; i < K; i++) {
		t_fill_random(p, sizeof p);
		assert_int_equal(dre_fp_sha256(fp, p, sizeof p, h), 0);
		assert_true(dre_store_put_after(st, h, p, sizeof p, 0, &e) >= 0);
		tags[i] = dre_fp_tag(h);
		dre_store_mark(st, tags[i], 1u << a | 1u << b);
	}
	dre_fp_free(fp);
}

/* While a reclaimed slot's bits are being cleared (the state is set up by
 * hand, so that the writer does not clear them first): lookups do not see
 * them, though entries not looked up still carry them; a mark for the new
 * peer is logged but not set, and not saved.  Once cleared, no entry but the
 * marked one carries the bit, other slots' bits are intact, and the mark
 * reaches the peer's file and survives a reopen.  Then the real thing: a
 * slot reclaimed through dre_store_peer is clear once the store is flushed,
 * and a mark made at once is kept. */
static void test_peer_clear(void **state)
{
	(void)state;
	char d[64];
	dre_store *st = t_store(d, 64u << 20);
	uint8_t ida[16], idb[16], idc[16];
	memset(ida, 0xa1, 16);
	memset(idb, 0xb2, 16);
	memset(idc, 0xc3, 16);
	int a = dre_store_peer(st, ida), b = dre_store_peer(st, idb);
	assert_true(a >= 0 && b >= 0 && a != b);
	uint32_t abit = 1u << a, bbit = 1u << b;
	static uint64_t tags[K];
	put_held(st, a, b, tags);
	assert_int_equal(dre_store_sync(st), 0);

	pthread_mutex_lock(&st->mu);
	st->peers_clearing |= abit; /* as slot_forget leaves it, writer still to come */
	dre_buf_free(&st->peer_log[a]);
	pthread_mutex_unlock(&st->mu);
	peer_unlink(d, ida);
	assert_int_equal(t_held_by(st, tags[0]), bbit);
	assert_int_equal(raw_bits(st, tags[0]), bbit);         /* the lookup took it off */
	assert_int_equal(raw_bits(st, tags[1]), abit | bbit);  /* not looked up yet */
	dre_store_mark(st, tags[2], abit);
	assert_int_equal(t_held_by(st, tags[2]), bbit);
	assert_int_equal(st->peer_log[a].len, 8);
	assert_int_equal(dre_store_sync(st), 0);
	assert_int_equal(st->peer_log[a].len, 8); /* not saved while clearing */

	dre_store_clear_slot(st, a, &st->mu);
	assert_int_equal(st->peers_clearing, 0);
	assert_int_equal(with_bit(st, abit), 1);
	assert_int_equal(with_bit(st, bbit), K);
	assert_int_equal(t_held_by(st, tags[2]), abit | bbit);
	assert_int_equal(t_held_by(st, tags[1]), bbit);
	assert_int_equal(dre_store_sync(st), 0);
	assert_int_equal(st->peer_log[a].len, 0);
	dre_store_peer_put(st, a);
	dre_store_peer_put(st, b);
	dre_store_close(st);

	assert_non_null(st = t_reopen(d, 64u << 20));
	a = dre_store_peer(st, ida); /* slots are numbered afresh at open */
	b = dre_store_peer(st, idb);
	assert_true(a >= 0 && b >= 0 && a != b);
	bbit = 1u << b;
	dre_store_peer_put(st, b);
	assert_int_equal(with_bit(st, 1u << a), 1);
	assert_int_equal(t_held_by(st, tags[2]), 1u << a | bbit);
	assert_int_equal(with_bit(st, bbit), K);

	/* reclaim for real: every other slot in use, a's idle for days */
	dre_store_mark(st, tags[5], 1u << a);
	dre_store_peer_put(st, a);
	uint8_t id[16];
	for (int i = st->npeers; i < DRE_PEER_SLOTS; i++) {
		memset(id, i, 16);
		assert_true(dre_store_peer(st, id) >= 0);
	}
	st->peer_last[a] -= 3 * DRE_PEER_IDLE_S;
	int c = dre_store_peer(st, idc);
	assert_int_equal(c, a);
	assert_int_equal(t_held_by(st, tags[2]) & (1u << c), 0);
	dre_store_mark(st, tags[7], 1u << c);
	dre_store_flush(st);
	assert_int_equal(st->peers_clearing, 0);
	assert_int_equal(with_bit(st, 1u << c), 1);
	assert_int_equal(t_held_by(st, tags[7]), 1u << c | bbit);
	assert_int_equal(with_bit(st, bbit), K);
	dre_store_close(st);
	t_rmstore(d);
}

#define DAY (24 * 3600)

/* The knowledge file of peer id in store dir, into path (512 bytes). */
static void peer_file(const char *dir, const uint8_t id[16], char *path)
{
	int k = snprintf(path, 512, "%s/peers/", dir);
	for (int i = 0; i < 16; i++)
		k += snprintf(path + k, 512 - (size_t)k, "%02x", id[i]);
}

/* Make the knowledge file of peer id in store dir `days` days old, as if
 * the peer was last seen then. */
static void peer_age(const char *dir, const uint8_t id[16], int days)
{
	char path[512];
	peer_file(dir, id, path);
	struct timeval tv[2] = { { time(NULL) - (time_t)days * DAY, 0 } };
	tv[1] = tv[0];
	assert_int_equal(utimes(path, tv), 0);
}

/* Knowledge files in store dir's peers/. */
static int peer_files(const char *dir)
{
	char path[512];
	snprintf(path, sizeof path, "%s/peers", dir);
	DIR *d = opendir(path);
	assert_non_null(d);
	int n = 0;
	for (struct dirent *de; (de = readdir(d)) != NULL;)
		n += strlen(de->d_name) == 32;
	closedir(d);
	return n;
}

/* Peer slots: 32 peers (each holding one chunk of its own) take every slot,
 * and a 33rd is not tracked while all were used within DRE_PEER_IDLE_S.
 * Reopened with three peers last seen days ago, new peers take the slot
 * unused longest, except one held (dre_store_peer not put) however old:
 * what the old peer held is forgotten and its file deleted.  A new peer's
 * knowledge survives a reopen. */
static void test_peer_slots(void **state)
{
	(void)state;
	char d[64];
	dre_store *st = t_store(d, 64u << 20);
	dre_fp *fp = dre_fp_new();
	enum { N = DRE_PEER_SLOTS };
	uint8_t p[4096], h[32], id[N + 3][16];
	uint64_t tag[N];
	dre_store_stats ss;
	for (int i = 0; i < N + 3; i++) {
		memset(id[i], 0xa5, 16);
		id[i][0] = (uint8_t)i;
	}
	for (int i = 0; i < N; i++) {
		t_fill_random(p, sizeof p);
		dre_ent e;
		assert_int_equal(dre_fp_sha256(fp, p, sizeof p, h), 0);
		assert_true(dre_store_put_after(st, h, p, sizeof p, 0, &e) >= 0);
		tag[i] = dre_fp_tag(h);
		int s = dre_store_peer(st, id[i]);
		assert_int_equal(s, i);
		dre_store_mark(st, tag[i], 1u << s);
		dre_store_peer_put(st, s);
	}
	assert_int_equal(dre_store_peer(st, id[N]), -1);
	dre_store_get_stats(st, &ss);
	assert_true(ss.peers == N && ss.peers_held == 0 && ss.peers_untracked == 1 && ss.peers_reclaimed == 0);
	assert_int_equal(dre_store_sync(st), 0);
	dre_store_close(st);
	assert_int_equal(peer_files(d), N);
	peer_age(d, id[3], 3);
	peer_age(d, id[5], 2);
	peer_age(d, id[7], 4);
	assert_non_null(st = t_reopen(d, 64u << 20));
	int s7 = dre_store_peer(st, id[7]); /* held, and as if for 4 days */
	assert_true(s7 >= 0);
	st->peer_last[s7] -= 4 * DAY;
	for (int i = 0; i < N; i++)
		assert_int_not_equal(t_held_by(st, tag[i]), 0);
	int s3 = dre_store_peer(st, id[N]); /* takes peer 3's slot: 7's is held */
	assert_true(s3 >= 0 && s3 != s7);
	assert_int_equal(t_held_by(st, tag[3]), 0);
	int s5 = dre_store_peer(st, id[N + 1]); /* then 5's */
	assert_true(s5 >= 0 && s5 != s3 && s5 != s7);
	assert_int_equal(t_held_by(st, tag[5]), 0);
	assert_int_equal(dre_store_peer(st, id[N + 2]), -1); /* nothing else unused for a day */
	for (int i = 0; i < N; i++)
		if (i != 3 && i != 5)
			assert_int_not_equal(t_held_by(st, tag[i]), 0);
	dre_store_get_stats(st, &ss);
	assert_true(ss.peers == N && ss.peers_held == 3 && ss.peers_untracked == 1 && ss.peers_reclaimed == 2);
	assert_int_equal(peer_files(d), N - 2);
	dre_store_mark(st, tag[0], 1u << s3);
	dre_store_peer_put(st, s3);
	dre_store_peer_put(st, s5);
	dre_store_peer_put(st, s7);
	assert_int_equal(dre_store_sync(st), 0);
	dre_store_close(st);
	assert_int_equal(peer_files(d), N - 1); /* the new peer with knowledge */
	assert_non_null(st = t_reopen(d, 64u << 20));
	uint32_t bits = t_held_by(st, tag[0]);
	assert_int_equal(__builtin_popcount(bits), 2);
	int s = dre_store_peer(st, id[N]);
	assert_true(s >= 0 && (bits & (1u << s)));
	assert_int_equal(t_held_by(st, tag[3]), 0);
	dre_store_close(st);
	dre_fp_free(fp);
	t_rmstore(d);
}

/* Bytes of the knowledge file of peer id in store dir (-1: none). */
static long peer_file_size(const char *dir, const uint8_t id[16])
{
	char path[512];
	struct stat sb;
	peer_file(dir, id, path);
	return stat(path, &sb) ? -1 : (long)sb.st_size;
}

/* A peer's knowledge file is a journal: a sync appends the tags marked since
 * the last one and leaves what the file held as it was; a reopen finds every
 * mark.  Under churn (a small store evicting as it takes new chunks) the file
 * is rewritten from the index once it holds more than twice the index's
 * chunks plus DRE_PEER_SLACK tags, and what is live stays marked, also after
 * a torn last append, and what is appended after it. */
static void test_peer_journal(void **state)
{
	(void)state;
	char d[64], path[512];
	dre_store *st = t_store(d, 4u << 20);
	dre_fp *fp = dre_fp_new();
	uint8_t id[16], first[8000], again[8000];
	static uint64_t tags[1500];
	memset(id, 0x5c, 16);
	int s = dre_store_peer(st, id);
	assert_true(s >= 0);
	t_put_marked(st, fp, s, 1000, tags);
	assert_int_equal(dre_store_sync(st), 0);
	assert_int_equal(peer_file_size(d, id), 8000);
	peer_file(d, id, path);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fread(first, 1, sizeof first, f), sizeof first);
	fclose(f);
	t_put_marked(st, fp, s, 500, tags + 1000);
	assert_int_equal(dre_store_sync(st), 0);
	assert_int_equal(peer_file_size(d, id), 12000);
	assert_non_null(f = fopen(path, "r"));
	assert_int_equal(fread(again, 1, sizeof again, f), sizeof again);
	fclose(f);
	assert_memory_equal(first, again, sizeof first);
	dre_store_peer_put(st, s);
	dre_store_close(st);
	assert_non_null(st = t_reopen(d, 4u << 20));
	for (int i = 0; i < 1500; i++)
		assert_int_not_equal(t_held_by(st, tags[i]), 0);
	assert_true((s = dre_store_peer(st, id)) >= 0);
	long most = 0, marks = 0;
	for (int round = 0; round < 15; round++) {
		t_put_marked(st, fp, s, 10000, NULL);
		marks += 10000;
		assert_int_equal(dre_store_sync(st), 0);
		long tags_now = peer_file_size(d, id) / 8;
		dre_store_stats ss;
		dre_store_get_stats(st, &ss);
		assert_true(tags_now <= 2 * (long)ss.chunks + DRE_PEER_SLACK + 10000);
		most = tags_now > most ? tags_now : most;
	}
	assert_true(most < 1500 + marks); /* rewritten at least once */
	t_put_marked(st, fp, s, 1000, tags);
	assert_int_equal(dre_store_sync(st), 0);
	dre_store_peer_put(st, s);
	dre_store_close(st);
	assert_non_null(f = fopen(path, "a")); /* an append torn by a crash */
	assert_int_equal(fwrite("\x01\x02\x03", 1, 3, f), 3);
	fclose(f);
	assert_non_null(st = t_reopen(d, 4u << 20));
	for (int i = 0; i < 1000; i++)
		assert_int_not_equal(t_held_by(st, tags[i]), 0);
	assert_true((s = dre_store_peer(st, id)) >= 0); /* and what is appended after it */
	t_put_marked(st, fp, s, 10, tags);
	assert_int_equal(dre_store_sync(st), 0);
	dre_store_peer_put(st, s);
	dre_store_close(st);
	assert_int_equal(peer_file_size(d, id) % 8, 0);
	assert_non_null(st = t_reopen(d, 4u << 20));
	for (int i = 0; i < 10; i++)
		assert_int_not_equal(t_held_by(st, tags[i]), 0);
	dre_store_close(st);
	dre_fp_free(fp);
	t_rmstore(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_peer_slots),
		cmocka_unit_test(test_peer_journal),
		cmocka_unit_test(test_peer_clear),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
