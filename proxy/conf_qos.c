/* conf_qos.c: the DiffServ keys: `dscp` (the class the edge marks its main
 * tunnel connections with) and `dscp_tunnels` (classes that get a tunnel
 * connection of their own).  See conf/README.md, "QoS". */
#include <stdio.h>
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

int conf_dscp(const struct conf *c)
{
	return c->dscp;
}

size_t conf_dscp_tunnels(const struct conf *c, const uint8_t **classes)
{
	*classes = c->dscp_tun;
	return c->ndscp_tun;
}

/* The two keys as config text, when set (conf_dump). */
void conf_qos_dump(const struct conf *c, FILE *f)
{
	char n[16];
	if (c->role != CONF_EDGE)
		return;
	if (c->dscp)
		fprintf(f, "dscp = %s\n", tfo_dscp_name(c->dscp, n, sizeof n));
	if (!c->ndscp_tun)
		return;
	fprintf(f, "dscp_tunnels =");
	for (unsigned i = 0; i < c->ndscp_tun; i++)
		fprintf(f, "%s %s", i ? "," : "", tfo_dscp_name(c->dscp_tun[i], n, sizeof n));
	fputc('\n', f);
}
