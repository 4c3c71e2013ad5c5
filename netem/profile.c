/* profile.c: parse link profiles.
 *
 * Format: one "key = value" per line, '#' starts a comment.  A key applies to
 * both directions unless prefixed with "up." (branch -> datacenter) or "down.".
 * Keys: name, description, mtu, rate, delay, jitter, loss, limit, overhead.
 * A key may be set once per direction: a repeated key is an error, which
 * catches the copy-paste mistakes that would otherwise silently win. */
#include "profile.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Keys that take a value per direction; their index is a bit in seen[]. */
enum wn_key {
	K_RATE, K_DELAY, K_JITTER, K_LOSS, K_LIMIT, K_OVERHEAD, K_NDIRKEYS,
	K_NAME = K_NDIRKEYS, K_DESC, K_MTU, K_NKEYS,
};

static const char *const key_names[K_NKEYS] = {
	"rate", "delay", "jitter", "loss", "limit", "overhead", "name", "description", "mtu",
};

struct unit {
	const char *suffix;
	double      mult;
};

/* Parse state: the file name and line for messages, keys already seen. */
struct pstate {
	const char *fname;
	int         line;
	unsigned    seen[3];           /* per scope (both, up, down): bit per enum wn_key */
	int         seen_line[3][K_NKEYS];
	char       *err;
	size_t      errlen;
};

/* Formats "fname:line: msg" into the caller's error buffer; returns -1. */
static int perr(struct pstate *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(struct pstate *s, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (s->err && s->errlen && s->line > 0)
		snprintf(s->err, s->errlen, "%s:%d: %s", s->fname, s->line, msg);
	else if (s->err && s->errlen)
		snprintf(s->err, s->errlen, "%s: %s", s->fname, msg);   /* whole-file rule */
	return -1;
}

/* Parses "<number><unit>" where unit is one of units (exact, case-insensitive).
 * Returns 0 and *out = number * mult, or -1 if the number or unit is bad. */
static int parse_unit(const char *v, const struct unit *units, double *out)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(v, &end);
	if (end == v || errno || !isfinite(x) || x < 0)
		return -1;
	for (; units->suffix; units++) {
		if (strcasecmp(end, units->suffix) == 0) {
			*out = x * units->mult;
			return 0;
		}
	}
	return -1;
}

