/*
 * tun.h: the wanopt tunnel: TLS 1.3 connections with mutual certificate
 * authentication between an edge and a core, each carrying many streams with
 * per-stream credit flow control and fair scheduling (wire format: proto.h).
 *
 * Objects:
 *   tun_client  dials one peer with N parallel connections, reconnects with
 *               exponential backoff; opens streams on a connection that is up.
 *   tun_server  accepts connections from many peers.
 *   tun_conn    one TLS connection (client or server side) and its streams.
 *   tun_stream  one byte stream in each direction, owned by the layer above.
 *
 * Everything runs on the caller's libevent base, from one thread; nothing is
 * thread-safe (a multi-threaded core runs one tun_server per worker base,
 * all on one port with SO_REUSEPORT set from the on_fd TUN_FD_LISTEN hook).
 * The process must ignore SIGPIPE (TLS writes use write(2)).  Errors never
 * go to a log: they are returned (enum tun_err, tun_strerror), written into
 * the caller's buffer, or reported through the on_error/on_down callbacks as
 * a message naming the peer address.  Do not free a tun_client/tun_server
 * from inside one of its callbacks.
 *
 * Stream ownership: the owner gets a tun_stream from tun_conn_open /
 * tun_client_open or from the on_stream callback, and must call
 * tun_stream_free exactly once, also after on_reset or after the tunnel went
 * down (the handle then stays valid but dead).  No callback comes after free.
 */
#ifndef WANOPT_TUN_H
#define WANOPT_TUN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proto.h"

struct event_base;
struct evconnlistener;
struct evbuffer;
struct sockaddr;

enum tun_err {
	TUN_OK = 0,
	TUN_EINVAL = -1,   /* bad argument or configuration */
	TUN_ENOMEM = -2,   /* allocation failed */
	TUN_EPROTO = -3,   /* malformed or unexpected frame */
	TUN_EFLOW = -4,    /* peer exceeded its credit */
	TUN_ECLOSED = -5,  /* stream closed for this operation, or reset */
	TUN_EDOWN = -6,    /* no tunnel connection is up */
	TUN_ELIMIT = -7,   /* too many streams, or send queue hard limit reached */
	TUN_EGOAWAY = -8,  /* the connection is going away: no new streams */
	TUN_ETLS = -9,     /* TLS setup or handshake failed */
	TUN_EVERSION = -10,/* no common protocol version with the peer */
	TUN_ESYS = -11,    /* system call failed (see errno) */
};
const char *tun_strerror(int err);

/* A stream's target, as carried in OPEN. */
typedef struct tun_target {
	uint8_t type;      /* enum proto_addr */
	uint16_t port;     /* host order, 1..65535 */
	uint8_t addr[16];  /* v4: 4 bytes, v6: 16 bytes */
	char name[PROTO_HOSTNAME_MAX + 1]; /* PROTO_ADDR_NAME: NUL-terminated host name */
} tun_target;

/* What OPEN carries besides the stream id. */
typedef struct tun_open_info {
	uint8_t policy;    /* enum proto_policy */
	uint8_t flags;     /* enum proto_open_flag */
	uint8_t dscp;      /* with PROTO_OPEN_F_DSCP: the client connection's DiffServ class, 0..63
	                    * (0: unmarked); tun_conn_open drops it for a peer without PROTO_CAP_DSCP */
	tun_target target;
} tun_open_info;

/* A peer's HELLO, decoded. */
typedef struct tun_hello {
	uint16_t vmin, vmax;        /* version range the peer speaks */
	uint32_t caps;              /* enum proto_cap bits the peer has */
	uint32_t window;            /* per-stream credit the peer grants */
	uint32_t max_streams;       /* streams we may have open towards the peer */
	uint8_t role;               /* enum proto_role */
	uint8_t store_id[PROTO_STORE_ID_LEN];
	char name[PROTO_NAME_MAX + 1];
	uint64_t link_bps;          /* PROTO_CAP_LINK: rate the peer receives at (0: unknown) */
	uint64_t link_tx_bps;       /* PROTO_CAP_LINK: rate the peer sends at (0: unknown) */
	uint32_t link_rtt_us;       /* PROTO_CAP_LINK: the link's round trip (0: unknown) */
} tun_hello;

