/* stats.h: counters of a running edge or core, per stream and in total, and
 * the HTTP server that shows them (Prometheus text at /metrics, JSON at
 * /stats.json).  Counters may be updated from any thread (atomics); the
 * registry's stream list is locked only on open, close and render. */
#ifndef WANOPT_STATS_H
#define WANOPT_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Per-stream counters (bytes unless noted), also summed into the totals. */
enum stats_ctr {
	STATS_LAN_IN = 0, /* read from the LAN socket (client at the edge, server at the core) */
	STATS_LAN_OUT,    /* written to the LAN socket */
	STATS_WAN_IN,     /* tunnel payload received for the stream (after DRE and LZ) */
	STATS_WAN_OUT,    /* tunnel payload sent for the stream */
	STATS_DRE_HIT,    /* bytes sent as references to chunks the peer holds */
	STATS_LZ_IN,      /* bytes given to LZ */
	STATS_LZ_OUT,     /* bytes LZ produced */
	STATS_ASKS,       /* chunks asked for (count): the decoder lacked them */
	/* totals only: what warm pushes (stats_stream_set_warm) moved, kept out
	 * of the LAN, WAN, DRE and LZ totals, which are the clients' traffic */
	STATS_WARM_FILE,  /* file bytes read for pushes from here */
	STATS_WARM_WAN,   /* tunnel payload of pushes, either direction */
	STATS_NCTR
};

/* Node-wide values set by their owner (store, tunnel). */
enum stats_gauge {
	STATS_STORE_FILL = 0,  /* bytes held in the store */
	STATS_STORE_SIZE,      /* configured store_size */
	STATS_STORE_EVICTIONS, /* chunks evicted since start (monotonic) */
	STATS_TUNNEL_RTT_US,   /* smoothed tunnel RTT (TCP_INFO), us */
	STATS_TUNNELS_UP,      /* tunnels currently established */
	STATS_STORE_HIT_BYTES, /* chunk bytes referenced (kept across restarts, as the next four) */
	STATS_STORE_NEW_BYTES, /* chunk bytes stored anew */
	STATS_STORE_LARGER_2X, /* of those, estimated references in a store 2x as large */
	STATS_STORE_LARGER_4X, /* ... 4x */
	STATS_STORE_LARGER_8X, /* ... 8x */
	STATS_LOOP_LAG_MAX_US, /* longest an event loop was held past a timer, us (stats_max) */
	STATS_LOOP_LAG_US,     /* all the time event loops were held past a timer, us (monotonic) */
	STATS_LOOP_HELD,       /* holds of PX_LAG_WARN_MS or more (each logged), since start (monotonic) */
	STATS_STORE_PEERS,     /* peer stores the store tracks (slots in use) */
	STATS_STORE_PEERS_HELD, /* of those, in use by a stream now */
	STATS_STORE_UNTRACKED, /* streams from peers that found no slot, since start (monotonic) */
	STATS_STORE_PINS,      /* frames in flight keeping a data file from eviction (pins held now) */
	STATS_STORE_PIN_OVER,  /* the most bytes pins kept the store over its size, since start */
	STATS_STORE_PIN_FORCED, /* data files evicted though pinned (past the margin), since start */
	STATS_LAN_BULK,        /* LAN sockets holding the bulk receive buffer now (lanbuf.c) */
	STATS_LAN_BULK_GIVEN,  /* ... given it since start (monotonic) */
	STATS_STORE_READS_MAPPED, /* 1: runs of stored chunks are read through the mappings, 0: windows */
	STATS_STORE_READS_WINDOW_NS, /* what the store's reads cost per MiB through windows when last timed */
	STATS_STORE_READS_MAP_NS,    /* ... through the mappings (0: not timed) */
	STATS_STORE_READS_CHANGES,   /* times the store changed its way since start (monotonic) */
	STATS_TLS_NOT_AFTER,         /* when our tunnel certificate expires, Unix time (0: unknown); see
				      * STATS_CERT_WARN_DAYS */
	STATS_CONN_DIRECT,           /* edge: connections passed straight to their destination, not
				      * through the tunnel (passthrough, fail open), since start */
	STATS_CONN_REFUSED,          /* edge: connections refused (no tunnel and fail_open = refuse, or
				      * no way to their destination), since start */
	STATS_CONN_HANDED,           /* edge: of STATS_CONN_DIRECT, connections the core turned back
				      * before their destination got anything (their first bytes went
				      * direct), since start */
	STATS_STORE_ROOM,            /* what the store's file system leaves it, while less than its
				      * size (the bound it keeps to then); 0: its size */
	STATS_STORE_VOLATILE,        /* 1: the node's store could not be opened and it runs on a
				      * volatile one in memory (proxy/volstore.c) */
	STATS_NGAUGE
};

/* A tunnel connection's peer and smoothed RTT (TCP_INFO, us; 0: unknown). */
struct stats_tunnel {
	char peer[96]; /* "ADDR:PORT (name)", " class ef" for a marked connection */
	uint64_t rtt_us;
	uint64_t link_bps; /* the rate we send to it at (ours or the slower it told), 0: unknown */
	uint64_t pace_bps; /* the connection's pacing cap, 0: none (a peer's: the sum over its connections) */
	uint64_t cert_not_after; /* when the peer's certificate expires, Unix time (0: unknown; a peer's: the earliest) */
};
enum { STATS_TUNNEL_SLOTS = 64 };
/* A certificate this many days or fewer from its expiry is warned of: in the
 * daemons' logs (node_tls.c) and by `wanopt stats` (stats_cli.c). */
