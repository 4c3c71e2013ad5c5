/*
 * proto.h: the wanopt tunnel wire format.  This is the only place it is
 * defined; the frame codec (proxy/tun/frame.c) and the tests read it.
 *
 * A tunnel is one TLS 1.3 connection between an edge and a core carrying a
 * sequence of frames.  Every frame is an 8-byte header and a payload:
 *
 *    0        1        2        3        4        5        6        7
 *   +--------+--------+--------+--------+--------+--------+--------+--------+
 *   |  type  | flags  |  payload length |           stream id               |
 *   +--------+--------+--------+--------+--------+--------+--------+--------+
 *   |  payload (length bytes, at most PROTO_MAX_PAYLOAD) ...
 *
 * All integers are big-endian (network order).  Stream id 0 is the
 * connection itself (HELLO, PING, PONG, GOAWAY); every other frame names a
 * stream.  The connecting side (client, normally the edge) opens odd stream
 * ids, the accepting side (server, normally the core) even ones; ids of one
 * side strictly increase and are never reused on a connection.
 *
 * Conversation: both sides send HELLO first (without waiting for the peer's);
 * no other frame may precede it.  A stream is opened by an OPEN frame followed
 * at once by its DATA (no round trip: the opener may send up to the peer's
 * advertised window before hearing anything back).  Each direction ends with
 * CLOSE (a half-close, like a TCP FIN); a stream is gone when both directions
 * closed, or at once when either side sends RESET.  Credit: a sender may have
 * at most `window` bytes of DATA payload in flight per stream; the receiver
 * returns credit (CREDIT or ACK) as its consumer drains.  Receiving more than
 * was granted is a protocol error that closes the tunnel.
 *
 * Strictness: unknown frame types, non-zero unknown flags, wrong lengths and
 * out-of-range fields are protocol errors.  Forward compatibility comes from
 * the HELLO version range and capability bits, never from skipping frames.
 */
#ifndef WANOPT_PROTO_H
#define WANOPT_PROTO_H

#include <stdint.h>

/* ---- header and limits --------------------------------------------------- */

enum proto_limits {
	PROTO_HDR_LEN = 8,            /* frame header bytes */
	PROTO_MAX_PAYLOAD = 16384,    /* largest payload of any frame (fits the u16 length) */
	PROTO_VERSION = 3,            /* newest version this build speaks; a stream's DRE
					 payload uses the DRE stream version of the same
					 number (2: the faster checksum, 3: AGAIN) */
	PROTO_VERSION_MIN = 1,        /* oldest version this build speaks */
	PROTO_INITIAL_WINDOW = 1 << 20, /* default per-stream credit a receiver grants */
	PROTO_MIN_WINDOW = 16384,     /* smallest window a HELLO may advertise */
	PROTO_MAX_WINDOW = 1 << 26,   /* largest window (and largest CREDIT increment) */
	PROTO_MAX_STREAMS = 16384,    /* largest max_streams a HELLO may advertise */
	PROTO_DEFAULT_STREAMS = 4096, /* default concurrent streams a peer may open */
	PROTO_NAME_MAX = 64,          /* longest node name in HELLO */
	PROTO_STORE_ID_LEN = 16,      /* bytes of the store id in HELLO */
	PROTO_HOSTNAME_MAX = 255,     /* longest target host name in OPEN */
	PROTO_GOAWAY_TEXT_MAX = 256,  /* longest diagnostic text in GOAWAY */
};

#define PROTO_MAGIC 0x574F5054u   /* "WOPT": first 4 HELLO payload bytes */

