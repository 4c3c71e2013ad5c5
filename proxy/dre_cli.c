/* dre_cli.c: `wanopt dre encode|decode|stats|check --store DIR`: the DRE codec
 * on stdin/stdout against a persistent store, for benchmarks and for users
 * sizing their cache. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "dre.h"
#include "dre_proto.h"

#define IO_BLOCK (4u << 20) /* bytes per read: several frames */
/* Input bytes per frame unless --frame says: larger than a stream's frames in
 * the proxy, since a bulk run cares for throughput only.  Against 1 MiB, on
 * the benchmark's corpora: (a) v1 encodes 1.07x and (c) 1.05x faster (fewer
 * hand-overs between threads, and more zstd jobs per frame to run at once),
 * (a) v1's output is 0.7 % smaller, its decode 3 % slower (medians of 20
 * alternating runs each), peak RSS 2-3 MiB more.  But at most a 256th of the
 * store (and at least CLI_FRAME_MIN): the encoder references nothing in the
 * oldest frame or two of the store (its eviction horizon), which in a small
 * store is a large share of it (dre_evict.test.sh, 8 MiB stores: 21.1 MB
 * sent with 1 MiB frames, 13.9 MB with 64 KiB). */
#define CLI_FRAME (2u << 20)
#define CLI_FRAME_MIN (64u << 10)
#define OUT_PIPE (1 << 20) /* half a decoded frame of CLI_FRAME; most a pipe may hold unprivileged */
#define OUT_RESERVE (8u << 20) /* a regular file's blocks reserved ahead of the writes */

struct cli {
	const char *store;
	uint64_t size;
	int json, verbose, sync;
	dre_enc_opts eo;
	const char *enc_only; /* the first encoder option given (--lz, --chunks, ...) */
};

static void dre_usage(FILE *f)
{
	fprintf(f,
		"usage: wanopt dre encode --store DIR [options] < input > encoded\n"
		"       wanopt dre decode --store DIR [options] < encoded > output\n"
		"       wanopt dre stats --store DIR [--json]\n"
		"       wanopt dre check --store DIR\n"
		"\n"
		"encode/decode run the DRE codec against a persistent segment store: what one\n"
		"run learns, the next run (and the peer's decoder with its own DIR) reuses.\n"
		"check reads the whole store: the index against the data files, and every\n"
		"chunk's bytes against its checksum and SHA-256 fingerprint.\n"
		"options:\n"
		"  --store DIR        segment store directory (created if absent)\n"
		"  --store-size SIZE  bound on the store's disk use, e.g. 512M, 4G; kept with the store\n"
		"                     (default: the size it was last given, else 1G)\n"
		"  --lz MODE          residual coder: auto (default), zstd, lz4, none\n"
		"  --level N          zstd level 1..19 (default 3, or by --link-rate); not with lz4/none;\n"
		"                     zstd runs on a thread per processor (up to 4) unless --link-rate\n"
		"                     is 20M or less, where the output's size counts more\n"
		"  --link-rate BPS    link speed hint for --lz auto, bits/s (k/M/G suffixes)\n"
		"  --frame SIZE       input bytes per frame (default 2M, at most a 256th of --store-size)\n"
		"  --no-dedup         LZ only: no references, nothing stored\n"
		"  --sync             make the store durable (fdatasync) before exiting\n"
		"  --chunks MIN:AVG:MAX  content-defined chunk sizes in bytes (default 2048:4096:16384)\n"
		"  --format N         stream format version to write, for an older build's decoder:\n"
		"                     1 (XXH64 checksums), 2, 3 (repeats as AGAIN; default)\n"
		"  -v, --verbose      print what was sent how on stderr\n"
		"  --json             stats as JSON\n"
		"Environment: WANOPT_STORE_READS=window|map: how runs of stored chunks are read\n"
		"(128 KiB preads, or the store's mappings; default: the faster here, as measured\n"
		"at start and then on the store's own reads)\n");
}

/* Parse "123", "4k", "512M", "4G" (powers of 1024, or 1000 when si); 0 on success. */
static int parse_size(const char *s, int si, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	uint64_t m = 1, k = si ? 1000 : 1024;
	switch (*end) {
	case 'k': case 'K': m = k; end++; break;
	case 'm': case 'M': m = k * k; end++; break;
	case 'g': case 'G': m = k * k * k; end++; break;
	case 't': case 'T': m = k * k * k * k; end++; break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || (v && m > UINT64_MAX / v))
		return -1;
	*out = v * m;
	return 0;
}

