/*
 * relay.c: a LAN connection bound to a tunnel stream (see relay.h).
 *
 * LAN -> WAN: read what the stream has room for, feed the DRE encoder (or pass
 * raw for policy tfo), flush the encoder once the LAN side has been quiet for
 * FLUSH_DELAY_US (interactive traffic goes out at once, bulk traffic keeps
 * content-defined chunk boundaries).  On LAN EOF the stream is closed only once
 * the peer acknowledged every frame: until then it may still ask for one.
 *
 * WAN -> LAN: tunnel data goes through the decoder into the LAN socket's
 * output; above LAN_HIWAT decoding pauses and tunnel credit is withheld, so a
 * slow client slows the sender instead of filling memory.  While paused,
 * arriving tunnel data waits undecoded in `pend` (bounded by the credit): a
 * few KB of references can decode to hundreds of MB.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

#include "bev_fill.h"
#include "dre_proto.h"
#include "log.h"
#include "relay.h"
#include "stats.h"

#define LAN_HIWAT (4u << 20)     /* LAN output above this: pause decoding */
#define LAN_LOWAT (1u << 20)     /* ... resume below this */
#define READ_CHUNK (1u << 20)    /* LAN bytes read and fed to the encoder at a time */
#define DIRECT_MIN (16u << 10)   /* ... read straight into the encoder: from this much a read */
#define DIRECT_MAX (4u << 20)    /* ... and at most this much per pump */
#define FRAME_MAX (256u << 10)   /* encoder frame size: latency vs overhead */
#define FRAME_MAX_SLOW (64u << 10) /* new data per frame and per pump on a slow link (zstd -16) */
#define FLUSH_DELAY_US 2000      /* LAN quiet this long: send the partial chunk */
#define ACK_EVERY 8              /* frames between ACKs while data keeps coming */
#define PASS_LONG_US 10000       /* an event loop pass this long: pumps read no more */
#define GATHER_MAX (64u << 10)   /* encoder output held while a LAN burst lasts */
#define GATHER_LAN (4u << 20)    /* ... or until it stands for this many LAN bytes */
#define REST_S 5                 /* a direction quiet this long (to twice that) gives its
				    codec's memory back: most of a proxy's streams are idle */

struct px_relay {
	struct px_relay_env *env;
	struct bufferevent *bev;  /* the LAN connection */
	tun_stream *ts;
	int policy;
	dre_enc *enc;
	dre_dec *dec;
	struct stats_stream *st;
	struct event *flush_ev;
	struct event *rest_ev;    /* every REST_S while there is a codec */
	size_t held;              /* tunnel bytes received, credit not yet returned */
	struct evbuffer *pend;    /* tunnel bytes arrived while decoding was paused */
	struct evbuffer *gather;  /* encoder output held while a LAN burst lasts (see pump) */
	size_t gather_lan;        /* LAN bytes read since `gather` was last sent */
	uint64_t acked;           /* frames we acknowledged to the peer */
	uint64_t peer_acked;      /* frames the peer acknowledged to us */
	dre_codec_stats last;     /* encoder figures already added to stats */
	uint64_t last_dec_ref;    /* decoder reference bytes already added */
	unsigned lan_eof : 1;     /* the LAN side sent FIN */
	unsigned wan_closed : 1;  /* we sent CLOSE */
	unsigned wan_eof : 1;     /* the peer sent CLOSE */
	unsigned lan_shut : 1;    /* we shut down LAN writes */
	unsigned connecting : 1;  /* LAN socket still connecting (core) */
	unsigned gathering : 1;   /* encoder output goes to `gather` (inside pump) */
	unsigned blocked : 1;     /* pump_direct stopped for want of stream room */
	unsigned lz_full : 1;     /* ... or after a slow link's frame of new data */
	unsigned pass_cut : 1;    /* ... or because the event loop pass ran long (pass_long) */
	unsigned lan_busy : 1;    /* LAN bytes read since the last rest check */
	unsigned wan_busy : 1;    /* tunnel bytes arrived since then */
	unsigned enc_rested : 1;  /* the encoder gave its memory back, and stayed quiet */
	unsigned dec_rested : 1;  /* the same for the decoder */
	uint32_t direct;          /* pump_direct's read size: DIRECT_MIN .. READ_CHUNK */
	struct timespec t0;
	char src[96], dst[300];
};

