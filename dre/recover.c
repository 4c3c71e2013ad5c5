/* recover.c: opening a store directory: lock, identity, loading data files
 * (from .idx when intact, else by reading records and cutting torn tails), and
 * sealing files (.idx written to a temp file and renamed). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "index.h"
#include "store_int.h"

#define IDX_HDR 24
/* .idx format 2: its checksum is seeded with the data file's number, so an
 * .idx found beside another data file (same size, same count) fails it.  A
 * format 1 .idx (seed 0) fails too: its data file is scanned once. */
#define IDX_VER 2

void dre_store_path(const dre_store *st, uint32_t num, const char *ext, char *out, size_t len)
{
	snprintf(out, len, "%s/%08" PRIx32 ".%s", st->dir, num, ext);
}

/* See store_int.h. */
int dre_store_write_idx(dre_store *st, uint32_t num, uint64_t size, const struct dre_idxent *e,
			size_t n)
{
	char tmp[4096], dst[4096];
	dre_store_path(st, num, "idx.tmp", tmp, sizeof tmp);
	dre_store_path(st, num, "idx", dst, sizeof dst);
	size_t len = IDX_HDR + n * sizeof *e + 8;
	uint8_t *buf = malloc(len);
	if (!buf)
		return DRE_ENOMEM;
	uint32_t magic = DRE_IDX_MAGIC, ver = IDX_VER;
	uint64_t cnt = n;
	memcpy(buf, &magic, 4);
	memcpy(buf + 4, &ver, 4);
	memcpy(buf + 8, &cnt, 8);
	memcpy(buf + 16, &size, 8);
	if (n)
		memcpy(buf + IDX_HDR, e, n * sizeof *e);
	uint64_t sum = dre_sum64(buf, len - 8, num);
	memcpy(buf + len - 8, &sum, 8);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, DRE_FILE_MODE);
	int rc = fd < 0 || dre_write_all(fd, buf, len, -1) ? DRE_EIO : 0;
	if (fd >= 0)
		close(fd);
	if (!rc && rename(tmp, dst))
		rc = DRE_EIO;
	if (rc)
		unlink(tmp);
	free(buf);
	return rc;
}

int dre_store_load_idx(dre_store *st, uint32_t num, uint64_t size, struct dre_idxent **out, size_t *n)
{
	char path[4096];
	dre_store_path(st, num, "idx", path, sizeof path);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat sb;
	uint8_t *buf = NULL;
	int rc = -1;
	if (fstat(fd, &sb) || sb.st_size < IDX_HDR + 8 || !(buf = malloc((size_t)sb.st_size)) ||
	    pread(fd, buf, (size_t)sb.st_size, 0) != sb.st_size)
		goto out;
	uint32_t magic, ver;
	uint64_t cnt, dsize, sum;
	memcpy(&magic, buf, 4);
	memcpy(&ver, buf + 4, 4);
	memcpy(&cnt, buf + 8, 8);
	memcpy(&dsize, buf + 16, 8);
	memcpy(&sum, buf + sb.st_size - 8, 8);
	if (magic != DRE_IDX_MAGIC || ver != IDX_VER || dsize != size ||
	    cnt != ((uint64_t)sb.st_size - IDX_HDR - 8) / sizeof(struct dre_idxent) ||
	    (uint64_t)sb.st_size != IDX_HDR + cnt * sizeof(struct dre_idxent) + 8 ||
	    dre_sum64(buf, (size_t)sb.st_size - 8, num) != sum)
		goto out;
	*out = malloc(cnt ? cnt * sizeof **out : 1);
	if (!*out)
		goto out;
	memcpy(*out, buf + IDX_HDR, cnt * sizeof **out);
	*n = cnt;
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}

/* A window of a data file read a MiB at a time: a record costs no system
 * call of its own (two preads a record took a tenth of decoding a repeat
 * on a store whose active file held 19 MB, recovered at each open). */
#define SCAN_WIN (1u << 20)
struct scan_win {
	int fd;
	uint64_t size, from; /* file size; file offset of p[0] */
	size_t len;          /* bytes of the file in p */
	uint8_t *p;          /* SCAN_WIN bytes */
};

/* The n bytes at file offset off (n <= SCAN_WIN), or NULL if the file
 * ends (or cannot be read) before them. */
