/* worker.h: a helper thread that runs one job at a time on request: what the
 * threaded encoder and decoder use to overlap work on consecutive frames. */
#ifndef WANOPT_DRE_WORKER_H
#define WANOPT_DRE_WORKER_H

#include <pthread.h>

/* A job: 0 or an error code, which the worker keeps (the first one). */
typedef int (*dre_job_fn)(void *arg);

typedef struct dre_worker {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int running, busy, stop;
	int err;          /* first job error; read by the job itself, or after wait */
	dre_job_fn job;
	void *arg;
} dre_worker;

/* Start the thread; 0 or DRE_ENOMEM. */
int dre_worker_start(dre_worker *w, dre_job_fn job, void *arg);
/* Run the job once more (the caller waited for the previous run). */
void dre_worker_kick(dre_worker *w);
/* Wait until the job is not running; the sticky error, 0 if never started. */
int dre_worker_wait(dre_worker *w);
/* Finish the running job and end the thread; accepts a never-started worker. */
void dre_worker_stop(dre_worker *w);

#endif
