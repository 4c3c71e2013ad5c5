/* sock.c: WAN/LAN TCP socket tuning and TCP_INFO.  Never logs: errors go to
 * the caller's buffer.  Uses <linux/tcp.h> (not <netinet/tcp.h>) for the full
 * struct tcp_info (delivery rate, min RTT, bytes acked). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/tcp.h>
#include <netinet/in.h>

#include "tfo.h"

/* Writes "what: strerror(errno)" into err, keeps errno, returns -1. */
static int tfo_err(char *err, size_t errlen, const char *what)
{
	int e = errno;
	snprintf(err, errlen, "%s: %s", what, strerror(e));
	errno = e;
	return -1;
}

/* setsockopt of an int, with a message naming the option on failure. */
static int tfo_setint(int fd, int level, int opt, int val, const char *name,
		      char *err, size_t errlen)
{
	if (setsockopt(fd, level, opt, &val, sizeof val) < 0)
		return tfo_err(err, errlen, name);
	return 0;
}

/* Looks for cc in the kernel's list of available congestion controls. */
int tfo_cc_available(const char *cc)
{
	char line[512], *tok, *save = NULL;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_congestion_control", "r");
	int found = 0;

	if (!f)
		return 0;
	if (fgets(line, sizeof line, f))
		for (tok = strtok_r(line, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
			if (!strcmp(tok, cc))
				found = 1;
	fclose(f);
	return found;
}

/* Tries cc, then cubic; reads back the name in effect. */
int tfo_set_cc(int fd, const char *cc, char *used, size_t usedlen, int *fallback,
	       char *err, size_t errlen)
{
	char got[16] = "";
	socklen_t glen = sizeof got;

	if (fallback)
		*fallback = 0;
	if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) < 0) {
		if ((errno != ENOENT && errno != EPERM) || !strcmp(cc, "cubic"))
			return tfo_err(err, errlen, "TCP_CONGESTION");
		if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "cubic", 5) < 0)
			return tfo_err(err, errlen, "TCP_CONGESTION cubic");
		if (fallback)
			*fallback = 1;
	}
	if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, got, &glen) < 0)
		return tfo_err(err, errlen, "getsockopt TCP_CONGESTION");
	got[sizeof got - 1] = 0;
	if (used)
		snprintf(used, usedlen, "%s", got);
	return 0;
}

/* 4 x rate x rtt in bytes, clamped; 0 when unknown. */
uint64_t tfo_bdp_bytes(uint64_t rate_bps, uint32_t rtt_us)
{
	if (!rate_bps || !rtt_us)
		return 0;
	/* rate/8 bytes per second x rtt/1e6 seconds, x4 headroom: a receiver
	 * advertises about half its buffer, and on a lossy link the sender
	 * holds a round trip of unacknowledged data behind each hole plus
	 * TCP_NOTSENT_LOWAT.  At x2 (3 Mbit/s, 300 ms, 0.2 % loss) the sender
	 * was window-limited, which kept BBR in startup, overshooting the
	 * bottleneck's queue: 11 % of the bytes were sent twice, 12 % slower. */
	unsigned __int128 b = (unsigned __int128)(rate_bps / 8) * rtt_us / 1000000 * 4; /* no overflow */
	uint64_t bdp = b > TFO_BUF_MAX ? TFO_BUF_MAX : (uint64_t)b;
	if (bdp < TFO_BUF_MIN)
		bdp = TFO_BUF_MIN;
	if (bdp > TFO_BUF_MAX)
		bdp = TFO_BUF_MAX;
	return bdp;
}

/* One buffer: the FORCE variant first (bypasses [rw]mem_max, needs
 * CAP_NET_ADMIN), the plain one when not permitted. */
static int tfo_set_buf(int fd, int force_opt, int opt, int val, const char *name,
		       char *err, size_t errlen)
{
	if (setsockopt(fd, SOL_SOCKET, force_opt, &val, sizeof val) == 0)
		return 0;
	if (errno != EPERM)
		return tfo_err(err, errlen, name);
	return tfo_setint(fd, SOL_SOCKET, opt, val, name, err, errlen);
}

