/* dre_util.h: helpers for the DRE tests: temporary stores, deterministic data,
 * and encode/decode through real stores. */
#ifndef WANOPT_TEST_DRE_UTIL_H
#define WANOPT_TEST_DRE_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dre.h"
#include "dre_proto.h"

struct tbuf {
	uint8_t *p;
	size_t len, cap;
};

static inline int tbuf_out(void *arg, const void *p, size_t n)
{
	struct tbuf *b = arg;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p)
			return -1;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

static uint64_t t_rng = 88172645463325252ULL;
static inline uint64_t t_rand(void)
{
	t_rng ^= t_rng << 13;
	t_rng ^= t_rng >> 7;
	t_rng ^= t_rng << 17;
	return t_rng;
}

/* Random bytes. */
static inline void t_fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)t_rand();
}

/* Text-like data with repetition: words from a small vocabulary. */
static inline void t_fill_text(uint8_t *p, size_t n)
{
	static const char *w[] = { "struct ", "int ", "return ", "static ", "const ", "char *", "void ",
				   "if (", ") {\n", "}\n", "for (", "; ", "size_t ", "NULL", "0x", "buf" };
	size_t i = 0;
	while (i < n) {
		const char *s = w[t_rand() % 16];
		for (; *s && i < n; s++)
			p[i++] = (uint8_t)*s;
		if (i < n && t_rand() % 4 == 0)
			p[i++] = (uint8_t)('a' + t_rand() % 26);
	}
}

/* Open (creating) the store in dir, its runs read the way `reads` says
 * (DRE_READS_*); NULL with a message on failure. */
static inline dre_store *t_reopen_reads(const char *dir, uint64_t limit, int reads)
{
	char err[256];
	dre_store_opts o = { .size_limit = limit, .create = 1, .reads = reads };
	dre_store *st = dre_store_open(dir, &o, err, sizeof err);
	if (!st)
		fprintf(stderr, "store open %s: %s\n", dir, err);
	return st;
}

/* Store directories made by t_store and not yet removed by t_rmstore: a
 * test that fails an assertion skips its own cleanup, so they are removed
 * when the test binary exits (kept with KEEP=1 in the environment). */
enum { T_DIRS = 64 };
static char t_dirs[T_DIRS][64];

