/*
 * frame.c: encoder and resumable, strictly validating decoder of the tunnel
 * frames defined in proto.h; target address helpers; tun_strerror.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "frame.h"

static void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v & 0xff; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v >> 16); put16(p + 2, v & 0xffff); }
static void put64(uint8_t *p, uint64_t v) { put32(p, v >> 32); put32(p + 4, v & 0xffffffffu); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

/* Returns a static description of a tun_err code. */
const char *tun_strerror(int err)
{
	switch (err) {
	case TUN_OK: return "success";
	case TUN_EINVAL: return "invalid argument";
	case TUN_ENOMEM: return "out of memory";
	case TUN_EPROTO: return "protocol error";
	case TUN_EFLOW: return "flow control violation";
	case TUN_ECLOSED: return "stream closed";
	case TUN_EDOWN: return "tunnel down";
	case TUN_ELIMIT: return "limit reached";
	case TUN_EGOAWAY: return "tunnel going away";
	case TUN_ETLS: return "TLS failure";
	case TUN_EVERSION: return "no common protocol version";
	case TUN_ESYS: return "system error";
	}
	return "unknown error";
}

/* printf into err (if any) and return TUN_EPROTO. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return TUN_EPROTO;
}

/* 1 if s[0..n) is a non-empty run of host name characters. */
static int hostname_ok(const uint8_t *s, size_t n)
{
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_'))
			return 0;
	}
	return 1;
}

/* 1 if s[0..n) is non-empty printable ASCII without spaces. */
static int nodename_ok(const uint8_t *s, size_t n)
{
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x21 || s[i] > 0x7e)
			return 0;
	return 1;
}

/* Parse "host" as v4, v6 or a host name into t. */
int tun_target_parse(tun_target *t, const char *host, uint16_t port)
{
	size_t n = host ? strlen(host) : 0;

	memset(t, 0, sizeof(*t));
	if (port == 0 || n == 0)
		return TUN_EINVAL;
	t->port = port;
	if (inet_pton(AF_INET, host, t->addr) == 1) {
		t->type = PROTO_ADDR_V4;
		return TUN_OK;
	}
	if (inet_pton(AF_INET6, host, t->addr) == 1) {
		t->type = PROTO_ADDR_V6;
		return TUN_OK;
	}
	if (n > PROTO_HOSTNAME_MAX || !hostname_ok((const uint8_t *)host, n))
		return TUN_EINVAL;
	t->type = PROTO_ADDR_NAME;
	memcpy(t->name, host, n + 1);
	return TUN_OK;
}

/* Fill t from an AF_INET/AF_INET6 socket address. */
int tun_target_from_sockaddr(tun_target *t, const struct sockaddr *sa)
{
	memset(t, 0, sizeof(*t));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		t->type = PROTO_ADDR_V4;
		t->port = ntohs(in->sin_port);
		memcpy(t->addr, &in->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		t->type = PROTO_ADDR_V6;
		t->port = ntohs(in6->sin6_port);
		memcpy(t->addr, &in6->sin6_addr, 16);
	} else {
		return TUN_EINVAL;
	}
	return t->port ? TUN_OK : TUN_EINVAL;
}

/* Human-readable "addr:port" of t into buf. */
char *tun_target_format(const tun_target *t, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (t->type == PROTO_ADDR_V4)
		inet_ntop(AF_INET, t->addr, a, sizeof(a));
	else if (t->type == PROTO_ADDR_V6)
		inet_ntop(AF_INET6, t->addr, a, sizeof(a));
	snprintf(buf, len, t->type == PROTO_ADDR_V6 ? "[%s]:%u" : "%s:%u",
		 t->type == PROTO_ADDR_NAME ? t->name : a, t->port);
	return buf;
}

/* See frame.h. */
void tun_sockaddr_format(const struct sockaddr *sa, char *buf, size_t len)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	tun_target t;

	if (sa->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		memcpy(&s4.sin_addr, &s6->sin6_addr.s6_addr[12], 4);
		s4.sin_port = s6->sin6_port;
		sa = (const struct sockaddr *)&s4;
	}
	if (tun_target_from_sockaddr(&t, sa) == TUN_OK)
		tun_target_format(&t, buf, len);
	else
		snprintf(buf, len, "(unknown address)");
}