/* Sets both buffers (the kernel doubles the value for its bookkeeping). */
int tfo_set_bufs(int fd, uint64_t bytes, char *err, size_t errlen)
{
	int v = bytes > INT_MAX / 2 ? INT_MAX / 2 : (int)bytes;

	if (tfo_set_buf(fd, SO_SNDBUFFORCE, SO_SNDBUF, v, "SO_SNDBUF", err, errlen) < 0)
		return -1;
	return tfo_set_rcvbuf(fd, bytes, err, errlen);
}

int tfo_set_rcvbuf(int fd, uint64_t bytes, char *err, size_t errlen)
{
	int v = bytes > INT_MAX / 2 ? INT_MAX / 2 : (int)bytes;

	return tfo_set_buf(fd, SO_RCVBUFFORCE, SO_RCVBUF, v, "SO_RCVBUF", err, errlen) < 0 ? -1 : 0;
}

/* SO_KEEPALIVE plus its three TCP parameters. */
int tfo_set_keepalive(int fd, int idle, int intvl, int cnt, char *err, size_t errlen)
{
	if (tfo_setint(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE", err, errlen) < 0 ||
	    tfo_setint(fd, IPPROTO_TCP, TCP_KEEPIDLE, idle, "TCP_KEEPIDLE", err, errlen) < 0 ||
	    tfo_setint(fd, IPPROTO_TCP, TCP_KEEPINTVL, intvl, "TCP_KEEPINTVL", err, errlen) < 0 ||
	    tfo_setint(fd, IPPROTO_TCP, TCP_KEEPCNT, cnt, "TCP_KEEPCNT", err, errlen) < 0)
		return -1;
	return 0;
}

/* o's value, or the default when o is NULL or the field is 0. */
#define TFO_OPT(o, f, d) ((o) && (o)->f ? (o)->f : (d))

/* tfo_bdp_bytes of rate and rtt, held to o's buf_max. */
static uint64_t bdp_within(const struct tfo_opts *o, uint64_t rate_bps, uint32_t rtt_us)
{
	uint64_t b = tfo_bdp_bytes(rate_bps, rtt_us), max = TFO_OPT(o, buf_max, TFO_BUF_MAX);
	return b > max ? (max < TFO_BUF_MIN ? TFO_BUF_MIN : max) : b;
}

/* The link-dependent part of tfo_tune_wan: buffers (with both hints), pacing
 * cap, NOTSENT_LOWAT; t->bufsize and t->pace_bps say what was set. */
int tfo_set_link(int fd, const struct tfo_opts *o, struct tfo_tuned *t, char *err, size_t errlen)
{
	t->bufsize = bdp_within(o, o ? o->rate_bps : 0, o ? o->rtt_us : 0);
	if (t->bufsize && tfo_set_bufs(fd, t->bufsize, err, errlen) < 0)
		return -1;
	if (tfo_pace_set(fd, o ? o->pace_bps : 0, err, errlen))
		return -1;
	t->pace_bps = o && o->pace_bps ? o->pace_bps : 0;
	return tfo_setint(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT,
			  (int)TFO_OPT(o, notsent_lowat, TFO_NOTSENT_LOWAT_DEFAULT), "TCP_NOTSENT_LOWAT", err, errlen);
}

/* Congestion control, BDP buffers (with hints), NOTSENT_LOWAT, NODELAY,
 * keepalive and user timeout, stopping at the first failure. */
int tfo_tune_wan(int fd, const struct tfo_opts *o, struct tfo_tuned *out, char *err, size_t errlen)
{
	struct tfo_tuned t = { .bufsize = 0 };
	const char *cc = o && o->cc ? o->cc : "bbr";

	if (tfo_set_cc(fd, cc, t.cc, sizeof t.cc, &t.cc_fallback, err, errlen) < 0 ||
	    tfo_set_link(fd, o, &t, err, errlen) < 0 ||
	    tfo_setint(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY", err, errlen) < 0 ||
	    tfo_set_keepalive(fd, TFO_OPT(o, keepidle, TFO_KEEPIDLE_DEFAULT),
			      TFO_OPT(o, keepintvl, TFO_KEEPINTVL_DEFAULT),
			      TFO_OPT(o, keepcnt, TFO_KEEPCNT_DEFAULT), err, errlen) < 0 ||
	    tfo_setint(fd, IPPROTO_TCP, TCP_USER_TIMEOUT,
		       (int)TFO_OPT(o, user_timeout_ms, TFO_USER_TIMEOUT_DEFAULT),
		       "TCP_USER_TIMEOUT", err, errlen) < 0)
		return -1;
	if (out)
		*out = t;
	return 0;
}

/* NODELAY and a slower keepalive for LAN sockets. */
uint64_t tfo_pace_get(int fd)
{
	unsigned long v = 0; /* bytes/s; none is ~0 */
	socklen_t len = sizeof v;
	if (getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v, &len) < 0 || len != sizeof v)
		return UINT64_MAX;
	return v == ~0UL ? 0 : (uint64_t)v * 8u;
}

int tfo_pace_set(int fd, uint64_t bps, char *err, size_t errlen)
{
	unsigned long v = bps ? (unsigned long)(bps / 8) : ~0UL; /* bytes/s; none is ~0 */
	if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v, sizeof v) < 0)
		return tfo_err(err, errlen, "SO_MAX_PACING_RATE");
	return 0;
}

