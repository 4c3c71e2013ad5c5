/* test_dre.c: the DRE codec and store, end to end through real store directories
 * (the store's own mechanics: test_dre_store.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "../dre/dre_int.h"
#include "dre_util.h"

/* sum64 is XXH64: check the published test values. */
static void test_sum64_vectors(void **state)
{
	assert_true(dre_sum64("", 0, 0) == 0xEF46DB3751D8E999ULL);
	assert_true(dre_sum64("abc", 3, 0) == 0x44BC2CF5AD770999ULL);
	uint8_t buf[100];
	for (int i = 0; i < 100; i++)
		buf[i] = (uint8_t)i;
	/* every length hits a different tail path; all must differ */
	uint64_t seen[100];
	for (int n = 0; n < 100; n++) {
		seen[n] = dre_sum64(buf, (size_t)n, 7);
		for (int k = 0; k < n; k++)
			assert_true(seen[k] != seen[n]);
	}
}

/* Encode with store A, decode with store B, compare, with or without helper
 * threads at random; returns the encoded size. */
static size_t roundtrip(dre_store *sa, dre_store *sb, const uint8_t *p, size_t n, size_t piece)
{
	dre_enc_opts o = { .frame_max = 64 << 10, .threaded = (int)(t_rand() % 2) };
	return t_roundtrip(sa, sb, &o, (int)(t_rand() % 2), p, n, piece, NULL, NULL);
}

/* Random sizes (0 .. 3 MB), random split points, three kinds of data. */
static void test_roundtrip_sizes(void **state)
{
	char da[64], db[64];
	dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
	assert_non_null(sa);
	assert_non_null(sb);
	size_t sizes[] = { 0, 1, 63, 64, 65, 2047, 4096, 16385, 100000, 1 << 20, 3 << 20 };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		uint8_t *p = malloc(sizes[i] + 1);
		for (int kind = 0; kind < 3; kind++) {
			if (kind == 0)
				t_fill_random(p, sizes[i]);
			else if (kind == 1)
				t_fill_text(p, sizes[i]);
			else
				memset(p, kind, sizes[i]);
			size_t piece = 1 + t_rand() % (sizes[i] > 70000 ? 70000 : sizes[i] + 1);
			roundtrip(sa, sb, p, sizes[i], piece);
		}
		free(p);
	}
	char err[256];
	assert_int_equal(dre_store_check(sa, err, sizeof err), 0);
	assert_int_equal(dre_store_check(sb, err, sizeof err), 0);
	t_stores_done(sa, da, sb, db);
}

/* Data seen before costs little; edited data costs about its edits. */
static void test_repeat_and_edits(void **state)
{
	char da[64], db[64];
	dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
	size_t n = 4 << 20;
	uint8_t *v1 = malloc(n), *v2 = malloc(n + 50 * 20);
	t_fill_random(v1, n);
	size_t first = roundtrip(sa, sb, v1, n, 1 << 20);
	assert_true(first > n); /* random: no reduction possible, small overhead */
	assert_true(first < n + n / 200);
	size_t again = roundtrip(sa, sb, v1, n, 1 << 20);
	assert_true(again < 2000); /* 4 MB repeat: a handful of bytes per frame */
	/* 20 insertions of 50 random bytes */
	size_t pos = 0, out = 0;
	for (int i = 0; i < 20; i++) {
		size_t next = (size_t)(i + 1) * (n / 21);
		memcpy(v2 + out, v1 + pos, next - pos);
		out += next - pos;
		pos = next;
		t_fill_random(v2 + out, 50);
		out += 50;
	}
	memcpy(v2 + out, v1 + pos, n - pos);
	out += n - pos;
	size_t edited = roundtrip(sa, sb, v2, out, 1 << 16);
	assert_true(edited < 20 * 50 + 20 * 100 + 2000);
	free(v1);
	free(v2);
	t_stores_done(sa, da, sb, db);
}

/* Blocks that recur in another context (A B C B D): a repeat of the data
 * breaks its run where B is followed by D, not by C as when first seen.  The
 * first repeat identifies the chunk there by cutting and hashing; later ones
 * neither cut nor hash: they compare the bytes there with the chunk the store
 * noted under their first bytes (alt.c), as they do for a stream's first
 * chunk; all decode byte for byte. */
