/*
 * relay_job.c: a slow link's bulk read and coded on the env's coder thread.
 *
 * On a link of up to DRE_LINK_MID_BPS the encoder codes new data with zstd
 * level 16 (up to 4 Mbit/s) or 9: on the event loop, 16 KiB at level 16 held
 * it about 16 ms, level 9's reads 15-18 ms, and every other stream of the
 * loop waited as long (an echo next to a download on the emulated T1 had its
 * request and reply each held 6-22 ms at the core).  So when such a stream
 * has a bulk of input waiting, its pump hands the reading and the coding to
 * the coder (coder.h): the job reads the LAN socket straight into the
 * encoder's buffer as pump_direct would, codes up to lz_max bytes of new data
 * or reads DIRECT_MAX, and collects the encoder's output; back on the loop,
 * the job's return sends that output and pumps again.  Meanwhile the relay
 * reads nothing from its socket, and what would touch the encoder waits:
 * an ACK is applied after, a flush or the end of the LAN side comes with the
 * next pump.  The peer's ASKs are answered by jobs too (a LEARN frame of up
 * to 256 KiB is coded at the same level), queued and run before the next
 * pump.  A short message is still coded on the loop at once: it costs
 * little, and would otherwise wait behind other streams' jobs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/util.h>

#include "log.h"
#include "relay_int.h"

#define JOB_MIN 2048             /* input waiting below this: code it on the loop */
#define JOB_LZ_MID (256u << 10)  /* new data per job at zstd 9 (about 5 ms of it) */

int px_relay_job_wanted(struct px_relay *r, struct evbuffer *in)
{
	int fd = bufferevent_getfd(r->bev), q = 0;
	if (!r->enc || !r->link_bps || r->link_bps > DRE_LINK_MID_BPS ||
	    r->lan_eof || r->connecting || fd < 0)
		return 0;
	size_t n = evbuffer_get_length(in);
	return n >= JOB_MIN || (ioctl(fd, FIONREAD, &q) == 0 && q > 0 && n + (size_t)q >= JOB_MIN);
}

static void learn_next(struct px_relay *r);

void px_relay_log_resent(const struct px_relay *r, uint64_t seq, const char *where)
{
	log_debug("%s -> %s: resent frame %llu%s%s", r->src, r->dst, (unsigned long long)(seq & ~DRE_ASK_FULL),
		  seq & DRE_ASK_FULL ? " in full" : "", where);
}

const char *px_relay_learn_failed(int rc)
{
	switch (rc) {
	case DRE_ESTATE:
		return "cannot resend a frame the peer lacks: no longer retained";
	case DRE_EMISS:
		return "cannot resend a frame the peer lacks: a chunk it referenced is gone from the store (evicted past"
		       " the pins' margin, or unreadable)";
	default:
		return "cannot resend a frame the peer lacks";
	}
}

/* The encoder's output sink inside a job (coder thread): appended to j->out. */
static int job_out(void *arg, const void *buf, size_t len)
{
	struct px_relay_job *j = arg;
	if (j->out_len + len > j->out_cap) {
		size_t cap = j->out_cap ? j->out_cap : 64u << 10;
		while (cap < j->out_len + len)
			cap *= 2;
		uint8_t *p = realloc(j->out, cap);
		if (!p)
			return -1;
		j->out = p;
		j->out_cap = cap;
	}
	memcpy(j->out + j->out_len, buf, len);
	j->out_len += len;
	return 0;
}

/* The job read n bytes at p (coder thread): into its copy of them while the
 * relay keeps its first bytes (px_relay_keep_first), up to the limit. */
static void job_copy(struct px_relay_job *j, const void *p, size_t n)
{
	if (!j->copy || j->copy_over)
		return;
	if (evbuffer_get_length(j->copy) + n > PX_RELAY_FIRST_MAX || evbuffer_add(j->copy, p, n))
		j->copy_over = 1;
}

/* The job, on the coder thread.  A LEARN: code the frame asked for.  Else
 * commit what the loop placed, then read and code until lz_max of new data,
 * room of output, DIRECT_MAX read, or an empty socket. */
