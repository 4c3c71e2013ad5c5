/*
 * relay.c: a LAN connection bound to a tunnel stream (see relay.h).
 *
 * LAN -> WAN: relay_pump.c reads what the stream has room for and feeds the
 * DRE encoder.  On LAN EOF the stream is closed only once the peer
 * acknowledged every frame: until then it may still ask for one.
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
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

#include "bev_fill.h"
#include "dre_proto.h"
#include "lag.h"
#include "log.h"
#include "relay.h"
#include "relay_int.h"
#include "stats.h"
#include "tfo.h"

/* Decoded output held for a slow client, per stream.  4 MiB (with 1 MiB to
 * resume) cost the first hot download after a cold one 770 page faults at
 * the edge on the emulated T1 (0.072-0.078 s, 0.055 s once faulted in);
 * 1 MiB: 312 faults, 0.064-0.071 s; hot loopback throughput the same. */
#define LAN_HIWAT (1u << 20)     /* LAN output above this: pause decoding */
#define LAN_LOWAT (256u << 10)   /* ... resume below this */
#define FRAME_MAX (256u << 10)   /* encoder frame size: latency vs overhead */
#define ACK_EVERY 8              /* frames between ACKs while data keeps coming */
#define REST_S 5                 /* a direction quiet this long (to twice that) gives its
				    codec's memory back: most of a proxy's streams are idle */
#define ASK_DEADLINE_S 30        /* a decoder waiting for the LEARN it asked for while
				    nothing at all comes on its stream this long (to REST_S
				    more) resets it (on a slow link a LEARN may take long to
				    arrive, but bytes keep coming) */
#define BACKLOG_BUDGET (256ull << 20) /* encoded bytes all decoders of the process may hold
				    (frames not yet complete, or waiting for a LEARN) ... */
#define BACKLOG_OWN_MIN (1u << 20)    /* ... past it, a stream holding this much is reset */
#define STR_LEARN_BACKLOG "64 MiB" /* DRE_LEARN_BACKLOG */
_Static_assert(DRE_LEARN_BACKLOG == 64u << 20, "STR_LEARN_BACKLOG says otherwise");

/* Codecs that gave memory back since px_relay_rests_take last looked: rested
 * (their streams quiet), and freed with their stream. */
static atomic_uint rests, frees;
/* What every decoder of the process holds undecoded (the sum of their r->backlog). */
static atomic_ullong backlog;

static void lan_read_cb(struct bufferevent *bev, void *arg);
static void finish_lan(struct px_relay *r);
static void lan_write_cb(struct bufferevent *bev, void *arg);
static void lan_event_cb(struct bufferevent *bev, short what, void *arg);

/* Seconds since t0_us (px_mono_us). */
static double since(uint64_t t0_us)
{
	return (double)(px_mono_us() - t0_us) / 1e6;
}

static const char *policy_name(int p)
{
	static const char *n[] = { "full", "lz", "tfo", "passthrough" };
	return p >= 0 && p <= PROTO_POLICY_MAX ? n[p] : "?";
}

/* Add what a codec counted since *last to the stream's stats. */
static void codec_sync(struct px_relay *r, const dre_codec_stats *s, dre_codec_stats *last)
{
	stats_stream_add(r->st, STATS_DRE_HIT, s->ref_bytes - last->ref_bytes);
	stats_stream_add(r->st, STATS_LZ_IN, s->lz_in - last->lz_in);
	stats_stream_add(r->st, STATS_LZ_OUT, s->lz_out - last->lz_out);
	*last = *s;
}

/* Add the codecs' new hit and LZ figures to the stream's stats, in both
 * directions: DRE hits count bytes that crossed as references, LZ the
 * residual before and after compression. */
void px_relay_stats_sync(struct px_relay *r)
{
	if (!r->enc)
		return;
	dre_codec_stats s;
	dre_dec_get_stats(r->dec, &s);
	codec_sync(r, &s, &r->last_dec);
	if (r->coding)
		return; /* the encoder is the job's until it is back */
	dre_enc_get_stats(r->enc, &s);
	codec_sync(r, &s, &r->last);
}