/* Frame types (header byte 0). */
enum proto_type {
	PROTO_HELLO = 1,   /* stream 0: version range, capabilities, node identity */
	PROTO_OPEN = 2,    /* new stream: target address, optimize policy */
	PROTO_DATA = 3,    /* stream bytes (the DRE encoder's output, carried opaquely) */
	PROTO_CLOSE = 4,   /* half-close: sender will send no more DATA on this stream */
	PROTO_RESET = 5,   /* abort the stream in both directions, with a reason code */
	PROTO_CREDIT = 6,  /* receiver grants more window on a stream */
	PROTO_ASK = 7,     /* DRE decoder lacked data for an encoder frame: resend it as LEARN */
	PROTO_ACK = 8,     /* DRE decoder applied frames up to seq; carries a credit increment too */
	PROTO_PING = 9,    /* stream 0: keepalive / RTT probe, answered by PONG */
	PROTO_PONG = 10,   /* stream 0: echo of a PING's payload */
	PROTO_GOAWAY = 11, /* stream 0: no new streams; connection closes after the current ones */
	PROTO_LINK = 12,   /* stream 0: the sender's link changed (to a peer with PROTO_CAP_LINK) */
	PROTO_ALLOW = 13,  /* stream 0: the core's allow list (to an edge with PROTO_CAP_ALLOW) */
	PROTO_TYPE_MAX = 13,
};

/* Header flags (byte 1).  No frame type defines a flag yet: all must be 0. */
enum proto_flags {
	PROTO_FLAGS_NONE = 0,
};

/* ---- HELLO (stream 0) ------------------------------------------------------
 * Versions are compatible when the ranges overlap; both use the highest common
 * version.  A later version may append fields after the name: a receiver
 * ignores payload bytes past the fields it knows (the only place it does), so
 * that an older peer can still read the version range and fail clearly.
 *
 * With PROTO_CAP_LINK in its caps, the sender appends the link fields right
 * after the name (offsets from the name's end): what it knows of the WAN link
 * it receives on, so the peer can pace and compress for it (a core serving
 * branches on different links).  0 in either means unknown.
 */
enum proto_hello_off {
	PROTO_HELLO_MAGIC = 0,        /* u32 PROTO_MAGIC */
	PROTO_HELLO_VMIN = 4,         /* u16 oldest version the sender speaks */
	PROTO_HELLO_VMAX = 6,         /* u16 newest version the sender speaks (>= vmin) */
	PROTO_HELLO_CAPS = 8,         /* u32 capability bits (enum proto_cap); used: the AND of both */
	PROTO_HELLO_WINDOW = 12,      /* u32 initial credit the sender grants per stream, either opener */
	PROTO_HELLO_MAX_STREAMS = 16, /* u32 streams the receiver may have open towards the sender */
	PROTO_HELLO_ROLE = 20,        /* u8 enum proto_role of the sender */
	PROTO_HELLO_NAME_LEN = 21,    /* u8 node name length, 1..PROTO_NAME_MAX */
	PROTO_HELLO_STORE_ID = 22,    /* 16 bytes: id of the sender's DRE store (all zero: none) */
	PROTO_HELLO_NAME = 38,        /* name_len bytes: node name, printable ASCII */
	PROTO_HELLO_MIN_LEN = 39,     /* shortest valid HELLO payload (1-byte name) */
};

enum proto_hello_link_off {
	PROTO_HELLO_LINK_RATE = 0,    /* u64 bit/s the sender's side of the link receives at */
	PROTO_HELLO_LINK_TX = 8,      /* u64 bit/s it sends at */
	PROTO_HELLO_LINK_RTT = 16,    /* u32 the link's round trip in microseconds */
	PROTO_HELLO_LINK_LEN = 20,
};
#define PROTO_LINK_RATE_MAX 10000000000000ULL /* 10 Tbit/s: larger is an error */
#define PROTO_LINK_RTT_MAX 60000000u           /* 60 s: longer is an error */

