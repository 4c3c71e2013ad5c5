/* xfer.h: `wanem serve` and `wanem get`, a minimal timed TCP file transfer
 * (no protocol beyond "send the bytes, then close", plus an 8-byte receipt for
 * uploads), so the benchmark measures TCP and the link, not an application. */
#ifndef WN_XFER_H
#define WN_XFER_H

/* Runs `wanem serve`; argv[0] is "serve".  Returns the exit status. */
int wn_serve_main(int argc, char **argv);

/* Runs `wanem get`; argv[0] is "get".  Returns the exit status. */
int wn_get_main(int argc, char **argv);

#endif
