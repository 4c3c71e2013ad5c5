/*
 * rprobe.c: which way of reading a run of stored chunks is faster on this
 * host, measured once per process (dre_reads_probe).
 *
 * A run's chunks can be compared or copied straight out of the store's
 * mappings, or read ahead 128 KiB at a time with pread into a window
 * (rwin.c) and taken from there.  Which is faster depends on what the host's
 * hypervisor makes of a page fault: on one VM 200 MiB compared against a
 * fresh mapping took 123 ms and through windows 14 ms; on another, 16 ms
 * through the mapping and 37 through windows (the copy is the larger cost
 * there).  So the store measures both on a small file of its own, in its own
 * directory, and uses the faster; again when asked (dre_store_reprobe: the
 * daemons do on SIGHUP, e.g. after the VM moved to another host).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"

#define PROBE_LEN (2u << 20)  /* bytes read each way, each round */
#define PROBE_WIN (128u << 10) /* a window's pread, as rwin.c */
#define PROBE_CMP 4096u        /* compared at a time, about a chunk */
#define PROBE_ROUNDS 5         /* the fastest round of each way counts */

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* ns to compare ref with the file through PROBE_WIN preads into buf;
 * UINT64_MAX if a read falls short or differs. */
static uint64_t by_window(int fd, const uint8_t *ref, uint8_t *buf)
{
	uint64_t t0 = now_ns();
	for (size_t o = 0; o < PROBE_LEN; o += PROBE_WIN) {
		if (pread(fd, buf, PROBE_WIN, (off_t)o) != PROBE_WIN)
			return UINT64_MAX;
		for (size_t c = 0; c < PROBE_WIN; c += PROBE_CMP)
			if (memcmp(buf + c, ref + o + c, PROBE_CMP))
				return UINT64_MAX;
	}
	return now_ns() - t0;
}

/* ns to compare ref with the mapping m, its pages let go first (as after
 * a store's let-go, smap.c); UINT64_MAX if they differ. */
static uint64_t by_map(const uint8_t *m, const uint8_t *ref)
{
	madvise((void *)m, PROBE_LEN, MADV_DONTNEED);
	uint64_t t0 = now_ns();
	for (size_t o = 0; o < PROBE_LEN; o += PROBE_CMP)
		if (memcmp(m + o, ref + o, PROBE_CMP))
			return UINT64_MAX;
	return now_ns() - t0;
}

/* Fill fd with PROBE_LEN bytes of ref (made here); 0 or -1. */
static int fill(int fd, uint8_t *ref)
{
	uint64_t x = 0x9e3779b97f4a7c15u;
	for (size_t i = 0; i < PROBE_LEN; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(ref + i, &x, 8);
	}
	return pwrite(fd, ref, PROBE_LEN, 0) == PROBE_LEN ? 0 : -1;
}

/* Both ways, PROBE_ROUNDS rounds each, alternating, on a nameless file in
 * dir; the fastest round of each in ns[0] (window) and ns[1] (map).  0, or
 * -1 if the file, the mapping or memory could not be had. */
static int measure(const char *dir, uint64_t ns[2])
{
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	uint8_t *ref = malloc(PROBE_LEN), *buf = malloc(PROBE_WIN);
	void *m = MAP_FAILED;
	int rc = -1;
	if (!ref || !buf || fill(fd, ref))
		goto out;
	if ((m = mmap(NULL, PROBE_LEN, PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED)
		goto out;
	ns[0] = ns[1] = UINT64_MAX;
	for (int r = 0; r < PROBE_ROUNDS; r++) {
		uint64_t w = by_window(fd, ref, buf), p = by_map(m, ref);
		ns[0] = w < ns[0] ? w : ns[0];
		ns[1] = p < ns[1] ? p : ns[1];
	}
	rc = ns[0] == UINT64_MAX || ns[1] == UINT64_MAX ? -1 : 0;
	munmap(m, PROBE_LEN);
out:
	free(ref);
	free(buf);
	close(fd);
	return rc;
}

static pthread_mutex_t probe_mu = PTHREAD_MUTEX_INITIALIZER;
static int probed;              /* 1 once measured (or tried) */
static dre_reads_probed result; /* what it found */

/* The way WANOPT_STORE_READS names (DRE_READS_WINDOW or _MAP), 0 if unset
 * or not one of "window" and "map" (then its value goes to *ignored). */
static int from_env(const char **ignored)
{
	const char *v = getenv("WANOPT_STORE_READS");
	if (v && !strcmp(v, "window"))
		return DRE_READS_WINDOW;
	if (v && !strcmp(v, "map"))
		return DRE_READS_MAP;
	*ignored = v;
	return 0;
}

/* Measure (or take the way named) into result; probe_mu held. */
static void probe_locked(const char *dir)
{
	uint64_t ns[2];
	memset(&result, 0, sizeof result);
	int forced = from_env(&result.ignored);
	if (forced) {
		result.way = forced;
		result.named = 1;
	} else if (measure(dir, ns)) {
		result.way = DRE_READS_WINDOW; /* the way that needs no probe file */
	} else {
		result.window_ns = ns[0];
		result.map_ns = ns[1];
		/* the mapping only when clearly faster: windows hold the
		 * resident set lower (no mapped pages between let-gos) */
		result.way = ns[1] * 10 < ns[0] * 9 ? DRE_READS_MAP : DRE_READS_WINDOW;
	}
	probed = 1;
}

void dre_reads_probe(const char *dir, dre_reads_probed *out)
{
	pthread_mutex_lock(&probe_mu);
	if (!probed)
		probe_locked(dir);
	*out = result;
	pthread_mutex_unlock(&probe_mu);
}

void dre_reads_reprobe(const char *dir, dre_reads_probed *out)
{
	pthread_mutex_lock(&probe_mu);
	probe_locked(dir);
	*out = result;
	pthread_mutex_unlock(&probe_mu);
}

int dre_store_reprobe(dre_store *st)
{
	if (st->reads_given || st->readonly)
		return -1;
	dre_reads_probed r;
	dre_reads_reprobe(st->dir, &r); /* a millisecond or so: not under the store's lock */
	pthread_mutex_lock(&st->mu);
	int changed = r.way != st->tune.chosen;
	st->reads = r;
	dre_rtune_reset(st); /* what reads cost is timed again from this way */
	pthread_mutex_unlock(&st->mu);
	return changed;
}