/* Codecs that gave memory back (rested, or freed with their stream) since
 * px_relay_rests_take last looked. */
static atomic_uint rests;

static void lan_read_cb(struct bufferevent *bev, void *arg);
static void finish_lan(struct px_relay *r);
static void lan_write_cb(struct bufferevent *bev, void *arg);
static void lan_event_cb(struct bufferevent *bev, short what, void *arg);

static double since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static const char *policy_name(int p)
{
	static const char *n[] = { "full", "lz", "tfo", "passthrough" };
	return p >= 0 && p <= PROTO_POLICY_MAX ? n[p] : "?";
}

/* Add the codec's new hit and LZ figures to the stream's stats: DRE hits
 * count bytes that crossed as references, in either direction. */
static void stats_sync(struct px_relay *r)
{
	if (!r->enc)
		return;
	dre_codec_stats s;
	dre_dec_get_stats(r->dec, &s);
	stats_stream_add(r->st, STATS_DRE_HIT, s.ref_bytes - r->last_dec_ref);
	r->last_dec_ref = s.ref_bytes;
	dre_enc_get_stats(r->enc, &s);
	stats_stream_add(r->st, STATS_DRE_HIT, s.ref_bytes - r->last.ref_bytes);
	stats_stream_add(r->st, STATS_LZ_IN, s.lz_in - r->last.lz_in);
	stats_stream_add(r->st, STATS_LZ_OUT, s.lz_out - r->last.lz_out);
	r->last = s;
}

