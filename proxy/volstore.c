/*
 * volstore.c: a store in memory for a node whose own store cannot be opened
 * (its disk failed or went read-only, or has no room for a new store).  An
 * optimizer that stops carrying traffic because of its cache is worse than
 * none, so rather than exit the node runs on a store of its own in a tmpfs:
 * DRE and LZ as usual, on a store that is empty at start, holds at most
 * PX_VOLSTORE_MAX (or an eighth of the host's memory) and goes when the node
 * stops.  Peers see a new store identity and send it what it lacks, as for a
 * wiped store.  A probe (px_volprobe_*) opens the node's own store once it
 * can, and the node goes back to it (node_swap.c); the same probe opens a
 * store a reload names.
 *
 * Each lives in a directory WANOPT_VOLATILE_DIR/wanopt-volatile-XXXXXX
 * (/dev/shm unless set), removed when the node stops; one that a killed
 * process left (made by this user with mode 0700, as mkdtemp makes it; its
 * lock free, untouched for 5 s, or for a minute if it has no lock file) is
 * removed by the next process that makes one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "volstore.h"

#define VOL_PREFIX "wanopt-volatile-"
#define VOL_STALE_S 60 /* a directory with no lock held, untouched this long, is left over */
#define VOL_DEAD_S 5    /* ... or this long, if its store's lock file is there: its store was opened */

static const char *vol_root(void)
{
	const char *r = getenv(PX_VOLSTORE_ENV);
	return r && *r ? r : "/dev/shm";
}

uint64_t px_volstore_size(uint64_t size)
{
	uint64_t cap = PX_VOLSTORE_MAX;
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	if (pages > 0 && page > 0 && (uint64_t)pages * (uint64_t)page / 8 < cap)
		cap = (uint64_t)pages * (uint64_t)page / 8; /* a small host keeps most of its memory */
	return size < cap ? size : cap;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)ftw;
	return (flag == FTW_DP ? rmdir(path) : unlink(path)) && errno != ENOENT ? -1 : 0;
}

void px_volstore_remove(const char *dir)
{
	if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) && errno != ENOENT)
		log_warn("volatile store %s: cannot remove it: %s", dir, strerror(errno));
}

/* Remove the volatile stores of processes gone (root: where they are made). */
static void sweep(const char *root)
{
	DIR *d = opendir(root);
	if (!d)
		return;
	struct dirent *e;
	time_t now = time(NULL);
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, VOL_PREFIX, strlen(VOL_PREFIX)))
			continue;
		char path[4096];
		struct stat sb;
		snprintf(path, sizeof path, "%s/%s", root, e->d_name);
		/* ours only (others may write to the root, not into a 0700
		 * directory of ours, so nothing under it is swapped for a link) */
		if (lstat(path, &sb) || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077))
			continue;
		/* a process takes the lock as it makes the lock file: one whose
		 * lock file is there and free for a few seconds is gone (a node
		 * killed again and again must not fill the memory with them) */
		char lock[4200];
		snprintf(lock, sizeof lock, "%s/lock", path);
		int opened = !access(lock, F_OK);
		if (now - sb.st_mtime < (opened ? VOL_DEAD_S : VOL_STALE_S) || dre_store_in_use(path))
			continue;
		log_info("volatile store %s: left by a process gone: removed", path);
		px_volstore_remove(path);
	}
	closedir(d);
}

dre_store *px_volstore_open(uint64_t size, char *dir, size_t dirlen, char *err, size_t errlen)
{
	const char *root = vol_root();
	sweep(root);
	if ((size_t)snprintf(dir, dirlen, "%s/" VOL_PREFIX "XXXXXX", root) >= dirlen) {
		snprintf(err, errlen, "%s: path too long", root);
		return NULL;
	}
	if (!mkdtemp(dir)) {
		snprintf(err, errlen, "%s: %s", root, strerror(errno));
		return NULL;
	}
	dre_store_opts so = { .size_limit = px_volstore_size(size), .create = 1 };
	dre_store *st = dre_store_open(dir, &so, err, errlen);
	if (!st)
		px_volstore_remove(dir);
	return st;
}