/* Release everything.  rst: reset the LAN connection instead of closing it. */
static void relay_free(struct px_relay *r, int rst, const char *why)
{
	char sum[256];
	px_relay_job_drop(r); /* first: the encoder and the socket are ours again */
	px_lanbuf_release(r);
	px_relay_stats_sync(r);
	stats_stream_summary(r->st, sum, sizeof sum);
	if (why)
		log_info("close %s -> %s (%s): %s%s; %s in %.3f s", r->src, r->dst, policy_name(r->policy),
			 r->handed ? "" : "reset: ", why, sum, since(r->t0_us));
	else
		log_info("close %s -> %s (%s): %s in %.3f s", r->src, r->dst, policy_name(r->policy), sum,
			 since(r->t0_us));
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
		atomic_fetch_add(&frees, 1);
	dre_enc_free(r->enc);
	dre_dec_free(r->dec);
	if (r->store)
		dre_store_peer_put(r->store->st, r->peer_slot); /* the codecs that marked its bit are gone */
	px_store_drop(r->store);
	if (r->pend)
		evbuffer_free(r->pend);
	if (r->gather)
		evbuffer_free(r->gather);
	px_relay_first_drop(r);
	stats_stream_close(r->st);
	atomic_fetch_sub(&backlog, r->backlog);
	if (r->watch)
		*r->watch = NULL; /* e.g. a name lookup still on its way */
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

/* Decoder output: into the LAN socket; pause above the high mark. */
static int lan_out(void *arg, const void *buf, size_t len)
{
	struct px_relay *r = arg;
	if (bufferevent_write(r->bev, buf, len))
		return -1;
	r->wan_busy = 1;
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
	r->wan_busy = 1;
	stats_stream_add(r->st, STATS_LAN_OUT, len);
	return evbuffer_get_length(bufferevent_get_output(r->bev)) >= LAN_HIWAT;
}

/* Count what r's decoder now holds undecoded; 1 if every decoder of the
 * process together holds more than BACKLOG_BUDGET and r a good part of it
 * (a peer sending frames it never completes, or that wait on a LEARN it
 * never sends, on many streams: each alone stays within the decoder's
 * bounds, together they would not). */
static int backlog_over(struct px_relay *r)
{
	/* paused (its LAN side full), it holds its credit: bounded by its window */
	uint64_t now = dre_dec_paused(r->dec) ? 0 : dre_dec_buffered(r->dec);
	if (now >= r->backlog)
		atomic_fetch_add(&backlog, now - r->backlog);
	else
		atomic_fetch_sub(&backlog, r->backlog - now);
	r->backlog = now;
	return now >= BACKLOG_OWN_MIN && atomic_load(&backlog) > BACKLOG_BUDGET;
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
	if (!r->lan_eof || r->wan_closed || !r->ts || r->coding || evbuffer_get_length(bufferevent_get_input(r->bev)))
		return;
	if (r->enc && dre_enc_seq(r->enc) > r->peer_acked)
		return; /* on_ack calls again */
	if (px_relay_gather_push(r)) {
		relay_abort(r, PROTO_RST_INTERNAL, "tunnel write failed");
		return;
	}
	px_relay_stats_sync(r);
	tun_stream_close(r->ts);
	r->wan_closed = 1;
	if (r->lan_shut)
		maybe_done(r);
	else
		finish_lan(r); /* a pair's feeder may be waiting for this (see finish_lan) */
}

unsigned px_relay_rests_take(unsigned *freed)
{
	*freed = atomic_exchange(&frees, 0);
	return atomic_exchange(&rests, 0);
}

/* The decoder gives its memory back if it holds no part of a frame
 * (dre_dec_rest); the next tick trims the heap (px_relay_rests_take). */
static void dec_rest(struct px_relay *r)
{
	if (dre_dec_rest(r->dec)) {
		r->dec_rested = 1;
		atomic_fetch_add(&rests, 1);
	}
}

/* Every REST_S: a codec whose direction stayed quiet since the last call
 * gives its memory back (the encoder's costs a dozen WAN bytes, once). */
static void rest_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_relay *r = arg;
	if (!r->lan_busy && !r->enc_rested && !r->coding && r->ts && tun_stream_room(r->ts) &&
	    !evbuffer_get_length(r->gather)) {
		int rc = dre_enc_rest(r->enc, px_relay_wan_out, r);
		if (rc) {
			relay_abort(r, PROTO_RST_INTERNAL, dre_strerror(rc));
			return;
		}
		r->enc_rested = 1;
		px_relay_job_rest(r); /* its output buffer: up to 1 MiB */
		atomic_fetch_add(&rests, 1);
		px_relay_stats_sync(r);
	}
	if (!r->wan_busy && !r->dec_rested && !dre_dec_paused(r->dec))
		dec_rest(r);
	r->lan_busy = r->wan_busy = 0;
	/* waiting on the peer (not on our LAN side, which would hold its credit) */
	if (!dre_dec_waiting(r->dec) || dre_dec_paused(r->dec))
		r->ask_since_us = 0;
	else if (!r->ask_since_us)
		r->ask_since_us = px_mono_us();
	else if (px_mono_us() - r->ask_since_us > ASK_DEADLINE_S * 1000000ull) {
		char why[96];
		snprintf(why, sizeof why, "waiting for the LEARN asked for, nothing came on the stream for %d s",
			 ASK_DEADLINE_S);
		relay_abort(r, PROTO_RST_CODEC, why);
	}
}