/* The name every core certificate carries (wanopt pki puts it there) and that
 * edges require of the server they dial: an edge certificate, which lacks it,
 * cannot pose as a core. */
#define PKI_CORE_NAME "wanopt-core"

/* Fill t from "1.2.3.4", "::1" or a host name, and a port.  TUN_EINVAL if bad. */
int tun_target_parse(tun_target *t, const char *host, uint16_t port);
/* Fill t from an AF_INET/AF_INET6 socket address.  TUN_EINVAL otherwise. */
int tun_target_from_sockaddr(tun_target *t, const struct sockaddr *sa);
/* "1.2.3.4:80", "[::1]:80" or "name:80" into buf; returns buf. */
char *tun_target_format(const tun_target *t, char *buf, size_t len);

/* Traffic counters. */
typedef struct tun_stats {
	uint64_t bytes_in, bytes_out; /* frame bytes (headers included) received / sent, before TLS */
	uint64_t data_in, data_out;   /* DATA payload bytes received / framed for sending */
} tun_stats;

/* ---- streams ------------------------------------------------------------ */

typedef struct tun_stream tun_stream;
typedef struct tun_conn tun_conn;

/* Callbacks to a stream's owner; any may be NULL.  They may call any
 * tun_stream_* function on this or another stream, including free. */
typedef struct tun_stream_cbs {
	/* len (1..PROTO_MAX_PAYLOAD) bytes arrived; call tun_stream_consumed
	 * when they have left the owner's buffers: that returns credit. */
	void (*on_data)(tun_stream *s, void *arg, const void *buf, size_t len);
	/* The peer half-closed: no more on_data. */
	void (*on_close)(tun_stream *s, void *arg);
	/* The stream died: peer RESET (code from enum proto_reset) or the tunnel
	 * went down before it finished both ways (PROTO_RST_TUNNEL_DOWN).  No
	 * more callbacks; free is still due. */
	void (*on_reset)(tun_stream *s, void *arg, int code);
	/* The send queue drained below half the high mark after being full. */
	void (*on_writable)(tun_stream *s, void *arg);
	/* The peer's DRE decoder asks for frame seq (call dre_enc_learn). */
	void (*on_ask)(tun_stream *s, void *arg, uint64_t seq);
	/* The peer's DRE decoder applied frames up to seq (call dre_enc_ack). */
	void (*on_ack)(tun_stream *s, void *arg, uint64_t seq);
} tun_stream_cbs;

/* Set or replace the owner callbacks (cbs is copied). */
void tun_stream_set_cbs(tun_stream *s, const tun_stream_cbs *cbs, void *arg);
/* Queue len bytes for sending.  Always takes them unless the stream is
 * closed/reset (TUN_ECLOSED) or the hard queue limit would be passed
 * (TUN_ELIMIT).  The owner must stop feeding while tun_stream_room is 0 and
 * resume on on_writable: that is what bounds the buffering. */
int tun_stream_write(tun_stream *s, const void *buf, size_t len);
/* Like tun_stream_write, moving all of src (no copy). */
int tun_stream_write_buffer(tun_stream *s, struct evbuffer *src);
/* Bytes the owner may still queue before the high mark (0: stop reading). */
size_t tun_stream_room(const tun_stream *s);
/* Bytes queued, not yet framed (waiting for credit or for their turn). */
size_t tun_stream_queued(const tun_stream *s);
/* n bytes delivered by on_data were drained by the owner: grant credit. */
void tun_stream_consumed(tun_stream *s, size_t n);
/* Half-close: CLOSE goes out after the queued bytes.  An owner whose peer
 * may still ASK for a DRE frame (learn) closes only once on_ack covered its
 * last frame: no DATA can follow a CLOSE. */
