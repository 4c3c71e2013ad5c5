/* tfo.h: TCP socket tuning for the WAN tunnel and transparent interception.
 * tfo/ knows sockets, never data: no libevent, no dre.  Functions never log:
 * on failure they return -1 and write a message into the caller's err buffer
 * (errno is preserved from the failing call). */
#ifndef WANOPT_TFO_H
#define WANOPT_TFO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Defaults used when a tfo_opts field is 0. */
enum {
	TFO_NOTSENT_LOWAT_DEFAULT = 128 * 1024, /* unsent bytes the kernel may hold */
	TFO_BUF_MIN = 256 * 1024,               /* floor for explicit buffer sizes */
	TFO_BUF_MAX = 256 * 1024 * 1024,        /* ceiling for explicit buffer sizes */
	TFO_KEEPIDLE_DEFAULT = 30,              /* s of silence before probing */
	TFO_KEEPINTVL_DEFAULT = 10,             /* s between probes */
	TFO_KEEPCNT_DEFAULT = 3,                /* unanswered probes before reset */
	TFO_USER_TIMEOUT_DEFAULT = 20000,       /* ms unacked data before reset */
};

/* Tuning hints for a WAN socket; zero fields take defaults. */
struct tfo_opts {
	const char *cc;          /* "bbr" (default; falls back to "cubic"), "cubic", ... */
	uint64_t rate_bps;       /* link rate hint, bit/s (0: unknown) */
	uint32_t rtt_us;         /* round-trip hint, us (0: unknown) */
	uint32_t notsent_lowat;  /* TCP_NOTSENT_LOWAT bytes */
	uint64_t pace_bps;       /* SO_MAX_PACING_RATE, bit/s (0: no cap) */
	uint64_t buf_max;        /* ceiling for the buffers the hints size, bytes (0: TFO_BUF_MAX) */
	int keepidle, keepintvl, keepcnt;
	unsigned user_timeout_ms; /* TCP_USER_TIMEOUT */
};

/* What tfo_tune_wan did. */
struct tfo_tuned {
	char cc[16];          /* congestion control in effect */
	int cc_fallback;      /* 1 when the requested one was unavailable */
	uint64_t bufsize;     /* bytes requested for SO_SNDBUF/SO_RCVBUF, 0 = autotuning */
	uint64_t pace_bps;    /* the pacing cap set, bit/s (0: none) */
};

/* Measured state of a connection (from TCP_INFO). */
struct tfo_info {
	uint32_t rtt_us, rttvar_us, min_rtt_us;
	uint64_t delivery_rate;  /* bytes/s */
	uint64_t pacing_rate;    /* bytes/s */
	uint32_t total_retrans;  /* segments retransmitted over the life */
	uint32_t snd_cwnd;       /* segments */
	uint32_t snd_mss;
	uint64_t bytes_acked, bytes_received;
	uint64_t bytes_sent;     /* sent, retransmissions included (Linux 4.19+; 0 before) */
	uint32_t notsent_bytes;  /* queued but not yet sent */
	uint8_t state;           /* TCP_ESTABLISHED, ... */
};

/* Bytes needed to keep a link of rate_bps busy over rtt_us, times four for
 * headroom (loss recovery, the receiver's overhead), clamped to
 * [TFO_BUF_MIN, TFO_BUF_MAX]; 0 when either is 0. */
uint64_t tfo_bdp_bytes(uint64_t rate_bps, uint32_t rtt_us);

/* Tunes a WAN TCP socket: congestion control, buffers (when rate and RTT are
 * known), a pacing cap (when pace_bps is set), TCP_NOTSENT_LOWAT, TCP_NODELAY,
 * keepalive, TCP_USER_TIMEOUT.  Call
 * before connect() or on the listening socket (accepted sockets inherit), so
 * the window scale is offered in the SYN.  out may be NULL. */
int tfo_tune_wan(int fd, const struct tfo_opts *o, struct tfo_tuned *out, char *err, size_t errlen);
/* What of tfo_tune_wan depends on the link, for a connected socket whose link
 * became known later: buffers (4 x rate x rtt, when both are given), the
 * pacing cap (o->pace_bps, if set) and TCP_NOTSENT_LOWAT.  t receives the
 * buffer size and pacing cap set (no pace_bps: a cap set before is lifted;
 * buffers once set stay). */
int tfo_set_link(int fd, const struct tfo_opts *o, struct tfo_tuned *t, char *err, size_t errlen);
/* The socket's pacing cap (SO_MAX_PACING_RATE) in bit/s; 0 when it has
 * none; -1 (as uint64_t: UINT64_MAX) when it cannot be read. */
uint64_t tfo_pace_get(int fd);
/* Caps the socket's pacing at bps (0: lifts the cap). */
int tfo_pace_set(int fd, uint64_t bps, char *err, size_t errlen);
/* LAN side: TCP_NODELAY and keepalive only; buffers stay autotuned. */
int tfo_tune_lan(int fd, char *err, size_t errlen);
/* Sets congestion control cc, falling back to "cubic" if the kernel lacks it
 * (*fallback set to 1).  used (may be NULL) receives the name in effect. */
