/* test_dre_enc.c: the threaded encoder reading the caller's buffer in place
 * (frames cut straight from a large dre_enc_write keep their literals as a
 * view of that buffer while helper threads emit and store them, so the
 * encoder must be done with the buffer when dre_enc_write returns), and
 * chunks repeated back to back (AGAIN, stream version 3); the residual coded
 * on zstd's worker threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "../dre/enc_int.h"
#include "dre_util.h"

/* Decode enc into store sb: the bytes must be src[0..n).  Frees enc. */
static void decode_check(dre_store *sb, struct tbuf *enc, const uint8_t *src, size_t n)
{
	struct tbuf dec = { 0 };
	dre_dec *d = dre_dec_new(sb);
	assert_non_null(d);
	assert_int_equal(t_decode(d, enc->p, enc->len, 1 << 20, &dec), 0);
	assert_int_equal(dre_dec_finish(d), 0);
	assert_int_equal(dec.len, n);
	assert_memory_equal(dec.p, src, n);
	dre_dec_free(d);
	free(enc->p);
	free(dec.p);
}

/* Test input of rnd + txt + rep MiB at p: random bytes, text, then a copy of
 * the rep MiB from `from` MiB on, with `edits` bytes flipped in the copy. */
static void fill_mixed(uint8_t *p, size_t rnd, size_t txt, size_t from, size_t rep, size_t edits)
{
	t_fill_random(p, rnd << 20);
	t_fill_text(p + (rnd << 20), txt << 20);
	uint8_t *copy = p + ((rnd + txt) << 20);
	memcpy(copy, p + (from << 20), rep << 20);
	for (size_t i = 0; i < edits; i++)
		copy[t_rand() % (rep << 20)] ^= 0x5a;
}

/* Mixed input (random, text, a repeat with edits, so views, copies and
 * deltas all occur) written in large pieces from one scratch buffer that is
 * overwritten as soon as each write returns: the decoded stream is the
 * original, byte for byte. */
static void test_caller_buffer_reuse(void **state)
{
	char da[64], db[64];
	dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
	assert_non_null(sa);
	assert_non_null(sb);
	size_t n = 12 << 20, piece = 3 << 20;
	uint8_t *src = malloc(n), *scratch = malloc(piece);
	assert_non_null(src);
	assert_non_null(scratch);
	fill_mixed(src, 5, 4, 1, 3, 40);
	struct tbuf enc = { 0 };
	dre_enc_opts o = { .threaded = 1 };
	dre_enc *e = dre_enc_new(sa, &o);
	assert_non_null(e);
	for (size_t pos = 0; pos < n; pos += piece) {
		memcpy(scratch, src + pos, piece);
		assert_int_equal(dre_enc_write(e, scratch, piece, tbuf_out, &enc), 0);
		memset(scratch, 0xa5, piece); /* the caller reuses its buffer */
	}
	assert_int_equal(dre_enc_flush(e, tbuf_out, &enc), 0);
	dre_codec_stats s;
	dre_enc_get_stats(e, &s);
	assert_true(s.delta_bytes > 0 || s.ref_bytes > (2u << 20)); /* the repeat was found */
	dre_enc_free(e);
	decode_check(sb, &enc, src, n);
	free(src);
	free(scratch);
	t_stores_done(sa, da, sb, db);
}

/* Feed a threaded encoder as the command line does: space for at least
 * 1 MiB, filled up to 4 MiB at a time, or to the end when less than 5 MiB
 * is left (so the buffer fills up); with `ragged`, pieces of random size
 * (as a pipe delivers them) instead.  Returns the encoder's twin buffer's
 * capacity (0: never used). */
static size_t feed_space(dre_store *sa, const uint8_t *p, size_t n, int ragged, struct tbuf *enc)
{
	dre_enc_opts o = { .threaded = 1 };
	dre_enc *e = dre_enc_new(sa, &o);
	assert_non_null(e);
	for (size_t pos = 0; pos < n;) {
		size_t room = 0;
		uint8_t *dst = dre_enc_space(e, 1 << 20, &room);
		assert_non_null(dst);
		assert_true(room >= 1 << 20);
		size_t k = room < (5u << 20) ? room : 4u << 20;
		if (ragged)
			k = 1 + t_rand() % k;
		if (k > n - pos)
			k = n - pos;
		memcpy(dst, p + pos, k);
		assert_int_equal(dre_enc_commit(e, k, tbuf_out, enc), 0);
		pos += k;
	}
	assert_int_equal(dre_enc_end(e, tbuf_out, enc), 0);
	size_t twin = e->in_alt.cap;
	dre_enc_free(e);
	return twin;
}

