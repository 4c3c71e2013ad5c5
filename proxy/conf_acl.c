/* conf_acl.c: value parsers for the configuration: HOST:PORT addresses, sizes,
 * rates, durations, and CIDR[:PORTS] lists with their matcher (the core's
 * allow list and the optimize rules). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_int.h"

/* Parses a port: decimal digits only, 1..65535; 0 on success. */
static int conf_port_parse(const char *s, size_t len, uint16_t *out)
{
	unsigned long v = 0;

	if (len == 0 || len > 5)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v < 1 || v > 65535)
		return -1;
	*out = (uint16_t)v;
	return 0;
}

/* A hostname: letters, digits, '.', '-', '_' (or "*" for any). */
static int conf_host_ok(const char *h)
{
	if (!strcmp(h, "*"))
		return 1;
	for (; *h; h++)
		if (!isalnum((unsigned char)*h) && *h != '.' && *h != '-' && *h != '_')
			return 0;
	return 1;
}

/* Parses "HOST:PORT", "[V6]:PORT", "[V6%IFACE]:PORT"; NULL on success, else a
 * static message. */
const char *conf_addr_parse(const char *s, struct conf_addr *a)
{
	const char *colon, *host = s;
	size_t hlen;
	struct in6_addr v6;

	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb)
			return "missing ']' after IPv6 address";
		host = s + 1;
		hlen = (size_t)(rb - host);
		if (rb[1] != ':')
			return "expected [IPV6]:PORT";
		colon = rb + 1;
		if (hlen == 0 || hlen >= sizeof a->host)
			return "bad IPv6 address";
		memcpy(a->host, host, hlen);
		a->host[hlen] = 0;
		char *scope = strchr(a->host, '%'); /* a link-local address's interface: [fe80::1%eth0] */
		if (scope)
			*scope = 0;
		int ok = inet_pton(AF_INET6, a->host, &v6) == 1;
		if (scope)
			*scope = '%';
		if (!ok)
			return "bad IPv6 address";
		if (scope && (!scope[1] || !conf_host_ok(scope + 1)))
			return "bad interface after '%' in the IPv6 address";
		if (scope && !if_nametoindex(scope + 1))
			return "no such network interface on this host (the name after '%')";
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return "expected HOST:PORT";
		if (strchr(s, ':') != colon)
			return "IPv6 addresses need brackets, e.g. [::1]:80";
		hlen = (size_t)(colon - s);
		if (hlen == 0)
			return "missing host before ':PORT'";
		if (hlen >= sizeof a->host)
			return "host name too long";
		memcpy(a->host, s, hlen);
		a->host[hlen] = 0;
		if (!conf_host_ok(a->host))
			return "bad host name";
	}
	if (conf_port_parse(colon + 1, strlen(colon + 1), &a->port) < 0)
		return "bad port (expected 1-65535)";
	return NULL;
}

/* Formats an address, bracketing IPv6 literals. */
char *conf_addr_format(const struct conf_addr *a, char *buf, size_t len)
{
	if (strchr(a->host, ':'))
		snprintf(buf, len, "[%s]:%u", a->host, a->port);
	else
		snprintf(buf, len, "%s:%u", a->host, a->port);
	return buf;
}

/* getaddrinfo for one TCP address; takes the first result. */
int conf_addr_resolve(const struct conf_addr *a, int passive, struct sockaddr_storage *ss,
		      socklen_t *sslen, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC };
	struct addrinfo *res = NULL;
	char port[8];
	const char *host = a->host;

	if (passive && (!host[0] || !strcmp(host, "*"))) {
		host = NULL;
		hints.ai_flags = AI_PASSIVE;
		hints.ai_family = AF_INET6; /* dual-stack wildcard */
	}
	snprintf(port, sizeof port, "%u", a->port);
	int rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		char b[CONF_HOST_MAX + 16];
		snprintf(err, errlen, "%s: %s", conf_addr_format(a, b, sizeof b), gai_strerror(rc));
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sslen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* Sizes: integer with K/M/G/T (x1024^n), optional B/iB, case-insensitive. */
const char *conf_size_parse(const char *s, uint64_t *out)
{
	char *end;
	unsigned shift = 0;

	if (!isdigit((unsigned char)*s))
		return "expected a size like 512M or 100G";
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return "size out of range";
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	default: break;
	}
	if (shift && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return "expected a size like 512M or 100G (suffixes K, M, G, T)";
	if (shift && v > (UINT64_MAX >> shift))
		return "size out of range";
	*out = (uint64_t)v << shift;
	return NULL;
}