/* Capability bits: what the sender can do; unknown bits are ignored. */
enum proto_cap {
	PROTO_CAP_DRE = 1u << 0,  /* DRE-encoded streams (segment references) */
	PROTO_CAP_LZ4 = 1u << 1,  /* lz4 residual compression */
	PROTO_CAP_ZSTD = 1u << 2, /* zstd residual compression */
	PROTO_CAP_ASK = 1u << 3,  /* ASK/LEARN recovery of missing segments */
	PROTO_CAP_DSCP = 1u << 4, /* OPEN may carry the client's DiffServ class (PROTO_OPEN_F_DSCP) */
	PROTO_CAP_LINK = 1u << 5, /* this HELLO carries the link fields after the name; LINK frames */
	PROTO_CAP_ALLOW = 1u << 6, /* ALLOW frames: an edge reads the core's allow list */
	PROTO_CAP_RENEW = 1u << 7, /* GOAWAY with PROTO_GOAWAY_RENEW (a client reads it) */
	PROTO_CAP_ALL = 0xff,     /* everything this build implements */
};

enum proto_role {
	PROTO_ROLE_EDGE = 1,  /* branch side: opens streams for intercepted clients */
	PROTO_ROLE_CORE = 2,  /* datacenter side: dials the targets */
	PROTO_ROLE_TOOL = 3,  /* a utility (e.g. warm): opens streams, serves none */
};

/* ---- OPEN (stream id = the new stream) -------------------------------------- */
enum proto_open_off {
	PROTO_OPEN_POLICY = 0,    /* u8 enum proto_policy */
	PROTO_OPEN_FLAGS = 1,     /* u8 enum proto_open_flag bits; unknown bits are an error */
	PROTO_OPEN_PORT = 2,      /* u16 target port, 1..65535 */
	PROTO_OPEN_ADDR_TYPE = 4, /* u8 enum proto_addr */
	PROTO_OPEN_ADDR_LEN = 5,  /* u8 address bytes: 4 (v4), 16 (v6), 1..255 (name) */
	PROTO_OPEN_ADDR = 6,      /* the address; then, with PROTO_OPEN_F_DSCP, a u8 DSCP class
	                           * (0..63); the payload ends there */
};

enum proto_policy {
	PROTO_POLICY_FULL = 0,        /* DRE + LZ */
	PROTO_POLICY_LZ = 1,          /* LZ only */
	PROTO_POLICY_TFO = 2,         /* raw bytes over the tuned tunnel */
	PROTO_POLICY_PASSTHROUGH = 3, /* raw bytes, no optimization of any kind */
	PROTO_POLICY_MAX = 3,
};

enum proto_open_flag {
	PROTO_OPEN_F_TRANSPARENT = 1u << 0, /* target is the intercepted original destination */
	PROTO_OPEN_F_WARM = 1u << 1,        /* pre-positioning: decode into the store, deliver nothing */
	PROTO_OPEN_F_DSCP = 1u << 2,        /* the client's DiffServ class follows the address; sent only
	                                     * to a peer with PROTO_CAP_DSCP */
	PROTO_OPEN_F_MASK = 0x07,           /* all defined bits */
};

enum proto_addr {
	PROTO_ADDR_NAME = 1,  /* host name to resolve at the dialing side (printable, no spaces) */
	PROTO_ADDR_V4 = 4,    /* 4-byte IPv4 address */
	PROTO_ADDR_V6 = 6,    /* 16-byte IPv6 address */
};

