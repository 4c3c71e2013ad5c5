/* xfer.c: timed TCP transfers.
 *
 * serve: accepts one connection at a time.  --send: writes the source to the
 * client and closes; with --slice=N, connection k gets the file's bytes from
 * k x N (mod its size) on, N of them (wrapping): many small files.  --recv:
 * reads to EOF, stores the bytes, answers with the byte count as 8 big-endian
 * bytes, closes.
 * get: the client side; it times from before connect() to the last byte
 * (download) or to the receipt (upload) and prints one JSON line.  With
 * --count=K (download) it fetches K times, one connection after the other,
 * into one sink, and times them all. */
#include "xfer.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { WN_BUF = 256 * 1024, WN_IDLE_MS = 120000 };

struct xopt {
	const char *addr;         /* --listen or --connect */
	const char *send, *recv;  /* file names, "-" = stdin / stdout */
	long long   zero;         /* --send-zero: bytes of zeros to send instead of a file */
	int         window;       /* TCP_WINDOW_CLAMP, 0 = kernel default */
	int         once;
	double      max_time, steady_after;
	long long   slice;        /* serve: bytes per connection, from k x slice on (0: all) */
	unsigned long long served; /* serve --slice: connections served so far */
	long long   count;        /* get: sequential downloads (default 1) */
};

/* Seconds on CLOCK_MONOTONIC. */
double wn_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* --progress: a once-a-second status line on stderr (get only). */
static struct {
	int    on;
	double t0, next;
} prog;

/* Prints the progress line if a second has passed; final prints it and ends the line. */
static void progress(long long bytes, int final)
{
	double now = wn_mono(), dt;

	if (!prog.on || (!final && now < prog.next))
		return;
	/* a terminal gets one line updated each second, a log a line every 10 s */
	prog.next = now + (prog.on == 2 ? 1 : 10);
	if (final && prog.on == 1)
		return;
	dt = now - prog.t0;
	fprintf(stderr, "%s      %8.2f MB  %6.1f s  %9.1f KB/s%s", prog.on == 2 ? "\r" : "",
		bytes / 1e6, dt, dt > 0 ? bytes / 1e3 / dt : 0.0, final || prog.on == 1 ? "\n" : "");
}

/* Resolves "HOST:PORT" or "[V6]:PORT" (numeric only). */
int wn_resolve(const char *hp, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[256];
	const char *colon = strrchr(hp, ':');
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM }, *ai;
	size_t hl;

	if (!colon || colon == hp || strlen(hp) >= sizeof host)
		return -1;
	hl = (size_t)(colon - hp);
	if (hp[0] == '[' && hl > 2 && hp[hl - 1] == ']')
		memcpy(host, hp + 1, hl - 2), host[hl - 2] = '\0';
	else
		memcpy(host, hp, hl), host[hl] = '\0';
	if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
		return -1;
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