/* Fed as the command line feeds it, the encoder cuts frames from its own
 * buffer while its helpers still read the frame before: the unframed rest
 * moves to the front, ahead of that frame (filled up, the buffer holds four
 * frames: the twin buffer is not needed), and nothing the helpers read is
 * overwritten: the stream decodes to the input, byte for byte.  The same
 * with ragged pieces, where the rest may have to go to the twin. */
static void test_space_in_place(void **state)
{
	size_t n = 40 << 20;
	uint8_t *src = malloc(n);
	assert_non_null(src);
	fill_mixed(src, 16, 8, 4, 16, 400);
	for (int ragged = 0; ragged < 2; ragged++) {
		char da[64], db[64];
		dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
		assert_non_null(sa);
		assert_non_null(sb);
		struct tbuf enc = { 0 };
		size_t twin = feed_space(sa, src, n, ragged, &enc);
		if (!ragged)
			assert_int_equal(twin, 0);
		decode_check(sb, &enc, src, n);
		t_stores_done(sa, da, sb, db);
	}
	free(src);
}

#define WF_FRAME (1u << 20)
#define WF_NEED (WF_FRAME + 16384) /* a frame and the default largest chunk */

/* A threaded encoder with WF_FRAME frames over a fresh store, and a fresh
 * store to decode into. */
struct wf {
	char da[64], db[64];
	dre_store *sa, *sb;
	dre_enc *e;
	struct tbuf enc;
};

static void wf_begin(struct wf *t)
{
	memset(t, 0, sizeof *t);
	t->sa = t_store(t->da, 0);
	t->sb = t_store(t->db, 0);
	assert_non_null(t->sa);
	assert_non_null(t->sb);
	dre_enc_opts o = { .threaded = 1, .frame_max = WF_FRAME };
	assert_non_null(t->e = dre_enc_new(t->sa, &o));
}

/* End t's stream: more than `reused` bytes must have gone as references or
 * deltas, and it must decode to src[0..n).  Frees all but src. */
static void wf_end(struct wf *t, const uint8_t *src, size_t n, uint64_t reused)
{
	assert_int_equal(dre_enc_end(t->e, tbuf_out, &t->enc), 0);
	dre_codec_stats s;
	dre_enc_get_stats(t->e, &s);
	assert_true(s.ref_bytes + s.delta_bytes > reused);
	dre_enc_free(t->e);
	decode_check(t->sb, &t->enc, src, n);
	t_stores_done(t->sa, t->da, t->sb, t->db);
}

/* Whole frames straight from windows of the input, each window's unframed
 * tail starting the next; the window is reused as soon as dre_enc_release
 * returns, and the last piece goes to dre_enc_write.  Each call leaves less
 * than a frame and a chunk, takes nothing from a window smaller than that,
 * and refuses to run while dre_enc_write has bytes buffered; the stream
 * decodes to the input. */
static void test_write_frames(void **state)
{
	(void)state;
	size_t n = 24 << 20, win = 5 << 20;
	uint8_t *src = malloc(n), *w = malloc(win);
	assert_non_null(src);
	assert_non_null(w);
	fill_mixed(src, 10, 6, 2, 8, 80);
	struct wf t;
	wf_begin(&t);
	size_t pos = 0, took = 0;
	assert_int_equal(dre_enc_write_frames(t.e, src, WF_NEED - 1, &took, tbuf_out, &t.enc), 0);
	assert_int_equal(took, 0);
	while (n - pos >= win) {
		memcpy(w, src + pos, win);
		assert_int_equal(dre_enc_write_frames(t.e, w, win, &took, tbuf_out, &t.enc), 0);
		assert_true(took > 0 && win - took < WF_NEED);
		assert_int_equal(dre_enc_release(t.e), 0);
		memset(w, 0xa5, win); /* the caller unmaps the window */
		pos += took;
	}
	assert_int_equal(dre_enc_write(t.e, src + pos, 1000, tbuf_out, &t.enc), 0);
	assert_int_equal(dre_enc_write_frames(t.e, src + pos + 1000, WF_NEED, &took, tbuf_out, &t.enc), DRE_ESTATE);
	assert_int_equal(dre_enc_write(t.e, src + pos + 1000, n - pos - 1000, tbuf_out, &t.enc), 0);
	wf_end(&t, src, n, 4u << 20); /* the repeat was found */
	free(src);
	free(w);
}

