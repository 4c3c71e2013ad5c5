/*
 * test_tun_util.h: helpers for the tunnel tests (included by one test file
 * each; everything static): test certificates made with the openssl CLI in a
 * temporary directory, tunnel configurations, and running the event loop
 * until a condition holds or a deadline passes.
 *
 * Certificates: ca.crt signs core (server, CN core, SAN 127.0.0.1) and edge
 * (client); ca2.crt, another CA, signs rogue (a client the core must refuse).
 */
#ifndef WANOPT_TEST_TUN_UTIL_H
#define WANOPT_TEST_TUN_UTIL_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "tun.h"

static char tt_dir[64];

/* Run a shell command; abort the test program if it fails. */
static void tt_sh(const char *cmd)
{
	if (system(cmd) != 0) {
		fprintf(stderr, "command failed: %s\n", cmd);
		exit(1);
	}
}

/* Make the test PKI in a fresh temporary directory (once per process). */
static void tt_make_certs(void)
{
	char cmd[2048];
	const char *key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

	signal(SIGPIPE, SIG_IGN);
	if (tt_dir[0])
		return;
	snprintf(tt_dir, sizeof(tt_dir), "/tmp/tuntest.XXXXXX");
	if (!mkdtemp(tt_dir))
		exit(1);
	for (int i = 0; i < 2; i++) {
		const char *ca = i ? "ca2" : "ca";
		snprintf(cmd, sizeof(cmd), "cd %s && openssl req -x509 %s -keyout %s.key -out %s.crt "
			 "-days 2 -subj /CN=test-%s >/dev/null 2>&1", tt_dir, key, ca, ca, ca);
		tt_sh(cmd);
	}
	const char *leaf[][3] = { { "core", "ca", "subjectAltName=DNS:core,IP:127.0.0.1" },
				  { "edge", "ca", "subjectAltName=DNS:edge" },
				  { "rogue", "ca2", "subjectAltName=DNS:rogue" } };
	for (int i = 0; i < 3; i++) {
		snprintf(cmd, sizeof(cmd),
			 "cd %s && openssl req %s -keyout %s.key -out %s.csr -subj /CN=%s >/dev/null 2>&1 && "
			 "printf '%s\\n' > %s.ext && "
			 "openssl x509 -req -in %s.csr -CA %s.crt -CAkey %s.key -CAcreateserial "
			 "-days 2 -extfile %s.ext -out %s.crt >/dev/null 2>&1",
			 tt_dir, key, leaf[i][0], leaf[i][0], leaf[i][0], leaf[i][2], leaf[i][0],
			 leaf[i][0], leaf[i][1], leaf[i][1], leaf[i][0], leaf[i][0]);
		tt_sh(cmd);
	}
}

/* Remove the temporary PKI. */
static void tt_remove_certs(void)
{
	char cmd[128];

	if (!tt_dir[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tt_dir);
	tt_sh(cmd);
	tt_dir[0] = 0;
}

/* A configuration for "core", "edge" or "rogue" (cert and key), trusting
 * ca_name ("ca" or "ca2").  Paths live in a ring of 16 configurations. */
static tun_config tt_config(const char *who, const char *ca_name)
{
	static char ring[16][3][128];
	static unsigned next;
	char (*p)[128] = ring[next++ % 16];
	tun_config c;

	memset(&c, 0, sizeof(c));
	snprintf(p[0], sizeof(p[0]), "%s/%s.crt", tt_dir, who);
	snprintf(p[1], sizeof(p[1]), "%s/%s.key", tt_dir, who);
	snprintf(p[2], sizeof(p[2]), "%s/%s.crt", tt_dir, ca_name);
	c.cert_file = p[0];
	c.key_file = p[1];
	c.ca_file = p[2];
	c.node_name = who;
	c.backoff_min_ms = 20;
	c.backoff_max_ms = 200;
	return c;
}

/* Milliseconds since an arbitrary start. */
static double tt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Wakes the loop up regularly so conditions get checked. */
static void tt_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd; (void)what; (void)arg;
}

/* Run base until cond(arg) is true (returns 1) or ms pass (returns 0). */
static int tt_run_until(struct event_base *base, int (*cond)(void *), void *arg, int ms)
{
	double end = tt_now_ms() + ms;
	struct event *tick = event_new(base, -1, EV_PERSIST, tt_tick, NULL);
	struct timeval tv = { 0, 5000 };
	int ok;

	event_add(tick, &tv);
	while (!(ok = cond(arg)) && tt_now_ms() < end)
		event_base_loop(base, EVLOOP_ONCE);
	event_free(tick);
	return ok;
}

/* Condition: the int pointed to is non-zero. */
static int tt_flag(void *arg)
{
	return *(int *)arg != 0;
}

/* cmocka group setup/teardown: certificates made once for the whole file. */
static int tt_setup(void **state)
{
	(void)state;
	tt_make_certs();
	return 0;
}

static int tt_teardown(void **state)
{
	(void)state;
	tt_remove_certs();
	return 0;
}

#endif
