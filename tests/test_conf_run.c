/* test_conf_run.c: the configuration at run time: -c FILE with overrides and
 * reload, the example configs, certificate expiry, the log, the daemon's
 * start (test_conf.c: the parser's tables and matchers). */
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
#include "test_netns.h"

#define EDGE_MIN "peer = core.example:4433\nstore = /var/lib/wanopt\ntls_cert = /p/e.crt\n" \
		 "tls_key = /p/e.key\ntls_ca = /p/ca.crt\nforward = 127.0.0.1:2121 -> ftp.example:21\n"
#define CORE_MIN "listen = [::]:4433\nstore = /var/lib/wanopt\ntls_cert = /p/c.crt\n" \
		 "tls_key = /p/c.key\ntls_ca = /p/ca.crt\n"

/* Writes text to a fresh temporary file; returns its malloc'd path. */
/* A CA with edge and core certificates (wanopt pki init), made once: the
 * daemons check that their TLS files load before they start. */
static char pki_top[64], pki_dir[80];

static void test_pki_remove(void)
{
	static const char *const files[] = { "ca.crt", "ca.key", "edge.crt", "edge.key", "core.crt", "core.key" };
	char path[128];
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(path, sizeof path, "%s/%s", pki_dir, files[i]);
		unlink(path);
	}
	rmdir(pki_dir);
	rmdir(pki_top);
}

static const char *test_pki(void)
{
	if (!pki_dir[0]) {
		snprintf(pki_top, sizeof pki_top, "/tmp/wanopt-test-pki-XXXXXX");
		assert_non_null(mkdtemp(pki_top));
		snprintf(pki_dir, sizeof pki_dir, "%s/p", pki_top);
		atexit(test_pki_remove);
		char *argv[] = { "pki", "init", pki_dir };
		assert_int_equal(px_cmd_pki(3, argv), 0);
	}
	return pki_dir;
}

