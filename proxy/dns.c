/*
 * dns.c: a daemon's resolver (libevent's evdns), kept in step with
 * /etc/resolv.conf and /etc/hosts.  evdns reads them once; a core that runs
 * for months would keep asking the name servers it started with after DHCP
 * or an administrator changed them, where every program on the C library
 * follows the change.  So before a lookup the files' identities (device,
 * inode, size, change time) are compared with those last read, at most
 * once a second, and both are read again on a difference.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "dns.h"
#include "log.h"

static const char *const dns_files[] = { "/etc/resolv.conf", "/etc/hosts" };
#define DNS_NFILES (sizeof dns_files / sizeof dns_files[0])

/* What tells one version of a file from another; all zero if it is missing. */
struct dns_stamp {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
};

struct px_dns {
	struct evdns_base *evdns;
	int watch; /* the files are watched (not a wrapped base) */
	long long checked_ms; /* when the files were last looked at */
	struct dns_stamp seen[DNS_NFILES];
};

/* The files' version a resolver of this process last logged the change to
 * (a core's workers each have one, and each sees the change). */
static _Atomic uint64_t dns_logged;

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void stamp_of(const char *path, struct dns_stamp *st)
{
	struct stat sb;
	if (stat(path, &sb) != 0) {
		memset(st, 0, sizeof *st);
		return;
	}
	st->dev = sb.st_dev;
	st->ino = sb.st_ino;
	st->size = sb.st_size;
	st->mtime = sb.st_mtim;
	st->ctime = sb.st_ctim;
}

static int stamp_same(const struct dns_stamp *a, const struct dns_stamp *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec && a->ctime.tv_sec == b->ctime.tv_sec &&
	       a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* Note the files as they are now (just before reading them). */
static void stamp_files(struct px_dns *d)
{
	for (size_t i = 0; i < DNS_NFILES; i++)
		stamp_of(dns_files[i], &d->seen[i]);
	d->checked_ms = now_ms();
}

/* evdns's own messages ("Nameserver 192.0.2.53:53 has failed: request
 * timed out"), as lines of our log named for the resolver rather than
 * libevent at large: its warnings as warnings, the rest as debug lines. */
static void dns_log(int is_warning, const char *msg)
{
	log_msg(is_warning ? LOGL_WARN : LOGL_DEBUG, "name lookups: %s", msg);
}

void px_dns_log_init(void)
{
	evdns_set_log_fn(dns_log);
}

struct px_dns *px_dns_new(struct event_base *base)
{
	struct px_dns *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	d->watch = 1;
	stamp_files(d);
	if (!(d->evdns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS))) {
		free(d);
		return NULL;
	}
	return d;
}

struct px_dns *px_dns_wrap(struct evdns_base *evdns)
{
	struct px_dns *d = calloc(1, sizeof *d);
	if (!d) {
		evdns_base_free(evdns, 1);
		return NULL;
	}
	d->evdns = evdns;
	return d;
}

/* FNV-1a of the files' stamps: which version of them this is. */
static uint64_t stamps_hash(const struct dns_stamp *st)
{
	const unsigned char *p = (const unsigned char *)st;
	uint64_t h = 14695981039346656037ull;
	for (size_t i = 0; i < DNS_NFILES * sizeof *st; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* Read the files again if either changed since they were last read; the
 * first resolver of the process to see a version logs it. */
static void dns_check(struct px_dns *d)
{
	long long now = now_ms();
	if (!d->watch || now - d->checked_ms < PX_DNS_CHECK_MS)
		return;
	d->checked_ms = now;
	struct dns_stamp st[DNS_NFILES];
	memset(st, 0, sizeof st); /* the hash reads the padding too */
	size_t changed = DNS_NFILES;
	for (size_t i = 0; i < DNS_NFILES; i++) {
		stamp_of(dns_files[i], &st[i]);
		if (changed == DNS_NFILES && !stamp_same(&st[i], &d->seen[i]))
			changed = i;
	}
	if (changed == DNS_NFILES)
		return;
	uint64_t h = stamps_hash(st);
	int first = atomic_exchange(&dns_logged, h) != h;
	if (first)
		log_info("%s changed: name servers and hosts read again", dns_files[changed]);
	px_dns_reread(d, first ? "" : NULL);
}

struct evdns_getaddrinfo_request *px_dns_lookup(struct px_dns *d, const char *name, const char *port,
						const struct evutil_addrinfo *hints, evdns_getaddrinfo_cb cb,
						void *arg)
{
	if (!d) {
		cb(EVUTIL_EAI_FAIL, NULL, arg);
		return NULL;
	}
	dns_check(d);
	return evdns_getaddrinfo(d->evdns, name, port, hints, cb, arg);
}

void px_dns_reread(struct px_dns *d, const char *prefix)
{
	if (!d || !d->watch)
		return;
	stamp_files(d);
	evdns_base_clear_nameservers_and_suspend(d->evdns);
	evdns_base_clear_host_addresses(d->evdns);
	int rc = evdns_base_resolv_conf_parse(d->evdns, DNS_OPTIONS_ALL, "/etc/resolv.conf");
	evdns_base_resume(d->evdns);
	if (rc && prefix)
		log_warn("%s/etc/resolv.conf %s", prefix, rc == 1 ? "is missing: name servers asked: 127.0.0.1"
			 : rc == 6 ? "lists no name server: asked: 127.0.0.1" : "does not read: no name servers");
}

void px_dns_free(struct px_dns *d, struct event_base *base)
{
	if (!d)
		return;
	evdns_base_free(d->evdns, 1);
	free(d);
	event_base_loop(base, EVLOOP_NONBLOCK);
}