/* Parse the options after the action; 0, or 2 after printing why. */
static int parse_args(int argc, char **argv, struct cli *c)
{
	static const struct option opts[] = {
		{ "store", required_argument, 0, 's' }, { "store-size", required_argument, 0, 'S' },
		{ "lz", required_argument, 0, 'z' },    { "level", required_argument, 0, 'l' },
		{ "link-rate", required_argument, 0, 'r' }, { "frame", required_argument, 0, 'f' },
		{ "no-dedup", no_argument, 0, 'n' },    { "json", no_argument, 0, 'j' },
		{ "verbose", no_argument, 0, 'v' },     { "help", no_argument, 0, 'h' },
		{ "sync", no_argument, 0, 'y' },         { "chunks", required_argument, 0, 'c' },
		{ "format", required_argument, 0, 'F' },
		{ 0, 0, 0, 0 } };
	int ch;
	uint64_t v;
	optind = 1;
	int at;
	while ((ch = getopt_long(argc, argv, "vh", opts, &at)) != -1) {
		if (strchr("zlrfncF", ch) && !c->enc_only)
			c->enc_only = opts[at].name;
		switch (ch) {
		case 's': c->store = optarg; break;
		case 'S':
			if (parse_size(optarg, 0, &c->size) || c->size < (1u << 20)) {
				fprintf(stderr, "wanopt dre: --store-size '%s': want a size of at least 1M, e.g. 4G\n", optarg);
				return 2;
			}
			break;
		case 'z':
			if (!strcmp(optarg, "auto")) c->eo.lz = DRE_LZ_AUTO;
			else if (!strcmp(optarg, "zstd")) c->eo.lz = DRE_LZ_ZSTD;
			else if (!strcmp(optarg, "lz4")) c->eo.lz = DRE_LZ_LZ4;
			else if (!strcmp(optarg, "none")) c->eo.lz = DRE_LZ_NONE;
			else {
				fprintf(stderr, "wanopt dre: --lz '%s': want auto, zstd, lz4 or none\n", optarg);
				return 2;
			}
			break;
		case 'l':
			if (parse_size(optarg, 1, &v) || v < 1 || v > 19) {
				fprintf(stderr, "wanopt dre: --level '%s': want 1..19\n", optarg);
				return 2;
			}
			c->eo.level = (int)v;
			break;
		case 'r':
			if (parse_size(optarg, 1, &c->eo.link_bps) || !c->eo.link_bps) {
				fprintf(stderr, "wanopt dre: --link-rate '%s': want bits/s, e.g. 1544k or 100M\n", optarg);
				return 2;
			}
			break;
		case 'f':
			if (parse_size(optarg, 0, &v) || v < 4096 || v > (8u << 20)) {
				fprintf(stderr, "wanopt dre: --frame '%s': want 4k..8M\n", optarg);
				return 2;
			}
			c->eo.frame_max = v;
			break;
		case 'F':
			if (parse_size(optarg, 1, &v) || v < DRE_STREAM_VERSION_MIN || v > DRE_STREAM_VERSION) {
				fprintf(stderr, "wanopt dre: --format '%s': want %d..%d\n", optarg, DRE_STREAM_VERSION_MIN,
					DRE_STREAM_VERSION);
				return 2;
			}
			c->eo.version = (int)v;
			break;
		case 'n': c->eo.no_dedup = 1; break;
		case 'y': c->sync = 1; break;
		case 'c':
			at = -1;
			if (sscanf(optarg, "%u:%u:%u%n", &c->eo.chunk_min, &c->eo.chunk_avg, &c->eo.chunk_max, &at) != 3 ||
			    optarg[at] || strchr(optarg, '-') ||
			    c->eo.chunk_min < 64 || c->eo.chunk_min >= c->eo.chunk_avg ||
			    c->eo.chunk_avg >= c->eo.chunk_max || c->eo.chunk_max > DRE_CHUNK_MAX) {
				fprintf(stderr, "wanopt dre: --chunks '%s': want MIN:AVG:MAX bytes, 64 <= MIN < AVG < MAX <= %u\n",
					optarg, DRE_CHUNK_MAX);
				return 2;
			}
			break;
		case 'j': c->json = 1; break;
		case 'v': c->verbose = 1; break;
		case 'h': dre_usage(stdout); exit(0);
		default: dre_usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "wanopt dre: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!c->store) {
		fprintf(stderr, "wanopt dre: --store DIR is required\n");
		return 2;
	}
	if (c->eo.level && (c->eo.lz == DRE_LZ_LZ4 || c->eo.lz == DRE_LZ_NONE)) {
		fprintf(stderr, "wanopt dre: --level is a zstd level: not with --lz %s\n",
			c->eo.lz == DRE_LZ_LZ4 ? "lz4" : "none");
		return 2;
	}
	return 0;
}

/* If fd 1 is a pipe, let it hold OUT_PIPE bytes: with the default 64 KiB,
 * writing one decoded frame wakes the reader 32 times.  A failure (an older
 * kernel, a lower pipe-max-size) leaves the pipe as it was. */
static void grow_out_pipe(void)
{
	int have = fcntl(STDOUT_FILENO, F_GETPIPE_SZ);
	if (have > 0 && have < OUT_PIPE)
		(void)fcntl(STDOUT_FILENO, F_SETPIPE_SZ, OUT_PIPE);
}

/* Output to fd 1.  A regular file that is not opened for appending gets its
 * blocks reserved OUT_RESERVE bytes ahead of the writes (FALLOC_FL_KEEP_SIZE:
 * its size stays what was written), as the store's data files do: ext4 then
 * writes into the page cache without its delayed allocation's bookkeeping
 * (200 MiB written by dd after such a reservation: 0.073 s against 0.087,
 * medians of 12 alternating runs).  out_end() gives back what was reserved
 * past the end.  A file system without fallocate just writes. */
static struct {
	int on;               /* reserving */
	uint64_t at, upto;    /* the write offset; reserved up to here */
} out_res;
static int out_errno; /* why writing stdout failed */

static void out_begin(void)
{
	struct stat sb;
	int fl = fcntl(STDOUT_FILENO, F_GETFL);
	off_t at = lseek(STDOUT_FILENO, 0, SEEK_CUR);
	out_res.on = fl >= 0 && !(fl & O_APPEND) && at >= 0 && !fstat(STDOUT_FILENO, &sb) && S_ISREG(sb.st_mode);
	out_res.at = out_res.upto = out_res.on ? (uint64_t)at : 0;
}

/* Reserve ahead of a write of n bytes at out_res.at. */
static void out_reserve(size_t n)
{
	if (!out_res.on || out_res.at + n <= out_res.upto)
		return;
	uint64_t to = out_res.at + n + OUT_RESERVE;
	if (fallocate(STDOUT_FILENO, FALLOC_FL_KEEP_SIZE, (off_t)out_res.upto, (off_t)(to - out_res.upto)))
		out_res.on = 0; /* unsupported, or the disk is full: the writes will say */
	else
		out_res.upto = to;
}

static void out_end(void)
{
	struct stat sb;
	if (out_res.upto > out_res.at && !fstat(STDOUT_FILENO, &sb) && (uint64_t)sb.st_size == out_res.at)
		(void)!ftruncate(STDOUT_FILENO, sb.st_size); /* the size it has: frees the blocks past it */
}

static int write_out(void *arg, const void *buf, size_t n)
{
	const char *p = buf;
	out_reserve(n);
	while (n) {
		ssize_t w = write(STDOUT_FILENO, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			out_errno = w < 0 ? errno : EIO;
			return -1;
		}
		p += w;
		out_res.at += (uint64_t)w;
		n -= (size_t)w;
	}
	return 0;
}

static void print_codec(const char *what, const dre_codec_stats *s)
{
	fprintf(stderr,
		"wanopt dre %s: %" PRIu64 " bytes in, %" PRIu64 " out, %" PRIu64 " frames; "
		"refs %" PRIu64 ", deltas %" PRIu64 ", literals %" PRIu64 " bytes; lz %" PRIu64 " -> %" PRIu64
		"; hashed %" PRIu64 ", cut %" PRIu64 "\n",
		what, s->in_bytes, s->out_bytes, s->frames, s->ref_bytes, s->delta_bytes, s->lit_bytes,
		s->lz_in, s->lz_out, s->hashed_bytes, s->cut_bytes);
}

/* A store file shrank under the store's mapping of it (truncated behind our
 * back by another process): reading past the new end raises SIGBUS, on
 * whichever codec thread touched the page.  Nothing sensible can continue,
 * so say so and exit (the store survives a stop at any point; the encoded
 * output is cut short, which a decoder reports). */
static void on_sigbus(int sig)
{
	static const char msg[] = "wanopt dre: a mapped file shrank while being read (a store file changed by another "
				  "process)\n";
	(void)sig;
	ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
	(void)w;
	_exit(1);
}

/* Say how an encode (e) or decode (d) run ended: rc, its error, where `at`
 * input bytes were read (said: the error was reported where it happened); a
 * decode whose input stopped before the end frame becomes DRE_ECORRUPT.
 * Otherwise, with --verbose, it prints the run's figures.  Returns rc. */
static int codec_report(const struct cli *c, dre_enc *e, dre_dec *d, int rc, uint64_t at, int said)
{
	int decode = d != NULL;
	dre_codec_stats s;
	if (!rc && decode && !dre_dec_ended(d)) {
		fprintf(stderr, "wanopt dre decode: the input (%" PRIu64 " bytes, %" PRIu64 " frames) ends before the "
				"stream's end frame: truncated, or not from wanopt dre encode\n", at, dre_dec_applied(d));
		return DRE_ECORRUPT;
	}
	if (rc == DRE_EOUT && out_errno) {
		fprintf(stderr, "wanopt dre %s: writing stdout: %s\n", decode ? "decode" : "encode", strerror(out_errno));
	} else if (rc && !said && decode) {
		fprintf(stderr, "wanopt dre decode: input bytes ..%" PRIu64 " (after frame %" PRIu64 "): %s\n", at,
			dre_dec_applied(d), dre_strerror(rc));
		if (rc == DRE_EMISS || rc == DRE_ECHECKSUM) /* a damaged stream fails its checksum too */
			fprintf(stderr, "wanopt dre decode: %sthis store is not in step with the encoder's: decode "
					"every encoded stream, in order, into a store of the same --store-size\n",
				rc == DRE_ECHECKSUM ? "the stream is damaged, or " : "");
	} else if (rc && !said) {
		fprintf(stderr, "wanopt dre encode: %s\n", dre_strerror(rc));
	} else if (c->verbose) {
		if (decode)
			dre_dec_get_stats(d, &s);
		else
			dre_enc_get_stats(e, &s);
		print_codec(decode ? "decode" : "encode", &s);
	}
	return rc;
}

/* What a run takes from the store it opened: the encoder's frame size (a
 * 256th of the store, within CLI_FRAME_MIN..CLI_FRAME) unless given, and a
 * word on an environment setting the store ignored. */
static void codec_setup(struct cli *c, dre_store *st, int decode)
{
	dre_store_stats ss;
	dre_store_get_stats(st, &ss);
	if (ss.reads_ignored)
		fprintf(stderr, "wanopt dre: WANOPT_STORE_READS=%s names no way (window or map): ignored\n",
			ss.reads_ignored);
	if (!decode && !c->eo.frame_max) { /* frames are the encoder's */
		uint64_t f = ss.size_limit / 256;
		c->eo.frame_max = f > CLI_FRAME ? CLI_FRAME : f < CLI_FRAME_MIN ? CLI_FRAME_MIN : (size_t)f;
	}
}

/* Pump stdin through the encoder or decoder.  A regular file is read like
 * a pipe, into the encoder's buffer: mapping it instead (as from 2026-11-30
 * to 12-02 and on 12-03) saved the copy but made the kernel set up a page
 * table entry per page, which this kind of VM makes dear.  On 2026-12-04,
 * reading 210 MB took 23-27 ms, mapping and touching it 78-117; encoding
 * corpus (c) took 0.24-0.27 s read against 0.37 s mapped (4 alternating
 * runs), 76-80 % of `openssl dgst`'s speed against 54-55 % (bench/dre.sh,
 * 2 runs each).  Where mapping won, on the VM of 12-03, it took 0.93-0.96x
 * the time.  On 2026-12-06 mapping (as up to 4564c5f) was tried again where
 * the store's probe (rprobe.c) found its mappings faster than reads, and
 * lost even there: encode, bench/dre_bench.py, 3 alternating runs each,
 * (c) repeat 3,547-3,719 MB/s mapped against 4,127-4,570 read, (a) repeat
 * 2,392-2,441 against 2,590-2,763, (c) v1 1,337-1,539 against 1,376-1,723;
 * so the probe's verdict does not carry over to the input. */
static int run_codec(struct cli *c, int decode)
{
	char err[512];
	struct sigaction sa = { .sa_handler = on_sigbus };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	dre_store_opts so = { .size_limit = c->size, .create = 1, .batch = 1 };
	dre_store *st = dre_store_open(c->store, &so, err, sizeof err);
	if (!st) {
		fprintf(stderr, "wanopt dre: %s\n", err);
		return 1;
	}
	codec_setup(c, st, decode);
	c->eo.threaded = 1; /* the CLI owns its thread: overlap LZ with chunking */
	grow_out_pipe();
	out_begin();
	dre_enc *e = decode ? NULL : dre_enc_new(st, &c->eo);
	dre_dec *d = decode ? dre_dec_new(st) : NULL;
	int rc = !e && !d ? DRE_ENOMEM : 0;
	if (!rc && d)
		rc = dre_dec_set_threaded(d, 1);
	uint64_t at = 0;
	int said = 0; /* the error was reported where it happened */
	while (!rc) {
		/* read into the codec's input buffer in place: no copy */
		size_t room;
		void *dst = e ? dre_enc_space(e, IO_BLOCK / 4, &room) : dre_dec_space(d, IO_BLOCK, &room);
		if (!dst) {
			rc = DRE_ENOMEM;
			break;
		}
		/* the encoder's buffer is filled up: what it does not frame
		 * then is a few KiB, moved to its front (see enc_in.c) */
		size_t want = room < IO_BLOCK + IO_BLOCK / 4 ? room : IO_BLOCK;
		ssize_t n = read(STDIN_FILENO, dst, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "wanopt dre: reading stdin: %s\n", strerror(errno));
			rc = DRE_EIO;
			said = 1;
			break;
		}
		if (n == 0)
			break;
		rc = decode ? dre_dec_commit(d, (size_t)n, write_out, NULL)
			    : dre_enc_commit(e, (size_t)n, write_out, NULL);
		at += (uint64_t)n;
	}
	/* the END frame tells a whole stream from one cut at a frame boundary */
	if (!rc)
		rc = decode ? dre_dec_finish(d) : dre_enc_end(e, write_out, NULL);
	rc = codec_report(c, e, d, rc, at, said);
	if (c->sync && !rc && dre_store_sync(st)) {
		fprintf(stderr, "wanopt dre: %s: cannot sync the store\n", c->store);
		rc = DRE_EIO;
	}
	dre_enc_free(e); /* its helper threads may store until stopped (an error cut the run short) */
	dre_dec_free(d);
	dre_store_stats ss;
	dre_store_flush(st); /* the writer's last blocks too */
	dre_store_get_stats(st, &ss);
	if (ss.io_errors) {
		/* the output is right; the store missed what those writes held */
		fprintf(stderr, "wanopt dre: %s: %" PRIu64 " store file errors, the last: %s; the store lacks what they "
				"held%s\n", c->store, ss.io_errors, strerror(ss.io_errno ? ss.io_errno : EIO),
			c->sync ? "" : " (the output is complete)");
		if (c->sync && !rc)
			rc = DRE_EIO;
	}
	out_end();
	dre_store_close(st);
	return rc ? 1 : 0;
}

