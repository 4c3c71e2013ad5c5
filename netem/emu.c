/* emu.c: the emulator's event loop.
 *
 * Each TUN fd is read until EAGAIN (at most WN_READ_BATCH packets per event, so
 * one busy side cannot starve the other); each packet is offered to its
 * direction's link.  One timer fires at the earliest delivery time of either
 * link and writes every due packet to the other side's TUN fd.  The timer is
 * a precise one (timerfd), which keeps the added latency to tens of µs. */
#include "emu.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "link.h"
#include "nsif.h"

enum { WN_READ_BATCH = 256, WN_STATS_PERIOD_MS = 1000 };

struct wn_emu {
	const struct wn_emu_conf *conf;
	struct event_base *base;
	int                fd[2];          /* TUN fd of side A, side B */
	int                created[2];     /* we created the namespace: remove it at exit */
	struct wn_link     link[WN_NDIR];  /* UP: A -> B, DOWN: B -> A */
	struct event      *rd[2], *timer, *tick, *sig[3], *stop;
	uint64_t           armed_ns;       /* due time the timer is set for, or UINT64_MAX */
	uint64_t           seq;            /* stats file generation */
	uint64_t           write_errors;
	uint64_t           late_max_ns;    /* the latest the delivery timer fired past a due time */
	uint64_t           start_ns;
	int                fail_errno;     /* a TUN read failed: why, and on which side */
	int                fail_side;
};

uint64_t wn_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Writes one direction's counters as a JSON object. */
static void json_dir(FILE *f, const char *name, const struct wn_link *l)
{
	const struct wn_counters *c = &l->c;

	fprintf(f, "\"%s\":{\"in_pkts\":%llu,\"in_bytes\":%llu,\"out_pkts\":%llu,\"out_bytes\":%llu,"
		"\"drop_loss\":%llu,\"drop_queue\":%llu,\"drop_other\":%llu,\"max_backlog\":%llu,"
		"\"held\":%u}", name, (unsigned long long)c->in_pkts, (unsigned long long)c->in_bytes,
		(unsigned long long)c->out_pkts, (unsigned long long)c->out_bytes,
		(unsigned long long)c->drop_loss, (unsigned long long)c->drop_queue,
		(unsigned long long)c->drop_other, (unsigned long long)c->max_backlog, l->held);
}

/* Rewrites the stats file atomically (write to .tmp, rename). */
static void write_stats(struct wn_emu *e)
{
	char tmp[4096 + 8];
	FILE *f;

	if (!e->conf->stats_path)
		return;
	snprintf(tmp, sizeof tmp, "%s.tmp", e->conf->stats_path);
	if (!(f = fopen(tmp, "w")))
		return;
	fprintf(f, "{\"seq\":%llu,\"pid\":%d,\"uptime_s\":%.6f,\"write_errors\":%llu,\"late_max_us\":%llu,",
		(unsigned long long)++e->seq, (int)getpid(), (wn_now_ns() - e->start_ns) / 1e9,
		(unsigned long long)e->write_errors, (unsigned long long)(e->late_max_ns / 1000));
	json_dir(f, "up", &e->link[WN_UP]);
	fputc(',', f);
	json_dir(f, "down", &e->link[WN_DOWN]);
	fputs("}\n", f);
	if (fclose(f) == 0)
		rename(tmp, e->conf->stats_path);
}

/* Arms the delivery timer for the earliest due packet, if it changed. */
static void arm(struct wn_emu *e)
{
	uint64_t due = wn_link_next_due(&e->link[WN_UP]), d2 = wn_link_next_due(&e->link[WN_DOWN]);
	uint64_t now, wait;
	struct timeval tv;

	if (d2 < due)
		due = d2;
	if (due == UINT64_MAX || (due == e->armed_ns && evtimer_pending(e->timer, NULL)))
		return;
	now = wn_now_ns();
	wait = due > now ? due - now : 0;
	wait = (wait + 999) / 1000;                   /* round up: never fire early */
	tv.tv_sec = (time_t)(wait / 1000000);
	tv.tv_usec = (suseconds_t)(wait % 1000000);
	e->armed_ns = due;
	evtimer_add(e->timer, &tv);
}

/* Timer: writes every due packet to the side it travels to. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct wn_emu *e = arg;
	uint64_t now = wn_now_ns();

	/* held past a due time (not scheduled, say): the link idled that long */
	if (e->armed_ns != UINT64_MAX && now > e->armed_ns && now - e->armed_ns > e->late_max_ns)
		e->late_max_ns = now - e->armed_ns;
	e->armed_ns = UINT64_MAX;
	for (int d = 0; d < WN_NDIR; d++) {
		int out = e->fd[d == WN_UP ? 1 : 0];
		struct wn_pkt *p;

		while ((p = wn_link_pop_due(&e->link[d], now))) {
			if (write(out, p->data, p->len) != (ssize_t)p->len)
				e->write_errors++;    /* the receiving stack is gone or full: a drop */
			free(p);
		}
	}
	arm(e);
}

/* A TUN fd is readable: offer its packets to the matching direction. */
static void on_read(evutil_socket_t fd, short what, void *arg)
{
	struct wn_emu *e = arg;
	int side = fd == e->fd[0] ? 0 : 1;
	struct wn_link *l = &e->link[side == 0 ? WN_UP : WN_DOWN];
	static unsigned char buf[WN_MAX_PKT];

	for (int i = 0; i < WN_READ_BATCH; i++) {
		ssize_t n = read(fd, buf, sizeof buf);

		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			/* the device is gone (its namespace was deleted): stop */
			e->fail_errno = errno;
			e->fail_side = side;
			event_base_loopbreak(e->base);
			return;
		}
		if (n <= 0)
			break;      /* nothing more for now */
		wn_link_offer(l, buf, (uint32_t)n, wn_now_ns());
	}
	arm(e);
}

