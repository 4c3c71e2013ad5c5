/*
 * linger.c: the close of a connection whose TLS handshake failed.  OpenSSL
 * has written its alert (why we refused the peer); closing the socket with
 * the peer's input unread (its Finished, its HELLO) would make the kernel
 * send a RST, and a peer that is still writing then sees "connection reset"
 * instead of the alert.  So the socket's write side is shut after the alert,
 * and its input is read and dropped until the peer's EOF, for a short time.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "conn.h"

#define LINGER_MS 1000            /* longest wait for the peer's EOF */
#define LINGER_BYTES (256 * 1024) /* most input dropped */
#define LINGER_MAX 64             /* most lingering sockets per endpoint */

struct tun_linger {
	LIST_ENTRY(tun_linger) link;
	struct tun_ep *ep;
	struct event *ev;
	int fd;
	size_t dropped;
};

static void linger_free(struct tun_linger *l)
{
	LIST_REMOVE(l, link);
	l->ep->nlinger--;
	event_free(l->ev);
	close(l->fd);
	free(l);
}

/* Input, EOF or the deadline on a lingering socket. */
static void linger_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tun_linger *l = arg;
	char buf[4096];
	ssize_t n = 0;

	if (what & EV_READ)
		while ((n = recv(fd, buf, sizeof(buf), 0)) > 0 && (l->dropped += (size_t)n) < LINGER_BYTES)
			;
	if ((what & EV_TIMEOUT) || n >= 0 || errno != EAGAIN)
		linger_free(l); /* deadline, EOF, too much, or an error */
}

/* Linger on a duplicate of fd (see conn.h). */
void tun_linger(struct tun_ep *ep, int fd)
{
	struct tun_linger *l;
	struct timeval tv = { LINGER_MS / 1000, (LINGER_MS % 1000) * 1000 };

	if (fd < 0 || ep->nlinger >= LINGER_MAX || !(l = calloc(1, sizeof(*l))))
		return;
	l->fd = dup(fd);
	l->ep = ep;
	if (l->fd < 0 || !(l->ev = event_new(ep->base, l->fd, EV_READ | EV_PERSIST, linger_cb, l)) ||
	    event_add(l->ev, &tv) < 0) {
		if (l->ev)
			event_free(l->ev);
		if (l->fd >= 0)
			close(l->fd);
		free(l);
		return;
	}
	shutdown(l->fd, SHUT_WR);
	LIST_INSERT_HEAD(&ep->lingers, l, link);
	ep->nlinger++;
}

/* Close every lingering socket of ep (see conn.h). */
void tun_linger_close_all(struct tun_ep *ep)
{
	while (!LIST_EMPTY(&ep->lingers))
		linger_free(LIST_FIRST(&ep->lingers));
}
