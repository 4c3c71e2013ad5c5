/*
 * lanbuf.c: the LAN receive buffer of a stream that reads at full speed.
 *
 * On a LAN the kernel's autotuning keeps a socket's receive buffer small (it
 * sizes it from what the reader took per round trip, and LAN round trips are
 * tiny), so a sender faster than us keeps finding the window shut: each read
 * of ours then reopens it with an ACK, and the sender's next segments go out,
 * on loopback, in our thread.  200 MiB of repeated data through the pair on
 * loopback cost the core's thread 116 ms of CPU that way, 81-89 ms with a 16
 * MiB buffer (0.141-0.145 s per download against 0.126-0.133).
 *
 * So a stream whose pump read DIRECT_MAX from its LAN socket in one go (the
 * sender is ahead of us), and which has not waited for tunnel room for a
 * second, gets a large fixed buffer; at most lan_bulk_streams (a config
 * key, reloadable; 8 unless given) streams of the process at once, since the
 * kernel memory behind one can reach twice its size.  A lower bound applied
 * by a reload takes no buffer back: it bars new ones until fewer hold one.
 * Once a stream waits for tunnel room (a slow link, a slow receiver at the
 * other end), the buffer is made small again, so that no sender keeps that
 * much data parked with us: what it holds then stays until read, and the
 * window opens no further.  The stats show how many hold it now and how
 * many were given it (wanopt_lan_bulk_buffers, ..._total).
 */
#include <stdatomic.h>

#include "conf.h"
#include "lag.h"
#include "log.h"
#include "relay_int.h"
#include "tfo.h"

#define LANBUF_BULK (16u << 20)     /* SO_RCVBUF of a stream reading at full speed */
#define LANBUF_CALM (1u << 20)      /* ... once it waited for tunnel room again */
#define LANBUF_QUIET_US 1000000u    /* no wait for room for this long before a bulk buffer */

static atomic_int bulk_now; /* streams holding the bulk buffer */
static atomic_int bulk_max = CONF_LAN_BULK_DEFAULT; /* ... at most */

void px_lanbuf_set_max(unsigned n)
{
	atomic_store(&bulk_max, (int)n);
}

void px_lanbuf_fast(struct px_relay *r, int fd)
{
	if (r->lan_bulk || (r->room_wait_us && px_mono_us() - r->room_wait_us < LANBUF_QUIET_US))
		return;
	if (atomic_fetch_add(&bulk_now, 1) >= atomic_load(&bulk_max) || tfo_set_rcvbuf(fd, LANBUF_BULK, NULL, 0)) {
		atomic_fetch_sub(&bulk_now, 1);
		return;
	}
	r->lan_bulk = 1;
	stats_add(r->env->stats, STATS_LAN_BULK, 1);
	stats_add(r->env->stats, STATS_LAN_BULK_GIVEN, 1);
	log_debug("%s -> %s: reading at full speed: LAN receive buffer %u MiB", r->src, r->dst, LANBUF_BULK >> 20);
}

void px_lanbuf_room_wait(struct px_relay *r, int fd)
{
	r->room_wait_us = px_mono_us();
	if (!r->lan_bulk)
		return;
	tfo_set_rcvbuf(fd, LANBUF_CALM, NULL, 0);
	px_lanbuf_release(r);
	log_debug("%s -> %s: waits for tunnel room: LAN receive buffer %u MiB", r->src, r->dst, LANBUF_CALM >> 20);
}

void px_lanbuf_release(struct px_relay *r)
{
	if (!r->lan_bulk)
		return;
	atomic_fetch_sub(&bulk_now, 1);
	stats_add(r->env->stats, STATS_LAN_BULK, -1);
	r->lan_bulk = 0;
}
