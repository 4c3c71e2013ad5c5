/* coder.h: an event loop's coding thread.
 *
 * A slow link's streams code new data with a high zstd level: 16 KiB at
 * level 16 takes about 16 ms; on the event loop that holds every other
 * stream of the loop (an interactive session's messages, keepalives) as
 * long.  A px_coder runs such work on a thread of
 * its own, one job at a time in the order given, and hands each finished
 * job back to its event loop's thread.
 *
 * A job is owned by the coder from px_coder_submit until its `done` runs (on
 * the loop's thread) or px_coder_cancel returns; meanwhile the caller must
 * not touch what `run` uses.  Submit, cancel and free on the loop's thread. */
#ifndef WANOPT_CODER_H
#define WANOPT_CODER_H

struct event_base;
struct px_coder;

struct px_coder_job {
	struct px_coder_job *next;
	void (*run)(struct px_coder_job *j);  /* on the coder's thread */
	void (*done)(struct px_coder_job *j); /* then on the loop's thread */
	int state;                            /* PX_CJ_* (the coder's) */
};

enum { PX_CJ_IDLE, PX_CJ_QUEUED, PX_CJ_RUNNING, PX_CJ_DONE };

/* A coder whose finished jobs come back on base's loop; NULL when out of
 * memory or threads. */
struct px_coder *px_coder_new(struct event_base *base);
/* Queue j (IDLE, run and done set); 0, or -1 when it cannot be queued. */
int px_coder_submit(struct px_coder *c, struct px_coder_job *j);
/* Take j back without its done call: a queued job is dropped unrun (0), a
 * running one waited for (1: it ran), a finished one taken as is (1); IDLE:
 * 0.  j is IDLE afterwards. */
int px_coder_cancel(struct px_coder *c, struct px_coder_job *j);
/* Stop the thread and free; every job must be IDLE.  NULL is fine. */
void px_coder_free(struct px_coder *c);

#endif
