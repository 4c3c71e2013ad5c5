/*
 * relay_pump.c: a relay's LAN -> WAN direction.  Read what the stream has
 * room for, straight into the encoder's buffer where possible, feed the DRE
 * encoder (or pass raw for policy tfo), and flush the encoder once the LAN
 * side is quiet: at once after a short message (interactive traffic), after
 * FLUSH_DELAY_US of quiet after more (bulk traffic keeps content-defined
 * chunk boundaries across short pauses).
 */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

#include "dre_proto.h"
#include "relay_int.h"

#define FLUSH_DELAY_US 2000      /* LAN quiet this long: send the partial chunk */
#define FLUSH_NOW_MAX (16u << 10) /* LAN bytes since the last flush: up to this, flush at once */
#define PASS_LONG_US 10000       /* an event loop pass this long: pumps read no more */
#define GATHER_MAX (64u << 10)   /* encoder output held while a LAN burst lasts */
#define GATHER_LAN (4u << 20)    /* ... or until it stands for this many LAN bytes */

/* Send the encoder output held back in `gather`, ahead of anything else. */
int px_relay_gather_push(struct px_relay *r)
{
	r->gather_lan = 0;
	if (!r->gather || !evbuffer_get_length(r->gather))
		return 0;
	return !r->ts || tun_stream_write_buffer(r->ts, r->gather) ? -1 : 0;
}

/* Encoder output: into the stream (or, inside pump, held in `gather`). */
int px_relay_wan_out(void *arg, const void *buf, size_t len)
{
	struct px_relay *r = arg;
	if (r->gathering ? evbuffer_add(r->gather, buf, len) != 0
			 : px_relay_gather_push(r) || !r->ts || tun_stream_write(r->ts, buf, len))
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

/* Hand the first n bytes of `in` to the encoder (or the stream), piece by
 * piece as they sit in the buffer: the encoder frames large pieces in place. */
static int feed(struct px_relay *r, struct evbuffer *in, size_t n)
{
	struct evbuffer_iovec v[16];
	int k = evbuffer_peek(in, (ssize_t)n, NULL, v, 16);
	if (k < 0 || k > 16) {
		const unsigned char *p = evbuffer_pullup(in, (ssize_t)n);
		px_relay_first_add(r, p, n);
		return r->enc ? dre_enc_write(r->enc, p, n, px_relay_wan_out, r) : px_relay_wan_out(r, p, n);
	}
	for (int i = 0; i < k && n; i++) {
		size_t m = v[i].iov_len < n ? v[i].iov_len : n;
		px_relay_first_add(r, v[i].iov_base, m);
		int rc = r->enc ? dre_enc_write(r->enc, v[i].iov_base, m, px_relay_wan_out, r) : px_relay_wan_out(r, v[i].iov_base, m);
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
		*err = px_relay_gather_push(r);
		return *err || !r->ts ? 0 : tun_stream_room(r->ts);
	}
	return room - g;
}

/* Whether, on a slow link, the encoder has compressed a frame's worth of
 * new data since its LZ input count was lz0 (*lz0 = that count if reset). */
static int lz_budget_spent(struct px_relay *r, uint64_t *lz0, int reset)
{
	if (!r->link_bps || r->link_bps > DRE_LINK_SLOW_BPS)
		return 0;
	uint64_t in = px_relay_lz_in(r->enc);
	if (reset)
		*lz0 = in;
	return in - *lz0 >= FRAME_MAX_SLOW;
}

void px_relay_keep_first(struct px_relay *r, const struct sockaddr *to, socklen_t tolen)
{
	if (!r || r->first || tolen > sizeof r->first_to)
		return;
	memcpy(&r->first_to, to, tolen);
	r->first_tolen = tolen;
	r->first = evbuffer_new(); /* none: a refusal resets the client, as before */
}

void px_relay_first_add(struct px_relay *r, const void *p, size_t n)
{
	if (!r->first)
		return;
	if (evbuffer_get_length(r->first) + n > PX_RELAY_FIRST_MAX || evbuffer_add(r->first, p, n))
		px_relay_first_drop(r);
}

void px_relay_first_drop(struct px_relay *r)
{
	if (r->first)
		evbuffer_free(r->first);
	r->first = NULL;
}

uint64_t px_relay_lz_in(dre_enc *e)
{
	dre_codec_stats cs;
	dre_enc_get_stats(e, &cs);
	return cs.lz_in;
}

void px_relay_lan_took(struct px_relay *r, size_t n)
{
	stats_stream_add(r->st, STATS_LAN_IN, n);
	r->gather_lan += n;
	r->unflushed += n;
}

uint32_t px_relay_direct_next(uint32_t direct, size_t want, size_t n)
{
	if (n == want && want == direct && direct < READ_CHUNK)
		return direct * 2; /* a bulk transfer: read (and buffer) more at a time */
	if (n < want / 4 && direct > DIRECT_MIN)
		return direct / 2;
	return direct;
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
	int slow = r->link_bps && r->link_bps <= DRE_LINK_SLOW_BPS;
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
			px_lanbuf_room_wait(r, fd);
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
		px_relay_first_add(r, dst, (size_t)n);
		int rc = dre_enc_commit(r->enc, (size_t)n, px_relay_wan_out, r);
		if (rc)
			return dre_strerror(rc);
		px_relay_lan_took(r, (size_t)n);
		total += (size_t)n;
		r->direct = px_relay_direct_next(r->direct, want, (size_t)n);
		if ((size_t)n < want)
			return NULL; /* the socket is empty */
	}
	px_lanbuf_fast(r, fd); /* the socket had DIRECT_MAX and more to read */
	return NULL;
}