/* Release everything.  rst: reset the LAN connection instead of closing it. */
static void relay_free(struct px_relay *r, int rst, const char *why)
{
	char sum[256];
	stats_sync(r);
	stats_stream_summary(r->st, sum, sizeof sum);
	if (why)
		log_info("close %s -> %s (%s): reset: %s; %s in %.3f s", r->src, r->dst, policy_name(r->policy),
			 why, sum, since(&r->t0));
	else
		log_info("close %s -> %s (%s): %s in %.3f s", r->src, r->dst, policy_name(r->policy), sum,
			 since(&r->t0));
	if (r->bev && bufferevent_getfd(r->bev) < 0) {
		/* a pair (warm): a clean end already gave the feeder EOF; after a
		 * reset, freeing alone would leave it waiting forever */
		struct bufferevent *partner = why ? bufferevent_pair_get_partner(r->bev) : NULL;
		if (partner)
			bufferevent_trigger_event(partner, BEV_EVENT_ERROR, 0);
	} else if (rst && r->bev) {
		struct linger lg = { 1, 0 };
		setsockopt(bufferevent_getfd(r->bev), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	}
	if (r->bev)
		bufferevent_free(r->bev);
	tun_stream_free(r->ts);
	if (r->flush_ev)
		event_free(r->flush_ev);
	if (r->rest_ev)
		event_free(r->rest_ev);
	if (r->enc)
		atomic_fetch_add(&rests, 1);
	dre_enc_free(r->enc);
	dre_dec_free(r->dec);
	if (r->pend)
		evbuffer_free(r->pend);
	if (r->gather)
		evbuffer_free(r->gather);
	stats_stream_close(r->st);
	struct px_relay_env *env = r->env;
	free(r);
	if (--env->active == 0 && env->on_idle)
		env->on_idle(env);
}

/* Something failed: reset both sides. */
static void relay_abort(struct px_relay *r, int code, const char *why)
{
	if (r->ts)
		tun_stream_reset(r->ts, code);
	relay_free(r, 1, why);
}

/* Both directions finished cleanly: release. */
static void maybe_done(struct px_relay *r)
{
	if (r->lan_eof && r->wan_closed && r->wan_eof && r->lan_shut)
		relay_free(r, 0, NULL);
}

/* Send the encoder output held back in `gather`, ahead of anything else. */
static int gather_push(struct px_relay *r)
{
	r->gather_lan = 0;
	if (!r->gather || !evbuffer_get_length(r->gather))
		return 0;
	return !r->ts || tun_stream_write_buffer(r->ts, r->gather) ? -1 : 0;
}

/* Encoder output: into the stream (or, inside pump, held in `gather`). */
static int wan_out(void *arg, const void *buf, size_t len)
{
	struct px_relay *r = arg;
	if (r->gathering ? evbuffer_add(r->gather, buf, len) != 0
			 : gather_push(r) || !r->ts || tun_stream_write(r->ts, buf, len))
		return -1;
	stats_stream_add(r->st, STATS_WAN_OUT, len);
	return 0;
}

/* 1 if more LAN bytes wait in the kernel: pump runs again at once. */
static int lan_more(struct px_relay *r)
{
	int q = 0, fd = bufferevent_getfd(r->bev);
	return !r->lan_eof && fd >= 0 && ioctl(fd, FIONREAD, &q) == 0 && q > 0;
}

/* Decoder output: into the LAN socket; pause above the high mark. */
static int lan_out(void *arg, const void *buf, size_t len)
{
	struct px_relay *r = arg;
	if (bufferevent_write(r->bev, buf, len))
		return -1;
	stats_stream_add(r->st, STATS_LAN_OUT, len);
	return evbuffer_get_length(bufferevent_get_output(r->bev)) >= LAN_HIWAT;
}

static void free_taken(const void *data, size_t len, void *arg)
{
	free((void *)data);
}

/* Decoder output handed over (dre_dec_set_take): into the LAN socket's output
 * without a copy; pause above the high mark. */
static int lan_take(void *arg, void *buf, size_t len)
{
	struct px_relay *r = arg;
	if (evbuffer_add_reference(bufferevent_get_output(r->bev), buf, len, free_taken, NULL)) {
		free(buf);
		return -1;
	}
	stats_stream_add(r->st, STATS_LAN_OUT, len);
	return evbuffer_get_length(bufferevent_get_output(r->bev)) >= LAN_HIWAT;
}

/* Our decoder lacks what a frame references: ask the peer's encoder. */
static void dec_ask(void *arg, uint64_t seq)
{
	struct px_relay *r = arg;
	stats_stream_add(r->st, STATS_ASKS, 1);
	log_debug("%s -> %s: asking for frame %llu%s", r->src, r->dst, (unsigned long long)(seq & ~DRE_ASK_FULL),
		  seq & DRE_ASK_FULL ? " in full" : "");
	if (r->ts)
		tun_stream_ask(r->ts, seq);
}

/* Close our direction of the stream once the LAN side ended, all its bytes
 * were encoded and (with DRE) the peer acknowledged every frame. */
static void try_close_wan(struct px_relay *r)
{
	if (!r->lan_eof || r->wan_closed || !r->ts || evbuffer_get_length(bufferevent_get_input(r->bev)))
		return;
	if (r->enc && dre_enc_seq(r->enc) > r->peer_acked)
		return; /* on_ack calls again */
	if (gather_push(r)) {
		relay_abort(r, PROTO_RST_INTERNAL, "tunnel write failed");
		return;
	}
	stats_sync(r);
	tun_stream_close(r->ts);
	r->wan_closed = 1;
	if (r->lan_shut)
		maybe_done(r);
	else
		finish_lan(r); /* a pair's feeder may be waiting for this (see finish_lan) */
}

/* Hand the first n bytes of `in` to the encoder (or the stream), piece by
 * piece as they sit in the buffer: the encoder frames large pieces in place. */
static int feed(struct px_relay *r, struct evbuffer *in, size_t n)
{
	struct evbuffer_iovec v[16];
	int k = evbuffer_peek(in, (ssize_t)n, NULL, v, 16);
	if (k < 0 || k > 16) {
		const unsigned char *p = evbuffer_pullup(in, (ssize_t)n);
		return r->enc ? dre_enc_write(r->enc, p, n, wan_out, r) : wan_out(r, p, n);
	}
	for (int i = 0; i < k && n; i++) {
		size_t m = v[i].iov_len < n ? v[i].iov_len : n;
		int rc = r->enc ? dre_enc_write(r->enc, v[i].iov_base, m, wan_out, r) : wan_out(r, v[i].iov_base, m);
		if (rc)
			return rc;
		n -= m;
	}
	return 0;
}

/* Room in the stream for more input, counting what `gather` holds (which it
 * sends first when it is large or fills the room); *err on a write failure. */
static size_t pump_room(struct px_relay *r, int *err)
{
	size_t g = r->gather ? evbuffer_get_length(r->gather) : 0;
	size_t room = r->ts ? tun_stream_room(r->ts) : 0;
	if (g && (g >= GATHER_MAX || g >= room)) {
		*err = gather_push(r);
		return *err || !r->ts ? 0 : tun_stream_room(r->ts);
	}
	return room - g;
}

/* Whether, on a slow link, the encoder has compressed a frame's worth of
 * new data since its LZ input count was lz0 (*lz0 = that count if reset). */
static int lz_budget_spent(struct px_relay *r, uint64_t *lz0, int reset)
{
	if (!r->env->link_bps || r->env->link_bps > DRE_LINK_SLOW_BPS)
		return 0;
	dre_codec_stats cs;
	dre_enc_get_stats(r->enc, &cs);
	if (reset)
		*lz0 = cs.lz_in;
	return cs.lz_in - *lz0 >= FRAME_MAX_SLOW;
}

/* Whether the event loop pass under way has run callbacks for PASS_LONG_US
 * (libevent caches the time when a pass starts).  Then pumps stop reading
 * straight from their sockets and leave what is there for the next pass
 * (the socket stays readable).  With 100 bulk streams encoding at once
 * (proxy_scale part 2), passes took up to 150-240 ms, and every timer
 * (keepalives) and every other socket (an interactive stream) of that loop
 * waited as long; with the cut, up to 60-75 ms. */
static int pass_long(const struct px_relay *r)
{
	struct timeval start, now;
	if (event_base_gettimeofday_cached(r->env->base, &start) || gettimeofday(&now, NULL))
		return 0;
	return (now.tv_sec - start.tv_sec) * 1000000 + (now.tv_usec - start.tv_usec) > PASS_LONG_US;
}

/* Read LAN bytes straight into the encoder's buffer while the stream has
 * room (up to DIRECT_MAX a call, or a frame of new data on a slow link, whose
 * zstd level would otherwise hold the event loop and the tunnel for half a
 * second; repeated data, which costs little, still goes by the burst): no
 * copy through the socket's evbuffer, and not libevent 2.1's 4 KiB per
 * readiness event (EVBUFFER_MAX_READ, whatever max_single_read says).  End
 * of file is left for libevent's next read to report.  NULL, or why the
 * relay must be aborted (*code: the reset code). */
static const char *pump_direct(struct px_relay *r, int *code)
{
	int fd = bufferevent_getfd(r->bev);
	if (!r->enc || fd < 0 || r->lan_eof || r->connecting)
		return NULL;
	r->blocked = 0;
	uint64_t lz0 = 0;
	int slow = r->env->link_bps && r->env->link_bps <= DRE_LINK_SLOW_BPS;
	r->lz_full = 0;
	lz_budget_spent(r, &lz0, 1);
	for (size_t total = 0; total < DIRECT_MAX;) {
		if (pass_long(r)) {
			/* what the socket still holds comes with its next read
			 * event; if nothing, the flush timer sends the tail */
			r->pass_cut = lan_more(r);
			return NULL;
		}
		if (lz_budget_spent(r, &lz0, 0)) {
			r->lz_full = 1; /* pump sends what it gathered */
			return NULL;
		}
		int err = 0;
		size_t room = pump_room(r, &err), space = 0;
		if (err)
			return "tunnel write failed";
		if (!room) {
			bufferevent_disable(r->bev, EV_READ);
			r->blocked = 1;
			return NULL;
		}
		size_t want = room < r->direct ? room : r->direct;
		if (slow && want > FRAME_MAX_SLOW) /* one commit codes about a frame */
			want = FRAME_MAX_SLOW;
		uint8_t *dst = dre_enc_space(r->enc, want, &space);
		if (!dst)
			return "out of memory";
		ssize_t n = read(fd, dst, want);
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			*code = PROTO_RST_TARGET;
			return evutil_socket_error_to_string(errno);
		}
		if (n <= 0)
			return NULL;
		int rc = dre_enc_commit(r->enc, (size_t)n, wan_out, r);
		if (rc)
			return dre_strerror(rc);
		stats_stream_add(r->st, STATS_LAN_IN, (uint64_t)n);
		r->gather_lan += (size_t)n;
		total += (size_t)n;
		if ((size_t)n == want && want == r->direct && r->direct < READ_CHUNK)
			r->direct *= 2; /* a bulk transfer: read (and buffer) more at a time */
		else if ((size_t)n < want / 4 && r->direct > DIRECT_MIN)
			r->direct /= 2;
		if ((size_t)n < want)
			return NULL; /* the socket is empty */
	}
	return NULL;
}

