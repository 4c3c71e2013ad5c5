/* test_conf.c: the configuration parser: table-driven good and bad configs
 * with their exact messages, values, matchers (test_conf_run.c: files,
 * reload, the examples, the log and the daemon's start). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <cmocka.h>

#include "../proxy/cmd.h"
#include "../proxy/daemon.h"
#include "../proxy/node.h"
#include "stats.h"
#include "conf.h"
#include "proto.h"
#include "test_netns.h"

#define EDGE_MIN "peer = core.example:4433\nstore = /var/lib/wanopt\ntls_cert = /p/e.crt\n" \
		 "tls_key = /p/e.key\ntls_ca = /p/ca.crt\nforward = 127.0.0.1:2121 -> ftp.example:21\n"
#define CORE_MIN "listen = [::]:4433\nstore = /var/lib/wanopt\ntls_cert = /p/c.crt\n" \
		 "tls_key = /p/c.key\ntls_ca = /p/ca.crt\n"

struct conf_case {
	enum conf_role role;
	const char *text;     /* NULL: no file */
	const char *args[4];  /* NULL-terminated overrides */
	const char *err;      /* NULL: must parse */
};

static const struct conf_case cases[] = {
	{ CONF_EDGE, EDGE_MIN, { NULL }, NULL },
	{ CONF_CORE, CORE_MIN, { NULL }, NULL },
	{ CONF_CORE, CORE_MIN "allow = 10.0.0.0/8:80,443, [2001:db8::]/32, :1000-2000\n", { NULL }, NULL },
	{ CONF_EDGE, EDGE_MIN "# comment\n\n  store_size = 100G  # trailing\r\n", { NULL }, NULL },
	{ CONF_EDGE, EDGE_MIN "bogus = 1\n", { NULL }, "t.conf:7: unknown key 'bogus'" },
	{ CONF_EDGE, "peer core:1\n", { NULL }, "t.conf:1: expected 'key = value'" },
	{ CONF_EDGE, " = x\n", { NULL }, "t.conf:1: expected 'key = value'" },
	{ CONF_EDGE, "peer =\n", { NULL }, "t.conf:1: 'peer' needs a value" },
	{ CONF_EDGE, "peer = core\n", { NULL }, "t.conf:1: peer: expected HOST:PORT" },
	{ CONF_EDGE, "peer = core:0\n", { NULL }, "t.conf:1: peer: bad port (expected 1-65535)" },
	{ CONF_EDGE, "peer = core:65536\n", { NULL }, "t.conf:1: peer: bad port (expected 1-65535)" },
	{ CONF_EDGE, "peer = ::1:80\n", { NULL }, "t.conf:1: peer: IPv6 addresses need brackets, e.g. [::1]:80" },
	{ CONF_EDGE, "peer = [::1:80\n", { NULL }, "t.conf:1: peer: missing ']' after IPv6 address" },
	{ CONF_EDGE, "peer = [nothex]:80\n", { NULL }, "t.conf:1: peer: bad IPv6 address" },
	{ CONF_EDGE, "peer = :80\n", { NULL }, "t.conf:1: peer: missing host before ':PORT'" },
	{ CONF_EDGE, "peer = a:1\n\npeer = b:2\n", { NULL }, "t.conf:3: 'peer' given twice (first at t.conf:1)" },
	{ CONF_EDGE, "forward = 1.2.3.4:5\n", { NULL }, "t.conf:1: forward: expected LISTEN_HOST:PORT -> TARGET_HOST:PORT" },
	{ CONF_EDGE, "forward = 1.2.3.4:5 -> a:1, 1.2.3.4:6 -> b:2\n", { NULL },
	  "t.conf:1: forward: one LISTEN_HOST:PORT -> TARGET_HOST:PORT per forward line (the key repeats)" },
	{ CONF_EDGE, "forward = 1.2.3.4:5 -> a:1 -> b:2\n", { NULL },
	  "t.conf:1: forward: one LISTEN_HOST:PORT -> TARGET_HOST:PORT per forward line (the key repeats)" },
	{ CONF_EDGE, "store = \"/x\"\n", { NULL }, "t.conf:1: 'store': quotes would be part of the value: write it without them" },
	{ CONF_EDGE, "\xef\xbb\xbf" "bogus = 1\n", { NULL }, "t.conf:1: unknown key 'bogus'" },
	{ CONF_EDGE, "forward = 1.2.3.4:5 -> x\n", { NULL }, "t.conf:1: forward: target address: expected HOST:PORT" },
	{ CONF_EDGE, "forward = 1.2.3.4 -> x:1\n", { NULL }, "t.conf:1: forward: listen address: expected HOST:PORT" },
	{ CONF_EDGE, EDGE_MIN "forward = 127.0.0.1:2121 -> b:1\n", { NULL },
	  "t.conf:7: forward: listen address (port 2121) already used by forward at t.conf:6" },
	{ CONF_EDGE, EDGE_MIN "forward = 0.0.0.0:2121 -> b:1\n", { NULL },
	  "t.conf:7: forward: listen address (port 2121) already used by forward at t.conf:6" },
	{ CONF_EDGE, EDGE_MIN "forward = [::1]:2121 -> b:1\n", { NULL }, NULL },
	{ CONF_EDGE, EDGE_MIN "stats = 127.0.0.1:2121\n", { NULL },
	  "t.conf:6: forward: listen address (port 2121) already used by stats at t.conf:7" },
	{ CONF_EDGE, EDGE_MIN "transparent = 2121\n", { NULL },
	  "t.conf:6: forward: listen address (port 2121) already used by transparent at t.conf:7" },
	{ CONF_EDGE, EDGE_MIN "bypass_mark = 0x10\n", { NULL }, NULL },
	{ CONF_EDGE, EDGE_MIN "bypass_mark = 0\n", { NULL },
	  "t.conf:7: bypass_mark: expected a nonzero mark, e.g. 0x2 (decimal or 0x hex, 32 bits)" },
	{ CONF_EDGE, EDGE_MIN "bypass_mark = -1\n", { NULL },
	  "t.conf:7: bypass_mark: expected a nonzero mark, e.g. 0x2 (decimal or 0x hex, 32 bits)" },
	{ CONF_CORE, CORE_MIN "stats = 127.0.0.1:4433\n", { NULL },
	  "t.conf:6: stats: listen address (port 4433) already used by listen at t.conf:1" },
	{ CONF_EDGE, "store_size = 10X\n", { NULL }, "t.conf:1: store_size: expected a size like 512M or 100G (suffixes K, M, G, T)" },
	{ CONF_EDGE, "store_size = 1K\n", { NULL }, "t.conf:1: store_size: store_size too small (minimum 1M)" },
	{ CONF_EDGE, "store_size = 99999999999T\n", { NULL }, "t.conf:1: store_size: size out of range" },
	{ CONF_EDGE, "transparent = 0\n", { NULL }, "t.conf:1: transparent: expected a port (1-65535)" },
	{ CONF_EDGE, "log_level = loud\n", { NULL }, "t.conf:1: log_level: expected error, warn, info or debug" },
	{ CONF_EDGE, "fail_open = maybe\n", { NULL }, "t.conf:1: fail_open: expected refuse or direct" },
	{ CONF_EDGE, "congestion = reno\n", { NULL }, "t.conf:1: congestion: expected bbr or cubic" },
	{ CONF_EDGE, "tunnels = 0\n", { NULL }, "t.conf:1: tunnels: expected a whole number from 1 to 16" },
	{ CONF_CORE, CORE_MIN "max_streams = 50\n", { NULL }, NULL },
	{ CONF_CORE, CORE_MIN "max_streams = 16385\n", { NULL }, "t.conf:6: max_streams: expected a whole number from 1 to 16384" },
	{ CONF_CORE, "workers = x\n", { NULL }, "t.conf:1: workers: expected a whole number from 0 to 256" },
	{ CONF_CORE, "workers = -1\n", { NULL }, "t.conf:1: workers: expected a whole number from 0 to 256" },
	{ CONF_CORE, CORE_MIN "lan_bulk_streams = 0\n", { NULL }, NULL },
	{ CONF_EDGE, EDGE_MIN "lan_bulk_streams = 1024\n", { NULL }, NULL },
	{ CONF_EDGE, EDGE_MIN "lan_bulk_streams = 1025\n", { NULL }, "t.conf:7: lan_bulk_streams: expected a whole number from 0 to 1024" },
	{ CONF_CORE, NULL, { "--lan_bulk_streams=-1" }, "--lan_bulk_streams=-1: lan_bulk_streams: expected a whole number from 0 to 1024" },
	{ CONF_EDGE, "link_rate = fast\n", { NULL }, "t.conf:1: link_rate: expected a rate in bit/s like 1.544M or 100Mbit" },
	{ CONF_EDGE, "link_rate = 20M/x\n", { NULL }, "t.conf:1: link_rate: expected RATE or DOWN/UP in bit/s (1kbit to 10Tbit), like 1.544M or 20M/2M" },
	{ CONF_CORE, "link_rate = 20M/2M/1M\n", { NULL }, "t.conf:1: link_rate: expected RATE or DOWN/UP in bit/s (1kbit to 10Tbit), like 1.544M or 20M/2M" },
	{ CONF_EDGE, "link_rtt = 2h\n", { NULL }, "t.conf:1: link_rtt: expected a round-trip time like 40ms or 0.3s (units us, ms, s)" },
	{ CONF_EDGE, "optimize = turbo\n", { NULL }, "t.conf:1: optimize: expected full, lz, tfo or passthrough, then optional CIDR[:PORTS], ..." },
	{ CONF_EDGE, "optimize = lz 10.0.0.0/33\n", { NULL }, "t.conf:1: optimize: bad address or CIDR '10.0.0.0/33'" },
	{ CONF_CORE, "allow = 10.0.0.1/8\n", { NULL }, "t.conf:1: allow: '10.0.0.1/8' has host bits set beyond /8" },
	{ CONF_CORE, "allow = 10.0.0.0/8, 443\n", { NULL }, "t.conf:1: allow: '443': a port must follow CIDR:PORTS or :PORTS" },
	{ CONF_CORE, "allow = 10.0.0.0/8:80,,443\n", { NULL }, "t.conf:1: allow: empty entry in list" },
	{ CONF_CORE, "allow = 2001:db8::/32\n", { NULL },
	  "t.conf:1: allow: IPv6 addresses need brackets: '[2001:db8::]/32' (then ':PORTS' if any)" },
	{ CONF_CORE, "allow = ::1/128\n", { NULL }, "t.conf:1: allow: IPv6 addresses need brackets: '[::1]/128' (then ':PORTS' if any)" },
	{ CONF_CORE, "allow = ::/0\n", { NULL }, "t.conf:1: allow: IPv6 addresses need brackets: '[::]/0' (then ':PORTS' if any)" },
	{ CONF_CORE, "allow = :2000-1000\n", { NULL }, "t.conf:1: allow: bad port or range '2000-1000'" },
	{ CONF_CORE, "allow = [::1\n", { NULL }, "t.conf:1: allow: missing ']' in '[::1'" },
	{ CONF_CORE, "allow = 10.0.0.0/00000000000000000000000000000000000000000000000000000000000000000000000008\n",
	  { NULL }, "t.conf:1: allow: bad address or CIDR '10.0.0.0/00000000000000000000000000000000000000000000000000000000000000000000000008'" },
	{ CONF_EDGE, "store =#comment\n", { NULL }, "t.conf:1: 'store' needs a value" },
	{ CONF_EDGE, "store = /a\x01" "b\n", { NULL }, "t.conf:1: 'store': control character 0x01 in the value" },
	{ CONF_EDGE, EDGE_MIN, { "--tls_cert=\f", NULL }, "--tls_cert=\f: 'tls_cert' needs a value" },
	{ CONF_EDGE, EDGE_MIN, { "--tls_cert=c\x1bk", NULL }, "--tls_cert=c\x1bk: 'tls_cert': control character 0x1b in the value" },
	{ CONF_EDGE, EDGE_MIN, { "--store_size= 2G ", NULL }, NULL },
	{ CONF_EDGE, EDGE_MIN, { "--tls_cert=#c", NULL },
	  "--tls_cert=#c: 'tls_cert': a '#' at the start of a value or after a space begins a comment" },
	{ CONF_EDGE, EDGE_MIN, { "--tls_cert=a#c", NULL }, NULL },
	{ CONF_EDGE, "store = /s\n", { NULL }, "t.conf: missing required key 'peer'" },
	{ CONF_CORE, "listen = [::]:1\nstore = /s\ntls_cert = c\ntls_key = k\n", { NULL },
	  "t.conf: missing required key 'tls_ca'" },
	{ CONF_EDGE, "peer = a:1\nstore = s\ntls_cert = c\ntls_key = k\ntls_ca = ca\n", { NULL },
	  "t.conf: nothing to accelerate: give 'forward' or 'transparent'" },
	{ CONF_EDGE, EDGE_MIN, { "--peer=x", NULL }, "--peer=x: peer: expected HOST:PORT" },
	{ CONF_EDGE, EDGE_MIN, { "--dscp=af51", NULL },
	  "--dscp=af51: dscp: unknown DSCP class 'af51' (a class is csN, afXY, ef, default or a number 0-63)" },
	{ CONF_EDGE, EDGE_MIN, { "--dscp=64", NULL },
	  "--dscp=64: dscp: unknown DSCP class '64' (a class is csN, afXY, ef, default or a number 0-63)" },
	{ CONF_EDGE, EDGE_MIN, { "--dscp_tunnels=ef af41,cs1", NULL }, NULL },
	{ CONF_EDGE, EDGE_MIN, { "--dscp_tunnels=ef,, EF", NULL }, "--dscp_tunnels=ef,, EF: dscp_tunnels: DSCP class 'EF' is listed twice" },
	{ CONF_EDGE, EDGE_MIN, { "--dscp_tunnels=,", NULL },
	  "--dscp_tunnels=,: dscp_tunnels: expected one or more classes, or none (a class is csN, afXY, ef, default or a number 0-63)" },
	{ CONF_EDGE, EDGE_MIN, { "--dscp_tunnels=1 2 3 4 5 6 7 8 9", NULL }, "--dscp_tunnels=1 2 3 4 5 6 7 8 9: dscp_tunnels: at most 8 classes" },
	{ CONF_EDGE, EDGE_MIN "classify = af41\n", { NULL },
	  "t.conf:7: classify: expected CLASS CIDR[:PORTS], ... (a class is csN, afXY, ef, default or a number 0-63)" },
	{ CONF_EDGE, EDGE_MIN "classify = gold :22\n", { NULL },
	  "t.conf:7: classify: unknown DSCP class 'gold' (a class is csN, afXY, ef, default or a number 0-63)" },
	{ CONF_EDGE, EDGE_MIN "classify = af41 22\n", { NULL },
	  "t.conf:7: classify: '22': a port must follow CIDR:PORTS or :PORTS" },
	{ CONF_EDGE, EDGE_MIN, { "--nope=1", NULL }, "--nope=1: unknown key 'nope'" },
	{ CONF_EDGE, EDGE_MIN, { "--peer", NULL }, "--peer: expected --key=value" },
	{ CONF_EDGE, EDGE_MIN, { "--peer=a:1", "--peer=b:2", NULL }, "--peer=b:2: 'peer' given twice (first at --peer=a:1)" },
	{ CONF_EDGE, EDGE_MIN, { "--peer=a:1", "--tls-ca=/x", NULL }, NULL },
	{ CONF_EDGE, NULL, { "--peer=a:1", NULL }, "command line: missing required key 'store' (no -c FILE given)" },
	{ CONF_CORE, NULL, { "--listen=[::1]:9", "--store=/s", "--tls_cert=c", "--tls_key=k" },
	  "command line: missing required key 'tls_ca' (no -c FILE given)" },
};

