/* fuzz_conf.c: libFuzzer harness for the configuration parser.  The input is
 * split at the first NUL: before it, the config file text; after it, one
 * --key=value override per line.  Both roles are parsed; a successful parse
 * is dumped, re-parsed (the dump must be valid), and queried; its allow list
 * as a core tells it must read back as the same list. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Parses the dump of c again; it must succeed. */
static void fuzz_roundtrip(const struct conf *c, enum conf_role role)
{
	char err[1024];
	char *d = conf_dump(c);
	if (!d)
		return;
	struct conf *c2 = conf_parse(role, "dump", d, 0, NULL, err, sizeof err);
	if (!c2)
		abort(); /* the dump of a valid configuration must parse */
	conf_free(c2);
	free(d);
}

/* One role: parse, query, round-trip. */
static void fuzz_role(enum conf_role role, const char *text, int nargs, char **args)
{
	char err[1024];
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(80) };
	struct conf *c = conf_parse(role, "fuzz.conf", text, nargs, args, err, sizeof err);

	if (!c)
		return;
	s6.sin6_addr.s6_addr[15] = 1;
	conf_allow_match(c, (struct sockaddr *)&s6, 80);
	conf_optimize_for(c, (struct sockaddr *)&s6, 443);
	conf_optimize_for(c, NULL, 22);
	uint8_t wire[16384];
	size_t wn = conf_allow_wire(c, wire, sizeof wire);
	if (wn > 2 || (wn == 2 && (wire[0] | wire[1]) != 0xff)) { /* told: an edge reads the same list */
		struct conf_acl *a = conf_acl_from_wire(wire, wn, err, sizeof err);
		if (!a || conf_acl_match(a, (struct sockaddr *)&s6, 80) != conf_allow_match(c, (struct sockaddr *)&s6, 80))
			abort();
		conf_acl_free(a);
	}
	fuzz_roundtrip(c, role);
	conf_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1), *args[16];
	int nargs = 0;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = 0;
	size_t tl = strlen(buf);
	if (tl < size) {
		char *save = NULL;
		for (char *t = strtok_r(buf + tl + 1, "\n", &save); t && nargs < 16;
		     t = strtok_r(NULL, "\n", &save))
			args[nargs++] = t;
	}
	fuzz_role(CONF_EDGE, buf, nargs, args);
	fuzz_role(CONF_CORE, buf, nargs, args);
	free(buf);
	return 0;
}
