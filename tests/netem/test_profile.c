/* test_profile.c: the profile parser: shipped profiles, values, and one clear
 * "file:line: what is wrong" message per kind of mistake. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "profile.h"

/* Every shipped profile parses, and t1/highlat match the reference benchmark. */
static void test_shipped(void **state)
{
	static const char *const names[] = { "t1", "highlat", "satellite", "transcontinental",
					     "lossy4g" };
	struct wn_profile p;
	char path[256], err[512];

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		snprintf(path, sizeof path, "netem/profiles/%s.conf", names[i]);
		if (wn_profile_load(path, &p, err, sizeof err) != 0)
			fail_msg("%s", err);
		assert_string_equal(p.name, names[i]);
	}
	assert_int_equal(wn_profile_load("netem/profiles/t1.conf", &p, err, sizeof err), 0);
	assert_int_equal(p.dir[WN_UP].rate_bps, 1544000);
	assert_int_equal(p.dir[WN_DOWN].rate_bps, 1544000);
	assert_int_equal(wn_profile_rtt_ns(&p), 40000000);
	assert_int_equal(p.dir[WN_UP].limit_bytes, 7720);     /* 1.544 Mbit/s x 40 ms */
	assert_int_equal(wn_profile_load("netem/profiles/highlat.conf", &p, err, sizeof err), 0);
	assert_int_equal(wn_profile_rtt_ns(&p), 300000000);
	assert_true(p.dir[WN_UP].loss > 0.00199 && p.dir[WN_UP].loss < 0.00201);
}

/* Units, per-direction keys, comments, defaults and the BDP limit. */
static void test_values(void **state)
{
	struct wn_profile p;
	char err[512];
	const char *text =
		"# comment line\n"
		"  name = x-1   # trailing comment\n"
		"rate = 10mbit\n"
		"down.rate=80kbps\n"
		"delay = 1.5ms\n"
		"up.jitter = 500us\n"
		"loss = 0.5%\n"
		"down.limit = 2bdp\n"
		"up.limit = 64k\n"
		"overhead = 14\n"
		"mtu = 1400\n";

	if (wn_profile_parse(text, "x.conf", &p, err, sizeof err) != 0)
		fail_msg("%s", err);
	assert_string_equal(p.name, "x-1");
	assert_int_equal(p.mtu, 1400);
	assert_int_equal(p.dir[WN_UP].rate_bps, 10000000);
	assert_int_equal(p.dir[WN_DOWN].rate_bps, 640000);
	assert_int_equal(p.dir[WN_UP].delay_ns, 1500000);
	assert_int_equal(p.dir[WN_UP].jitter_ns, 500000);
	assert_int_equal(p.dir[WN_DOWN].jitter_ns, 0);
	assert_true(p.dir[WN_DOWN].loss > 0.00499 && p.dir[WN_DOWN].loss < 0.00501);
	assert_int_equal(p.dir[WN_UP].limit_bytes, 65536);
	/* 2 x 640 kbit/s x 3 ms = 480 bytes, raised to two packets */
	assert_int_equal(p.dir[WN_DOWN].limit_bytes, 2800);
	assert_int_equal(p.dir[WN_UP].overhead, 14);
	/* serialisation counts the overhead: (1000 + 14) bytes at 10 Mbit/s */
	assert_int_equal(wn_dir_tx_ns(&p.dir[WN_UP], 1000), 811200);

	assert_int_equal(wn_profile_parse("", "empty", &p, err, sizeof err), 0);
	assert_int_equal(p.dir[WN_UP].rate_bps, 0);           /* unlimited */
	assert_int_equal(wn_dir_tx_ns(&p.dir[WN_UP], 1500), 0);
}