static void test_second_successor(void **state)
{
	char da[64], db[64];
	dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
	size_t blk = 200000, nblk = 5;
	int order[] = { 0, 1, 2, 1, 3 };
	uint8_t *blocks = malloc(4 * blk), *p = malloc(nblk * blk);
	t_fill_random(blocks, 4 * blk);
	for (size_t i = 0; i < nblk; i++)
		memcpy(p + i * blk, blocks + order[i] * blk, blk);
	uint64_t hashed[3], cut[3];
	for (int pass = 0; pass < 3; pass++) {
		struct tbuf enc = { 0 }, dec = { 0 };
		dre_enc_opts o = { .frame_max = 64 << 10 };
		dre_enc *e = dre_enc_new(sa, &o);
		dre_dec *d = dre_dec_new(sb);
		assert_int_equal(t_encode(e, p, nblk * blk, 50000, &enc), 0);
		assert_int_equal(t_decode(d, enc.p, enc.len, 50000, &dec), 0);
		assert_int_equal(dre_dec_finish(d), 0);
		assert_int_equal(dec.len, nblk * blk);
		assert_memory_equal(dec.p, p, nblk * blk);
		dre_codec_stats s;
		dre_enc_get_stats(e, &s);
		hashed[pass] = s.hashed_bytes;
		cut[pass] = s.cut_bytes;
		dre_enc_free(e);
		dre_dec_free(d);
		free(enc.p);
		free(dec.p);
	}
	print_message("hashed (cut) bytes: cold %llu (%llu), first repeat %llu (%llu), second %llu (%llu)\n",
		      (unsigned long long)hashed[0], (unsigned long long)cut[0], (unsigned long long)hashed[1],
		      (unsigned long long)cut[1], (unsigned long long)hashed[2], (unsigned long long)cut[2]);
	assert_true(hashed[0] >= 3 * blk);
	assert_true(hashed[1] < blk);
	/* the first repeat hashes its first chunk (a new stream has no cursor
	 * to follow yet) and the chunk after B where D follows; the second
	 * finds both by their first bytes */
	assert_true(hashed[1] <= 3 * 16384);
	assert_true(hashed[2] == 0 && cut[2] == 0);
	free(blocks);
	free(p);
	t_stores_done(sa, da, sb, db);
}

/* What a store learned survives closing and reopening it. */
static void test_restart_keeps_cache(void **state)
{
	char da[64], db[64];
	dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
	size_t n = 3 << 20;
	uint8_t *p = malloc(n);
	t_fill_text(p, n);
	roundtrip(sa, sb, p, n, 100000);
	dre_store_stats s1, s2;
	dre_store_get_stats(sa, &s1);
	uint64_t id = dre_store_id(sa);
	dre_store_close(sa);
	dre_store_close(sb);
	sa = t_reopen(da, 0);
	sb = t_reopen(db, 0);
	assert_non_null(sa);
	assert_non_null(sb);
	dre_store_get_stats(sa, &s2);
	assert_true(s1.chunks == s2.chunks);
	assert_true(s1.data_bytes == s2.data_bytes);
	assert_true(id == dre_store_id(sa));
	assert_true(roundtrip(sa, sb, p, n, 100000) < 1000);
	free(p);
	t_stores_done(sa, da, sb, db);
}

/* A torn write (data file cut mid-record) is dropped at open, never served. */
static void test_crash_torn_record(void **state)
{
	char da[64], db[64];
	dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
	size_t n = 1 << 20;
	uint8_t *p = malloc(n);
	t_fill_random(p, n);
	roundtrip(sa, sb, p, n, 50000);
	dre_store_close(sb);
	/* cut the decoder's data file 100 bytes short: the last record is torn */
	char path[128];
	snprintf(path, sizeof path, "%s/00000001.dat", db);
	FILE *f = fopen(path, "r+");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fclose(f);
	assert_int_equal(truncate(path, size - 100), 0);
	sb = t_reopen(db, 0);
	assert_non_null(sb);
	dre_store_stats s;
	dre_store_get_stats(sb, &s);
	assert_int_equal(s.dropped_records, 1);
	char err[256];
	assert_int_equal(dre_store_check(sb, err, sizeof err), 0);
	/* the encoder still references the lost chunk: the decoder must report a
	 * miss, never hand out bytes */
	struct tbuf enc = { 0 }, dec = { 0 };
	dre_enc *e = dre_enc_new(sa, NULL);
	dre_dec *d = dre_dec_new(sb);
	assert_int_equal(t_encode(e, p, n, n, &enc), 0);
	int rc = t_decode(d, enc.p, enc.len, enc.len, &dec);
	assert_int_equal(rc, DRE_EMISS);
	assert_true(dec.len < n);
	assert_true(dec.len == 0 || memcmp(dec.p, p, dec.len) == 0);
	dre_enc_free(e);
	dre_dec_free(d);
	free(enc.p);
	free(dec.p);
	free(p);
	t_stores_done(sa, da, sb, db);
}

