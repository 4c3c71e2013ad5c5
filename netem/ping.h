/* ping.h: `wanem ping`, an ICMP echo round-trip meter with µs resolution
 * (kernel receive timestamps), for measuring the emulated link. */
#ifndef WN_PING_H
#define WN_PING_H

/* Runs the ping subcommand; argv[0] is "ping".  Returns the exit status. */
int wn_ping_main(int argc, char **argv);

#endif