static void job_run(struct px_coder_job *cj)
{
	struct px_relay_job *j = (struct px_relay_job *)cj;
	if (j->learn) {
		j->rc = dre_enc_learn(j->enc, j->learn, job_out, j);
		return;
	}
	if (j->pre && (j->rc = dre_enc_commit(j->enc, j->pre, job_out, j)))
		return; /* (the placed bytes first: nothing may come between) */
	uint64_t lz0 = px_relay_lz_in(j->enc);
	while (j->got < DIRECT_MAX && px_relay_lz_in(j->enc) - lz0 < j->lz_max) {
		if (j->out_len >= j->room)
			return; /* the next pump finds no room and waits for it */
		size_t want = j->room - j->out_len, space = 0;
		if (want > j->direct)
			want = j->direct;
		if (want > j->lz_max) /* one commit codes about a job's worth */
			want = j->lz_max;
		uint8_t *dst = dre_enc_space(j->enc, want, &space);
		if (!dst) {
			j->rc = DRE_ENOMEM;
			return;
		}
		ssize_t n = read(j->fd, dst, want);
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			j->err = errno;
		if (n <= 0)
			return; /* end of file: libevent's next read reports it */
		job_copy(j, dst, (size_t)n);
		if ((j->rc = dre_enc_commit(j->enc, (size_t)n, job_out, j)))
			return;
		j->got += (size_t)n;
		j->direct = px_relay_direct_next(j->direct, want, (size_t)n);
		if ((size_t)n < want)
			return; /* the socket is empty */
	}
	j->full = j->got >= DIRECT_MAX;
}

void px_relay_job_copy_back(struct px_relay *r)
{
	struct px_relay_job *j = &r->job;
	if (!j->copy)
		return;
	if (j->copy_over || (r->first && (evbuffer_add_buffer(r->first, j->copy) ||
					  evbuffer_get_length(r->first) > PX_RELAY_FIRST_MAX)))
		px_relay_first_drop(r);
	evbuffer_drain(j->copy, evbuffer_get_length(j->copy));
	j->copy_over = 0;
}

/* Apply a finished job on the loop: counters, output into the stream,
 * errors, a deferred ACK.  0, or -1 if r was released. */
static int job_apply(struct px_relay *r)
{
	struct px_relay_job *j = &r->job;
	r->coding = 0;
	r->direct = j->direct;
	px_relay_lan_took(r, j->got);
	px_relay_job_copy_back(r);
	size_t n = j->out_len;
	j->out_len = 0;
	if (n && px_relay_wan_out(r, j->out, n)) {
		px_relay_fail(r, PROTO_RST_INTERNAL, "tunnel write failed");
		return -1;
	}
	if (j->out_cap > (1u << 20)) { /* a burst's worth: give it back */
		free(j->out);
		j->out = NULL;
		j->out_cap = 0;
	}
	if (j->learn && j->rc) {
		px_relay_fail(r, PROTO_RST_CODEC, px_relay_learn_failed(j->rc));
		return -1;
	}
	if (j->rc || j->err) {
		px_relay_fail(r, j->rc ? PROTO_RST_INTERNAL : PROTO_RST_TARGET,
			      j->rc ? dre_strerror(j->rc) : evutil_socket_error_to_string(j->err));
		return -1;
	}
	if (j->learn)
		px_relay_log_resent(r, j->learn, " (coded on the coder thread)");
	if (j->full)
		px_lanbuf_fast(r, j->fd);
	if (r->ack_pending) {
		dre_enc_ack(r->enc, r->ack_pending);
		r->ack_pending = 0;
	}
	return 0;
}

/* The coder handed the job back (loop thread). */
static void job_done(struct px_coder_job *cj)
{
	struct px_relay *r = ((struct px_relay_job *)cj)->r;
	if (job_apply(r))
		return;
	if (r->nasks)
		learn_next(r); /* the peer waits on these: before more input */
	else
		px_relay_continue(r);
}

/* A job of r with nothing asked of it yet. */
static void job_init(struct px_relay *r)
{
	struct px_relay_job *j = &r->job;
	j->cj.run = job_run;
	j->cj.done = job_done;
	j->r = r;
	j->enc = r->enc;
	j->fd = bufferevent_getfd(r->bev);
	j->learn = 0;
	j->pre = j->room = j->lz_max = j->got = j->out_len = 0;
	j->direct = r->direct;
	j->rc = j->err = 0;
	j->full = 0;
}