/* The command line's way: windows of one mapping, each call's frames
 * still in flight while the next window's are cut (no dre_enc_release in
 * between), windows ending anywhere (a frame's tail starts the next one).
 * The stream decodes to the input and finds its repeat. */
static void test_write_frames_overlap(void **state)
{
	(void)state;
	size_t n = 20 << 20;
	uint8_t *src = malloc(n);
	assert_non_null(src);
	fill_mixed(src, 8, 4, 1, 8, 50);
	struct wf t;
	wf_begin(&t);
	size_t pos = 0, took = 0;
	while (n - pos >= 2 * WF_NEED) {
		size_t win = WF_NEED + t_rand() % (3 * WF_FRAME);
		win = win < n - pos ? win : n - pos;
		assert_int_equal(dre_enc_write_frames(t.e, src + pos, win, &took, tbuf_out, &t.enc), 0);
		assert_true(took > 0 && win - took < WF_NEED);
		pos += took;
	}
	assert_int_equal(dre_enc_release(t.e), 0);
	assert_int_equal(dre_enc_write(t.e, src + pos, n - pos, tbuf_out, &t.enc), 0);
	wf_end(&t, src, n, 6u << 20);
	free(src);
}

/* Encode n bytes of p as stream `version` from sa, decode into sb and check
 * the bytes; returns the encoded size, the stream in *enc. */
static size_t enc_dec(dre_store *sa, dre_store *sb, int version, const uint8_t *p, size_t n, struct tbuf *enc)
{
	dre_enc_opts o = { .version = version };
	return t_roundtrip(sa, sb, &o, 0, p, n, 300000, enc, NULL);
}

/* A zero-filled region (one chunk over and over: it cannot be its own
 * successor, so runs do not cover it) costs a few bytes per frame in
 * version 3 where version 2 pays a reference per chunk; the data around it
 * round-trips, cold and hot, and a version-2 stream may not use AGAIN. */
static void test_repeated_chunk(void **state)
{
	size_t zn = 16 << 20, n = zn + (3 << 20);
	uint8_t *zeros = calloc(1, zn), *p = calloc(1, n);
	assert_non_null(zeros);
	assert_non_null(p);
	t_fill_random(p, 2 << 20);                  /* data, zeros, data */
	t_fill_text(p + (2 << 20) + zn, 1 << 20);
	struct tbuf enc = { 0 };
	for (int v = 2; v <= 3; v++) {
		char da[64], db[64];
		dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
		assert_non_null(sa);
		assert_non_null(sb);
		size_t cold = enc_dec(sa, sb, v, zeros, zn, &enc);
		if (v == 3)
			assert_true(cold < 1024);
		else
			assert_true(cold > 8000); /* 1,024 chunks of 16 KiB */
		size_t mixed = enc_dec(sa, sb, v, p, n, &enc);
		size_t hot = enc_dec(sa, sb, v, p, n, &enc);
		if (v == 3) {
			assert_true(hot < 1024);
			assert_true(mixed < (2u << 20) + (1u << 20)); /* the zeros cost next to nothing */
			enc.p[4] = 2; /* AGAIN is not an op of version 2 */
			dre_dec *d = dre_dec_new(sb);
			struct tbuf dec = { 0 };
			assert_true(t_decode(d, enc.p, enc.len, enc.len, &dec) < 0);
			dre_dec_free(d);
			free(dec.p);
		}
		t_stores_done(sa, da, sb, db);
	}
	free(enc.p);
	free(zeros);
	free(p);
}

