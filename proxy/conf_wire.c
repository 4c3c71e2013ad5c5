/* conf_wire.c: the core's allow list as it travels to edges in an ALLOW
 * frame (format in proto.h), and an edge's copy of it: the edge sends an
 * intercepted connection the core would refuse direct at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "conf_int.h"
#include "proto.h"

/* A peer's allow list, as it told it. */
struct conf_acl {
	struct conf_tlist l;
};

/* Bytes of an address of family code fam (0, 4, 6); -1 for another code. */
static int wire_addr_len(unsigned fam)
{
	return fam == 0 ? 0 : fam == 4 ? 4 : fam == 6 ? 16 : -1;
}

/* One item into b at *n (cap bytes); -1 when it does not fit. */
static int wire_put_target(const struct conf_target *t, uint8_t *b, size_t cap, size_t *n)
{
	unsigned fam = t->family == AF_INET ? 4 : t->family == AF_INET6 ? 6 : 0;
	size_t alen = (size_t)wire_addr_len(fam), need = 2 + alen + 2 + 4 * t->nports;
	if (*n + need > cap || t->nports > 0xffff)
		return -1;
	uint8_t *p = b + *n;
	p[0] = (uint8_t)fam;
	p[1] = (uint8_t)(fam ? t->prefix : 0);
	memcpy(p + 2, t->addr, alen);
	p += 2 + alen;
	p[0] = (uint8_t)(t->nports >> 8);
	p[1] = (uint8_t)t->nports;
	for (size_t i = 0; i < t->nports; i++) {
		uint8_t *r = p + 2 + 4 * i;
		r[0] = (uint8_t)(t->ports[i].lo >> 8);
		r[1] = (uint8_t)t->ports[i].lo;
		r[2] = (uint8_t)(t->ports[i].hi >> 8);
		r[3] = (uint8_t)t->ports[i].hi;
	}
	*n += need;
	return 0;
}

size_t conf_allow_wire(const struct conf *c, uint8_t *buf, size_t cap)
{
	size_t n = 2;
	int fits = cap >= 2 && c->allow.n < PROTO_ALLOW_UNTOLD;
	for (size_t i = 0; fits && i < c->allow.n; i++)
		fits = !wire_put_target(&c->allow.v[i], buf, cap, &n);
	size_t count = fits ? c->allow.n : PROTO_ALLOW_UNTOLD;
	buf[0] = (uint8_t)(count >> 8);
	buf[1] = (uint8_t)count;
	return fits ? n : 2;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* One item from p[*off..len) into t; NULL, or what is wrong. */
static const char *wire_get_target(const uint8_t *p, size_t len, size_t *off, struct conf_target *t)
{
	if (len - *off < 2)
		return "entry cut short";
	unsigned fam = p[*off], prefix = p[*off + 1];
	int alen = wire_addr_len(fam);
	if (alen < 0)
		return "unknown address family";
	if (prefix > (unsigned)alen * 8)
		return "prefix longer than the address";
	*off += 2;
	if (len - *off < (size_t)alen + 2)
		return "entry cut short";
	t->family = fam == 4 ? AF_INET : fam == 6 ? AF_INET6 : 0;
	t->prefix = prefix;
	memcpy(t->addr, p + *off, (size_t)alen);
	*off += (size_t)alen;
	size_t np = get16(p + *off);
	*off += 2;
	if (len - *off < 4 * np)
		return "port ranges cut short";
	if (np && !(t->ports = calloc(np, sizeof *t->ports)))
		return "out of memory";
	for (size_t i = 0; i < np; i++, *off += 4) {
		t->ports[i].lo = get16(p + *off);
		t->ports[i].hi = get16(p + *off + 2);
		if (!t->ports[i].lo || t->ports[i].hi < t->ports[i].lo) {
			free(t->ports);
			t->ports = NULL;
			return "bad port range";
		}
	}
	t->nports = np;
	return NULL;
}

struct conf_acl *conf_acl_from_wire(const uint8_t *p, size_t len, char *msg, size_t msglen)
{
	const char *why = len < 2 ? "shorter than its count" : get16(p) == PROTO_ALLOW_UNTOLD ? "not told" : NULL;
	struct conf_acl *a = why ? NULL : calloc(1, sizeof *a);
	size_t n = why ? 0 : get16(p), off = 2;
	if (!why && (!a || (n && !(a->l.v = calloc(n, sizeof *a->l.v)))))
		why = "out of memory";
	for (size_t i = 0; !why && i < n; i++, a->l.n++)
		why = wire_get_target(p, len, &off, &a->l.v[i]);
	if (!why && off != len)
		why = "bytes after its entries";
	if (!why)
		return a;
	snprintf(msg, msglen, "%s", why);
	conf_acl_free(a);
	return NULL;
}

int conf_acl_match(const struct conf_acl *a, const struct sockaddr *addr, uint16_t port)
{
	return addr && conf_tlist_match(&a->l, addr, port);
}

size_t conf_acl_count(const struct conf_acl *a)
{
	return a->l.n;
}

void conf_acl_free(struct conf_acl *a)
{
	if (!a)
		return;
	conf_tlist_clear(&a->l);
	free(a);
}
