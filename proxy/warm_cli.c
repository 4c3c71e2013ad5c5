/* warm_cli.c: `wanopt warm --stats=HOST:PORT FILE...`: asks the proxy serving
 * that stats address to push the files' chunks into its peers' stores, and
 * waits for the answer. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "cmd.h"
#include "conf.h"

#define WARM_DEFAULT_ADDR "127.0.0.1:9471"

static void warm_usage(FILE *f)
{
	fprintf(f, "usage: wanopt warm [--stats=HOST:PORT] [--timeout=SECONDS] FILE...\n\n"
		   "Run next to an edge or a core: pushes the files' chunks through its tunnel\n"
		   "into the peer's segment store (nothing is delivered to any client), so the\n"
		   "first real transfer of that data is already hot.  HOST:PORT is the proxy's\n"
		   "`stats` address (default " WARM_DEFAULT_ADDR "); the files are read by the\n"
		   "proxy, so give paths it can open.  Waits until every push ended\n"
		   "(default timeout 3600 s).\n");
}

/* Connect to the proxy; -1 with a message on failure. */
static int warm_connect(const struct conf_addr *a, int timeout)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	char port[8];
	snprintf(port, sizeof port, "%u", a->port);
	int rc = getaddrinfo(a->host, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "wanopt warm: %s: %s\n", a->host, gai_strerror(rc));
		return -1;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = { timeout, 0 };
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	}
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
		fprintf(stderr, "wanopt warm: %s:%u: %s\n", a->host, a->port, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

/* Reads the proxy's answer from f.  Its report (JSON: 200, or 500 when a
 * push failed) goes to stdout; any answer but 200 is also one line on
 * stderr with the status and reason (an error page's HTML is not shown).
 * Returns the exit status: 0 for 200, else 1. */
static int warm_answer(FILE *f)
{
	char line[512], reason[256] = "";
	int status = 0, json = 0, inbody = 0;
	while (fgets(line, sizeof line, f)) {
		if (inbody) {
			if (json)
				fputs(line, stdout);
		} else if (!status) {
			if (sscanf(line, "HTTP/%*s %d %255[^\r\n]", &status, reason) < 1)
				break;
		} else if (!strcmp(line, "\r\n") || !strcmp(line, "\n")) {
			inbody = 1;
		} else if (!strncasecmp(line, "Content-Type:", 13) && strstr(line, "application/json")) {
			json = 1;
		}
	}
	if (status == 200)
		return 0;
	if (!status)
		fprintf(stderr, "wanopt warm: no HTTP answer from the proxy (is that its stats address?)\n");
	else
		fprintf(stderr, "wanopt warm: the proxy answered %d \"%s\"%s\n", status, reason,
			status == 404 ? " (is that its stats address?)"
			: status == 500 && json ? ": not every file was pushed (the answer's \"errors\" say why)" : "");
	return 1;
}

int px_cmd_warm(int argc, char **argv)
{
	static const struct option opts[] = { { "stats", required_argument, 0, 's' },
					      { "timeout", required_argument, 0, 't' },
					      { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
	struct conf_addr a;
	conf_addr_parse(WARM_DEFAULT_ADDR, &a);
	int timeout = 3600, ch;
	const char *e;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (ch == 's' && (e = conf_addr_parse(optarg, &a))) {
			fprintf(stderr, "wanopt warm: --stats=%s: %s\n", optarg, e);
			return 2;
		} else if (ch == 't' && (timeout = atoi(optarg)) <= 0) {
			fprintf(stderr, "wanopt warm: --timeout=%s: want seconds > 0\n", optarg);
			return 2;
		} else if (ch == 'h') {
			warm_usage(stdout);
			return 0;
		} else if (ch == '?') {
			warm_usage(stderr);
			return 2;
		}
	}
	if (optind == argc) {
		warm_usage(stderr);
		return 2;
	}
	char *body = NULL;
	size_t blen = 0;
	FILE *bf = open_memstream(&body, &blen);
	for (int i = optind; i < argc; i++) {
		char path[PATH_MAX];
		if (!realpath(argv[i], path)) {
			fprintf(stderr, "wanopt warm: %s: %s\n", argv[i], strerror(errno));
			fclose(bf);
			free(body);
			return 2;
		}
		fprintf(bf, "%s\n", path);
	}
	fclose(bf);
	int fd = warm_connect(&a, timeout);
	if (fd < 0) {
		free(body);
		return 1;
	}
	FILE *f = fdopen(fd, "r+");
	fprintf(f, "POST /warm HTTP/1.0\r\nHost: %s\r\nContent-Length: %zu\r\n\r\n%s", a.host, blen, body);
	fflush(f);
	free(body);
	int rc = warm_answer(f);
	fclose(f);
	return rc;
}
