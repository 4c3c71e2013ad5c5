/* store_util.h: putting chunks into a store and reading its peer marks, for
 * the store's tests (test_dre_store.c, test_dre_peers.c). */
#ifndef WANOPT_TEST_STORE_UTIL_H
#define WANOPT_TEST_STORE_UTIL_H

#include "../dre/dre_int.h"
#include "dre_util.h"

/* Store n new chunks of len random bytes (at most 4 KiB), each marked held
 * by peer slot `slot` unless it is negative; their tags into tags[0..n) if
 * given. */
static inline void t_put_chunks(dre_store *st, dre_fp *fp, size_t len, int n, int slot, uint64_t *tags)
{
	uint8_t p[4096], h[32];
	for (int i = 0; i < n; i++) {
		t_fill_random(p, len);
		dre_ent e;
		assert_int_equal(dre_fp_sha256(fp, p, len, h), 0);
		assert_true(dre_store_put_after(st, h, p, (uint32_t)len, 0, &e) >= 0);
		if (slot >= 0)
			dre_store_mark(st, dre_fp_tag(h), 1u << slot);
		if (tags)
			tags[i] = dre_fp_tag(h);
	}
}

/* Store n new chunks of 64 random bytes, each marked held by peer slot s;
 * their tags into tags[0..n) if given. */
static inline void t_put_marked(dre_store *st, dre_fp *fp, int s, int n, uint64_t *tags)
{
	t_put_chunks(st, fp, 64, n, s, tags);
}

/* Peer bits chunk tag carries (a lookup: stale bits are cleared). */
static inline uint32_t t_held_by(dre_store *st, uint64_t tag)
{
	dre_ent e;
	assert_true(dre_store_find(st, tag, &e));
	return e.peers;
}

#endif
