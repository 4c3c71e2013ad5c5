/* coder.c: an event loop's coding thread (see coder.h).  Jobs wait in a
 * FIFO under one mutex; a finished job moves to the `done` list and the
 * loop's event runs its `done` callback (event_active is thread-safe: the
 * daemons enable libevent's pthreads support before creating any base). */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

#include <event2/event.h>

#include "coder.h"
#include "log.h"

struct px_coder {
	pthread_mutex_t mu;
	pthread_cond_t work;    /* a job was queued, or stop */
	pthread_cond_t ran;     /* a job finished running */
	struct px_coder_job *head, *tail; /* queued, FIFO */
	struct px_coder_job *done;        /* finished, for the loop (any order) */
	struct px_coder_job *running;
	struct event *ev;       /* on the loop: deliver `done` */
	pthread_t t;
	int stop;
};

/* Unlinks j from the singly linked list at *p; 1 if it was there. */
static int unlink_job(struct px_coder_job **p, struct px_coder_job **tail, struct px_coder_job *j)
{
	struct px_coder_job *prev = NULL;
	for (; *p; prev = *p, p = &(*p)->next) {
		if (*p != j)
			continue;
		*p = j->next;
		if (tail && *tail == j)
			*tail = prev;
		j->next = NULL;
		return 1;
	}
	return 0;
}

static void *coder_main(void *arg)
{
	struct px_coder *c = arg;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->head && !c->stop)
			pthread_cond_wait(&c->work, &c->mu);
		if (c->stop)
			break;
		struct px_coder_job *j = c->head;
		unlink_job(&c->head, &c->tail, j);
		j->state = PX_CJ_RUNNING;
		c->running = j;
		pthread_mutex_unlock(&c->mu);
		j->run(j);
		pthread_mutex_lock(&c->mu);
		c->running = NULL;
		j->state = PX_CJ_DONE;
		j->next = c->done;
		c->done = j;
		pthread_cond_broadcast(&c->ran);
		event_active(c->ev, EV_TIMEOUT, 0);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* On the loop: run `done` for the jobs finished so far, one at a time (a
 * done call may cancel another finished job: its relay freed, say); jobs
 * that finish meanwhile come with the next activation. */
static void deliver_cb(evutil_socket_t fd, short what, void *arg)
{
	struct px_coder *c = arg;
	pthread_mutex_lock(&c->mu);
	size_t n = 0;
	for (struct px_coder_job *k = c->done; k; k = k->next)
		n++;
	while (n-- && c->done) {
		struct px_coder_job *j = c->done;
		c->done = j->next;
		j->next = NULL;
		j->state = PX_CJ_IDLE;
		pthread_mutex_unlock(&c->mu);
		j->done(j); /* may submit j again */
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
}

struct px_coder *px_coder_new(struct event_base *base)
{
	struct px_coder *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->work, NULL);
	pthread_cond_init(&c->ran, NULL);
	if (!(c->ev = event_new(base, -1, 0, deliver_cb, c)) || pthread_create(&c->t, NULL, coder_main, c)) {
		if (c->ev)
			event_free(c->ev);
		pthread_cond_destroy(&c->ran);
		pthread_cond_destroy(&c->work);
		pthread_mutex_destroy(&c->mu);
		free(c);
		return NULL;
	}
	return c;
}

int px_coder_submit(struct px_coder *c, struct px_coder_job *j)
{
	pthread_mutex_lock(&c->mu);
	if (j->state != PX_CJ_IDLE) {
		pthread_mutex_unlock(&c->mu);
		return -1;
	}
	j->next = NULL;
	j->state = PX_CJ_QUEUED;
	if (c->tail)
		c->tail->next = j;
	else
		c->head = j;
	c->tail = j;
	pthread_cond_signal(&c->work);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

int px_coder_cancel(struct px_coder *c, struct px_coder_job *j)
{
	int ran = 0;
	pthread_mutex_lock(&c->mu);
	if (j->state == PX_CJ_QUEUED) {
		unlink_job(&c->head, &c->tail, j);
	} else if (j->state == PX_CJ_RUNNING || j->state == PX_CJ_DONE) {
		while (j->state == PX_CJ_RUNNING)
			pthread_cond_wait(&c->ran, &c->mu);
		unlink_job(&c->done, NULL, j);
		ran = 1;
	}
	j->state = PX_CJ_IDLE;
	pthread_mutex_unlock(&c->mu);
	return ran;
}

void px_coder_free(struct px_coder *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	if (c->head || c->running || c->done)
		log_error("coder: freed with jobs outstanding"); /* a bug: they are dropped */
	c->stop = 1;
	pthread_cond_signal(&c->work);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->t, NULL);
	event_free(c->ev);
	pthread_cond_destroy(&c->ran);
	pthread_cond_destroy(&c->work);
	pthread_mutex_destroy(&c->mu);
	free(c);
}