int tun_stream_close(tun_stream *s);
/* Abort with a code (enum proto_reset).  The stream is dead; free is due. */
void tun_stream_reset(tun_stream *s, int code);
/* Send ASK(seq): our DRE decoder lacks data referenced by frame seq. */
int tun_stream_ask(tun_stream *s, uint64_t seq);
/* Send ACK(seq): our DRE decoder applied frames up to seq. */
int tun_stream_ack(tun_stream *s, uint64_t seq);
/* Release the owner's handle.  If the owner closed its direction and the
 * peer closed its own, the queued bytes and the CLOSE still go out; any other
 * live stream is reset (PROTO_RST_CANCEL): free without close is an abort.
 * Accepts NULL. */
void tun_stream_free(tun_stream *s);
uint32_t tun_stream_id(const tun_stream *s);
/* Its connection, or NULL once the stream is dead. */
tun_conn *tun_stream_conn(const tun_stream *s);
/* DATA payload counters of this stream (bytes_* are 0). */
void tun_stream_get_stats(const tun_stream *s, tun_stats *st);

/* ---- connections -------------------------------------------------------- */

/* Phases in which on_fd is called (socket tuning hook, tfo/). */
enum tun_fd_phase {
	TUN_FD_LISTEN = 1,       /* server: listening socket bound, before listen() */
	TUN_FD_PRE_CONNECT = 2,  /* client: socket created, before connect() */
	TUN_FD_CONNECTED = 3,    /* client: TCP connected, before TLS */
	TUN_FD_ACCEPTED = 4,     /* server: accepted, before TLS */
};

typedef struct tun_cbs {
	/* HELLO exchange done: streams may be opened on c. */
	void (*on_up)(tun_conn *c, void *arg);
	/* c went down after on_up (its streams got on_reset first); c is freed
	 * right after this returns.  why names the peer and the reason. */
	void (*on_down)(tun_conn *c, void *arg, const char *why);
	/* The peer opened s on c: call tun_stream_set_cbs (or free it). */
	void (*on_stream)(tun_conn *c, tun_stream *s, const tun_open_info *o, void *arg);
	/* A connection failed before it was up (TCP, TLS, certificate, HELLO,
	 * version): msg names the peer address and the reason. */
	void (*on_error)(void *arg, const char *msg);
	/* Socket tuning hook: fd in phase (enum tun_fd_phase). */
	void (*on_fd)(void *arg, int fd, int phase);
	/* The peer's link fields changed (a LINK frame): tun_conn_hello(c) has
	 * the new ones.  May be NULL. */
	void (*on_link)(tun_conn *c, void *arg);
	/* An ALLOW frame from the peer: its len payload bytes, not checked
	 * beyond their length (2 or more).  May be NULL (ignored). */
	void (*on_allow)(tun_conn *c, void *arg, const uint8_t *p, size_t len);
	/* Client: the peer's address for dial attempt `attempt` (successive
	 * attempts rotate through what its name resolves to), in place of a
	 * getaddrinfo that would hold the event loop while DNS answers: 0 with
	 * *ss and *sl set; 1 while a first lookup runs (the dial is tried again
	 * in TUN_RESOLVE_WAIT_MS, nothing reported); -1 with why filled (a
	 * failed dial, reported through on_error).  NULL: getaddrinfo. */
	int (*resolve)(void *arg, unsigned attempt, struct sockaddr_storage *ss, socklen_t *sl, char *why,
		       size_t len);
} tun_cbs;

/* How soon a client dials again while its resolve hook waits for a lookup. */
#define TUN_RESOLVE_WAIT_MS 50

/* Most parallel TLS connections a client keeps to one server. */
enum { TUN_MAX_CONNS = 16 };