/* Percent of a over b (0 when b is). */
static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0;
}

/* The hit ratio so far, and the estimate for larger stores. */
static void print_sizing(const dre_store_stats *s)
{
	uint64_t all = s->hit_bytes + s->new_bytes;
	char since[64];
	time_t t = (time_t)s->sizing_since;
	strftime(since, sizeof since, "%Y-%m-%d %H:%M UTC", gmtime(&t));
	printf("hit ratio    %.1f %% of %" PRIu64 " chunk bytes (%" PRIu64 " referenced, %" PRIu64
	       " stored anew) since %s\n", pct(s->hit_bytes, all), all, s->hit_bytes, s->new_bytes, since);
	if (!s->larger_hit_bytes[2]) {
		printf("larger store would not have helped: nothing evicted came back\n");
		return;
	}
	printf("larger store 2x %.1f %%, 4x %.1f %%, 8x %.1f %% (estimated from evicted chunks that came back)\n",
	       pct(s->hit_bytes + s->larger_hit_bytes[0], all), pct(s->hit_bytes + s->larger_hit_bytes[1], all),
	       pct(s->hit_bytes + s->larger_hit_bytes[2], all));
}

static int run_stats(struct cli *c, int check)
{
	char err[512];
	dre_store_opts so = { .size_limit = c->size, .readonly = !check, .keep = check };
	dre_store *st = dre_store_open(c->store, &so, err, sizeof err);
	if (!st) {
		fprintf(stderr, "wanopt dre: %s\n", err);
		return 1;
	}
	int rc = 0;
	if (check) {
		rc = dre_store_check(st, err, sizeof err);
		dre_store_stats ss;
		dre_store_get_stats(st, &ss);
		if (rc)
			fprintf(stderr, "wanopt dre check: %s: %s\n", c->store, err);
		else
			printf("%s: consistent (every chunk's data matches its fingerprint)\n", c->store);
		if (ss.dropped_records)
			printf("%s: %" PRIu64 " data file(s) were cut at a record that failed its checksum when the store "
			       "was opened (a torn write, or damage): it and what followed it were dropped\n",
			       c->store, ss.dropped_records);
		dre_store_close(st);
		return rc ? 1 : 0;
	}
	dre_store_stats s;
	dre_store_get_stats(st, &s);
	double fill = s.size_limit ? 100.0 * (double)s.disk_bytes / (double)s.size_limit : 0;
	double per_gib = s.data_bytes ? (double)s.index_bytes / ((double)s.data_bytes / (1 << 30)) : 0;
	if (c->json) {
		printf("{\"store\":\"%s\",\"id\":\"%016" PRIx64 "\",\"chunks\":%" PRIu64 ",\"data_bytes\":%" PRIu64
		       ",\"disk_bytes\":%" PRIu64 ",\"size_limit\":%" PRIu64 ",\"fill_pct\":%.2f,\"files\":%" PRIu64
		       ",\"index_bytes\":%" PRIu64 ",\"index_bytes_per_gib\":%.0f,\"dropped_records\":%" PRIu64
		       ",\"peers\":%u,\"sizing_since\":%" PRIu64 ",\"hit_bytes\":%" PRIu64 ",\"new_bytes\":%" PRIu64
		       ",\"larger_hit_bytes\":{\"2x\":%" PRIu64 ",\"4x\":%" PRIu64 ",\"8x\":%" PRIu64 "}}\n",
		       c->store, dre_store_id(st), s.chunks, s.data_bytes, s.disk_bytes, s.size_limit, fill, s.files,
		       s.index_bytes, per_gib, s.dropped_records, s.peers, s.sizing_since, s.hit_bytes, s.new_bytes,
		       s.larger_hit_bytes[0], s.larger_hit_bytes[1], s.larger_hit_bytes[2]);
	} else {
		printf("store        %s (id %016" PRIx64 ")\n", c->store, dre_store_id(st));
		printf("chunks       %" PRIu64 " (average %" PRIu64 " bytes)\n", s.chunks,
		       s.chunks ? s.data_bytes / s.chunks : 0);
		printf("bytes        %" PRIu64 " of chunk data, %" PRIu64 " on disk in %" PRIu64 " files\n",
		       s.data_bytes, s.disk_bytes, s.files);
		printf("fill         %.1f %% of %" PRIu64 " bytes\n", fill, s.size_limit);
		if (s.data_bytes >= (64u << 20))
			printf("index memory %" PRIu64 " bytes (%.1f MiB per GiB stored)\n", s.index_bytes,
			       per_gib / (1 << 20));
		else /* the table's starting size would dominate a per-GiB figure */
			printf("index memory %" PRIu64 " bytes\n", s.index_bytes);
		if (s.dropped_records)
			printf("dropped      %" PRIu64 " torn records at open\n", s.dropped_records);
		printf("peers        %u of %d peer stores tracked\n", s.peers, DRE_PEER_SLOTS);
		print_sizing(&s);
	}
	dre_store_close(st);
	return 0;
}

int px_cmd_dre(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		dre_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	static const char *const acts[] = { "encode", "decode", "stats", "check" };
	const char *act = argv[1];
	int a = 0;
	while (a < 4 && strcmp(act, acts[a]))
		a++;
	if (a == 4) {
		fprintf(stderr, "wanopt dre: unknown action '%s' (encode, decode, stats, check)\n", act);
		return 2;
	}
	/* getopt's messages name the action: "wanopt dre encode: option ..." */
	char name[32];
	snprintf(name, sizeof name, "wanopt dre %s", act);
	argv[1] = name;
	struct cli c = { 0 };
	int rc = parse_args(argc - 1, argv + 1, &c);
	if (rc)
		return rc;
	if (c.enc_only && a) {
		fprintf(stderr, "wanopt dre %s: --%s applies to encode only (a stream says how it was encoded)\n", act,
			c.enc_only);
		return 2;
	}
	return a < 2 ? run_codec(&c, a) : run_stats(&c, a == 3);
}