struct px_volprobe {
	_Atomic int state; /* PX_VOLPROBE_* */
	_Atomic int refs;  /* the node's, and a probe thread's while it runs */
	uint64_t size;     /* the size limit to open the store with */
	dre_store *st;     /* PX_VOLPROBE_OPEN: what the probe opened */
	char err[512];     /* why the last probe could not open it, or "" */
	char dir[];
};

struct px_volprobe *px_volprobe_new(const char *dir)
{
	size_t len = strlen(dir) + 1;
	struct px_volprobe *p = calloc(1, sizeof *p + len);
	if (!p)
		return NULL;
	atomic_init(&p->state, PX_VOLPROBE_NO);
	atomic_init(&p->refs, 1);
	memcpy(p->dir, dir, len);
	return p;
}

static void probe_put(struct px_volprobe *p)
{
	if (p && atomic_fetch_sub(&p->refs, 1) == 1) {
		dre_store_close(p->st); /* opened, never taken */
		free(p);
	}
}

void px_volprobe_free(struct px_volprobe *p)
{
	probe_put(p);
}

/* Would the store in dir open for writing now: its directory (made if
 * absent) takes a 4 KiB write that reaches the disk, and no process holds
 * its lock.  If not, why in err.  Blocks as long as a failing disk takes. */
static int store_writable(const char *dir, char *err, size_t errlen)
{
	char path[4200], buf[4096] = { 0 };
	if (mkdir(dir, 0700) && errno != EEXIST) {
		snprintf(err, errlen, "%.400s: %s", dir, strerror(errno));
		return 0;
	}
	if (dre_store_in_use(dir)) {
		snprintf(err, errlen, "%.400s: store is in use by another process", dir);
		return 0;
	}
	snprintf(path, sizeof path, "%s/.wanopt-probe", dir); /* not a name the store reads */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "%.400s: %s", path, strerror(errno));
		return 0;
	}
	ssize_t n = write(fd, buf, sizeof buf);
	int ok = n == (ssize_t)sizeof buf && !fsync(fd);
	if (!ok)
		snprintf(err, errlen, "%.400s: %s", path, n < 0 || n == (ssize_t)sizeof buf ? strerror(errno) : "short write");
	close(fd);
	unlink(path);
	return ok;
}

static void *probe_main(void *arg)
{
	struct px_volprobe *p = arg;
	p->err[0] = 0;
	if (store_writable(p->dir, p->err, sizeof p->err)) {
		dre_store_opts so = { .size_limit = p->size, .create = 1 };
		p->st = dre_store_open(p->dir, &so, p->err, sizeof p->err);
	}
	atomic_store(&p->state, p->st ? PX_VOLPROBE_OPEN : PX_VOLPROBE_NO);
	probe_put(p);
	return NULL;
}

const char *px_volprobe_dir(const struct px_volprobe *p)
{
	return p->dir;
}

int px_volprobe_poll(struct px_volprobe *p, uint64_t size)
{
	int was = atomic_load(&p->state);
	if (was != PX_VOLPROBE_NO)
		return was; /* a disk that hangs holds one thread, not one per call */
	pthread_attr_t a;
	pthread_t t;
	p->size = size;
	atomic_store(&p->state, PX_VOLPROBE_RUNNING);
	atomic_fetch_add(&p->refs, 1);
	int rc = pthread_attr_init(&a);
	if (!rc) {
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &a, probe_main, p);
		pthread_attr_destroy(&a);
	}
	if (rc) { /* no thread: try again at the next call */
		atomic_fetch_sub(&p->refs, 1);
		atomic_store(&p->state, was);
	}
	return was;
}

dre_store *px_volprobe_take(struct px_volprobe *p, char *err, size_t errlen)
{
	int state = atomic_load(&p->state);
	if (state == PX_VOLPROBE_NO)
		snprintf(err, errlen, "%s", p->err);
	if (state != PX_VOLPROBE_OPEN)
		return NULL;
	dre_store *st = p->st;
	p->st = NULL;
	atomic_store(&p->state, PX_VOLPROBE_NO);
	return st;
}