/* Each case parses, or fails with exactly its message. */
static void test_table(void **state)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct conf_case *k = &cases[i];
		char err[512] = "";
		int n = 0;
		while (n < 4 && k->args[n])
			n++;
		struct conf *c = conf_parse(k->role, "t.conf", k->text, n, (char *const *)k->args,
					    err, sizeof err);
		if (k->err) {
			if (c || strcmp(err, k->err))
				fail_msg("case %zu: expected '%s', got '%s'", i, k->err, c ? "(parsed)" : err);
		} else if (!c) {
			fail_msg("case %zu: unexpected error '%s'", i, err);
		} else if (conf_ignored(c, 0)) {
			fail_msg("case %zu: unexpected warning '%s'", i, conf_ignored(c, 0));
		}
		conf_free(c);
	}
}

/* Parses EDGE_MIN (its forward on 127.0.0.1:2121, line 6), n forwards on
 * port 2121 of 127.77.x.y (lines 7 on), then `last` if not NULL: the
 * config, or NULL with err set. */
static struct conf *many_forwards(size_t n, const char *last, char *err, size_t errlen)
{
	size_t cap = sizeof EDGE_MIN + (n + 1) * 64;
	char *text = malloc(cap);
	assert_non_null(text);
	size_t len = (size_t)snprintf(text, cap, "%s", EDGE_MIN);
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, cap - len, "forward = 127.77.%zu.%zu:2121 -> b:1\n", i / 250,
					i % 250 + 1);
	if (last)
		snprintf(text + len, cap - len, "%s\n", last);
	struct conf *c = conf_parse(CONF_EDGE, "t.conf", text, 0, NULL, err, errlen);
	free(text);
	return c;
}

