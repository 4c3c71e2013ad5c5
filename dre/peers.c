/* peers.c: what each peer's store is known to hold.  Each indexed chunk carries
 * a bit per peer slot (dre_ent.peers); a slot belongs to a peer's store id.
 * DIR/peers/ID holds, per peer, the tags of the chunks it holds, rewritten on
 * dre_store_sync when they changed, and loaded at open: a restart does not
 * make the encoder forget what its peers hold. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_int.h"

static void id_hex(const uint8_t id[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

/* Slot of id, or a new one; -1 when full.  Lock held. */
static int slot_of(dre_store *st, const uint8_t id[16], int create)
{
	for (int i = 0; i < st->npeers; i++)
		if (!memcmp(st->peer_id[i], id, 16))
			return i;
	if (!create || st->npeers == DRE_PEER_SLOTS)
		return -1;
	memcpy(st->peer_id[st->npeers], id, 16);
	return st->npeers++;
}

int dre_store_peer(dre_store *st, const uint8_t id[16])
{
	pthread_mutex_lock(&st->mu);
	int s = slot_of(st, id, 1);
	pthread_mutex_unlock(&st->mu);
	return s;
}

void dre_store_mark(dre_store *st, uint64_t tag, uint32_t bits)
{
	if (!bits)
		return;
	pthread_mutex_lock(&st->mu);
	dre_ent *e = dre_idx_get(&st->idx, tag);
	if (e && (e->peers & bits) != bits) {
		e->peers |= bits;
		st->peers_dirty |= bits;
	}
	pthread_mutex_unlock(&st->mu);
}

/* Write peer slot i's knowledge file (temp + rename).  Lock held. */
static int save_peer(dre_store *st, int i)
{
	char hex[33], path[4200], tmp[4300];
	id_hex(st->peer_id[i], hex);
	snprintf(path, sizeof path, "%s/peers/%s", st->dir, hex);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return DRE_EIO;
	uint32_t bit = 1u << i;
	uint64_t n = 0;
	for (size_t k = 0; k <= st->idx.mask; k++) {
		const dre_ent *e = &st->idx.slot[k];
		if (e->tag && (e->peers & bit)) {
			fwrite(&e->tag, 8, 1, f);
			n++;
		}
	}
	int rc = fflush(f) || fclose(f) ? DRE_EIO : 0;
	if (!rc && rename(tmp, path))
		rc = DRE_EIO;
	if (rc)
		unlink(tmp);
	return rc;
}

int dre_store_save_peers(dre_store *st)
{
	int rc = 0;
	if (!st->peers_dirty || st->readonly)
		return 0;
	char dir[4200];
	snprintf(dir, sizeof dir, "%s/peers", st->dir);
	if (mkdir(dir, 0755) && errno != EEXIST)
		return DRE_EIO;
	for (int i = 0; i < st->npeers; i++)
		if (st->peers_dirty & (1u << i))
			rc |= save_peer(st, i);
	if (!rc)
		st->peers_dirty = 0;
	return rc ? DRE_EIO : 0;
}

/* Load one knowledge file into slot i. */
static void load_peer(dre_store *st, int i, const char *path)
{
	FILE *f = fopen(path, "r");
	uint64_t tag;
	if (!f)
		return;
	while (fread(&tag, 8, 1, f) == 1) {
		dre_ent *e = dre_idx_get(&st->idx, tag);
		if (e)
			e->peers |= 1u << i;
	}
	fclose(f);
}

void dre_store_load_peers(dre_store *st)
{
	char dir[4200];
	snprintf(dir, sizeof dir, "%s/peers", st->dir);
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d))) {
		uint8_t id[16];
		if (strlen(de->d_name) != 32)
			continue;
		int ok = 1;
		for (int k = 0; k < 16 && ok; k++) {
			unsigned v;
			ok = sscanf(de->d_name + 2 * k, "%2x", &v) == 1;
			id[k] = (uint8_t)v;
		}
		int slot = ok ? slot_of(st, id, 1) : -1;
		if (slot >= 0) {
			char path[4500];
			snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
			load_peer(st, slot, path);
		}
	}
	closedir(d);
}
