/* test_dre_dec.c: the threaded decoder (frames decompressed ahead on one
 * thread, checked, output and stored on another) against the plain one, and
 * output handed over in buffers (dre_dec_set_take). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "../dre/dre_int.h"
#include "dre_util.h"

/* Text with repeats, so frames hold literals, references and runs. */
static uint8_t *make_input(size_t n)
{
	uint8_t *p = malloc(n);
	size_t third = n / 3;
	t_fill_text(p, third);
	memcpy(p + third, p, third);
	t_fill_text(p + 2 * third, n - 2 * third);
	return p;
}

/* Two fresh stores; make_input(n) encoded `times` times over with 16 KiB
 * frames into enc by e (store A); d decodes into store B (dec). */
struct dec_fix {
	char da[64], db[64];
	dre_store *sa, *sb;
	uint8_t *p;
	size_t n;
	struct tbuf enc, dec;
	dre_enc *e;
	dre_dec *d;
};

static void fix_setup(struct dec_fix *f, size_t n, int times)
{
	memset(f, 0, sizeof *f);
	f->sa = t_store(f->da, 0);
	f->sb = t_store(f->db, 0);
	assert_non_null(f->sa);
	assert_non_null(f->sb);
	f->n = n;
	f->p = make_input(n);
	dre_enc_opts o = { .frame_max = 16 << 10 };
	f->e = dre_enc_new(f->sa, &o);
	assert_non_null(f->e);
	for (int i = 0; i < times; i++)
		assert_int_equal(t_encode(f->e, f->p, n, n, &f->enc), 0);
	f->d = dre_dec_new(f->sb);
	assert_non_null(f->d);
}

/* Store B is sound; everything freed and removed. */
static void fix_done(struct dec_fix *f)
{
	char err[256];
	assert_int_equal(dre_store_check(f->sb, err, sizeof err), 0);
	dre_enc_free(f->e);
	dre_dec_free(f->d);
	free(f->enc.p);
	free(f->dec.p);
	free(f->p);
	t_stores_done(f->sa, f->da, f->sb, f->db);
}

/* Decode c[0..len) into a fresh store, fed in pieces of up to `piece` bytes;
 * the first error (or 0), and the bytes decoded in *dec. */
static int decode_fresh(const uint8_t *c, size_t len, int threaded, size_t piece, struct tbuf *dec)
{
	char dir[64];
	dre_store *st = t_store(dir, 0);
	assert_non_null(st);
	dre_dec *d = dre_dec_new(st);
	assert_int_equal(dre_dec_set_threaded(d, threaded), 0);
	int rc = t_decode(d, c, len, piece, dec);
	int frc = dre_dec_finish(d); /* no output after this */
	dre_dec_free(d);
	dre_store_close(st);
	t_rmstore(dir);
	return rc ? rc : frc;
}

/* Damaged or cut streams: the threaded decoder fails where the plain one
 * fails and hands out exactly the same bytes before it. */
static void test_threaded_agrees_on_damage(void **state)
{
	char da[64];
	dre_store *sa = t_store(da, 0);
	size_t n = 900000;
	uint8_t *p = make_input(n);
	struct tbuf enc = { 0 };
	dre_enc_opts o = { .frame_max = 16 << 10 };
	dre_enc *e = dre_enc_new(sa, &o);
	assert_int_equal(t_encode(e, p, n, n, &enc), 0);
	dre_enc_free(e);
	int errors = 0;
	for (int trial = 0; trial < 120; trial++) {
		uint8_t *c = malloc(enc.len);
		memcpy(c, enc.p, enc.len);
		size_t len = enc.len;
		if (trial % 3 == 0)
			len = t_rand() % enc.len; /* cut */
		if (trial % 3 != 1 && len) /* cut to nothing: no byte to flip */
			c[t_rand() % len] ^= (uint8_t)(1 + t_rand() % 255);
		size_t piece = trial % 2 ? 1 + t_rand() % 4096 : 1 + t_rand() % (256 << 10);
		struct tbuf plain = { 0 }, thr = { 0 };
		int prc = decode_fresh(c, len, 0, piece, &plain);
		int trc = decode_fresh(c, len, 1, piece, &thr);
		assert_int_equal(prc != 0, trc != 0);
		assert_int_equal(thr.len, plain.len);
		assert_true(thr.len == 0 || memcmp(thr.p, p, thr.len) == 0);
		if (prc)
			errors++;
		free(plain.p);
		free(thr.p);
		free(c);
	}
	assert_true(errors > 70);
	free(p);
	free(enc.p);
	dre_store_close(sa);
	t_rmstore(da);
}

/* END with the threaded decoder: reported once applied, and data after it
 * refused, as without threads. */