static const struct unit rate_units[] = {
	{ "bit", 1 }, { "kbit", 1e3 }, { "mbit", 1e6 }, { "gbit", 1e9 },
	{ "bps", 8 }, { "kbps", 8e3 }, { "mbps", 8e6 }, { NULL, 0 },
};
static const struct unit time_units[] = {
	{ "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 }, { NULL, 0 },
};
static const struct unit size_units[] = {
	{ "", 1 }, { "b", 1 }, { "k", 1024 }, { "kib", 1024 }, { "m", 1048576 },
	{ "mib", 1048576 }, { NULL, 0 },
};

/* Parses a rate such as "1.544mbit" or "unlimited". */
static int parse_rate(struct pstate *s, const char *v, uint64_t *out)
{
	double x;

	if (strcmp(v, "unlimited") == 0) {
		*out = 0;
		return 0;
	}
	if (parse_unit(v, rate_units, &x) < 0)
		return perr(s, "bad rate '%s' (expected e.g. 1.544mbit, 512kbit, 10mbps or unlimited)", v);
	if (x < 1000 || x > (double)WN_MAX_RATE_BPS)
		return perr(s, "rate '%s' out of range (1kbit .. 100gbit)", v);
	*out = (uint64_t)llround(x);
	return 0;
}

/* Parses a time such as "20ms", "150us" or "0". */
static int parse_time(struct pstate *s, const char *what, const char *v, uint64_t *out)
{
	double x;

	if (strcmp(v, "0") == 0) {
		*out = 0;
		return 0;
	}
	if (parse_unit(v, time_units, &x) < 0)
		return perr(s, "bad %s '%s' (expected e.g. 20ms, 500us or 1.5s)", what, v);
	if (x > (double)WN_MAX_DELAY_NS)
		return perr(s, "%s '%s' out of range (at most 10s)", what, v);
	*out = (uint64_t)llround(x);
	return 0;
}

/* Parses a loss such as "0.2%". */
static int parse_loss(struct pstate *s, const char *v, double *out)
{
	static const struct unit pct[] = { { "%", 0.01 }, { NULL, 0 } };
	double x;

	if (strcmp(v, "0") == 0) {
		*out = 0;
		return 0;
	}
	if (parse_unit(v, pct, &x) < 0)
		return perr(s, "bad loss '%s' (expected a percentage, e.g. 0.2%%)", v);
	if (x > 1.0)
		return perr(s, "loss '%s' out of range (0%% .. 100%%)", v);
	*out = x;
	return 0;
}

/* Parses a queue limit: "bdp", "2bdp" or a size in bytes ("64k", "30000"). */
static int parse_limit(struct pstate *s, const char *v, struct wn_dir *d)
{
	static const struct unit bdp[] = { { "bdp", 1 }, { NULL, 0 } };
	double x;

	if (strcasecmp(v, "bdp") == 0) {
		d->limit_bdp = 1;
		return 0;
	}
	if (parse_unit(v, bdp, &x) == 0) {
		if (x < 0.1 || x > 100)
			return perr(s, "limit '%s' out of range (0.1bdp .. 100bdp)", v);
		d->limit_bdp = x;
		return 0;
	}
	if (parse_unit(v, size_units, &x) < 0)
		return perr(s, "bad limit '%s' (expected bdp, 2bdp, or bytes such as 64k)", v);
	if (x < WN_MIN_LIMIT || x > WN_MAX_LIMIT)
		return perr(s, "limit '%s' out of range (1500 bytes .. 1g)", v);
	d->limit_bytes = (uint64_t)x;
	d->limit_bdp = 0;
	return 0;
}

/* Parses a non-negative integer no larger than max. */
static int parse_uint(struct pstate *s, const char *what, const char *v, unsigned long min,
		      unsigned long max, uint32_t *out)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(v, &end, 10);
	if (end == v || *end || errno || !isdigit((unsigned char)v[0]))
		return perr(s, "bad %s '%s' (expected a whole number)", what, v);
	if (x < min || x > max)
		return perr(s, "%s '%s' out of range (%lu .. %lu)", what, v, min, max);
	*out = (uint32_t)x;
	return 0;
}

/* Applies one per-direction key to direction d. */
static int set_dir_key(struct pstate *s, enum wn_key k, const char *v, struct wn_dir *d)
{
	switch (k) {
	case K_RATE:     return parse_rate(s, v, &d->rate_bps);
	case K_DELAY:    return parse_time(s, "delay", v, &d->delay_ns);
	case K_JITTER:   return parse_time(s, "jitter", v, &d->jitter_ns);
	case K_LOSS:     return parse_loss(s, v, &d->loss);
	case K_LIMIT:    return parse_limit(s, v, d);
	case K_OVERHEAD: return parse_uint(s, "overhead", v, 0, WN_MAX_OVERHEAD, &d->overhead);
	default:         return perr(s, "internal: key %d", (int)k);
	}
}