/* 20,000 forwards on one port (checked by port and address, not pair by
 * pair: conf_listen.c): distinct ones parse; a clash at the end names the
 * line it clashes with. */
static void test_many_listeners(void **state)
{
	(void)state;
	static const struct { const char *last, *err; } k[] = {
		{ NULL, NULL },
		{ "forward = 127.77.0.5:2121 -> b:1",
		  "t.conf:20007: forward: listen address (port 2121) already used by forward at t.conf:11" },
		{ "forward = 0.0.0.0:2121 -> b:1",
		  "t.conf:20007: forward: listen address (port 2121) already used by forward at t.conf:6" },
		{ "forward = [::]:2121 -> b:1",
		  "t.conf:20007: forward: listen address (port 2121) already used by forward at t.conf:6" },
		{ "forward = [::1]:2121 -> b:1", NULL },
		{ "stats = 127.77.79.250:2121",
		  "t.conf:20006: forward: listen address (port 2121) already used by stats at t.conf:20007" },
	};
	for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
		char err[512] = "";
		struct conf *c = many_forwards(20000, k[i].last, err, sizeof err);
		if (k[i].err && (c || strcmp(err, k[i].err)))
			fail_msg("case %zu: expected '%s', got '%s'", i, k[i].err, c ? "(parsed)" : err);
		if (!k[i].err && !c)
			fail_msg("case %zu: unexpected error '%s'", i, err);
		conf_free(c);
	}
}

