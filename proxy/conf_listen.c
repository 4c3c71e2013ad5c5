/*
 * conf_listen.c: the listeners a config asks for (forwards, stats, the
 * transparent port, the core's tunnel listener) must not take each other's
 * ports.  Checked by port: only listeners on one port can clash, and within
 * a port, in the order the config gives them, a listener clashes with an
 * earlier one on the same address, with any earlier one if either listens
 * on every address ("" or "::"), and "0.0.0.0" with every IPv4 address.  So
 * 20,000 forwards on one port are checked in a few milliseconds, where
 * comparing every pair took 3.7 s (and held the edge's loop that long on a
 * reload).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_int.h"

struct lis {
	const struct conf_addr *a;
	const char *where, *what;
	size_t i;     /* its place in the config's order */
	size_t first; /* the first listener on the same port and address (itself if none before) */
};

static int lis_any(const struct lis *l)
{
	return !l->a->host[0] || !strcmp(l->a->host, "::");
}

static int lis_v6(const struct lis *l)
{
	return strchr(l->a->host, ':') != NULL;
}

static int lis_v4any(const struct lis *l)
{
	return !strcmp(l->a->host, "0.0.0.0");
}

/* By port, then address, then the config's order. */
static int by_addr(const void *x, const void *y)
{
	const struct lis *a = x, *b = y;
	if (a->a->port != b->a->port)
		return a->a->port < b->a->port ? -1 : 1;
	int c = strcmp(a->a->host, b->a->host);
	return c ? c : a->i < b->i ? -1 : a->i > b->i;
}

/* By port, then the config's order. */
static int by_port(const void *x, const void *y)
{
	const struct lis *a = x, *b = y;
	if (a->a->port != b->a->port)
		return a->a->port < b->a->port ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

#define NONE SIZE_MAX

static size_t min_of(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* The listeners l[0..n) of one port, in the config's order: the first that
 * clashes with an earlier one, in *i, and the first earlier one it clashes
 * with, in *j (config places); *i NONE if none clashes. */
static void port_clash(const struct lis *l, size_t n, size_t *i, size_t *j)
{
	size_t any = NONE, v4any = NONE, v4 = NONE; /* the first such seen so far */
	*i = NONE;
	for (size_t k = 0; k < n; k++) {
		const struct lis *x = &l[k];
		size_t w = x->first != x->i ? x->first : NONE; /* the same address */
		w = min_of(w, any);
		if (k && lis_any(x))
			w = min_of(w, l[0].i);
		if (lis_v4any(x))
			w = min_of(w, v4);
		if (!lis_v6(x))
			w = min_of(w, v4any);
		if (w != NONE) {
			*i = x->i;
			*j = w;
			return;
		}
		if (lis_any(x) && any == NONE)
			any = x->i;
		if (lis_v4any(x) && v4any == NONE)
			v4any = x->i;
		if (!lis_v6(x) && v4 == NONE)
			v4 = x->i;
	}
}

/* The first clash of l[0..n) (config places *i, *j), or *i NONE; sorts l. */
static void first_clash(struct lis *l, size_t n, size_t *i, size_t *j)
{
	qsort(l, n, sizeof *l, by_addr);
	for (size_t k = 0; k < n; k++) { /* runs of one port and address: their first */
		int same = k && l[k - 1].a->port == l[k].a->port && !strcmp(l[k - 1].a->host, l[k].a->host);
		l[k].first = same ? l[k - 1].first : l[k].i;
	}
	qsort(l, n, sizeof *l, by_port);
	*i = NONE;
	for (size_t k = 0, e; k < n; k = e) {
		for (e = k + 1; e < n && l[e].a->port == l[k].a->port; e++)
			;
		if (!l[k].a->port) /* none asked for */
			continue;
		size_t pi, pj;
		port_clash(l + k, e - k, &pi, &pj);
		if (pi < *i) {
			*i = pi;
			*j = pj;
		}
	}
}

int conf_listeners_clash(struct conf *c, char *err, size_t errlen)
{
	struct conf_addr tp = { "", (uint16_t)c->transparent };
	size_t cap = c->nfwd + 3;
	struct lis *l = calloc(2 * cap, sizeof *l), *sorted = l + cap; /* in the config's order; sorted */
	size_t n = 0, i, j;
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (c->role == CONF_CORE && c->src[K_LISTEN] != SRC_UNSET)
		l[n++] = (struct lis){ &c->listen, c->where[K_LISTEN], "listen", 0, 0 };
	if (c->src[K_STATS] != SRC_UNSET)
		l[n++] = (struct lis){ &c->stats, c->where[K_STATS], "stats", 0, 0 };
	if (c->transparent)
		l[n++] = (struct lis){ &tp, c->where[K_TRANSPARENT], "transparent", 0, 0 };
	for (size_t k = 0; k < c->nfwd; k++)
		l[n++] = (struct lis){ &c->fwd[k].f.listen, c->fwd[k].where, "forward", 0, 0 };
	for (size_t k = 0; k < n; k++)
		l[k].i = k;
	memcpy(sorted, l, n * sizeof *l);
	first_clash(sorted, n, &i, &j);
	if (i != NONE) {
		const struct lis *a = &l[i], *b = &l[j];
		snprintf(err, errlen, "%s: %s: listen address (port %u) already used by %s at %s",
			 a->where ? a->where : "?", a->what, a->a->port, b->what, b->where ? b->where : "?");
	}
	free(l);
	return i != NONE ? -1 : 0;
}