static const uint8_t *scan_at(struct scan_win *w, uint64_t off, size_t n)
{
	if (off + n > w->size)
		return NULL;
	if (off < w->from || off + n > w->from + w->len) {
		uint64_t want = w->size - off < SCAN_WIN ? w->size - off : SCAN_WIN;
		ssize_t got = pread(w->fd, w->p, (size_t)want, (off_t)off);
		w->from = off;
		w->len = got > 0 ? (size_t)got : 0;
		if (w->len < n)
			return NULL;
	}
	return w->p + (off - w->from);
}

/* The sound record at file offset off (header and payload checked), or NULL. */
static const uint8_t *scan_rec(struct scan_win *w, uint64_t off)
{
	const uint8_t *hdr = scan_at(w, off, DRE_REC_HDR);
	uint32_t len;
	if (!hdr || dre_rec_check(hdr, NULL))
		return NULL;
	memcpy(&len, hdr + 4, 4);
	const uint8_t *rec = scan_at(w, off, DRE_REC_HDR + len);
	return rec && !dre_rec_check(rec, rec + DRE_REC_HDR) ? rec : NULL;
}

/* The offset of the first sound record at or after off, or UINT64_MAX: past
 * a damaged record, the file goes on (the damage was in the middle: bit rot),
 * or nothing sound follows (a torn tail). */
static uint64_t scan_resync(struct scan_win *w, uint64_t off)
{
	for (; off + DRE_REC_HDR <= w->size; off++) {
		const uint8_t *h = scan_at(w, off, 4);
		uint32_t magic;
		if (!h)
			break;
		memcpy(&magic, h, 4);
		if ((magic == DRE_REC_CHUNK || magic == DRE_REC_CHUNK_V1 || magic == DRE_REC_LINK) && scan_rec(w, off))
			return off;
	}
	return UINT64_MAX;
}

/* Read file f record by record, applying each.  A record that is torn or
 * fails its checksum is dropped: the scan goes on at the next sound record,
 * and if none follows, the file is cut there.  Entries are also collected
 * into *list. */
static int scan_file(dre_store *st, struct dre_sfile *f, dre_buf *list)
{
	struct scan_win w = { f->fd, f->size, 0, 0, malloc(SCAN_WIN) };
	uint64_t off = 0;
	const uint8_t *hdr;
	if (!w.p)
		return DRE_ENOMEM;
	dre_mem_populate(w.p, SCAN_WIN); /* its pages in one call */
	while (off < f->size) {
		if (!(hdr = scan_rec(&w, off))) {
			uint64_t next = scan_resync(&w, off + 1);
			if (next == UINT64_MAX)
				break; /* the file is cut here */
			st->dropped_records++;
			off = next;
			continue;
		}
		uint32_t magic, len;
		memcpy(&magic, hdr, 4);
		memcpy(&len, hdr + 4, 4);
		struct dre_idxent ie;
		if (magic == DRE_REC_LINK)
			ie = (struct dre_idxent){ dre_get_u64(hdr + 8), dre_get_u64(hdr + 16), 0, DRE_IDX_LINK };
		else
			ie = (struct dre_idxent){ dre_fp_tag(hdr + 8), dre_get_u64(hdr + 40), (uint32_t)off, len };
		if (dre_store_apply(st, f->num, &ie) || dre_buf_add(list, &ie, sizeof ie)) {
			free(w.p);
			return DRE_ENOMEM;
		}
		off += DRE_REC_HDR + len;
	}
	free(w.p);
	if (off < f->size) {
		st->dropped_records++;
		if (!st->readonly && ftruncate(f->fd, (off_t)off))
			return DRE_EIO;
		f->size = off;
	}
	return 0;
}

/* Create and append the next data file. */
static int new_file(dre_store *st, uint32_t num)
{
	char path[4096];
	dre_store_path(st, num, "dat", path, sizeof path);
	if (st->nfiles == st->capfiles) {
		size_t cap = st->capfiles ? st->capfiles * 2 : 16;
		struct dre_sfile *nf = realloc(st->files, cap * sizeof *nf);
		if (!nf)
			return DRE_ENOMEM;
		st->files = nf;
		st->capfiles = cap;
	}
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, DRE_FILE_MODE);
	if (fd < 0) {
		st->io_errors++; /* the daemon logs it; the chunks that wanted it are not stored */
		st->io_errno = errno;
		return DRE_EIO;
	}
	st->files[st->nfiles] = (struct dre_sfile){ .num = num, .fd = fd };
	dre_store_map(&st->files[st->nfiles++], st->file_max);
	return 0;
}

