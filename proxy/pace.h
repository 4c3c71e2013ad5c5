/* pace.h: one pacing cap shared by the tunnel connections to one peer.
 *
 * A tunnel connection whose link rate is known is paced at 95 % of it
 * (node.c).  Several connections to one peer (`tunnels` > 1, `dscp_tunnels`)
 * cross the same WAN link: each paced at the whole cap, they would together
 * send up to that many times faster than the link and fill its queue.  So
 * every PX_PACE_TICK_MS the thread that owns a connection calls
 * px_pace_update for it: the connection's sending rate since its last call
 * (TCP_INFO bytes_sent, smoothed) goes into its peer's group, which all
 * threads share under a lock, and the connection gets its share of the cap
 * (px_pace_share).  A share lags the traffic by a tick or two.  (Bytes
 * acknowledged would lag it by a round trip more: on a 300 ms link the
 * shares then swung behind the traffic and overflowed the link's queue.) */
#ifndef WANOPT_PACE_H
#define WANOPT_PACE_H

#include <stddef.h>
#include <stdint.h>

#define PX_PACE_TICK_MS 100
#define PX_PACE_KEY_LEN 16 /* a group's key: the peer's store id (PROTO_STORE_ID_LEN) */

/* What one member of a group did over the last ticks. */
struct px_pace_use {
	uint64_t rate_bps; /* smoothed sending rate */
	int limited;       /* it sent at 75 % or more of its cap: it may want more */
};

/* Member i's share of total_bps in a group of n: members held back by
 * their cap (limited) split equally what the others leave (each of those
 * counts as 1.25 times its rate), but get at least total_bps / 4n; a member
 * not limited may send at twice its rate, within what the others leave
 * (counted the same way, limited ones too), and at least at an equal share,
 * so an idle connection starts at once (until the next tick counts it in).
 * n <= 1: total_bps.  Never more than total_bps. */
uint64_t px_pace_share(const struct px_pace_use *u, size_t n, size_t i, uint64_t total_bps);

/* One tick of connection id (fd: its socket), in the group of key, whose
 * members share total_bps (0: unpaced, id leaves its group): samples the
 * socket, updates the group, drops members not updated for 3 ticks, and
 * sets the socket's SO_MAX_PACING_RATE to id's share when that differs from
 * the cap in force by more than 2 %.  Returns the share (0: not paced, or
 * the socket could not be read).  Any thread; thread-safe. */
uint64_t px_pace_update(const uint8_t key[PX_PACE_KEY_LEN], const void *id, int fd, uint64_t total_bps,
			uint64_t now_us);

/* Connection id is gone: it leaves its group.  Thread-safe. */
void px_pace_forget(const void *id);

#endif