/* A non-negative decimal with a fraction, as strtod but refusing hex/inf. */
static int conf_decimal(const char *s, double *v, char **end)
{
	if (!isdigit((unsigned char)*s) && *s != '.')
		return -1;
	errno = 0;
	*v = strtod(s, end);
	if (errno || *end == s || !isfinite(*v) || *v < 0)
		return -1;
	return 0;
}

/* Rates: decimal with k/M/G/T (x1000^n) and optional "bit", "bps", "b/s". */
const char *conf_rate_parse(const char *s, uint64_t *out)
{
	static const char msg[] = "expected a rate in bit/s like 1.544M or 100Mbit";
	char *end;
	double v, mul = 1;

	if (conf_decimal(s, &v, &end) < 0)
		return msg;
	switch (*end) {
	case 'k': case 'K': mul = 1e3; end++; break;
	case 'M': mul = 1e6; end++; break;
	case 'G': mul = 1e9; end++; break;
	case 'T': mul = 1e12; end++; break;
	default: break;
	}
	if (*end && strcmp(end, "bit") && strcmp(end, "bps") && strcmp(end, "b/s"))
		return msg;
	v *= mul;
	if (v < 1000 || v > 1e13)
		return "rate out of range (1kbit to 10Tbit)";
	*out = (uint64_t)v;
	return NULL;
}

/* A link: RATE (both ways) or DOWN/UP.  A unit may be "b/s", so the two
 * rates are split at the first '/' that leaves a rate on each side. */
const char *conf_link_rate_parse(const char *s, uint64_t *down, uint64_t *up)
{
	const char *e = conf_rate_parse(s, up);
	if (!e || !strchr(s, '/')) {
		*down = *up;
		return e;
	}
	for (const char *u = strchr(s, '/'); u; u = strchr(u + 1, '/')) {
		char d[64];
		if ((size_t)(u - s) >= sizeof d)
			break;
		memcpy(d, s, (size_t)(u - s));
		d[u - s] = 0;
		if (!conf_rate_parse(d, down) && !conf_rate_parse(u + 1, up))
			return NULL;
	}
	return "expected RATE or DOWN/UP in bit/s (1kbit to 10Tbit), like 1.544M or 20M/2M";
}

/* Durations: decimal with us, ms (default) or s. */
const char *conf_rtt_parse(const char *s, uint32_t *out)
{
	char *end;
	double v, mul = 1000;

	if (conf_decimal(s, &v, &end) < 0)
		return "expected a round-trip time like 40ms or 0.3s";
	if (!strcmp(end, "us"))
		mul = 1;
	else if (!strcmp(end, "s"))
		mul = 1e6;
	else if (*end && strcmp(end, "ms"))
		return "expected a round-trip time like 40ms or 0.3s (units us, ms, s)";
	v *= mul;
	if (v < 1 || v > 60e6)
		return "round-trip time out of range (1us to 60s)";
	*out = (uint32_t)v;
	return NULL;
}

const char *conf_mark_parse(const char *s, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long long n = strtoull(s, &end, 0);
	if (!isdigit((unsigned char)*s) || *end || errno || !n || n > 0xffffffffULL)
		return "expected a nonzero mark, e.g. 0x2 (decimal or 0x hex, 32 bits)";
	*out = (uint32_t)n;
	return NULL;
}

/* Decimal digits only, within [lo, hi]. */
const char *conf_uint_parse(const char *s, unsigned long lo, unsigned long hi, unsigned long *out)
{
	static __thread char msg[80]; /* returned: valid until the next call */
	unsigned long v = 0;
	int digits = *s != 0;

	for (; *s && digits; s++) {
		digits = isdigit((unsigned char)*s);
		v = v * 10 + (unsigned long)(*s - '0');
		if (v > hi)
			break;
	}
	if (!digits || v < lo || v > hi) {
		snprintf(msg, sizeof msg, "expected a whole number from %lu to %lu", lo, hi);
		return msg;
	}
	*out = v;
	return NULL;
}

/* Parses "PORT" or "LO-HI" (length len) into r. */
static int conf_range_parse(const char *s, size_t len, struct conf_ports *r)
{
	const char *dash = memchr(s, '-', len);

	if (!dash) {
		if (conf_port_parse(s, len, &r->lo) < 0)
			return -1;
		r->hi = r->lo;
		return 0;
	}
	if (conf_port_parse(s, (size_t)(dash - s), &r->lo) < 0 ||
	    conf_port_parse(dash + 1, len - (size_t)(dash - s) - 1, &r->hi) < 0 || r->hi < r->lo)
		return -1;
	return 0;
}

