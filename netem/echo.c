/* echo.c: `wanem echo` and `wanem rtt`, an interactive session to time next
 * to bulk transfers (how long a small request waits behind them).
 *
 * echo: every accepted connection (one process each) gets its bytes back
 * until it half-closes.
 * rtt: one connection; every --interval ms a message of --size bytes (a
 * sequence number and pseudo-random bytes, so it does not compress) is sent
 * and read back; each reply must be exact.  Prints one JSON line: round trips,
 * p50, p95 and max in ms, complete (false on a mismatch, an error, or a round
 * trip over --timeout seconds). */
#include "xfer.h"

#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum { ECHO_IDLE_S = 120, ECHO_MAX_SIZE = 65536 }; /* larger could deadlock: sent before read */

struct eopt {
	const char *addr;
	double seconds, interval_ms, timeout;
	long size;
};

/* Sets SO_RCVTIMEO and SO_SNDTIMEO to s seconds. */
static void timeouts(int fd, double s)
{
	struct timeval tv = { (time_t)s, (suseconds_t)((s - (double)(time_t)s) * 1e6) };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* Writes all n bytes (blocking socket); 0 or -1. */
static int put_all(int fd, const uint8_t *b, size_t n)
{
	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w, n -= (size_t)w;
	}
	return 0;
}

/* Reads exactly n bytes (blocking socket); 0, or -1 (error, timeout, EOF). */
static int get_all(int fd, uint8_t *b, size_t n)
{
	while (n) {
		ssize_t r = recv(fd, b, n, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = ECONNRESET;
			return -1;
		}
		b += r, n -= (size_t)r;
	}
	return 0;
}

/* Echoes fd's bytes until EOF or an error (or ECHO_IDLE_S of silence). */
static void echo_one(int fd)
{
	uint8_t buf[65536];
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	timeouts(fd, ECHO_IDLE_S);
	for (;;) {
		ssize_t r = recv(fd, buf, sizeof buf, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || put_all(fd, buf, (size_t)r) < 0)
			break;
	}
	close(fd);
}