/* Plain configuration; zero fields take the defaults noted. */
typedef struct tun_config {
	const char *cert_file;      /* our certificate chain (PEM), required */
	const char *key_file;       /* its private key (PEM), required */
	const char *ca_file;        /* CA that must have signed the peer's certificate, required */
	const char *peer_name;      /* client: name the server certificate must carry (NULL: any) */
	const char *refuse_name;    /* server: a client certificate carrying this name is refused in
				       the handshake, the client getting a bad_certificate alert
				       (a core's certificate posing as an edge's; NULL: none) */
	const char *node_name;      /* our name in HELLO (default "wanopt") */
	uint8_t store_id[PROTO_STORE_ID_LEN]; /* our DRE store id in HELLO */
	uint32_t caps;              /* our capability bits (0: PROTO_CAP_ALL) */
	uint8_t role;               /* enum proto_role (0: edge for clients, core for servers) */
	uint32_t window;            /* per-stream credit we grant (0: PROTO_INITIAL_WINDOW) */
	uint32_t max_streams;       /* streams a peer may open on one connection (0: default) */
	size_t sendq_hiwat;         /* per-stream send queue high mark (0: 256 KiB) */
	size_t sendq_max;           /* per-stream hard limit (0: hiwat + 4 MiB) */
	size_t quantum;             /* DATA bytes per stream per scheduling turn, 1..PROTO_MAX_PAYLOAD
	                             * (0: PROTO_MAX_PAYLOAD); smaller on slow links */
	size_t out_buffer;          /* frame bytes kept queued for TLS beyond the socket buffer
	                             * (0: 64 KiB); an interactive frame may wait behind this
	                             * much: about 10 ms of link rate is a good value */
	unsigned keepalive_ms;      /* PING interval (0: 5000) */
	unsigned keepalive_timeout_ms; /* silence before the connection is declared dead (0: 3 x interval) */
	unsigned keepalive_stall_ms;   /* no frame for this long is fatal even while TCP repairs
	                                * losses (frames held behind a lost segment, see
	                                * proxy/tun/README.md); 0: 15000, at least the timeout */
	unsigned handshake_timeout_ms; /* TCP+TLS+HELLO must finish in this (0: 10000) */
	unsigned backoff_min_ms;    /* client: first reconnect delay (0: 200) */
	unsigned backoff_max_ms;    /* client: reconnect delay cap (0: 30000) */
	unsigned conns;             /* client: parallel TLS connections, 1..TUN_MAX_CONNS (0: 1) */
	uint16_t version_min, version_max; /* protocol versions spoken (0: this build's) */
	uint64_t link_rx_bps;       /* told to peers in HELLO: the rate our side of the WAN link
	                             * receives at, bit/s (0: unknown) */
	uint64_t link_tx_bps;       /* told to peers in HELLO: the rate it sends at (0: unknown) */
	uint32_t link_rtt_us;       /* told to peers in HELLO: the link's round trip (0: unknown) */
} tun_config;

/* ---- listener guard (lguard.c) ---- */
typedef void (*tun_lguard_report_fn)(void *arg, const char *msg);
/* Guards listener l (named `what` in reports): when accept fails (out of
 * descriptors or memory), l pauses for 250 ms instead of retrying in a busy
 * loop, and fn(arg, msg) says so at most once every 10 s.  TUN_OK, or
 * TUN_ENOMEM / TUN_ELIMIT (l then behaves as libevent's default). */
int tun_lguard_watch(struct evconnlistener *l, const char *what, tun_lguard_report_fn fn, void *arg);
/* Forget l's guard; call before freeing l.  NULL or unguarded: nothing. */
void tun_lguard_forget(struct evconnlistener *l);
/* Forget l's guard (if any) and free l; NULL: nothing. */
void tun_lguard_free_listener(struct evconnlistener *l);

/* TLS credentials (our certificate and key, the CA peers are checked
 * against) loaded for one side, counted by reference: an endpoint holds one
 * for the connections it makes or accepts next; a connection keeps what it
 * was made with. */
typedef struct tun_tls tun_tls;
/* Load cfg's certificate, key and CA for the client (client = 1) or server
 * side; NULL with which file failed and why in err. */
tun_tls *tun_tls_load(const tun_config *cfg, int client, char *err, size_t errlen);
/* One more reference to t; t. */
tun_tls *tun_tls_ref(tun_tls *t);
/* Drop a reference; NULL: nothing. */
void tun_tls_unref(tun_tls *t);
/* When our certificate in t stops being valid (Unix time; 0 if unreadable),
 * and its subject ("CN=...") into subj. */
