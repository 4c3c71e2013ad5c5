/* wanem.c: the wanem command: a WAN link emulator between two network
 * namespaces, plus the small tools the tests and benchmark measure it with. */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emu.h"
#include "ping.h"
#include "profile.h"
#include "xfer.h"

/* Prints the command usage to f. */
static void usage(FILE *f)
{
	fprintf(f,
		"usage: wanem [run] PROFILE [options]   emulate the link between two namespaces\n"
		"         --ns=A,B          namespaces of side A (branch) and B (datacenter);\n"
		"                           created if missing, removed at exit  [wnm-a,wnm-b]\n"
		"         --dev=NAME        TUN device name on both sides        [wnm0]\n"
		"         --addr=IPA,IPB/N  IPv4 addresses of the two sides     [10.77.0.1,10.77.0.2/24]\n"
		"         --seed=N          loss and jitter seed                 [1]\n"
		"         --stats=FILE      JSON counters, rewritten every second and on SIGUSR1\n"
		"         --ready=FILE      written with the pid once the link is up (removed at exit)\n"
		"         --duration=S      stop after S seconds (default: at SIGINT/SIGTERM)\n"
		"         --rt              run with SCHED_FIFO priority (steadier timing on a busy host)\n"
		"       wanem check PROFILE         validate a profile, print it as shell variables\n"
		"       wanem ping [opts] IPV4      ICMP round-trip meter (wanem ping --help)\n"
		"       wanem serve|get [opts]      timed TCP transfer (wanem serve --help)\n"
		"       wanem echo|rtt [opts]       timed echo round trips (wanem rtt --help)\n"
		"PROFILE: a profile file, or the name of one in netem/profiles (t1, highlat, ...)\n");
}

/* Splits "A,B" into two strings, copied into buf (argv stays intact, so
 * /proc/PID/cmdline still shows what we were started with). */
static int split2(const char *arg, char *buf, size_t n, const char **a, const char **b)
{
	char *c, *s = buf;

	if (strlen(arg) >= n)
		return -1;
	memcpy(buf, arg, strlen(arg) + 1);
	c = strchr(s, ',');

	if (!c || c == s || !c[1] || strchr(c + 1, ','))
		return -1;
	*c = '\0';
	*a = s;
	*b = c + 1;
	return 0;
}

/* Parses --addr=IPA,IPB[/N] into the conf (strings kept in buf). */
static int parse_addr(const char *arg, char *buf, size_t n, struct wn_emu_conf *c)
{
	const char *slash = strchr(arg, '/');
	char *end;

	if (slash) {
		c->prefix = (int)strtol(slash + 1, &end, 10);
		if (*end || end == slash + 1 || c->prefix < 1 || c->prefix > 30)
			return -1;
	}
	if (split2(arg, buf, n, &c->addr[0], &c->addr[1]) < 0)
		return -1;
	if ((end = strchr(buf + strlen(buf) + 1, '/')))
		*end = '\0';
	return 0;
}

/* Asks for real-time scheduling; a failure only costs timing accuracy. */
static void go_realtime(void)
{
	struct sched_param sp = { .sched_priority = 50 };

	if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
		fprintf(stderr, "wanem: SCHED_FIFO unavailable (%s); timing may suffer under load\n",
			strerror(errno));
}

/* Load PROFILE: a file, or a name (t1) standing for netem/profiles/NAME.conf
 * of the tree this binary was built in (bin/../netem/profiles, or, for a
 * build elsewhere such as build/asan/bin, the tree the Makefile names in
 * WANEM_PROFILE_DIR), as netem.sh and netem/testbed take it.  0, or -1 with
 * err set. */
static int load_profile(const char *arg, struct wn_profile *p, char *err, size_t errlen)
{
	char exe[4096], path[4200];
	ssize_t n;
	if (strchr(arg, '/') || !access(arg, F_OK))
		return wn_profile_load(arg, p, err, errlen);
	if ((n = readlink("/proc/self/exe", exe, sizeof exe - 1)) > 0) {
		exe[n] = 0;
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = 0;
			snprintf(path, sizeof path, "%s/../netem/profiles/%s.conf", exe, arg);
			if (!access(path, F_OK))
				return wn_profile_load(path, p, err, errlen);
		}
	}
#ifdef WANEM_PROFILE_DIR
	snprintf(path, sizeof path, "%s/%s.conf", WANEM_PROFILE_DIR, arg);
	if (!access(path, F_OK))
		return wn_profile_load(path, p, err, errlen);