/* Feed LAN input to the encoder (or the stream) while the stream has room:
 * what libevent read, then (with an encoder) what the socket holds; NULL, or
 * why the relay must be aborted (*code: the reset code). */
static const char *pump_feed(struct px_relay *r, struct evbuffer *in, int *code)
{
	size_t len;
	while ((len = evbuffer_get_length(in)) > 0) {
		int err = 0;
		size_t room = pump_room(r, &err);
		if (err)
			return "tunnel write failed";
		if (!room) {
			bufferevent_disable(r->bev, EV_READ);
			return NULL;
		}
		size_t n = len < room ? len : room;
		if (n > READ_CHUNK)
			n = READ_CHUNK;
		int rc = feed(r, in, n);
		if (rc)
			return r->enc ? dre_strerror(rc) : "tunnel write failed";
		evbuffer_drain(in, n);
		stats_stream_add(r->st, STATS_LAN_IN, n);
		r->gather_lan += n;
	}
	return pump_direct(r, code);
}

/* Move LAN input into the stream while it has room.  While more LAN bytes
 * are already waiting (a burst, e.g. a hot transfer), the encoder's small
 * frames are held and go out together once the burst is read (or 64 KiB
 * gathered): dozens of tiny frames as dozens of segments would outrun a
 * congestion window that shrank while the tunnel idled, and cost a round
 * trip.  A long burst still goes out every GATHER_LAN bytes read, so that
 * the peer decodes while we encode instead of after.  Interactive traffic,
 * where the socket is empty after each read, is sent at once. */