int wn_cli_start(int prc, const char *usage, const char *cmd, const char *addr, struct sockaddr_storage *ss,
		 socklen_t *len)
{
	if (prc) {
		fprintf(prc > 0 ? stdout : stderr, "usage: wanem %s\n", usage);
		return prc > 0 ? 0 : 2;
	}
	if (wn_resolve(addr, ss, len) < 0) {
		fprintf(stderr, "wanem %s: bad address '%s' (expected HOST:PORT)\n", cmd, addr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	return -1;
}

int wn_accept(int s, const char *cmd)
{
	for (;;) {
		int c = accept(s, NULL, NULL);

		if (c >= 0 || (errno != EINTR && errno != ECONNABORTED)) {
			if (c < 0)
				fprintf(stderr, "wanem %s: accept: %s\n", cmd, strerror(errno));
			return c;
		}
	}
}

int wn_listen(const struct sockaddr_storage *ss, socklen_t len, int window)
{
	int s, one = 1;

	if ((s = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    (window > 0 && setsockopt(s, IPPROTO_TCP, TCP_WINDOW_CLAMP, &window, sizeof window) < 0) ||
	    bind(s, (const struct sockaddr *)ss, len) < 0 || listen(s, 16) < 0) {
		int e = errno;
		close(s);
		errno = e;
		return -1;
	}
	return s;
}

/* Waits until fd is ready for ev.  Returns 1 (ready), 0 (the deadline passed) or
 * -1 (error, or no progress for WN_IDLE_MS: the peer is stuck). */
static int wait_fd(int fd, short ev, double deadline)
{
	struct pollfd p = { fd, ev, 0 };
	double left = deadline - wn_mono();
	int ms = left <= 0 ? 0 : left * 1000 > WN_IDLE_MS ? WN_IDLE_MS : (int)(left * 1000) + 1;
	int r = poll(&p, 1, ms);

	if (r < 0)
		return errno == EINTR ? 1 : -1;
	if (r == 0)
		return wn_mono() >= deadline ? 0 : -1;
	return 1;
}

/* Writes all n bytes to a non-blocking socket before the deadline; returns 0, 1 (time up) or -1. */
static int send_all(int fd, const char *b, size_t n, double deadline)
{
	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);

		if (w > 0) {
			b += w, n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (wn_mono() >= deadline)
			return 1;
		if (wait_fd(fd, POLLOUT, deadline) < 0)
			return -1;      /* 0: the deadline check above ends the loop */
	}
	return 0;
}

/* Sends the source (a file, stdin or --send-zero bytes) to fd; *sent counts bytes.
 * Returns 0 when all was sent, 1 if time ran out, -1 on error. */
static int send_source(const struct xopt *o, int fd, long long *sent, double deadline)
{
	static char buf[WN_BUF];
	int in = -1, rc = 0;

	if (!o->zero && (in = strcmp(o->send, "-") == 0 ? 0 : open(o->send, O_RDONLY)) < 0) {
		fprintf(stderr, "wanem: %s: %s\n", o->send, strerror(errno));
		return -1;
	}
	for (;;) {
		ssize_t n;

		if (o->zero) {
			n = o->zero - *sent > WN_BUF ? WN_BUF : (ssize_t)(o->zero - *sent);
			if (n == 0)
				break;
			memset(buf, 0, (size_t)n);
		} else if ((n = read(in, buf, sizeof buf)) <= 0) {
			rc = n < 0 ? -1 : 0;
			break;
		}
		if ((rc = send_all(fd, buf, (size_t)n, deadline)) != 0)
			break;
		*sent += n;
		progress(*sent, 0);
	}
	if (in > 0)
		close(in);
	return rc;
}

/* Receives until EOF into the sink (a file, stdout or nothing); counts bytes and
 * samples the byte count once steady_after seconds have passed since t0.
 * Returns 0 at EOF, 1 if time ran out, -1 on error. */
static int recv_sink(const struct xopt *o, int fd, int out, long long *got, double t0,
		     double *ts, long long *bs, double deadline)
{
	static char buf[WN_BUF];

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof buf, 0);

		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				return -1;
			if (wn_mono() >= deadline)
				return 1;
			if (wait_fd(fd, POLLIN, deadline) < 0)
				return -1;      /* 0: the deadline check above ends the loop */
			continue;
		}
		if (out >= 0 && write(out, buf, (size_t)n) != n)
			return -1;
		*got += n;
		progress(*got, 0);
		if (ts && *ts == 0 && wn_mono() - t0 >= o->steady_after)
			*ts = wn_mono(), *bs = *got;
	}
}

