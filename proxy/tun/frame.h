/*
 * frame.h: tunnel frame codec (internal to proxy/tun, used by tests and the
 * fuzz harness).  Encoding writes one frame into a caller buffer; decoding is
 * resumable: any number of input bytes, partial headers and payloads are kept
 * in the decoder, which says how many bytes it wants next.
 */
#ifndef WANOPT_TUN_FRAME_H
#define WANOPT_TUN_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "tun.h"

/* One frame, decoded (or to encode).  Only the union member of `type` is used. */
typedef struct tun_frame {
	uint8_t type;              /* enum proto_type */
	uint8_t flags;             /* header flags (always 0 in version 1) */
	uint32_t sid;              /* stream id; 0 for connection frames */
	uint16_t len;              /* payload length */
	const uint8_t *payload;    /* DATA, ALLOW: len bytes (decoder: valid until the next feed) */
	union {
		tun_hello hello;         /* HELLO */
		tun_open_info open;      /* OPEN */
		uint32_t reset;          /* RESET code */
		uint32_t credit;         /* CREDIT increment */
		uint64_t seq;            /* ASK */
		struct { uint64_t seq; uint32_t credit; } ack; /* ACK */
		uint64_t ping;           /* PING, PONG */
		struct { uint64_t bps, tx_bps; uint32_t rtt_us; } link; /* LINK */
		struct {
			uint32_t last_sid, code;
			char text[PROTO_GOAWAY_TEXT_MAX + 1];
		} goaway;                /* GOAWAY */
	} u;
} tun_frame;

/* "ADDR:PORT" of a socket address into buf ("[ADDR]:PORT" for IPv6; an
 * IPv4-mapped one as IPv4: an IPv4 peer of a dual-stack listener), or
 * "(unknown address)". */
struct sockaddr;
void tun_sockaddr_format(const struct sockaddr *sa, char *buf, size_t len);

/* Largest encoded frame. */
#define TUN_FRAME_MAX (PROTO_HDR_LEN + PROTO_MAX_PAYLOAD)

/* Write the 8-byte header for (type, sid, len) into hdr. */
void tun_frame_header(uint8_t *hdr, uint8_t type, uint32_t sid, uint16_t len);
/* Encode f into buf (cap bytes, TUN_FRAME_MAX always suffices).  DATA copies
 * f->payload (f->len bytes).  Returns the frame length, or TUN_EINVAL if a
 * field is out of range (the same checks the decoder makes). */
int tun_frame_encode(const tun_frame *f, uint8_t *buf, size_t cap);
/* Validate and decode one frame from its header fields and payload.  Returns
 * TUN_OK or TUN_EPROTO with a reason in err. */
int tun_frame_parse(uint8_t type, uint8_t flags, uint32_t sid, const uint8_t *p,
		    uint16_t len, tun_frame *f, char *err, size_t errlen);

/* Resumable decoder; lives inline in its owner (no allocation). */
typedef struct tun_fdec {
	uint8_t hdr[PROTO_HDR_LEN];
	size_t have;                     /* bytes of header+payload held */
	int failed;                      /* sticky: an error was returned */
	uint8_t payload[PROTO_MAX_PAYLOAD];
	char err[160];
} tun_fdec;

void tun_fdec_init(tun_fdec *d);
/* Consume up to n bytes.  Returns 1 when a frame is complete (in *f; *used
 * bytes were taken, maybe fewer than n), 0 when all n bytes were taken and
 * more are needed, or TUN_EPROTO (then sticky) with tun_fdec_error set. */
int tun_fdec_feed(tun_fdec *d, const uint8_t *buf, size_t n, size_t *used, tun_frame *f);
/* Bytes still needed to complete the current header or frame. */
size_t tun_fdec_want(const tun_fdec *d);
const char *tun_fdec_error(const tun_fdec *d);

#endif
