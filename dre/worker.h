/* worker.h: a helper thread that runs a job on request, one run at a time and
 * in the order asked: what the threaded encoder and decoder use to overlap
 * work on consecutive frames.  Runs may be queued: the caller decides how many
 * it lets pile up (dre_worker_wait_below). */
#ifndef WANOPT_DRE_WORKER_H
#define WANOPT_DRE_WORKER_H

#include <pthread.h>

/* A job: 0 or an error code, which the worker keeps (the first one). */
typedef int (*dre_job_fn)(void *arg);

typedef struct dre_worker {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int running, stop;
	unsigned pending; /* runs asked for and not finished, the current one included */
	int err;          /* first job error; read by the job itself, or after wait */
	dre_job_fn job;
	void *arg;
} dre_worker;

/* Start the thread; 0 or DRE_ENOMEM. */
int dre_worker_start(dre_worker *w, dre_job_fn job, void *arg);
/* Ask for one more run of the job, after those already asked for. */
void dre_worker_kick(dre_worker *w);
/* Wait until fewer than n runs are pending (n >= 1); the sticky error, 0 if
 * never started. */
int dre_worker_wait_below(dre_worker *w, unsigned n);
/* Runs pending now (0 if never started): once 0, the job's effects are seen. */
unsigned dre_worker_pending(dre_worker *w);
/* Wait until no run is pending; the sticky error, 0 if never started. */
int dre_worker_wait(dre_worker *w);
/* Finish every pending run and end the thread; accepts a never-started worker. */
void dre_worker_stop(dre_worker *w);

#endif
