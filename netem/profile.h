/* profile.h: WAN link profiles (the .conf files in netem/profiles), parsed per direction. */
#ifndef WN_PROFILE_H
#define WN_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Directions of a link.  "up" is branch -> datacenter (side A -> side B). */
enum wn_dir_id {
	WN_UP   = 0,
	WN_DOWN = 1,
	WN_NDIR = 2,
};

/* Limits on profile values: anything outside is a profile error. */
enum {
	WN_MAX_LINE     = 512,               /* longest profile line */
	WN_MIN_MTU      = 576,
	WN_MAX_MTU      = 9000,
	WN_MAX_OVERHEAD = 256,               /* per-packet framing bytes */
	WN_MIN_LIMIT    = 1500,              /* a queue must hold one full packet */
	WN_MAX_LIMIT    = 1 << 30,
};
#define WN_MAX_RATE_BPS  100000000000ULL   /* 100 Gbit/s */
#define WN_MAX_DELAY_NS  10000000000ULL    /* 10 s one way */

/* One direction of a link. */
struct wn_dir {
	uint64_t rate_bps;     /* serialisation rate in bit/s; 0 = unlimited */
	uint64_t delay_ns;     /* one-way propagation delay */
	uint64_t jitter_ns;    /* delay varies uniformly in [delay - jitter, delay + jitter] */
	double   loss;         /* probability a packet is dropped, 0..1 */
	uint64_t limit_bytes;  /* drop-tail queue limit in bytes (resolved, never 0) */
	double   limit_bdp;    /* limit given as a multiple of the BDP (0 if given in bytes) */
	uint32_t overhead;     /* framing bytes added to each packet for serialisation */
};

struct wn_profile {
	char          name[64];
	char          description[160];
	uint32_t      mtu;              /* MTU of the emulated link's devices */
	struct wn_dir dir[WN_NDIR];
};

/* Parses profile text; fname is only used in messages.  Returns 0, or -1 with
 * "fname:line: what is wrong" in err.  p is fully initialised either way. */
int wn_profile_parse(const char *text, const char *fname, struct wn_profile *p,
		     char *err, size_t errlen);

/* Reads and parses a profile file (at most 64 KiB).  Returns 0 or -1 with err set. */
int wn_profile_load(const char *path, struct wn_profile *p, char *err, size_t errlen);

/* Round-trip time of the link without queueing or serialisation. */
uint64_t wn_profile_rtt_ns(const struct wn_profile *p);

/* Time to serialise a packet of len bytes in direction d (0 if rate is unlimited). */
uint64_t wn_dir_tx_ns(const struct wn_dir *d, uint32_t len);

/* Writes the profile as shell variable assignments (for the tc scripts). */
void wn_profile_print_shell(const struct wn_profile *p, FILE *out);

#endif
