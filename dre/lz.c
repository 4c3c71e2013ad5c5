/* lz.c: residual compression.  One compression stream per direction of a DRE
 * stream, flushed at the end of every frame, so each frame's literal section is
 * a whole number of blocks yet the window spans earlier frames.  zstd for slow
 * links (ratio), lz4 for fast ones (speed).  A cheap sample test keeps
 * incompressible data away from the compressor entirely.
 *
 * A proxy holds one compressor per stream and direction, most of them for
 * short or idle connections, so zstd starts small: a 128 KiB window and small
 * tables (about 65 KB per stream).  Once a stream's literals pass
 * ZSTD_GROW_AT bytes it ends that zstd frame and goes on in a new one with the
 * full window and the level's own tables (0.8 MB at level 3, 12 MB at level
 * 9); a bulk stream, whose first piece is already that large, starts there.
 * The decoder then sees two zstd frames back to back in one literal section,
 * which any zstd stream decoder reads as one stream.  A quiet stream ends its
 * frame (zstd or lz4) and frees its compressor (dre_lz_end); the decoder frees
 * its own whenever a frame ends.
 *
 * A threaded (command-line) encoder codes its full-size zstd frames on zstd's
 * own worker threads (dre_lz_set_workers), in jobs of ZSTD_JOB bytes that each
 * see the end of the data before them: the literal section of a frame is
 * flushed once, so a frame of a few MB runs as several jobs at once.  The
 * output is the same kind of zstd stream, slightly larger (each job starts
 * with a window of only what overlapLog's default lets it load). */
#include <stdlib.h>

#include <lz4.h>
#include <lz4frame.h>
#include <zstd.h>

#include "dre_int.h"

#define ZSTD_WINDOW_LOG 23     /* 8 MiB of history across frames */
#define ZSTD_WINDOW_LOG_MAX 24 /* the decoder refuses streams needing more */
#define ZSTD_SMALL_WINDOW_LOG 17
#define ZSTD_SMALL_HASH_LOG 12
#define ZSTD_SMALL_CHAIN_LOG 11
#define ZSTD_GROW_AT (64u << 10)
#define ZSTD_OPT_LEVEL 16      /* btopt and up: their own tables would take 32-64 MB */
#define ZSTD_OPT_TABLE_LOG 20  /* so theirs are 4 MiB each at full size */
#define ZSTD_JOB (512u << 10)  /* worker job size: zstd's smallest */

struct dre_lzc {
	int kind, decomp, begun;
	int level, full; /* zstd compressor: level, and whether at full size */
	int workers;     /* zstd's worker threads at full size (0: none) */
	uint64_t fed;    /* bytes fed to the compressor */
	ZSTD_CCtx *zc;
	ZSTD_DCtx *zd;
	LZ4F_cctx *lc;
	LZ4F_dctx *ld;
	LZ4F_preferences_t prefs;
};

dre_lzc *dre_lz_new(int kind, int level, int decomp)
{
	dre_lzc *z = calloc(1, sizeof *z);
	if (!z)
		return NULL;
	z->kind = kind;
	z->decomp = decomp;
	z->level = level ? level : 3;
	/* the contexts themselves are created at the first piece */
	if (kind == DRE_PLZ_LZ4 && !decomp) {
		z->prefs.frameInfo.blockMode = LZ4F_blockLinked;
		z->prefs.frameInfo.blockSizeID = LZ4F_max4MB;
		z->prefs.compressionLevel = 0;
		z->prefs.autoFlush = 1;
	}
	return z;
}

void dre_lz_free(dre_lzc *z)
{
	if (!z)
		return;
	ZSTD_freeCCtx(z->zc);
	ZSTD_freeDCtx(z->zd);
	if (z->lc)
		LZ4F_freeCompressionContext(z->lc);
	if (z->ld)
		LZ4F_freeDecompressionContext(z->ld);
	free(z);
}

/* lz4 does not say what its contexts hold: about its state and the 64 KiB
 * of history it keeps for linked blocks. */
#define LZ4_CTX_BYTES (80u << 10)

size_t dre_lz_mem(const dre_lzc *z)
{
	if (!z)
		return 0;
	return sizeof *z + (z->zc ? ZSTD_sizeof_CCtx(z->zc) : 0) + (z->zd ? ZSTD_sizeof_DCtx(z->zd) : 0) +
	       (z->lc ? LZ4_CTX_BYTES : 0) + (z->ld ? LZ4_CTX_BYTES : 0);
}

/* The decompressor, for a new zstd frame. */
static int zstd_dctx(dre_lzc *z)
{
	if (!(z->zd = ZSTD_createDCtx()))
		return DRE_ENOMEM;
	if (ZSTD_isError(ZSTD_DCtx_setParameter(z->zd, ZSTD_d_windowLogMax, ZSTD_WINDOW_LOG_MAX))) {
		ZSTD_freeDCtx(z->zd);
		z->zd = NULL;
		return DRE_ELZ;
	}
	return 0;
}

