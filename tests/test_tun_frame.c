/* test_tun_frame.c: frame codec round trips (table-driven, fed whole and in
 * every split), and malformed frames rejected with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../proxy/tun/frame.h"

static uint8_t data_bytes[PROTO_MAX_PAYLOAD];

/* Build the table of valid frames. */
static size_t valid_frames(tun_frame *t)
{
	size_t n = 0;

	memset(t, 0, sizeof(*t) * 20);
	t[n].type = PROTO_HELLO;
	t[n].u.hello = (tun_hello){ .vmin = 1, .vmax = 3, .caps = 0xf | PROTO_CAP_LINK, .window = 1 << 20,
				    .max_streams = 100, .role = PROTO_ROLE_EDGE,
				    .store_id = { 1, 2, 3 }, .name = "branch-1",
				    .link_bps = 1544000, .link_tx_bps = 768000, .link_rtt_us = 40000 };
	n++;
	t[n].type = PROTO_OPEN; t[n].sid = 1;
	tun_target_parse(&t[n].u.open.target, "10.1.2.3", 445);
	t[n].u.open.policy = PROTO_POLICY_LZ; t[n].u.open.flags = PROTO_OPEN_F_TRANSPARENT;
	n++;
	t[n].type = PROTO_OPEN; t[n].sid = 3;
	tun_target_parse(&t[n].u.open.target, "2001:db8::1", 443);
	t[n].u.open.flags = PROTO_OPEN_F_DSCP; t[n].u.open.dscp = 46; /* ef */
	n++;
	t[n].type = PROTO_OPEN; t[n].sid = 9;
	tun_target_parse(&t[n].u.open.target, "backup.example.com", 873);
	t[n].u.open.flags = PROTO_OPEN_F_DSCP | PROTO_OPEN_F_TRANSPARENT; /* class 0: unmarked */
	n++;
	t[n].type = PROTO_OPEN; t[n].sid = 0x7ffffffd;
	tun_target_parse(&t[n].u.open.target, "files.example.com", 21);
	t[n].u.open.policy = PROTO_POLICY_PASSTHROUGH;
	n++;
	t[n].type = PROTO_DATA; t[n].sid = 2; t[n].len = 1; t[n].payload = data_bytes; n++;
	t[n].type = PROTO_DATA; t[n].sid = 2; t[n].len = PROTO_MAX_PAYLOAD; t[n].payload = data_bytes; n++;
	t[n].type = PROTO_CLOSE; t[n].sid = 5; n++;
	t[n].type = PROTO_RESET; t[n].sid = 5; t[n].u.reset = PROTO_RST_CONNECT; n++;
	t[n].type = PROTO_CREDIT; t[n].sid = 5; t[n].u.credit = PROTO_MAX_WINDOW; n++;
	t[n].type = PROTO_ASK; t[n].sid = 7; t[n].u.seq = 0x0102030405060708ull; n++;
	t[n].type = PROTO_ACK; t[n].sid = 7; t[n].u.ack.seq = 42; t[n].u.ack.credit = 0; n++;
	t[n].type = PROTO_PING; t[n].u.ping = ~0ull; n++;
	t[n].type = PROTO_PONG; t[n].u.ping = 1; n++;
	t[n].type = PROTO_LINK; t[n].u.link.bps = 20000000; t[n].u.link.tx_bps = 2000000;
	t[n].u.link.rtt_us = 300000; n++;
	t[n].type = PROTO_ALLOW; t[n].len = 4; t[n].payload = data_bytes; n++;
	t[n].type = PROTO_GOAWAY; t[n].u.goaway.last_sid = 9; t[n].u.goaway.code = PROTO_GOAWAY_VERSION;
	strcpy(t[n].u.goaway.text, "no common version"); n++;
	return n;
}

/* Compare the decoded form of two frames (payload by content). */
static void assert_frame_eq(const tun_frame *a, const tun_frame *b)
{
	assert_int_equal(a->type, b->type);
	assert_int_equal(a->sid, b->sid);
	if (a->type == PROTO_DATA || a->type == PROTO_ALLOW) {
		assert_int_equal(a->len, b->len);
		assert_memory_equal(a->payload, b->payload, a->len);
	} else {
		assert_memory_equal(&a->u, &b->u, sizeof(a->u));
	}
}

