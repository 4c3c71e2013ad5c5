/*
 * warm.c: pre-positioning.  `wanopt warm --stats=HOST:PORT FILE...` asks the
 * proxy serving that stats address (POST /warm, one absolute path per line) to
 * push the files' chunks through the tunnel into its peers' stores: each file
 * goes as a stream flagged PROTO_OPEN_F_WARM, through a relay whose LAN side is
 * a bufferevent pair fed from the file; the peer decodes into its store and
 * delivers nothing.  The HTTP answer comes when every push has ended.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "evmem.h"
#include "log.h"
#include "stats.h"
#include "warm.h"

#define FEED_CHUNK (256u << 10)
#define FEED_HIWAT (1u << 20)
#define WARM_BODY_MAX (1u << 20) /* the POSTed list of paths */
#define WARM_ERRS_MAX 8           /* failures the answer names (all are counted) */

/* One POST /warm: its files go to every worker's peers; the answer is sent
 * from the HTTP server's thread once the last push ended. */
struct warm_job {
	struct evhttp_request *req;
	struct event_base *http_base;
	atomic_uint pending, started, failed;
	atomic_ullong bytes;
	char **paths;
	size_t npaths;
	pthread_mutex_t mu; /* the workers' threads name failures */
	char err[WARM_ERRS_MAX][320];
	unsigned nerr;
};

/* A job handed to one worker's thread. */
struct warm_post {
	struct px_warm *w;
	struct warm_job *j;
};

/* One file pushed to one peer: feeds the pair end the relay does not own.
 * A pair hands what is written to it straight to the other end's input
 * while that end reads, so what is queued is counted on both ends (`in`, the
 * relay's input, with a callback as the relay takes from it). */
struct warm_feed {
	struct warm_job *job;
	struct bufferevent *b;
	struct evbuffer *in;          /* the relay's end's input: valid while the pair has its partner */
	struct evbuffer_cb_entry *cb; /* on in: the relay took some */
	struct event *kick;           /* runs feed_more from the loop */
	int fd;
	uint64_t bytes;
	const char *path; /* the job's */
};

/* Count a file that was not (wholly) pushed and say why, also in the log
 * (any thread). */
static void job_fail(struct warm_job *j, const char *path, const char *why)
{
	log_warn("warm: %s: %s", path, why);
	atomic_fetch_add(&j->failed, 1);
	pthread_mutex_lock(&j->mu);
	if (j->nerr < WARM_ERRS_MAX)
		snprintf(j->err[j->nerr++], sizeof j->err[0], "%s: %s", path, why);
	pthread_mutex_unlock(&j->mu);
}

/* The answer's body: {"streams":N,"failed":N,"bytes":N[,"errors":[...]]}. */
static char *job_body(struct warm_job *j, unsigned started, unsigned failed)
{
	char *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);
	if (!f)
		return NULL;
	fprintf(f, "{\"streams\":%u,\"failed\":%u,\"bytes\":%llu", started, failed,
		(unsigned long long)atomic_load(&j->bytes));
	for (unsigned i = 0; i < j->nerr; i++) {
		fputs(i ? "\",\"" : ",\"errors\":[\"", f);
		stats_escape(f, j->err[i], 1);
	}
	fputs(j->nerr ? "\"]}\n" : "}\n", f);
	return fclose(f) ? (free(body), NULL) : body;
}

/* On the HTTP thread: answer and free the job. */
static void job_done(evutil_socket_t fd, short what, void *arg)
{
	struct warm_job *j = arg;
	struct evbuffer *out = evbuffer_new();
	unsigned failed = atomic_load(&j->failed), started = atomic_load(&j->started);
	if (!started && !failed) { /* nothing could be pushed: no peer */
		failed = 1;
		snprintf(j->err[j->nerr++], sizeof j->err[0], "no peer: the tunnel is down");
	}
	char *body = job_body(j, started, failed);
	if (out && body) {
		evhttp_add_header(evhttp_request_get_output_headers(j->req), "Content-Type", "application/json");
		evbuffer_add(out, body, strlen(body));
		evhttp_send_reply(j->req, failed ? 500 : 200, failed ? "Incomplete" : "OK", out);
	} else {
		evhttp_send_error(j->req, 500, "out of memory");
	}
	if (out)
		evbuffer_free(out);
	free(body);
	pthread_mutex_destroy(&j->mu);
	for (size_t i = 0; i < j->npaths; i++)
		free(j->paths[i]);
	free(j->paths);
	free(j);
}

/* Drop one hold on the job; the last one schedules the answer. */
static void job_release(struct warm_job *j)
{
	if (atomic_fetch_sub(&j->pending, 1) == 1)
		event_base_once(j->http_base, -1, EV_TIMEOUT, job_done, j, NULL);
}