static void pump(struct px_relay *r)
{
	struct evbuffer *in = bufferevent_get_input(r->bev);
	int code = PROTO_RST_INTERNAL;
	r->lan_busy = 1;
	r->enc_rested = 0;
	r->pass_cut = 0;
	r->gathering = r->enc != NULL && r->gather != NULL;
	const char *why = pump_feed(r, in, &code);
	r->gathering = 0;
	if (!why && r->gather && evbuffer_get_length(r->gather) &&
	    (evbuffer_get_length(in) || evbuffer_get_length(r->gather) >= GATHER_MAX || r->gather_lan >= GATHER_LAN ||
	     r->lz_full || !lan_more(r)) &&
	    gather_push(r))
		why = "tunnel write failed";
	if (why) {
		relay_abort(r, code, why);
		return;
	}
	stats_sync(r); /* the encoder's hits and LZ figures show while the stream lives */
	if (evbuffer_get_length(in) || r->blocked)
		return; /* backpressured: on_writable calls again */
	if (!r->lan_eof)
		bufferevent_enable(r->bev, EV_READ);
	if (r->enc && r->pass_cut) {
		evtimer_del(r->flush_ev); /* not quiet: the rest comes next pass */
	} else if (r->enc) {
		struct timeval tv = { 0, FLUSH_DELAY_US };
		evtimer_add(r->flush_ev, &tv);
	}
}

static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_relay *r = arg;
	if (!r->ts || !tun_stream_room(r->ts))
		return; /* backpressured: pump re-arms when room comes back */
	if (pass_long(r)) { /* e.g. 1,000 new streams' first bytes: spread over passes */
		struct timeval now = { 0, 0 };
		evtimer_add(r->flush_ev, &now);
		return;
	}
	int rc = gather_push(r) ? DRE_EOUT : dre_enc_flush(r->enc, wan_out, r);
	if (rc)
		relay_abort(r, PROTO_RST_INTERNAL, dre_strerror(rc));
}

unsigned px_relay_rests_take(void)
{
	return atomic_exchange(&rests, 0);
}

/* Every REST_S: a codec whose direction stayed quiet since the last call
 * gives its memory back (the encoder's costs a dozen WAN bytes, once). */