/* A tiny store evicts, stays within its bound, stays consistent, and encoder
 * and decoder stores of the same size stay in step. */
static void test_eviction_tiny_store(void **state)
{
	char da[64], db[64];
	uint64_t limit = 2 << 20;
	dre_store *sa = t_store(da, limit), *sb = t_store(db, limit);
	size_t n = 1 << 20;
	uint8_t *p = malloc(n);
	for (int round = 0; round < 12; round++) {
		t_fill_text(p, n);
		roundtrip(sa, sb, p, n, 200000);
		if (round % 3 == 2) /* repeat something recent: it must still be there */
			assert_true(roundtrip(sa, sb, p, n, 200000) < 2000);
	}
	dre_store_stats s;
	dre_store_get_stats(sa, &s);
	assert_true(s.disk_bytes <= limit);
	assert_true(s.evicted_chunks > 0);
	char err[256];
	assert_int_equal(dre_store_check(sa, err, sizeof err), 0);
	assert_int_equal(dre_store_check(sb, err, sizeof err), 0);
	/* shrinking at run time evicts at once */
	assert_int_equal(dre_store_set_limit(sa, 1 << 20), 0);
	dre_store_get_stats(sa, &s);
	assert_true(s.disk_bytes <= 1 << 20);
	free(p);
	t_stores_done(sa, da, sb, db);
}

static void test_corrupt_input(void **state)
{
	char da[64], db[64];
	dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
	size_t n = 600000;
	uint8_t *p = malloc(n);
	t_fill_text(p, n);
	struct tbuf enc = { 0 };
	dre_enc_opts o = { .frame_max = 32 << 10 };
	dre_enc *e = dre_enc_new(sa, &o);
	assert_int_equal(t_encode(e, p, n, n, &enc), 0);
	dre_enc_free(e);
	int errors = 0;
	for (int trial = 0; trial < 300; trial++) {
		uint8_t *c = malloc(enc.len);
		memcpy(c, enc.p, enc.len);
		size_t len = enc.len;
		if (trial % 3 == 0)
			len = t_rand() % enc.len; /* truncated */
		for (int k = 0; len && k < 1 + trial % 4; k++) /* cut to nothing: no byte to flip */
			c[t_rand() % len] ^= (uint8_t)(1 + t_rand() % 255);
		struct tbuf dec = { 0 };
		/* a fresh decoder store each time, so earlier trials teach nothing */
		char dc[64];
		dre_store *sc = t_store(dc, 0);
		dre_dec *d = dre_dec_new(sc);
		assert_int_equal(dre_dec_set_threaded(d, trial % 2), 0);
		int rc = t_decode(d, c, len, 4096, &dec);
		int frc = dre_dec_finish(d); /* waits for any helper thread's output */
		if (!rc)
			rc = frc;
		if (!rc && !dre_dec_ended(d)) /* cut before the end frame (or to nothing): */
			rc = DRE_ECORRUPT; /* an error, as the command line reports it */
		if (rc)
			errors++;
		assert_true(dec.len <= n);
		assert_true(dec.len == 0 || memcmp(dec.p, p, dec.len) == 0);
		if (!rc)
			assert_int_equal(dec.len, n);
		dre_dec_free(d);
		dre_store_close(sc);
		t_rmstore(dc);
		free(dec.p);
		free(c);
	}
	assert_true(errors > 250);
	free(p);
	free(enc.p);
	t_stores_done(sa, da, sb, db);
}