int tfo_tune_lan(int fd, char *err, size_t errlen)
{
	if (tfo_setint(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY", err, errlen) < 0)
		return -1;
	return tfo_set_keepalive(fd, 60, 15, 4, err, errlen);
}

/* Copies the fields wanopt uses out of struct tcp_info. */
int tfo_info(int fd, struct tfo_info *out, char *err, size_t errlen)
{
	struct tcp_info ti;
	socklen_t len = sizeof ti;

	memset(&ti, 0, sizeof ti);
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return tfo_err(err, errlen, "TCP_INFO");
	memset(out, 0, sizeof *out);
	out->state = ti.tcpi_state;
	out->rtt_us = ti.tcpi_rtt;
	out->rttvar_us = ti.tcpi_rttvar;
	out->min_rtt_us = ti.tcpi_min_rtt;
	out->delivery_rate = ti.tcpi_delivery_rate;
	out->pacing_rate = ti.tcpi_pacing_rate == UINT64_MAX ? 0 : ti.tcpi_pacing_rate;
	out->total_retrans = ti.tcpi_total_retrans;
	out->snd_cwnd = ti.tcpi_snd_cwnd;
	out->snd_mss = ti.tcpi_snd_mss;
	out->bytes_acked = ti.tcpi_bytes_acked;
	out->bytes_sent = ti.tcpi_bytes_sent;
	out->bytes_received = ti.tcpi_bytes_received;
	out->notsent_bytes = ti.tcpi_notsent_bytes;
	return 0;
}

/* Current SO_SNDBUF as the kernel reports it (doubled), halved back. */
static int tfo_cur_buf(int fd, uint64_t *bytes, char *err, size_t errlen)
{
	int v = 0;
	socklen_t len = sizeof v;

	if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &len) < 0)
		return tfo_err(err, errlen, "getsockopt SO_SNDBUF");
	*bytes = (uint64_t)v / 2;
	return 0;
}

/* Grows the buffers to 4 x rate x min RTT when that exceeds them. */
int tfo_retune(int fd, const struct tfo_opts *o, uint64_t *bufsize, char *err, size_t errlen)
{
	struct tfo_info ti;
	uint64_t cur = 0, want, rate;

	if (tfo_info(fd, &ti, err, errlen) < 0 || tfo_cur_buf(fd, &cur, err, errlen) < 0)
		return -1;
	rate = o && o->rate_bps ? o->rate_bps : ti.delivery_rate * 8;
	want = bdp_within(o, rate, ti.min_rtt_us ? ti.min_rtt_us : ti.rtt_us);
	int grew = want > cur;
	if (grew) {
		if (tfo_set_bufs(fd, want, err, errlen) < 0)
			return -1;
		cur = want;
	}
	if (bufsize)
		*bufsize = cur;
	return grew;
}
