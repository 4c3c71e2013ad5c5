/*
 * rec.c: a store record's header (see store.c): magic, payload length,
 * SHA-256, predecessor tag and a checksum over header and payload, written
 * and checked.
 */
#include <string.h>

#include "store_int.h"

/* The checksum of a record: header fields and payload (len bytes). */
static uint64_t rec_sum(uint32_t magic, const uint8_t h[DRE_REC_HDR], const void *payload, uint32_t len)
{
	uint64_t seed = dre_sum64(h, 48, 0);
	return magic == DRE_REC_CHUNK ? dre_fsum(payload, len, seed) : dre_sum64(payload, len, seed);
}

/* Fill a record header; the checksum covers header and payload. */
void dre_rec_header(uint8_t h[DRE_REC_HDR], uint32_t magic, uint32_t len, const uint8_t hash[32],
		    uint64_t prev, const void *payload)
{
	memcpy(h, &magic, 4);
	memcpy(h + 4, &len, 4);
	memcpy(h + 8, hash, 32);
	memcpy(h + 40, &prev, 8);
	uint64_t sum = rec_sum(magic, h, payload, len);
	memcpy(h + 48, &sum, 8);
}

/* Validate a header (and payload when given): 0 if sound. */
int dre_rec_check(const uint8_t h[DRE_REC_HDR], const void *payload)
{
	uint32_t magic, len;
	uint64_t sum;
	memcpy(&magic, h, 4);
	memcpy(&len, h + 4, 4);
	memcpy(&sum, h + 48, 8);
	if (magic != DRE_REC_CHUNK && magic != DRE_REC_CHUNK_V1 && magic != DRE_REC_LINK)
		return -1;
	if (magic == DRE_REC_LINK ? len != 0 : (len == 0 || len > DRE_CHUNK_MAX))
		return -1;
	if (payload && rec_sum(magic, h, payload, len) != sum)
		return -1;
	return 0;
}

/* 0 if h heads index entry e's record (its length and tag) and is sound,
 * with its payload when given. */
int dre_rec_sound(const uint8_t h[DRE_REC_HDR], const dre_ent *e, const void *payload)
{
	uint32_t len;
	memcpy(&len, h + 4, 4);
	return len != e->len || dre_fp_tag(h + 8) != e->tag ? -1 : dre_rec_check(h, payload);
}