/* Copies a text value, rejecting values that do not fit. */
static int set_text(struct pstate *s, const char *what, const char *v, char *dst, size_t n)
{
	if (strlen(v) >= n)
		return perr(s, "%s too long (at most %zu characters)", what, n - 1);
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

/* Records that key k was set in scope sc (0 both directions, 1 up, 2 down).
 * A key may be set once per scope; a plain key must come before up./down.
 * ones, which override it, so that no line silently undoes another. */
static int mark_seen(struct pstate *s, enum wn_key k, int sc)
{
	static const char *const pre[3] = { "", "up.", "down." };

	if (s->seen[sc] & (1u << k))
		return perr(s, "'%s%s' already set at line %d", pre[sc], key_names[k],
			    s->seen_line[sc][k]);
	for (int o = 1; sc == 0 && o < 3; o++)
		if (s->seen[o] & (1u << k))
			return perr(s, "'%s' after '%s%s' (line %d) would override it: "
				    "put the plain key first", key_names[k], pre[o], key_names[k],
				    s->seen_line[o][k]);
	s->seen[sc] |= 1u << k;
	s->seen_line[sc][k] = s->line;
	return 0;
}

/* Splits "key = value", trimming blanks; returns -1 if there is no '='. */
static int split_kv(char *line, char **key, char **val)
{
	char *eq = strchr(line, '='), *e;

	if (!eq)
		return -1;
	*eq = '\0';
	for (e = eq; e > line && isspace((unsigned char)e[-1]); e--)
		e[-1] = '\0';
	*key = line;
	for (*val = eq + 1; isspace((unsigned char)**val); (*val)++)
		;
	return 0;
}

/* Handles one line (comment and trailing blanks already stripped). */
static int parse_line(struct pstate *s, char *line, struct wn_profile *p)
{
	char *key, *val;
	int d0 = 0, d1 = WN_NDIR, k;

	if (split_kv(line, &key, &val) < 0)
		return perr(s, "expected 'key = value', got '%s'", line);
	if (!*key)
		return perr(s, "missing key before '='");
	if (!*val)
		return perr(s, "missing value for '%s'", key);
	if (strncmp(key, "up.", 3) == 0)
		d0 = WN_UP, d1 = WN_UP + 1, key += 3;
	else if (strncmp(key, "down.", 5) == 0)
		d0 = WN_DOWN, d1 = WN_DOWN + 1, key += 5;
	for (k = 0; k < K_NKEYS && strcmp(key, key_names[k]) != 0; k++)
		;
	if (k == K_NKEYS)
		return perr(s, "unknown key '%s' (expected rate, delay, jitter, loss, limit, overhead, "
			    "mtu, name or description; the first six may have an up. or down. prefix)", key);
	if (k >= K_NDIRKEYS && d1 - d0 != WN_NDIR)
		return perr(s, "'%s' applies to the whole link and takes no up./down. prefix", key);
	if (mark_seen(s, (enum wn_key)k, d1 - d0 == WN_NDIR ? 0 : d0 + 1) < 0)
		return -1;
	if (k == K_NAME) {
		if (strspn(val, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
		    != strlen(val))
			return perr(s, "name '%s' may hold only letters, digits, '_', '.' and '-'", val);
		return set_text(s, "name", val, p->name, sizeof p->name);
	}
	if (k == K_DESC)
		return set_text(s, "description", val, p->description, sizeof p->description);
	if (k == K_MTU)
		return parse_uint(s, "mtu", val, WN_MIN_MTU, WN_MAX_MTU, &p->mtu);
	for (int d = d0; d < d1; d++)
		if (set_dir_key(s, (enum wn_key)k, val, &p->dir[d]) < 0)
			return -1;
	return 0;
}

/* Fills in derived values (limits from the BDP) and checks cross-key rules. */
static int finish(struct pstate *s, struct wn_profile *p)
{
	uint64_t rtt = wn_profile_rtt_ns(p);

	for (int d = 0; d < WN_NDIR; d++) {
		struct wn_dir *dir = &p->dir[d];

		if (dir->jitter_ns > dir->delay_ns)
			return perr(s, "%s jitter (%.3f ms) larger than its delay (%.3f ms)",
				    d == WN_UP ? "up" : "down", dir->jitter_ns / 1e6, dir->delay_ns / 1e6);
		if (dir->limit_bdp > 0) {
			double b = dir->limit_bdp * (double)dir->rate_bps * (double)rtt / 8e9;

			if (dir->rate_bps == 0)
				b = WN_MAX_LIMIT / 64;      /* unlimited rate: the queue never builds */
			dir->limit_bytes = b < 2.0 * p->mtu ? 2ULL * p->mtu : (uint64_t)b;
			if (dir->limit_bytes > WN_MAX_LIMIT)
				dir->limit_bytes = WN_MAX_LIMIT;
		}
		if (dir->limit_bytes < p->mtu + dir->overhead)
			return perr(s, "%s limit (%llu bytes) smaller than one packet (mtu %u)",
				    d == WN_UP ? "up" : "down", (unsigned long long)dir->limit_bytes, p->mtu);
	}
	return 0;
}

/* Sets the defaults: unlimited rate, no delay or loss, queue = 1 BDP, mtu 1500. */
static void defaults(struct wn_profile *p)
{
	memset(p, 0, sizeof *p);
	p->mtu = 1500;
	for (int d = 0; d < WN_NDIR; d++)
		p->dir[d].limit_bdp = 1;
}

int wn_profile_parse(const char *text, const char *fname, struct wn_profile *p,
		     char *err, size_t errlen)
{
	struct pstate s = { .fname = fname ? fname : "profile", .err = err, .errlen = errlen };
	char line[WN_MAX_LINE + 2];

	defaults(p);
	while (*text) {
		const char *nl = strchr(text, '\n');
		size_t n = nl ? (size_t)(nl - text) : strlen(text);
		char *c, *b;

		s.line++;
		if (n > WN_MAX_LINE)
			return perr(&s, "line longer than %d characters", WN_MAX_LINE);
		memcpy(line, text, n);
		line[n] = '\0';
		text += n + (nl ? 1 : 0);
		if ((c = strchr(line, '#')))
			*c = '\0';
		for (c = line + strlen(line); c > line && isspace((unsigned char)c[-1]); c--)
			c[-1] = '\0';
		for (b = line; isspace((unsigned char)*b); b++)
			;
		if (*b && parse_line(&s, b, p) < 0)
			return -1;
	}
	s.line = 0;
	return finish(&s, p);
}

int wn_profile_load(const char *path, struct wn_profile *p, char *err, size_t errlen)
{
	enum { MAX = 64 * 1024 };
	FILE *f;
	char *buf;
	size_t n;
	int rc = -1;

	defaults(p);
	if (!(f = fopen(path, "r"))) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	if (!(buf = malloc(MAX + 1))) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto err_close;
	}
	n = fread(buf, 1, MAX + 1, f);
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error", path);
		goto err_free;
	}
	if (n > MAX) {
		snprintf(err, errlen, "%s: larger than 64 KiB, not a profile", path);
		goto err_free;
	}
	buf[n] = '\0';
	if (memchr(buf, '\0', n)) {
		snprintf(err, errlen, "%s: contains a NUL byte, not a profile", path);
		goto err_free;
	}
	rc = wn_profile_parse(buf, path, p, err, errlen);
err_free:
	free(buf);
err_close:
	fclose(f);
	return rc;
}