/* zstd: feed p (none to end the frame) and flush or end, appending to out. */
static int zstd_feed(dre_lzc *z, const void *p, size_t n, ZSTD_EndDirective how, dre_buf *out)
{
	ZSTD_inBuffer in = { p, n, 0 };
	for (;;) {
		if (dre_buf_reserve(out, ZSTD_CStreamOutSize()))
			return DRE_ENOMEM;
		ZSTD_outBuffer ob = { out->p + out->len, out->cap - out->len, 0 };
		size_t left = ZSTD_compressStream2(z->zc, &ob, &in, how);
		if (ZSTD_isError(left))
			return DRE_ELZ;
		out->len += ob.pos;
		if (left == 0 && in.pos == in.size)
			return 0;
	}
}

/* Have c code on n worker threads of zstd's own, started now; 1 if they run.
 * Where they cannot (a libzstd built without threads, or threads refused: a
 * pids limit), 0, and c goes on coding on the caller's thread. */
static int zstd_workers(ZSTD_CCtx *c, int n)
{
	ZSTD_inBuffer in = { NULL, 0, 0 };
	ZSTD_outBuffer ob = { NULL, 0, 0 };
	if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_nbWorkers, n)))
		return 0;
	/* an empty call starts the frame, and with it the workers */
	if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_jobSize, ZSTD_JOB)) ||
	    ZSTD_isError(ZSTD_compressStream2(c, &ob, &in, ZSTD_e_continue))) {
		ZSTD_CCtx_reset(c, ZSTD_reset_session_only);
		ZSTD_CCtx_setParameter(c, ZSTD_c_nbWorkers, 0);
		return 0;
	}
	return 1;
}

/* Set the compressor up for a new zstd frame, small or at full size. */
static int zstd_setup(dre_lzc *z, int full)
{
	if (!z->zc && !(z->zc = ZSTD_createCCtx()))
		return DRE_ENOMEM;
	ZSTD_CCtx *c = z->zc;
	if (ZSTD_isError(ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, z->level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, full ? ZSTD_WINDOW_LOG : ZSTD_SMALL_WINDOW_LOG)))
		return DRE_ELZ;
	int tables = !full ? ZSTD_SMALL_HASH_LOG : z->level >= ZSTD_OPT_LEVEL ? ZSTD_OPT_TABLE_LOG : 0;
	if (tables && (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_hashLog, tables)) ||
		       ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_chainLog,
							   full ? tables : ZSTD_SMALL_CHAIN_LOG))))
		return DRE_ELZ;
	if (full && z->workers && !zstd_workers(c, z->workers))
		z->workers = 0; /* for good: logs then name the coder as it runs */
	z->full = full;
	return 0;
}

void dre_lz_set_workers(dre_lzc *z, int n)
{
	z->workers = z->kind == DRE_PLZ_ZSTD && !z->decomp && n > 1 ? n : 0;
}

int dre_lz_workers(const dre_lzc *z)
{
	return z->workers;
}

/* zstd: the next piece, in a small frame while the stream has fed fewer than
 * ZSTD_GROW_AT bytes, then (after ending that frame) in a full-size one. */
static int zstd_compress(dre_lzc *z, const void *p, size_t n, dre_buf *out)
{
	int rc = 0, full = z->fed + n > ZSTD_GROW_AT;
	if (!z->zc)
		rc = zstd_setup(z, full);
	else if (!z->full && full && !(rc = zstd_feed(z, NULL, 0, ZSTD_e_end, out)))
		rc = zstd_setup(z, 1);
	if (rc)
		return rc;
	z->fed += n;
	return zstd_feed(z, p, n, ZSTD_e_flush, out);
}

/* lz4 frame API: the frame header goes out with the first piece. */
static int lz4_compress(dre_lzc *z, const void *p, size_t n, dre_buf *out)
{
	size_t bound = LZ4F_compressBound(n, &z->prefs) + LZ4F_HEADER_SIZE_MAX;
	if (dre_buf_reserve(out, bound))
		return DRE_ENOMEM;
	if (!z->lc && LZ4F_isError(LZ4F_createCompressionContext(&z->lc, LZ4F_VERSION)))
		return DRE_ENOMEM;
	if (!z->begun) {
		size_t h = LZ4F_compressBegin(z->lc, out->p + out->len, out->cap - out->len, &z->prefs);
		if (LZ4F_isError(h))
			return DRE_ELZ;
		out->len += h;
		z->begun = 1;
	}
	size_t r = LZ4F_compressUpdate(z->lc, out->p + out->len, out->cap - out->len, p, n, NULL);
	if (LZ4F_isError(r))
		return DRE_ELZ;
	out->len += r;
	r = LZ4F_flush(z->lc, out->p + out->len, out->cap - out->len, NULL);
	if (LZ4F_isError(r))
		return DRE_ELZ;
	out->len += r;
	return 0;
}

