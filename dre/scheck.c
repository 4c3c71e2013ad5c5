/*
 * scheck.c: dre_store_check, the full read of a store (`wanopt dre check`):
 * every index entry against its data file's record header, every chunk's
 * bytes against its record checksum and SHA-256 fingerprint, and the
 * store's totals against what the index holds.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index.h"
#include "store_int.h"

/* 1 if e's payload (after its header hdr) is intact: the record checksum and
 * the SHA-256 in the header both match what is on disk. */
static int payload_sound(const struct dre_sfile *f, const dre_ent *e, const uint8_t hdr[DRE_REC_HDR],
			 uint8_t *buf, dre_fp *fp)
{
	uint8_t h[32];
	return pread(f->fd, buf, e->len, (off_t)e->off + DRE_REC_HDR) == (ssize_t)e->len && !dre_rec_check(hdr, buf) &&
	       !dre_fp_sha256(fp, buf, e->len, h) && !memcmp(h, hdr + 8, 32);
}

/* The first data file whose tally of index entries (ents, ent_bytes)
 * differs from the counts in tal (entries and bytes per file, in the order of
 * st->files), or NULL.  Lock held. */
static const struct dre_sfile *tally_drift(const dre_store *st, const uint64_t (*tal)[2])
{
	for (size_t i = 0; i < st->nfiles; i++)
		if (st->files[i].ents != tal[i][0] || st->files[i].ent_bytes != tal[i][1])
			return &st->files[i];
	return NULL;
}

int dre_store_check(dre_store *st, char *err, size_t errlen)
{
	int rc = 0;
	uint64_t bytes = 0, count = 0, rotten = 0;
	uint8_t *buf = malloc(DRE_CHUNK_MAX);
	dre_fp *fp = dre_fp_new();
	pthread_mutex_lock(&st->mu);
	uint64_t(*tal)[2] = calloc(st->nfiles + 1, sizeof *tal);
	if (!buf || !fp || !tal) {
		pthread_mutex_unlock(&st->mu);
		free(buf);
		free(tal);
		dre_fp_free(fp);
		dre_seterr(err, errlen, "out of memory");
		return DRE_ENOMEM;
	}
	dre_wq_drain(st); /* evicted files' entries are swept out by then */
	dre_ent *e;
	for (uint64_t pos = 0; !rc && (e = dre_idx_next(&st->idx, &pos));) {
		count++;
		bytes += e->len;
		struct dre_sfile *f = dre_store_file(st, e->file);
		uint8_t hdr[DRE_REC_HDR];
		if (f) {
			tal[f - st->files][0]++;
			tal[f - st->files][1] += e->len;
		}
		if (!f || e->off + (uint64_t)DRE_REC_HDR + e->len > f->size) {
			dre_seterr(err, errlen, "chunk %016" PRIx64 " points past file %08" PRIx32, e->tag, e->file);
			rc = DRE_ESTORE;
		} else if (pread(f->fd, hdr, sizeof hdr, e->off) != DRE_REC_HDR || dre_rec_sound(hdr, e, NULL)) {
			dre_seterr(err, errlen, "chunk %016" PRIx64 ": record header mismatch", e->tag);
			rc = DRE_ESTORE;
		} else if (!payload_sound(f, e, hdr, buf, fp) && !rotten++) { /* go on: count them all */
			dre_seterr(err, errlen, "chunk %016" PRIx64 " in %08" PRIx32 ".dat at %" PRIu32
				   ": its data does not match its checksum and fingerprint", e->tag, e->file, e->off);
		}
	}
	if (!rc && rotten) {
		size_t n = strlen(err);
		if (n < errlen)
			snprintf(err + n, errlen - n, " (%" PRIu64 " chunk%s so)", rotten, rotten > 1 ? "s" : "");
		rc = DRE_ESTORE;
	}
	if (!rc && (count != st->idx.count || bytes != st->data_bytes || st->dead_ents)) {
		dre_seterr(err, errlen, "index totals drifted: %" PRIu64 "/%zu chunks, %" PRIu64 "/%" PRIu64 " bytes, %" PRIu64
		       " evicted", count, st->idx.count, bytes, st->data_bytes, st->dead_ents);
		rc = DRE_ESTORE;
	}
	const struct dre_sfile *drift = rc ? NULL : tally_drift(st, (const uint64_t(*)[2])tal);
	if (drift) {
		dre_seterr(err, errlen, "file %08" PRIx32 " counts %" PRIu64 " chunks, %" PRIu64 " bytes; the index has %" PRIu64
		       ", %" PRIu64, drift->num, drift->ents, drift->ent_bytes, tal[drift - st->files][0],
		       tal[drift - st->files][1]);
		rc = DRE_ESTORE;
	}
	free(tal);
	uint64_t disk = 0;
	for (size_t i = 0; i < st->nfiles; i++)
		disk += st->files[i].size;
	if (!rc && disk != st->disk_bytes) {
		dre_seterr(err, errlen, "disk byte count drifted");
		rc = DRE_ESTORE;
	}
	pthread_mutex_unlock(&st->mu);
	free(buf);
	dre_fp_free(fp);
	return rc;
}
