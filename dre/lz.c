/* lz.c: residual compression.  One compression stream per direction of a DRE
 * stream, flushed at the end of every frame, so each frame's literal section is
 * a whole number of blocks yet the window spans earlier frames.  zstd for slow
 * links (ratio), lz4 for fast ones (speed).  A cheap sample test keeps
 * incompressible data away from the compressor entirely. */
#include <stdlib.h>

#include <lz4.h>
#include <lz4frame.h>
#include <zstd.h>

#include "dre_int.h"

#define ZSTD_WINDOW_LOG 23     /* 8 MiB of history across frames */
#define ZSTD_WINDOW_LOG_MAX 24 /* the decoder refuses streams needing more */

struct dre_lzc {
	int kind, decomp, begun;
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
	int ok = 1;
	if (kind == DRE_PLZ_ZSTD && !decomp) {
		ok = (z->zc = ZSTD_createCCtx()) &&
		     !ZSTD_isError(ZSTD_CCtx_setParameter(z->zc, ZSTD_c_compressionLevel, level ? level : 3)) &&
		     !ZSTD_isError(ZSTD_CCtx_setParameter(z->zc, ZSTD_c_windowLog, ZSTD_WINDOW_LOG));
	} else if (kind == DRE_PLZ_ZSTD) {
		ok = (z->zd = ZSTD_createDCtx()) &&
		     !ZSTD_isError(ZSTD_DCtx_setParameter(z->zd, ZSTD_d_windowLogMax, ZSTD_WINDOW_LOG_MAX));
	} else if (kind == DRE_PLZ_LZ4 && !decomp) {
		ok = !LZ4F_isError(LZ4F_createCompressionContext(&z->lc, LZ4F_VERSION));
		z->prefs.frameInfo.blockMode = LZ4F_blockLinked;
		z->prefs.frameInfo.blockSizeID = LZ4F_max4MB;
		z->prefs.compressionLevel = 0;
		z->prefs.autoFlush = 1;
	} else if (kind == DRE_PLZ_LZ4) {
		ok = !LZ4F_isError(LZ4F_createDecompressionContext(&z->ld, LZ4F_VERSION));
	}
	if (!ok) {
		dre_lz_free(z);
		return NULL;
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

/* zstd: feed p and flush, appending to out. */
static int zstd_compress(dre_lzc *z, const void *p, size_t n, dre_buf *out)
{
	ZSTD_inBuffer in = { p, n, 0 };
	for (;;) {
		if (dre_buf_reserve(out, ZSTD_CStreamOutSize()))
			return DRE_ENOMEM;
		ZSTD_outBuffer ob = { out->p + out->len, out->cap - out->len, 0 };
		size_t left = ZSTD_compressStream2(z->zc, &ob, &in, ZSTD_e_flush);
		if (ZSTD_isError(left))
			return DRE_ELZ;
		out->len += ob.pos;
		if (left == 0 && in.pos == in.size)
			return 0;
	}
}

/* lz4 frame API: the frame header goes out with the first piece. */
static int lz4_compress(dre_lzc *z, const void *p, size_t n, dre_buf *out)
{
	size_t bound = LZ4F_compressBound(n, &z->prefs) + LZ4F_HEADER_SIZE_MAX;
	if (dre_buf_reserve(out, bound))
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
		ZSTD_inBuffer ib = { in, in_n, 0 };
		ZSTD_outBuffer ob = { out, out_n, 0 };
		while (ib.pos < ib.size) {
			size_t before = ib.pos + ob.pos;
			size_t r = ZSTD_decompressStream(z->zd, &ob, &ib);
			if (ZSTD_isError(r) || ib.pos + ob.pos == before)
				return DRE_ELZ;
		}
		/* a flushed block may still hold output the call did not hand over */
		for (;;) {
			size_t before = ob.pos;
			if (ob.pos == ob.size)
				break;
			size_t r = ZSTD_decompressStream(z->zd, &ob, &ib);
			if (ZSTD_isError(r) || ob.pos == before)
				break;
		}
		return ob.pos == out_n ? 0 : DRE_ELZ;
	}
	if (z->kind == DRE_PLZ_LZ4) {
		const uint8_t *ip = in;
		size_t ipos = 0, opos = 0;
		while (ipos < in_n) {
			size_t isz = in_n - ipos, osz = out_n - opos;
			size_t r = LZ4F_decompress(z->ld, (uint8_t *)out + opos, &osz, ip + ipos, &isz, NULL);
			if (LZ4F_isError(r) || (isz == 0 && osz == 0))
				return DRE_ELZ;
			ipos += isz;
			opos += osz;
		}
		return opos == out_n ? 0 : DRE_ELZ;
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