/* Copies of one block that differ in a byte (a file in several places, each
 * followed by its own header): the chunk after the one they share differs
 * from copy to copy but has the same first bytes and length, so the run
 * breaks there with the wrong candidate.  By the third pass those chunks are
 * found with no cutting (the candidate's length is tried as the cut), and
 * every pass decodes exactly. */
static void test_fork_variants(void **state)
{
	size_t bn = 64 << 10, copies = 16, n = bn * copies;
	uint8_t *p = malloc(n);
	assert_non_null(p);
	t_fill_text(p, bn);
	for (size_t i = 1; i < copies; i++)
		memcpy(p + i * bn, p, bn);
	for (size_t i = 0; i < copies; i++)
		for (size_t at = 6000; at < bn; at += 12000)
			p[i * bn + at] = (uint8_t)('A' + i);
	char da[64], db[64];
	dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
	assert_non_null(sa);
	assert_non_null(sb);
	uint64_t cut[3];
	for (int pass = 0; pass < 3; pass++) {
		dre_codec_stats cs;
		t_roundtrip(sa, sb, NULL, 0, p, n, n, NULL, &cs);
		cut[pass] = cs.cut_bytes;
	}
	assert_true(cut[1] > (64u << 10)); /* the second pass still cuts at the breaks ... */
	assert_true(cut[2] < cut[1] / 16); /* ... the third hardly (449 bytes against 405,195) */
	t_stores_done(sa, da, sb, db);
	free(p);
}

/* Write `count` messages of `size` bytes of fresh text from p, each flushed
 * as its own frame (an interactive stream); returns how far p got. */
static size_t messages(dre_enc *e, uint8_t *p, int count, size_t size, struct tbuf *enc)
{
	for (int i = 0; i < count; i++, p += size) {
		t_fill_text(p, size);
		assert_int_equal(dre_enc_write(e, p, size, tbuf_out, enc), 0);
		assert_int_equal(dre_enc_flush(e, tbuf_out, enc), 0);
	}
	return (size_t)count * size;
}

/* One stream's two ends over two fresh stores, and what crossed. */
struct ends {
	char da[64], db[64];
	dre_store *sa, *sb;
	dre_enc *e;
	dre_dec *d;
	struct tbuf enc, dec; /* the wire, the decoded bytes */
};

static void ends_open(struct ends *t, const dre_enc_opts *o)
{
	memset(t, 0, sizeof *t);
	t->sa = t_store(t->da, 0);
	t->sb = t_store(t->db, 0);
	t->e = dre_enc_new(t->sa, o);
	t->d = dre_dec_new(t->sb);
	assert_non_null(t->e);
	assert_non_null(t->d);
}

/* The decoded bytes are exactly p[0..n); then the ends and stores go. */
static void ends_check_close(struct ends *t, const uint8_t *p, size_t n)
{
	assert_int_equal(t->dec.len, n);
	assert_memory_equal(t->dec.p, p, n);
	dre_dec_free(t->d);
	dre_enc_free(t->e);
	t_stores_done(t->sa, t->da, t->sb, t->db);
	free(t->enc.p);
	free(t->dec.p);
}

/* A proxy holds an encoder per stream and direction: one that has carried
 * little keeps a small compressor (zstd at level 9 takes 21 MB at full size),
 * tiny messages go raw, and a stream that keeps going grows to the full
 * compressor and still decodes from one decoder, as one stream. */
static void test_small_streams_stay_small(void **state)
{
	struct ends t;
	size_t n = 1 << 20, pos = 0;
	uint8_t *p = malloc(n);
	dre_enc_opts o = { .lz = DRE_LZ_ZSTD, .level = 9 };
	ends_open(&t, &o);
	dre_codec_stats s;
	pos += messages(t.e, p + pos, 20, 20, &t.enc);
	dre_enc_get_stats(t.e, &s);
	assert_true(s.lz_in > 0);
	assert_int_equal(s.lz_out, s.lz_in); /* raw */
	assert_true(dre_enc_mem(t.e) < (256u << 10));
	pos += messages(t.e, p + pos, 40, 1000, &t.enc);
	assert_true(dre_enc_mem(t.e) < (2u << 20));
	pos += messages(t.e, p + pos, 200, 1000, &t.enc);
	assert_true(dre_enc_mem(t.e) > (16u << 20));
	dre_enc_get_stats(t.e, &s);
	assert_true(s.lz_out * 2 < s.lz_in);
	assert_int_equal(t_decode(t.d, t.enc.p, t.enc.len, 5000, &t.dec), 0);
	ends_check_close(&t, p, pos);
	free(p);
}