static void test_threaded_end_frame(void **state)
{
	char da[64], db[64];
	dre_store *sa = t_store(da, 0), *sb = t_store(db, 0);
	size_t n = 400000;
	uint8_t *p = make_input(n);
	struct tbuf enc = { 0 }, dec = { 0 };
	dre_enc_opts o = { .frame_max = 32 << 10 };
	dre_enc *e = dre_enc_new(sa, &o);
	assert_int_equal(dre_enc_write(e, p, n, tbuf_out, &enc), 0);
	assert_int_equal(dre_enc_end(e, tbuf_out, &enc), 0);
	size_t end_at = enc.len;
	dre_dec *d = dre_dec_new(sb);
	assert_int_equal(dre_dec_set_threaded(d, 1), 0);
	assert_int_equal(dre_dec_write(d, enc.p, end_at - 5, tbuf_out, &dec), 0);
	assert_false(dre_dec_ended(d));
	assert_int_equal(dre_dec_write(d, enc.p + end_at - 5, 5, tbuf_out, &dec), 0);
	assert_true(dre_dec_ended(d));
	assert_int_equal(dre_dec_finish(d), 0);
	assert_int_equal(dec.len, n);
	assert_memory_equal(dec.p, p, n);
	assert_int_equal(t_data_after_end(d, sa, p, 1000, &dec), DRE_ECORRUPT);
	assert_int_equal(dre_dec_finish(d), DRE_ECORRUPT);
	assert_int_equal(dec.len, n);
	dre_enc_free(e);
	dre_dec_free(d);
	free(enc.p);
	free(dec.p);
	free(p);
	t_stores_done(sa, da, sb, db);
}

/* Threads switched on and off between writes, frames in flight each time. */
static void test_threaded_toggle(void **state)
{
	struct dec_fix f;
	fix_setup(&f, 2 << 20, 1);
	for (size_t pos = 0, k = 0; pos < f.enc.len; pos += k) {
		k = 1 + t_rand() % (128 << 10);
		if (k > f.enc.len - pos)
			k = f.enc.len - pos;
		assert_int_equal(dre_dec_set_threaded(f.d, (int)(t_rand() % 2)), 0);
		assert_int_equal(dre_dec_write(f.d, f.enc.p + pos, k, tbuf_out, &f.dec), 0);
	}
	assert_int_equal(dre_dec_finish(f.d), 0);
	assert_int_equal(f.dec.len, f.n);
	assert_memory_equal(f.dec.p, f.p, f.n);
	fix_done(&f);
}

/* Input written in place (dre_dec_space, dre_dec_commit), in pieces of
 * random size, threaded as the command line runs it, then not: the same
 * bytes as dre_dec_write gives; a commit beyond the room is refused, and the
 * decoder stays failed. */
static void test_space_commit(void **state)
{
	for (int threaded = 1; threaded >= 0; threaded--) {
		struct dec_fix f;
		fix_setup(&f, 2 << 20, 2);
		assert_int_equal(dre_dec_set_threaded(f.d, threaded), 0);
		for (size_t pos = 0, k = 0; pos < f.enc.len; pos += k) {
			size_t room = 0, min = 1 + t_rand() % (256 << 10);
			uint8_t *dst = dre_dec_space(f.d, min, &room);
			assert_non_null(dst);
			assert_true(room >= min);
			k = 1 + t_rand() % room;
			if (k > f.enc.len - pos)
				k = f.enc.len - pos;
			memcpy(dst, f.enc.p + pos, k);
			assert_int_equal(dre_dec_commit(f.d, k, tbuf_out, &f.dec), 0);
		}
		assert_int_equal(dre_dec_finish(f.d), 0);
		assert_int_equal(f.dec.len, 2 * f.n);
		assert_memory_equal(f.dec.p, f.p, f.n);
		assert_memory_equal(f.dec.p + f.n, f.p, f.n);
		size_t room = 0;
		assert_non_null(dre_dec_space(f.d, 16, &room));
		assert_int_equal(dre_dec_commit(f.d, room + 1, tbuf_out, &f.dec), DRE_ESTATE);
		assert_int_equal(dre_dec_write(f.d, f.enc.p, 16, tbuf_out, &f.dec), DRE_ESTATE);
		fix_done(&f);
	}
}

static unsigned takes;

/* A take callback: keeps the bytes, frees the buffer (ASan sees any buffer
 * handed over twice or never), asks for a pause every fifth frame. */
static int take_out(void *arg, void *buf, size_t len)
{
	tbuf_out(arg, buf, len);
	free(buf);
	return ++takes % 5 == 0;
}

/* Output handed over (dre_dec_set_take), with pauses: the same bytes in the
 * same order, every buffer taken once, the store sound. */
static void test_take_hands_buffers_over(void **state)
{
	struct dec_fix f;
	fix_setup(&f, 2 << 20, 2); /* twice: references and runs */
	dre_dec_set_take(f.d, take_out);
	takes = 0;
	for (size_t pos = 0, k = 0; pos < f.enc.len; pos += k) {
		k = 1 + t_rand() % (64 << 10);
		if (k > f.enc.len - pos)
			k = f.enc.len - pos;
		assert_int_equal(dre_dec_write(f.d, f.enc.p + pos, k, tbuf_out, &f.dec), 0);
		while (dre_dec_paused(f.d))
			assert_int_equal(dre_dec_write(f.d, NULL, 0, tbuf_out, &f.dec), 0);
	}
	assert_int_equal(dre_dec_finish(f.d), 0);
	assert_true(takes > 100);
	assert_int_equal(f.dec.len, 2 * f.n);
	assert_memory_equal(f.dec.p, f.p, f.n);
	assert_memory_equal(f.dec.p + f.n, f.p, f.n);
	fix_done(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threaded_agrees_on_damage),
		cmocka_unit_test(test_threaded_end_frame),
		cmocka_unit_test(test_threaded_toggle),
		cmocka_unit_test(test_space_commit),
		cmocka_unit_test(test_take_hands_buffers_over),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
