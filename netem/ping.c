/* ping.c: ICMP echo over a raw socket (root).  Requests go out at a fixed
 * interval; replies are matched by id and sequence number and timed with the
 * kernel's receive timestamp against the send time on the same clock. */
#include "ping.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { WN_PING_MAX = 65535, WN_PING_MAXSIZE = 8192 };

struct ping {
	int                 s;
	struct sockaddr_in  to;
	uint16_t            id;
	int                 count, size, quiet, json;
	double              interval_s, wait_s;
	uint64_t           *sent_ns;        /* per sequence number, 0 = not sent */
	double             *rtt_ms;         /* per sequence number, < 0 = no reply */
	int                 sent, received, dups;
};

/* CLOCK_REALTIME in ns: the clock SO_TIMESTAMPNS uses. */
static uint64_t rt_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Internet checksum of n bytes. */
static uint16_t cksum(const void *buf, size_t n)
{
	const uint8_t *b = buf;
	uint32_t sum = 0;

	for (; n > 1; n -= 2, b += 2)
		sum += (uint32_t)(b[0] << 8 | b[1]);
	if (n)
		sum += (uint32_t)(b[0] << 8);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

/* Sends echo request number seq. */
static int send_one(struct ping *p, int seq)
{
	unsigned char pkt[sizeof(struct icmphdr) + WN_PING_MAXSIZE];
	struct icmphdr *h = (struct icmphdr *)pkt;
	size_t n = sizeof *h + (size_t)p->size;

	memset(pkt, 0, n);
	for (size_t i = sizeof *h; i < n; i++)
		pkt[i] = (unsigned char)i;
	h->type = ICMP_ECHO;
	h->un.echo.id = htons(p->id);
	h->un.echo.sequence = htons((uint16_t)seq);
	h->checksum = cksum(pkt, n);
	p->sent_ns[seq] = rt_ns();
	if (sendto(p->s, pkt, n, 0, (struct sockaddr *)&p->to, sizeof p->to) != (ssize_t)n) {
		fprintf(stderr, "wanem ping: send: %s\n", strerror(errno));
		return -1;
	}
	p->sent++;
	return 0;
}

/* Reads every queued reply and records its round-trip time. */
static void recv_all(struct ping *p)
{
	unsigned char buf[65536], cbuf[256];

	for (;;) {
		struct iovec iov = { buf, sizeof buf };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				    .msg_controllen = sizeof cbuf };
		ssize_t n = recvmsg(p->s, &m, MSG_DONTWAIT);
		uint64_t t = 0;
		struct icmphdr *h;
		size_t ihl;
		int seq;

		if (n <= 0)
			return;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS) {
				struct timespec ts;

				memcpy(&ts, CMSG_DATA(c), sizeof ts);
				t = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
			}
		ihl = (size_t)(buf[0] & 0x0f) * 4;
		if ((size_t)n < ihl + sizeof *h)
			continue;
		h = (struct icmphdr *)(buf + ihl);
		seq = ntohs(h->un.echo.sequence);
		if (h->type != ICMP_ECHOREPLY || ntohs(h->un.echo.id) != p->id || seq >= p->count ||
		    !p->sent_ns[seq])
			continue;
		if (p->rtt_ms[seq] >= 0) {
			p->dups++;
			continue;
		}
		p->rtt_ms[seq] = ((t ? t : rt_ns()) - p->sent_ns[seq]) / 1e6;
		p->received++;
		if (!p->quiet)
			printf("seq=%d rtt=%.3f ms\n", seq, p->rtt_ms[seq]);
	}
}

/* qsort order for doubles, ascending. */
static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Prints the summary (text or JSON). */
static void summary(struct ping *p)
{
	double *v = calloc((size_t)p->count + 1, sizeof *v), sum = 0;
	int n = 0;

	if (!v)
		return;
	for (int i = 0; i < p->count; i++)
		if (p->rtt_ms[i] >= 0)
			sum += (v[n++] = p->rtt_ms[i]);
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	if (p->json && !n) /* no reply: no round trip to give */
		printf("{\"sent\":%d,\"received\":0,\"dups\":%d,\"min_ms\":null,\"avg_ms\":null,"
		       "\"median_ms\":null,\"max_ms\":null}\n", p->sent, p->dups);
	else if (p->json)
		printf("{\"sent\":%d,\"received\":%d,\"dups\":%d,\"min_ms\":%.4f,\"avg_ms\":%.4f,"
		       "\"median_ms\":%.4f,\"max_ms\":%.4f}\n", p->sent, p->received, p->dups,
		       v[0], sum / n, v[n / 2], v[n - 1]);
	else if (!n)
		printf("sent=%d received=0 loss=%.3f%% rtt: no replies\n", p->sent, p->sent ? 100.0 : 0);
	else
		printf("sent=%d received=%d loss=%.3f%% rtt min/avg/median/max = "
		       "%.3f/%.3f/%.3f/%.3f ms\n", p->sent, p->received,
		       p->sent ? 100.0 * (p->sent - p->received) / p->sent : 0,
		       n ? v[0] : 0, n ? sum / n : 0, n ? v[n / 2] : 0, n ? v[n - 1] : 0);
	free(v);
}

