/* worker.c: the helper thread of worker.h. */
#include "dre_int.h"
#include "worker.h"

static void *worker_main(void *arg)
{
	dre_worker *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->pending && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->pending)
			break; /* stop, and nothing left to run */
		pthread_mutex_unlock(&w->mu);
		int rc = w->job(w->arg);
		pthread_mutex_lock(&w->mu);
		if (rc && !w->err)
			w->err = rc;
		w->pending--;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int dre_worker_start(dre_worker *w, dre_job_fn job, void *arg)
{
	if (w->running)
		return 0;
	w->job = job;
	w->arg = arg;
	w->pending = 0;
	w->stop = w->err = 0;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (pthread_create(&w->th, NULL, worker_main, w)) {
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		return DRE_ENOMEM;
	}
	w->running = 1;
	return 0;
}

void dre_worker_kick(dre_worker *w)
{
	pthread_mutex_lock(&w->mu);
	w->pending++;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int dre_worker_wait_below(dre_worker *w, unsigned n)
{
	if (!w->running)
		return 0;
	pthread_mutex_lock(&w->mu);
	while (w->pending >= n)
		pthread_cond_wait(&w->cv, &w->mu);
	int err = w->err;
	pthread_mutex_unlock(&w->mu);
	return err;
}

unsigned dre_worker_pending(dre_worker *w)
{
	if (!w->running)
		return 0;
	pthread_mutex_lock(&w->mu);
	unsigned n = w->pending;
	pthread_mutex_unlock(&w->mu);
	return n;
}

int dre_worker_wait(dre_worker *w)
{
	return dre_worker_wait_below(w, 1);
}

void dre_worker_stop(dre_worker *w)
{
	if (!w->running)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	w->running = 0;
}