/* Appends one port range (text s, length len) to t. */
static int conf_target_add_ports(struct conf_target *t, const char *s, size_t len,
				 char *msg, size_t msglen)
{
	struct conf_ports r, *nv;

	if (conf_range_parse(s, len, &r) < 0) {
		snprintf(msg, msglen, "bad port or range '%.*s'", (int)len, s);
		return -1;
	}
	nv = realloc(t->ports, (t->nports + 1) * sizeof *nv);
	if (!nv) {
		snprintf(msg, msglen, "out of memory");
		return -1;
	}
	t->ports = nv;
	t->ports[t->nports++] = r;
	return 0;
}

/* True when the bits of addr beyond prefix are all zero. */
static int conf_host_bits_clear(const uint8_t *addr, unsigned bytes, unsigned prefix)
{
	for (unsigned bit = prefix; bit < bytes * 8; bit++)
		if (addr[bit / 8] & (0x80u >> (bit % 8)))
			return 0;
	return 1;
}

/* Parses an address with optional "/LEN" (text s, length len) into t. */
static int conf_cidr_parse(struct conf_target *t, const char *s, size_t len,
			   char *msg, size_t msglen)
{
	char buf[INET6_ADDRSTRLEN + 8];
	const char *slash = memchr(s, '/', len);
	size_t alen = slash ? (size_t)(slash - s) : len;
	unsigned long pfx;

	if (alen >= INET6_ADDRSTRLEN)
		goto bad;
	memcpy(buf, s, alen);
	buf[alen] = 0;
	if (inet_pton(AF_INET, buf, t->addr) == 1)
		t->family = AF_INET;
	else if (inet_pton(AF_INET6, buf, t->addr) == 1)
		t->family = AF_INET6;
	else
		goto bad;
	unsigned bits = t->family == AF_INET ? 32 : 128;
	t->prefix = bits;
	if (slash) {
		if (len - alen - 1 >= sizeof buf)
			goto bad;
		memcpy(buf, slash + 1, len - alen - 1);
		buf[len - alen - 1] = 0;
		if (conf_uint_parse(buf, 0, bits, &pfx))
			goto bad;
		t->prefix = (unsigned)pfx;
	}
	if (!conf_host_bits_clear(t->addr, bits / 8, t->prefix)) {
		snprintf(msg, msglen, "'%.*s' has host bits set beyond /%u", (int)len, s, t->prefix);
		return -1;
	}
	if (t->family == AF_INET6 && t->prefix >= 96 && IN6_IS_ADDR_V4MAPPED((struct in6_addr *)t->addr)) {
		/* ::ffff:a.b.c.d: targets in it are matched as IPv4 */
		memmove(t->addr, t->addr + 12, 4);
		t->family = AF_INET;
		t->prefix -= 96;
	}
	return 0;
bad:
	snprintf(msg, msglen, "bad address or CIDR '%.*s'", (int)len, s);
	return -1;
}

/* The number of ':' in s[0..len). */
static size_t conf_colons(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += s[i] == ':';
	return n;
}

/* An item with two colons or more outside brackets: an IPv6 address written
 * without them.  -1 with the form to use in msg. */
static int conf_v6_unbracketed(const char *s, size_t len, char *msg, size_t msglen)
{
	const char *slash = memchr(s, '/', len);
	size_t alen = slash ? (size_t)(slash - s) : len;
	snprintf(msg, msglen, "IPv6 addresses need brackets: '[%.*s]%.*s' (then ':PORTS' if any)", (int)alen, s,
		 (int)(len - alen), s + alen);
	return -1;
}

/* Splits an item "CIDR[:PORTS]" / "[V6]/LEN[:PORTS]" / "[V6/LEN][:PORTS]" /
 * ":PORTS" into t. */
static int conf_target_parse(struct conf_target *t, const char *s, size_t len,
			     char *msg, size_t msglen)
{
	const char *a = s, *ports = NULL;
	size_t alen = len;

	if (s[0] != '[' && conf_colons(s, len) >= 2)
		return conf_v6_unbracketed(s, len, msg, msglen);
	if (s[0] == ':') {
		t->family = 0;
		return conf_target_add_ports(t, s + 1, len - 1, msg, msglen);
	}
	if (s[0] == '[') {
		const char *rb = memchr(s, ']', len);
		if (!rb) {
			snprintf(msg, msglen, "missing ']' in '%.*s'", (int)len, s);
			return -1;
		}
		const char *after = rb + 1, *end = s + len;
		const char *colon = memchr(after, ':', (size_t)(end - after));
		char buf[INET6_ADDRSTRLEN + 8];
		size_t tail = colon ? (size_t)(colon - after) : (size_t)(end - after);
		int n = snprintf(buf, sizeof buf, "%.*s%.*s", (int)(rb - s - 1), s + 1, (int)tail, after);
		if (n < 0 || (size_t)n >= sizeof buf || (tail && after[0] != '/')) {
			snprintf(msg, msglen, "bad address or CIDR '%.*s'", (int)len, s);
			return -1;
		}
		if (conf_cidr_parse(t, buf, (size_t)n, msg, msglen) < 0)
			return -1;
		ports = colon;
	} else {
		ports = memchr(s, ':', len);
		alen = ports ? (size_t)(ports - s) : len;
		if (conf_cidr_parse(t, a, alen, msg, msglen) < 0)
			return -1;
	}
	if (ports)
		return conf_target_add_ports(t, ports + 1, (size_t)(s + len - ports - 1), msg, msglen);
	return 0;
}