/* ---- payloads of the other stream frames ------------------------------------
 * DATA:   1..PROTO_MAX_PAYLOAD opaque bytes (an empty DATA is an error).
 * CLOSE:  empty.
 * RESET:  u32 code (enum proto_reset).
 * CREDIT: u32 increment, 1..PROTO_MAX_WINDOW.
 * ASK:    u64 DRE frame sequence number the decoder lacks data for (with
 *         DRE_ASK_FULL set, version 3: the learn that named held chunks failed;
 *         resend every byte).
 * ACK:    u64 DRE frame sequence number applied, then u32 credit increment
 *         (0..PROTO_MAX_WINDOW): ACK is CREDIT merged with the DRE ack.
 * PING:   u64 opaque (the sender's clock); PONG echoes it unchanged.
 * GOAWAY: u32 last stream id the sender accepted from the receiver, u32 code
 *         (enum proto_goaway), then 0..PROTO_GOAWAY_TEXT_MAX bytes of text.
 *         Code PROTO_GOAWAY_RENEW (server to a client whose HELLO had
 *         PROTO_CAP_RENEW) is a request, not a GOAWAY: the server's HELLO
 *         fields changed (its store), so the client dials a new connection,
 *         and sends GOAWAY on this one once that is up; until then both
 *         ends go on opening streams here.
 * LINK:   the HELLO link fields again (u64 rates in and out, u32 round trip), when the
 *         sender's link hints changed (a reload); sent only to a peer whose
 *         HELLO had PROTO_CAP_LINK.
 * ALLOW:  core to edge, after HELLO and on each change (a reload), to a peer
 *         whose HELLO had PROTO_CAP_ALLOW: the targets the core dials, so that
 *         the edge sends an intercepted connection outside them direct at once
 *         rather than have it reset.  2..PROTO_MAX_PAYLOAD bytes: u16 count,
 *         then per entry u8 family (0: any address, 4, 6), u8 prefix length
 *         (0 for family 0), the network's 0, 4 or 16 address bytes, u16 number
 *         of port ranges (0: every port), then that many u16 lo, u16 hi
 *         (1 <= lo <= hi).  A list that does not fit goes as the count 0xffff
 *         alone (PROTO_ALLOW_UNTOLD): the edge forgets any earlier one.  The frame
 *         layer passes the payload on; its owner checks it (conf_acl_from_wire).
 */
enum proto_len {
	PROTO_RESET_LEN = 4,
	PROTO_CREDIT_LEN = 4,
	PROTO_ASK_LEN = 8,
	PROTO_ACK_LEN = 12,
	PROTO_PING_LEN = 8,
	PROTO_GOAWAY_MIN_LEN = 8,
	PROTO_LINK_LEN = PROTO_HELLO_LINK_LEN,
};

#define PROTO_ALLOW_UNTOLD 0xffffu /* ALLOW count: the list is not told (too long) */

/* REFUSED, NOT_ALLOWED and CONNECT are sent only before the target got any
 * of the stream's bytes: the edge may send the client's bytes elsewhere
 * (px_relay_untouched).  A peer must keep it so. */
enum proto_reset {
	PROTO_RST_CANCEL = 0,        /* the owner went away (client closed, error on its side) */
	PROTO_RST_REFUSED = 1,       /* stream not accepted: too many streams, going away */
	PROTO_RST_NOT_ALLOWED = 2,   /* target outside the core's allow list */
	PROTO_RST_CONNECT = 3,       /* the dialing side could not connect to the target */
	PROTO_RST_TARGET = 4,        /* the target connection failed after connecting */
	PROTO_RST_CODEC = 5,         /* DRE/LZ decoding failed on this stream */
	PROTO_RST_INTERNAL = 6,      /* local resource failure */
	PROTO_RST_TUNNEL_DOWN = 7,   /* local only: the tunnel carrying the stream went down */
	PROTO_RST_MAX = 7,
};

enum proto_goaway {
	PROTO_GOAWAY_NORMAL = 0,     /* shutdown or reload */
	PROTO_GOAWAY_PROTOCOL = 1,   /* the receiver sent a malformed or unexpected frame */
	PROTO_GOAWAY_VERSION = 2,    /* no common protocol version */
	PROTO_GOAWAY_FLOW = 3,       /* the receiver sent more than its credit */
	PROTO_GOAWAY_TIMEOUT = 4,    /* handshake or keepalive timeout */
	PROTO_GOAWAY_INTERNAL = 5,   /* local resource failure */
	PROTO_GOAWAY_RENEW = 6,      /* dial a replacement (see GOAWAY above); to PROTO_CAP_RENEW peers */
	PROTO_GOAWAY_MAX = 6,
};

#endif