/* The level slow links get (16, btopt) holds no more memory at full size
 * than level 9 (its own tables would take 32-64 MB), and its output of text
 * is smaller. */
static void test_slow_level_memory(void **state)
{
	size_t n = 3 << 20, mem[2], out[2];
	uint8_t *p = malloc(n);
	t_fill_text(p, n);
	for (int i = 0; i < 2; i++) {
		struct ends t;
		dre_enc_opts o = { .lz = DRE_LZ_ZSTD, .level = i ? 16 : 9 };
		ends_open(&t, &o);
		assert_int_equal(t_encode(t.e, p, n, 65536, &t.enc), 0);
		mem[i] = dre_enc_mem(t.e);
		out[i] = t.enc.len;
		assert_int_equal(t_decode(t.d, t.enc.p, t.enc.len, 65536, &t.dec), 0);
		ends_check_close(&t, p, n);
	}
	print_message("level 9: %zu bytes held, %zu out; level 16: %zu held, %zu out\n", mem[0], out[0], mem[1], out[1]);
	assert_true(mem[1] <= mem[0]);
	assert_true(out[1] < out[0]);
	free(p);
}

/* frame_lit_max: new data goes in frames of about that many literal bytes,
 * repeated data still in frame_max frames; both decode exactly. */
static void test_frame_lit_max(void **state)
{
	size_t n = 1 << 20;
	uint8_t *p = malloc(2 * n);
	t_fill_text(p, n);
	memcpy(p + n, p, n);
	struct ends t;
	dre_enc_opts o = { .lz = DRE_LZ_ZSTD, .level = 16, .frame_max = 256 << 10, .frame_lit_max = 64 << 10 };
	ends_open(&t, &o);
	dre_codec_stats s0, s1;
	assert_int_equal(t_encode(t.e, p, n, 65536, &t.enc), 0);
	dre_enc_get_stats(t.e, &s0);
	assert_int_equal(t_encode(t.e, p + n, n, 65536, &t.enc), 0);
	dre_enc_get_stats(t.e, &s1);
	/* 16 frames of new data (and a flush's remainder); 4 of the repeat */
	assert_in_range(s0.frames, 16, 18);
	assert_in_range(s1.frames - s0.frames, 4, 6);
	assert_int_equal(t_decode(t.d, t.enc.p, t.enc.len, 65536, &t.dec), 0);
	ends_check_close(&t, p, 2 * n);
	free(p);
}

/* A quiet stream gives its memory back (dre_enc_rest, dre_dec_rest: an
 * encoder keeps under 8 KiB) for a dozen bytes on the wire, and goes on as one stream afterwards, with zstd
 * or lz4 and in every stream version (each has its own frame checksum). */
