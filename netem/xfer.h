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

/* Runs `wanem echo` (argv[0] "echo"): every connection's bytes come back.
 * Returns the exit status. */
int wn_echo_main(int argc, char **argv);

/* Runs `wanem rtt` (argv[0] "rtt"): timed echo round trips on one
 * connection, summarised as one JSON line.  Returns the exit status. */
int wn_rtt_main(int argc, char **argv);

#endif