/* Periodic tick: refreshes the stats file. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	write_stats(arg);
}

/* SIGUSR1 writes the stats now; SIGINT and SIGTERM stop the loop. */
static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct wn_emu *e = arg;

	if (sig == SIGUSR1)
		write_stats(e);
	else
		event_base_loopbreak(e->base);
}

/* --duration elapsed: stop the loop. */
static void on_stop(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopbreak(((struct wn_emu *)arg)->base);
}

/* Creates (if missing) side i's namespace and opens and configures its TUN device. */
static int open_side(struct wn_emu *e, int i, const struct wn_profile *p, char *err, size_t errlen)
{
	const struct wn_emu_conf *c = e->conf;
	int saved;

	if (!wn_ns_exists(c->ns[i])) {
		if (wn_ns_create(c->ns[i], err, errlen) < 0)
			return -1;
		e->created[i] = 1;
	}
	if (wn_ns_enter(c->ns[i], &saved, err, errlen) < 0)
		return -1;
	if ((e->fd[i] = wn_tun_open(c->dev, err, errlen)) < 0)
		goto err_leave;
	if (wn_if_up("lo", err, errlen) < 0 ||
	    wn_if_setup(c->dev, c->addr[i], c->prefix, (int)p->mtu, err, errlen) < 0)
		goto err_close;
	return wn_ns_leave(saved);
err_close:
	close(e->fd[i]);
	e->fd[i] = -1;
err_leave:
	wn_ns_leave(saved);
	return -1;
}

/* Undoes whatever setup did: events, base, fds, namespaces we created. */
static void teardown(struct wn_emu *e)
{
	struct event *evs[] = { e->rd[0], e->rd[1], e->timer, e->tick, e->sig[0], e->sig[1],
				e->sig[2], e->stop };

	for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
		if (evs[i])
			event_free(evs[i]);
	if (e->base)
		event_base_free(e->base);
	for (int i = 0; i < 2; i++) {
		if (e->fd[i] >= 0)
			close(e->fd[i]);
		if (e->created[i])
			wn_ns_delete(e->conf->ns[i], NULL, 0);
	}
	for (int d = 0; d < WN_NDIR; d++)
		wn_link_clear(&e->link[d]);
}

/* Creates the event base and every event. */
static int make_events(struct wn_emu *e, char *err, size_t errlen)
{
	static const int sigs[3] = { SIGINT, SIGTERM, SIGUSR1 };
	struct event_config *cfg = event_config_new();
	struct timeval tick = { 0, WN_STATS_PERIOD_MS * 1000 };

	if (!cfg)
		goto err;
	event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	e->base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (!e->base)
		goto err;
	for (int i = 0; i < 2; i++)
		if (!(e->rd[i] = event_new(e->base, e->fd[i], EV_READ | EV_PERSIST, on_read, e)) ||
		    event_add(e->rd[i], NULL) < 0)
			goto err;
	for (int i = 0; i < 3; i++)
		if (!(e->sig[i] = evsignal_new(e->base, sigs[i], on_signal, e)) ||
		    event_add(e->sig[i], NULL) < 0)
			goto err;
	if (!(e->timer = evtimer_new(e->base, on_timer, e)) ||
	    !(e->tick = event_new(e->base, -1, EV_PERSIST, on_tick, e)) ||
	    event_add(e->tick, &tick) < 0)
		goto err;
	if (e->conf->duration_s > 0) {
		struct timeval tv = { (time_t)e->conf->duration_s,
				      (suseconds_t)((e->conf->duration_s - (time_t)e->conf->duration_s) * 1e6) };

		if (!(e->stop = evtimer_new(e->base, on_stop, e)) || evtimer_add(e->stop, &tv) < 0)
			goto err;
	}
	return 0;
err:
	snprintf(err, errlen, "libevent setup failed");
	return -1;
}

/* Writes our pid to the ready file (atomically). */
static int write_ready(const char *path, char *err, size_t errlen)
{
	char tmp[4096 + 8];
	FILE *f;

	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	if (!(f = fopen(tmp, "w")) || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 ||
	    rename(tmp, path) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int wn_emu_run(const struct wn_profile *p, const struct wn_emu_conf *c, char *err, size_t errlen)
{
	struct wn_emu e = { .conf = c, .fd = { -1, -1 }, .armed_ns = UINT64_MAX };
	int rc = -1;

	if (c->ns[0] && c->ns[1] && strcmp(c->ns[0], c->ns[1]) == 0) {
		snprintf(err, errlen, "both sides in namespace %s: they must differ", c->ns[0]);
		return -1;
	}
	wn_link_init(&e.link[WN_UP], &p->dir[WN_UP], c->seed);
	wn_link_init(&e.link[WN_DOWN], &p->dir[WN_DOWN], c->seed + 1);
	e.start_ns = wn_now_ns();
	if (open_side(&e, 0, p, err, errlen) < 0 || open_side(&e, 1, p, err, errlen) < 0 ||
	    make_events(&e, err, errlen) < 0)
		goto out;
	write_stats(&e);
	if (c->ready_path && write_ready(c->ready_path, err, errlen) < 0)
		goto out;
	event_base_dispatch(e.base);
	write_stats(&e);
	if (c->ready_path)
		unlink(c->ready_path);
	rc = 0;
	if (e.fail_errno) {
		snprintf(err, errlen, "reading TUN %s in %s: %s", c->dev, c->ns[e.fail_side],
			 strerror(e.fail_errno));
		rc = -1;
	}
out:
	teardown(&e);
	return rc;
}
