/* xfer.h: `wanem serve` and `wanem get`, a minimal timed TCP file transfer
 * (no protocol beyond "send the bytes, then close", plus an 8-byte receipt for
 * uploads), so the benchmark measures TCP and the link, not an application. */
#ifndef WN_XFER_H
#define WN_XFER_H

#include <sys/socket.h>

/* Runs `wanem serve`; argv[0] is "serve".  Returns the exit status. */
int wn_serve_main(int argc, char **argv);

/* Runs `wanem get`; argv[0] is "get".  Returns the exit status. */
int wn_get_main(int argc, char **argv);

/* Seconds on CLOCK_MONOTONIC. */
double wn_mono(void);

/* Resolves "HOST:PORT" or "[V6]:PORT" (numeric only) into *ss; 0 or -1. */
int wn_resolve(const char *hp, struct sockaddr_storage *ss, socklen_t *len);

/* The start of a subcommand: for prc != 0 (from its option parser: 1 for
 * --help, -1 for bad options) prints "usage: wanem USAGE" and returns the
 * exit status (0 or 2); else resolves addr into *ss (2 with a message if it
 * is not HOST:PORT), ignores SIGPIPE and returns -1: go on. */
int wn_cli_start(int prc, const char *usage, const char *cmd, const char *addr, struct sockaddr_storage *ss,
		 socklen_t *len);

/* A listening TCP socket on ss (SO_REUSEADDR; TCP_WINDOW_CLAMP when window
 * > 0); -1 with errno on failure. */
int wn_listen(const struct sockaddr_storage *ss, socklen_t len, int window);

/* accept() on s, again after EINTR or ECONNABORTED; on failure prints
 * "wanem CMD: accept: ..." and returns -1. */
int wn_accept(int s, const char *cmd);

/* Runs `wanem echo` (argv[0] "echo"): every connection's bytes come back.
 * Returns the exit status. */
int wn_echo_main(int argc, char **argv);

/* Runs `wanem rtt` (argv[0] "rtt"): timed echo round trips on one
 * connection, summarised as one JSON line.  Returns the exit status. */
int wn_rtt_main(int argc, char **argv);

#endif