/* Sends count requests at the interval, then waits up to wait_s for late replies. */
static int run(struct ping *p)
{
	uint64_t start = rt_ns(), iv = (uint64_t)(p->interval_s * 1e9), end = 0;

	for (;;) {
		uint64_t now = rt_ns(), next;
		struct pollfd pfd = { p->s, POLLIN, 0 };

		if (p->sent < p->count && now >= start + (uint64_t)p->sent * iv) {
			if (send_one(p, p->sent) < 0)
				return -1;
			continue;
		}
		if (p->sent == p->count && !end)
			end = now + (uint64_t)(p->wait_s * 1e9);
		if ((end && now >= end) || (p->sent == p->count && p->received == p->count))
			return 0;
		next = p->sent < p->count ? start + (uint64_t)p->sent * iv : end;
		if (poll(&pfd, 1, next > now ? (int)((next - now) / 1000000) : 0) > 0)
			recv_all(p);
	}
}

/* Prints the ping usage to stderr. */
static void usage(FILE *f)
{
	fprintf(f, "usage: wanem ping [--count=N] [--interval=MS] [--size=BYTES] [--wait=S] "
		"[--quiet] [--json] IPV4\n");
}

/* An option's number in lo..hi, or -1 with what is wrong on stderr. */
static double ping_num(const char *opt, const char *v, double lo, double hi)
{
	char *end;
	double x = strtod(v, &end);
	if (end == v || *end || x < lo || x > hi) {
		fprintf(stderr, "wanem ping: --%s=%s: expected a number from %g to %g\n", opt, v, lo, hi);
		return -1;
	}
	return x;
}

int wn_ping_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "count", 1, 0, 'c' }, { "interval", 1, 0, 'i' }, { "size", 1, 0, 's' },
		{ "wait", 1, 0, 'w' }, { "quiet", 0, 0, 'q' }, { "json", 0, 0, 'j' }, { "help", 0, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct ping p = { .count = 10, .size = 56, .interval_s = 0.2, .wait_s = 2 };
	int one = 1, o, rc = 1;

	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'h': usage(stdout); return 0;
		case 'c': p.count = ping_num("count", optarg, 1, WN_PING_MAX); break;
		case 'i': p.interval_s = ping_num("interval", optarg, 0, 60000) / 1000; break;
		case 's': p.size = ping_num("size", optarg, 0, WN_PING_MAXSIZE); break;
		case 'w': p.wait_s = ping_num("wait", optarg, 0, 600); break;
		case 'q': p.quiet = 1; break;
		case 'j': p.json = p.quiet = 1; break;
		default: usage(stderr); return 2;
		}
	}
	if (p.count < 0 || p.interval_s < 0 || p.size < 0 || p.wait_s < 0)
		return 2; /* ping_num said which */
	if (optind != argc - 1) {
		fprintf(stderr, "wanem ping: expected one IPv4 ADDRESS (--help for usage)\n");
		return 2;
	}
	p.to.sin_family = AF_INET;
	if (inet_pton(AF_INET, argv[optind], &p.to.sin_addr) != 1) {
		fprintf(stderr, "wanem ping: bad IPv4 address '%s'\n", argv[optind]);
		return 2;
	}
	p.id = (uint16_t)getpid();
	p.sent_ns = calloc((size_t)p.count, sizeof *p.sent_ns);
	p.rtt_ms = malloc((size_t)p.count * sizeof *p.rtt_ms);
	if (!p.sent_ns || !p.rtt_ms)
		goto out;
	for (int i = 0; i < p.count; i++)
		p.rtt_ms[i] = -1;
	if ((p.s = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP)) < 0) {
		fprintf(stderr, "wanem ping: raw socket: %s (needs root)\n", strerror(errno));
		goto out;
	}
	setsockopt(p.s, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
	if (run(&p) == 0) {
		summary(&p);
		rc = p.received ? 0 : 1;
	}
	close(p.s);
out:
	free(p.sent_ns);
	free(p.rtt_ms);
	return rc;
}