static void rest_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_relay *r = arg;
	if (!r->lan_busy && !r->enc_rested && r->ts && tun_stream_room(r->ts) &&
	    !evbuffer_get_length(r->gather)) {
		int rc = dre_enc_rest(r->enc, wan_out, r);
		if (rc) {
			relay_abort(r, PROTO_RST_INTERNAL, dre_strerror(rc));
			return;
		}
		r->enc_rested = 1;
		atomic_fetch_add(&rests, 1);
		stats_sync(r);
	}
	if (!r->wan_busy && !r->dec_rested && !dre_dec_paused(r->dec)) {
		dre_dec_rest(r->dec);
		r->dec_rested = 1;
		atomic_fetch_add(&rests, 1);
	}
	r->lan_busy = r->wan_busy = 0;
}

/* Return tunnel credit for what the LAN side has taken, and acknowledge
 * decoded frames. */
static void credit_and_ack(struct px_relay *r)
{
	if (!r->ts)
		return;
	stats_sync(r);
	int paused = r->dec && dre_dec_paused(r->dec);
	if (r->held && !paused && evbuffer_get_length(bufferevent_get_output(r->bev)) < LAN_HIWAT) {
		tun_stream_consumed(r->ts, r->held);
		r->held = 0;
	}
	if (r->dec) {
		uint64_t a = dre_dec_applied(r->dec);
		if (a > r->acked && (a - r->acked >= ACK_EVERY || !dre_dec_buffered(r->dec))) {
			tun_stream_ack(r->ts, a);
			r->acked = a;
		}
	}
}

/* The peer finished (its END frame was decoded, or it closed the stream):
 * once everything is decoded and written, FIN the LAN; release r when both
 * directions are done (callers must not touch r afterwards).  The END frame comes a
 * round trip before the CLOSE, which waits for our acknowledgement. */
static void finish_lan(struct px_relay *r)
{
	if (r->lan_shut) {
		maybe_done(r); /* e.g. the CLOSE that follows an END: may free r */
		return;
	}
	if (!(r->wan_eof || (r->dec && dre_dec_ended(r->dec))))
		return;
	if (r->dec) {
		if (dre_dec_paused(r->dec) || evbuffer_get_length(r->pend))
			return;
		int rc = dre_dec_finish(r->dec);
		if (rc) {
			relay_abort(r, PROTO_RST_CODEC, rc == DRE_EMISS ? "stream ended inside a frame" : dre_strerror(rc));
			return;
		}
	}
	if (evbuffer_get_length(bufferevent_get_output(r->bev))) {
		bufferevent_setwatermark(r->bev, EV_WRITE, 0, 0); /* call back when empty */
		return;
	}
	int fd = bufferevent_getfd(r->bev);
	if (fd >= 0)
		shutdown(fd, SHUT_WR);
	else if (!r->wan_closed)
		return; /* a pair (warm): its feeder takes EOF as "all delivered", so
			 * it waits until the peer acknowledged every frame */
	else
		bufferevent_flush(r->bev, EV_WRITE, BEV_FINISHED);
	r->lan_shut = 1;
	maybe_done(r);
}

static void lan_read_cb(struct bufferevent *bev, void *arg)
{
	struct px_relay *r = arg;
	/* with an encoder, pump_direct reads the rest */
	if (!r->enc && !r->lan_eof && px_bev_fill(bev, READ_CHUNK)) {
		lan_event_cb(bev, BEV_EVENT_READING | BEV_EVENT_ERROR, r);
		return;
	}
	pump(r);
}

static void lan_write_cb(struct bufferevent *bev, void *arg)
{
	struct px_relay *r = arg;
	if (r->dec && dre_dec_paused(r->dec)) {
		int rc = dre_dec_write(r->dec, NULL, 0, lan_out, r);
		/* then what arrived meanwhile, until the output fills up again */
		while (!rc && !dre_dec_paused(r->dec) && evbuffer_get_length(r->pend)) {
			size_t n = evbuffer_get_contiguous_space(r->pend);
			rc = dre_dec_write(r->dec, evbuffer_pullup(r->pend, (ssize_t)n), n, lan_out, r);
			evbuffer_drain(r->pend, n);
		}
		if (rc) {
			relay_abort(r, PROTO_RST_CODEC, dre_strerror(rc));
			return;
		}
	}
	credit_and_ack(r);
	finish_lan(r);
}

