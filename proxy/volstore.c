/*
 * volstore.c: a store in memory for a node whose own store cannot be opened
 * (its disk failed or went read-only, or has no room for a new store).  An
 * optimizer that stops carrying traffic because of its cache is worse than
 * none, so rather than exit the node runs on a store of its own in a tmpfs:
 * DRE and LZ as usual, on a store that is empty at start, holds at most
 * PX_VOLSTORE_MAX (or an eighth of the host's memory) and goes when the node
 * stops.  Peers see a new store identity and send it what it lacks, as for a
 * wiped store.
 *
 * Each lives in a directory WANOPT_VOLATILE_DIR/wanopt-volatile-XXXXXX
 * (/dev/shm unless set), removed when the node stops; one that a killed
 * process left (its lock free, untouched for a minute, made by this user
 * with mode 0700, as mkdtemp makes it) is removed by the next process that
 * makes one.
 */
#include <dirent.h>
#include <errno.h>
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
		if (lstat(path, &sb) || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077) ||
		    now - sb.st_mtime < VOL_STALE_S || dre_store_in_use(path))
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
