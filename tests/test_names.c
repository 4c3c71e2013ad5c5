/* test_names.c: names kept resolved in the background (proxy/names.c) with
 * a real evdns base: a numeric address at once, a name from the hosts file,
 * a name server that never answers (the lookup runs without holding the
 * loop; freed while it runs, nothing leaks) or answers too late (the name
 * fails), and a name made anew by a reload starting with what the old one
 * had. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/dns.h>
#include <event2/event.h>

#include "../proxy/dns.h"
#include "../proxy/names.h"

/* A UDP socket on 127.0.0.1 that never answers; its port into *port. */
static int silent_server(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* An evdns base asking only 127.0.0.1:port, one try of timeout_s. */
static struct evdns_base *dns_at(struct event_base *base, uint16_t port, const char *timeout_s)
{
	struct evdns_base *dns = evdns_base_new(base, 0);
	char ns[32];
	assert_non_null(dns);
	snprintf(ns, sizeof ns, "127.0.0.1:%u", port);
	assert_int_equal(evdns_base_nameserver_ip_add(dns, ns), 0);
	assert_int_equal(evdns_base_set_option(dns, "timeout:", timeout_s), 0);
	assert_int_equal(evdns_base_set_option(dns, "attempts:", "1"), 0);
	return dns;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Run base for up to ms, or until px_name_get(n) != 1. */
static int run_until_answer(struct event_base *base, struct px_name *n, int ms)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int rc = 1;
	for (int i = 0; i < ms / 10 && (rc = px_name_get(n, 0, &ss, &sl)) == 1; i++) {
		struct timeval tv = { 0, 10000 };
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	return rc;
}

static void test_numeric_and_hosts(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	uint16_t port;
	int fd = silent_server(&port);
	struct evdns_base *dns = dns_at(base, port, "5");
	struct px_dns *pd = px_dns_wrap(dns);
	assert_non_null(pd);
	struct sockaddr_storage ss;
	socklen_t sl;
	struct conf_addr v4 = { "192.0.2.7", 445 }, v6 = { "2001:db8::7", 873 }, lh = { "localhost", 80 };

	struct px_name *a = px_name_new(base, pd, &v4, "test");
	assert_int_equal(px_name_get(a, 0, &ss, &sl), 0); /* at once, no DNS */
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 445);
	struct px_name *b = px_name_new(base, pd, &v6, "test");
	assert_int_equal(px_name_get(b, 3, &ss, &sl), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_int_equal(sl, sizeof(struct sockaddr_in6));
	/* the hosts file answers without the (silent) name server */
	evdns_base_load_hosts(dns, NULL);
	struct px_name *c = px_name_new(base, pd, &lh, "test");
	assert_int_equal(run_until_answer(base, c, 1000), 0);
	assert_int_equal(px_name_get(c, 0, &ss, &sl), 0);
	assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 80);
	px_name_free(a);
	px_name_free(b);
	px_name_free(c);
	px_dns_free(pd, base);
	event_base_free(base);
	close(fd);
}

/* A name server that never answers: the lookup is in flight and the loop
 * runs on; freeing the name then cancels it (nothing leaks: ASan). */
static void test_silent_server(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	uint16_t port;
	int fd = silent_server(&port);
	struct evdns_base *dns = dns_at(base, port, "30");
	struct px_dns *pd = px_dns_wrap(dns);
	assert_non_null(pd);
	struct conf_addr n = { "nowhere.wanopt.test", 80 };
	struct sockaddr_storage ss;
	socklen_t sl;

	double t0 = now_s();
	struct px_name *p = px_name_new(base, pd, &n, "test");
	assert_true(now_s() - t0 < 0.1); /* did not wait for an answer */
	assert_int_equal(run_until_answer(base, p, 300), 1);
	assert_int_equal(px_name_get(p, 0, &ss, &sl), 1); /* still the first lookup */
	char q[512];
	assert_true(recv(fd, q, sizeof q, MSG_DONTWAIT) > 12); /* it did ask */
	px_name_free(p);
	struct timeval tv = { 0, 50000 };
	event_base_loopexit(base, &tv);
	event_base_dispatch(base); /* the cancelled lookup calls back */
	px_dns_free(pd, base);
	event_base_free(base);
	close(fd);
}

/* A name server that does not answer within the timeout: the name fails,
 * px_name_get says so; freed while looked up again later, nothing leaks. */
static void test_failure(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	uint16_t port;
	int fd = silent_server(&port);
	struct evdns_base *dns = dns_at(base, port, "0.2");
	struct px_dns *pd = px_dns_wrap(dns);
	assert_non_null(pd);
	struct conf_addr n = { "nowhere.wanopt.test", 80 };
	struct px_name *p = px_name_new(base, pd, &n, "test");
	assert_int_equal(run_until_answer(base, p, 3000), -1);
	px_name_refresh(p); /* a new lookup in flight */
	px_name_free(p);
	px_dns_free(pd, base); /* as a stopping edge or core does */
	event_base_free(base);
	close(fd);
}

/* A name made anew (a reload) while its lookup cannot answer starts with
 * the addresses the old one had, for the same host and port only. */
static void test_seed(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	uint16_t port;
	int fd = silent_server(&port);
	struct evdns_base *dns = dns_at(base, port, "30");
	struct px_dns *pd = px_dns_wrap(dns);
	assert_non_null(pd);
	char hosts[] = "/tmp/wanopt-test-hosts-XXXXXX";
	int hfd = mkstemp(hosts);
	assert_true(hfd >= 0);
	const char line[] = "192.0.2.10 seed.wanopt.test\n";
	assert_int_equal(write(hfd, line, sizeof line - 1), (ssize_t)(sizeof line - 1));
	close(hfd);
	assert_int_equal(evdns_base_load_hosts(dns, hosts), 0);
	unlink(hosts);
	struct conf_addr a = { "seed.wanopt.test", 873 }, b = { "seed.wanopt.test", 874 };
	struct sockaddr_storage ss;
	socklen_t sl;
	struct px_name *old = px_name_new(base, pd, &a, "test");
	assert_int_equal(run_until_answer(base, old, 1000), 0);
	evdns_base_clear_host_addresses(dns); /* from now on only the silent server */
	struct px_name *other = px_name_new(base, pd, &b, "test"), *anew = px_name_new(base, pd, &a, "test");
	assert_int_equal(px_name_get(anew, 0, &ss, &sl), 1);
	px_name_seed(other, old); /* another port: nothing taken */
	assert_int_equal(px_name_get(other, 0, &ss, &sl), 1);
	px_name_seed(anew, old);
	assert_int_equal(px_name_get(anew, 0, &ss, &sl), 0);
	assert_int_equal(((struct sockaddr_in *)&ss)->sin_addr.s_addr, inet_addr("192.0.2.10"));
	assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 873);
	px_name_free(old);
	px_name_free(other);
	px_name_free(anew);
	px_dns_free(pd, base);
	event_base_free(base);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_numeric_and_hosts),
		cmocka_unit_test(test_silent_server),
		cmocka_unit_test(test_failure),
		cmocka_unit_test(test_seed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
