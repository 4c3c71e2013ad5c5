/* test_dre_peers.c: clearing a reclaimed peer slot's bits from the index in
 * the background (dre/peers.c). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../dre/dre_int.h"
#include "../dre/index.h"
#include "../dre/store_int.h"
#include "dre_util.h"

enum { K = 200 }; /* chunks */

/* The peer bits a lookup of tag finds. */
static uint32_t held_by(dre_store *st, uint64_t tag)
{
	dre_ent e;
	assert_true(dre_store_find(st, tag, &e));
	return e.peers;
}

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
	assert_int_equal(held_by(st, tags[0]), bbit);
	assert_int_equal(raw_bits(st, tags[0]), bbit);         /* the lookup took it off */
	assert_int_equal(raw_bits(st, tags[1]), abit | bbit);  /* not looked up yet */
	dre_store_mark(st, tags[2], abit);
	assert_int_equal(held_by(st, tags[2]), bbit);
	assert_int_equal(st->peer_log[a].len, 8);
	assert_int_equal(dre_store_sync(st), 0);
	assert_int_equal(st->peer_log[a].len, 8); /* not saved while clearing */

	dre_store_clear_slot(st, a, &st->mu);
	assert_int_equal(st->peers_clearing, 0);
	assert_int_equal(with_bit(st, abit), 1);
	assert_int_equal(with_bit(st, bbit), K);
	assert_int_equal(held_by(st, tags[2]), abit | bbit);
	assert_int_equal(held_by(st, tags[1]), bbit);
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
	assert_int_equal(held_by(st, tags[2]), 1u << a | bbit);
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
	assert_int_equal(held_by(st, tags[2]) & (1u << c), 0);
	dre_store_mark(st, tags[7], 1u << c);
	dre_store_flush(st);
	assert_int_equal(st->peers_clearing, 0);
	assert_int_equal(with_bit(st, 1u << c), 1);
	assert_int_equal(held_by(st, tags[7]), 1u << c | bbit);
	assert_int_equal(with_bit(st, bbit), K);
	dre_store_close(st);
	t_rmstore(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_peer_clear),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
