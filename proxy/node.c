/* node.c: the parts of a daemon common to edge and core (see node.h). */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemon.h"
#include "lag.h"
#include "log.h"
#include "node.h"
#include "pace.h"
#include "stats.h"
#include "tfo.h"
#include "volstore.h"

#define TICK_MS 1000
#define SYNC_EVERY 30 /* ticks between store syncs */
#define TRIM_FREE_MIN (16u << 20) /* free heap bytes kept after streams closed (trim_heap) */
#define TRIM_QUIET_MIN (1u << 20) /* ... after streams went quiet */
#define TRIM_PIECES_MAX 512       /* free heap pieces beyond which the trim waits (trim_heap) */
#define TRIM_WAIT_MAX 2           /* ticks it waits at most */
enum { TRIM_CLOSED = 1, TRIM_QUIET = 2 }; /* why a trim is due (px_node.trim_due) */
#define LINK_PACE_PCT 95 /* of link_rate: the tunnel sockets' pacing cap (link_queues) */

/* Hand freed heap pages back to the kernel once more than `keep` bytes are
 * free.  After streams closed, keep is TRIM_FREE_MIN: those pages stay for
 * the next transfers, since touching returned pages again costs a page fault
 * each, which on a hypervisor that traps them made a hot 3.4 MB transfer over
 * the emulated T1 take 0.069-0.076 s instead of 0.054-0.057 s when every
 * closed stream's buffers were trimmed.  After streams went quiet (their
 * codecs rested), keep is TRIM_QUIET_MIN: an idle proxy gives its memory
 * back.  (With 16 MiB kept there too, the core of proxy_scale, whose 100
 * streams echoed 1 MiB and went quiet, kept 14-19 MB in 4 runs of 11, 2-8 MB
 * in the others: the rests come over 5 s, and what the last ones freed
 * stayed under the 16 MiB; now 3-6 MB in 6 runs of 6.)
 *
 * malloc_trim makes one madvise call per free piece of the heap, each a TLB
 * flush (50-60 us on a VM that traps them).  Once a burst of closes is over,
 * the freed memory lies in few pieces (100-300 after 1,000 streams: libevent's
 * records per descriptor live apart, evmem.h); in the middle of it, the
 * streams still open split it (700-1,300 pieces, 60-110 ms of the loop).  So
 * while the free memory lies in more than TRIM_PIECES_MAX pieces the trim
 * waits a tick, at most TRIM_WAIT_MAX ticks.  Returns whether it trimmed (or
 * had nothing to do). */
static int trim_heap(struct px_node *n, size_t keep)
{
	struct mallinfo2 mi = mallinfo2();
	if (mi.fordblks <= keep)
		return 1;
	if (mi.ordblks > TRIM_PIECES_MAX && n->trim_waits++ < TRIM_WAIT_MAX) {
		log_debug("heap: %zu bytes free in %zu pieces, the trim waits", mi.fordblks, mi.ordblks);
		return 0;
	}
	uint64_t t0 = px_mono_us();
	malloc_trim(0);
	log_debug("heap: %zu bytes free in %zu pieces, handed back in %llu us", mi.fordblks, mi.ordblks,
		  (unsigned long long)(px_mono_us() - t0));
	n->trim_waits = 0;
	return 1;
}

/* How runs of stored chunks are read, for logs (reads: DRE_READS_*). */
static const char *reads_way(int reads)
{
	return reads == DRE_READS_MAP ? "through the mapping" : "through 128 KiB preads";
}

/* Log when the store's file system starts to leave it less than its size,
 * and when it leaves it its size again (dre/room.c). */
static void log_room(struct px_node *n, const dre_store_stats *ss)
{
	char a[16], b[16];
	if (ss->room && !n->room)
		log_warn("store %s: its file system leaves it %s of its %s: it keeps to that, evicting its oldest"
			 " data, and grows back as space frees up", n->store_dir,
			 stats_bytes_str((double)ss->room, 1, a, sizeof a),
			 stats_bytes_str((double)ss->size_limit, 1, b, sizeof b));
	else if (!ss->room && n->room)
		log_info("store %s: its file system has room for its %s again", n->store_dir,
			 stats_bytes_str((double)ss->size_limit, 1, b, sizeof b));
	n->room = ss->room;
}

