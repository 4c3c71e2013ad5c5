/* log.h: one line per event on stderr (the journal under systemd), with a level
 * threshold.  Safe from any thread: each line is a single write(2). */
#ifndef WANOPT_LOG_H
#define WANOPT_LOG_H

#include <pthread.h>
#include <stdint.h>

/* Levels, most severe first; a message is written when level <= threshold. */
enum log_level {
	LOGL_ERROR = 0, /* the daemon or a connection failed */
	LOGL_WARN  = 1, /* something is wrong but service continues (e.g. fail-open) */
	LOGL_INFO  = 2, /* one line per connection open/close, tunnel up/down (default) */
	LOGL_DEBUG = 3, /* protocol detail; costly */
};

/* Sets the threshold (default LOGL_INFO). */
void log_set_level(enum log_level level);
/* The current threshold. */
enum log_level log_get_level(void);
/* Parses "error", "warn", "info", "debug" into *out; 0 on success, -1 if unknown. */
int log_level_parse(const char *s, enum log_level *out);
/* The name of a level ("error", ...). */
const char *log_level_name(enum log_level level);
/* Sets the tag at the start of each line (e.g. "edge"); NULL or "" drops it.
 * The string is copied (up to 31 bytes). */
void log_set_ident(const char *ident);
/* Writes to fd instead of stderr (tests); -1 restores stderr. */
void log_set_fd(int fd);
/* True when messages at this level would be written. */
int log_enabled(enum log_level level);

/* Formats and writes one line (a trailing newline is added; embedded newlines
 * and control characters are escaped so one event stays one line). */
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* log_warn("%s", msg) with an argument to ignore: a report callback. */
void log_warn_cb(void *arg, const char *msg);

/* A budget of lines for a kind of event a peer can repeat at will: at most
 * `burst` in each window of `window_s` seconds, from any thread. */
struct log_limit {
	pthread_mutex_t mu;
	unsigned burst, window_s;
	uint64_t window_us; /* when the current window began (monotonic) */
	unsigned n, over;   /* lines asked for in it; of them, past the budget */
};
#define LOG_LIMIT_INIT(burst, window_s) { PTHREAD_MUTEX_INITIALIZER, (burst), (window_s), 0, 0, 0 }
/* 1 if one more line fits l's budget, else 0 (and it is counted); *missed
 * (may be NULL): the lines past the budget in a window that just ended. */
int log_limit_take(struct log_limit *l, unsigned *missed);

#define log_error(...) log_msg(LOGL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOGL_WARN, __VA_ARGS__)
#define log_info(...)  do { if (log_enabled(LOGL_INFO)) log_msg(LOGL_INFO, __VA_ARGS__); } while (0)
#define log_debug(...) do { if (log_enabled(LOGL_DEBUG)) log_msg(LOGL_DEBUG, __VA_ARGS__); } while (0)

#endif
