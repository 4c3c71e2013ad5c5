/* splice.c: two sockets joined directly, without the tunnel: fail-open and
 * passthrough connections.  Each side's input moves to the other's output;
 * reading stops while the other's output is above HIWAT; EOF is passed on as
 * a half-close once the output drained; an error resets both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

#include "bev_fill.h"
#include "log.h"
#include "relay.h"

#define HIWAT (4u << 20)
#define READ_CHUNK (1u << 20) /* bytes read (and written) at a time */
#define LOWAT (1u << 20)

struct px_splice {
	struct px_relay_env *env;
	struct bufferevent *b[2];
	int eof[2];   /* side i sent FIN */
	int shut[2];  /* we shut down writes on side i */
	uint64_t bytes[2];
	char name[400];
};

static void splice_free(struct px_splice *sp, int rst, const char *why)
{
	log_info("close %s (direct): %llu bytes up, %llu down%s%s", sp->name, (unsigned long long)sp->bytes[0],
		 (unsigned long long)sp->bytes[1], why ? "; reset: " : "", why ? why : "");
	for (int i = 0; i < 2; i++) {
		if (rst) {
			struct linger lg = { 1, 0 };
			int fd = bufferevent_getfd(sp->b[i]);
			if (fd >= 0)
				setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
		}
		bufferevent_free(sp->b[i]);
	}
	struct px_relay_env *env = sp->env;
	free(sp);
	if (--env->active == 0 && env->on_idle)
		env->on_idle(env);
}

static int side_of(struct px_splice *sp, struct bufferevent *bev)
{
	return bev == sp->b[1];
}

/* Side i's peer finished and everything reached side i: FIN side i. */
static void maybe_shut(struct px_splice *sp, int i)
{
	if (sp->shut[i] || !sp->eof[!i] || evbuffer_get_length(bufferevent_get_output(sp->b[i])))
		return;
	shutdown(bufferevent_getfd(sp->b[i]), SHUT_WR);
	sp->shut[i] = 1;
	if (sp->shut[0] && sp->shut[1])
		splice_free(sp, 0, NULL);
}

static void sp_event(struct bufferevent *bev, short what, void *arg);

/* Move what side i read to the other side's output; stop reading side i
 * while that output is above HIWAT. */
static void sp_move(struct px_splice *sp, int i)
{
	struct bufferevent *bev = sp->b[i], *o = sp->b[!i];
	struct evbuffer *in = bufferevent_get_input(bev);
	sp->bytes[i] += evbuffer_get_length(in);
	evbuffer_add_buffer(bufferevent_get_output(o), in);
	if (evbuffer_get_length(bufferevent_get_output(o)) >= HIWAT)
		bufferevent_disable(bev, EV_READ);
}

static void sp_read(struct bufferevent *bev, void *arg)
{
	if (px_bev_fill(bev, READ_CHUNK)) {
		sp_event(bev, BEV_EVENT_READING | BEV_EVENT_ERROR, arg);
		return;
	}
	sp_move(arg, side_of(arg, bev));
}

static void sp_write(struct bufferevent *bev, void *arg)
{
	struct px_splice *sp = arg;
	int i = side_of(sp, bev);
	if (!sp->eof[!i])
		bufferevent_enable(sp->b[!i], EV_READ);
	maybe_shut(sp, i);
}

static void sp_event(struct bufferevent *bev, short what, void *arg)
{
	struct px_splice *sp = arg;
	int i = side_of(sp, bev);
	if (what & BEV_EVENT_CONNECTED) {
		bufferevent_enable(bev, EV_READ | EV_WRITE);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		sp_move(sp, i);
		sp->eof[i] = 1;
		bufferevent_disable(bev, EV_READ);
		bufferevent_setwatermark(sp->b[!i], EV_WRITE, 0, 0);
		maybe_shut(sp, !i);
		return;
	}
	char why[160];
	snprintf(why, sizeof why, "%s side: %s", i ? "target" : "client",
		 evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	splice_free(sp, 1, why);
}

int px_splice_new(struct px_relay_env *env, struct bufferevent *a, struct bufferevent *b, const char *src,
		  const char *dst)
{
	struct px_splice *sp = calloc(1, sizeof *sp);
	if (!sp) {
		bufferevent_free(a);
		bufferevent_free(b);
		return -1;
	}
	env->active++;
	sp->env = env;
	sp->b[0] = a;
	sp->b[1] = b;
	snprintf(sp->name, sizeof sp->name, "%s -> %s", src, dst);
	sp->bytes[0] = evbuffer_get_length(bufferevent_get_output(b)); /* the client's, read before */
	for (int i = 0; i < 2; i++) {
		bufferevent_setcb(sp->b[i], sp_read, sp_write, sp_event, sp);
		bufferevent_setwatermark(sp->b[i], EV_WRITE, LOWAT, 0);
		bufferevent_set_max_single_write(sp->b[i], READ_CHUNK); /* default: 16 KiB a write */
	}
	bufferevent_enable(a, EV_READ | EV_WRITE);
	bufferevent_enable(b, EV_READ | EV_WRITE); /* fine while b still connects */
	log_info("open %s (direct)", sp->name);
	return 0;
}