/* Two processes must not write one store; bad directories are refused clearly. */
static void test_store_errors(void **state)
{
	char da[64], err[256];
	dre_store *sa = t_store(da, 0);
	dre_store_opts o = { .create = 1 };
	assert_null(dre_store_open(da, &o, err, sizeof err));
	assert_non_null(strstr(err, "in use"));
	dre_store_close(sa);
	o.create = 0;
	assert_null(dre_store_open("/nonexistent/wanopt", &o, err, sizeof err));
	assert_non_null(strstr(err, "/nonexistent/wanopt"));
	char path[128];
	snprintf(path, sizeof path, "%s/STORE", da);
	FILE *f = fopen(path, "w");
	fputs("something else\n", f);
	fclose(f);
	assert_null(dre_store_open(da, &o, err, sizeof err));
	assert_non_null(strstr(err, "STORE:1"));
	t_rmstore(da);
}

/* Encode with store sa for peer slot `peer` (tracked), decode with sb (no ask
 * path: a reference sb lacks fails the test); returns the encoded size. */
static size_t send_to(dre_store *sa, int peer, dre_store *sb, int from_slot, const uint8_t *p, size_t n)
{
	struct tbuf enc = { 0 }, dec = { 0 };
	dre_enc_opts o = { .frame_max = 64 << 10, .peer = peer + 1 };
	dre_enc *e = dre_enc_new(sa, &o);
	dre_dec *d = dre_dec_new(sb);
	dre_dec_set_peer(d, from_slot);
	assert_int_equal(t_encode(e, p, n, 100000, &enc), 0);
	assert_int_equal(t_decode(d, enc.p, enc.len, 100000, &dec), 0);
	assert_int_equal(dre_dec_finish(d), 0);
	assert_int_equal(dec.len, n);
	assert_memory_equal(dec.p, p, n);
	size_t size = enc.len;
	dre_enc_free(e);
	dre_dec_free(d);
	free(enc.p);
	free(dec.p);
	return size;
}

/* One store serving two peers: a chunk one peer holds is not referenced to the
 * other; knowledge survives a restart. */
static void test_peer_knowledge(void **state)
{
	char da[64], db[64], dc[64];
	dre_store *sa = t_store(da, 0), *sb = t_store(db, 0), *sc = t_store(dc, 0);
	uint8_t idb[16] = "branch-b-store!", idc[16] = "branch-c-store!", ida[16] = "core-store-id!!";
	int pb = dre_store_peer(sa, idb), pc = dre_store_peer(sa, idc);
	assert_true(pb >= 0 && pc >= 0 && pb != pc);
	assert_int_equal(dre_store_peer(sa, idb), pb);
	size_t n = 2 << 20;
	uint8_t *p = malloc(n);
	t_fill_text(p, n);
	size_t first_b = send_to(sa, pb, sb, dre_store_peer(sb, ida), p, n);
	assert_true(send_to(sa, pb, sb, dre_store_peer(sb, ida), p, n) < 2000);
	/* C has never seen it: literals, no references it cannot resolve */
	size_t first_c = send_to(sa, pc, sc, dre_store_peer(sc, ida), p, n);
	assert_true(first_c > first_b / 2);
	assert_true(send_to(sa, pc, sc, dre_store_peer(sc, ida), p, n) < 2000);
	/* restart the sender: it still knows what B and C hold */
	assert_int_equal(dre_store_sync(sa), 0);
	dre_store_close(sa);
	sa = t_reopen(da, 0);
	pc = dre_store_peer(sa, idc); /* slots are looked up by id again after a restart */
	assert_true(pc >= 0);
	assert_true(send_to(sa, pc, sc, dre_store_peer(sc, ida), p, n) < 2000);
	/* a new peer D gets literals */
	char dd[64];
	dre_store *sd = t_store(dd, 0);
	uint8_t idd[16] = "branch-d-store!";
	assert_true(send_to(sa, dre_store_peer(sa, idd), sd, 0, p, n) > first_b / 2);
	free(p);
	dre_store_close(sa);
	dre_store_close(sb);
	dre_store_close(sc);
	dre_store_close(sd);
	t_rmstore(da);
	t_rmstore(db);
	t_rmstore(dc);
	t_rmstore(dd);
}

