/* util.c: error strings, the sum64 checksum, growable buffers. */
#include <stdarg.h>
#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dre_int.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "dre assumes a little-endian host");

#define STR_(x) #x
#define STR(x) STR_(x)

const char *dre_strerror(int err)
{
	switch (err) {
	case DRE_OK: return "success";
	case DRE_EINVAL: return "invalid argument";
	case DRE_ENOMEM: return "out of memory";
	case DRE_EIO: return "store I/O error";
	case DRE_ESTORE: return "store unusable";
	case DRE_ECORRUPT: return "corrupt encoded stream";
	case DRE_EMISS: return "encoded stream references data missing from the store";
	case DRE_ECHECKSUM: return "decoded frame fails its checksum";
	case DRE_ELZ: return "residual (LZ) coding or decoding failed";
	case DRE_EOUT: return "output failed";
	case DRE_ESTATE: return "call not valid in this state";
	case DRE_EVERSION:
		return "encoded stream of a newer format version than this build reads (versions " STR(DRE_STREAM_VERSION_MIN) " to " STR(DRE_STREAM_VERSION) ")";
	}
	return "unknown error";
}

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t lane(uint64_t acc, uint64_t in) { return rotl(acc + in * P2, 31) * P1; }
static inline uint64_t merge(uint64_t acc, uint64_t v) { return (acc ^ lane(0, v)) * P1 + P4; }

/* XXH64 of p[0..n) with `seed`, from the algorithm's published description. */
uint64_t dre_sum64(const void *vp, size_t n, uint64_t seed)
{
	const uint8_t *p = vp;
	size_t i = 0;
	uint64_t acc;
	if (n >= 32) {
		uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
		do {
			v1 = lane(v1, rd64(p + i));
			v2 = lane(v2, rd64(p + i + 8));
			v3 = lane(v3, rd64(p + i + 16));
			v4 = lane(v4, rd64(p + i + 24));
			i += 32;
		} while (n - i >= 32);
		acc = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
		acc = merge(acc, v1);
		acc = merge(acc, v2);
		acc = merge(acc, v3);
		acc = merge(acc, v4);
	} else {
		acc = seed + P5;
	}
	acc += n;
	for (; n - i >= 8; i += 8)
		acc = rotl(acc ^ lane(0, rd64(p + i)), 27) * P1 + P4;
	if (n - i >= 4) {
		acc = rotl(acc ^ (uint64_t)rd32(p + i) * P1, 23) * P2 + P3;
		i += 4;
	}
	for (; i < n; i++)
		acc = rotl(acc ^ p[i] * P5, 11) * P1;
	acc ^= acc >> 33;
	acc *= P2;
	acc ^= acc >> 29;
	acc *= P3;
	acc ^= acc >> 32;
	return acc;
}

void dre_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Give b a capacity of cap bytes; 0 or DRE_ENOMEM. */
static int buf_resize(dre_buf *b, size_t cap)
{
	uint8_t *np = realloc(b->p, cap);
	if (!np)
		return DRE_ENOMEM;
	b->p = np;
	b->cap = cap;
	return 0;
}

int dre_buf_reserve(dre_buf *b, size_t more)
{
	if (b->cap - b->len >= more)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap - b->len < more)
		cap *= 2;
	return buf_resize(b, cap);
}

int dre_buf_reserve_exact(dre_buf *b, size_t more)
{
	return b->cap - b->len >= more ? 0 : buf_resize(b, b->len + more);
}

int dre_buf_add(dre_buf *b, const void *p, size_t n)
{
	if (dre_buf_reserve(b, n))
		return DRE_ENOMEM;
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

int dre_mem_populate(void *p, size_t n)
{
	uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, e = ((uintptr_t)p + n) & ~(uintptr_t)4095;
	return e > a ? madvise((void *)a, e - a, MADV_POPULATE_WRITE) : 0;
}

void dre_buf_free(dre_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

int dre_write_all(int fd, const void *vp, size_t n, int64_t off)
{
	const uint8_t *p = vp;
	while (n) {
		ssize_t w = off < 0 ? write(fd, p, n) : pwrite(fd, p, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
		if (off >= 0)
			off += w;
	}
	return 0;
}

FILE *dre_fopen_w(const char *path, const char *mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, DRE_FILE_MODE);
	FILE *f = fd < 0 ? NULL : fdopen(fd, mode);
	if (fd >= 0 && !f) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return f;
}

int dre_mkdirs(const char *path)
{
	if (!mkdir(path, DRE_DIR_MODE))
		return 0;
	if (errno != ENOENT)
		return -1;
	char up[4096];
	size_t n = strlen(path);
	if (n >= sizeof up) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(up, path, n + 1);
	char *slash = strrchr(up, '/');
	while (slash && slash > up && slash[-1] == '/')
		slash--; /* "a//b" */
	if (!slash || slash == up) {
		errno = ENOENT;
		return -1;
	}
	*slash = 0;
	if (dre_mkdirs(up) && errno != EEXIST)
		return -1;
	return mkdir(path, DRE_DIR_MODE) ? -1 : 0;
}