/* Once a second: gauges; every SYNC_EVERY: make the store durable. */
static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_node *n = arg;
	struct stats *s = px_daemon_stats(n->d);
	dre_store_stats ss;
	dre_store_get_stats(n->store, &ss);
	stats_set(s, STATS_STORE_FILL, ss.disk_bytes);
	stats_set(s, STATS_STORE_SIZE, ss.size_limit);
	stats_set(s, STATS_STORE_EVICTIONS, ss.evicted_chunks);
	stats_set(s, STATS_STORE_PEERS, ss.peers);
	stats_set(s, STATS_STORE_PEERS_HELD, ss.peers_held);
	stats_set(s, STATS_STORE_UNTRACKED, ss.peers_untracked);
	stats_set(s, STATS_STORE_PINS, ss.pins);
	stats_set(s, STATS_STORE_PIN_OVER, ss.pin_over_max);
	stats_set(s, STATS_STORE_ROOM, ss.room);
	stats_set(s, STATS_STORE_PIN_FORCED, ss.pin_forced);
	stats_set(s, STATS_STORE_READS_MAPPED, ss.reads == DRE_READS_MAP);
	stats_set(s, STATS_STORE_READS_WINDOW_NS, ss.reads_window_cost);
	stats_set(s, STATS_STORE_READS_MAP_NS, ss.reads_map_cost);
	stats_set(s, STATS_STORE_READS_CHANGES, ss.reads_switches);
	stats_set(s, STATS_STORE_HIT_BYTES, ss.hit_bytes);
	stats_set(s, STATS_STORE_NEW_BYTES, ss.new_bytes);
	for (int i = 0; i < 3; i++)
		stats_set(s, STATS_STORE_LARGER_2X + i, ss.larger_hit_bytes[i]);
	if (n->tunnels_up)
		stats_set(s, STATS_TUNNELS_UP, n->tunnels_up(n->role));
	if (n->tunnel_rtt)
		stats_set(s, STATS_TUNNEL_RTT_US, n->tunnel_rtt(n->role));
	if (n->retune && (n->ticks + 1) % PX_RETUNE_S == 0)
		n->retune(n->role);
	if (ss.io_errors > n->io_errors)
		log_warn("store %s: %llu data file read/write errors, the last: %s (what they touched is dropped"
			 " from the store and asked back from the peer when needed)",
			 n->store_dir, (unsigned long long)(ss.io_errors - n->io_errors),
			 strerror(ss.io_errno ? ss.io_errno : EIO));
	n->io_errors = ss.io_errors;
	if (ss.dir_remade > n->dir_remade)
		log_warn("store %s: its directory was removed while in use: made again, with its identity and lock"
			 " (what the store held stays readable until evicted; after a restart, what it stored since)",
			 n->store_dir);
	n->dir_remade = ss.dir_remade;
	if (ss.bad_reads > n->bad_reads)
		log_warn("store %s: %llu chunks found gone bad on disk (their records fail their checksums): dropped,"
			 " and stored again when a peer or a client sends them", n->store_dir,
			 (unsigned long long)(ss.bad_reads - n->bad_reads));
	n->bad_reads = ss.bad_reads;
	log_room(n, &ss);
	if (ss.peers_untracked > n->untracked)
		log_warn("store %s: %llu streams from peers beyond the %d tracked, whose slots were used within %d h:"
			 " sent as if those peers held every chunk (their misses cost an ask each)",
			 n->store_dir, (unsigned long long)(ss.peers_untracked - n->untracked),
			 DRE_PEER_SLOTS, DRE_PEER_IDLE_S / 3600);
	n->untracked = ss.peers_untracked;
	if (ss.pin_forced > n->pin_forced)
		log_warn("store %s: %llu data files evicted though frames in flight still referenced them (the store"
			 " was %d MiB past its size, or a smaller store_size waited 10 s for them): a stream whose such frame"
			 " its peer asks for is reset", n->store_dir,
			 (unsigned long long)(ss.pin_forced - n->pin_forced), DRE_PIN_SLACK_MIB);
	n->pin_forced = ss.pin_forced;
	if (ss.reads_switches != n->reads_switches)
		log_info("store %s: runs of stored chunks are now read %s: timed on the store's own reads, %.0f us"
			 " per MiB through 128 KiB preads, %.0f through the mapping", n->store_dir,
			 reads_way(ss.reads), ss.reads_window_cost / 1e3, ss.reads_map_cost / 1e3);
	n->reads_switches = ss.reads_switches;
	/* quiet or closed streams freed their codecs' memory: hand the pages
	 * back (freed memory in the middle of the heap would otherwise stay
	 * resident) */
	unsigned freed, rested = px_relay_rests_take(&freed);
	n->trim_due |= (rested ? TRIM_QUIET : 0) | (freed ? TRIM_CLOSED : 0);
	if (n->trim_due && trim_heap(n, n->trim_due & TRIM_QUIET ? TRIM_QUIET_MIN : TRIM_FREE_MIN))
		n->trim_due = 0;
	/* others' data may have filled the store's file system, or freed space
	 * on it, while the store was idle: its writer measures (statvfs may
	 * wait on a remote disk; the loop never does) */
	(void)dre_store_room_later(n->store); /* out of memory: measured as it writes */
	px_node_swap_tick(n);
	/* the store's writer thread does the fdatasync: the loop never waits on it */
	if (++n->ticks % SYNC_EVERY == 0 && dre_store_sync_later(n->store))
		log_warn("store %s: cannot queue a sync", n->store_dir);
}

