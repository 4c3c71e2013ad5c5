/* conf_qos.c: the DiffServ keys: `dscp` (the class the edge marks its main
 * tunnel connections with), `dscp_tunnels` (classes that get a tunnel
 * connection of their own) and `classify` (the class of unmarked client
 * connections by destination).  See conf/README.md, "QoS". */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf_int.h"
#include "tfo.h"

#define CLASS_HELP "a class is csN, afXY, ef, default or a number 0-63"

/* dscp = CLASS */
int conf_set_dscp(struct conf *c, const char *v, char *msg, size_t len)
{
	int d = tfo_dscp_parse(v);
	if (d < 0) {
		snprintf(msg, len, "unknown DSCP class '%s' (%s)", v, CLASS_HELP);
		return -1;
	}
	c->dscp = d;
	return 0;
}

/* dscp_tunnels = CLASS[, CLASS...] (none: "none") */
int conf_set_dscp_tunnels(struct conf *c, const char *v, char *msg, size_t len)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof buf, "%s", v);
	c->ndscp_tun = 0;
	if (!strcmp(v, "none"))
		return 0;
	for (char *t = strtok_r(buf, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
		int d = tfo_dscp_parse(t);
		if (d < 0) {
			snprintf(msg, len, "unknown DSCP class '%s' (%s)", t, CLASS_HELP);
			return -1;
		}
		if (memchr(c->dscp_tun, d, c->ndscp_tun)) {
			snprintf(msg, len, "DSCP class '%s' is listed twice", t);
			return -1;
		}
		if (c->ndscp_tun == CONF_DSCP_TUNNELS_MAX) {
			snprintf(msg, len, "at most %d classes", CONF_DSCP_TUNNELS_MAX);
			return -1;
		}
		c->dscp_tun[c->ndscp_tun++] = (uint8_t)d;
	}
	if (!c->ndscp_tun) {
		snprintf(msg, len, "expected one or more classes, or none (%s)", CLASS_HELP);
		return -1;
	}
	return 0;
}

/* classify = CLASS CIDR[:PORTS], ... */
int conf_set_classify(struct conf *c, const char *v, char *msg, size_t len)
{
	char name[16];
	size_t wl = strcspn(v, " \t");
	const char *rest = v + wl;
	while (isspace((unsigned char)*rest))
		rest++;
	if (!wl || !*rest) {
		snprintf(msg, len, "expected CLASS CIDR[:PORTS], ... (%s)", CLASS_HELP);
		return -1;
	}
	snprintf(name, sizeof name, "%.*s", (int)wl, v);
	int d = wl < sizeof name ? tfo_dscp_parse(name) : -1;
	if (d < 0) {
		snprintf(msg, len, "unknown DSCP class '%.*s' (%s)", (int)wl, v, CLASS_HELP);
		return -1;
	}
	struct conf_class_rule *nv = realloc(c->cls, (c->ncls + 1) * sizeof *nv);
	if (!nv) {
		snprintf(msg, len, "out of memory");
		return -1;
	}
	c->cls = nv;
	struct conf_class_rule *r = &c->cls[c->ncls];
	memset(r, 0, sizeof *r);
	r->dscp = d;
	if (conf_tlist_parse(&r->targets, rest, msg, len) < 0) {
		conf_tlist_clear(&r->targets);
		return -1;
	}
	if (!(r->text = strdup(v))) {
		conf_tlist_clear(&r->targets);
		snprintf(msg, len, "out of memory");
		return -1;
	}
	c->ncls++;
	return 0;
}

/* Drops every classify rule. */
void conf_reset_classify(struct conf *c)
{
	for (size_t i = 0; i < c->ncls; i++) {
		conf_tlist_clear(&c->cls[i].targets);
		free(c->cls[i].text);
	}
	free(c->cls);
	c->cls = NULL;
	c->ncls = 0;
}

int conf_classify(const struct conf *c, const struct sockaddr *addr, uint16_t port)
{
	for (size_t i = 0; i < c->ncls; i++)
		if (conf_tlist_match(&c->cls[i].targets, addr, port))
			return c->cls[i].dscp;
	return -1;
}

int conf_dscp(const struct conf *c)
{
	return c->dscp;
}

size_t conf_dscp_tunnels(const struct conf *c, const uint8_t **classes)
{
	*classes = c->dscp_tun;
	return c->ndscp_tun;
}

/* The three keys as config text, when set (conf_dump). */
void conf_qos_dump(const struct conf *c, FILE *f)
{
	char n[16];
	if (c->role != CONF_EDGE)
		return;
	if (c->dscp)
		fprintf(f, "dscp = %s\n", tfo_dscp_name(c->dscp, n, sizeof n));
	if (c->ndscp_tun) {
		fprintf(f, "dscp_tunnels =");
		for (unsigned i = 0; i < c->ndscp_tun; i++)
			fprintf(f, "%s %s", i ? "," : "", tfo_dscp_name(c->dscp_tun[i], n, sizeof n));
		fputc('\n', f);
	}
	for (size_t i = 0; i < c->ncls; i++)
		fprintf(f, "classify = %s\n", c->cls[i].text);
}
