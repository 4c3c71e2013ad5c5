/* emu.h: the packet emulator: two TUN devices in two namespaces, joined by a
 * wn_link in each direction, driven by a libevent loop. */
#ifndef WN_EMU_H
#define WN_EMU_H

#include <stddef.h>
#include <stdint.h>
#include "profile.h"

/* Side A is the branch (packets it sends travel "up"), side B the datacenter. */
struct wn_emu_conf {
	const char *ns[2];        /* namespace names; created (and removed at exit) if missing */
	const char *dev;          /* TUN device name on both sides */
	const char *addr[2];      /* IPv4 address of each side's TUN device */
	int         prefix;       /* prefix length of both addresses */
	uint64_t    seed;         /* loss and jitter seed; up uses seed, down seed + 1 */
	const char *stats_path;   /* JSON counters, rewritten each second and on SIGUSR1 */
	const char *ready_path;   /* written with our pid once the link is up */
	double      duration_s;   /* stop after this long; 0 = until SIGINT/SIGTERM */
};

/* Sets up the link and runs until a signal or the duration ends.
 * Returns 0, or -1 with err set (setup failure); everything is undone either way. */
int wn_emu_run(const struct wn_profile *p, const struct wn_emu_conf *c, char *err, size_t errlen);

/* Nanoseconds on CLOCK_MONOTONIC. */
uint64_t wn_now_ns(void);

#endif
