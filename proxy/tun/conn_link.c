/*
 * conn_link.c: a tunnel connection's link-dependent queues.  What a new
 * frame of one stream waits behind is the other streams' turns in the mux,
 * the frames queued for TLS and the kernel's unsent bytes.  The owner sizes
 * them for the link (tun_conn_set_link) and, smaller, for when the
 * connection carries several streams (tun_conn_set_shared): on an emulated
 * T1, an echo beside a bulk download on one connection took 111 ms (p50)
 * with 4 KiB of each, 70 ms with 1, 1 and 2 KiB, against 53 ms alone; the
 * download lost about 2 % of its rate to the shorter turns.
 */
#include <netinet/in.h>
#include <linux/tcp.h>
#include <sys/socket.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "conn_int.h"
#include "mux.h"

/* The frame bytes to keep queued for TLS in c's current mode. */
static size_t out_target(const tun_conn *c)
{
	return c->shared_on ? c->shared.out_buffer : c->out_buffer;
}

/* Apply c's queues for its current mode. */
static void conn_queues(tun_conn *c)
{
	const tun_shared *s = &c->shared;
	size_t q = c->quantum ? c->quantum : c->ep->cfg.quantum;

	if (c->bev)
		bufferevent_setwatermark(c->bev, EV_WRITE, out_target(c) / 2, 0);
	if (c->m)
		mux_set_quantum(c->m, c->shared_on ? s->quantum : q);
	int fd = tun_conn_fd(c), ns = c->shared_on ? s->notsent_lowat : s->notsent_solo;
	if (fd >= 0 && s->notsent_lowat && ns > 0) /* a failure leaves the kernel's value: queues a bit longer */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &ns, sizeof ns);
}

size_t conn_share(tun_conn *c)
{
	int on = c->shared.quantum && c->m && mux_streams(c->m) > 1;

	if (on != c->shared_on) {
		c->shared_on = on;
		conn_queues(c);
	}
	return out_target(c);
}

/* See tun.h: the rate is the owner's record; the turn and TLS queue apply
 * from the next pump. */
void tun_conn_set_link(tun_conn *c, uint64_t bps, size_t quantum, size_t out_buffer)
{
	c->link_bps = bps;
	c->out_buffer = out_buffer >= 1024 ? out_buffer : c->ep->cfg.out_buffer;
	c->quantum = quantum;
	conn_queues(c);
}

void tun_conn_set_shared(tun_conn *c, const tun_shared *s)
{
	int was = c->shared_on;

	c->shared_on = 0;
	if (was)
		conn_queues(c); /* back to the one-stream values before they change */
	c->shared = s && s->quantum ? *s : (tun_shared){ .quantum = 0 }; /* mux_set_quantum bounds the turn */
	if (c->shared.out_buffer < 1024)
		c->shared.out_buffer = 1024;
}
