/* peers.c: what each peer's store is known to hold.  Each indexed chunk carries
 * a bit per peer slot (dre_ent.peers); a slot belongs to a peer's store id.
 * DIR/peers/ID holds, per peer, the tags of the chunks it holds, rewritten on
 * dre_store_sync when they changed, and loaded at open: a restart does not
 * make the encoder forget what its peers hold.  The file's time is when the
 * peer was last seen (renewed at each sync while it is in use).
 *
 * Slots are few (DRE_PEER_SLOTS) and a wiped or replaced peer store comes
 * back under a new id, so a slot nobody holds (dre_store_peer without
 * dre_store_peer_put) and unused for DRE_PEER_IDLE_S goes to a new peer once
 * all are taken, its old knowledge forgotten. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"

static void id_hex(const uint8_t id[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

static int64_t now_s(void)
{
	return (int64_t)time(NULL);
}

/* DIR/peers/ID of slot i. */
static void peer_path(const dre_store *st, int i, char *path, size_t n)
{
	char hex[33];
	id_hex(st->peer_id[i], hex);
	snprintf(path, n, "%s/peers/%s", st->dir, hex);
}

/* Slot of id, or -1.  Lock held. */
static int slot_find(const dre_store *st, const uint8_t id[16])
{
	for (int i = 0; i < st->npeers; i++)
		if (!memcmp(st->peer_id[i], id, 16))
			return i;
	return -1;
}

/* A new slot for id, last used at `last`; -1 when all are taken.  Lock
 * held. */
static int slot_new(dre_store *st, const uint8_t id[16], int64_t last)
{
	if (st->npeers == DRE_PEER_SLOTS)
		return -1;
	int i = st->npeers++;
	memcpy(st->peer_id[i], id, 16);
	st->peer_users[i] = 0;
	st->peer_last[i] = last;
	return i;
}

/* The slot a new peer may take when all are in use: the one unused longest,
 * if nobody holds it and it has been unused DRE_PEER_IDLE_S; else -1.  Lock
 * held. */
static int slot_idle(const dre_store *st, int64_t now)
{
	int best = -1;
	for (int i = 0; i < st->npeers; i++)
		if (!st->peer_users[i] && now - st->peer_last[i] >= DRE_PEER_IDLE_S &&
		    (best < 0 || st->peer_last[i] < st->peer_last[best]))
			best = i;
	return best;
}

/* Forget what the peer of slot i holds: its bit in every index entry, its
 * knowledge file, and the successors noted at peers (alt.c).  Lock held. */
static void slot_forget(dre_store *st, int i)
{
	uint32_t bit = 1u << i;
	for (size_t k = 0; k <= st->idx.mask; k++)
		st->idx.slot[k].peers &= ~bit;
	st->peers_dirty &= ~bit;
	st->peers_seen &= ~bit;
	if (!st->readonly) {
		char path[4200];
		peer_path(st, i, path, sizeof path);
		unlink(path);
	}
	dre_store_peer_next_forget(st);
	st->peers_reclaimed++;
}

int dre_store_peer(dre_store *st, const uint8_t id[16])
{
	int64_t now = now_s();
	pthread_mutex_lock(&st->mu);
	int s = slot_find(st, id);
	if (s < 0 && (s = slot_new(st, id, now)) < 0 && (s = slot_idle(st, now)) >= 0) {
		slot_forget(st, s);
		memcpy(st->peer_id[s], id, 16);
	}
	if (s >= 0) {
		st->peer_users[s]++;
		st->peer_last[s] = now;
		st->peers_seen |= 1u << s;
	} else {
		st->peers_untracked++;
	}
	pthread_mutex_unlock(&st->mu);
	return s;
}

void dre_store_peer_put(dre_store *st, int slot)
{
	if (!st || slot < 0 || slot >= DRE_PEER_SLOTS)
		return;
	pthread_mutex_lock(&st->mu);
	if (slot < st->npeers && st->peer_users[slot] > 0) {
		st->peer_users[slot]--;
		st->peer_last[slot] = now_s();
		st->peers_seen |= 1u << slot;
	}
	pthread_mutex_unlock(&st->mu);
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
	char path[4200], tmp[4300];
	peer_path(st, i, path, sizeof path);
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

/* Renew the time of the knowledge files of peers used since the last save
 * whose knowledge did not change (their time is when the peer was last seen,
 * read back at open), and of peers held now.  Lock held. */
static void touch_peers(dre_store *st)
{
	for (int i = 0; i < st->npeers; i++) {
		uint32_t bit = 1u << i;
		if (!(st->peers_dirty & bit) && (st->peers_seen & bit || st->peer_users[i])) {
			char path[4200];
			peer_path(st, i, path, sizeof path);
			utimensat(AT_FDCWD, path, NULL, 0); /* none yet (ENOENT): nothing to renew */
		}
	}
	st->peers_seen = 0;
}

int dre_store_save_peers(dre_store *st)
{
	int rc = 0;
	if (st->readonly)
		return 0;
	touch_peers(st);
	if (!st->peers_dirty)
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
		char path[4500];
		struct stat sb;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		if (!ok || slot_find(st, id) >= 0 || stat(path, &sb))
			continue;
		int slot = slot_new(st, id, (int64_t)sb.st_mtime); /* last seen: the file's time */
		if (slot >= 0)
			load_peer(st, slot, path);
	}
	closedir(d);
}