/* The other role's keys: each parses, ignored with this warning (conf.h). */
static const struct conf_case other_role[] = {
	{ CONF_EDGE, EDGE_MIN "listen = 1.2.3.4:5\n", { NULL }, "t.conf:7: 'listen' has no effect on an edge (it is for the core only): ignored" },
	{ CONF_CORE, CORE_MIN "peer = a:1\n", { NULL }, "t.conf:6: 'peer' has no effect on a core (it is for the edge only): ignored" },
	{ CONF_CORE, CORE_MIN "transparent = 3129\n", { NULL }, "t.conf:6: 'transparent' has no effect on a core (it is for the edge only): ignored" },
	{ CONF_CORE, CORE_MIN, { "--optimize=lz" }, "--optimize=lz: 'optimize' has no effect on a core (it is for the edge only): ignored" },
	{ CONF_CORE, CORE_MIN "bypass_mark = 2\n", { NULL }, "t.conf:6: 'bypass_mark' has no effect on a core (it is for the edge only): ignored" },
	{ CONF_CORE, "listen = [::]:1\nstore = /s\ntls_cert = c\ntls_key = k\ntls_ca = a\nclassify = ef :22\n", { NULL },
	  "t.conf:6: 'classify' has no effect on a core (it is for the edge only): ignored" },
	{ CONF_CORE, "listen = [::]:1\nstore = /s\ntls_cert = c\ntls_key = k\ntls_ca = a\ndscp = ef\n", { NULL },
	  "t.conf:6: 'dscp' has no effect on a core (it is for the edge only): ignored" },
};

/* Each of other_role parses with exactly its warning, and without the key. */
static void test_other_role(void **state)
{
	for (size_t i = 0; i < sizeof other_role / sizeof other_role[0]; i++) {
		const struct conf_case *k = &other_role[i];
		char err[512] = "";
		int n = k->args[0] ? 1 : 0;
		struct conf *c = conf_parse(k->role, "t.conf", k->text, n, (char *const *)k->args, err, sizeof err);
		if (!c)
			fail_msg("case %zu: unexpected error '%s'", i, err);
		if (!conf_ignored(c, 0) || strcmp(conf_ignored(c, 0), k->err) || conf_ignored(c, 1))
			fail_msg("case %zu: expected the warning '%s', got '%s'", i, k->err,
				 conf_ignored(c, 0) ? conf_ignored(c, 0) : "(none)");
		conf_free(c);
	}
	/* each role's --help lists its own keys only */
	char *h[2] = { NULL, NULL };
	size_t len;
	for (int r = 0; r < 2; r++) {
		FILE *f = open_memstream(&h[r], &len);
		conf_help(f, (enum conf_role)r);
		fclose(f);
	}
	assert_non_null(strstr(h[CONF_EDGE], "--optimize="));
	assert_null(strstr(h[CONF_EDGE], "--workers="));
	assert_non_null(strstr(h[CONF_CORE], "--workers="));
	assert_null(strstr(h[CONF_CORE], "--optimize="));
	free(h[0]);
	free(h[1]);
}