/* Return tunnel credit for what the LAN side has taken, and acknowledge
 * decoded frames. */
static void credit_and_ack(struct px_relay *r)
{
	if (!r->ts)
		return;
	px_relay_stats_sync(r);
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
	px_relay_pump(r);
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
		backlog_over(r); /* it shrank, or stayed (paused, it holds credit) */
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
		/* the rest goes when the stream has room (on_writable) */
		px_relay_continue(r);
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
	px_relay_first_drop(r); /* the peer took the stream */
	stats_stream_add(r->st, STATS_WAN_IN, len);
	r->held += len;
	r->ask_since_us = 0; /* the peer is sending: a LEARN waited for is on its way */
	/* rested, and no output since: a frame that brings none either (the
	 * peer's encoder resting) leaves the decoder rested */
	unsigned rested = r->dec_rested;
	r->dec_rested = 0;
	if (r->dec && dre_dec_paused(r->dec)) {
		if (evbuffer_add(r->pend, buf, len))
			relay_abort(r, PROTO_RST_INTERNAL, "out of memory");
		return; /* lan_write_cb decodes it once the LAN side drained */
	}
	if (r->dec) {
		int rc = dre_dec_write(r->dec, buf, len, lan_out, r);
		if (rc == DRE_ECORRUPT || rc == DRE_EVERSION) { /* the peer's fault, unless a bug: say who */
			tun_conn *c = tun_stream_conn(s);
			log_warn("tunnel %s: %s -> %s: what the peer sent does not decode: %s", c ? tun_conn_peer(c) : "?",
				 r->src, r->dst, dre_strerror(rc));
		}
		if (rc) {
			relay_abort(r, PROTO_RST_CODEC, rc == DRE_ESTATE && dre_dec_waiting(r->dec)
				    ? "the frames waiting for the LEARN asked for passed " STR_LEARN_BACKLOG
				    : dre_strerror(rc));
			return;
		}
		if (backlog_over(r)) {
			char why[128];
			snprintf(why, sizeof why, "the decoders hold %llu MiB undecoded, over the process's %llu MiB",
				 (unsigned long long)(atomic_load(&backlog) >> 20), BACKLOG_BUDGET >> 20);
			relay_abort(r, PROTO_RST_CODEC, why);
			return;
		}
		if (rested && !r->wan_busy)
			dec_rest(r);
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
	px_relay_first_drop(r);
	r->wan_eof = 1;
	credit_and_ack(r);
	finish_lan(r);
}

/* What a RESET's code says, for the log. */
static const char *rst_meaning(int code)
{
	static const char *const m[PROTO_RST_MAX + 1] = {
		[PROTO_RST_CANCEL] = "cancelled", [PROTO_RST_REFUSED] = "refused: too many streams or going away",
		[PROTO_RST_NOT_ALLOWED] = "target not in the core's allow list",
		[PROTO_RST_CONNECT] = "cannot connect to the target",
		[PROTO_RST_TARGET] = "its connection at the other end failed",
		[PROTO_RST_CODEC] = "decoding failed at the other end", [PROTO_RST_INTERNAL] = "out of resources there",
		[PROTO_RST_TUNNEL_DOWN] = "the tunnel went down",
	};
	return code >= 0 && code <= PROTO_RST_MAX && m[code] ? m[code] : "unknown";
}

int px_relay_untouched(int code)
{
	return code == PROTO_RST_NOT_ALLOWED || code == PROTO_RST_CONNECT || code == PROTO_RST_REFUSED;
}

/* The peer reset r's stream with code before its target got any of it, and
 * r kept every byte its client sent (px_relay_keep_first): hand the client
 * connection with them to on_refused, and release r.  0 (r untouched) if
 * it cannot. */
static int hand_over(struct px_relay *r, int code)
{
	int fd = bufferevent_getfd(r->bev);
	struct evbuffer *in = bufferevent_get_input(r->bev);
	if (r->first)
		px_relay_job_take_back(r); /* what a job read is the client's too */
	if (!r->first || fd < 0 || evbuffer_add_buffer(r->first, in) || bufferevent_setfd(r->bev, -1))
		return 0;
	struct px_relay_handoff h = { .fd = fd, .first = r->first, .src = r->src, .code = code,
				      .to = (struct sockaddr *)&r->first_to, .tolen = r->first_tolen };
	char why[160];
	snprintf(why, sizeof why, "stream reset by peer: %s (code %d): handed over with the %zu bytes read",
		 rst_meaning(code), code, evbuffer_get_length(r->first));
	r->first = NULL;
	r->handed = 1;
	r->env->on_refused(r->env, r->dst, code, &h); /* first: it counts as active before r stops */
	relay_free(r, 0, why);
	return 1;
}

static void ts_reset(tun_stream *s, void *arg, int code)
{
	struct px_relay *r = arg;
	char why[128];
	if (px_relay_untouched(code) && r->env->on_refused) {
		if (hand_over(r, code))
			return;
		r->env->on_refused(r->env, r->dst, code, NULL);
	}
	if (code == PROTO_RST_TUNNEL_DOWN)
		snprintf(why, sizeof why, "stream reset: the tunnel went down (code %d)", code);
	else
		snprintf(why, sizeof why, "stream reset by peer: %s (code %d)", rst_meaning(code), code);
	relay_free(r, 1, why);
}

void px_relay_continue(struct px_relay *r)
{
	if (px_relay_pump(r) || r->coding || !r->lan_eof || evbuffer_get_length(bufferevent_get_input(r->bev)))
		return; /* released; or the job, or room for the rest, comes first */
	int rc = r->enc ? dre_enc_end(r->enc, px_relay_wan_out, r) : 0;
	if (rc) {
		relay_abort(r, PROTO_RST_INTERNAL, dre_strerror(rc));
		return;
	}
	try_close_wan(r);
}

static void ts_writable(tun_stream *s, void *arg)
{
	px_relay_continue(arg);
}

static void ts_ask(tun_stream *s, void *arg, uint64_t seq)
{
	struct px_relay *r = arg;
	px_relay_first_drop(r);
	if (!r->enc) { /* nothing we sent on it could be asked for */
		tun_conn *c = tun_stream_conn(s);
		log_warn("tunnel %s: %s -> %s: an ASK on a stream without DRE", c ? tun_conn_peer(c) : "?", r->src, r->dst);
		relay_abort(r, PROTO_RST_CODEC, "the peer asked for a frame on a stream without DRE");
		return;
	}
	int rc = px_relay_job_ask(r, seq);
	if (rc) {
		if (rc < 0)
			relay_abort(r, PROTO_RST_INTERNAL, "out of memory");
		return; /* a job answers it */
	}
	rc = dre_enc_learn(r->enc, seq, px_relay_wan_out, r);
	if (rc) {
		relay_abort(r, PROTO_RST_CODEC, px_relay_learn_failed(rc));
		return;
	}
	px_relay_log_resent(r, seq, "");
}

static void ts_ack(tun_stream *s, void *arg, uint64_t seq)
{
	struct px_relay *r = arg;
	px_relay_first_drop(r);
	if (!r->enc)
		return;
	if (r->coding && seq > r->ack_pending)
		r->ack_pending = seq; /* applied when the job is back */
	else if (!r->coding)
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
	if (!r->store)
		return -1;
	dre_store *st = r->store->st;
	int slot = r->peer_slot = h ? dre_store_peer(st, h->store_id) : -1;
	/* the link this stream's tunnel connection sends on (ours, or the peer's
	 * slower one); the node's hint for a connection not up */
	uint64_t bps = c && tun_conn_link_bps(c) ? tun_conn_link_bps(c) : r->env->link_bps;
	r->link_bps = bps;
	dre_enc_opts o = { .link_bps = bps, .frame_max = FRAME_MAX, .retain = 1,
			   .frame_lit_max = bps && bps <= DRE_LINK_SLOW_BPS ? FRAME_MAX_SLOW : 0,
			   .no_dedup = r->policy == PROTO_POLICY_LZ, .peer = slot + 1,
			   /* a version-N peer decodes DRE stream versions up to N */
			   .version = c && tun_conn_version(c) < DRE_STREAM_VERSION ? (int)tun_conn_version(c) : 0 };
	r->enc = dre_enc_new(st, &o);
	r->dec = dre_dec_new(st);
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
	r->store = px_store_hold(env->store);
	r->bev = bev;
	r->policy = policy;
	r->peer_slot = -1;
	r->connecting = connecting;
	r->direct = DIRECT_MIN;
	r->t0_us = px_mono_us();
	snprintf(r->src, sizeof r->src, "%s", src);
	snprintf(r->dst, sizeof r->dst, "%s", dst);
	r->st = stats_stream_open(env->stats, src, dst, policy_name(policy));
	if (!(r->flush_ev = evtimer_new(env->base, px_relay_flush_cb, r)) || (s && make_codec(r, s))) {
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
	return r;
}

void px_relay_opened(const struct px_relay *r, int dscp)
{
	char lz[16], cls[24] = "", n[16] = "";
	if (dscp > 0) {
		tfo_dscp_name(dscp, n, sizeof n);
		snprintf(cls, sizeof cls, ", class %s", n);
	}
	stats_stream_set_class(r->st, n);
	log_info("open %s -> %s (%s%s%s%s)", r->src, r->dst, policy_name(r->policy), r->enc ? ", " : "",
		 r->enc ? dre_enc_lz_name(r->enc, lz, sizeof lz) : "", cls);
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
	px_relay_pump(r);
}

void px_relay_fail(struct px_relay *r, int code, const char *why)
{
	relay_abort(r, code, why);
}

void px_relay_set_warm(struct px_relay *r)
{
	stats_stream_set_warm(r->st);
}

void px_relay_watch(struct px_relay *r, struct px_relay **slot)
{
	r->watch = slot;
	if (slot)
		*slot = r;
}

const char *px_relay_src(const struct px_relay *r)
{
	return r->src;
}

struct bufferevent *px_relay_bev(struct px_relay *r)
{
	return r->bev;
}