static void feed_free(struct warm_feed *f, int ok)
{
	struct warm_job *j = f->job;
	if (f->fd >= 0)
		close(f->fd);
	if (f->in && bufferevent_pair_get_partner(f->b))
		evbuffer_remove_cb_entry(f->in, f->cb);
	if (f->kick)
		event_free(f->kick);
	bufferevent_free(f->b);
	atomic_fetch_add(&j->bytes, f->bytes);
	if (!ok)
		job_fail(j, f->path, "the push ended early (the stream was reset, or the file could not be read)");
	free(f);
	job_release(j);
}

/* Bytes written to the pair that the relay has not taken yet. */
static size_t feed_queued(struct warm_feed *f)
{
	size_t q = evbuffer_get_length(bufferevent_get_output(f->b));
	if (f->in && bufferevent_pair_get_partner(f->b))
		q += evbuffer_get_length(f->in);
	return q;
}

/* Keep about FEED_HIWAT of the file queued; at its end, signal EOF. */
static void feed_more(struct bufferevent *b, void *arg)
{
	struct warm_feed *f = arg;
	while (f->fd >= 0 && feed_queued(f) < FEED_HIWAT) {
		char buf[64 << 10];
		ssize_t n = read(f->fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0)
				log_warn("warm: read failed: %s", strerror(errno));
			close(f->fd);
			f->fd = -1;
			bufferevent_flush(b, EV_WRITE, BEV_FINISHED);
			break;
		}
		f->bytes += (uint64_t)n;
		bufferevent_write(b, buf, (size_t)n);
	}
}

static void feed_kick(evutil_socket_t fd, short what, void *arg)
{
	struct warm_feed *f = arg;
	feed_more(f->b, f);
}

/* The relay took from its input: refill once half of FEED_HIWAT is left,
 * from the loop (not inside the relay's own drain). */
static void feed_taken(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
	struct warm_feed *f = arg;
	if (info->n_deleted && f->fd >= 0 && info->orig_size - info->n_deleted + info->n_added < FEED_HIWAT / 2)
		event_active(f->kick, EV_TIMEOUT, 0);
}

/* The relay let go of its end: EOF once the peer acknowledged everything,
 * ERROR if the stream was reset.  Clean if all was read and delivered. */
static void feed_event(struct bufferevent *b, short what, void *arg)
{
	struct warm_feed *f = arg;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		feed_free(f, !(what & BEV_EVENT_ERROR) && f->fd < 0);
}

static void feed_read(struct bufferevent *b, void *arg)
{
	evbuffer_drain(bufferevent_get_input(b), evbuffer_get_length(bufferevent_get_input(b)));
}

/* Start pushing path to every peer; counts streams into job. */
static void warm_file(struct px_warm *w, struct warm_job *j, const char *path)
{
	int n = w->npeers(w->arg);
	for (int i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
			/* a device (/dev/zero), a FIFO or a directory: no end, or no data */
			job_fail(j, path, fd < 0 ? strerror(errno) : "not a regular file");
			if (fd >= 0)
				close(fd);
			return;
		}
		struct bufferevent *pair[2];
		if (bufferevent_pair_new(w->env->base, 0, pair)) {
			close(fd);
			job_fail(j, path, "out of memory");
			return;
		}
		struct px_relay *r = px_relay_new(w->env, pair[0], NULL, PROTO_POLICY_FULL, "warm", path, 0);
		if (!r) {
			bufferevent_free(pair[1]);
			close(fd);
			job_fail(j, path, "out of memory");
			return;
		}
		px_relay_opened(r, 0);
		px_relay_set_warm(r);
		tun_open_info oi = { .policy = PROTO_POLICY_FULL, .flags = PROTO_OPEN_F_WARM };
		tun_target_parse(&oi.target, "warm", 9);
		int err = 0;
		tun_stream *s = w->open(w->arg, i, &oi, &px_relay_stream_cbs, r, &err);
		if (!s) {
			bufferevent_free(pair[1]);
			close(fd);
			px_relay_fail(r, PROTO_RST_INTERNAL, tun_strerror(err));
			job_fail(j, path, tun_strerror(err));
			continue;
		}
		px_relay_attach(r, s);
		struct warm_feed *f = calloc(1, sizeof *f);
		if (!f) {
			bufferevent_free(pair[1]);
			close(fd);
			job_fail(j, path, "out of memory");
			continue;
		}
		f->job = j;
		f->path = path;
		f->b = pair[1];
		f->fd = fd;
		f->in = bufferevent_get_input(pair[0]);
		if (!(f->kick = event_new(w->env->base, -1, 0, feed_kick, f)) ||
		    !(f->cb = evbuffer_add_cb(f->in, feed_taken, f))) {
			if (f->kick)
				event_free(f->kick);
			free(f);
			bufferevent_free(pair[1]);
			close(fd);
			job_fail(j, path, "out of memory");
			continue;
		}
		atomic_fetch_add(&j->pending, 1);
		atomic_fetch_add(&j->started, 1);
		bufferevent_setcb(pair[1], feed_read, feed_more, feed_event, f);
		bufferevent_setwatermark(pair[1], EV_WRITE, FEED_HIWAT / 2, 0);
		bufferevent_enable(pair[1], EV_READ | EV_WRITE);
		feed_more(pair[1], f);
		log_info("warm: pushing %s to peer %d", path, i);
	}
}