#endif
	return wn_profile_load(arg, p, err, errlen);
}

/* The emulator subcommand. */
static int run_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ns", 1, 0, 'n' }, { "dev", 1, 0, 'd' }, { "addr", 1, 0, 'a' }, { "seed", 1, 0, 's' },
		{ "stats", 1, 0, 'S' }, { "ready", 1, 0, 'r' }, { "duration", 1, 0, 't' },
		{ "rt", 0, 0, 'R' }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 },
	};
	struct wn_emu_conf c = { .ns = { "wnm-a", "wnm-b" }, .dev = "wnm0",
				 .addr = { "10.77.0.1", "10.77.0.2" }, .prefix = 24, .seed = 1 };
	struct wn_profile p;
	char err[512], *end, nsbuf[160], addrbuf[80];
	int o, rt = 0;

	const char *why = NULL;
	int li = 0;
	while ((o = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		switch (o) {
		case 'n':
			if (split2(optarg, nsbuf, sizeof nsbuf, &c.ns[0], &c.ns[1]) < 0)
				why = "expected A,B (two namespace names)";
			break;
		case 'd': c.dev = optarg; break;
		case 'a':
			if (parse_addr(optarg, addrbuf, sizeof addrbuf, &c) < 0)
				why = "expected A,B[/PREFIX] (two IPv4 addresses, prefix 1-30)";
			break;
		case 's':
			c.seed = strtoull(optarg, &end, 0);
			if (*end || end == optarg || *optarg == '-')
				why = "expected a number, 0 or more";
			break;
		case 'S': c.stats_path = optarg; break;
		case 'r': c.ready_path = optarg; break;
		case 't':
			c.duration_s = strtod(optarg, &end);
			if (*end || end == optarg || c.duration_s < 0)
				why = "expected seconds, 0 or more (0: until signalled)";
			break;
		case 'R': rt = 1; break;
		case 'h': usage(stdout); return 0;
		default: goto bad;
		}
		if (why) {
			fprintf(stderr, "wanem: --%s=%s: %s\n", opts[li].name, optarg, why);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "wanem: expected one PROFILE (--help for usage)\n");
		return 2;
	}
	FILE *sf = c.stats_path ? fopen(c.stats_path, "w") : NULL; /* written at the end: writable now? */
	if (c.stats_path && !sf) {
		fprintf(stderr, "wanem: --stats=%s: %s\n", c.stats_path, strerror(errno));
		return 2;
	}
	if (sf)
		fclose(sf);
	if (load_profile(argv[optind], &p, err, sizeof err) < 0) {
		fprintf(stderr, "wanem: %s\n", err);
		return 2;
	}
	if (rt)
		go_realtime();
	if (wn_emu_run(&p, &c, err, sizeof err) < 0) {
		fprintf(stderr, "wanem: %s\n", err);
		return 1;
	}
	return 0;
bad:
	usage(stderr);
	return 2;
}

/* `wanem check PROFILE`: parse and print as shell variables. */
static int check_main(int argc, char **argv)
{
	struct wn_profile p;
	char err[512];

	int help = argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
	if (argc != 2 || help) {
		fprintf(help ? stdout : stderr, "usage: wanem check PROFILE   (a file, or a name of netem/profiles: t1)\n");
		return help ? 0 : 2;
	}
	if (load_profile(argv[1], &p, err, sizeof err) < 0) {
		fprintf(stderr, "wanem: %s\n", err);
		return 2;
	}
	wn_profile_print_shell(&p, stdout);
	return 0;
}

/* Dispatches to the subcommand; the emulator is the default. */
int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";

	if (strcmp(cmd, "check") == 0)
		return check_main(argc - 1, argv + 1);
	if (strcmp(cmd, "ping") == 0)
		return wn_ping_main(argc - 1, argv + 1);
	if (strcmp(cmd, "serve") == 0)
		return wn_serve_main(argc - 1, argv + 1);
	if (strcmp(cmd, "echo") == 0)
		return wn_echo_main(argc - 1, argv + 1);
	if (strcmp(cmd, "rtt") == 0)
		return wn_rtt_main(argc - 1, argv + 1);
	if (strcmp(cmd, "get") == 0)
		return wn_get_main(argc - 1, argv + 1);
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "run") == 0)
		return run_main(argc - 1, argv + 1);
	return run_main(argc, argv);
}