/* A bare port or range continues the previous item's port list. */
static int conf_is_bare_ports(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!isdigit((unsigned char)s[i]) && s[i] != '-')
			return 0;
	return len > 0;
}

/* Parses one comma-separated token (trimmed) into l. */
static int conf_tlist_token(struct conf_tlist *l, const char *s, size_t len,
			    char *msg, size_t msglen)
{
	if (len == 0) {
		snprintf(msg, msglen, "empty entry in list");
		return -1;
	}
	if (conf_is_bare_ports(s, len)) {
		if (l->n == 0 || l->v[l->n - 1].nports == 0) {
			snprintf(msg, msglen, "'%.*s': a port must follow CIDR:PORTS or :PORTS",
				 (int)len, s);
			return -1;
		}
		return conf_target_add_ports(&l->v[l->n - 1], s, len, msg, msglen);
	}
	struct conf_target *nv = realloc(l->v, (l->n + 1) * sizeof *nv);
	if (!nv) {
		snprintf(msg, msglen, "out of memory");
		return -1;
	}
	l->v = nv;
	memset(&l->v[l->n], 0, sizeof l->v[0]);
	if (conf_target_parse(&l->v[l->n], s, len, msg, msglen) < 0) {
		free(l->v[l->n].ports);
		return -1;
	}
	l->n++;
	return 0;
}

/* Splits on commas, trims each token. */
int conf_tlist_parse(struct conf_tlist *l, const char *s, char *msg, size_t msglen)
{
	for (;;) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		while (len && isspace((unsigned char)*s))
			s++, len--;
		while (len && isspace((unsigned char)s[len - 1]))
			len--;
		if (conf_tlist_token(l, s, len, msg, msglen) < 0)
			return -1;
		if (!comma)
			return 0;
		s = comma + 1;
	}
}

/* Frees every item's ports and the array. */
void conf_tlist_clear(struct conf_tlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].ports);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* Extracts family and address bytes from a sockaddr, unmapping ::ffff:a.b.c.d. */
static int conf_sa_bytes(const struct sockaddr *sa, uint8_t out[16])
{
	if (sa->sa_family == AF_INET) {
		memcpy(out, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
		return AF_INET;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a)) {
			memcpy(out, a->s6_addr + 12, 4);
			return AF_INET;
		}
		memcpy(out, a->s6_addr, 16);
		return AF_INET6;
	}
	return 0;
}

/* Prefix comparison of the first bits bits. */
static int conf_prefix_eq(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;

	if (memcmp(a, b, full))
		return 0;
	if (rest == 0)
		return 1;
	uint8_t mask = (uint8_t)(0xff00u >> rest);
	return (a[full] & mask) == (b[full] & mask);
}

/* One item against (family, bytes, port). */
static int conf_target_match(const struct conf_target *t, int fam, const uint8_t *bytes,
			     uint16_t port)
{
	if (t->family) {
		if (fam != t->family || !conf_prefix_eq(t->addr, bytes, t->prefix))
			return 0;
	}
	if (t->nports == 0)
		return 1;
	for (size_t i = 0; i < t->nports; i++)
		if (port >= t->ports[i].lo && port <= t->ports[i].hi)
			return 1;
	return 0;
}

/* Any item admitting the destination. */
int conf_tlist_match(const struct conf_tlist *l, const struct sockaddr *addr, uint16_t port)
{
	uint8_t bytes[16] = { 0 };
	int fam = addr ? conf_sa_bytes(addr, bytes) : 0;

	if (addr && !fam)
		return 0;
	for (size_t i = 0; i < l->n; i++) {
		if (!fam && l->v[i].family)
			continue;
		if (conf_target_match(&l->v[i], fam, bytes, port))
			return 1;
	}
	return 0;
}
