/* link.h: one direction of an emulated link: loss, drop-tail queue,
 * serialisation at a fixed rate, propagation delay with jitter.  Pure logic
 * driven by the caller's clock, so it is tested without any network. */
#ifndef WN_LINK_H
#define WN_LINK_H

#include <stdint.h>
#include "profile.h"

enum {
	WN_MAX_PKT      = 65535,   /* largest IP packet accepted */
	WN_MAX_HELD     = 65536,   /* packets held at once (queue + in flight) */
};

/* What happened to a packet offered to the link. */
enum wn_verdict {
	WN_PASS       = 0,   /* queued for delivery */
	WN_DROP_LOSS  = 1,   /* random loss */
	WN_DROP_QUEUE = 2,   /* drop-tail: the queue was full */
	WN_DROP_NOMEM = 3,   /* out of memory or too many packets held */
	WN_DROP_BAD   = 4,   /* empty or oversized packet */
};

/* Per-direction counters; bytes are IP packet bytes. */
struct wn_counters {
	uint64_t in_pkts, in_bytes;       /* offered to the link */
	uint64_t out_pkts, out_bytes;     /* delivered to the far side */
	uint64_t drop_loss, drop_queue, drop_other;
	uint64_t max_backlog;             /* largest queue seen, bytes */
};

struct wn_pkt {
	struct wn_pkt *next;
	uint64_t       due_ns;            /* delivery time */
	uint32_t       len;
	unsigned char  data[];
};

struct wn_link {
	struct wn_dir      cfg;
	uint64_t           rng[4];        /* xoshiro256** state */
	uint64_t           free_ns;       /* when the serialiser finishes what it holds */
	uint64_t           last_due_ns;   /* delivery time of the newest packet (keeps order) */
	struct wn_pkt     *head, *tail;   /* held packets in delivery order */
	uint32_t           held;
	struct wn_counters c;
};

/* Initialises a link for direction parameters d and a loss/jitter seed. */
void wn_link_init(struct wn_link *l, const struct wn_dir *d, uint64_t seed);

/* Frees every held packet.  Accepts a link that was only initialised. */
void wn_link_clear(struct wn_link *l);

/* Offers a packet arriving at time now; copies it if it passes. */
enum wn_verdict wn_link_offer(struct wn_link *l, const void *pkt, uint32_t len, uint64_t now);

/* Delivery time of the oldest held packet, or UINT64_MAX if none. */
uint64_t wn_link_next_due(const struct wn_link *l);

/* Removes and returns the oldest packet if it is due at now, else NULL.
 * The caller frees it with free(). */
struct wn_pkt *wn_link_pop_due(struct wn_link *l, uint64_t now);

/* Bytes waiting to be serialised at time now (the drop-tail queue). */
uint64_t wn_link_backlog(const struct wn_link *l, uint64_t now);

/* Uniform random double in [0, 1) from the link's generator. */
double wn_link_random(struct wn_link *l);

#endif