/* c's peer as the stats list it: at a core by the edge's address, name and
 * store ("127.0.0.1 (vm, store 5f3a9c21)"), not the port it dialed from, so
 * that its connections, and its reconnections, are one peer (and two edges
 * of one name behind one address are two); at an edge the core's address as
 * configured, with its name. */
static void peer_label(const struct px_node *n, tun_conn *c, char *buf, size_t len)
{
	const char *p = tun_conn_peer(c), *name = strstr(p, " ("), *port = NULL;
	const tun_hello *h = tun_conn_hello(c);
	for (const char *q = p; n->serves && h && *q && (!name || q < name); q++)
		if (*q == ':') /* "ADDR:PORT (NAME)": the last ':' before the name */
			port = q;
	if (!port || (p[0] == '[' && port[-1] != ']')) {
		snprintf(buf, len, "%s", p);
		return;
	}
	const uint8_t *id = h->store_id;
	snprintf(buf, len, "%.*s (%s, store %02x%02x%02x%02x)", (int)(port - p), p, h->name, id[0], id[1], id[2], id[3]);
}

uint64_t px_node_tunnels_publish(struct px_node *n, int slot, tun_conn *const *conns, size_t nc)
{
	struct stats_tunnel t[64];
	uint64_t best = 0;
	size_t k = 0;
	for (size_t i = 0; i < nc; i++) {
		uint64_t r = tun_conn_rtt_us(conns[i]);
		if (r && (!best || r < best))
			best = r;
		if (k < sizeof t / sizeof t[0]) { /* more to one thread: listed by the first 64 */
			int fd = tun_conn_fd(conns[i]), dscp = fd < 0 ? 0 : tfo_dscp_get(fd);
			char cls[16];
			peer_label(n, conns[i], t[k].peer, sizeof t[k].peer);
			size_t pl = strlen(t[k].peer);
			snprintf(t[k].peer + pl, sizeof t[k].peer - pl, "%s%s", dscp ? " class " : "",
				 dscp ? tfo_dscp_name(dscp, cls, sizeof cls) : "");
			uint64_t pace = fd < 0 ? 0 : tfo_pace_get(fd);
			t[k].link_bps = tun_conn_link_bps(conns[i]);
			t[k].pace_bps = pace == UINT64_MAX ? 0 : pace;
			int64_t exp = tun_conn_peer_not_after(conns[i]);
			t[k].cert_not_after = exp > 0 ? (uint64_t)exp : 0;
			t[k++].rtt_us = r;
		}
	}
	stats_tunnels_set(px_daemon_stats(n->d), slot, t, k);
	return best;
}

/* On a known link (link_rate), keep the queues ahead of an interactive
 * stream's frame short:
 * - about 20 ms of unsent data in the kernel (at least 4 KiB);
 * - send no faster than LINK_PACE_PCT of the link rate.  The kernel paces
 *   TCP payload, while the link carries headers too (3.5 % more at a 1,500
 *   byte MTU), so a cap at the full rate still overflows the bottleneck's
 *   queue now and then: on the emulated T1 (a queue of one bandwidth x delay),
 *   BBR alone lost 7 % of the bytes it sent, each loss holding every stream
 *   behind it for a round trip.  At 95 %: no losses, a bulk download's
 *   goodput 2 % lower, an echo's p95 next to it 146 ms instead of 270 ms. */