/* Each bad profile gives the expected message, with file and line. */
static void test_errors(void **state)
{
	static const struct { const char *text, *msg; } cases[] = {
		{ "rat = 1mbit\n", "f.conf:1: unknown key 'rat'" },
		{ "\n\nrate = 1.5 mbit\n", "f.conf:3: bad rate '1.5 mbit'" },
		{ "rate = 10mb\n", "f.conf:1: bad rate '10mb'" },
		{ "rate = 12bit\n", "f.conf:1: rate '12bit' out of range" },
		{ "rate = -1mbit\n", "f.conf:1: bad rate" },
		{ "delay = 20\n", "f.conf:1: bad delay '20'" },
		{ "delay = 11s\n", "f.conf:1: delay '11s' out of range" },
		{ "jitter = 2xs\n", "f.conf:1: bad jitter '2xs'" },
		{ "loss = 0.2\n", "f.conf:1: bad loss '0.2' (expected a percentage" },
		{ "loss = 101%\n", "f.conf:1: loss '101%' out of range" },
		{ "limit = 100\n", "f.conf:1: limit '100' out of range" },
		{ "limit = lots\n", "f.conf:1: bad limit 'lots'" },
		{ "limit = 1000bdp\n", "f.conf:1: limit '1000bdp' out of range" },
		{ "mtu = 100\n", "f.conf:1: mtu '100' out of range" },
		{ "mtu = 1500x\n", "f.conf:1: bad mtu '1500x'" },
		{ "overhead = -3\n", "f.conf:1: bad overhead '-3'" },
		{ "rate 10mbit\n", "f.conf:1: expected 'key = value', got 'rate 10mbit'" },
		{ "rate =\n", "f.conf:1: missing value for 'rate'" },
		{ "= 3\n", "f.conf:1: missing key before '='" },
		{ "rate = 1mbit\nrate = 2mbit\n", "f.conf:2: 'rate' already set at line 1" },
		{ "up.rate = 1mbit\nup.rate = 2mbit\n", "f.conf:2: 'up.rate' already set at line 1" },
		{ "up.rate = 1mbit\nrate = 2mbit\n", "f.conf:2: 'rate' after 'up.rate' (line 1) would" },
		{ "up.mtu = 1400\n", "f.conf:1: 'mtu' applies to the whole link" },
		{ "left.rate = 1mbit\n", "f.conf:1: unknown key 'left.rate'" },
		{ "name = a b\n", "f.conf:1: name 'a b' may hold only" },
		{ "delay = 1ms\njitter = 2ms\n", "f.conf: up jitter (2.000 ms) larger than its delay" },
		{ "up.limit = 1600\nmtu = 2000\n", "f.conf: up limit (1600 bytes) smaller than one packet" },
	};
	struct wn_profile p;
	char err[512], longline[700];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		memset(err, 0, sizeof err);
		if (wn_profile_parse(cases[i].text, "f.conf", &p, err, sizeof err) != -1)
			fail_msg("case %zu accepted: %s", i, cases[i].text);
		if (strncmp(err, cases[i].msg, strlen(cases[i].msg)) != 0)
			fail_msg("case %zu: got \"%s\", want \"%s...\"", i, err, cases[i].msg);
	}
	memset(longline, 'a', sizeof longline - 1);
	longline[sizeof longline - 1] = '\0';
	assert_int_equal(wn_profile_parse(longline, "f.conf", &p, err, sizeof err), -1);
	assert_string_equal(err, "f.conf:1: line longer than 512 characters");
	assert_int_equal(wn_profile_load("/nonexistent/x.conf", &p, err, sizeof err), -1);
	assert_string_equal(err, "/nonexistent/x.conf: cannot open: No such file or directory");
	assert_int_equal(wn_profile_load("bin/wanem", &p, err, sizeof err), -1);  /* binary */
}

/* Mutated profiles (bytes flipped, cut, duplicated) are accepted or refused
 * with a message, never a crash; run under `make asan` this is a small fuzzer. */
static void test_mutations(void **state)
{
	static const char seed[] =
		"name = m\nup.rate = 1.544mbit\ndown.rate=3mbit\ndelay = 20ms\njitter=1ms\n"
		"loss = 0.2%\nlimit = 2bdp\noverhead = 14\nmtu = 1500\n";
	static const char alphabet[] = "=#%.\n \t0123456789kmgbitsupdown.ratelimitbdp\xff";
	uint64_t x = 88172645463325252ULL;
	struct wn_profile p;
	char buf[sizeof seed * 2], err[512];

	for (int i = 0; i < 20000; i++) {
		size_t n = sizeof seed - 1;

		memcpy(buf, seed, n);
		for (int m = 0; m < 1 + i % 6; m++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;     /* xorshift64 */
			size_t at = x % n;

			switch ((x >> 32) % 3) {
			case 0: buf[at] = alphabet[(x >> 40) % (sizeof alphabet - 1)]; break;
			case 1: n = at + 1; break;
			case 2: if (n + 8 < sizeof buf) { memmove(buf + at + 8, buf + at, n - at); n += 8; } break;
			}
		}
		buf[n] = '\0';
		err[0] = '\0';
		if (wn_profile_parse(buf, "m.conf", &p, err, sizeof err) < 0)
			assert_true(strncmp(err, "m.conf", 6) == 0);
		else
			assert_true(p.dir[WN_UP].limit_bytes >= p.mtu);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shipped),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_mutations),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