/* END: reported once everything before it is applied; nothing may follow. */
static void test_end_frame(void **state)
{
	char da[64], db[64];
	dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
	size_t n = 300000;
	uint8_t *p = malloc(n);
	t_fill_text(p, n);
	struct tbuf enc = { 0 }, dec = { 0 };
	dre_enc_opts o = { .frame_max = 64 << 10 };
	dre_enc *e = dre_enc_new(sa, &o);
	assert_int_equal(dre_enc_write(e, p, n, tbuf_out, &enc), 0);
	assert_int_equal(dre_enc_end(e, tbuf_out, &enc), 0);
	size_t end_at = enc.len;
	/* one END only; no data after it */
	assert_int_equal(dre_enc_end(e, tbuf_out, &enc), 0);
	assert_int_equal(enc.len, end_at);
	assert_int_equal(dre_enc_write(e, p, 1000, tbuf_out, &enc), DRE_ESTATE);
	assert_int_equal(dre_enc_flush(e, tbuf_out, &enc), 0);
	assert_int_equal(enc.len, end_at);
	dre_dec *d = dre_dec_new(sb);
	assert_int_equal(dre_dec_write(d, enc.p, end_at - 5, tbuf_out, &dec), 0);
	assert_false(dre_dec_ended(d));
	assert_int_equal(dre_dec_write(d, enc.p + end_at - 5, 5, tbuf_out, &dec), 0);
	assert_true(dre_dec_ended(d));
	/* a second END (as an older encoder could send), in two pieces: not
	 * ended while its rest is missing, so the caller does not finish early */
	size_t end_len = 0;
	while (enc.p[end_at - 1 - end_len] != DRE_FRAME_MAGIC || enc.p[end_at - end_len] != DRE_FT_END)
		end_len++;
	end_len++;
	assert_int_equal(dre_dec_write(d, enc.p + end_at - end_len, 3, tbuf_out, &dec), 0);
	assert_false(dre_dec_ended(d));
	assert_int_equal(dre_dec_write(d, enc.p + end_at - end_len + 3, end_len - 3, tbuf_out, &dec), 0);
	assert_true(dre_dec_ended(d));
	assert_int_equal(dre_dec_finish(d), 0);
	assert_int_equal(dec.len, n);
	assert_memory_equal(dec.p, p, n);
	/* a DATA frame after END is refused */
	assert_int_equal(t_data_after_end(d, sa, p, 1000, &dec), DRE_ECORRUPT);
	assert_int_equal(dec.len, n);
	dre_enc_free(e);
	dre_dec_free(d);
	free(enc.p);
	free(dec.p);
	free(p);
	t_stores_done(sa, da, sb, db);
}

static int pause_out(void *arg, const void *p, size_t n)
{
	tbuf_out(arg, p, n);
	return 1; /* pause after every frame */
}

/* A decoder paused by its output callback keeps the rest and resumes on demand. */
static void test_decoder_pause(void **state)
{
	char da[64], db[64];
	dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
	size_t n = 1 << 20;
	uint8_t *p = malloc(n);
	t_fill_text(p, n);
	struct tbuf enc = { 0 }, dec = { 0 };
	dre_enc_opts o = { .frame_max = 64 << 10 };
	dre_enc *e = dre_enc_new(sa, &o);
	assert_int_equal(t_encode(e, p, n, n, &enc), 0);
	dre_dec *d = dre_dec_new(sb);
	assert_int_equal(dre_dec_write(d, enc.p, enc.len, pause_out, &dec), 0);
	int rounds = 1;
	while (dre_dec_paused(d)) {
		/* paused after a frame: the rest is held, unless that was the last */
		assert_true(dec.len == n || dre_dec_buffered(d) > 0);
		assert_int_equal(dre_dec_write(d, NULL, 0, pause_out, &dec), 0);
		rounds++;
	}
	assert_true(rounds >= 16);
	assert_int_equal(dre_dec_finish(d), 0);
	assert_int_equal(dre_dec_buffered(d), 0);
	assert_int_equal(dec.len, n);
	assert_memory_equal(dec.p, p, n);
	dre_enc_free(e);
	dre_dec_free(d);
	free(enc.p);
	free(dec.p);
	free(p);
	t_stores_done(sa, da, sb, db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sum64_vectors),
		cmocka_unit_test(test_roundtrip_sizes),
		cmocka_unit_test(test_repeat_and_edits),
		cmocka_unit_test(test_second_successor),
		cmocka_unit_test(test_restart_keeps_cache),
		cmocka_unit_test(test_crash_torn_record),
		cmocka_unit_test(test_eviction_tiny_store),
		cmocka_unit_test(test_corrupt_input),
		cmocka_unit_test(test_store_errors),
		cmocka_unit_test(test_decoder_pause),
		cmocka_unit_test(test_peer_knowledge),
		cmocka_unit_test(test_end_frame),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