int dre_lz_open(const dre_lzc *z)
{
	return z->kind == DRE_PLZ_ZSTD ? z->zc != NULL : z->kind == DRE_PLZ_LZ4 && z->begun;
}

/* lz4: the end mark, and the context goes. */
static int lz4_end(dre_lzc *z, dre_buf *out)
{
	int rc = dre_buf_reserve(out, LZ4F_compressBound(0, &z->prefs) + 16) ? DRE_ENOMEM : 0;
	if (!rc) {
		size_t r = LZ4F_compressEnd(z->lc, out->p + out->len, out->cap - out->len, NULL);
		if (LZ4F_isError(r))
			rc = DRE_ELZ;
		else
			out->len += r;
	}
	LZ4F_freeCompressionContext(z->lc);
	z->lc = NULL;
	z->begun = 0;
	return rc;
}

int dre_lz_end(dre_lzc *z, dre_buf *out)
{
	if (!dre_lz_open(z))
		return 0;
	if (z->kind == DRE_PLZ_LZ4)
		return lz4_end(z, out);
	int rc = zstd_feed(z, NULL, 0, ZSTD_e_end, out);
	ZSTD_freeCCtx(z->zc);
	z->zc = NULL;
	z->full = 0;
	z->fed = 0;
	return rc;
}

int dre_lz_compress(dre_lzc *z, const void *p, size_t n, dre_buf *out)
{
	if (z->kind == DRE_PLZ_ZSTD)
		return zstd_compress(z, p, n, out);
	if (z->kind == DRE_PLZ_LZ4)
		return lz4_compress(z, p, n, out);
	return dre_buf_add(out, p, n);
}

int dre_lz_decompress(dre_lzc *z, const void *in, size_t in_n, void *out, size_t out_n)
{
	if (z->kind == DRE_PLZ_ZSTD) {
		int rc = z->zd ? 0 : zstd_dctx(z);
		if (rc)
			return rc;
		ZSTD_inBuffer ib = { in, in_n, 0 };
		ZSTD_outBuffer ob = { out, out_n, 0 };
		size_t r = 1;
		while (ib.pos < ib.size) {
			size_t before = ib.pos + ob.pos;
			r = ZSTD_decompressStream(z->zd, &ob, &ib);
			if (ZSTD_isError(r) || ib.pos + ob.pos == before)
				return DRE_ELZ;
		}
		/* a flushed block may still hold output the call did not hand over */
		while (r && ob.pos < ob.size) {
			size_t before = ob.pos, q = ZSTD_decompressStream(z->zd, &ob, &ib);
			if (ZSTD_isError(q) || ob.pos == before)
				break;
			r = q;
		}
		if (ob.pos != out_n)
			return DRE_ELZ;
		if (!r) { /* the sender ended its zstd frame: the next starts afresh */
			ZSTD_freeDCtx(z->zd);
			z->zd = NULL;
		}
		return 0;
	}
	if (z->kind == DRE_PLZ_LZ4) {
		if (!z->ld && LZ4F_isError(LZ4F_createDecompressionContext(&z->ld, LZ4F_VERSION)))
			return DRE_ENOMEM;
		const uint8_t *ip = in;
		size_t ipos = 0, opos = 0, r = 1;
		while (ipos < in_n) {
			size_t isz = in_n - ipos, osz = out_n - opos;
			r = LZ4F_decompress(z->ld, (uint8_t *)out + opos, &osz, ip + ipos, &isz, NULL);
			if (LZ4F_isError(r) || (isz == 0 && osz == 0))
				return DRE_ELZ;
			ipos += isz;
			opos += osz;
		}
		if (opos != out_n)
			return DRE_ELZ;
		if (!r) { /* the sender ended its lz4 frame: the next starts afresh */
			LZ4F_freeDecompressionContext(z->ld);
			z->ld = NULL;
		}
		return 0;
	}
	if (in_n != out_n)
		return DRE_ELZ;
	memcpy(out, in, in_n);
	return 0;
}

/* Samples of up to 4 KiB at the start, middle and end are lz4-compressed; if
 * they shrink by less than 3 %, the whole is taken as incompressible. */
int dre_lz_incompressible(const void *vp, size_t n)
{
	const char *p = vp;
	enum { SAMPLE = 4096 };
	char dst[LZ4_COMPRESSBOUND(SAMPLE)];
	size_t in = 0, out = 0;
	size_t at[3] = { 0, n / 2, n > SAMPLE ? n - SAMPLE : 0 };
	for (int i = 0; i < 3; i++) {
		size_t len = n - at[i] < SAMPLE ? n - at[i] : SAMPLE;
		if (len < 64 || (i && at[i] < at[i - 1] + SAMPLE))
			continue;
		int r = LZ4_compress_default(p + at[i], dst, (int)len, (int)sizeof dst);
		in += len;
		out += r > 0 ? (size_t)r : len;
	}
	return in > 0 && out * 100 > in * 97;
}