static void rest_version(int lz, int version)
{
	struct ends t;
	size_t n = 6 << 20, half = 3 << 20;
	uint8_t *p = malloc(n);
	t_fill_text(p, half);
	memcpy(p + (2 << 20), p + (1 << 20), 1 << 20); /* an edited copy: deltas */
	for (size_t at = (2 << 20) + 5000; at < half; at += 20000)
		p[at] ^= 0x5a;
	memcpy(p + half, p + (1 << 20), 1 << 20); /* a repeat of earlier data */
	t_fill_text(p + half + (1 << 20), n - half - (1 << 20));
	dre_enc_opts o = { .lz = lz, .level = lz == DRE_LZ_ZSTD ? 9 : 0, .retain = 1, .version = version };
	ends_open(&t, &o);
	dre_enc *e = t.e;
	dre_dec *d = t.d;
	struct tbuf *enc = &t.enc, *dec = &t.dec;
	assert_true(dre_enc_mem(e) < (8u << 10)); /* a new stream's encoder costs little before it works */
	assert_int_equal(t_encode(e, p, half, 65536, enc), 0);
	assert_int_equal(t_decode(d, enc->p, enc->len, 65536, dec), 0);
	dre_codec_stats s;
	dre_enc_get_stats(e, &s);
	assert_true(s.delta_bytes > 0);
	assert_true(dre_enc_mem(e) > (lz == DRE_LZ_ZSTD ? 16u << 20 : 80u << 10));
	assert_true(dre_dec_mem(d) > (lz == DRE_LZ_ZSTD ? 8u << 20 : 80u << 10));
	for (int i = 0; i < 2; i++) {
		size_t at = enc->len;
		assert_int_equal(dre_enc_rest(e, tbuf_out, enc), 0);
		assert_true(enc->len - at <= (i ? 0u : 32u));
		assert_true(dre_enc_mem(e) < (8u << 10));
		assert_int_equal(t_decode(d, enc->p + at, enc->len - at, 7, dec), 0);
		assert_int_equal(dre_dec_rest(d), 1);
		assert_true(dre_dec_mem(d) < (64u << 10));
	}
	size_t at = enc->len;
	assert_int_equal(t_encode(e, p + half, n - half, 65536, enc), 0);
	assert_int_equal(t_decode(d, enc->p + at, enc->len - at, 65536, dec), 0);
	assert_int_equal(dre_dec_finish(d), 0);
	ends_check_close(&t, p, n);
	free(p);
}

static void test_rest(void **state)
{
	for (int v = DRE_STREAM_VERSION_MIN; v <= DRE_STREAM_VERSION; v++) {
		rest_version(DRE_LZ_ZSTD, v);
		rest_version(DRE_LZ_LZ4, v);
	}
}

/* A decoder holding part of a frame keeps its memory when asked to rest
 * (dre_dec_rest says 0): the rest of the frame then decodes, and the next
 * rest gives it back. */
static void test_rest_mid_frame(void **state)
{
	struct ends t;
	size_t n = 1 << 20;
	uint8_t *p = malloc(n);
	t_fill_text(p, n);
	dre_enc_opts o = { .lz = DRE_LZ_LZ4, .retain = 1 };
	ends_open(&t, &o);
	assert_int_equal(t_encode(t.e, p, n, 65536, &t.enc), 0);
	size_t cut = t.enc.len - 100;
	assert_int_equal(dre_dec_write(t.d, t.enc.p, cut, tbuf_out, &t.dec), 0);
	size_t held = dre_dec_mem(t.d);
	assert_int_equal(dre_dec_rest(t.d), 0);
	assert_int_equal(dre_dec_mem(t.d), held);
	assert_int_equal(dre_dec_write(t.d, t.enc.p + cut, t.enc.len - cut, tbuf_out, &t.dec), 0);
	held = dre_dec_mem(t.d);
	assert_int_equal(dre_dec_rest(t.d), 1);
	assert_true(dre_dec_mem(t.d) + (64u << 10) < held);
	ends_check_close(&t, p, n);
	free(p);
}

/* Compress 1 MiB pieces of p[0..n) (flushed each, as frames are) with z
 * into *out, and check that a decompressor gives each piece back. */
static void lz_pieces(dre_lzc *z, const uint8_t *p, size_t n, dre_buf *out)
{
	dre_lzc *d = dre_lz_new(DRE_PLZ_ZSTD, 0, 1);
	uint8_t *back = malloc(1 << 20);
	assert_non_null(d);
	assert_non_null(back);
	for (size_t at = 0; at < n; at += 1 << 20) {
		size_t len = n - at < (1u << 20) ? n - at : 1u << 20, from = out->len;
		assert_int_equal(dre_lz_compress(z, p + at, len, out), 0);
		assert_int_equal(dre_lz_decompress(d, out->p + from, out->len - from, back, len), 0);
		assert_memory_equal(back, p + at, len);
	}
	free(back);
	dre_lz_free(d);
}

