/* test_tun_resolve.c: a tunnel client whose peer address comes from its
 * resolve hook (tun_cbs.resolve, how an edge avoids waiting on DNS): while
 * the hook says a lookup runs, the client tries again shortly and reports
 * nothing; once it has addresses, successive dials rotate through them; a
 * name that does not resolve is a failed dial, reported with the hook's
 * reason, and redialled with backoff. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_tun_util.h"

struct hook {
	int pending;          /* answer 1 this many more times */
	int fail;             /* answer -1 */
	unsigned calls, last_attempt;
	uint16_t port;
	int up, errors, server_up;
	char err[1024];
};

static int hook_resolve(void *arg, unsigned attempt, struct sockaddr_storage *ss, socklen_t *sl, char *why,
			size_t len)
{
	struct hook *h = arg;
	h->calls++;
	h->last_attempt = attempt;
	if (h->fail) {
		snprintf(why, len, "example.invalid does not resolve");
		return -1;
	}
	if (h->pending > 0) {
		h->pending--;
		return 1;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;
	memset(ss, 0, sizeof *ss);
	a->sin_family = AF_INET;
	a->sin_port = htons(h->port);
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	*sl = sizeof *a;
	return 0;
}

static void c_up(tun_conn *c, void *arg) { (void)c; ((struct hook *)arg)->up++; }
static void c_down(tun_conn *c, void *arg, const char *why) { (void)c; (void)arg; (void)why; }
static void c_error(void *arg, const char *msg)
{
	struct hook *h = arg;
	h->errors++;
	snprintf(h->err, sizeof h->err, "%s", msg);
}
static void s_up(tun_conn *c, void *arg) { (void)c; ((struct hook *)arg)->server_up++; }
static void s_error(void *arg, const char *msg) { (void)arg; (void)msg; }

static int cond_up(void *arg)
{
	struct hook *h = arg;
	return h->up && h->server_up;
}

static void test_resolve_hook(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	tun_config sc = tt_config("core", "ca"), cc = tt_config("edge", "ca");
	struct hook h = { .pending = 3 };
	tun_cbs scbs = { .on_up = s_up, .on_down = c_down, .on_error = s_error };
	tun_cbs ccbs = { .on_up = c_up, .on_down = c_down, .on_error = c_error, .resolve = hook_resolve };
	char err[512];

	tun_server *srv = tun_server_new(base, &sc, "127.0.0.1", 0, &scbs, &h, err, sizeof err);
	assert_non_null(srv);
	h.port = tun_server_port(srv);
	double t0 = tt_now_ms();
	/* the name given is never looked up: the hook answers */
	tun_client *cl = tun_client_new(base, &cc, "peer.invalid", 4433, &ccbs, &h, err, sizeof err);
	assert_non_null(cl);
	assert_true(tt_run_until(base, cond_up, &h, 5000));
	assert_int_equal(h.calls, 4);             /* three "still looking", then the address */
	assert_int_equal(h.errors, 0);            /* waiting is not a failure */
	assert_true(tt_now_ms() - t0 < 3 * TUN_RESOLVE_WAIT_MS + 1000);
	assert_int_equal(h.last_attempt, 0);      /* no dial was made while waiting */
	tun_client_free(cl);

	/* a name that does not resolve: reported with the hook's reason, redialled */
	memset(&h, 0, sizeof h);
	h.fail = 1;
	cl = tun_client_new(base, &cc, "peer.invalid", 4433, &ccbs, &h, err, sizeof err);
	assert_non_null(cl);
	assert_true(tt_run_until(base, tt_flag, &h.errors, 2000));
	assert_non_null(strstr(h.err, "tunnel to peer.invalid:4433: cannot resolve: example.invalid does not resolve"));
	h.fail = 0;
	h.port = tun_server_port(srv);
	assert_true(tt_run_until(base, cond_up, &h, 5000)); /* the next dial after the backoff */
	assert_true(h.calls >= 2);
	tun_client_free(cl);
	tun_server_free(srv);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resolve_hook),
	};
	return cmocka_run_group_tests(tests, tt_setup, tt_teardown);
}