int dre_store_rotate(dre_store *st)
{
	int gone = access(st->dir, F_OK) && errno == ENOENT;
	if (gone && dre_store_remake_dir(st))
		return DRE_EIO;
	/* No fdatasync of the data here: a sealed file whose data did not reach
	 * the disk before a crash fails its record checksums when read, and is
	 * then dropped.  The writer thread writes the .idx after the data. */
	struct dre_sfile *f = &st->files[st->nfiles - 1];
	uint32_t num = f->num;
	/* sealed already when the next file could not be made: its .idx is
	 * written (sealing again would write one with no entries over it) */
	if (st->sealed != num) {
		int rc = dre_wq_seal_idx(st, f, &st->act);
		if (rc)
			return rc;
		st->sealed = num;
	}
	return new_file(st, num + 1);
}

/* Take the directory lock (writers only): one process per store. */
static int take_lock(dre_store *st, char *err, size_t errlen)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/lock", st->dir);
	st->lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, DRE_FILE_MODE);
	if (st->lockfd < 0) {
		dre_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return DRE_ESTORE;
	}
	if (flock(st->lockfd, LOCK_EX | LOCK_NB)) {
		dre_seterr(err, errlen, "%s: store is in use by another process", st->dir);
		return DRE_ESTORE;
	}
	return 0;
}

int dre_store_in_use(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/lock", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	int busy = flock(fd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK;
	close(fd); /* (lets go of the lock, if taken) */
	return busy;
}