static void link_queues(uint64_t rate_bps, struct tfo_opts *o)
{
	if (!rate_bps)
		return;
	uint64_t q = rate_bps / 8 / 50;
	if (q < TFO_NOTSENT_LOWAT_DEFAULT)
		o->notsent_lowat = (uint32_t)(q > 4096 ? q : 4096);
	o->pace_bps = rate_bps / 100 * LINK_PACE_PCT;
}

/* The slower of two rates, where known (0: neither is). */
static uint64_t slower(uint64_t a, uint64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

/* A tunnel connection's link, from our hints and h, the peer's HELLO (NULL:
 * none yet): what it sends at (the slower of our send rate and the rate the
 * peer told us it receives at, where known), what it receives at (likewise),
 * the round trip (our hint, else the peer's); *o gets its socket options,
 * buffers covering the faster direction. */
struct conn_link {
	uint64_t tx, rx;
	uint32_t rtt_us;
};
#define PEER_BUF_MAX (64u << 20) /* socket buffers from a peer's told link: 4 x 447 Mbit/s x 300 ms */

static struct conn_link conn_link(const struct px_node *n, const tun_hello *h, struct tfo_opts *o)
{
	struct conn_link l = { slower(n->rate_bps, h ? h->link_bps : 0), slower(n->rx_bps, h ? h->link_tx_bps : 0),
			       n->rtt_us ? n->rtt_us : h ? h->link_rtt_us : 0 };
	*o = (struct tfo_opts){ .cc = n->cc, .rate_bps = l.tx > l.rx ? l.tx : l.rx, .rtt_us = l.rtt_us };
	if (!(n->rate_bps || n->rx_bps) || !n->rtt_us)
		o->buf_max = PEER_BUF_MAX; /* a peer's word (or a measured rate) may not size them beyond */
	link_queues(l.tx, o);
	return l;
}

void px_node_on_fd(void *arg, int fd, int phase)
{
	struct px_node *n = arg;
	char err[256];
	if (phase == TUN_FD_LISTEN || phase == TUN_FD_PRE_CONNECT) {
		struct tfo_opts o;
		conn_link(n, NULL, &o); /* our hints alone, before any HELLO */
		struct tfo_tuned t;
		if (tfo_tune_wan(fd, &o, &t, err, sizeof err))
			log_warn("WAN socket tuning: %s", err);
		else
			log_debug("WAN socket: %s%s, buffers %llu, pacing cap %llu bit/s", t.cc,
				  t.cc_fallback ? " (fallback)" : "", (unsigned long long)t.bufsize,
				  (unsigned long long)t.pace_bps);
	}
}

#define PEER_WINDOW_MAX (16u << 20) /* stream window from a peer's told link: 447 Mbit/s at 300 ms */
#define OUT_BUFFER_MAX (16u << 20) /* 10 ms of 13 Gbit/s: a told rate beyond gets no more */

/* Mux turns and TLS queue for a link of bps (see px_node_start): about 10 ms
 * of the rate, 4 KiB to OUT_BUFFER_MAX. */
static void mux_link(uint64_t bps, size_t *quantum, size_t *out_buffer)
{
	uint64_t q = bps / 8 / 100;
	*quantum = bps && bps < 10000000 ? 4096 : 0;
	*out_buffer = !bps ? 0 : q < 4096 ? 4096 : q > OUT_BUFFER_MAX ? OUT_BUFFER_MAX : (size_t)q;
}

/* The queues while a tunnel connection carries two streams or more (see
 * tun_shared): about 5 ms of the link rate per turn and queued for TLS, 10 ms
 * unsent in the kernel, at least 1 and 2 KiB; none on a link of unknown rate.
 * o: the connection's socket options (its one-stream NOTSENT_LOWAT). */
static tun_shared mux_shared(uint64_t bps, const struct tfo_opts *o)
{
	uint64_t q = bps / 8 / 200;
	if (!bps)
		return (tun_shared){ .quantum = 0 };
	if (q < 1024)
		q = 1024;
	uint64_t solo = o->notsent_lowat ? o->notsent_lowat : TFO_NOTSENT_LOWAT_DEFAULT;
	return (tun_shared){ .quantum = q < PROTO_MAX_PAYLOAD ? q : PROTO_MAX_PAYLOAD,
			     .out_buffer = q < OUT_BUFFER_MAX ? q : OUT_BUFFER_MAX,
			     .notsent_lowat = (int)(2 * q < solo ? 2 * q : solo), .notsent_solo = (int)solo };
}

/* Log how the store (dir: its directory, NULL: not named) reads runs of
 * stored chunks and what the probe measured (verb: "are", or on a reload
 * "are now" / "are still"). */
static void log_reads(const char *dir, const dre_store_stats *ss, const char *verb)
{
	const char *sp = dir ? " " : "", *d = dir ? dir : "";
	if (!ss->reads_window_ns || !ss->reads_map_ns) { /* named, or the probe had no file (a full disk) */
		log_info("store%s%s: runs of stored chunks %s read %s (%s)", sp, d, verb, reads_way(ss->reads),
			 ss->reads_tuned ? "not probed: timed on the store's own reads from now on"
					 : "as WANOPT_STORE_READS says");
		return;
	}
	log_info("store%s%s: runs of stored chunks %s read %s (%.0f us through 128 KiB preads, %.0f through the"
		 " mapping, per 2 MiB compared)", sp, d, verb, reads_way(ss->reads), ss->reads_window_ns / 1e3,
		 ss->reads_map_ns / 1e3);
}

/* Stream window: at least the default, or 4 x bandwidth x delay when known. */
static uint32_t window_for(uint64_t rate_bps, uint32_t rtt_us)
{
	uint64_t w = tfo_bdp_bytes(rate_bps, rtt_us);
	if (w < PROTO_INITIAL_WINDOW)
		w = PROTO_INITIAL_WINDOW;
	if (w > (64u << 20))
		w = 64u << 20;
	return (uint32_t)w;
}

/* The level of a link line: info at connect and reload; for a peer's LINK
 * frames, info for the first 5 in 10 s of the process, then debug (a peer
 * sending them without end would fill the disk). */
static enum log_level link_log_level(int told)
{
	static struct log_limit lim = LOG_LIMIT_INIT(5, 10);
	return !told || log_limit_take(&lim, NULL) ? LOGL_INFO : LOGL_DEBUG;
}

void px_node_link_up(struct px_node *n, tun_conn *c, int told)
{
	struct tfo_opts o;
	struct conn_link l = conn_link(n, tun_conn_hello(c), &o);
	size_t quantum, out_buffer;
	mux_link(l.tx, &quantum, &out_buffer);
	tun_conn_set_link(c, l.tx, quantum, out_buffer);
	tun_shared sh = mux_shared(l.tx, &o);
	tun_conn_set_shared(c, &sh);
	uint32_t window = window_for(l.rx, l.rtt_us);
	if ((!n->rx_bps || !n->rtt_us) && window > PEER_WINDOW_MAX)
		window = PEER_WINDOW_MAX; /* from what the peer told: a bound on what it can make us hold */
	window = tun_conn_set_recv_window(c, window);
	char err[256];
	struct tfo_tuned t = { .bufsize = 0 };
	int fd = tun_conn_fd(c);
	if (fd >= 0 && tfo_set_link(fd, &o, &t, err, sizeof err)) {
		log_warn("tunnel %s: link tuning: %s", tun_conn_peer(c), err);
		return;
	}
	const tun_hello *h = tun_conn_hello(c);
	char in[32], out[32], pace[48], bufs[32];
	snprintf(pace, sizeof pace, l.tx ? "%.3f Mbit/s (paced at 95 %%)" : "any rate (not paced)", (double)l.tx / 1e6);
	if (!h || (!h->link_bps && !h->link_tx_bps && !h->link_rtt_us)) {
		if (told) /* else our own hints alone: nothing new to say */
			log_msg(link_log_level(told), "tunnel %s: the peer gives no link hints now; sending at up to %s",
			       tun_conn_peer(c), pace);
		return;
	}
	snprintf(in, sizeof in, h->link_bps ? "%.3f Mbit/s" : "an unknown rate", (double)h->link_bps / 1e6);
	snprintf(out, sizeof out, h->link_tx_bps ? "%.3f Mbit/s" : "an unknown rate", (double)h->link_tx_bps / 1e6);
	snprintf(bufs, sizeof bufs, t.bufsize ? "%llu bytes" : "autotuned", (unsigned long long)t.bufsize);
	log_msg(link_log_level(told), "tunnel %s: the peer receives at %s and sends at %s, round trip %.1f ms; sending at up to %s,"
		 " buffers %s, stream window %u bytes", tun_conn_peer(c), in, out, (double)h->link_rtt_us / 1e3, pace,
		 bufs, window);
}

void px_node_pace(tun_conn *const *c, size_t n)
{
	uint64_t now = px_mono_us();
	for (size_t i = 0; i < n; i++) {
		const tun_hello *h = tun_conn_hello(c[i]);
		int fd = tun_conn_fd(c[i]);
		if (h && fd >= 0)
			px_pace_update(h->store_id, c[i], fd, tun_conn_link_bps(c[i]) / 100 * LINK_PACE_PCT, now);
	}
}

struct event *px_node_pace_timer(struct event_base *base, event_callback_fn cb, void *arg)
{
	struct timeval tick = { 0, PX_PACE_TICK_MS * 1000 };
	struct event *ev = event_new(base, -1, EV_PERSIST, cb, arg);
	if (ev && !event_add(ev, &tick))
		return ev;
	if (ev)
		event_free(ev);
	log_warn("tunnel: no pacing timer: connections are paced each at the whole link rate");
	return NULL;
}

void px_node_retune(struct px_node *n, tun_conn *c)
{
	char err[256];
	uint64_t size = 0;
	int fd = tun_conn_fd(c);
	struct tfo_opts o;
	conn_link(n, tun_conn_hello(c), &o);
	if ((o.rate_bps && o.rtt_us) || fd < 0)
		return; /* both hints: sized at connect or link_up, and that holds */
	/* the rate hint, if any, with the measured min RTT */
	int rc = tfo_retune(fd, &o, &size, err, sizeof err);
	if (rc < 0)
		log_debug("tunnel %s: retune: %s", tun_conn_peer(c), err);
	else if (rc > 0)
		log_info("tunnel %s: buffers grown to %llu bytes (4 x measured bandwidth x delay)",
			 tun_conn_peer(c), (unsigned long long)size);
	else
		log_debug("tunnel %s: buffers %llu bytes cover the measured bandwidth x delay",
			  tun_conn_peer(c), (unsigned long long)size);
}

/* Warn when the store may not reach size: more than its file system holds,
 * or than it has free beside what the store holds now. */
static void check_fs_room(const char *dir, uint64_t size, uint64_t held)
{
	struct statvfs fs;
	if (statvfs(dir, &fs))
		return;
	uint64_t total = (uint64_t)fs.f_blocks * fs.f_frsize, room = (uint64_t)fs.f_bavail * fs.f_frsize + held;
	char a[16], b[16];
	if (size > total)
		log_warn("store %s: store_size %s is more than its file system holds (%s)", dir,
			 stats_bytes_str((double)size, 1, a, sizeof a), stats_bytes_str((double)total, 1, b, sizeof b));
	else if (size > room)
		log_warn("store %s: store_size %s is more than the room its file system has for it now (%s)", dir,
			 stats_bytes_str((double)size, 1, a, sizeof a), stats_bytes_str((double)room, 1, b, sizeof b));
}

/* The store size the node keeps to for c's store_size. */
static uint64_t store_size(const struct px_node *n, const struct conf *c)
{
	return n->store_volatile ? px_volstore_size(conf_store_size(c)) : conf_store_size(c);
}

/* Open the node's store; if it cannot be opened (its disk failed or went
 * read-only, no room for a new store), a volatile one in memory instead
 * (volstore.c), so that the node still carries traffic -- unless another
 * process runs on the store (not ours to stand in for).  0, or -1 logged. */
static int store_open(struct px_node *n, const struct conf *c)
{
	char err[512], verr[512], a[32];
	dre_store_opts so = { .size_limit = conf_store_size(c), .create = 1 };
	snprintf(n->store_dir, sizeof n->store_dir, "%s", conf_store(c));
	if ((n->store = dre_store_open(conf_store(c), &so, err, sizeof err)))
		return 0;
	log_error("store: %s", err);
	if (dre_store_in_use(conf_store(c)))
		return -1;
	if (!(n->store = px_volstore_open(conf_store_size(c), n->store_dir, sizeof n->store_dir, verr, sizeof verr))) {
		log_error("store: no volatile store to stand in for it either: %s", verr);
		return -1;
	}
	n->store_volatile = 1;
	n->probe = px_volprobe_new(conf_store(c)); /* NULL: not probed */
	log_warn("store %s cannot be used: running on a volatile store in memory instead (%s, %s at most):"
		 " DRE and LZ as usual, but it starts empty and is gone at exit; the node goes back to the store"
		 " once it opens again (probed every 5 s)", conf_store(c), n->store_dir, stats_bytes_str((double)store_size(n, c), 1, a, sizeof a));
	return 0;
}

void px_node_store_said(struct px_node *n, const struct conf *c)
{
	dre_store_stats ss;
	dre_store_get_stats(n->store, &ss);
	char dropped[80] = "";
	if (ss.dropped_records)
		snprintf(dropped, sizeof dropped, ", %llu torn or damaged stretches of records dropped",
			 (unsigned long long)ss.dropped_records);
	log_info("store %s: %llu chunks, %llu bytes (limit %llu)%s", n->store_dir, (unsigned long long)ss.chunks,
		 (unsigned long long)ss.data_bytes, (unsigned long long)ss.size_limit, dropped);
	log_reads(n->store_dir, &ss, "are");
	check_fs_room(n->store_dir, store_size(n, c), ss.disk_bytes);
	if (ss.reads_ignored)
		log_warn("WANOPT_STORE_READS=%s in the environment names no way (window or map): ignored, the"
			 " way was measured", ss.reads_ignored);
}

int px_node_start(struct px_node *n, struct px_daemon *d, int role)
{
	const struct conf *c = px_daemon_conf(d);
	n->d = d;
	n->serves = role == PROTO_ROLE_CORE;
	if (store_open(n, c))
		return -1;
	stats_set(px_daemon_stats(d), STATS_STORE_VOLATILE, (uint64_t)n->store_volatile);
	if (!(n->env.store = calloc(1, sizeof *n->env.store)))
		return -1;
	n->env.store->st = n->store;
	atomic_init(&n->env.store->holds, 1); /* n->env's */
	px_node_store_said(n, c);
	px_lanbuf_set_max(n->lan_bulk = conf_lan_bulk_streams(c));
	if (gethostname(n->name, sizeof n->name - 1))
		snprintf(n->name, sizeof n->name, "wanopt");
	snprintf(n->cc, sizeof n->cc, "%s", conf_cc_name(conf_congestion(c)));
	n->rate_bps = conf_link_rate(c);
	n->rx_bps = conf_link_rate_rx(c);
	n->rtt_us = conf_link_rtt(c);
	tun_config *t = &n->tcfg;
	*t = px_daemon_tls_files(c);
	t->node_name = n->name;
	uint64_t id = dre_store_id(n->store);
	memcpy(t->store_id, &id, sizeof id);
	t->role = (uint8_t)role;
	t->window = window_for(n->rx_bps, n->rtt_us); /* what we grant: the receiving side's */
	t->link_rx_bps = n->rx_bps;
	t->link_tx_bps = n->rate_bps;
	t->link_rtt_us = n->rtt_us;
	t->conns = conf_tunnels(c);
	t->max_streams = conf_max_streams(c);
	t->version_max = conf_protocol_max(c);
	/* about 10 ms of link rate queued for TLS, and small turns on slow links */
	mux_link(n->rate_bps, &t->quantum, &t->out_buffer);
	n->env.base = px_daemon_base(d);
	n->env.stats = px_daemon_stats(d);
	n->env.link_bps = n->rate_bps;
	if (!(n->tick = event_new(n->env.base, -1, EV_PERSIST, tick_cb, n)))
		return -1;
	struct timeval tv = { TICK_MS / 1000, (TICK_MS % 1000) * 1000 };
	event_add(n->tick, &tv);
	tick_cb(-1, 0, n);
	n->lag = px_lag_start(n->env.base, n->env.stats, role == PROTO_ROLE_EDGE ? "edge" : "core");
	return px_node_tls_start(n, c);
}

/* One step of a store_size change: evict a data file, come back on the
 * next event loop pass while still over; log the outcome. */
#define SHRINK_PIN_WAIT_S 10

static void shrink_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_node *n = arg;
	/* a file that frames in flight still pin: wait for their acknowledgement
	 * (a round trip), for SHRINK_PIN_WAIT_S at most, then evict it all the same */
	int waited = px_mono_us() - n->shrink_t0_us > SHRINK_PIN_WAIT_S * 1000000ull;
	int rc = dre_store_shrink_step(n->store, n->shrink_to, !waited);
	if (rc > 0) {
		struct timeval later = { 0, rc == 2 ? 50000 : 0 };
		event_add(n->shrink, &later);
		return;
	}
	unsigned long long to = (unsigned long long)n->shrink_to;
	if (rc < 0) {
		log_warn("store: cannot apply store_size %llu: %s", to, dre_strerror(rc));
		return;
	}
	dre_store_stats ss;
	dre_store_get_stats(n->store, &ss);
	double ms = (double)(px_mono_us() - n->shrink_t0_us) / 1e3;
	unsigned long long gone = (unsigned long long)(ss.evicted_bytes - n->shrink_evicted0);
	if (to != n->shrink_from || gone) /* a reload that left it alone says nothing */
		log_info("store: size limit now %llu bytes, was %llu (%llu bytes evicted in %.0f ms)", to,
			 (unsigned long long)n->shrink_from, gone, ms);
}