/* Write a frame header. */
void tun_frame_header(uint8_t *hdr, uint8_t type, uint32_t sid, uint16_t len)
{
	hdr[0] = type;
	hdr[1] = 0;
	put16(hdr + 2, len);
	put32(hdr + 4, sid);
}

/* Encode link fields (HELLO's or LINK's) at p; returns their length. */
static size_t enc_link(uint8_t *p, uint64_t bps, uint64_t tx_bps, uint32_t rtt_us)
{
	put64(p + PROTO_HELLO_LINK_RATE, bps);
	put64(p + PROTO_HELLO_LINK_TX, tx_bps);
	put32(p + PROTO_HELLO_LINK_RTT, rtt_us);
	return PROTO_HELLO_LINK_LEN;
}

/* Encode the HELLO payload into p; returns its length. */
static size_t enc_hello(const tun_hello *h, uint8_t *p)
{
	size_t n = strlen(h->name);

	put32(p + PROTO_HELLO_MAGIC, PROTO_MAGIC);
	put16(p + PROTO_HELLO_VMIN, h->vmin);
	put16(p + PROTO_HELLO_VMAX, h->vmax);
	put32(p + PROTO_HELLO_CAPS, h->caps);
	put32(p + PROTO_HELLO_WINDOW, h->window);
	put32(p + PROTO_HELLO_MAX_STREAMS, h->max_streams);
	p[PROTO_HELLO_ROLE] = h->role;
	p[PROTO_HELLO_NAME_LEN] = (uint8_t)n;
	memcpy(p + PROTO_HELLO_STORE_ID, h->store_id, PROTO_STORE_ID_LEN);
	memcpy(p + PROTO_HELLO_NAME, h->name, n);
	n += PROTO_HELLO_NAME;
	if (h->caps & PROTO_CAP_LINK)
		n += enc_link(p + n, h->link_bps, h->link_tx_bps, h->link_rtt_us);
	return n;
}

/* Encode the OPEN payload into p; returns its length. */
static size_t enc_open(const tun_open_info *o, uint8_t *p)
{
	size_t n = o->target.type == PROTO_ADDR_V4 ? 4 :
		   o->target.type == PROTO_ADDR_V6 ? 16 : strlen(o->target.name);

	p[PROTO_OPEN_POLICY] = o->policy;
	p[PROTO_OPEN_FLAGS] = o->flags;
	put16(p + PROTO_OPEN_PORT, o->target.port);
	p[PROTO_OPEN_ADDR_TYPE] = o->target.type;
	p[PROTO_OPEN_ADDR_LEN] = (uint8_t)n;
	memcpy(p + PROTO_OPEN_ADDR, o->target.type == PROTO_ADDR_NAME ?
	       (const void *)o->target.name : (const void *)o->target.addr, n);
	if (o->flags & PROTO_OPEN_F_DSCP)
		p[PROTO_OPEN_ADDR + n++] = o->dscp;
	return PROTO_OPEN_ADDR + n;
}

/* Encode f's payload into p (room for PROTO_MAX_PAYLOAD); returns its length
 * or a negative value if a variable-length field is too long. */