/* Write DIR/STORE with st->id: 0, or -1 with err set. */
static int write_identity(dre_store *st, char *err, size_t errlen)
{
	char path[4096], tmp[4200];
	snprintf(path, sizeof path, "%s/STORE", st->dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *fp = dre_fopen_w(tmp, "w");
	int bad = !fp || fprintf(fp, "wanopt-store 1\nid %016llx\n", (unsigned long long)st->id) < 0 || fflush(fp) ||
		  fsync(fileno(fp));
	if ((fp && fclose(fp)) || bad || rename(tmp, path)) {
		dre_seterr(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Read DIR/STORE, or create it for a new store; sets st->id. */
static int read_identity(dre_store *st, int fresh, char *err, size_t errlen)
{
	char path[4096], line[128];
	snprintf(path, sizeof path, "%s/STORE", st->dir);
	FILE *fp = fopen(path, "r");
	if (fp) {
		int ver = 0;
		unsigned long long id = 0;
		int ok = fgets(line, sizeof line, fp) && sscanf(line, "wanopt-store %d", &ver) == 1 &&
			 fgets(line, sizeof line, fp) && sscanf(line, "id %llx", &id) == 1;
		fclose(fp);
		if (!ok || ver != 1) {
			dre_seterr(err, errlen, "%s:1: not a wanopt store description (version 1 expected)", path);
			return DRE_ESTORE;
		}
		st->id = id;
		return 0;
	}
	if (!fresh || st->readonly) {
		dre_seterr(err, errlen, "%s: %s", path, fresh ? "no store here" : "missing, but data files exist");
		return DRE_ESTORE;
	}
	if (getrandom(&st->id, sizeof st->id, 0) != sizeof st->id)
		st->id = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
	if (write_identity(st, err, errlen))
		return DRE_ESTORE;
	st->created = 1;
	return 0;
}

int dre_store_remake_dir(dre_store *st)
{
	char err[256];
	int old = st->lockfd;
	if (dre_mkdirs(st->dir) && errno != EEXIST)
		return DRE_EIO;
	if (write_identity(st, err, sizeof err))
		return DRE_EIO;
	if (take_lock(st, err, sizeof err)) { /* another process made a store there meanwhile */
		if (st->lockfd >= 0)
			close(st->lockfd);
		st->lockfd = old;
		return DRE_EIO;
	}
	if (old >= 0)
		close(old);
	st->dir_remade++;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* The numbers of DIR's data files, sorted; -1 if DIR cannot be read. */
static int list_files(dre_store *st, uint32_t **nums, size_t *n)
{
	DIR *d = opendir(st->dir);
	if (!d)
		return -1;
	size_t cap = 16;
	*n = 0;
	*nums = malloc(cap * sizeof **nums);
	struct dirent *de;
	while (*nums && (de = readdir(d))) {
		unsigned int num;
		char ext[8];
		if (strlen(de->d_name) != 12 || sscanf(de->d_name, "%8x.%3s", &num, ext) != 2 ||
		    strcmp(ext, "dat"))
			continue;
		if (*n == cap) {
			uint32_t *nn = realloc(*nums, (cap *= 2) * sizeof **nums);
			if (!nn) {
				free(*nums);
				*nums = NULL;
				break;
			}
			*nums = nn;
		}
		(*nums)[(*n)++] = num;
	}
	closedir(d);
	if (!*nums)
		return -1;
	qsort(*nums, *n, sizeof **nums, cmp_u32);
	return 0;
}

/* Load data file num: from its .idx when sealed and intact, else by scanning
 * (and, when sealed, writing a fresh .idx). */
static int load_file(dre_store *st, uint32_t num, int active)
{
	char path[4096];
	dre_store_path(st, num, "dat", path, sizeof path);
	int fd = open(path, (st->readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb)) {
		if (fd >= 0)
			close(fd);
		return DRE_EIO;
	}
	if (st->nfiles == st->capfiles) {
		size_t cap = st->capfiles ? st->capfiles * 2 : 16;
		struct dre_sfile *nf = realloc(st->files, cap * sizeof *nf);
		if (!nf) {
			close(fd);
			return DRE_ENOMEM;
		}
		st->files = nf;
		st->capfiles = cap;
	}
	struct dre_sfile *f = &st->files[st->nfiles++];
	*f = (struct dre_sfile){ .num = num, .fd = fd, .size = (uint64_t)sb.st_size };
	struct dre_idxent *ents;
	size_t n;
	int rc = 0;
	if (!active && dre_store_load_idx(st, num, f->size, &ents, &n) == 0) {
		for (size_t i = 0; i < n && !rc; i++) {
			if (i + DRE_IDX_AHEAD < n) { /* each lookup misses the cache */
				dre_idx_prefetch(&st->idx, ents[i + DRE_IDX_AHEAD].a);
				dre_idx_prefetch(&st->idx, ents[i + DRE_IDX_AHEAD].b);
			}
			rc = dre_store_apply(st, num, &ents[i]);
		}
		free(ents);
	} else {
		dre_buf list = { 0 };
		rc = scan_file(st, f, &list);
		if (!rc && !active && !st->readonly)
			rc = dre_store_write_idx(st, num, f->size, (struct dre_idxent *)list.p,
						 list.len / sizeof(struct dre_idxent));
		if (!rc && active) {
			dre_buf_free(&st->act);
			st->act = list;
		} else {
			dre_buf_free(&list);
		}
	}
	st->disk_bytes += f->size;
	f->written = f->size; /* after any cut of a torn tail */
	dre_store_map(f, active && f->size < st->file_max ? st->file_max : f->size);
	return rc;
}

int dre_store_recover(dre_store *st, int create, char *err, size_t errlen)
{
	struct stat sb;
	if (stat(st->dir, &sb)) {
		if (!create || st->readonly || dre_mkdirs(st->dir)) {
			dre_seterr(err, errlen, "%s: %s", st->dir, strerror(errno));
			return DRE_ESTORE;
		}
	} else if (!S_ISDIR(sb.st_mode)) {
		dre_seterr(err, errlen, "%s: not a directory", st->dir);
		return DRE_ESTORE;
	}
	if (!st->readonly && take_lock(st, err, errlen))
		return DRE_ESTORE;
	uint32_t *nums = NULL;
	size_t n = 0;
	if (list_files(st, &nums, &n)) {
		dre_seterr(err, errlen, "%s: cannot list: %s", st->dir, strerror(errno));
		return DRE_ESTORE;
	}
	int rc = read_identity(st, n == 0, err, errlen);
	for (size_t i = 0; i < n && !rc; i++) {
		rc = load_file(st, nums[i], i + 1 == n);
		if (rc) {
			char path[4096];
			dre_store_path(st, nums[i], "dat", path, sizeof path);
			dre_seterr(err, errlen, "%s: %s", path, rc == DRE_ENOMEM ? "out of memory" : strerror(errno));
		}
	}
	if (!rc && n == 0 && !st->readonly && new_file(st, 1)) {
		dre_seterr(err, errlen, "%s: cannot create a data file: %s", st->dir, strerror(errno));
		rc = DRE_ESTORE;
	}
	free(nums);
	return rc ? DRE_ESTORE : 0;
}
