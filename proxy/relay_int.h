/* relay_int.h: what relay.c (a stream's life: codecs, tunnel callbacks,
 * close) and relay_pump.c (LAN -> WAN: reading and encoding) share. */
#ifndef WANOPT_RELAY_INT_H
#define WANOPT_RELAY_INT_H

#include <stdint.h>
#include <time.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "coder.h"
#include "dre.h"
#include "relay.h"
#include "stats.h"
#include "tun.h"

#define READ_CHUNK (1u << 20)    /* LAN bytes read and fed to the encoder at a time */
#define DIRECT_MIN (16u << 10)   /* ... read straight into the encoder: from this much a read */
#define DIRECT_MAX (4u << 20)    /* ... and at most this much per pump */
#define FRAME_MAX_SLOW (64u << 10) /* new data per frame and per job on a slow link (zstd -16) */

/* A pump's reading and coding of a slow link's bulk, run on the env's coder
 * thread (relay_job.c), or a LEARN frame coded there.  The loop fills in the
 * request and touches neither the encoder nor the job until the job is back. */
struct px_relay_job {
	struct px_coder_job cj;   /* first: the coder's view */
	struct px_relay *r;
	dre_enc *enc;
	int fd;
	uint64_t learn;           /* a LEARN job: the frame asked for (dre_enc_learn), else 0 */
	size_t pre;               /* bytes the loop put in the encoder's space already */
	size_t room;              /* encoder output it may produce, at most (stream room) */
	size_t lz_max;            /* new data (LZ input) it codes, at most */
	uint32_t direct;          /* read size, adapted as pump_direct does */
	uint8_t *out;             /* the encoder's output, for the stream */
	size_t out_len, out_cap;
	size_t got;               /* LAN bytes read (not counting pre) */
	int rc;                   /* a DRE error, or 0 */
	int err;                  /* a read error (errno), or 0 */
	unsigned full : 1;        /* it read DIRECT_MAX: the sender is ahead of us */
	unsigned copy_over : 1;   /* `copy` passed PX_RELAY_FIRST_MAX: the first bytes are not all kept */
	struct evbuffer *copy;    /* while the relay keeps its first bytes: what the job read (job_apply adds it) */
};

struct px_relay {
	struct px_relay_env *env;
	struct px_store_use *store; /* env's store when r was made: its codecs' */
	struct px_relay **watch;  /* px_relay_watch: cleared when r is freed */
	uint64_t backlog;         /* what its decoder held undecoded when last counted */
	uint64_t ask_since_us;    /* its decoder waits for a LEARN, with nothing come since (px_mono_us), or 0 */
	struct bufferevent *bev;  /* the LAN connection */
	tun_stream *ts;
	int policy;
	uint64_t link_bps;        /* the residual coder's link rate (make_codec) */
	dre_enc *enc;
	dre_dec *dec;
	int peer_slot;             /* the peer's store slot the codecs use (dre_store_peer), or -1 */
	struct stats_stream *st;
	struct event *flush_ev;
	struct event *rest_ev;    /* every REST_S while there is a codec */
	size_t held;              /* tunnel bytes received, credit not yet returned */
	struct evbuffer *pend;    /* tunnel bytes arrived while decoding was paused */
	struct evbuffer *gather;  /* encoder output held while a LAN burst lasts (see pump) */
	struct evbuffer *first;   /* px_relay_keep_first: the LAN bytes read so far (NULL: not kept) */
	struct sockaddr_storage first_to; /* ... and where they may go instead */
	socklen_t first_tolen;
	size_t gather_lan;        /* LAN bytes read since `gather` was last sent */
	size_t unflushed;         /* LAN bytes read since the encoder was last flushed */
	uint64_t acked;           /* frames we acknowledged to the peer */
	uint64_t peer_acked;      /* frames the peer acknowledged to us */
	dre_codec_stats last;     /* encoder figures already added to stats */
	dre_codec_stats last_dec; /* decoder figures already added */
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
	unsigned wan_busy : 1;    /* decoded bytes went to the LAN since then */
	unsigned enc_rested : 1;  /* the encoder gave its memory back, and stayed quiet */
	unsigned dec_rested : 1;  /* the same for the decoder */
	unsigned lan_bulk : 1;    /* the LAN socket has the bulk receive buffer (lanbuf.c) */
	unsigned coding : 1;      /* `job` is with the coder: the encoder is not ours */
	unsigned used_coder : 1;  /* it has had a job (its first one logged) */
	unsigned handed : 1;      /* its client went to on_refused (hand_over) */
	uint32_t direct;          /* pump_direct's read size: DIRECT_MIN .. READ_CHUNK */
	uint64_t ack_pending;     /* an ACK that came while coding (applied after) */
	struct px_relay_job job;
	uint64_t *asks;           /* ASKs waiting for the job (frames, oldest first) */
	size_t nasks, asks_cap;
	uint64_t t0_us;           /* when it opened (px_mono_us) */
	uint64_t room_wait_us;    /* when pump_direct last stopped for want of room (0: never) */
	char src[96], dst[300];
};

