/* link.c: the per-direction link model.
 *
 * A packet first meets random loss (as netem does, before the queue), then
 * the drop-tail queue: the queue holds exactly the bytes the serialiser has
 * not sent yet, which is (free_ns - now) * rate, so no per-packet bookkeeping
 * is needed.  Serialisation is computed on a virtual clock (free_ns), so late
 * timers never lower the rate.  Delivery = end of serialisation + delay +
 * uniform jitter, clamped so packets never overtake each other. */
#include "link.h"

#include <stdlib.h>
#include <string.h>

/* splitmix64: expands the seed into the generator state. */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Rotates x left by k bits (0 < k < 64). */
static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256**: next 64 random bits. */
static uint64_t next64(uint64_t s[4])
{
	uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return r;
}

double wn_link_random(struct wn_link *l)
{
	return (double)(next64(l->rng) >> 11) * 0x1.0p-53;
}

void wn_link_init(struct wn_link *l, const struct wn_dir *d, uint64_t seed)
{
	memset(l, 0, sizeof *l);
	l->cfg = *d;
	for (int i = 0; i < 4; i++)
		l->rng[i] = splitmix64(&seed);
}

void wn_link_clear(struct wn_link *l)
{
	struct wn_pkt *p, *n;

	if (!l)
		return;
	for (p = l->head; p; p = n) {
		n = p->next;
		free(p);
	}
	l->head = l->tail = NULL;
	l->held = 0;
}

uint64_t wn_link_backlog(const struct wn_link *l, uint64_t now)
{
	if (l->cfg.rate_bps == 0 || l->free_ns <= now)
		return 0;
	return (uint64_t)((double)(l->free_ns - now) * (double)l->cfg.rate_bps / 8e9);
}

/* Delivery time for a packet whose serialisation ends at end_ns. */
static uint64_t due_time(struct wn_link *l, uint64_t end_ns)
{
	uint64_t due = end_ns + l->cfg.delay_ns;

	if (l->cfg.jitter_ns) {
		double j = (2 * wn_link_random(l) - 1) * (double)l->cfg.jitter_ns;

		due = (uint64_t)((double)due + j);
		if (due < end_ns)
			due = end_ns;
	}
	if (due < l->last_due_ns)
		due = l->last_due_ns;
	l->last_due_ns = due;
	return due;
}

enum wn_verdict wn_link_offer(struct wn_link *l, const void *pkt, uint32_t len, uint64_t now)
{
	uint64_t backlog, start;
	struct wn_pkt *p;

	if (len == 0 || len > WN_MAX_PKT) {
		l->c.drop_other++;
		return WN_DROP_BAD;
	}
	l->c.in_pkts++;
	l->c.in_bytes += len;
	if (l->cfg.loss > 0 && wn_link_random(l) < l->cfg.loss) {
		l->c.drop_loss++;
		return WN_DROP_LOSS;
	}
	backlog = wn_link_backlog(l, now);
	if (backlog + len + l->cfg.overhead > l->cfg.limit_bytes) {
		l->c.drop_queue++;
		return WN_DROP_QUEUE;
	}
	if (l->held >= WN_MAX_HELD || !(p = malloc(sizeof *p + len))) {
		l->c.drop_other++;
		return WN_DROP_NOMEM;
	}
	if (backlog + len > l->c.max_backlog)
		l->c.max_backlog = backlog + len;
	start = l->free_ns > now ? l->free_ns : now;
	l->free_ns = start + wn_dir_tx_ns(&l->cfg, len);
	memcpy(p->data, pkt, len);
	p->len = len;
	p->next = NULL;
	p->due_ns = due_time(l, l->free_ns);
	if (l->tail)
		l->tail->next = p;
	else
		l->head = p;
	l->tail = p;
	l->held++;
	return WN_PASS;
}

uint64_t wn_link_next_due(const struct wn_link *l)
{
	return l->head ? l->head->due_ns : UINT64_MAX;
}

struct wn_pkt *wn_link_pop_due(struct wn_link *l, uint64_t now)
{
	struct wn_pkt *p = l->head;

	if (!p || p->due_ns > now)
		return NULL;
	l->head = p->next;
	if (!l->head)
		l->tail = NULL;
	l->held--;
	l->c.out_pkts++;
	l->c.out_bytes += p->len;
	return p;
}