static void test_roundtrip_whole_and_split(void **state)
{
	static tun_frame t[20];
	static uint8_t buf[TUN_FRAME_MAX];
	static tun_fdec d;
	tun_frame out;
	size_t n = valid_frames(t), used;

	(void)state;
	for (size_t i = 0; i < sizeof(data_bytes); i++)
		data_bytes[i] = (uint8_t)(i * 7 + 1);
	for (size_t i = 0; i < n; i++) {
		int len = tun_frame_encode(&t[i], buf, sizeof(buf));
		assert_true(len >= PROTO_HDR_LEN);
		/* every split point: first part, then the rest */
		for (int cut = 0; cut <= len; cut += (len > 300 ? 97 : 1)) {
			tun_fdec_init(&d);
			int rc = tun_fdec_feed(&d, buf, (size_t)cut, &used, &out);
			if (cut < len) {
				assert_int_equal(rc, 0);
				assert_int_equal(used, cut);
				assert_int_equal(tun_fdec_want(&d) + (size_t)cut >= (size_t)(cut < 8 ? 8 : len), 1);
				rc = tun_fdec_feed(&d, buf + cut, (size_t)(len - cut), &used, &out);
				assert_int_equal(used, len - cut);
			}
			assert_int_equal(rc, 1);
			assert_frame_eq(&t[i], &out);
		}
	}
}

static void test_byte_by_byte_stream(void **state)
{
	static tun_frame t[20];
	static uint8_t stream[16 * TUN_FRAME_MAX];
	static tun_fdec d;
	size_t n = valid_frames(t), total = 0, got = 0, used;
	tun_frame out;

	(void)state;
	for (size_t i = 0; i < n; i++)
		total += (size_t)tun_frame_encode(&t[i], stream + total, sizeof(stream) - total);
	tun_fdec_init(&d);
	for (size_t off = 0; off < total; off++) {
		int rc = tun_fdec_feed(&d, stream + off, 1, &used, &out);
		assert_true(rc == 0 || rc == 1);
		assert_int_equal(used, 1);
		if (rc == 1) {
			assert_int_equal(out.type, t[got].type);
			assert_int_equal(out.sid, t[got].sid);
			got++;
		}
	}
	assert_int_equal(got, n);
	assert_int_equal(tun_fdec_want(&d), PROTO_HDR_LEN);
}

struct bad {
	const char *hex;      /* header + payload in hex */
	const char *reason;   /* substring of the error */
};