/* New link hints: ours to send with, and told to the peers (role's relink). */
static void reload_link(struct px_node *n, const struct conf *c)
{
	uint64_t tx = conf_link_rate(c), rx = conf_link_rate_rx(c);
	uint32_t rtt = conf_link_rtt(c);
	if (tx == n->rate_bps && rx == n->rx_bps && rtt == n->rtt_us)
		return;
	n->rate_bps = tx;
	n->rx_bps = rx;
	n->rtt_us = rtt;
	n->env.link_bps = tx;
	log_info("link hints now: sending at %.3f Mbit/s, receiving at %.3f Mbit/s, round trip %.1f ms (0: unknown);"
		 " applied to the tunnel connections and told to their peers", (double)tx / 1e6, (double)rx / 1e6,
		 (double)rtt / 1e3);
	if (n->relink)
		n->relink(n->role);
}

void px_node_reload(struct px_node *n, const struct conf *c)
{
	px_node_swap_reload(n, c);
	reload_link(n, c);
	px_node_tls_reload(n, c);
	if (conf_lan_bulk_streams(c) != n->lan_bulk) {
		log_info("LAN receive buffers: at most %u streams at once may hold the bulk one (was %u; one"
			 " held now is kept until its stream waits or ends)", conf_lan_bulk_streams(c), n->lan_bulk);
		px_lanbuf_set_max(n->lan_bulk = conf_lan_bulk_streams(c));
	}
	/* the host may have changed under us (a VM moved): measure again */
	int changed = dre_store_reprobe(n->store);
	if (changed >= 0) {
		dre_store_stats ss;
		dre_store_get_stats(n->store, &ss);
		log_reads(NULL, &ss, changed ? "are now" : "are still"); /* the store opened at start */
	}
	px_node_apply_size(n, c);
}