static long enc_payload(const tun_frame *f, uint8_t *p)
{
	size_t n;

	switch (f->type) {
	case PROTO_HELLO:
		if (strnlen(f->u.hello.name, PROTO_NAME_MAX + 1) > PROTO_NAME_MAX)
			return -1;
		return (long)enc_hello(&f->u.hello, p);
	case PROTO_OPEN:
		if (f->u.open.target.type == PROTO_ADDR_NAME &&
		    strnlen(f->u.open.target.name, sizeof(f->u.open.target.name)) > PROTO_HOSTNAME_MAX)
			return -1;
		return (long)enc_open(&f->u.open, p);
	case PROTO_DATA:
	case PROTO_ALLOW:
		if (f->len > PROTO_MAX_PAYLOAD || (f->len && !f->payload) || (f->type == PROTO_ALLOW && f->len < 2))
			return -1;
		if (f->len)
			memcpy(p, f->payload, f->len);
		return f->len;
	case PROTO_CLOSE: return 0;
	case PROTO_RESET: put32(p, f->u.reset); return PROTO_RESET_LEN;
	case PROTO_CREDIT: put32(p, f->u.credit); return PROTO_CREDIT_LEN;
	case PROTO_ASK: put64(p, f->u.seq); return PROTO_ASK_LEN;
	case PROTO_ACK:
		put64(p, f->u.ack.seq);
		put32(p + 8, f->u.ack.credit);
		return PROTO_ACK_LEN;
	case PROTO_PING: case PROTO_PONG: put64(p, f->u.ping); return PROTO_PING_LEN;
	case PROTO_LINK: return (long)enc_link(p, f->u.link.bps, f->u.link.tx_bps, f->u.link.rtt_us);
	case PROTO_GOAWAY:
		n = strnlen(f->u.goaway.text, PROTO_GOAWAY_TEXT_MAX + 1);
		if (n > PROTO_GOAWAY_TEXT_MAX)
			return -1;
		put32(p, f->u.goaway.last_sid);
		put32(p + 4, f->u.goaway.code);
		memcpy(p + 8, f->u.goaway.text, n);
		return (long)(PROTO_GOAWAY_MIN_LEN + n);
	}
	return -1;
}

/* Encode f into buf; validates by parsing the result back (one set of rules). */
int tun_frame_encode(const tun_frame *f, uint8_t *buf, size_t cap)
{
	tun_frame chk;
	long n;

	if (cap < TUN_FRAME_MAX)
		return TUN_EINVAL;
	n = enc_payload(f, buf + PROTO_HDR_LEN);
	if (n < 0)
		return TUN_EINVAL;
	tun_frame_header(buf, f->type, f->sid, (uint16_t)n);
	buf[1] = f->flags;
	if (tun_frame_parse(f->type, f->flags, f->sid, buf + PROTO_HDR_LEN, (uint16_t)n,
			    &chk, NULL, 0) != TUN_OK)
		return TUN_EINVAL;
	return (int)(PROTO_HDR_LEN + n);
}

/* Decode and validate link fields (HELLO's or LINK's) at p; what names them in errors. */
static int parse_link(const uint8_t *p, uint64_t *bps, uint64_t *tx_bps, uint32_t *rtt_us, const char *what,
		      char *err, size_t el)
{
	*bps = get64(p + PROTO_HELLO_LINK_RATE);
	*tx_bps = get64(p + PROTO_HELLO_LINK_TX);
	*rtt_us = get32(p + PROTO_HELLO_LINK_RTT);
	if (*bps > PROTO_LINK_RATE_MAX || *tx_bps > PROTO_LINK_RATE_MAX)
		return fail(err, el, "%s: link rate %llu bit/s out of range", what,
			    (unsigned long long)(*bps > *tx_bps ? *bps : *tx_bps));
	if (*rtt_us > PROTO_LINK_RTT_MAX)
		return fail(err, el, "%s: link round trip %u us out of range", what, *rtt_us);
	return TUN_OK;
}