/* On a worker's thread: push every file of the job to that worker's peers. */
static void warm_run(evutil_socket_t fd, short what, void *arg)
{
	struct warm_post *p = arg;
	for (size_t i = 0; i < p->j->npaths; i++)
		warm_file(p->w, p->j, p->j->paths[i]);
	job_release(p->j);
	free(p);
}

struct warm_server {
	struct px_warm **ws;
	int n;
	struct event_base *base;
};

/* 1 if the request comes from this host (a loopback address, IPv4, IPv6 or
 * IPv4-mapped); else 0, with the peer written into peer. */
static int warm_local_peer(struct evhttp_request *req, char *peer, size_t len)
{
	struct evhttp_connection *c = evhttp_request_get_connection(req);
	const struct sockaddr *sa = c ? evhttp_connection_get_addr(c) : NULL;
	snprintf(peer, len, "unknown peer");
	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, peer, (socklen_t)len);
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		inet_ntop(AF_INET6, a, peer, (socklen_t)len);
		return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return 0;
}

static void warm_http(struct evhttp_request *req, void *arg)
{
	struct warm_server *sv = arg;
	char peer[INET6_ADDRSTRLEN + 16];
	if (!warm_local_peer(req, peer, sizeof peer)) {
		/* the daemon reads files with its own rights: local callers only */
		log_warn("warm: request from %s refused: accepted from loopback only", peer);
		evhttp_send_error(req, 403, "warm is accepted from this host (loopback) only");
		return;
	}
	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		evhttp_send_error(req, 405, "POST a list of absolute paths, one per line");
		return;
	}
	struct warm_job *j = calloc(1, sizeof *j);
	if (!j) {
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	j->req = req;
	j->http_base = sv->base;
	pthread_mutex_init(&j->mu, NULL);
	atomic_init(&j->pending, 1); /* held while posting */
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	char *got;
	size_t n;
	evbuffer_add(in, "\n", 1); /* the last path may lack its newline */
	while ((got = evbuffer_readln(in, &n, EVBUFFER_EOL_ANY))) {
		/* libevent's allocation (evmem.h): copied onto the heap, as the job frees its paths */
		char *line = strndup(got, n);
		px_evmem_free(got);
		if (!line) {
			job_fail(j, "a path", "out of memory");
			continue;
		}
		char **np = realloc(j->paths, (j->npaths + 1) * sizeof *np);
		if (n && line[0] == '/' && np) {
			j->paths = np;
			j->paths[j->npaths++] = line;
			continue;
		}
		if (np)
			j->paths = np;
		if (n)
			job_fail(j, line, np ? "not an absolute path" : "out of memory");
		free(line);
	}
	for (int i = 0; i < sv->n; i++) {
		struct warm_post *p = malloc(sizeof *p);
		if (!p)
			continue;
		p->w = sv->ws[i];
		p->j = j;
		atomic_fetch_add(&j->pending, 1);
		if (event_base_once(p->w->env->base, -1, EV_TIMEOUT, warm_run, p, NULL)) {
			free(p);
			job_release(j);
		}
	}
	job_release(j);
}

int px_warm_serve(struct px_warm **ws, int n, struct event_base *http_base, struct stats_http *h)
{
	static struct warm_server sv; /* one per process: the stats server is */
	struct evhttp *http = stats_http_evhttp(h);
	if (!http)
		return 0; /* no stats address: nothing to serve warm on */
	/* the stats server alone takes only bodiless GET and HEAD */
	evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST);
	evhttp_set_max_body_size(http, WARM_BODY_MAX);
	sv.ws = ws;
	sv.n = n;
	sv.base = http_base;
	return evhttp_set_cb(http, "/warm", warm_http, &sv) ? -1 : 0;
}

/* Receiving side: discards what the sink relay delivers, and ends its own
 * direction at once (nothing goes back). */
static void sink_read(struct bufferevent *b, void *arg)
{
	evbuffer_drain(bufferevent_get_input(b), evbuffer_get_length(bufferevent_get_input(b)));
}

static void sink_event(struct bufferevent *b, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		bufferevent_free(b);
}

int px_warm_accept(struct px_relay_env *env, tun_stream *s, const char *peer)
{
	struct bufferevent *pair[2];
	if (bufferevent_pair_new(env->base, 0, pair)) {
		tun_stream_reset(s, PROTO_RST_INTERNAL);
		tun_stream_free(s);
		return -1;
	}
	bufferevent_setcb(pair[1], sink_read, NULL, sink_event, NULL);
	bufferevent_enable(pair[1], EV_READ | EV_WRITE);
	struct px_relay *r = px_relay_new(env, pair[0], s, PROTO_POLICY_FULL, peer, "warm (into the store)", 0);
	if (!r) {
		bufferevent_free(pair[1]);
		return -1;
	}
	px_relay_opened(r, 0);
	px_relay_set_warm(r);
	bufferevent_flush(pair[1], EV_WRITE, BEV_FINISHED);
	return 0;
}