/* Applies the window clamp and makes fd non-blocking. */
static void tune(int fd, const struct xopt *o)
{
	if (o->window > 0)
		setsockopt(fd, IPPROTO_TCP, TCP_WINDOW_CLAMP, &o->window, sizeof o->window);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Opens the receive sink: "-" is stdout, NULL or "/dev/null" means discard (-1).
 * Returns the fd, -1 to discard, or -2 if the file cannot be opened. */
static int open_sink(const char *path)
{
	int fd;

	if (!path || strcmp(path, "/dev/null") == 0)
		return -1;
	if (strcmp(path, "-") == 0)
		return 1;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	return fd < 0 ? -2 : fd;
}

/* --slice: sends connection number o->served its slice of the file o->send
 * (o->slice bytes from served x slice, modulo the file's size, wrapping).
 * Returns 0 when all was sent, -1 on error. */
static int send_slice(const struct xopt *o, int fd, double deadline)
{
	static char buf[WN_BUF];
	struct stat st;
	int in = open(o->send, O_RDONLY | O_CLOEXEC), rc = 0;

	if (in < 0 || fstat(in, &st) < 0 || st.st_size <= 0) {
		fprintf(stderr, "wanem serve: %s: %s\n", o->send, in < 0 ? strerror(errno) : "empty or unreadable");
		if (in >= 0)
			close(in);
		return -1;
	}
	off_t at = (off_t)((o->served * (unsigned long long)o->slice) % (unsigned long long)st.st_size);
	for (long long left = o->slice; left > 0 && rc == 0;) {
		size_t want = left < (long long)sizeof buf ? (size_t)left : sizeof buf;
		if ((off_t)want > st.st_size - at)
			want = (size_t)(st.st_size - at);
		ssize_t n = pread(in, buf, want, at);
		if (n <= 0) {
			rc = -1;
			break;
		}
		rc = send_all(fd, buf, (size_t)n, deadline) ? -1 : 0;
		left -= n;
		at = (at + n) % st.st_size;
	}
	close(in);
	return rc;
}

/* Serves one accepted connection. */
static void serve_one(struct xopt *o, int c)
{
	double deadline = wn_mono() + 86400;   /* bounded in practice by the idle limit */
	long long n = 0;

	tune(c, o);
	if (o->send && o->slice) {
		send_slice(o, c, deadline);
		o->served++;
	} else if (o->send) {
		send_source(o, c, &n, deadline);
	} else {
		int out = open_sink(o->recv);
		unsigned char r[8];

		if (out == -2) {
			fprintf(stderr, "wanem serve: %s: %s\n", o->recv, strerror(errno));
			close(c);
			return;
		}
		if (recv_sink(o, c, out, &n, wn_mono(), NULL, NULL, deadline) == 0) {
			for (int i = 0; i < 8; i++)
				r[i] = (unsigned char)((unsigned long long)n >> (56 - 8 * i));
			send_all(c, (char *)r, sizeof r, wn_mono() + 30);
		}
		if (out > 1)
			close(out);
	}
	shutdown(c, SHUT_WR);
	close(c);
}

/* Parses the options shared by serve and get; returns 0, 1 for --help, or -1. */
static int parse_opts(int argc, char **argv, struct xopt *o, const char *addrkey)
{
	static const struct option opts[] = {
		{ "listen", 1, 0, 'l' }, { "connect", 1, 0, 'c' }, { "send", 1, 0, 's' },
		{ "recv", 1, 0, 'r' }, { "send-zero", 1, 0, 'z' }, { "window", 1, 0, 'w' },
		{ "once", 0, 0, '1' }, { "max-time", 1, 0, 't' }, { "steady-after", 1, 0, 'a' },
		{ "progress", 0, 0, 'p' }, { "help", 0, 0, 'h' }, { "slice", 1, 0, 'S' }, { "count", 1, 0, 'n' },
		{ 0, 0, 0, 0 },
	};
	int c;

	o->max_time = 3600;
	o->steady_after = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h': return 1;
		case 'l': case 'c':
			if (strcmp(addrkey, c == 'l' ? "listen" : "connect") != 0)
				return -1;
			o->addr = optarg;
			break;
		case 's': o->send = optarg; break;
		case 'r': o->recv = optarg; break;
		case 'z': o->zero = atoll(optarg); o->send = "zero"; break;
		case 'w': o->window = atoi(optarg); break;
		case '1': o->once = 1; break;
		case 't': o->max_time = atof(optarg); break;
		case 'a': o->steady_after = atof(optarg); break;
		case 'p': prog.on = isatty(2) ? 2 : 1; break;
		case 'S': o->slice = atoll(optarg); break;
		case 'n': o->count = atoll(optarg); break;
		default: return -1;
		}
	}
	if (optind != argc || !o->addr || !!o->send == !!o->recv || o->zero < 0 ||
	    o->window < 0 || o->max_time <= 0 || o->slice < 0 || (o->slice && (o->zero || !strcmp(o->send, "-"))) ||
	    o->count < 0 || (o->count > 1 && !o->recv))
		return -1;
	return 0;
}

int wn_serve_main(int argc, char **argv)
{
	struct xopt o = { 0 };
	struct sockaddr_storage ss;
	socklen_t len;
	int s;

	int rc = parse_opts(argc, argv, &o, "listen");

	rc = wn_cli_start(rc,
			      "serve --listen=HOST:PORT (--send=FILE [--slice=BYTES] | --send-zero=BYTES | --recv=FILE) "
			      "[--window=BYTES] [--once]", "serve", o.addr, &ss, &len);
	if (rc >= 0)
		return rc;
	if ((s = wn_listen(&ss, len, o.window)) < 0) {
		fprintf(stderr, "wanem serve: %s: %s\n", o.addr, strerror(errno));
		return 1;
	}
	do {
		int c = wn_accept(s, "serve");

		if (c < 0)
			return 1;
		serve_one(&o, c);
	} while (!o.once);
	close(s);
	return 0;
}