/* Queries return what the file and the overrides say; the command line wins. */
static void test_values(void **state)
{
	char err[512];
	char *args[] = { "--store_size=2G", "--forward=[::1]:80 -> web:80", "--log_level=debug" };
	struct conf *c = conf_parse(CONF_EDGE, "/etc/wanopt/edge.conf",
				    "peer = core.example:4433\ntls_cert = /p/e.crt\ntls_key = /p/e.key\n"
				    "tls_ca = /p/ca.crt\nforward = 127.0.0.1:2121 -> ftp.example:21\n"
				    "transparent = 3128\nstore_size = 512M\nlink_rate = 1.544M\n"
				    "link_rtt = 40\ncongestion = cubic\ntunnels = 2\nstats = 127.0.0.1:9471\n"
				    "fail_open = direct\nstore = rel/store\n" , 3, args, err, sizeof err);
	assert_non_null(c);
	assert_string_equal(conf_peer(c)->host, "core.example");
	assert_int_equal(conf_peer(c)->port, 4433);
	assert_null(conf_listen(c));
	assert_int_equal(conf_stats(c)->port, 9471);
	assert_int_equal(conf_transparent_port(c), 3128);
	assert_int_equal(conf_store_size(c), 2ull << 30);
	assert_int_equal(conf_forward_count(c), 1);
	assert_string_equal(conf_forward(c, 0)->listen.host, "::1");
	assert_string_equal(conf_forward(c, 0)->target.host, "web");
	assert_null(conf_forward(c, 1));
	assert_int_equal(conf_log_level(c), LOGL_DEBUG);
	assert_int_equal(conf_link_rate(c), 1544000);
	assert_int_equal(conf_link_rtt(c), 40000);
	assert_int_equal(conf_congestion(c), CONF_CC_CUBIC);
	assert_int_equal(conf_tunnels(c), 2);
	assert_int_equal(conf_bypass_mark(c), 0x2); /* the default */
	assert_int_equal(conf_fail_open(c), CONF_FAIL_DIRECT);
	assert_string_equal(conf_store(c), "/etc/wanopt/rel/store");
	assert_string_equal(conf_tls_ca(c), "/p/ca.crt");
	char *d = conf_dump(c);
	assert_non_null(strstr(d, "forward = [::1]:80 -> web:80\n"));
	assert_non_null(strstr(d, "store_size = 2G\n"));
	free(d);
	conf_free(c);
	conf_free(NULL);
}

/* dscp and dscp_tunnels: values, dump (names), restart needed on change. */
static void test_qos(void **state)
{
	char err[512], key[32];
	char *a1[] = { "--dscp=af11", "--dscp_tunnels=ef, 34 cs1" }, *a2[] = { "--dscp=af11", "--dscp_tunnels=ef" };
	struct conf *c = conf_parse(CONF_EDGE, "e.conf", EDGE_MIN, 2, a1, err, sizeof err);
	struct conf *c2 = conf_parse(CONF_EDGE, "e.conf", EDGE_MIN, 2, a2, err, sizeof err);
	struct conf *c0 = conf_parse(CONF_EDGE, "e.conf", EDGE_MIN, 0, NULL, err, sizeof err);
	assert_non_null(c);
	assert_non_null(c2);
	assert_non_null(c0);
	const uint8_t *cls;
	assert_int_equal(conf_dscp(c), 10);
	assert_int_equal(conf_dscp_tunnels(c, &cls), 3);
	assert_int_equal(cls[0], 46);
	assert_int_equal(cls[1], 34);
	assert_int_equal(cls[2], 8);
	assert_int_equal(conf_dscp(c0), 0);
	assert_int_equal(conf_dscp_tunnels(c0, &cls), 0);
	char *d = conf_dump(c), *d0 = conf_dump(c0);
	assert_non_null(strstr(d, "dscp = af11\ndscp_tunnels = ef, af41, cs1\n"));
	assert_null(strstr(d0, "dscp"));
	assert_int_equal(conf_restart_keep(c, c2, key, sizeof key), 1);
	assert_string_equal(key, "'dscp_tunnels'");
	assert_int_equal(conf_dscp_tunnels(c2, &cls), 3); /* the running value kept */
	assert_int_equal(cls[2], 8);
	assert_int_equal(conf_restart_keep(c0, c2, key, sizeof key), 2);
	assert_string_equal(key, "'dscp', 'dscp_tunnels'");
	assert_int_equal(conf_dscp(c2), 0);
	assert_int_equal(conf_dscp_tunnels(c2, &cls), 0);
	assert_int_equal(conf_restart_keep(c2, c2, key, sizeof key), 0);
	assert_string_equal(key, "");
	free(d);
	free(d0);
	conf_free(c);
	conf_free(c2);
	conf_free(c0);
}

/* lan_bulk_streams: 8 unless given, any number from 0 (none) in the dump
 * when not 8, and reloaded on SIGHUP. */