int tfo_set_cc(int fd, const char *cc, char *used, size_t usedlen, int *fallback,
	       char *err, size_t errlen);
/* Sets SO_SNDBUF and SO_RCVBUF to bytes, with SO_*BUFFORCE when privileged
 * so net.core.[rw]mem_max does not cap it. */
int tfo_set_bufs(int fd, uint64_t bytes, char *err, size_t errlen);
/* Sets SO_RCVBUF alone, the same way. */
int tfo_set_rcvbuf(int fd, uint64_t bytes, char *err, size_t errlen);
/* Enables keepalive with the given idle, interval (s) and count. */
int tfo_set_keepalive(int fd, int idle, int intvl, int cnt, char *err, size_t errlen);
/* Reads TCP_INFO into out. */
int tfo_info(int fd, struct tfo_info *out, char *err, size_t errlen);
/* Re-sizes buffers from the measured RTT (TCP_INFO) and the rate hint (or the
 * measured delivery rate): grows them when bandwidth x delay exceeds the
 * current size; never shrinks.  *bufsize (may be NULL) gets the result.
 * Returns 1 if it grew them, 0 if not, -1 on error. */
int tfo_retune(int fd, const struct tfo_opts *o, uint64_t *bufsize, char *err, size_t errlen);
/* True when the kernel offers congestion control cc. */
int tfo_cc_available(const char *cc);

/* DiffServ code points (dscp.c). */
/* Marks fd's own packets with dscp (0-63; IP_TOS, and IPV6_TCLASS on an
 * IPv6 socket, which may carry mapped IPv4). */
int tfo_dscp_set(int fd, int dscp, char *err, size_t errlen);
/* The DSCP fd marks its own packets with (0 if none or unknown). */
int tfo_dscp_get(int fd);
/* Makes fd (a listener: accepted sockets inherit it) keep the TOS / traffic
 * class of received packets, for tfo_dscp_peer.  Best effort.  IPv6 needs it
 * before the peer's SYN arrives; IPv4 also after accept. */
void tfo_dscp_recv_on(int fd);
/* The DSCP the peer's packets carried on a connected socket (the handshake's
 * for IPv4, the latest data for IPv6), or -1 if unknown. */
int tfo_dscp_peer(int fd);
/* A class name (csN, afXY, ef, default) or number 0-63 as a DSCP; -1 if bad. */
int tfo_dscp_parse(const char *s);
/* The class name of dscp ("ef", "af41", "cs1", else the number); returns buf. */
char *tfo_dscp_name(int dscp, char *buf, size_t len);

/* Transparent interception. */
enum tfo_icpt_mode {
	TFO_ICPT_REDIRECT, /* nat REDIRECT: destination rewritten, read back by SO_ORIGINAL_DST */
	TFO_ICPT_TPROXY,   /* TPROXY: IP_TRANSPARENT listener, destination is the local address */
};

/* Opens a non-blocking listening socket on addr for mode (IP_TRANSPARENT and
 * IPV6_TRANSPARENT for TPROXY; IPv6 sockets accept IPv4 too), keeping the
 * clients' DSCP for tfo_dscp_peer.  Returns the fd. */
int tfo_icpt_listen(const struct sockaddr *addr, socklen_t len, enum tfo_icpt_mode mode,
		    int backlog, char *err, size_t errlen);
/* The original destination of an accepted intercepted connection:
 * SO_ORIGINAL_DST / IP6T_SO_ORIGINAL_DST for REDIRECT, getsockname for TPROXY.
 * IPv4-mapped IPv6 addresses are returned as AF_INET. */
int tfo_icpt_orig_dst(int fd, enum tfo_icpt_mode mode, struct sockaddr_storage *dst,
		      socklen_t *dstlen, char *err, size_t errlen);
/* 1 when dst is the listener itself (port listen_port on a local address): a
 * connection made straight to the listener, which must not be dialed back. */
int tfo_icpt_is_self(const struct sockaddr *dst, uint16_t listen_port);
/* Fail-open dialer: starts a non-blocking connect to dst and returns the fd
 * (connection in progress: wait for writable, then tfo_connect_result).
 * mark, when not 0, sets SO_MARK so interception rules can skip the socket;
 * dscp, when above 0, marks the connection (its SYN too) with that class. */
int tfo_dial(const struct sockaddr *dst, socklen_t len, uint32_t mark, int dscp, char *err, size_t errlen);
/* After a non-blocking connect became writable: 0 when connected, else -1
 * with the connect error in err (and errno). */
int tfo_connect_result(int fd, char *err, size_t errlen);
/* Formats "a.b.c.d:port" or "[v6]:port" into buf; returns buf. */
char *tfo_addr_str(const struct sockaddr *sa, char *buf, size_t len);
/* The port of an IPv4 or IPv6 address (host order); 0 for other families. */
uint16_t tfo_addr_port(const struct sockaddr *sa);

#endif
