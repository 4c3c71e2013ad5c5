/* fuzz_frame.c: the tunnel frame decoder on arbitrary bytes.  Properties:
 * (1) feeding the input whole or in pieces (split sizes taken from the input)
 * gives the same frames and the same verdict; (2) every decoded frame
 * re-encodes to exactly the bytes it was decoded from and decodes again to
 * the same frame. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../proxy/tun/frame.h"

#define MAX_FRAMES 64

struct run {
	int verdict;                 /* 0 more wanted, TUN_EPROTO */
	size_t nframes;
	size_t end[MAX_FRAMES];      /* input offset after each frame */
	uint8_t type[MAX_FRAMES];
	uint32_t sid[MAX_FRAMES];
};

static tun_fdec dec, dec2;

/* Check that f (decoded from raw[0..n)) re-encodes to raw and back to f. */
static void check_roundtrip(const tun_frame *f, const uint8_t *raw, size_t n)
{
	static uint8_t buf[TUN_FRAME_MAX];
	tun_frame g;
	size_t used;
	int len = tun_frame_encode(f, buf, sizeof(buf));

	if (len < 0 || (size_t)len != n || memcmp(buf, raw, n) != 0) {
		/* HELLO may carry ignored extension bytes: re-encoding drops them. */
		if (f->type != PROTO_HELLO || len < 0 || (size_t)len > n)
			abort();
	}
	tun_fdec_init(&dec2);
	if (tun_fdec_feed(&dec2, buf, (size_t)len, &used, &g) != 1 || used != (size_t)len)
		abort();
	if (g.type != f->type || g.sid != f->sid || g.len != (f->type == PROTO_HELLO ? g.len : f->len))
		abort();
	if (f->type == PROTO_DATA ? memcmp(g.payload, f->payload, f->len) != 0
				  : memcmp(&g.u, &f->u, sizeof(g.u)) != 0)
		abort();
}

/* Decode data in pieces of the given step (0: whole), recording frames. */
static void run(const uint8_t *data, size_t size, size_t step, struct run *r)
{
	size_t off = 0, frame_start = 0, used;
	tun_frame f;

	memset(r, 0, sizeof(*r));
	tun_fdec_init(&dec);
	while (off < size) {
		size_t n = step ? step : size - off;
		if (n > size - off)
			n = size - off;
		int rc = tun_fdec_feed(&dec, data + off, n, &used, &f);
		if (used > n)
			abort();
		off += used;
		if (rc < 0) {
			r->verdict = rc;
			return;
		}
		if (rc == 1) {
			if (step == 0)
				check_roundtrip(&f, data + frame_start, off - frame_start);
			if (r->nframes < MAX_FRAMES) {
				r->end[r->nframes] = off;
				r->type[r->nframes] = f.type;
				r->sid[r->nframes] = f.sid;
			}
			r->nframes++;
			frame_start = off;
		} else if (used != n) {
			abort();   /* 0 means all bytes were taken */
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run whole, split;
	size_t step;

	if (size < 1)
		return 0;
	step = (size_t)(data[0] % 17) + 1;
	data++;
	size--;
	run(data, size, 0, &whole);
	run(data, size, step, &split);
	if (whole.verdict != split.verdict || whole.nframes != split.nframes)
		abort();
	for (size_t i = 0; i < whole.nframes && i < MAX_FRAMES; i++)
		if (whole.end[i] != split.end[i] || whole.type[i] != split.type[i] ||
		    whole.sid[i] != split.sid[i])
			abort();
	return 0;
}