static const struct bad bad_frames[] = {
	{ "0000000000000000", "unknown frame type 0" },
	{ "0e00000000000000", "unknown frame type 14" },
	{ "0d00000100000000" "00", "ALLOW: bad length 1" },
	{ "0d00000200000001" "0000", "frame type 13 on stream 1" },
	{ "0c00001300000000" "00000000000000000000000000000000000000", "LINK: payload is 19 bytes" },
	{ "0c00001400000001" "0000000000000000000000000000000000000000", "frame type 12 on stream 1" },
	{ "0c00001400000000" "ffffffffffffffff000000000000000000000000", "LINK: link rate" },
	{ "0c00001400000000" "0000000000000000ffffffffffffffff00000000", "LINK: link rate" },
	{ "0c00001400000000" "00000000000000000000000000000000ffffffff", "LINK: link round trip" },
	{ "ff00000000000000", "unknown frame type 255" },
	{ "0301000100000001" "00", "unknown flags" },
	{ "0300400100000001", "over limit" },
	{ "0300000000000001", "DATA: empty" },
	{ "0300000100000000" "00", "frame type 3 on stream 0" },
	{ "0900000800000001" "0000000000000000", "frame type 9 on stream 1" },
	{ "0400000100000001" "00", "CLOSE: payload is 1" },
	{ "0500000400000001" "00000007", "RESET: bad code 7" },
	{ "0500000400000001" "00000063", "RESET: bad code" },
	{ "0600000400000001" "00000000", "CREDIT: bad increment 0" },
	{ "0600000400000001" "04000001", "CREDIT: bad increment" },
	{ "0700000700000001" "00000000000000", "ASK: payload is 7" },
	{ "0800000c00000001" "0000000000000001ffffffff", "ACK: bad credit" },
	{ "0b00000800000000" "0000000000000009", "GOAWAY: bad code" },
	{ "0200000600000001" "000000500401", "OPEN: payload too short" },
	{ "0200000a00000001" "0400005004040a000001", "OPEN: bad policy" },
	{ "0200000a00000001" "0008005004040a000001", "OPEN: unknown flags" },
	{ "0200000a00000001" "0004005004040a000001", "and a class does not match" },
	{ "0200000b00000001" "0000005004040a00000100", "does not match" },
	{ "0200000b00000001" "0004005004040a00000140", "OPEN: bad DSCP class 64" },
	{ "0200000a00000001" "0000000004040a000001", "OPEN: port 0" },
	{ "0200000a00000001" "0000005004050a000001", "does not match" },
	{ "0200000a00000001" "0000005006040a000001", "bad address length" },
	{ "0200000a00000001" "0000005009040a000001", "bad address type" },
	{ "0200000800000001" "000000500102612f", "bad host name" },
	{ "0100000800000000" "574f505300010001", "bad magic" },
	{ "0100000800000000" "574f505400020001", "bad version range" },
	{ "0100000800000000" "574f505400010001", "too short" },
};

/* Decode hex into buf; returns byte count. */
static size_t unhex(const char *h, uint8_t *buf)
{
	size_t n = 0;

	for (; h[0] && h[1]; h += 2) {
		unsigned v;
		sscanf(h, "%2x", &v);
		buf[n++] = (uint8_t)v;
	}
	return n;
}

static void test_malformed(void **state)
{
	static tun_fdec d;
	uint8_t buf[256];
	tun_frame out;
	size_t used;

	(void)state;
	for (size_t i = 0; i < sizeof(bad_frames) / sizeof(bad_frames[0]); i++) {
		size_t n = unhex(bad_frames[i].hex, buf);
		tun_fdec_init(&d);
		int rc = tun_fdec_feed(&d, buf, n, &used, &out);
		if (rc != TUN_EPROTO || !strstr(tun_fdec_error(&d), bad_frames[i].reason))
			fail_msg("case %zu (%s): rc %d, error '%s'", i, bad_frames[i].hex, rc,
				 tun_fdec_error(&d));
		/* sticky */
		assert_int_equal(tun_fdec_feed(&d, buf, n, &used, &out), TUN_EPROTO);
	}
}

