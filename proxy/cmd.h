/* cmd.h: the subcommands of bin/wanopt.  Each takes argv from the subcommand
 * name on (argv[0] is "wanopt NAME", which getopt's messages begin with) and
 * returns the process exit status:
 * 0 success, 1 runtime failure, 2 usage or configuration error. */
#ifndef WANOPT_CMD_H
#define WANOPT_CMD_H

int px_cmd_dre(int argc, char **argv);
int px_cmd_conf(int argc, char **argv);
int px_cmd_pki(int argc, char **argv);
int px_cmd_stats(int argc, char **argv);
int px_cmd_intercept(int argc, char **argv);
int px_cmd_edge(int argc, char **argv);
int px_cmd_core(int argc, char **argv);
int px_cmd_warm(int argc, char **argv);

#endif
