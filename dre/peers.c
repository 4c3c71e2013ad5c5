/* peers.c: what each peer's store is known to hold.  Each indexed chunk carries
 * a bit per peer slot (dre_ent.peers); a slot belongs to a peer's store id.
 * DIR/peers/ID holds, per peer, the tags of the chunks it holds, loaded at
 * open: a restart does not make the encoder forget what its peers hold.  The
 * file is a journal: each dre_store_sync appends the tags marked since the
 * last one (a store of millions of chunks would otherwise rewrite every
 * active peer's file, megabytes each, every sync), with the store's lock
 * released while it writes.  Tags evicted since, or appended twice, are
 * skipped at load; once a file holds more than twice as many tags as the
 * index plus DRE_PEER_SLACK, it is rewritten from the index, a batch of entries
 * at a time.  The file's time is when the peer was last seen (renewed at
 * each sync while it is in use).
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

#include "index.h"
#include "store_int.h"

#define PEER_LOG_MAX (1u << 20) /* tags (8 MiB) held per slot between saves; beyond, its file is rewritten */
#define PEER_BATCH 65536     /* index entries taken per hold of the lock in a rewrite */

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

/* Take bit off every entry of index part p; lock held. */
static void clear_part(dre_store *st, size_t p, uint32_t bit)
{
	for (size_t i = 0; i <= st->idx.part[p].mask; i++)
		dre_idx_slot(&st->idx, p, i)->peers &= ~bit;
}

void dre_store_clear_slot(dre_store *st, int slot, pthread_mutex_t *lock)
{
	uint32_t bit = 1u << slot;
	for (size_t p = 0; p < DRE_IDX_PARTS; p++) {
		uint64_t t0 = dre_pass_lock(lock);
		clear_part(st, p, bit);
		dre_pass_unlock(lock, t0);
	}
	if (lock)
		pthread_mutex_lock(lock);
	st->peers_clearing &= ~bit;
	/* marks for the new peer meanwhile are in the log, their bits taken off
	 * by lookups or by this pass: set them again (a log that overflowed
	 * was dropped: those chunks count as not held, and go out again) */
	const uint64_t *tag = (const uint64_t *)st->peer_log[slot].p;
	for (size_t k = 0, n = st->peer_log[slot].len / 8; k < n; k++) {
		dre_ent *e = dre_store_ent(st, tag[k]);
		if (e)
			e->peers |= bit;
	}
	if (lock)
		pthread_mutex_unlock(lock);
}

/* Forget what the peer of slot i holds: its knowledge file, the successors
 * noted at peers (alt.c), and its bit in every index entry.  The bits are
 * cleared by the writer thread, a part of the index per hold of the lock
 * (in one go, 32 million entries held the lock for 305 ms): until it is done
 * (peers_clearing), lookups take them off what they find, so a mark for the
 * slot's new peer counts only once the pass ends and sets it again from the
 * slot's log, which is not saved until then.  Lock held. */
static void slot_forget(dre_store *st, int i)
{
	uint32_t bit = 1u << i;
	st->peers_seen &= ~bit;
	st->peers_full &= ~bit;
	dre_buf_free(&st->peer_log[i]);
	st->peer_logged[i] = 0;
	if (!st->readonly) {
		char path[4200];
		peer_path(st, i, path, sizeof path);
		unlink(path);
	}
	dre_store_peer_next_forget(st);
	st->peers_reclaimed++;
	st->peers_clearing |= bit;
	if (dre_wq_clear_slot(st, i))
		dre_store_clear_slot(st, i, NULL);
}

/* The slot of id: its own, a new one, or an idle one it takes over; -1 if
 * none.  Lock held. */