static void lan_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct px_relay *r = arg;
	if (what & BEV_EVENT_CONNECTED) {
		px_relay_connected(r);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		r->lan_eof = 1;
		pump(r);
		if (evbuffer_get_length(bufferevent_get_input(bev)))
			return; /* the rest goes when the stream has room; on_writable retries */
		int rc = r->enc ? dre_enc_end(r->enc, wan_out, r) : 0;
		if (rc) {
			relay_abort(r, PROTO_RST_INTERNAL, dre_strerror(rc));
			return;
		}
		try_close_wan(r);
		return;
	}
	if (r->connecting) {
		px_relay_fail(r, PROTO_RST_CONNECT, evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		return;
	}
	relay_abort(r, PROTO_RST_TARGET, evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
}

/* ---- tunnel stream callbacks ---- */

static void ts_data(tun_stream *s, void *arg, const void *buf, size_t len)
{
	struct px_relay *r = arg;
	stats_stream_add(r->st, STATS_WAN_IN, len);
	r->held += len;
	r->wan_busy = 1;
	r->dec_rested = 0;
	if (r->dec && dre_dec_paused(r->dec)) {
		if (evbuffer_add(r->pend, buf, len))
			relay_abort(r, PROTO_RST_INTERNAL, "out of memory");
		return; /* lan_write_cb decodes it once the LAN side drained */
	}
	if (r->dec) {
		int rc = dre_dec_write(r->dec, buf, len, lan_out, r);
		if (rc) {
			relay_abort(r, PROTO_RST_CODEC, dre_strerror(rc));
			return;
		}
	} else if (lan_out(r, buf, len) < 0) {
		relay_abort(r, PROTO_RST_INTERNAL, "LAN write failed");
		return;
	}
	credit_and_ack(r);
	finish_lan(r);
}

static void ts_close(tun_stream *s, void *arg)
{
	struct px_relay *r = arg;
	r->wan_eof = 1;
	credit_and_ack(r);
	finish_lan(r);
}

static void ts_reset(tun_stream *s, void *arg, int code)
{
	struct px_relay *r = arg;
	char why[64];
	snprintf(why, sizeof why, "stream reset by %s (code %d)",
		 code == PROTO_RST_TUNNEL_DOWN ? "tunnel loss" : "peer", code);
	relay_free(r, 1, why);
}

static void ts_writable(tun_stream *s, void *arg)
{
	struct px_relay *r = arg;
	pump(r);
	if (r->lan_eof && !evbuffer_get_length(bufferevent_get_input(r->bev))) {
		int rc = r->enc ? dre_enc_end(r->enc, wan_out, r) : 0;
		if (rc) {
			relay_abort(r, PROTO_RST_INTERNAL, dre_strerror(rc));
			return;
		}
		try_close_wan(r);
	}
}

static void ts_ask(tun_stream *s, void *arg, uint64_t seq)
{
	struct px_relay *r = arg;
	int rc = r->enc ? dre_enc_learn(r->enc, seq, wan_out, r) : DRE_ESTATE;
	if (rc) {
		relay_abort(r, PROTO_RST_CODEC, "cannot resend a frame the peer lacks");
		return;
	}
	log_debug("%s -> %s: resent frame %llu%s", r->src, r->dst, (unsigned long long)(seq & ~DRE_ASK_FULL),
		  seq & DRE_ASK_FULL ? " in full" : "");
}

static void ts_ack(tun_stream *s, void *arg, uint64_t seq)
{
	struct px_relay *r = arg;
	if (!r->enc)
		return;
	dre_enc_ack(r->enc, seq);
	if (seq > r->peer_acked)
		r->peer_acked = seq;
	try_close_wan(r);
}

const tun_stream_cbs px_relay_stream_cbs = {
	.on_data = ts_data,
	.on_close = ts_close,
	.on_reset = ts_reset,
	.on_writable = ts_writable,
	.on_ask = ts_ask,
	.on_ack = ts_ack,
};

/* Codec per policy: full = DRE + LZ, lz = LZ only, tfo = none.  The encoder
 * references only what the peer's store (its id from the tunnel HELLO) is
 * known to hold; the decoder records what the peer sent as held by it. */
static int make_codec(struct px_relay *r, tun_stream *s)
{
	if (r->policy != PROTO_POLICY_FULL && r->policy != PROTO_POLICY_LZ)
		return 0;
	tun_conn *c = tun_stream_conn(s);
	const tun_hello *h = c ? tun_conn_hello(c) : NULL;
	int slot = h ? dre_store_peer(r->env->store, h->store_id) : -1;
	uint64_t bps = r->env->link_bps;
	dre_enc_opts o = { .link_bps = bps, .frame_max = FRAME_MAX, .retain = 1,
			   .frame_lit_max = bps && bps <= DRE_LINK_SLOW_BPS ? FRAME_MAX_SLOW : 0,
			   .no_dedup = r->policy == PROTO_POLICY_LZ, .peer = slot + 1,
			   /* a version-N peer decodes DRE stream versions up to N */
			   .version = c && tun_conn_version(c) < DRE_STREAM_VERSION ? (int)tun_conn_version(c) : 0 };
	r->enc = dre_enc_new(r->env->store, &o);
	r->dec = dre_dec_new(r->env->store);
	r->pend = evbuffer_new();
	r->gather = evbuffer_new();
	r->rest_ev = event_new(r->env->base, -1, EV_PERSIST, rest_cb, r);
	struct timeval tv = { REST_S, 0 };
	if (!r->enc || !r->dec || !r->pend || !r->gather || !r->rest_ev || event_add(r->rest_ev, &tv))
		return -1;
	dre_dec_set_peer(r->dec, slot);
	dre_dec_set_ask(r->dec, dec_ask, r);
	dre_dec_set_take(r->dec, lan_take);
	return 0;
}

struct px_relay *px_relay_new(struct px_relay_env *env, struct bufferevent *bev, tun_stream *s,
			      int policy, const char *src, const char *dst, int connecting)
{
	struct px_relay *r = calloc(1, sizeof *r);
	if (!r) {
		bufferevent_free(bev);
		if (s)
			tun_stream_reset(s, PROTO_RST_INTERNAL);
		tun_stream_free(s);
		return NULL;
	}
	env->active++;
	r->env = env;
	r->bev = bev;
	r->policy = policy;
	r->connecting = connecting;
	r->direct = DIRECT_MIN;
	clock_gettime(CLOCK_MONOTONIC, &r->t0);
	snprintf(r->src, sizeof r->src, "%s", src);
	snprintf(r->dst, sizeof r->dst, "%s", dst);
	r->st = stats_stream_open(env->stats, src, dst, policy_name(policy));
	if (!(r->flush_ev = evtimer_new(env->base, flush_cb, r)) || (s && make_codec(r, s))) {
		r->ts = s;
		relay_abort(r, PROTO_RST_INTERNAL, "out of memory");
		return NULL;
	}
	bufferevent_setcb(bev, lan_read_cb, lan_write_cb, lan_event_cb, r);
	bufferevent_setwatermark(bev, EV_WRITE, LAN_LOWAT, 0);
	bufferevent_set_max_single_read(bev, READ_CHUNK);
	/* libevent writes 16 KiB per call by default: a syscall per 16 KiB of
	 * decoded output would cost more than the decoding */
	bufferevent_set_max_single_write(bev, READ_CHUNK);
	if (s) {
		r->ts = s;
		tun_stream_set_cbs(s, &px_relay_stream_cbs, r);
	}
	if (!connecting)
		bufferevent_enable(bev, EV_READ | EV_WRITE);
	log_info("open %s -> %s (%s)", src, dst, policy_name(policy));
	return r;
}

void px_relay_attach(struct px_relay *r, tun_stream *s)
{
	r->ts = s;
	tun_stream_set_cbs(s, &px_relay_stream_cbs, r);
	if (!r->enc && make_codec(r, s))
		relay_abort(r, PROTO_RST_INTERNAL, "out of memory");
}

void px_relay_connected(struct px_relay *r)
{
	r->connecting = 0;
	bufferevent_enable(r->bev, EV_READ | EV_WRITE);
	pump(r);
}

void px_relay_fail(struct px_relay *r, int code, const char *why)
{
	relay_abort(r, code, why);
}

void px_relay_set_warm(struct px_relay *r)
{
	stats_stream_set_warm(r->st);
}

struct bufferevent *px_relay_bev(struct px_relay *r)
{
	return r->bev;
}