/* relay.c: add the codec's new hit and LZ figures to the stream's stats. */
void px_relay_stats_sync(struct px_relay *r);
/* relay.c: pump, then end the WAN direction once the LAN side ended and
 * everything read was coded.  r may be released: do not touch it after. */
void px_relay_continue(struct px_relay *r);

/* relay_pump.c */
/* Move LAN input into the stream while it has room (see relay_pump.c); 0,
 * or -1 if r was released (reset).  While r is coding it does nothing: the
 * job's return pumps again. */
int px_relay_pump(struct px_relay *r);
/* r->flush_ev: the LAN side went quiet, send the encoder's partial chunk. */
void px_relay_flush_cb(evutil_socket_t fd, short what, void *arg);
/* n LAN bytes went into the encoder: the stream's LAN_IN, and the counts
 * toward the next gather push and flush. */
void px_relay_lan_took(struct px_relay *r, size_t n);
/* New data the encoder has compressed so far (its LZ input). */
uint64_t px_relay_lz_in(dre_enc *e);
/* The next read size after reading n of want bytes with read size direct:
 * doubled (to READ_CHUNK) after a full read, halved (to DIRECT_MIN) after
 * one under a quarter. */
uint32_t px_relay_direct_next(uint32_t direct, size_t want, size_t n);
/* Encoder output sink (arg: the relay): into the stream, or inside pump
 * held in `gather`.  0, or -1 if the stream cannot take it. */
int px_relay_wan_out(void *arg, const void *buf, size_t len);
/* Send the encoder output held back in `gather`, ahead of anything else:
 * 0 or -1. */
int px_relay_gather_push(struct px_relay *r);

/* A copy of the n LAN bytes at p, just read, into r->first if it is kept
 * (px_relay_keep_first); past PX_RELAY_FIRST_MAX the copy is dropped. */
void px_relay_first_add(struct px_relay *r, const void *p, size_t n);
/* The peer took the stream (or the copy is no longer wanted): drop it. */
void px_relay_first_drop(struct px_relay *r);

/* relay_job.c: a slow link's bulk coded on the coder thread */
/* Whether r's pump should hand its reading and coding to the coder: a
 * stream with an encoder (full or lz) on a link of up to DRE_LINK_MID_BPS (zstd 9 or 16) with a bulk of
 * input waiting (in `in` and its socket); a short message is coded at once. */
int px_relay_job_wanted(struct px_relay *r, struct evbuffer *in);
/* Start r's job: all of `in` goes into the encoder's space first, then it
 * reads the socket.  1: started (r->coding); 0: the pump codes inline (`in`
 * holds more than room, or no coder); -1: out of memory. */
int px_relay_job_start(struct px_relay *r, struct evbuffer *in, size_t room);
/* Take r's job back now, without its return (waiting for it if it runs):
 * what it read joins r's copy of its first bytes, its output is dropped.
 * For a stream the peer reset, whose client goes elsewhere. */
void px_relay_job_take_back(struct px_relay *r);
/* A job is back (r->coding cleared): what it read joins r's copy of its
 * first bytes if r still keeps one (dropped if that passes the limit). */
void px_relay_job_copy_back(struct px_relay *r);
/* The peer asked for frame seq: 1 when a job will answer it (queued behind
 * the job under way), 0 when the caller answers at once (a stream that
 * never used the coder), -1 when out of memory. */
int px_relay_job_ask(struct px_relay *r, uint64_t seq);
/* Why an answer to an ASK failed (dre_enc_learn's rc), for the reset's log line. */
const char *px_relay_learn_failed(int rc);
/* Log (debug) that frame seq (DRE_ASK_FULL: in full) was resent; where: "" or
 * a note that begins with a space. */
void px_relay_log_resent(const struct px_relay *r, uint64_t seq, const char *where);
/* r's encoder rested: give back the job's buffers (unless it is coding). */
void px_relay_job_rest(struct px_relay *r);
/* Drop r's job (r is being released): wait for it if it is running. */
void px_relay_job_drop(struct px_relay *r);

/* lanbuf.c: the LAN receive buffer of a stream reading at full speed */
/* r's pump read DIRECT_MAX from its LAN socket fd in one go: give the
 * socket the bulk receive buffer, unless it has it, r waited for tunnel room
 * less than a second ago, or as many streams as allowed have it. */
void px_lanbuf_fast(struct px_relay *r, int fd);
/* r stopped reading fd for want of tunnel room: note when, and make a bulk
 * buffer small again. */
void px_lanbuf_room_wait(struct px_relay *r, int fd);
/* r ends: its bulk buffer, if any, no longer counts. */
void px_lanbuf_release(struct px_relay *r);

#endif
