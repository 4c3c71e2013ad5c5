/* fuzz_frame_mux.c: the stream multiplexer fed arbitrary frames after a valid
 * HELLO, with stream owners that write, consume, close, reset and free in
 * patterns taken from the input.  Finds state-machine bugs the codec fuzzer
 * cannot see (use after free, credit accounting, double frees); the mux must
 * either accept the input or fail with a reason, never crash or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "../../proxy/tun/frame.h"
#include "../../proxy/tun/mux.h"

#define MAX_OWNED 64

static tun_stream *owned[MAX_OWNED];
static size_t nowned;
static const uint8_t *ctl_bytes;
static size_t ctl_len, ctl_pos;

/* Next behaviour byte from the input's first part (cycles). */
static uint8_t pick(void)
{
	return ctl_len ? ctl_bytes[ctl_pos++ % ctl_len] : 0;
}

/* Remember a handle the harness must free; free it at once if full. */
static void own(tun_stream *s)
{
	if (nowned < MAX_OWNED)
		owned[nowned++] = s;
	else
		tun_stream_free(s);
}

/* Free an owned handle (exactly once). */
static void disown(tun_stream *s)
{
	for (size_t i = 0; i < nowned; i++) {
		if (owned[i] == s) {
			owned[i] = owned[--nowned];
			tun_stream_free(s);
			return;
		}
	}
}

static void f_data(tun_stream *s, void *arg, const void *buf, size_t len)
{
	(void)arg;
	switch (pick() % 6) {
	case 0: tun_stream_consumed(s, len); break;
	case 1: tun_stream_write(s, buf, len); tun_stream_consumed(s, len); break;
	case 2: tun_stream_close(s); break;
	case 3: tun_stream_ack(s, len); break;
	case 4: disown(s); break;
	default: break;   /* hold: no credit back */
	}
}

static void f_close(tun_stream *s, void *arg)
{
	(void)arg;
	if (pick() & 1)
		tun_stream_close(s);
	else
		disown(s);
}

static void f_reset(tun_stream *s, void *arg, int code)
{
	(void)arg; (void)code;
	disown(s);
}

static void f_writable(tun_stream *s, void *arg)
{
	static const uint8_t junk[3000];

	(void)arg;
	tun_stream_write(s, junk, pick() * 10u);
}

static void f_ask(tun_stream *s, void *arg, uint64_t seq)
{
	(void)arg;
	tun_stream_ack(s, seq);
}

static const tun_stream_cbs fcbs = {
	.on_data = f_data, .on_close = f_close, .on_reset = f_reset,
	.on_writable = f_writable, .on_ask = f_ask,
};

static void o_kick(void *arg) { (void)arg; }
static int o_hello(void *arg, const tun_hello *h, char *err, size_t errlen)
{
	(void)arg; (void)h; (void)err; (void)errlen;
	return TUN_OK;
}
static void o_stream(void *arg, tun_stream *s, const tun_open_info *o)
{
	(void)arg; (void)o;
	switch (pick() % 4) {
	case 0: tun_stream_reset(s, PROTO_RST_NOT_ALLOWED); own(s); break;
	case 1: tun_stream_free(s); break;
	default: tun_stream_set_cbs(s, &fcbs, NULL); own(s); break;
	}
}
static const mux_ops fops = { .kick = o_kick, .on_hello = o_hello, .on_stream = o_stream };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	mux_cfg cfg = { .odd = 1, .window = PROTO_MIN_WINDOW, .max_streams = 8,
			.sendq_hiwat = 4096, .sendq_max = 65536, .quantum = 1000 };
	tun_frame hello = { .type = PROTO_HELLO };
	tun_open_info oi = { .policy = 0 };
	static uint8_t buf[TUN_FRAME_MAX];
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
	uint32_t code;
	char err[256];
	int e, n;

	if (size < 8)
		goto done;
	ctl_bytes = data;
	ctl_len = 8;
	ctl_pos = 0;
	data += 8;
	size -= 8;
	nowned = 0;
	mux *m = mux_new(&cfg, &fops, NULL);
	hello.u.hello = (tun_hello){ .vmin = 1, .vmax = 1, .window = PROTO_MIN_WINDOW,
				     .max_streams = 4, .role = PROTO_ROLE_CORE, .name = "f" };
	n = tun_frame_encode(&hello, buf, sizeof(buf));
	evbuffer_add(in, buf, (size_t)n);
	mux_input(m, in, &code, err, sizeof(err));
	tun_target_parse(&oi.target, "10.0.0.1", 80);
	for (int i = 0; i < 3; i++) {
		tun_stream *s = mux_open(m, &oi, &fcbs, NULL, &e);
		if (s) {
			own(s);
			tun_stream_write(s, data, size < 5000 ? size : 5000);
		}
	}
	/* feed in pieces, draining output between them */
	for (size_t off = 0; off < size; ) {
		size_t step = 1 + pick() * 8u;
		if (step > size - off)
			step = size - off;
		evbuffer_add(in, data + off, step);
		off += step;
		if (mux_input(m, in, &code, err, sizeof(err)) != TUN_OK)
			break;
		mux_output(m, out, pick() * 64u);
		evbuffer_drain(out, evbuffer_get_length(out));
	}
	mux_output(m, out, SIZE_MAX);
	mux_free(m);
	while (nowned)
		tun_stream_free(owned[--nowned]);
done:
	evbuffer_free(in);
	evbuffer_free(out);
	return 0;
}