void px_node_apply_size(struct px_node *n, const struct conf *c)
{
	if (!n->shrink && !(n->shrink = event_new(n->env.base, -1, 0, shrink_cb, n))) {
		log_warn("store: cannot apply store_size: out of memory");
		return;
	}
	dre_store_stats ss;
	dre_store_get_stats(n->store, &ss);
	if (store_size(n, c) != ss.size_limit)
		check_fs_room(n->store_dir, store_size(n, c), ss.disk_bytes);
	if (!event_pending(n->shrink, EV_TIMEOUT, NULL)) {
		n->shrink_evicted0 = ss.evicted_bytes;
		n->shrink_from = ss.size_limit;
		n->shrink_t0_us = px_mono_us();
	}
	n->shrink_to = store_size(n, c);
	struct timeval now = { 0, 0 };
	event_add(n->shrink, &now);
}

void px_node_stop(struct px_node *n)
{
	struct px_store_use *u = n->env.store; /* the env lets go of it */
	px_node_tls_stop(n);
	px_relay_env_close(&n->env);
	px_node_swap_stop(n);
	if (n->tick)
		event_free(n->tick);
	n->tick = NULL;
	px_lag_free(n->lag);
	n->lag = NULL;
	if (n->shrink)
		event_free(n->shrink);
	n->shrink = NULL;
	if (n->store && dre_store_sync(n->store))
		log_warn("store: final sync failed");
	dre_store_close(n->store);
	n->store = NULL;
	free(u);
	if (n->store_volatile)
		px_volstore_remove(n->store_dir);
	n->store_volatile = 0;
	px_volprobe_free(n->probe);
	n->probe = NULL;
}