/* Encode p[0..n) into a fresh store, threaded or not; *s gets the store's
 * figures (chunks, bytes).  Returns the bytes of chunks cut ahead
 * (enc_prep.c) that the encoder used. */
static uint64_t cut_into_store(const uint8_t *p, size_t n, int threaded, dre_store_stats *s)
{
	char dir[64];
	dre_store *st = t_store(dir, 0);
	assert_non_null(st);
	dre_enc_opts o = { .threaded = threaded };
	dre_enc *e = dre_enc_new(st, &o);
	assert_non_null(e);
	struct tbuf enc = { 0 };
	assert_int_equal(dre_enc_write(e, p, n, tbuf_out, &enc), 0);
	assert_int_equal(dre_enc_end(e, tbuf_out, &enc), 0);
	uint64_t used = e->prep.used;
	dre_enc_free(e);
	dre_store_get_stats(st, s);
	free(enc.p);
	dre_store_close(st);
	t_rmstore(dir);
	return used;
}

/* A threaded encoder cuts and hashes new data in pieces on two threads
 * (enc_prep.c): the chunks it stores are exactly those one thread cutting
 * from the start finds, also where a piece starts in, or next to, a run of
 * zeros (where cuts from two starts need not meet), and the pieces' chunks
 * are joined so that the encoder uses them for nearly all of the data (a
 * chunk cut ahead is used only where the encoder's own cuts reach its
 * start: a bad join costs speed, not bytes). */
static void test_prep_cuts(void **state)
{
	(void)state;
	size_t n = 6 << 20, piece = (1 << 20) / 8;
	uint8_t *p = malloc(n);
	assert_non_null(p);
	t_fill_random(p, n);
	size_t runs[] = { 3000, 20000, 70000, 200 }, at = piece + 5000;
	for (size_t i = 0; at + 300000 < n; i++, at += 3 * piece + 7777) {
		size_t len = runs[i % 4], start = (at / piece) * piece - len / 2; /* across a piece's start */
		memset(p + start, 0, len);
	}
	dre_store_stats one, two;
	assert_int_equal(cut_into_store(p, n, 0, &one), 0);
	assert_true(cut_into_store(p, n, 1, &two) > n - n / 20);
	assert_true(one.chunks > n / 16384);
	assert_int_equal(two.chunks, one.chunks);
	assert_int_equal(two.data_bytes, one.data_bytes);
	free(p);
}

/* zstd's worker threads code the residual of a bulk (threaded) encoder: the
 * stream decodes piece by piece as before, its blocks are laid out otherwise
 * (so the workers did run) and it is at most 3 % larger.  A threaded encoder
 * names them in its coder's name, unless a link of 20 Mbit/s or less is named
 * (the output's size counts more there), and a stream's encoder never. */
static void test_lz_workers(void **state)
{
	size_t n = 6 << 20;
	uint8_t *p = malloc(n);
	assert_non_null(p);
	t_fill_text(p, n);
	dre_lzc *one = dre_lz_new(DRE_PLZ_ZSTD, 3, 0), *two = dre_lz_new(DRE_PLZ_ZSTD, 3, 0);
	assert_non_null(one);
	assert_non_null(two);
	dre_lz_set_workers(two, 2);
	assert_int_equal(dre_lz_workers(two), 2);
	dre_buf a = { 0 }, b = { 0 };
	lz_pieces(one, p, n, &a);
	lz_pieces(two, p, n, &b);
	assert_int_not_equal(a.len, b.len);
	assert_true(b.len < a.len + a.len * 3 / 100);
	dre_lz_free(one);
	dre_lz_free(two);
	dre_buf_free(&a);
	dre_buf_free(&b);
	free(p);

	char dir[64], name[64], want[64];
	dre_store *st = t_store(dir, 0);
	assert_non_null(st);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	snprintf(want, sizeof want, "zstd 3 on %ld threads", cpus > 4 ? 4 : cpus);
	dre_enc_opts bulk = { .threaded = 1 }, slow = { .threaded = 1, .link_bps = 20000000 }, stream = { 0 };
	dre_enc *e = dre_enc_new(st, &bulk);
	assert_non_null(e);
	assert_string_equal(dre_enc_lz_name(e, name, sizeof name), cpus > 1 ? want : "zstd 3");
	dre_enc_free(e);
	assert_non_null(e = dre_enc_new(st, &slow));
	assert_string_equal(dre_enc_lz_name(e, name, sizeof name), "zstd 9");
	dre_enc_free(e);
	assert_non_null(e = dre_enc_new(st, &stream));
	assert_string_equal(dre_enc_lz_name(e, name, sizeof name), "zstd 3");
	dre_enc_free(e);
	dre_store_close(st);
	t_rmstore(dir);
	(void)state;
}