static int slot_take(dre_store *st, const uint8_t id[16], int64_t now)
{
	int s = slot_find(st, id);
	if (s >= 0 || (s = slot_new(st, id, now)) >= 0 || slot_idle(st, now) < 0)
		return s;
	/* a slot changes hands: not while a save may be writing its file */
	while (st->peers_saving)
		pthread_cond_wait(&st->peers_cv, &st->mu);
	if ((s = slot_find(st, id)) >= 0 || (s = slot_new(st, id, now)) >= 0 || (s = slot_idle(st, now)) < 0)
		return s;
	slot_forget(st, s);
	memcpy(st->peer_id[s], id, 16);
	return s;
}

int dre_store_peer(dre_store *st, const uint8_t id[16])
{
	int64_t now = now_s();
	pthread_mutex_lock(&st->mu);
	int s = slot_take(st, id, now);
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
	dre_ent *e = dre_store_ent(st, tag);
	if (e && (e->peers & bits) != bits) {
		uint32_t fresh = bits & ~e->peers;
		e->peers |= bits;
		for (int i = 0; fresh; i++, fresh >>= 1) {
			dre_buf *b = &st->peer_log[i];
			if (!(fresh & 1) || st->peers_full & (1u << i))
				continue;
			if (b->len >= 8 * (size_t)PEER_LOG_MAX || dre_buf_add(b, &tag, 8)) {
				st->peers_full |= 1u << i; /* the next save rewrites the file instead */
				dre_buf_free(b);
			}
		}
	}
	pthread_mutex_unlock(&st->mu);
}

/* 1 if slot i's file lacks marks: some are logged, or it is due for a
 * rewrite; not while the slot's old bits are being cleared (its log is
 * still to be set in the index).  Lock held. */
static int slot_dirty(const dre_store *st, int i)
{
	return !(st->peers_clearing & (1u << i)) && (st->peer_log[i].len || (st->peers_full & (1u << i)));
}

/* Append the tags marked since the last save to slot i's file, the lock
 * released while writing.  Lock held. */
static int peer_append(dre_store *st, int i)
{
	char path[4200];
	dre_buf log = st->peer_log[i];
	st->peer_log[i] = (dre_buf){ 0 };
	peer_path(st, i, path, sizeof path);
	pthread_mutex_unlock(&st->mu);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, DRE_FILE_MODE), rc = fd < 0 ? DRE_EIO : 0;
	if (!rc && dre_write_all(fd, log.p, log.len, -1))
		rc = DRE_EIO;
	if (fd >= 0 && close(fd))
		rc = DRE_EIO;
	pthread_mutex_lock(&st->mu);
	if (rc) /* what reached the file is unknown: rewrite it next time */
		st->peers_full |= 1u << i;
	else
		st->peer_logged[i] += log.len / 8;
	dre_buf_free(&log);
	return rc;
}

/* The tags of the index entries from scan position *pos on (at most
 * PEER_BATCH) that slot bit's peer holds, into out; 1 when the scan is done,
 * -1 out of memory, else 0. */
static int peer_batch(const dre_store *st, uint64_t *pos, uint32_t bit, dre_buf *out)
{
	out->len = 0;
	for (int n = 0; n < PEER_BATCH; n++) {
		const dre_ent *e = dre_idx_next(&st->idx, pos);
		if (!e)
			return 1;
		if ((e->peers & bit) && !dre_store_dead(st, e) && dre_buf_add(out, &e->tag, 8))
			return -1;
	}
	return 0;
}

/* Rewrite slot i's file from the index (temp + rename), PEER_BATCH entries
 * per hold of the lock.  An index that grows meanwhile moves its entries: a
 * few may be written twice (no harm) or missed (sent again as new).  Lock
 * held. */