static void test_hello_extension_and_encode_checks(void **state)
{
	uint8_t buf[TUN_FRAME_MAX];
	tun_frame f, out;
	static tun_fdec d;
	size_t used;
	int len;

	(void)state;
	memset(&f, 0, sizeof(f));
	f.type = PROTO_HELLO;
	f.u.hello = (tun_hello){ .vmin = 1, .vmax = 1, .caps = 1, .window = 65536,
				 .max_streams = 10, .role = PROTO_ROLE_CORE, .name = "core" };
	len = tun_frame_encode(&f, buf, sizeof(buf));
	assert_true(len > 0);
	/* a later version's extra fields after the name are ignored */
	memcpy(buf + len, "\x01\x02\x03", 3);
	buf[3] = (uint8_t)(len - 8 + 3);
	tun_fdec_init(&d);
	assert_int_equal(tun_fdec_feed(&d, buf, (size_t)len + 3, &used, &out), 1);
	assert_string_equal(out.u.hello.name, "core");
	assert_true(out.u.hello.link_bps == 0 && out.u.hello.link_rtt_us == 0); /* no PROTO_CAP_LINK */
	/* with PROTO_CAP_LINK: the link fields follow the name, then what a
	 * later version appends is ignored */
	f.u.hello.caps = 1 | PROTO_CAP_LINK;
	f.u.hello.link_bps = 20000000;
	f.u.hello.link_tx_bps = 2000000;
	f.u.hello.link_rtt_us = 300000;
	len = tun_frame_encode(&f, buf, sizeof(buf));
	assert_int_equal(len, 8 + PROTO_HELLO_NAME + 4 + PROTO_HELLO_LINK_LEN);
	memcpy(buf + len, "\x01\x02", 2);
	buf[3] = (uint8_t)(len - 8 + 2);
	tun_fdec_init(&d);
	assert_int_equal(tun_fdec_feed(&d, buf, (size_t)len + 2, &used, &out), 1);
	assert_true(out.u.hello.link_bps == 20000000 && out.u.hello.link_tx_bps == 2000000 &&
		    out.u.hello.link_rtt_us == 300000);
	/* the cap without the fields (cut short), or out of range: refused */
	buf[3] = (uint8_t)(len - 8 - 1);
	tun_fdec_init(&d);
	assert_int_equal(tun_fdec_feed(&d, buf, (size_t)len - 1, &used, &out), TUN_EPROTO);
	assert_non_null(strstr(tun_fdec_error(&d), "link fields missing"));
	buf[3] = (uint8_t)(len - 8);
	memset(buf + len - PROTO_HELLO_LINK_LEN, 0xff, 8); /* rate beyond PROTO_LINK_RATE_MAX */
	tun_fdec_init(&d);
	assert_int_equal(tun_fdec_feed(&d, buf, (size_t)len, &used, &out), TUN_EPROTO);
	assert_non_null(strstr(tun_fdec_error(&d), "HELLO: link rate"));
	memset(buf + len - PROTO_HELLO_LINK_LEN, 0, 16);
	memset(buf + len - 4, 0xff, 4); /* round trip beyond PROTO_LINK_RTT_MAX */
	tun_fdec_init(&d);
	assert_int_equal(tun_fdec_feed(&d, buf, (size_t)len, &used, &out), TUN_EPROTO);
	assert_non_null(strstr(tun_fdec_error(&d), "HELLO: link round trip"));
	/* ... and the encoder refuses them */
	f.u.hello.link_bps = PROTO_LINK_RATE_MAX + 1;
	assert_int_equal(tun_frame_encode(&f, buf, sizeof(buf)), TUN_EINVAL);
	f.u.hello.link_bps = 0;
	f.u.hello.link_tx_bps = 0;
	f.u.hello.link_rtt_us = 0;
	f.u.hello.caps = 1;
	/* encoder refuses what the decoder would refuse */
	f.u.hello.window = 1;
	assert_int_equal(tun_frame_encode(&f, buf, sizeof(buf)), TUN_EINVAL);
	memset(&f, 0, sizeof(f));
	f.type = PROTO_DATA; f.sid = 1;
	assert_int_equal(tun_frame_encode(&f, buf, sizeof(buf)), TUN_EINVAL);
	f.type = PROTO_CLOSE; f.sid = 0;
	assert_int_equal(tun_frame_encode(&f, buf, sizeof(buf)), TUN_EINVAL);
}

static void test_target_helpers(void **state)
{
	tun_target t;
	char s[300];

	(void)state;
	assert_int_equal(tun_target_parse(&t, "192.0.2.1", 80), TUN_OK);
	assert_string_equal(tun_target_format(&t, s, sizeof(s)), "192.0.2.1:80");
	assert_int_equal(tun_target_parse(&t, "::1", 8080), TUN_OK);
	assert_string_equal(tun_target_format(&t, s, sizeof(s)), "[::1]:8080");
	assert_int_equal(tun_target_parse(&t, "host.example", 22), TUN_OK);
	assert_string_equal(tun_target_format(&t, s, sizeof(s)), "host.example:22");
	assert_int_equal(tun_target_parse(&t, "bad host", 22), TUN_EINVAL);
	assert_int_equal(tun_target_parse(&t, "ok", 0), TUN_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_whole_and_split),
		cmocka_unit_test(test_byte_by_byte_stream),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_hello_extension_and_encode_checks),
		cmocka_unit_test(test_target_helpers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