/* Decode and validate a HELLO payload. */
static int parse_hello(const uint8_t *p, uint16_t len, tun_hello *h, char *err, size_t el)
{
	size_t n;

	if (len < 8 || get32(p + PROTO_HELLO_MAGIC) != PROTO_MAGIC)
		return fail(err, el, "HELLO: bad magic (not a wanopt peer)");
	memset(h, 0, sizeof(*h));
	h->vmin = get16(p + PROTO_HELLO_VMIN);
	h->vmax = get16(p + PROTO_HELLO_VMAX);
	if (h->vmin == 0 || h->vmin > h->vmax)
		return fail(err, el, "HELLO: bad version range %u..%u", h->vmin, h->vmax);
	if (len < PROTO_HELLO_MIN_LEN)
		return fail(err, el, "HELLO: payload too short (%u bytes)", len);
	h->caps = get32(p + PROTO_HELLO_CAPS);
	h->window = get32(p + PROTO_HELLO_WINDOW);
	h->max_streams = get32(p + PROTO_HELLO_MAX_STREAMS);
	h->role = p[PROTO_HELLO_ROLE];
	n = p[PROTO_HELLO_NAME_LEN];
	memcpy(h->store_id, p + PROTO_HELLO_STORE_ID, PROTO_STORE_ID_LEN);
	if (h->window < PROTO_MIN_WINDOW || h->window > PROTO_MAX_WINDOW)
		return fail(err, el, "HELLO: window %u out of range", h->window);
	if (h->max_streams == 0 || h->max_streams > PROTO_MAX_STREAMS)
		return fail(err, el, "HELLO: max_streams %u out of range", h->max_streams);
	if (h->role < PROTO_ROLE_EDGE || h->role > PROTO_ROLE_TOOL)
		return fail(err, el, "HELLO: bad role %u", h->role);
	if (n > PROTO_NAME_MAX || PROTO_HELLO_NAME + n > len ||
	    !nodename_ok(p + PROTO_HELLO_NAME, n))
		return fail(err, el, "HELLO: bad node name (length %zu)", n);
	memcpy(h->name, p + PROTO_HELLO_NAME, n);
	if (!(h->caps & PROTO_CAP_LINK))
		return TUN_OK;
	n += PROTO_HELLO_NAME;
	if (n + PROTO_HELLO_LINK_LEN > len)
		return fail(err, el, "HELLO: link fields missing (%u bytes)", len);
	return parse_link(p + n, &h->link_bps, &h->link_tx_bps, &h->link_rtt_us, "HELLO", err, el);
}

/* Decode and validate an OPEN payload. */
static int parse_open(const uint8_t *p, uint16_t len, tun_open_info *o, char *err, size_t el)
{
	size_t n;

	if (len < PROTO_OPEN_ADDR + 1)
		return fail(err, el, "OPEN: payload too short (%u bytes)", len);
	memset(o, 0, sizeof(*o));
	o->policy = p[PROTO_OPEN_POLICY];
	o->flags = p[PROTO_OPEN_FLAGS];
	o->target.port = get16(p + PROTO_OPEN_PORT);
	o->target.type = p[PROTO_OPEN_ADDR_TYPE];
	n = p[PROTO_OPEN_ADDR_LEN];
	if (o->policy > PROTO_POLICY_MAX)
		return fail(err, el, "OPEN: bad policy %u", o->policy);
	if (o->flags & ~PROTO_OPEN_F_MASK)
		return fail(err, el, "OPEN: unknown flags 0x%02x", o->flags);
	if (o->target.port == 0)
		return fail(err, el, "OPEN: port 0");
	size_t tail = o->flags & PROTO_OPEN_F_DSCP ? 1 : 0;
	if (PROTO_OPEN_ADDR + n + tail != len)
		return fail(err, el, "OPEN: address length %zu%s does not match payload %u", n,
			    tail ? " and a class" : "", len);
	if (tail && (o->dscp = p[len - 1]) > 63)
		return fail(err, el, "OPEN: bad DSCP class %u", o->dscp);
	switch (o->target.type) {
	case PROTO_ADDR_V4:
	case PROTO_ADDR_V6:
		if (n != (o->target.type == PROTO_ADDR_V4 ? 4u : 16u))
			return fail(err, el, "OPEN: bad address length %zu", n);
		memcpy(o->target.addr, p + PROTO_OPEN_ADDR, n);
		return TUN_OK;
	case PROTO_ADDR_NAME:
		if (!hostname_ok(p + PROTO_OPEN_ADDR, n))
			return fail(err, el, "OPEN: bad host name");
		memcpy(o->target.name, p + PROTO_OPEN_ADDR, n);
		return TUN_OK;
	}
	return fail(err, el, "OPEN: bad address type %u", o->target.type);
}