enum { STATS_CERT_WARN_DAYS = 30 };

struct stats;
struct stats_stream;
struct stats_http;
struct event_base;
struct evhttp;

/* A registry for role ("edge" or "core", shown in the output). */
struct stats *stats_create(const char *role);
/* Frees the registry; streams still open must be closed first.  NULL is fine. */
void stats_free(struct stats *s);
/* Registers a stream; src, dst and mode are labels ("10.0.0.5:41000",
 * "[2001:db8::1]:443", "full").  NULL when out of memory (the caller may
 * pass NULL to the other stream functions, which then do nothing). */
struct stats_stream *stats_stream_open(struct stats *s, const char *src, const char *dst,
				       const char *mode);
/* Marks a stream as a warm push (before anything was counted): its mode
 * shows as "warm", and its bytes go to the STATS_WARM_ totals only. */
void stats_stream_set_warm(struct stats_stream *st);
/* Names the stream's DSCP class ("af41"; NULL or "": unmarked) for its
 * listing: the `class` label and JSON member. */
void stats_stream_set_class(struct stats_stream *st, const char *cls);
/* Adds n to a stream counter and to the total. */
void stats_stream_add(struct stats_stream *st, enum stats_ctr c, uint64_t n);
/* A stream counter's value. */
uint64_t stats_stream_get(const struct stats_stream *st, enum stats_ctr c);
/* The stream's id (unique in the registry, from 1). */
uint64_t stats_stream_id(const struct stats_stream *st);
/* One-line summary for the close log line: "lan 1.2 MB wan 30 KB (97.5 %) ...". */
char *stats_stream_summary(const struct stats_stream *st, char *buf, size_t len);
/* v bytes with a unit, "1.2 MB": decimal (traffic) or, with binary, "1.0 GiB"
 * (store sizes, which the config gives in K/M/G = KiB/MiB/GiB); returns buf. */
const char *stats_bytes_str(double v, int binary, char *buf, size_t len);
/* Unregisters and frees the stream; its bytes stay in the totals.  NULL is fine. */
void stats_stream_close(struct stats_stream *st);
/* Sets a gauge. */
void stats_set(struct stats *s, enum stats_gauge g, uint64_t v);
/* Adds d (negative: takes away) to a gauge, from any thread.  NULL s is fine. */
void stats_add(struct stats *s, enum stats_gauge g, int64_t d);
/* Raises a gauge to v if it is lower (from any thread). */
void stats_max(struct stats *s, enum stats_gauge g, uint64_t v);
/* Replaces publisher `slot`'s list of tunnel connections (slot 0 ..
 * STATS_TUNNEL_SLOTS-1: an edge, or each of a core's workers), from any
 * thread; shown per peer (wanopt_tunnel_peer_rtt_seconds{peer=...}, JSON
 * tunnel.peers), connections to the same peer merged (the smallest RTT).
 * 0, or -1 (bad slot, out of memory: the slot's list is then empty). */
int stats_tunnels_set(struct stats *s, int slot, const struct stats_tunnel *t, size_t n);
/* A total counter's value. */
uint64_t stats_total(const struct stats *s, enum stats_ctr c);
/* Streams currently open. */
uint64_t stats_active(const struct stats *s);
/* 100 x (1 - wan/lan) for the given byte counts; 0 when lan is 0. */
double stats_reduction(uint64_t lan, uint64_t wan);

/* The whole registry as Prometheus text exposition (version 0.0.4) or JSON;
 * malloc'd strings, NULL when out of memory.  At most STATS_MAX_LISTED
 * streams are listed individually (the largest by LAN bytes). */
enum { STATS_MAX_LISTED = 500 };
char *stats_render_prom(struct stats *s);
char *stats_render_json(struct stats *s);
/* Writes s escaped for a JSON string (json) or a Prometheus label value. */
void stats_escape(FILE *f, const char *s, int json);

/* Serves the registry over HTTP on host:port (port 0: an ephemeral port) from
 * base's thread: GET /metrics, /stats.json.  NULL with err set on failure. */
struct stats_http *stats_http_start(struct event_base *base, struct stats *s, const char *host,
				    uint16_t port, char *err, size_t errlen);
/* The libevent HTTP server, for roles that serve more paths (e.g. /warm). */
struct evhttp *stats_http_evhttp(struct stats_http *h);
/* The port actually bound. */
uint16_t stats_http_port(const struct stats_http *h);
/* Stops serving; NULL is fine. */
void stats_http_free(struct stats_http *h);
/* Blocking HTTP/1.0 GET of path from host:port (timeout ms); *body gets the
 * malloc'd, NUL-terminated body of a 200 answer.  0, or -1 with err set. */
int stats_fetch(const char *host, uint16_t port, const char *path, int timeout_ms,
		char **body, char *err, size_t errlen);

#endif