int64_t tun_tls_not_after(const tun_tls *t, char *subj, size_t len);

/* Peer description "ADDR:PORT" (plus " (name)" once the HELLO arrived). */
const char *tun_conn_peer(const tun_conn *c);
/* The peer's HELLO; NULL before on_up. */
const tun_hello *tun_conn_hello(const tun_conn *c);
/* Negotiated version and capabilities (valid after on_up). */
unsigned tun_conn_version(const tun_conn *c);
uint32_t tun_conn_caps(const tun_conn *c);
/* Smoothed round-trip time from PING/PONG in microseconds (0: unknown). */
uint64_t tun_conn_rtt_us(const tun_conn *c);
/* When the certificate the peer presented stops being valid (Unix time; 0
 * before the handshake or if unreadable). */
int64_t tun_conn_peer_not_after(const tun_conn *c);
/* Send an ALLOW frame (payload p, 2..PROTO_MAX_PAYLOAD bytes) on c if it is
 * up and its peer reads them (PROTO_CAP_ALLOW): 1 sent, 0 not for this peer,
 * -1 bad length. */
int tun_conn_send_allow(tun_conn *c, const uint8_t *p, size_t len);
/* Pace c for a link of bps bit/s (the owner's choice from its own hint and
 * the peer's HELLO): each stream gets at most `quantum` DATA bytes a turn and
 * about `out_buffer` frame bytes are kept queued for TLS (0: the config's). */
void tun_conn_set_link(tun_conn *c, uint64_t bps, size_t quantum, size_t out_buffer);
/* The queues ahead of a stream's next frame while a connection carries two
 * streams or more: one stream's turn is all the next one waits for there,
 * so a bulk stream beside an interactive one gets shorter turns and queues. */
typedef struct tun_shared {
	size_t quantum;             /* DATA bytes per stream per turn (0: off) */
	size_t out_buffer;          /* frame bytes kept queued for TLS (at least 1024) */
	int notsent_lowat;          /* the socket's TCP_NOTSENT_LOWAT meanwhile (0: left alone) */
	int notsent_solo;           /* ... and once one stream or none is left */
} tun_shared;
/* Use s's queues on c whenever it carries two streams or more (a copy is
 * kept; NULL or s->quantum 0: never).  Applies from the next pump. */
void tun_conn_set_shared(tun_conn *c, const tun_shared *s);
/* From now on, grant each stream the peer opens on c `window` bytes of credit
 * (PROTO_MAX_WINDOW at most) rather than our HELLO's: the difference goes out
 * as CREDIT right after its OPEN.  Never less than the HELLO's.  Returns the
 * window now granted (0: c is not up). */
uint32_t tun_conn_set_recv_window(tun_conn *c, uint32_t window);
/* The rate set by tun_conn_set_link (0: none). */
uint64_t tun_conn_link_bps(const tun_conn *c);
/* The connection's socket (for tuning, e.g. tfo_retune), or -1. */
int tun_conn_fd(const tun_conn *c);
/* Whether c closed because its streams were done after a GOAWAY (sent or
 * received: a drain, a renewal), not for a fault: for on_down. */
int tun_conn_drained(const tun_conn *c);
/* Streams currently open on c. */
unsigned tun_conn_streams(const tun_conn *c);
/* Counters of c since it connected. */
void tun_conn_get_stats(const tun_conn *c, tun_stats *st);
/* Open a stream on c.  Its OPEN and first DATA leave together.  NULL with
 * *err set (TUN_EDOWN, TUN_ELIMIT, TUN_EGOAWAY, TUN_ENOMEM) on failure. */
tun_stream *tun_conn_open(tun_conn *c, const tun_open_info *o,
			  const tun_stream_cbs *cbs, void *arg, int *err);
/* Send GOAWAY: the peer opens no more streams; current ones go on. */
void tun_conn_goaway(tun_conn *c, const char *text);