static int peer_rewrite(dre_store *st, int i)
{
	char path[4200], tmp[4300];
	uint32_t bit = 1u << i;
	st->peers_full &= ~bit;
	dre_buf_free(&st->peer_log[i]); /* the index holds those marks too */
	peer_path(st, i, path, sizeof path);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	dre_buf b = { 0 };
	uint64_t n = 0;
	int rc = 0;
	pthread_mutex_unlock(&st->mu);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, DRE_FILE_MODE);
	pthread_mutex_lock(&st->mu);
	uint64_t pos = 0;
	for (int done = fd < 0; !done && !rc;) {
		done = peer_batch(st, &pos, bit, &b);
		if (done < 0)
			rc = DRE_ENOMEM;
		pthread_mutex_unlock(&st->mu);
		if (!rc && dre_write_all(fd, b.p, b.len, -1))
			rc = DRE_EIO;
		pthread_mutex_lock(&st->mu);
		n += b.len / 8;
	}
	pthread_mutex_unlock(&st->mu);
	if (fd < 0 || close(fd) || (!rc && rename(tmp, path)))
		rc = rc ? rc : DRE_EIO;
	if (rc)
		unlink(tmp);
	pthread_mutex_lock(&st->mu);
	dre_buf_free(&b);
	if (rc)
		st->peers_full |= bit;
	else
		st->peer_logged[i] = n;
	return rc;
}

/* Renew the time of the knowledge files of peers used since the last save
 * whose knowledge did not change (their time is when the peer was last seen,
 * read back at open), and of peers held now.  Lock held. */
static void touch_peers(dre_store *st)
{
	for (int i = 0; i < st->npeers; i++) {
		uint32_t bit = 1u << i;
		if (!slot_dirty(st, i) && (st->peers_seen & bit || st->peer_users[i])) {
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
	while (st->peers_saving) /* one save at a time: both would append */
		pthread_cond_wait(&st->peers_cv, &st->mu);
	touch_peers(st);
	int any = 0;
	for (int i = 0; i < st->npeers; i++)
		any |= slot_dirty(st, i);
	if (!any)
		return 0;
	char dir[4200];
	snprintf(dir, sizeof dir, "%s/peers", st->dir);
	if (mkdir(dir, DRE_DIR_MODE) && errno != EEXIST)
		return DRE_EIO;
	st->peers_saving = 1;
	for (int i = 0; i < st->npeers; i++) {
		uint32_t bit = 1u << i;
		if (!slot_dirty(st, i))
			continue;
		if (st->peer_logged[i] + st->peer_log[i].len / 8 > 2 * (uint64_t)st->idx.count + DRE_PEER_SLACK)
			st->peers_full |= bit; /* mostly evicted or repeated tags: compact */
		rc |= st->peers_full & bit ? peer_rewrite(st, i) : peer_append(st, i);
	}
	st->peers_saving = 0;
	pthread_cond_broadcast(&st->peers_cv);
	return rc ? DRE_EIO : 0;
}

#define LOAD_BLOCK 8192 /* tags read at a time at open */

/* Load one knowledge file into slot i: LOAD_BLOCK tags per read, each
 * lookup's slot prefetched DRE_IDX_AHEAD tags before it (1.23 million tags:
 * 105-140 ms a file looked up one by one). */
static void load_peer(dre_store *st, int i, const char *path)
{
	FILE *f = fopen(path, "r");
	uint64_t *tags = malloc(LOAD_BLOCK * sizeof *tags);
	size_t n;
	if (!f || !tags) {
		if (f)
			fclose(f);
		free(tags);
		return;
	}
	while ((n = fread(tags, 8, LOAD_BLOCK, f)) > 0) { /* a torn last tag is left out... */
		for (size_t k = 0; k < n; k++) {
			if (k + DRE_IDX_AHEAD < n && tags[k + DRE_IDX_AHEAD])
				dre_idx_prefetch(&st->idx, tags[k + DRE_IDX_AHEAD]);
			dre_ent *e = tags[k] ? dre_store_ent(st, tags[k]) : NULL;
			if (e)
				e->peers |= 1u << i;
		}
		st->peer_logged[i] += n;
	}
	struct stat sb;
	if (!st->readonly && !fstat(fileno(f), &sb) && sb.st_size % 8)
		(void)!truncate(path, sb.st_size / 8 * 8); /* appends start whole again */
	fclose(f);
	free(tags);
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