/* Feed LAN input to the encoder (or the stream) while the stream has room:
 * what libevent read, then (with an encoder) what the socket holds; NULL, or
 * why the relay must be aborted (*code: the reset code). */
static const char *pump_feed(struct px_relay *r, struct evbuffer *in, int *code)
{
	size_t len;
	if (px_relay_job_wanted(r, in)) { /* a slow link's bulk: coded off the loop */
		int err = 0;
		size_t room = pump_room(r, &err);
		if (err)
			return "tunnel write failed";
		int rc = room ? px_relay_job_start(r, in, room) : 0;
		if (rc < 0)
			return "out of memory";
		if (rc > 0)
			return NULL; /* job_done pumps again */
	}
	while ((len = evbuffer_get_length(in)) > 0) {
		int err = 0;
		size_t room = pump_room(r, &err);
		if (err)
			return "tunnel write failed";
		if (!room) {
			bufferevent_disable(r->bev, EV_READ);
			px_lanbuf_room_wait(r, bufferevent_getfd(r->bev));
			return NULL;
		}
		size_t n = len < room ? len : room;
		if (n > READ_CHUNK)
			n = READ_CHUNK;
		int rc = feed(r, in, n);
		if (rc)
			return r->enc ? dre_strerror(rc) : "tunnel write failed";
		evbuffer_drain(in, n);
		px_relay_lan_took(r, n);
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
int px_relay_pump(struct px_relay *r)
{
	struct evbuffer *in = bufferevent_get_input(r->bev);
	int code = PROTO_RST_INTERNAL;
	if (r->coding)
		return 0;
	r->lan_busy = 1;
	r->enc_rested = 0;
	r->pass_cut = 0;
	r->gathering = r->enc != NULL && r->gather != NULL;
	const char *why = pump_feed(r, in, &code);
	r->gathering = 0;
	if (!why && r->coding)
		return 0; /* reading and flushing wait for the job */
	if (!why && r->gather && evbuffer_get_length(r->gather) &&
	    (evbuffer_get_length(in) || evbuffer_get_length(r->gather) >= GATHER_MAX || r->gather_lan >= GATHER_LAN ||
	     r->lz_full || !lan_more(r)) &&
	    px_relay_gather_push(r))
		why = "tunnel write failed";
	if (why) {
		px_relay_fail(r, code, why);
		return -1;
	}
	px_relay_stats_sync(r); /* the encoder's hits and LZ figures show while the stream lives */
	if (evbuffer_get_length(in) || r->blocked)
		return 0; /* backpressured: on_writable calls again */
	if (!r->lan_eof)
		bufferevent_enable(r->bev, EV_READ);
	if (r->enc && r->pass_cut) {
		evtimer_del(r->flush_ev); /* not quiet: the rest comes next pass */
	} else if (r->enc) {
		/* on the T1, an echo through the pair: 44.7 ms at once, 54 ms after 2 ms */
		struct timeval tv = { 0, r->unflushed <= FLUSH_NOW_MAX ? 0 : FLUSH_DELAY_US };
		evtimer_add(r->flush_ev, &tv);
	}
	return 0;
}

void px_relay_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_relay *r = arg;
	if (r->coding || !r->ts || !tun_stream_room(r->ts))
		return; /* coding, backpressured: pump re-arms when the job is back, or room */
	if (pass_long(r)) { /* e.g. 1,000 new streams' first bytes: spread over passes */
		struct timeval now = { 0, 0 };
		evtimer_add(r->flush_ev, &now);
		return;
	}
	r->unflushed = 0;
	int rc = px_relay_gather_push(r) ? DRE_EOUT : dre_enc_flush(r->enc, px_relay_wan_out, r);
	if (rc)
		px_relay_fail(r, PROTO_RST_INTERNAL, dre_strerror(rc));
}