/* ---- client and server -------------------------------------------------- */

typedef struct tun_client tun_client;
typedef struct tun_server tun_server;

/* Start dialing host:port (numeric or name) with cfg->conns connections.
 * NULL on bad configuration (unreadable cert, key or CA), with err filled. */
tun_client *tun_client_new(struct event_base *base, const tun_config *cfg,
			   const char *host, uint16_t port, const tun_cbs *cbs, void *arg,
			   char *err, size_t errlen);
/* Close every connection (streams get on_reset) and free; accepts NULL. */
void tun_client_free(tun_client *c);
/* Open a stream on the up connection with the fewest streams; TUN_EDOWN if
 * none is up (the caller fails open). */
tun_stream *tun_client_open(tun_client *c, const tun_open_info *o,
			    const tun_stream_cbs *cbs, void *arg, int *err);
/* Number of connections up. */
unsigned tun_client_up(const tun_client *c);
/* Our link fields (tun_config's link_rx_bps, link_tx_bps, link_rtt_us) changed: later
 * connections' HELLOs carry the new ones, and connections up to a peer with
 * PROTO_CAP_LINK get a LINK frame. */
void tun_client_set_link(tun_client *c, uint64_t rx_bps, uint64_t tx_bps, uint32_t rtt_us);
/* Drain (SIGTERM): GOAWAY on every connection, no redialing; connections
 * close as their streams finish (tun_client_up reaches 0). */
void tun_client_drain(tun_client *c, const char *text);
/* Connections dialed from now on use t (reloaded credentials); the
 * caller's reference to t passes to c.  On c's event loop thread. */
void tun_client_set_tls(tun_client *c, tun_tls *t);
/* Dial host:port from now on (tun_client_new's; a resolve hook, if any,
 * still picks the address); connections up stay (see tun_client_renew). */
void tun_client_set_peer(tun_client *c, const char *host, uint16_t port);
/* Our DRE store changed (its id: store_id): later HELLOs carry it, and each
 * connection up is replaced, make before break: a new one is dialed, and
 * the old one keeps taking streams until another is up, then is sent
 * GOAWAY (text) and closes as its streams finish.  (A server's
 * PROTO_GOAWAY_RENEW does the same for one connection.) */
void tun_client_renew(tun_client *c, const uint8_t *store_id, const char *text);

/* Listen on host:port (port 0: any; see tun_server_port). */
tun_server *tun_server_new(struct event_base *base, const tun_config *cfg,
			   const char *host, uint16_t port, const tun_cbs *cbs, void *arg,
			   char *err, size_t errlen);
/* Close the listener and every connection; accepts NULL. */
void tun_server_free(tun_server *s);
uint16_t tun_server_port(const tun_server *s);
/* Number of connections up. */
unsigned tun_server_up(const tun_server *s);
/* Drain (SIGTERM): stop accepting, GOAWAY on every connection; they close
 * as their streams finish (tun_server_up reaches 0). */
void tun_server_drain(tun_server *s, const char *text);
/* As tun_client_set_link, for a server's connections. */
void tun_server_set_link(tun_server *s, uint64_t rx_bps, uint64_t tx_bps, uint32_t rtt_us);
/* As tun_client_set_tls, for the connections s accepts from now on. */
void tun_server_set_tls(tun_server *s, tun_tls *t);
/* Our DRE store changed (its id: store_id): later HELLOs carry it, and every
 * connection up is replaced: its peer is asked to dial another (a GOAWAY
 * with PROTO_GOAWAY_RENEW and text) and to send GOAWAY on this one once that
 * is up, as tun_client_renew does; streams go on being taken here until
 * then.  A peer without PROTO_CAP_RENEW is sent a plain GOAWAY (text) and
 * dials again after it.  Each closes as its streams finish. */
void tun_server_renew(tun_server *s, const uint8_t *store_id, const char *text);
/* Close the listening socket (new connections are refused at once, so peers
 * back off instead of reconnecting to be sent away); connections stay. */
void tun_server_unlisten(tun_server *s);

#endif