/* Check a fixed payload length. */
static int want_len(uint16_t len, uint16_t want, const char *what, char *err, size_t el)
{
	if (len != want)
		return fail(err, el, "%s: payload is %u bytes, must be %u", what, len, want);
	return TUN_OK;
}

/* Decode and validate the small fixed-size stream frames. */
static int parse_small(const uint8_t *p, uint16_t len, tun_frame *f, char *err, size_t el)
{
	switch (f->type) {
	case PROTO_CLOSE:
		return want_len(len, 0, "CLOSE", err, el);
	case PROTO_RESET:
		if (want_len(len, PROTO_RESET_LEN, "RESET", err, el))
			return TUN_EPROTO;
		f->u.reset = get32(p);
		if (f->u.reset > PROTO_RST_MAX || f->u.reset == PROTO_RST_TUNNEL_DOWN)
			return fail(err, el, "RESET: bad code %u", f->u.reset);
		return TUN_OK;
	case PROTO_CREDIT:
		if (want_len(len, PROTO_CREDIT_LEN, "CREDIT", err, el))
			return TUN_EPROTO;
		f->u.credit = get32(p);
		if (f->u.credit == 0 || f->u.credit > PROTO_MAX_WINDOW)
			return fail(err, el, "CREDIT: bad increment %u", f->u.credit);
		return TUN_OK;
	case PROTO_ASK:
		if (want_len(len, PROTO_ASK_LEN, "ASK", err, el))
			return TUN_EPROTO;
		f->u.seq = get64(p);
		return TUN_OK;
	case PROTO_ACK:
		if (want_len(len, PROTO_ACK_LEN, "ACK", err, el))
			return TUN_EPROTO;
		f->u.ack.seq = get64(p);
		f->u.ack.credit = get32(p + 8);
		if (f->u.ack.credit > PROTO_MAX_WINDOW)
			return fail(err, el, "ACK: bad credit %u", f->u.ack.credit);
		return TUN_OK;
	}
	return fail(err, el, "frame type %u not a stream frame", f->type);
}

/* Decode and validate the connection frames (stream 0). */
static int parse_conn(const uint8_t *p, uint16_t len, tun_frame *f, char *err, size_t el)
{
	switch (f->type) {
	case PROTO_HELLO:
		return parse_hello(p, len, &f->u.hello, err, el);
	case PROTO_PING:
	case PROTO_PONG:
		if (want_len(len, PROTO_PING_LEN, f->type == PROTO_PING ? "PING" : "PONG", err, el))
			return TUN_EPROTO;
		f->u.ping = get64(p);
		return TUN_OK;
	case PROTO_LINK:
		if (want_len(len, PROTO_LINK_LEN, "LINK", err, el))
			return TUN_EPROTO;
		return parse_link(p, &f->u.link.bps, &f->u.link.tx_bps, &f->u.link.rtt_us, "LINK", err, el);
	case PROTO_ALLOW: /* (f->payload: its owner reads the entries) */
		return len < 2 ? fail(err, el, "ALLOW: bad length %u", len) : TUN_OK;
	case PROTO_GOAWAY:
		if (len < PROTO_GOAWAY_MIN_LEN || len > PROTO_GOAWAY_MIN_LEN + PROTO_GOAWAY_TEXT_MAX)
			return fail(err, el, "GOAWAY: bad length %u", len);
		f->u.goaway.last_sid = get32(p);
		f->u.goaway.code = get32(p + 4);
		if (f->u.goaway.code > PROTO_GOAWAY_MAX)
			return fail(err, el, "GOAWAY: bad code %u", f->u.goaway.code);
		for (size_t i = PROTO_GOAWAY_MIN_LEN; i < len; i++) {
			if (p[i] < 0x20 || p[i] > 0x7e)
				return fail(err, el, "GOAWAY: unprintable text byte 0x%02x", p[i]);
			f->u.goaway.text[i - PROTO_GOAWAY_MIN_LEN] = (char)p[i];
		}
		return TUN_OK;
	}
	return fail(err, el, "frame type %u not a connection frame", f->type);
}