/* Parses the options of both subcommands; 0, 1 (--help) or -1. */
static int parse(int argc, char **argv, struct eopt *o, const char *addrkey)
{
	static const struct option lo[] = {
		{ "listen", 1, 0, 'a' }, { "connect", 1, 0, 'a' }, { "seconds", 1, 0, 's' },
		{ "interval", 1, 0, 'i' }, { "size", 1, 0, 'z' }, { "timeout", 1, 0, 't' },
		{ "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
	int c, idx;
	char *end = NULL;

	*o = (struct eopt){ .seconds = 10, .interval_ms = 100, .timeout = 10, .size = 200 };
	optind = 1;
	while ((c = getopt_long(argc, argv, "", lo, &idx)) != -1) {
		if (c == 'a' && !strcmp(lo[idx].name, addrkey))
			o->addr = optarg;
		else if (c == 's')
			o->seconds = strtod(optarg, &end);
		else if (c == 'i')
			o->interval_ms = strtod(optarg, &end);
		else if (c == 't')
			o->timeout = strtod(optarg, &end);
		else if (c == 'z')
			o->size = strtol(optarg, &end, 10);
		else
			return c == 'h' ? 1 : -1;
		if (end && *end)
			return -1;
		end = NULL;
	}
	if (!o->addr || optind != argc || !(o->seconds > 0) || o->interval_ms < 0 || !(o->timeout > 0) ||
	    o->size < 16 || o->size > ECHO_MAX_SIZE)
		return -1;
	return 0;
}

int wn_echo_main(int argc, char **argv)
{
	struct eopt o;
	struct sockaddr_storage ss;
	socklen_t len;
	int s;

	int rc = parse(argc, argv, &o, "listen");

	rc = wn_cli_start(rc, "echo --listen=HOST:PORT", "echo", o.addr, &ss, &len);
	if (rc >= 0)
		return rc;
	signal(SIGCHLD, SIG_IGN); /* no zombies */
	if ((s = wn_listen(&ss, len, 0)) < 0) {
		fprintf(stderr, "wanem echo: %s: %s\n", o.addr, strerror(errno));
		return 1;
	}
	for (;;) {
		int c = wn_accept(s, "echo");

		if (c < 0)
			return 1;
		pid_t p = fork();
		if (p == 0) {
			close(s);
			echo_one(c);
			_exit(0);
		}
		if (p < 0)
			echo_one(c); /* no process to spare: serve it here */
		else
			close(c);
	}
}

/* Fills m[0..n) with message `seq`: the number, then xorshift bytes. */
static void message(uint8_t *m, size_t n, uint64_t seq)
{
	uint64_t x = seq * 0x9E3779B97F4A7C15ULL + 1;

	memcpy(m, &seq, sizeof seq);
	for (size_t i = sizeof seq; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		m[i] = (uint8_t)x;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Runs the session on connected socket s: fills rtt[0..*n) (capacity cap);
 * returns NULL or what went wrong. */
static const char *session(const struct eopt *o, int s, double *rtt, size_t cap, size_t *n)
{
	size_t sz = (size_t)o->size;
	uint8_t *m = malloc(sz), *back = malloc(sz);
	const char *why = NULL;
	double t0 = wn_mono();
	long long ns = (long long)(o->interval_ms * 1e6);
	struct timespec pause = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };

	if (!m || !back)
		why = "out of memory";
	while (!why && wn_mono() - t0 < o->seconds && *n < cap) {
		message(m, sz, *n);
		double t1 = wn_mono();
		if (put_all(s, m, sz) < 0 || get_all(s, back, sz) < 0)
			why = errno == EAGAIN || errno == EWOULDBLOCK ? "a round trip timed out" : strerror(errno);
		else if (memcmp(m, back, sz))
			why = "an echo differs from what was sent";
		else
			rtt[(*n)++] = wn_mono() - t1;
		if (!why)
			nanosleep(&pause, NULL);
	}
	if (!why) { /* the echo server must end cleanly */
		shutdown(s, SHUT_WR);
		if (recv(s, back, 1, 0) != 0)
			why = "no clean end after the last round trip";
	}
	free(m);
	free(back);
	return why;
}

int wn_rtt_main(int argc, char **argv)
{
	struct eopt o;
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;

	int rc = parse(argc, argv, &o, "connect");

	rc = wn_cli_start(rc,
			      "rtt --connect=HOST:PORT [--seconds=S (10)] [--interval=MS (100)] [--size=BYTES (200)] "
			      "[--timeout=S (10)]", "rtt", o.addr, &ss, &len);
	if (rc >= 0)
		return rc;
	size_t cap = (size_t)(o.seconds * 1000 / (o.interval_ms > 1 ? o.interval_ms : 1)) + 2, n = 0;
	double *rtt = calloc(cap, sizeof *rtt);
	int s = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	const char *why = NULL;

	if (!rtt || s < 0)
		why = "out of resources";
	if (!why) {
		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		timeouts(s, o.timeout);
		if (connect(s, (struct sockaddr *)&ss, len) < 0)
			why = strerror(errno);
		else
			why = session(&o, s, rtt, cap, &n);
	}
	if (s >= 0)
		close(s);
	qsort(rtt, n, sizeof *rtt, cmp_double);
	printf("{\"round_trips\":%zu,\"p50_ms\":%.1f,\"p95_ms\":%.1f,\"max_ms\":%.1f,\"complete\":%s", n,
	       n ? rtt[n / 2] * 1e3 : 0.0, n ? rtt[(size_t)((double)n * 0.95)] * 1e3 : 0.0, n ? rtt[n - 1] * 1e3 : 0.0,
	       why ? "false" : "true");
	if (why)
		printf(",\"error\":\"%s\"", why);
	printf("}\n");
	free(rtt);
	return why ? 1 : 0;
}