static void test_lan_bulk(void **state)
{
	char err[512], key[32];
	char *a0[] = { "--lan_bulk_streams=0" };
	struct conf *c = conf_parse(CONF_EDGE, "e.conf", EDGE_MIN, 0, NULL, err, sizeof err);
	struct conf *c0 = conf_parse(CONF_EDGE, "e.conf", EDGE_MIN "lan_bulk_streams = 3\n", 1, a0, err, sizeof err);
	assert_non_null(c);
	assert_non_null(c0);
	assert_int_equal(conf_lan_bulk_streams(c), CONF_LAN_BULK_DEFAULT);
	assert_int_equal(conf_lan_bulk_streams(c0), 0); /* the command line wins */
	char *d = conf_dump(c), *d0 = conf_dump(c0);
	assert_null(strstr(d, "lan_bulk_streams"));
	assert_non_null(strstr(d0, "lan_bulk_streams = 0\n"));
	assert_int_equal(conf_restart_keep(c, c0, key, sizeof key), 0);
	free(d);
	free(d0);
	conf_free(c);
	conf_free(c0);
}

/* link_rate: one rate both ways, or DOWN/UP (units may hold a '/'); the
 * dump shows both; a reload applies it. */
static void test_link_rate(void **state)
{
	char err[512], key[32];
	char *a1[] = { "--link_rate=20Mb/s/2Mb/s" }, *a2[] = { "--link_rate=1.544Mb/s" }, *a3[] = { "--link_rate=30M/2M" };
	struct conf *c1 = conf_parse(CONF_EDGE, "e.conf", EDGE_MIN, 1, a1, err, sizeof err);
	struct conf *c2 = conf_parse(CONF_CORE, "c.conf", CORE_MIN, 1, a2, err, sizeof err);
	struct conf *c3 = conf_parse(CONF_EDGE, "e.conf", EDGE_MIN, 1, a3, err, sizeof err);
	assert_non_null(c1);
	assert_non_null(c2);
	assert_non_null(c3);
	assert_int_equal(conf_link_rate_rx(c1), 20000000);
	assert_int_equal(conf_link_rate(c1), 2000000);
	assert_int_equal(conf_link_rate_rx(c2), 1544000);
	assert_int_equal(conf_link_rate(c2), 1544000);
	char *d1 = conf_dump(c1), *d2 = conf_dump(c2);
	assert_non_null(strstr(d1, "link_rate = 20000000/2000000\n"));
	assert_non_null(strstr(d2, "link_rate = 1544000\n"));
	assert_int_equal(conf_restart_keep(c1, c3, key, sizeof key), 0); /* reloaded on SIGHUP */
	free(d1);
	free(d2);
	conf_free(c1);
	conf_free(c2);
	conf_free(c3);
}

/* Fills a sockaddr from a numeric address. */
static struct sockaddr *sa(struct sockaddr_storage *ss, const char *ip)
{
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1)
		s4->sin_family = AF_INET;
	else if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1)
		s6->sin6_family = AF_INET6;
	else
		fail_msg("bad test address %s", ip);
	return (struct sockaddr *)ss;
}

struct match_case {
	const char *ip;
	uint16_t port;
	int allowed;
};

/* The allow list admits exactly its CIDRs and ports, IPv4-mapped included. */
static void test_allow(void **state)
{
	static const struct match_case mc[] = {
		{ "10.1.2.3", 80, 1 }, { "10.1.2.3", 443, 1 }, { "10.1.2.3", 22, 0 },
		{ "11.0.0.1", 80, 0 }, { "::ffff:10.9.9.9", 443, 1 }, { "2001:db8::5", 22, 1 },
		{ "2001:db9::5", 22, 0 }, { "192.168.1.1", 1500, 1 }, { "192.168.1.1", 2001, 0 },
		{ "172.16.5.4", 8080, 1 }, { "172.16.5.4", 8081, 0 }, { "172.17.0.1", 8080, 0 },
		{ "127.0.0.1", 43021, 1 }, { "::ffff:127.0.0.1", 43021, 1 }, { "127.0.0.2", 43021, 0 },
		{ "10.200.1.1", 7, 1 }, { "::ffff:10.200.1.1", 7, 1 }, { "10.201.1.1", 7, 0 },
	};
	char err[512];
	struct sockaddr_storage ss;
	struct conf *c = conf_parse(CONF_CORE, "t", CORE_MIN
				    "allow = 10.0.0.0/8:80,443, [2001:db8::]/32, :1000-2000\n"
				    "allow = 172.16.5.4:8080\n"
				    "allow = [::ffff:127.0.0.1]/128:43021, [::ffff:10.200.0.0]/112:7\n", 0, NULL, err, sizeof err);
	assert_non_null(c);
	for (size_t i = 0; i < sizeof mc / sizeof mc[0]; i++)
		if (conf_allow_match(c, sa(&ss, mc[i].ip), mc[i].port) != mc[i].allowed)
			fail_msg("%s port %u: expected %d", mc[i].ip, mc[i].port, mc[i].allowed);
	conf_free(c);
	/* No allow line: nothing at all is allowed. */
	c = conf_parse(CONF_CORE, "t", CORE_MIN, 0, NULL, err, sizeof err);
	assert_non_null(c);
	assert_int_equal(conf_allow_match(c, sa(&ss, "127.0.0.1"), 80), 0);
	assert_int_equal(conf_allow_match(c, sa(&ss, "::1"), 80), 0);
	conf_free(c);
}

/* The allow list as a core tells it (ALLOW) matches as the core's own; a
 * payload that is not one is refused with what is wrong; a list too long
 * for a frame is not told. */
