/* main.c: bin/wanopt subcommand dispatch. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <lz4.h>
#include <openssl/crypto.h>
#include <zstd.h>

#include "cmd.h"
#include "dre_proto.h"
#include "proto.h"

#define WANOPT_VERSION "0.9.0"

struct px_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct px_cmd px_cmds[] = {
	{ "edge", px_cmd_edge, "run the branch-side proxy (-c conf/edge.conf)" },
	{ "core", px_cmd_core, "run the datacenter-side proxy (-c conf/core.conf)" },
	{ "warm", px_cmd_warm, "pre-position files in the peer's store through a running proxy" },
	{ "dre", px_cmd_dre, "encode/decode a stream against a segment store; store stats" },
	{ "conf", px_cmd_conf, "check an edge or core configuration, print the effective one" },
	{ "pki", px_cmd_pki, "create a CA and edge/core certificates for the tunnel" },
	{ "stats", px_cmd_stats, "show a running edge's or core's figures (table or JSON)" },
	{ "intercept", px_cmd_intercept, "check transparent interception rules (pass-through)" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: wanopt COMMAND [ARGS...]\n\n"
		   "wanopt is a WAN optimization proxy pair (edge at the branch, core at the\n"
		   "datacenter).  Commands:\n");
	for (size_t i = 0; i < sizeof px_cmds / sizeof px_cmds[0]; i++)
		fprintf(f, "  %-10s %s\n", px_cmds[i].name, px_cmds[i].summary);
	fprintf(f, "\n'wanopt COMMAND --help' describes each; 'wanopt --version' says which build.\n");
}

/* The version, what it speaks and what it runs on. */
static void version(void)
{
	printf("wanopt %s (tunnel protocol %d-%d, DRE stream %d-%d)\n"
	       "libevent %s, %s, zstd %s, lz4 %s\n",
	       WANOPT_VERSION, PROTO_VERSION_MIN, PROTO_VERSION, DRE_STREAM_VERSION_MIN, DRE_STREAM_VERSION,
	       event_get_version(), OpenSSL_version(OPENSSL_VERSION), ZSTD_versionString(), LZ4_versionString());
}

/* A standard descriptor the caller closed would be taken by the next file
 * opened (a store's lock file became stdout): hold each with /dev/null,
 * opened the wrong way round for stdin and stdout so that using them fails
 * (EBADF) instead of reading nothing or writing into the void. */
static void hold_std_fds(void)
{
	static const int modes[3] = { O_WRONLY, O_RDONLY, O_WRONLY };
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && open("/dev/null", modes[fd]) != fd)
			_exit(127);
}

int main(int argc, char **argv)
{
	hold_std_fds();
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		version();
		return 0;
	}
	for (size_t i = 0; i < sizeof px_cmds / sizeof px_cmds[0]; i++) {
		if (strcmp(argv[1], px_cmds[i].name))
			continue;
		/* getopt names argv[0] in its messages: "wanopt pki: unrecognized option" */
		char name[32];
		snprintf(name, sizeof name, "wanopt %s", px_cmds[i].name);
		argv[1] = name;
		return px_cmds[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "wanopt: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
