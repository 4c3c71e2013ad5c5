/* test_coder.c: an event loop's coding thread (proxy/coder.h) with a real
 * libevent base and a real thread: jobs run in order off the loop, each
 * comes back once on the loop's thread, and a job taken back with
 * px_coder_cancel never comes back: dropped unrun while queued, waited for
 * while running, taken as is once finished. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <event2/thread.h>

#include "../proxy/coder.h"

struct tjob {
	struct px_coder_job cj; /* first */
	int id;
	pthread_t ran_on, done_on;
	int runs, dones;
	int hold;              /* run waits on `go` first */
	int again;             /* done submits it again this many times */
	struct px_coder *c;
};

static sem_t go, started;
static int order[16], norder;
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;

static void trun(struct px_coder_job *cj)
{
	struct tjob *j = (struct tjob *)cj;
	if (j->hold) {
		sem_post(&started);
		sem_wait(&go);
	}
	j->ran_on = pthread_self();
	__atomic_fetch_add(&j->runs, 1, __ATOMIC_SEQ_CST); /* the test polls it */
	pthread_mutex_lock(&order_mu);
	order[norder++ % 16] = j->id;
	pthread_mutex_unlock(&order_mu);
}

static void tdone(struct px_coder_job *cj)
{
	struct tjob *j = (struct tjob *)cj;
	j->done_on = pthread_self();
	j->dones++;
	if (j->again-- > 0)
		assert_int_equal(px_coder_submit(j->c, &j->cj), 0);
}

static void job_setup(struct tjob *j, struct px_coder *c, int id)
{
	memset(j, 0, sizeof *j);
	j->cj.run = trun;
	j->cj.done = tdone;
	j->id = id;
	j->c = c;
}

/* Runs base's loop until every job in js has come back `want` times (or 5 s). */
static void loop_until(struct event_base *base, struct tjob *js, int n, int want)
{
	for (int t = 0; t < 5000; t++) {
		int all = 1;
		for (int i = 0; i < n; i++)
			all &= js[i].dones >= want;
		if (all)
			return;
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	fail_msg("jobs did not come back");
}

static int setup(void **state)
{
	evthread_use_pthreads();
	sem_init(&go, 0, 0);
	sem_init(&started, 0, 0);
	*state = event_base_new();
	return *state ? 0 : -1;
}

static int teardown(void **state)
{
	event_base_free(*state);
	return 0;
}

/* Jobs run in the order given, on another thread; each comes back once,
 * on the loop's; a done call may submit its job again. */
static void test_order(void **state)
{
	struct event_base *base = *state;
	struct px_coder *c = px_coder_new(base);
	assert_non_null(c);
	struct tjob js[5];
	norder = 0;
	for (int i = 0; i < 5; i++) {
		job_setup(&js[i], c, i);
		assert_int_equal(px_coder_submit(c, &js[i].cj), 0);
	}
	js[4].again = 2;
	assert_int_equal(px_coder_submit(c, &js[0].cj), -1); /* not idle */
	loop_until(base, js, 4, 1);
	loop_until(base, js + 4, 1, 3);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(order[i], i);
		assert_false(pthread_equal(js[i].ran_on, pthread_self()));
		assert_true(pthread_equal(js[i].done_on, pthread_self()));
		assert_int_equal(js[i].runs, i == 4 ? 3 : 1);
		assert_int_equal(js[i].dones, i == 4 ? 3 : 1);
		assert_int_equal(js[i].cj.state, PX_CJ_IDLE);
	}
	px_coder_free(c);
}

/* Cancel: a queued job is dropped unrun (0), a running one waited for (1),
 * a finished one taken before the loop saw it (1); none comes back. */
static void test_cancel(void **state)
{
	struct event_base *base = *state;
	struct px_coder *c = px_coder_new(base);
	struct tjob run, queued, fin, later;
	job_setup(&run, c, 1);
	job_setup(&queued, c, 2);
	job_setup(&fin, c, 3);
	job_setup(&later, c, 4);
	run.hold = 1;
	assert_int_equal(px_coder_submit(c, &run.cj), 0);
	assert_int_equal(px_coder_submit(c, &queued.cj), 0);
	assert_int_equal(px_coder_submit(c, &fin.cj), 0);
	sem_wait(&started); /* `run` is running, held */
	assert_int_equal(run.cj.state, PX_CJ_RUNNING);
	assert_int_equal(px_coder_cancel(c, &queued.cj), 0);
	assert_int_equal(queued.cj.state, PX_CJ_IDLE);
	sem_post(&go);
	assert_int_equal(px_coder_cancel(c, &run.cj), 1); /* waits for it */
	assert_int_equal(run.runs, 1);
	for (int t = 0; t < 5000 && !__atomic_load_n(&fin.runs, __ATOMIC_SEQ_CST); t++)
		usleep(1000);
	assert_int_equal(__atomic_load_n(&fin.runs, __ATOMIC_SEQ_CST), 1);
	assert_int_equal(px_coder_cancel(c, &fin.cj), 1);
	assert_int_equal(px_coder_cancel(c, &fin.cj), 0); /* idle now */
	assert_int_equal(px_coder_submit(c, &later.cj), 0);
	loop_until(base, &later, 1, 1);
	assert_int_equal(queued.runs, 0);
	assert_int_equal(run.dones + queued.dones + fin.dones, 0);
	/* a cancelled job can be given again */
	assert_int_equal(px_coder_submit(c, &queued.cj), 0);
	loop_until(base, &queued, 1, 1);
	assert_int_equal(queued.runs, 1);
	px_coder_free(c);
	px_coder_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_cancel),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