/* Start a job answering the oldest queued ASK (r not coding). */
static void learn_next(struct px_relay *r)
{
	job_init(r);
	r->job.learn = r->asks[0];
	memmove(r->asks, r->asks + 1, --r->nasks * sizeof *r->asks);
	if (px_coder_submit(r->env->coder, &r->job.cj)) { /* not idle: cannot happen */
		px_relay_fail(r, PROTO_RST_INTERNAL, "coder job busy");
		return;
	}
	r->coding = 1;
	bufferevent_disable(r->bev, EV_READ);
}

int px_relay_job_ask(struct px_relay *r, uint64_t seq)
{
	if (!r->coding && !r->used_coder)
		return 0; /* a stream that never needed the coder answers at once */
	if (r->nasks == r->asks_cap) {
		size_t cap = r->asks_cap ? 2 * r->asks_cap : 8;
		uint64_t *a = realloc(r->asks, cap * sizeof *a);
		if (!a)
			return -1;
		r->asks = a;
		r->asks_cap = cap;
	}
	r->asks[r->nasks++] = seq;
	if (!r->coding)
		learn_next(r);
	return 1;
}

int px_relay_job_start(struct px_relay *r, struct evbuffer *in, size_t room)
{
	struct px_relay_env *env = r->env;
	if (!env->coder && !(env->coder = px_coder_new(env->base))) {
		log_warn("coder thread: cannot start one; slow links' bulk is coded on the event loop");
		return 0;
	}
	struct px_relay_job *j = &r->job;
	size_t pre = evbuffer_get_length(in), space = 0;
	if (pre > room)
		return 0; /* the job would read the socket's bytes before the rest of `in` */
	if (pre) {
		uint8_t *dst = dre_enc_space(r->enc, pre, &space);
		if (!dst || evbuffer_remove(in, dst, pre) != (int)pre)
			return -1;
		px_relay_first_add(r, dst, pre);
		px_relay_lan_took(r, pre);
	}
	if (!r->first && j->copy) { /* the peer took the stream: no more copies */
		evbuffer_free(j->copy);
		j->copy = NULL;
	} else if (r->first && !j->copy && !(j->copy = evbuffer_new())) {
		px_relay_first_drop(r); /* a refusal then resets the client, as without it */
	}
	job_init(r);
	j->pre = pre;
	j->room = room;
	j->lz_max = r->link_bps <= DRE_LINK_SLOW_BPS ? FRAME_MAX_SLOW : JOB_LZ_MID;
	if (px_coder_submit(env->coder, &j->cj)) /* not idle: cannot happen */
		return pre && dre_enc_commit(r->enc, pre, px_relay_wan_out, r) ? -1 : 0;
	r->coding = 1;
	bufferevent_disable(r->bev, EV_READ); /* the job reads the socket */
	if (!r->used_coder) {
		r->used_coder = 1;
		char lz[32];
		log_debug("%s -> %s: bulk coded on the coder thread (%s)", r->src, r->dst,
			  dre_enc_lz_name(r->enc, lz, sizeof lz));
	}
	return 1;
}

void px_relay_job_rest(struct px_relay *r)
{
	if (r->coding)
		return;
	free(r->job.out);
	r->job.out = NULL;
	r->job.out_cap = 0;
	if (r->job.copy)
		evbuffer_free(r->job.copy);
	r->job.copy = NULL;
	free(r->asks);
	r->asks = NULL;
	r->nasks = r->asks_cap = 0;
}

void px_relay_job_take_back(struct px_relay *r)
{
	if (!r->coding)
		return;
	int ran = r->env->coder ? px_coder_cancel(r->env->coder, &r->job.cj) : 0;
	r->coding = 0;
	if (ran && !r->job.learn) {
		px_relay_lan_took(r, r->job.got);
		px_relay_job_copy_back(r);
	}
	r->job.out_len = 0;
}

void px_relay_job_drop(struct px_relay *r)
{
	if (r->coding && r->env->coder) /* (no coder: freed at exit, its jobs dropped) */
		px_coder_cancel(r->env->coder, &r->job.cj);
	r->coding = 0;
	px_relay_job_rest(r);
}

void px_relay_env_close(struct px_relay_env *env)
{
	px_coder_free(env->coder);
	env->coder = NULL;
	px_store_drop(env->store);
	env->store = NULL;
}
