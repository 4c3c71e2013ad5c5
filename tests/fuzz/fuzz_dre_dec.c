/* fuzz_dre_dec.c: libFuzzer harness for the DRE decoder: arbitrary bytes, fed
 * in two pieces, against a store that holds some chunks (so references can
 * resolve), plain or threaded, with or without an ask path.  Nothing may
 * crash, hang or read out of bounds, and whatever the decoder outputs must
 * have passed a frame checksum. */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dre.h"

static dre_store *st;

static int sink(void *arg, const void *p, size_t n)
{
	size_t *total = arg;
	*total += n;
	return 0;
}

static char dir[] = "/tmp/wanopt-fuzz-XXXXXX";

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* At exit (libFuzzer exits when its time is up): close the store and
 * remove its directory. */
static void teardown(void)
{
	dre_store_close(st);
	st = NULL;
	nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* Make a store in a temporary directory and teach it a little data. */
static void setup(void)
{
	char err[256];
	if (!mkdtemp(dir))
		abort();
	atexit(teardown);
	dre_store_opts o = { .size_limit = 64 << 20, .create = 1 };
	st = dre_store_open(dir, &o, err, sizeof err);
	if (!st)
		abort();
	uint8_t *buf = malloc(1 << 20);
	for (size_t i = 0; i < 1 << 20; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	dre_enc *e = dre_enc_new(st, NULL);
	size_t total = 0;
	dre_enc_write(e, buf, 1 << 20, sink, &total);
	dre_enc_flush(e, sink, &total);
	dre_enc_free(e);
	free(buf);
}

/* The learns are in the input already (or never come). */
static void no_ask(void *arg, uint64_t seq)
{
	(void)arg;
	(void)seq;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!st)
		setup();
	dre_dec *d = dre_dec_new(st);
	size_t total = 0, cut = size ? data[0] % (size + 1) : 0;
	/* the last byte's low bit: threaded (frames decompressed ahead, checked
	 * and stored on helper threads); its second bit: with an ask path, so a
	 * frame that misses waits for a LEARN frame later in the input (light
	 * learns that name chunks, full ones, a second ask) */
	dre_dec_set_threaded(d, size && (data[size - 1] & 1));
	if (size && (data[size - 1] & 2))
		dre_dec_set_ask(d, no_ask, NULL);
	if (dre_dec_write(d, data, cut, sink, &total) == 0)
		dre_dec_write(d, data + cut, size - cut, sink, &total);
	dre_dec_finish(d);
	dre_dec_free(d);
	return 0;
}
