/* conf_cli.c: `wanopt conf edge|core [-c FILE] [--key=value...]`: validates a
 * configuration exactly as the daemon would and prints the effective one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "conf.h"
#include "daemon.h"
#include "node.h"

/* The --help text. */
static void conf_usage(FILE *f)
{
	fprintf(f,
		"usage: wanopt conf edge|core [-c FILE] [--key=value...]\n\n"
		"Checks a configuration the way `wanopt edge` / `wanopt core` read it: the file\n"
		"given with -c, then every --key=value (the command line wins), and that the\n"
		"TLS certificate, key and CA files load.  Prints the\n"
		"effective configuration and exits 0, or prints 'FILE:LINE: what is wrong'\n"
		"(or '--key=value: what is wrong') and exits 2.  See conf/edge.conf and\n"
		"conf/core.conf for commented examples.\n\nEdge keys:\n");
	conf_help(f, CONF_EDGE);
	fprintf(f, "\nCore keys:\n");
	conf_help(f, CONF_CORE);
}

/* `wanopt conf edge|core`: 0 valid (effective config printed), 2 invalid. */
int px_cmd_conf(int argc, char **argv)
{
	char err[1024];
	enum conf_role role;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			conf_usage(stdout);
			return 0;
		}
	}
	if (argc < 2) {
		conf_usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "edge") && strcmp(argv[1], "core")) {
		fprintf(stderr, "wanopt conf: unknown role '%s' (edge or core first; see wanopt conf --help)\n",
			argv[1]);
		return 2;
	}
	role = strcmp(argv[1], "edge") ? CONF_CORE : CONF_EDGE;
	struct conf *c = conf_from_args(role, argc - 1, argv + 1, err, sizeof err);
	if (!c || px_daemon_check_tls(c, err, sizeof err) || px_daemon_check_store(c, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		conf_free(c);
		return 2;
	}
	for (size_t i = 0; conf_ignored(c, i); i++)
		fprintf(stderr, "warning: %s\n", conf_ignored(c, i));
	int exp = px_node_tls_expiry(c, err, sizeof err);
	fprintf(stderr, "%s%s\n", exp > 0 ? "warning: " : "", err);
	char *d = conf_dump(c);
	if (d)
		fputs(d, stdout);
	free(d);
	conf_free(c);
	return d ? 0 : 1;
}
