/* test_relay_job.c: a slow link's bulk coded on the coding thread
 * (proxy/relay_job.c), on a real socket, a real encoder and a real coder
 * thread: which pumps hand over (a bulk waiting, a link of up to 20 Mbit/s),
 * that a job starts only when all the input libevent already read fits the
 * stream's room (else the job would read the socket's next bytes ahead of
 * it), that a job's output decodes to that input, then the socket's
 * bytes, in order, and that what a job reads joins the copy of a stream's
 * first bytes kept for a refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/thread.h>

#include "../proxy/relay_int.h"
#include "relay_util.h"
#include "stats.h"

struct fix {
	struct event_base *base;
	struct stats *st;
	struct px_relay_env env;
	struct px_relay r;
	int peer;                 /* the client's end of the LAN socket */
};

static int setup(void **state)
{
	evthread_use_pthreads();
	struct fix *f = calloc(1, sizeof *f);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	f->base = event_base_new();
	f->st = stats_create("edge");
	f->env = (struct px_relay_env){ .base = f->base, .stats = f->st };
	f->r.env = &f->env;
	f->r.bev = bufferevent_socket_new(f->base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	f->r.link_bps = 1544000;
	f->r.direct = DIRECT_MIN;
	dre_enc_opts o = { .no_dedup = 1, .link_bps = f->r.link_bps, .frame_lit_max = FRAME_MAX_SLOW };
	f->r.enc = dre_enc_new(NULL, &o);
	f->r.st = stats_stream_open(f->st, "client", "server", "lz");
	f->peer = sv[1];
	assert_non_null(f->r.bev);
	assert_non_null(f->r.enc);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	px_relay_job_drop(&f->r);
	px_relay_first_drop(&f->r);
	px_relay_env_close(&f->env);
	dre_enc_free(f->r.enc);
	bufferevent_free(f->r.bev);
	stats_stream_close(f->r.st);
	stats_free(f->st);
	close(f->peer);
	event_base_free(f->base);
	free(f);
	return 0;
}

/* What libevent's read would have put in the socket's input buffer (whose
 * end is frozen outside its reads). */
static void read_in(struct evbuffer *in, const void *p, size_t n)
{
	evbuffer_unfreeze(in, 0);
	assert_int_equal(evbuffer_add(in, p, n), 0);
	evbuffer_freeze(in, 0);
}

/* A bulk waiting (in `in` or the socket) on a link of up to 20 Mbit/s. */
static void test_wanted(void **state)
{
	struct fix *f = *state;
	struct evbuffer *in = bufferevent_get_input(f->r.bev);
	assert_false(px_relay_job_wanted(&f->r, in)); /* nothing waits */
	uint8_t *p = t_pattern(3000, 1);
	assert_int_equal(write(f->peer, p, 1000), 1000);
	assert_false(px_relay_job_wanted(&f->r, in)); /* a short message */
	read_in(in, p, 1500);
	assert_true(px_relay_job_wanted(&f->r, in)); /* 1000 + 1500 */
	f->r.link_bps = 100000000;
	assert_false(px_relay_job_wanted(&f->r, in)); /* zstd 3: on the loop */
	f->r.link_bps = 20000000;
	assert_true(px_relay_job_wanted(&f->r, in));
	f->r.lan_eof = 1;
	assert_false(px_relay_job_wanted(&f->r, in));
	free(p);
}

/* Encoder output collected on the test's thread. */
struct sink {
	uint8_t *p;
	size_t n;
};

static int sink_out(void *arg, const void *buf, size_t len)
{
	struct sink *s = arg;
	s->p = realloc(s->p, s->n + len);
	memcpy(s->p + s->n, buf, len);
	s->n += len;
	return 0;
}

static int back;

static void job_back(struct px_coder_job *cj)
{
	back = 1;
}

/* Wait until the job started is back: its return on the loop, without the
 * relay's (no stream here). */
static void wait_job(struct fix *f)
{
	back = 0;
	f->r.job.cj.done = job_back;
	for (int t = 0; t < 5000 && !back; t++) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	assert_true(back);
	f->r.coding = 0;
}

/* Run a job of the fixture's relay over `in` (all of it) and the socket,
 * until it is back. */
static void run_job(struct fix *f, struct evbuffer *in)
{
	assert_int_equal(px_relay_job_start(&f->r, in, 1 << 20), 1);
	wait_job(f);
}

/* Input beyond the room: no job, nothing taken.  Within it: the job takes
 * all of `in`, then reads the socket; its output, and the encoder's rest,
 * decode to both in order. */
static void test_order(void **state)
{
	struct fix *f = *state;
	struct evbuffer *in = bufferevent_get_input(f->r.bev);
	enum { IN = 5000, SOCK = 40000 };
	uint8_t *a = t_pattern(IN, 2), *b = t_pattern(SOCK, 3);
	read_in(in, a, IN);
	assert_int_equal(write(f->peer, b, SOCK), SOCK);
	assert_int_equal(px_relay_job_start(&f->r, in, IN - 1), 0);
	assert_int_equal(evbuffer_get_length(in), IN);
	assert_false(f->r.coding);
	assert_int_equal(px_relay_job_start(&f->r, in, 1 << 20), 1);
	assert_true(f->r.coding);
	assert_int_equal(evbuffer_get_length(in), 0);
	wait_job(f);
	struct px_relay_job *j = &f->r.job;
	assert_int_equal(j->rc, 0);
	assert_int_equal(j->pre, IN);
	assert_int_equal(j->got, SOCK);
	struct sink enc = { 0 }, dec = { 0 };
	sink_out(&enc, j->out, j->out_len);
	assert_int_equal(dre_enc_end(f->r.enc, sink_out, &enc), 0);
	dre_dec *d = dre_dec_new(NULL);
	assert_int_equal(dre_dec_write(d, enc.p, enc.n, sink_out, &dec), 0);
	assert_int_equal(dre_dec_finish(d), 0);
	assert_int_equal(dec.n, IN + SOCK);
	assert_memory_equal(dec.p, a, IN);
	assert_memory_equal(dec.p + IN, b, SOCK);
	dre_dec_free(d);
	free(enc.p);
	free(dec.p);
	free(a);
	free(b);
}

/* A relay keeping its first bytes (px_relay_keep_first) still codes a slow
 * link's bulk on the coder thread, and the copy gets what libevent had read
 * then what the job read, in order; past the limit it is dropped. */
static void test_first_copy(void **state)
{
	struct fix *f = *state;
	struct evbuffer *in = bufferevent_get_input(f->r.bev);
	enum { IN = 5000, SOCK = 40000 };
	uint8_t *a = t_pattern(IN, 4), *b = t_pattern(SOCK, 5);
	struct sockaddr_in to = { .sin_family = AF_INET };
	px_relay_keep_first(&f->r, (struct sockaddr *)&to, sizeof to);
	px_relay_first_add(&f->r, "GET", 3);
	read_in(in, a, IN);
	assert_int_equal(write(f->peer, b, SOCK), SOCK);
	assert_true(px_relay_job_wanted(&f->r, in));
	run_job(f, in);
	assert_int_equal(f->r.job.got, SOCK);
	px_relay_job_copy_back(&f->r);
	assert_non_null(f->r.first);
	assert_int_equal(evbuffer_get_length(f->r.first), 3 + IN + SOCK);
	const uint8_t *p = evbuffer_pullup(f->r.first, -1);
	assert_memory_equal(p, "GET", 3);
	assert_memory_equal(p + 3, a, IN);
	assert_memory_equal(p + 3 + IN, b, SOCK);
	/* the next job's bytes would pass the limit: the copy goes */
	uint8_t *c = t_pattern(PX_RELAY_FIRST_MAX - 3 - IN - SOCK, 6);
	px_relay_first_add(&f->r, c, PX_RELAY_FIRST_MAX - 3 - IN - SOCK);
	assert_non_null(f->r.first);
	assert_int_equal(write(f->peer, b, SOCK), SOCK);
	run_job(f, in);
	px_relay_job_copy_back(&f->r);
	assert_null(f->r.first);
	free(a);
	free(b);
	free(c);
}

/* A refusal while a job runs takes the job back at once: whatever it got
 * to read joins the copy after what libevent had read, the rest stays in
 * the socket, nothing is lost or doubled. */
static void test_first_take_back(void **state)
{
	struct fix *f = *state;
	struct evbuffer *in = bufferevent_get_input(f->r.bev);
	enum { IN = 5000, SOCK = 40000 };
	uint8_t *a = t_pattern(IN, 7), *b = t_pattern(SOCK, 8), *rest = malloc(SOCK);
	struct sockaddr_in to = { .sin_family = AF_INET };
	px_relay_keep_first(&f->r, (struct sockaddr *)&to, sizeof to);
	read_in(in, a, IN);
	assert_int_equal(write(f->peer, b, SOCK), SOCK);
	assert_int_equal(px_relay_job_start(&f->r, in, 1 << 20), 1);
	px_relay_job_take_back(&f->r);
	assert_false(f->r.coding);
	size_t got = f->r.job.got; /* 0 if it was taken back before it ran */
	assert_int_equal(evbuffer_get_length(f->r.first), IN + got);
	const uint8_t *p = evbuffer_pullup(f->r.first, -1);
	assert_memory_equal(p, a, IN);
	assert_memory_equal(p + IN, b, got);
	ssize_t n = read(bufferevent_getfd(f->r.bev), rest, SOCK);
	assert_int_equal(got + (size_t)(n > 0 ? n : 0), SOCK);
	if (n > 0)
		assert_memory_equal(rest, b + got, (size_t)n);
	free(a);
	free(b);
	free(rest);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_wanted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_first_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_first_take_back, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