uint64_t wn_profile_rtt_ns(const struct wn_profile *p)
{
	return p->dir[WN_UP].delay_ns + p->dir[WN_DOWN].delay_ns;
}

uint64_t wn_dir_tx_ns(const struct wn_dir *d, uint32_t len)
{
	if (d->rate_bps == 0)
		return 0;
	return (uint64_t)((len + (uint64_t)d->overhead) * 8ULL * 1000000000ULL / d->rate_bps);
}

void wn_profile_print_shell(const struct wn_profile *p, FILE *out)
{
	static const char *const dn[WN_NDIR] = { "up", "down" };

	fprintf(out, "name='%s'\nmtu=%u\nrtt_us=%llu\n", p->name, p->mtu,
		(unsigned long long)(wn_profile_rtt_ns(p) / 1000));
	for (int d = 0; d < WN_NDIR; d++) {
		const struct wn_dir *x = &p->dir[d];

		fprintf(out, "%s_rate_bit=%llu\n%s_delay_us=%llu\n%s_jitter_us=%llu\n"
			"%s_loss_pct=%.6g\n%s_limit_bytes=%llu\n%s_overhead=%u\n",
			dn[d], (unsigned long long)x->rate_bps, dn[d],
			(unsigned long long)(x->delay_ns / 1000), dn[d],
			(unsigned long long)(x->jitter_ns / 1000), dn[d], x->loss * 100, dn[d],
			(unsigned long long)x->limit_bytes, dn[d], x->overhead);
	}
}
