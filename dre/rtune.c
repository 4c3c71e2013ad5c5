/*
 * rtune.c: a store keeps reading runs of stored chunks the way that costs
 * less on the reads it serves, timed as it serves them (dre_rtune_*).
 *
 * The probe (rprobe.c) times both ways once, on a small file of its own.
 * Its verdict did not carry over on every host: on one VM (2026-12-06) it
 * found the mapping twice as fast (60 us against 132 per 2 MiB), while a
 * repeated 200 MiB downloaded through the pair on loopback cost the core's
 * thread 145-184 ms of CPU per download read through the mappings, 88-110
 * through windows (the pair 0.18-0.22 s against 0.13-0.16), and its timed
 * reads cost 290-390 us per MiB through the mappings, 100-250 through
 * windows.  A program of its own reading a 128 MiB file both ways, idle or
 * next to the pair, found the mapping faster there too: what makes the
 * daemons' mapped reads slow was not found.  So it is measured where the
 * reads run.
 *
 * Reads are counted in epochs: RTUNE_EPOCH bytes read the chosen way (as
 * many as are read through the mappings between two let-gos of their
 * pages, smap.c), or RTUNE_MEASURE bytes read in slices of RTUNE_SLICE each
 * way in turn, one read in RTUNE_SAMPLE timed, so that both ways are timed
 * on the same traffic.  The first epoch after open measures; then one
 * after every `every` epochs the chosen way, `every` growing fourfold up to
 * RTUNE_EVERY while the chosen way stays cheaper, back to 1 when the other
 * way is taken (it cost under 0.9 times as much per byte).  It does not
 * grow after the first measure: a store's first reads may be of chunks it
 * has just written (a repeat within new data), which cost less either way
 * (on the VM above: 141 against 167 us per MiB at the core, then 100-250
 * against 290-390 once the data was repeated).  The worse way
 * then serves under 1 % of the reads; a 200 MiB download through the pair
 * on loopback reads 200 MiB at each end.  A way given in the
 * options or by WANOPT_STORE_READS is kept.  Readers gather their figures
 * in their windows (dre_rwin, one thread's) and hand them to the store
 * every RTUNE_HAND bytes, under its lock.
 */
#include <string.h>
#include <time.h>

#include "store_int.h"

#define RTUNE_EPOCH (256ull << 20) /* bytes read per epoch the chosen way */
#define RTUNE_MEASURE (64u << 20)  /* ... per measuring epoch */
#define RTUNE_SLICE (4u << 20)     /* bytes read one way at a time in a measuring epoch */
#define RTUNE_EVERY 16             /* most epochs the chosen way between two measuring ones */
#define RTUNE_SAMPLE 8             /* one read in this many is timed */
#define RTUNE_HAND (1u << 20)      /* a reader hands its figures over every MiB read */
#define RTUNE_MIN_TIMED (1u << 20) /* a way's cost counts from this many bytes timed */

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int other_way(int way)
{
	return way == DRE_READS_MAP ? DRE_READS_WINDOW : DRE_READS_MAP;
}

void dre_rtune_reset(dre_store *st)
{
	struct dre_rtune *t = &st->tune;
	uint64_t switches = t->switches;
	uint32_t epoch = t->epoch;
	memset(t, 0, sizeof *t);
	t->switches = switches;
	t->epoch = epoch + 1; /* readers' figures of before are void */
	if (st->reads.way != DRE_READS_MAP)
		st->reads.way = DRE_READS_WINDOW;
	t->on = !st->reads_given && !st->reads.named;
	t->chosen = st->reads.way;
	t->every = 1;
	t->measuring = 1;
	t->slice_end = RTUNE_SLICE;
}

/* A measuring epoch's figures make both ways' costs, and the cheaper is
 * chosen; the next epoch reads the chosen way, or measures.  Lock held. */
static void end_epoch(dre_store *st)
{
	struct dre_rtune *t = &st->tune;
	if (t->measuring) {
		for (int i = 0; i < 2; i++)
			if (t->timed[i] >= RTUNE_MIN_TIMED)
				t->cost[i] = t->ns[i] * (1u << 20) / t->timed[i];
		int c = t->chosen == DRE_READS_MAP;
		if (t->cost[!c] && t->cost[c] && t->cost[!c] * 10 < t->cost[c] * 9) {
			t->chosen = other_way(t->chosen);
			t->switches++;
			t->every = 1;
		} else if (t->measures && t->every < RTUNE_EVERY) {
			t->every *= 4; /* not after the first: it may have timed a cold start */
		}
		t->measures++;
		t->measuring = 0;
		t->left = t->every;
	} else if (--t->left == 0) {
		t->measuring = 1;
		t->slice_end = RTUNE_SLICE;
	}
	st->reads.way = t->chosen;
	t->epoch++;
	t->bytes = 0;
	memset(t->ns, 0, sizeof t->ns);
	memset(t->timed, 0, sizeof t->timed);
}

/* w's figures to the store: its bytes count towards the epoch, its timed
 * reads towards the way they took if they were of this epoch; the epoch or
 * a measuring epoch's slice may end.  Lock held. */
static void hand_over(dre_store *st, dre_rwin *w)
{
	struct dre_rtune *t = &st->tune;
	t->bytes += w->tn_read;
	if (t->measuring && w->tn_epoch == t->epoch) {
		t->ns[w->tn_way == DRE_READS_MAP] += w->tn_ns;
		t->timed[w->tn_way == DRE_READS_MAP] += w->tn_bytes;
	}
	if (t->bytes >= (t->measuring ? RTUNE_MEASURE : RTUNE_EPOCH)) {
		end_epoch(st);
	} else if (t->measuring && t->bytes >= t->slice_end) {
		st->reads.way = other_way(st->reads.way);
		t->slice_end = t->bytes + RTUNE_SLICE;
	}
	w->tn_read = w->tn_ns = w->tn_bytes = 0;
	w->tn_epoch = t->epoch;
	w->tn_way = st->reads.way;
}

uint64_t dre_rtune_begin(dre_store *st, dre_rwin *w, uint32_t len)
{
	if (!w || !st->tune.on)
		return 0;
	if (w->tn_epoch != st->tune.epoch || w->tn_way != st->reads.way)
		hand_over(st, w); /* what it timed took another way */
	if ((w->tn_read += len) >= RTUNE_HAND)
		hand_over(st, w);
	if (!st->tune.measuring)
		return 0;
	w->tn_rng = w->tn_rng * 1103515245u + 12345u;
	return (w->tn_rng >> 16) % RTUNE_SAMPLE ? 0 : now_ns();
}

void dre_rtune_end(dre_rwin *w, uint64_t t0, uint32_t len)
{
	if (!t0)
		return;
	w->tn_ns += now_ns() - t0;
	w->tn_bytes += len;
}

void dre_rtune_stats(const dre_store *st, dre_store_stats *s)
{
	s->reads_tuned = st->tune.on;
	s->reads = st->tune.chosen; /* not the way a measuring epoch's slice reads */
	s->reads_window_cost = st->tune.cost[0];
	s->reads_map_cost = st->tune.cost[1];
	s->reads_switches = st->tune.switches;
}
