/* log.c: leveled one-line logging to stderr.  Under systemd (JOURNAL_STREAM
 * names our stderr) lines carry a "<N>" syslog priority prefix, which the
 * journal turns into the entry's priority, and no timestamp (the journal adds
 * one); elsewhere lines start with a UTC timestamp and the level name. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define LOG_LINE_MAX 2048

static _Atomic int log_level_cur = LOGL_INFO;
static _Atomic int log_fd = -1;
static _Atomic int log_journal = -1; /* -1 unknown, 0 no, 1 yes */
static char log_ident[32];

static const char *const log_names[] = { "error", "warn", "info", "debug" };
static const int log_syslog_prio[] = { 3, 4, 6, 7 };

/* Sets the threshold; out-of-range values are clamped. */
void log_set_level(enum log_level level)
{
	if ((int)level < LOGL_ERROR)
		level = LOGL_ERROR;
	if (level > LOGL_DEBUG)
		level = LOGL_DEBUG;
	atomic_store(&log_level_cur, (int)level);
}

/* Returns the threshold. */
enum log_level log_get_level(void)
{
	return (enum log_level)atomic_load(&log_level_cur);
}

/* Accepts the four level names (and "warning"); 0 on success. */
int log_level_parse(const char *s, enum log_level *out)
{
	for (int i = LOGL_ERROR; i <= LOGL_DEBUG; i++) {
		if (!strcmp(s, log_names[i])) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	if (!strcmp(s, "warning")) {
		*out = LOGL_WARN;
		return 0;
	}
	return -1;
}

/* Returns a static name; "?" for a value outside the enum. */
const char *log_level_name(enum log_level level)
{
	if ((int)level < LOGL_ERROR || level > LOGL_DEBUG)
		return "?";
	return log_names[level];
}

/* Copies ident (truncated); meant to be called once at startup. */
void log_set_ident(const char *ident)
{
	snprintf(log_ident, sizeof log_ident, "%s", ident ? ident : "");
}

/* Redirects output; -1 means stderr again.  Resets journal detection. */
void log_set_fd(int fd)
{
	atomic_store(&log_fd, fd);
	atomic_store(&log_journal, -1);
}

/* True when a message at level passes the threshold. */
int log_enabled(enum log_level level)
{
	return (int)level <= atomic_load(&log_level_cur);
}

/* True when fd is the stream systemd's JOURNAL_STREAM ("dev:ino") names. */
static int log_fd_is_journal(int fd)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(fd, &st) < 0)
		return 0;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* Appends s to buf at *len, escaping control characters, never past cap-2
 * (room for the newline). */
static void log_append_escaped(char *buf, size_t *len, size_t cap, const char *s)
{
	for (; *s && *len + 5 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c < 0x20 || c == 0x7f)
			*len += (size_t)snprintf(buf + *len, cap - *len, "\\x%02x", c);
		else
			buf[(*len)++] = (char)c;
	}
}

/* Writes the prefix (priority or timestamp, ident, level) into buf. */
static size_t log_prefix(char *buf, size_t cap, enum log_level level, int journal)
{
	const char *sep = log_ident[0] ? " " : "";
	if (journal)
		return (size_t)snprintf(buf, cap, "<%d>%s%s%s: ", log_syslog_prio[level],
					log_ident, sep, log_names[level]);
	struct timespec ts;
	struct tm tm;
	char when[32];
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
	return (size_t)snprintf(buf, cap, "%s.%03ldZ %s%s%s: ", when, ts.tv_nsec / 1000000L,
				log_ident, sep, log_names[level]);
}

void log_warn_cb(void *arg, const char *msg)
{
	(void)arg;
	log_msg(LOGL_WARN, "%s", msg);
}

/* Formats one event and writes it with a single write(2). */
void log_msg(enum log_level level, const char *fmt, ...)
{
	char msg[LOG_LINE_MAX], line[LOG_LINE_MAX + 128];
	int fd = atomic_load(&log_fd);
	va_list ap;

	if (!log_enabled(level))
		return;
	if (fd < 0)
		fd = STDERR_FILENO;
	int journal = atomic_load(&log_journal);
	if (journal < 0) {
		journal = log_fd_is_journal(fd);
		atomic_store(&log_journal, journal);
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	size_t len = log_prefix(line, sizeof line, level, journal);
	if (len >= sizeof line)
		len = sizeof line - 2;
	log_append_escaped(line, &len, sizeof line, msg);
	line[len++] = '\n';
	ssize_t n = write(fd, line, len);
	(void)n;
}

int log_limit_take(struct log_limit *l, unsigned *missed)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	unsigned gone = 0;
	pthread_mutex_lock(&l->mu);
	if (now - l->window_us > l->window_s * 1000000ull) {
		gone = l->over;
		l->window_us = now;
		l->n = l->over = 0;
	}
	int fits = ++l->n <= l->burst;
	l->over += !fits;
	pthread_mutex_unlock(&l->mu);
	if (missed)
		*missed = gone;
	return fits;
}