/* A frame pins the oldest store file its chunks sit in from the moment it
 * first uses one, not only once the frame is built: a store that turns over
 * while the frame is still being coded (other streams storing) keeps the
 * chunk, and the built frame takes that pin over; a frame abandoned (its
 * next one begun) or an encoder freed lets go of it. */
static void test_pin_while_building(void **state)
{
	char da[64];
	uint64_t limit = 4 << 20;
	dre_store *st = t_store(da, limit);
	dre_fp *fp = dre_fp_new();
	uint8_t p[4096], h[32];
	dre_ent x, got;
	t_fill_random(p, sizeof p);
	assert_int_equal(dre_fp_sha256(fp, p, sizeof p, h), 0);
	assert_true(dre_store_put_after(st, h, p, sizeof p, 0, &x) >= 0);
	uint64_t tx = dre_fp_tag(h);
	dre_enc_opts o = { .retain = 1 };
	dre_enc *e = dre_enc_new(st, &o);
	assert_non_null(e);
	dre_enc_retain_begin(e);
	dre_enc_retain_file(e, DRE_PIN_NONE); /* a new chunk: the newest file */
	dre_enc_retain_file(e, x.file);       /* a hit in the oldest */
	size_t n = 1 << 20;
	uint8_t *q = malloc(n);
	assert_non_null(q);
	dre_enc *other = dre_enc_new(st, NULL);
	struct tbuf sink = { 0 };
	for (int i = 0; i < 12; i++) { /* three times the store's size */
		t_fill_random(q, n);
		assert_int_equal(dre_enc_write(other, q, n, tbuf_out, &sink), 0);
		sink.len = 0;
	}
	assert_int_equal(dre_enc_flush(other, tbuf_out, &sink), 0);
	dre_store_stats s;
	dre_store_get_stats(st, &s);
	assert_int_equal(s.pins, 1);
	assert_true(s.disk_bytes > 2 * limit);
	assert_true(dre_store_find(st, tx, &got) && got.file == x.file);
	assert_int_equal(dre_enc_retain_frame(e), 0); /* the frame keeps the pin */
	dre_enc_retain_begin(e);
	dre_store_get_stats(st, &s);
	assert_int_equal(s.pins, 1);
	dre_enc_retain_file(e, x.file); /* a frame never kept: begun again */
	dre_enc_retain_begin(e);
	dre_enc_retain_file(e, x.file);
	dre_store_get_stats(st, &s);
	assert_int_equal(s.pins, 2);
	dre_enc_free(e);
	dre_store_get_stats(st, &s);
	assert_int_equal(s.pins, 0);
	assert_true(s.disk_bytes <= limit);
	assert_false(dre_store_find(st, tx, &got));
	dre_enc_free(other);
	dre_fp_free(fp);
	free(sink.p);
	free(q);
	dre_store_close(st);
	t_rmstore(da);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_caller_buffer_reuse),
		cmocka_unit_test(test_space_in_place),
		cmocka_unit_test(test_write_frames),
		cmocka_unit_test(test_write_frames_overlap),
		cmocka_unit_test(test_repeated_chunk),
		cmocka_unit_test(test_fork_variants),
		cmocka_unit_test(test_small_streams_stay_small),
		cmocka_unit_test(test_slow_level_memory),
		cmocka_unit_test(test_frame_lit_max),
		cmocka_unit_test(test_rest),
		cmocka_unit_test(test_rest_mid_frame),
		cmocka_unit_test(test_lz_workers),
		cmocka_unit_test(test_prep_cuts),
		cmocka_unit_test(test_pin_while_building),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