static void test_allow_wire(void **state)
{
	static const char *const ips[] = { "10.1.2.3", "11.0.0.1", "::ffff:10.9.9.9", "2001:db8::5", "2001:db9::5",
					   "192.168.1.1", "172.16.5.4", "127.0.0.1" };
	static const uint16_t ports[] = { 22, 80, 443, 1500, 2001, 8080 };
	char err[512];
	struct sockaddr_storage ss;
	uint8_t buf[PROTO_MAX_PAYLOAD];
	struct conf *c = conf_parse(CONF_CORE, "t", CORE_MIN "allow = 10.0.0.0/8:80,443, [2001:db8::]/32, :1000-2000\n"
				    "allow = 172.16.5.4:8080\n", 0, NULL, err, sizeof err);
	assert_non_null(c);
	size_t n = conf_allow_wire(c, buf, sizeof buf);
	assert_int_equal(n, 2 + (2 + 4 + 2 + 8) + (2 + 16 + 2) + (2 + 2 + 4) + (2 + 4 + 2 + 4));
	struct conf_acl *a = conf_acl_from_wire(buf, n, err, sizeof err);
	assert_non_null(a);
	assert_int_equal(conf_acl_count(a), 4);
	for (size_t i = 0; i < sizeof ips / sizeof *ips; i++)
		for (size_t j = 0; j < sizeof ports / sizeof *ports; j++)
			if (conf_acl_match(a, sa(&ss, ips[i]), ports[j]) != conf_allow_match(c, sa(&ss, ips[i]), ports[j]))
				fail_msg("%s port %u: the told list disagrees", ips[i], ports[j]);
	conf_acl_free(a);
	static const struct { const char *hex, *why; } bad[] = {
		{ "00", "shorter than its count" },
		{ "ffff", "not told" },
		{ "0001", "entry cut short" },
		{ "00010518", "unknown address family" },
		{ "00010421", "prefix longer than the address" },
		{ "0001040a0a00", "entry cut short" },
		{ "0001040a0a0000000001", "port ranges cut short" },
		{ "0001040a0a0000000001" "00000050", "bad port range" },
		{ "0001040a0a0000000001" "00510050", "bad port range" },
		{ "00010000000000", "bytes after its entries" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		size_t k = strlen(bad[i].hex) / 2;
		for (size_t b = 0; b < k; b++)
			sscanf(bad[i].hex + 2 * b, "%2hhx", &buf[b]);
		err[0] = 0;
		assert_null(conf_acl_from_wire(buf, k, err, sizeof err));
		if (strcmp(err, bad[i].why))
			fail_msg("%s: '%s', expected '%s'", bad[i].hex, err, bad[i].why);
	}
	conf_free(c);
	/* 1,400 entries of 12 bytes: over a frame, told as not told */
	size_t cap = 1400 * 40 + 64;
	char *text = malloc(cap), *p = text;
	p += sprintf(p, CORE_MIN);
	for (int i = 0; i < 1400; i++) /* (lines of 100: a line has a length limit) */
		p += sprintf(p, "%s10.%d.%d.1:80%s", i % 100 ? "" : "allow = ", i / 256, i % 256, i % 100 == 99 ? "\n" : ",");
	c = conf_parse(CONF_CORE, "t", text, 0, NULL, err, sizeof err);
	if (!c)
		fail_msg("%s", err);
	assert_int_equal(conf_allow_wire(c, buf, sizeof buf), 2);
	assert_int_equal(buf[0] << 8 | buf[1], PROTO_ALLOW_UNTOLD);
	conf_free(c);
	free(text);
}

/* Targeted rules match first; the untargeted rule is the default. */
static void test_optimize(void **state)
{
	char err[512];
	struct sockaddr_storage ss;
	struct conf *c = conf_parse(CONF_EDGE, "t", EDGE_MIN "optimize = passthrough :22,443\n"
				    "optimize = lz\noptimize = tfo [fd00::]/8:80, 10.0.0.0/8\n",
				    0, NULL, err, sizeof err);
	assert_non_null(c);
	assert_int_equal(conf_optimize_for(c, sa(&ss, "1.2.3.4"), 22), CONF_OPT_PASSTHROUGH);
	assert_int_equal(conf_optimize_for(c, NULL, 443), CONF_OPT_PASSTHROUGH);
	assert_int_equal(conf_optimize_for(c, sa(&ss, "10.2.3.4"), 8080), CONF_OPT_TFO);
	assert_int_equal(conf_optimize_for(c, sa(&ss, "fd12::1"), 80), CONF_OPT_TFO);
	assert_int_equal(conf_optimize_for(c, sa(&ss, "fd12::1"), 81), CONF_OPT_LZ);
	assert_int_equal(conf_optimize_for(c, sa(&ss, "8.8.8.8"), 80), CONF_OPT_LZ);
	conf_free(c);
	c = conf_parse(CONF_EDGE, "t", EDGE_MIN, 0, NULL, err, sizeof err);
	assert_int_equal(conf_optimize_for(c, sa(&ss, "8.8.8.8"), 80), CONF_OPT_FULL);
	assert_null(conf_ignored(c, 0));
	conf_free(c);
	/* one side's keys on the other: accepted (older configs), each said to be ignored */
	c = conf_parse(CONF_CORE, "t", CORE_MIN "optimize = lz\nclassify = ef :22\n", 0, NULL, err, sizeof err);
	assert_non_null(c);
	assert_string_equal(conf_ignored(c, 0), "t:6: 'optimize' has no effect on a core (it is for the edge only): ignored");
	assert_string_equal(conf_ignored(c, 1), "t:7: 'classify' has no effect on a core (it is for the edge only): ignored");
	assert_null(conf_ignored(c, 2));
	char *d = conf_dump(c); /* the effective configuration leaves it out */
	assert_null(strstr(d, "optimize"));
	free(d);
	conf_free(c);
	c = conf_parse(CONF_EDGE, "t", EDGE_MIN "workers = 0\n", 0, NULL, err, sizeof err);
	assert_non_null(c);
	assert_string_equal(conf_ignored(c, 0), "t:7: 'workers' has no effect on an edge (it is for the core only): ignored");
	assert_null(strstr(d = conf_dump(c), "workers"));
	free(d);
	conf_free(c);
}

/* classify: first matching rule wins, -1 when none does; the dump keeps the
 * rules; a reload may change them (no restart needed); the command line's
 * rules replace the file's. */
static void test_classify(void **state)
{
	char err[512], key[32];
	struct sockaddr_storage ss;
	char *args[] = { "--classify=cs1 :873" };
	struct conf *c = conf_parse(CONF_EDGE, "t", EDGE_MIN "classify = ef :22, [fd00::]/8:3389\n"
				    "classify = af41 10.0.0.0/8, :22\n", 0, NULL, err, sizeof err);
	struct conf *c2 = conf_parse(CONF_EDGE, "t", EDGE_MIN "classify = ef :22\n", 1, args, err, sizeof err);
	struct conf *c0 = conf_parse(CONF_EDGE, "t", EDGE_MIN, 0, NULL, err, sizeof err);
	assert_non_null(c);
	assert_non_null(c2);
	assert_non_null(c0);
	assert_int_equal(conf_classify(c, sa(&ss, "10.1.2.3"), 22), 46);
	assert_int_equal(conf_classify(c, NULL, 22), 46);
	assert_int_equal(conf_classify(c, sa(&ss, "fd00::5"), 3389), 46);
	assert_int_equal(conf_classify(c, sa(&ss, "fe80::5"), 3389), -1);
	assert_int_equal(conf_classify(c, sa(&ss, "10.1.2.3"), 80), 34);
	assert_int_equal(conf_classify(c, NULL, 80), -1);
	assert_int_equal(conf_classify(c2, sa(&ss, "10.1.2.3"), 22), -1);
	assert_int_equal(conf_classify(c2, sa(&ss, "10.1.2.3"), 873), 8);
	assert_int_equal(conf_classify(c0, sa(&ss, "10.1.2.3"), 22), -1);
	char *d = conf_dump(c);
	assert_non_null(strstr(d, "classify = ef :22, [fd00::]/8:3389\nclassify = af41 10.0.0.0/8, :22\n"));
	assert_int_equal(conf_restart_keep(c, c0, key, sizeof key), 0);
	assert_int_equal(conf_restart_keep(c0, c2, key, sizeof key), 0);
	free(d);
	conf_free(c);
	conf_free(c2);
	conf_free(c0);
}

/* Value parsers: sizes, rates, durations. */
static void test_units(void **state)
{
	uint64_t v;
	struct conf_addr a;
	assert_null(conf_size_parse("1024", &v)); assert_int_equal(v, 1024);
	assert_null(conf_size_parse("4k", &v)); assert_int_equal(v, 4096);
	assert_null(conf_size_parse("3MiB", &v)); assert_int_equal(v, 3u << 20);
	assert_null(conf_size_parse("2TB", &v)); assert_int_equal(v, 2ull << 40);
	assert_non_null(conf_size_parse("-1G", &v));
	assert_non_null(conf_size_parse("", &v));
	assert_null(conf_addr_parse("[fe80::1]:443", &a));
	assert_string_equal(a.host, "fe80::1");
	char b[300];
	assert_string_equal(conf_addr_format(&a, b, sizeof b), "[fe80::1]:443");
	/* a link-local address names its interface */
	assert_null(conf_addr_parse("[fe80::1%lo]:443", &a));
	assert_string_equal(conf_addr_format(&a, b, sizeof b), "[fe80::1%lo]:443");
	struct sockaddr_storage ss;
	socklen_t sl;
	assert_int_equal(conf_addr_resolve(&a, 0, &ss, &sl, b, sizeof b), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_int_equal(((struct sockaddr_in6 *)&ss)->sin6_scope_id, if_nametoindex("lo"));
	assert_string_equal(conf_addr_parse("[fe80::1%]:443", &a), "bad interface after '%' in the IPv6 address");
	assert_string_equal(conf_addr_parse("[fe80::1%a b]:443", &a), "bad interface after '%' in the IPv6 address");
	assert_string_equal(conf_addr_parse("[fe80::x%lo]:443", &a), "bad IPv6 address");
	assert_string_equal(conf_addr_parse("[fe80::1%nosuch0]:443", &a), "no such network interface on this host (the name after '%')");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_many_listeners),
		cmocka_unit_test(test_other_role),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_link_rate),
		cmocka_unit_test(test_lan_bulk),
		cmocka_unit_test(test_allow),
		cmocka_unit_test(test_allow_wire),
		cmocka_unit_test(test_optimize),
		cmocka_unit_test(test_classify),
		cmocka_unit_test(test_qos),
		cmocka_unit_test(test_units),
	};
	private_netns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