static char *write_tmp(const char *text)
{
	char *path = strdup("/tmp/wanopt-test-conf-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

/* -c FILE with overrides; reload sees the new file, flags restart-only keys. */

/* Rewrite path with text, reload c from it: the reload must be accepted and
 * name `key` as needing a restart. */
static void expect_restart(const struct conf *c, const char *path, const char *text, const char *key)
{
	char err[512], got[64];
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	struct conf *n = conf_reload(c, err, sizeof err);
	assert_non_null(n);
	assert_int_equal(conf_restart_keep(c, n, got, sizeof got), 1);
	assert_string_equal(got, key);
	char *now = conf_dump(n);
	assert_null(strstr(now, text + strlen(EDGE_MIN))); /* runs as before */
	free(now);
	conf_free(n);
}
static void test_args_reload(void **state)
{
	char err[512], key[32];
	char *path = write_tmp(EDGE_MIN "log_level = warn\n");
	char *argv[] = { "edge", "-c", path, "--store_size=1G" };
	struct conf *c = conf_from_args(CONF_EDGE, 4, argv, err, sizeof err), *n;
	assert_non_null(c);
	assert_int_equal(conf_log_level(c), LOGL_WARN);
	assert_int_equal(conf_store_size(c), 1ull << 30);
	FILE *f = fopen(path, "w");
	fputs(EDGE_MIN "log_level = debug\nforward = [::]:99 -> x:1\n", f);
	fclose(f);
	n = conf_reload(c, err, sizeof err);
	assert_non_null(n);
	assert_int_equal(conf_log_level(n), LOGL_DEBUG);
	assert_int_equal(conf_forward_count(n), 2);
	assert_int_equal(conf_store_size(n), 1ull << 30);
	assert_int_equal(conf_restart_keep(c, n, key, sizeof key), 0);
	conf_free(n);
	f = fopen(path, "w");
	fputs(EDGE_MIN "peer = other:1\n", f);
	fclose(f);
	n = conf_reload(c, err, sizeof err);
	assert_null(n);
	char want[600];
	snprintf(want, sizeof want, "%s:7: 'peer' given twice (first at %s:1)", path, path);
	assert_string_equal(err, want);
	expect_restart(c, path, EDGE_MIN "tunnels = 3\n", "'tunnels'");
	expect_restart(c, path, EDGE_MIN "protocol_max = 1\n", "'protocol_max'");
	/* every one that changed is named; the adopted configuration keeps them */
	f = fopen(path, "w");
	fputs("peer = other:4433\nstore = /elsewhere\ntls_cert = /p/e.crt\ntls_key = /p/e.key\ntls_ca = /p/ca.crt\n"
	      "forward = 127.0.0.1:2121 -> ftp.example:21\nstats = 127.0.0.1:9999\nbypass_mark = 7\n", f);
	fclose(f);
	n = conf_reload(c, err, sizeof err);
	assert_non_null(n);
	char keys[128];
	assert_int_equal(conf_restart_keep(c, n, keys, sizeof keys), 2);
	assert_string_equal(keys, "'stats', 'bypass_mark'");
	assert_string_equal(conf_store(n), "/elsewhere"); /* reloaded: the node goes over to it (node_swap.c) */
	assert_string_equal(conf_peer(n)->host, "other"); /* reloaded: the edge moves (edge_peer.c) */
	assert_int_equal(conf_bypass_mark(n), conf_bypass_mark(c));
	assert_int_equal(conf_restart_keep(n, n, keys, sizeof keys), 0);
	conf_free(n);
	conf_free(c);
	char *bad[] = { "edge", "stray" };
	assert_null(conf_from_args(CONF_EDGE, 2, bad, err, sizeof err));
	assert_string_equal(err, "stray: unexpected argument (expected -c FILE or --key=value)");
	char *missing[] = { "edge", "-c", "/nonexistent/x.conf" };
	assert_null(conf_from_args(CONF_EDGE, 3, missing, err, sizeof err));
	assert_string_equal(err, "/nonexistent/x.conf: cannot open: No such file or directory");
	unlink(path);
	free(path);
}

/* The shipped example configs parse; `wanopt conf` exits 2 on a bad one. */
static void test_examples_cli(void **state)
{
	char err[512];
	char *e[] = { "edge", "-c", "conf/edge.conf" }, *c[] = { "core", "-c", "conf/core.conf" };
	struct conf *cf = conf_from_args(CONF_EDGE, 3, e, err, sizeof err);
	if (!cf)
		fail_msg("conf/edge.conf: %s", err);
	assert_string_equal(conf_tls_ca(cf), "conf/pki/ca.crt");
	conf_free(cf);
	cf = conf_from_args(CONF_CORE, 3, c, err, sizeof err);
	if (!cf)
		fail_msg("conf/core.conf: %s", err);
	struct sockaddr_storage ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	memset(&ss, 0, sizeof ss);
	s4->sin_family = AF_INET;
	inet_pton(AF_INET, "10.20.0.15", &s4->sin_addr);
	assert_true(conf_allow_match(cf, (struct sockaddr *)&ss, 445));
	assert_false(conf_allow_match(cf, (struct sockaddr *)&ss, 22));
	conf_free(cf);
	char *bad[] = { "conf", "core", "-c", "conf/edge.conf" };
	assert_int_equal(px_cmd_conf(4, bad), 2);
	/* a word that is no role is named (stderr into a file for the look) */
	char *role[] = { "wanopt conf", "router", "-c", "conf/edge.conf" }, said[256] = "";
	FILE *tmp = tmpfile();
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	assert_int_equal(px_cmd_conf(4, role), 2);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	said[fread(said, 1, sizeof said - 1, tmp)] = 0;
	fclose(tmp);
	assert_string_equal(said, "wanopt conf: unknown role 'router' (edge or core first; see wanopt conf --help)\n");
	char *nocert[] = { "conf", "edge", "-c", "conf/edge.conf", "--log_level=warn" };
	assert_int_equal(px_cmd_conf(5, nocert), 2); /* conf/pki/ does not exist */
	char crt[128], key[128], ca[128];
	snprintf(crt, sizeof crt, "--tls_cert=%s/edge.crt", test_pki());
	snprintf(key, sizeof key, "--tls_key=%s/edge.key", test_pki());
	snprintf(ca, sizeof ca, "--tls_ca=%s/ca.crt", test_pki());
	char *good[] = { "conf", "edge", "-c", "conf/edge.conf", "--log_level=warn", crt, key, ca };
	assert_int_equal(px_cmd_conf(8, good), 0);
	/* what it says of the certificate's expiry (node_tls.c): pki init's 3650 days */
	char text[1024];
	cf = conf_from_args(CONF_EDGE, 7, good + 1, err, sizeof err);
	assert_non_null(cf);
	assert_int_equal(px_node_tls_expiry(cf, text, sizeof text), 0);
	if (!strstr(text, "(O=wanopt/CN=wanopt-edge) valid until ") || !strstr(text, " (3650 days)"))
		fail_msg("expiry: %s", text);
	conf_free(cf);
}

/* A certificate within 30 days of its expiry is a warning, naming the day. */
static void test_cert_expiry_soon(void **state)
{
	char dir[] = "/tmp/wanopt-test-soon-XXXXXX", crt[256], key[256], ca[256], err[512], text[1024];
	assert_non_null(mkdtemp(dir));
	char pki[64];
	snprintf(pki, sizeof pki, "%s/p", dir);
	char *init[] = { "pki", "init", pki, "--days=5" };
	assert_int_equal(px_cmd_pki(4, init), 0);
	snprintf(crt, sizeof crt, "--tls_cert=%s/core.crt", pki);
	snprintf(key, sizeof key, "--tls_key=%s/core.key", pki);
	snprintf(ca, sizeof ca, "--tls_ca=%s/ca.crt", pki);
	char *args[] = { "core", "--listen=127.0.0.1:1", "--store=/tmp/s", crt, key, ca };
	struct conf *cf = conf_from_args(CONF_CORE, 6, args, err, sizeof err);
	if (!cf)
		fail_msg("%s", err);
	assert_int_equal(px_node_tls_expiry(cf, text, sizeof text), 1);
	if (!strstr(text, "(O=wanopt/CN=wanopt-core) expires on ") || !strstr(text, ", in 5 days: renew it"))
		fail_msg("expiry: %s", text);
	conf_free(cf);
	char *none[] = { "core", "--listen=127.0.0.1:1", "--store=/tmp/s", "--tls_cert=/nonexistent.crt", key, ca };
	cf = conf_from_args(CONF_CORE, 6, none, err, sizeof err);
	assert_non_null(cf);
	assert_int_equal(px_node_tls_expiry(cf, text, sizeof text), -1);
	assert_non_null(strstr(text, "/nonexistent.crt"));
	conf_free(cf);
	static const char *const files[] = { "ca.crt", "ca.key", "edge.crt", "edge.key", "core.crt", "core.key" };
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(text, sizeof text, "%s/%s", pki, files[i]);
		unlink(text);
	}
	rmdir(pki);
	rmdir(dir);
}

/* Reads what the logger wrote into the pipe. */
static char *drain(int fd)
{
	static char buf[4096];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

/* Log lines: threshold, one line per event, escapes, ident, journal prefix. */
static void test_log(void **state)
{
	int p[2];
	enum log_level l;
	assert_int_equal(pipe(p), 0);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	log_set_fd(p[1]);
	log_set_ident("edge");
	log_set_level(LOGL_WARN);
	log_info("hidden %d", 1);
	log_debug("hidden too");
	assert_string_equal(drain(p[0]), "");
	log_warn("tunnel down: %s", "refused\nfake line");
	char *out = drain(p[0]);
	assert_non_null(strstr(out, "Z edge warn: tunnel down: refused\\x0afake line\n"));
	assert_int_equal(strchr(out, '\n') - out, (long)strlen(out) - 1); /* one line */
	assert_int_equal(log_level_parse("debug", &l), 0);
	assert_int_equal(l, LOGL_DEBUG);
	assert_int_equal(log_level_parse("loud", &l), -1);
	assert_string_equal(log_level_name(LOGL_ERROR), "error");
	/* Under systemd (JOURNAL_STREAM names the fd): priority prefix, no time. */
	struct stat st;
	char js[64];
	fstat(p[1], &st);
	snprintf(js, sizeof js, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", js, 1);
	log_set_fd(p[1]);
	log_error("store %s", "full");
	assert_string_equal(drain(p[0]), "<3>edge error: store full\n");
	unsetenv("JOURNAL_STREAM");
	log_set_fd(-1);
	log_set_ident(NULL);
	log_set_level(LOGL_INFO);
	close(p[0]);
	close(p[1]);
}

/* Hooks of the test daemon: each reports to a pipe. */
static int hook_fd = -1;

static void report(const char *what)
{
	ssize_t n = write(hook_fd, what, strlen(what) + 1);
	(void)n;
}

static int hook_start(struct px_daemon *d, void *arg)
{
	report("start");
	return 0;
}

static int hook_reload(struct px_daemon *d, const struct conf *old, const struct conf *c, void *arg)
{
	report(conf_log_level(c) == LOGL_DEBUG ? "reload debug" : "reload other");
	return 0;
}

static void hook_drain(struct px_daemon *d, void *arg)
{
	report("drain");
	px_daemon_exit(d, 0);
}

/* Waits for the next report from the child (NUL-terminated). */
static void expect(int fd, const char *want)
{
	char buf[64];
	size_t n = 0;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	while (n < sizeof buf - 1) {
		assert_int_equal(poll(&p, 1, 5000), 1);
		assert_int_equal(read(fd, buf + n, 1), 1);
		if (buf[n++] == 0)
			break;
	}
	assert_string_equal(buf, want);
}

/* The daemon shell: --help, exit 2 on a bad config, stats server up, SIGHUP
 * re-reads the file (a broken file keeps the old config), SIGTERM drains. */
static void test_daemon(void **state)
{
	static const struct px_daemon_hooks hooks = { hook_start, hook_reload, hook_drain, NULL };
	char *bad[] = { "core", "--listen=x" };
	assert_int_equal(px_daemon_main(CONF_CORE, 2, bad, &hooks, NULL), 2);
	char *path = write_tmp(CORE_MIN "stats = 127.0.0.1:19471\nstore_size = 3G\n");
	char crt[128], key[128], ca[128];
	snprintf(crt, sizeof crt, "--tls_cert=%s/core.crt", test_pki());
	snprintf(key, sizeof key, "--tls_key=%s/core.key", test_pki());
	snprintf(ca, sizeof ca, "--tls_ca=%s/ca.crt", test_pki());
	char *argv[] = { "core", "-c", path, "--log_level=warn", crt, key, ca };
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		hook_fd = p[1];
		_exit(px_daemon_main(CONF_CORE, 7, argv, &hooks, NULL));
	}
	close(p[1]);
	expect(p[0], "start");
	char err[256], *body = NULL;
	assert_int_equal(stats_fetch("127.0.0.1", 19471, "/metrics", 5000, &body, err, sizeof err), 0);
	assert_non_null(strstr(body, "wanopt_info{role=\"core\"} 1\n"));
	assert_non_null(strstr(body, "wanopt_store_size_bytes 3221225472\n"));
	free(body);
	FILE *f = fopen(path, "w");
	fputs(CORE_MIN "stats = 127.0.0.1:19471\nbroken\n", f);
	fclose(f);
	kill(pid, SIGHUP); /* rejected: no reload hook call */
	usleep(200000);
	f = fopen(path, "w");
	fputs(CORE_MIN "stats = 127.0.0.1:19471\n", f);
	fclose(f);
	usleep(200000);
	kill(pid, SIGHUP);
	expect(p[0], "reload other"); /* --log_level=warn still wins over the file */
	kill(pid, SIGTERM);
	expect(p[0], "drain");
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	close(p[0]);
	unlink(path);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_args_reload),
		cmocka_unit_test(test_examples_cli),
		cmocka_unit_test(test_cert_expiry_soon),
		cmocka_unit_test(test_log),
		cmocka_unit_test(test_daemon),
	};
	private_netns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