/* Connects (non-blocking) before the deadline; returns the fd or -1. */
static int dial(const struct xopt *o, const struct sockaddr_storage *ss, socklen_t len,
		double deadline)
{
	int s = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), err = 0;
	socklen_t el = sizeof err;

	if (s < 0)
		return -1;
	tune(s, o);
	if (connect(s, (const struct sockaddr *)ss, len) < 0 && errno != EINPROGRESS)
		goto err;
	if (wait_fd(s, POLLOUT, deadline) <= 0 ||
	    getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
		errno = err ? err : ETIMEDOUT;
		goto err;
	}
	return s;
err:
	close(s);
	return -1;
}

int wn_get_main(int argc, char **argv)
{
	struct xopt o = { 0 };
	struct sockaddr_storage ss;
	socklen_t len;
	long long n = 0, bs = 0;
	double t0, t1, ts = 0, deadline;
	int s, rc, out = -1;

	int prc = parse_opts(argc, argv, &o, "connect");

	prc = wn_cli_start(prc,
			       "get --connect=HOST:PORT (--recv=FILE [--count=K] | --send=FILE | --send-zero=BYTES) "
			       "[--window=BYTES] [--max-time=S] [--steady-after=S] [--progress]", "get", o.addr, &ss, &len);
	if (prc >= 0)
		return prc;
	if (o.recv && (out = open_sink(o.recv)) == -2) {
		fprintf(stderr, "wanem get: %s: %s\n", o.recv, strerror(errno));
		return 1;
	}
	t0 = prog.t0 = wn_mono();
	prog.next = t0 + (prog.on == 2 ? 1 : 10);
	deadline = t0 + o.max_time;
	if ((s = dial(&o, &ss, len, deadline)) < 0) {
		fprintf(stderr, "wanem get: connect %s: %s\n", o.addr, strerror(errno));
		return 1;
	}
	if (o.recv) {
		rc = recv_sink(&o, s, out, &n, t0, &ts, &bs, deadline);
		/* --count: the next downloads, each on a connection of its own */
		for (long long k = 1; rc == 0 && k < o.count; k++) {
			close(s);
			if ((s = dial(&o, &ss, len, deadline)) < 0) {
				fprintf(stderr, "wanem get: connect %s (download %lld): %s\n", o.addr, k + 1,
					strerror(errno));
				rc = -1;
				s = socket(AF_INET, SOCK_STREAM, 0); /* closed below */
				break;
			}
			rc = recv_sink(&o, s, out, &n, t0, &ts, &bs, deadline);
		}
	} else {
		unsigned char r[8];
		long long acked = 0;
		int w;

		rc = send_source(&o, s, &n, deadline);
		shutdown(s, SHUT_WR);
		if (rc == 0) {
			/* the receipt: 8 big-endian bytes with the count the server stored */
			for (size_t k = 0; k < sizeof r && rc == 0;) {
				ssize_t m = recv(s, r + k, sizeof r - k, 0);

				if (m > 0)
					k += (size_t)m;
				else if (m == 0)
					rc = -1;
				else if (errno != EAGAIN && errno != EINTR)
					rc = -1;
				else if ((w = wait_fd(s, POLLIN, deadline)) <= 0)
					rc = w < 0 ? -1 : 1;
			}
			for (int i = 0; i < 8; i++)
				acked = acked << 8 | r[i];
			if (rc == 0 && acked != n)
				rc = -1;
		}
	}
	t1 = wn_mono();
	if (prog.next > t0 + 1.5)     /* a line was printed: finish it */
		progress(n, 1);
	if (rc != 0) {
		/* stopped early: reset, so unsent data does not keep the link busy */
		struct linger lg = { 1, 0 };

		setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	}
	close(s);
	if (out > 1)
		close(out);
	/* the result goes to stderr when stdout carries the data */
	fprintf(out == 1 ? stderr : stdout, "{\"bytes\":%lld,\"seconds\":%.6f,\"complete\":%s,\"steady_bps\":%.0f}\n", n, t1 - t0,
	       rc == 0 ? "true" : "false", ts > 0 && t1 > ts ? (n - bs) * 8 / (t1 - ts) : 0.0);
	fflush(stdout);
	return rc < 0 ? 1 : rc == 1 ? 3 : 0;
}