/* Validate one frame's header fields and decode its payload into f. */
int tun_frame_parse(uint8_t type, uint8_t flags, uint32_t sid, const uint8_t *p,
		    uint16_t len, tun_frame *f, char *err, size_t errlen)
{
	int conn_frame = type == PROTO_HELLO || type == PROTO_PING ||
			 type == PROTO_PONG || type == PROTO_GOAWAY || type == PROTO_LINK || type == PROTO_ALLOW;

	memset(f, 0, sizeof(*f));
	f->type = type;
	f->flags = flags;
	f->sid = sid;
	f->len = len;
	f->payload = p;
	if (type == 0 || type > PROTO_TYPE_MAX)
		return fail(err, errlen, "unknown frame type %u", type);
	if (flags != 0)
		return fail(err, errlen, "frame type %u: unknown flags 0x%02x", type, flags);
	if (len > PROTO_MAX_PAYLOAD)
		return fail(err, errlen, "frame type %u: payload %u over limit", type, len);
	if (conn_frame != (sid == 0))
		return fail(err, errlen, "frame type %u on stream %u", type, sid);
	if (conn_frame)
		return parse_conn(p, len, f, err, errlen);
	if (type == PROTO_OPEN)
		return parse_open(p, len, &f->u.open, err, errlen);
	if (type == PROTO_DATA)
		return len ? TUN_OK : fail(err, errlen, "DATA: empty payload on stream %u", sid);
	return parse_small(p, len, f, err, errlen);
}

/* Reset a decoder to expect a frame header. */
void tun_fdec_init(tun_fdec *d)
{
	d->have = 0;
	d->failed = 0;
	d->err[0] = 0;
}

/* Bytes needed to finish the current header or frame. */
size_t tun_fdec_want(const tun_fdec *d)
{
	if (d->have < PROTO_HDR_LEN)
		return PROTO_HDR_LEN - d->have;
	return PROTO_HDR_LEN + get16(d->hdr + 2) - d->have;
}

/* The reason of the last error. */
const char *tun_fdec_error(const tun_fdec *d)
{
	return d->err;
}

/* Check a complete header early, so an oversized length fails at once. */
static int check_header(tun_fdec *d)
{
	uint8_t type = d->hdr[0];

	if (type == 0 || type > PROTO_TYPE_MAX)
		return fail(d->err, sizeof(d->err), "unknown frame type %u", type);
	if (get16(d->hdr + 2) > PROTO_MAX_PAYLOAD)
		return fail(d->err, sizeof(d->err), "frame type %u: payload %u over limit %u",
			    type, get16(d->hdr + 2), PROTO_MAX_PAYLOAD);
	return TUN_OK;
}

/* Take bytes towards the current frame; see frame.h for the contract. */
int tun_fdec_feed(tun_fdec *d, const uint8_t *buf, size_t n, size_t *used, tun_frame *f)
{
	size_t take, off = 0;
	int rc;

	*used = 0;
	if (d->failed)
		return TUN_EPROTO;
	while (off < n || (d->have >= PROTO_HDR_LEN && tun_fdec_want(d) == 0)) {
		take = tun_fdec_want(d);
		if (take > n - off)
			take = n - off;
		if (d->have < PROTO_HDR_LEN) {
			memcpy(d->hdr + d->have, buf + off, take);
		} else {
			memcpy(d->payload + (d->have - PROTO_HDR_LEN), buf + off, take);
		}
		d->have += take;
		off += take;
		if (d->have == PROTO_HDR_LEN && check_header(d) != TUN_OK) {
			d->failed = 1;
			*used = off;
			return TUN_EPROTO;
		}
		if (d->have >= PROTO_HDR_LEN && tun_fdec_want(d) == 0) {
			rc = tun_frame_parse(d->hdr[0], d->hdr[1], get32(d->hdr + 4), d->payload,
					     get16(d->hdr + 2), f, d->err, sizeof(d->err));
			d->have = 0;
			*used = off;
			if (rc != TUN_OK) {
				d->failed = 1;
				return rc;
			}
			return 1;
		}
	}
	*used = off;
	return 0;
}
