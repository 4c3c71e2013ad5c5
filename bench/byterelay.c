/*
 * byterelay.c: the least any proxy on the path does, for the loopback
 * benchmark (bench/proxy_bench.py): accept a connection on 127.0.0.1:LISTEN,
 * connect to 127.0.0.1:TARGET, and copy bytes both ways through a 1 MiB
 * buffer per direction until both sides are done, passing a half-close on.
 * No codec, no tunnel, no event library: read and write on blocking sockets
 * under poll.  A download through it crosses two loopback TCP connections
 * and one process, as one through the pair crosses two (client-edge,
 * core-server) carrying every byte plus the tunnel's; so it measures what the
 * extra hop costs on the machine, apart from what wanopt does to the bytes.
 *
 * One connection at a time, in order (the benchmark downloads one file at a
 * time); runs until killed.  Usage: byterelay LISTEN_PORT TARGET_PORT
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BR_BUF (1u << 20)

struct br_dir {
	int from, to;      /* copy from -> to */
	char *buf;
	size_t have, off;  /* buf[off..have) still to write */
	int eof;           /* from sent FIN; passed on once buf drained */
	int done;          /* FIN passed on */
};

/* A TCP socket listening on 127.0.0.1:port, or -1 (reported). */
static int br_listen(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 16)) {
		fprintf(stderr, "byterelay: cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
		return -1;
	}
	return fd;
}

/* A TCP socket connected to 127.0.0.1:port, or -1 (reported). */
static int br_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
		fprintf(stderr, "byterelay: cannot connect to 127.0.0.1:%d: %s\n", port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* One step of direction d after poll said its socket is ready: read into an
 * empty buffer or write what it holds, passing FIN on once drained.
 * 0, or -1 on a socket error (the connection pair is then dropped). */
static int br_step(struct br_dir *d)
{
	if (d->off < d->have) {
		ssize_t n = write(d->to, d->buf + d->off, d->have - d->off);
		if (n < 0)
			return errno == EINTR ? 0 : -1;
		d->off += (size_t)n;
	} else if (!d->eof) {
		ssize_t n = read(d->from, d->buf, BR_BUF);
		if (n < 0)
			return errno == EINTR ? 0 : -1;
		d->eof = n == 0;
		d->have = (size_t)n;
		d->off = 0;
	}
	if (d->eof && d->off == d->have && !d->done) {
		shutdown(d->to, SHUT_WR);
		d->done = 1;
	}
	return 0;
}

/* Relay between client c and target s until both directions passed FIN on or
 * either socket failed; closes both. */
static void br_relay(int c, int s, char *bufs)
{
	struct br_dir dir[2] = { { .from = c, .to = s, .buf = bufs }, { .from = s, .to = c, .buf = bufs + BR_BUF } };
	while (!dir[0].done || !dir[1].done) {
		struct pollfd p[2];
		for (int i = 0; i < 2; i++) {
			struct br_dir *d = &dir[i];
			int out = d->off < d->have;
			p[i] = (struct pollfd){ .fd = d->done ? -1 : out ? d->to : d->from, .events = out ? POLLOUT : POLLIN };
		}
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		int bad = 0;
		for (int i = 0; i < 2; i++)
			if (p[i].revents && br_step(&dir[i]))
				bad = 1;
		if (bad)
			break;
	}
	close(c);
	close(s);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: byterelay LISTEN_PORT TARGET_PORT  (both on 127.0.0.1)\n");
		return 2;
	}
	int ls = br_listen(atoi(argv[1]));
	char *bufs = malloc(2 * (size_t)BR_BUF);
	if (ls < 0 || !bufs)
		return 1;
	for (;;) {
		int c = accept(ls, NULL, NULL);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			fprintf(stderr, "byterelay: accept: %s\n", strerror(errno));
			return 1;
		}
		int s = br_connect(atoi(argv[2]));
		if (s < 0) {
			close(c);
			continue;
		}
		br_relay(c, s, bufs);
	}
}