static inline void t_rmtree(const char *dir)
{
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

static inline void t_dirs_left(void)
{
	const char *keep = getenv("KEEP");
	for (int i = 0; i < T_DIRS; i++) {
		if (!t_dirs[i][0])
			continue;
		if (keep && *keep && strcmp(keep, "0"))
			fprintf(stderr, "kept %s (KEEP)\n", t_dirs[i]);
		else
			t_rmtree(t_dirs[i]);
	}
}

/* Note dir (1) as made, or (0) as removed. */
static inline void t_dir_note(const char *dir, int made)
{
	static int hooked;
	if (made && !hooked)
		hooked = atexit(t_dirs_left) == 0;
	for (int i = 0; i < T_DIRS; i++) {
		if (made ? !t_dirs[i][0] : !strcmp(t_dirs[i], dir)) {
			if (made)
				snprintf(t_dirs[i], sizeof t_dirs[i], "%s", dir);
			else
				t_dirs[i][0] = 0;
			return;
		}
	}
}

/* A fresh store directory under /tmp; path written to dir (64 bytes).  Its
 * runs are read either way at random, through windows or the mappings (a
 * daemon uses the way its host reads faster): the tests cover both. */
static inline dre_store *t_store(char *dir, uint64_t limit)
{
	strcpy(dir, "/tmp/wanopt-test-XXXXXX");
	if (!mkdtemp(dir))
		return NULL;
	t_dir_note(dir, 1);
	return t_reopen_reads(dir, limit, t_rand() % 2 ? DRE_READS_MAP : DRE_READS_WINDOW);
}

/* Open the store in dir again, runs read either way at random. */
static inline dre_store *t_reopen(const char *dir, uint64_t limit)
{
	return t_reopen_reads(dir, limit, t_rand() % 2 ? DRE_READS_MAP : DRE_READS_WINDOW);
}

/* Flip the bits of mask in the byte at offset at of open file f (a disk
 * gone bad). */
static inline void t_flip(FILE *f, long at, uint8_t mask)
{
	uint8_t c;
	assert_int_equal(fseek(f, at, SEEK_SET), 0);
	assert_int_equal(fread(&c, 1, 1, f), 1);
	c ^= mask;
	assert_int_equal(fseek(f, at, SEEK_SET), 0);
	assert_int_equal(fwrite(&c, 1, 1, f), 1);
}

static inline void t_rmstore(const char *dir)
{
	t_rmtree(dir);
	t_dir_note(dir, 0);
}

/* Close and remove the two stores of a test. */
static inline void t_stores_done(dre_store *sa, const char *da, dre_store *sb, const char *db)
{
	dre_store_close(sa);
	dre_store_close(sb);
	t_rmstore(da);
	t_rmstore(db);
}

/* Encode p[0..n) in pieces of random size (1..maxpiece) with one encoder,
 * each piece at random through dre_enc_write or copied into the encoder's
 * own buffer (dre_enc_space and dre_enc_commit, as the CLI and the relay
 * feed it): the two paths share the buffered input. */
static inline int t_encode(dre_enc *e, const uint8_t *p, size_t n, size_t maxpiece, struct tbuf *out)
{
	size_t pos = 0;
	while (pos < n) {
		size_t k = 1 + t_rand() % maxpiece, room = 0;
		if (k > n - pos)
			k = n - pos;
		int rc;
		if (t_rand() % 2) {
			rc = dre_enc_write(e, p + pos, k, tbuf_out, out);
		} else {
			uint8_t *dst = dre_enc_space(e, k, &room);
			if (!dst)
				return DRE_ENOMEM;
			assert_true(room >= k);
			memcpy(dst, p + pos, k);
			rc = dre_enc_commit(e, k, tbuf_out, out);
		}
		if (rc)
			return rc;
		pos += k;
	}
	return dre_enc_flush(e, tbuf_out, out);
}

/* Feed decoder d, which applied an END frame, a DATA frame of another
 * stream (literals uncompressed, so that it parses): returns what
 * dre_dec_write said. */
static inline int t_data_after_end(dre_dec *d, dre_store *st, const uint8_t *p, size_t n, struct tbuf *dec)
{
	struct tbuf more = { 0 };
	dre_enc_opts o = { .lz = DRE_LZ_NONE };
	dre_enc *e = dre_enc_new(st, &o);
	assert_int_equal(dre_enc_write(e, p, n, tbuf_out, &more), 0);
	assert_int_equal(dre_enc_flush(e, tbuf_out, &more), 0);
	int rc = dre_dec_write(d, more.p + DRE_STREAM_HDR_LEN, more.len - DRE_STREAM_HDR_LEN, tbuf_out, dec);
	dre_enc_free(e);
	free(more.p);
	return rc;
}

/* Decode p[0..n) fed in pieces of random size. */
static inline int t_decode(dre_dec *d, const uint8_t *p, size_t n, size_t maxpiece, struct tbuf *out)
{
	size_t pos = 0;
	while (pos < n) {
		size_t k = 1 + t_rand() % maxpiece;
		if (k > n - pos)
			k = n - pos;
		int rc = dre_dec_write(d, p + pos, k, tbuf_out, out);
		if (rc)
			return rc;
		pos += k;
	}
	return 0;
}

/* Encode p[0..n) with options o from store sa and decode it into sb (with
 * helper threads if dec_threaded), both fed in pieces of random size up to
 * `piece`; the bytes must come back.  Returns the encoded size; the stream is
 * left in *enc (its len reset first; the caller frees it) unless enc is NULL,
 * and the encoder's figures in *cs unless cs is NULL. */
static inline size_t t_roundtrip(dre_store *sa, dre_store *sb, const dre_enc_opts *o, int dec_threaded,
				 const uint8_t *p, size_t n, size_t piece, struct tbuf *enc, dre_codec_stats *cs)
{
	struct tbuf own = { 0 }, dec = { 0 };
	struct tbuf *out = enc ? enc : &own;
	dre_enc *e = dre_enc_new(sa, o);
	dre_dec *d = dre_dec_new(sb);
	assert_non_null(e);
	assert_non_null(d);
	assert_int_equal(dre_dec_set_threaded(d, dec_threaded), 0);
	out->len = 0;
	assert_int_equal(t_encode(e, p, n, piece, out), 0);
	if (cs)
		dre_enc_get_stats(e, cs);
	assert_int_equal(t_decode(d, out->p, out->len, piece, &dec), 0);
	assert_int_equal(dre_dec_finish(d), 0);
	assert_int_equal(dec.len, n);
	assert_true(n == 0 || memcmp(dec.p, p, n) == 0);
	size_t size = out->len;
	dre_enc_free(e);
	dre_dec_free(d);
	free(own.p);
	free(dec.p);
	return size;
}

#endif
