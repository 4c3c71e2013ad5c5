/*
 * room.c: a store on a file system that fills up.  store_size is a ceiling
 * the store fills to; the disk may hold less, or come to (logs, other data
 * sharing it).  Once it is full every write fails: the store keeps its
 * records' places, but they fail their checksums and are dropped when read,
 * so the store stops working while it looks full.  So the writer, as it
 * writes (every DRE_ROOM_EVERY bytes, and at a failure), and when asked
 * (dre_store_room_later: the proxy asks once a second, so an idle store
 * sees the disk fill or free up), measures the file system and works out
 * the room it leaves the store: what the store holds on disk, plus what is
 * free, less a reserve left to everyone else.  Where that is less than
 * store_size, eviction keeps to it: the store gives the oldest data way to
 * the new (an idle store evicts down to it at once, leaving the reserve free
 * to others), and grows back as space frees up.
 */
#include <stdint.h>
#include <sys/statvfs.h>

#include "store_int.h"

#define DRE_ROOM_EVERY (4u << 20)            /* measure every 4 MiB written */
/* left free: 1/64 of the file system, at most 64 MiB (more, on a large disk
 * that is nearly full, would shrink stores that fit) */
#define DRE_ROOM_RESERVE_MAX (64ull << 20)

int dre_store_room_due(dre_store *st, size_t len, int rc)
{
	st->room_written += len;
	if (!rc && st->room_written < DRE_ROOM_EVERY)
		return 0;
	st->room_written = 0;
	return 1;
}

/* a - b, or 0 if b is larger */
static uint64_t less(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

void dre_store_room_note(dre_store *st, uint32_t num, size_t len, int rc, const struct statvfs *fs)
{
	struct dre_sfile *f = rc ? dre_store_file(st, num) : NULL;
	if (f) { /* (a file evicted meanwhile took its bytes along) */
		f->lost += len;
		st->lost_bytes += len;
	}
	if (!fs)
		return;
	uint64_t unit = fs->f_frsize ? fs->f_frsize : fs->f_bsize;
	uint64_t total = (uint64_t)fs->f_blocks * unit, avail = (uint64_t)fs->f_bavail * unit;
	uint64_t reserve = total / 64 < DRE_ROOM_RESERVE_MAX ? total / 64 : DRE_ROOM_RESERVE_MAX;
	/* on disk: what was appended, less what waits in the queue or was lost,
	 * and evicted files not yet deleted (their space is not free yet) */
	uint64_t held = less(less(st->disk_bytes, st->wq_bytes), st->lost_bytes) + st->unlink_bytes;
	uint64_t room = less(held + avail, reserve);
	uint64_t floor = 4 * st->file_max; /* a store this small still works */
	if (room < floor)
		room = floor;
	/* kept to once the room is below the limit, let go of once it is a
	 * sixteenth above: a store at its limit on a file system with as much
	 * room does not flap */
	if (room >= st->limit + (st->room == UINT64_MAX ? 0 : st->limit / 16))
		st->room = UINT64_MAX;
	else
		st->room = room < st->limit ? room : st->limit;
}

int dre_store_room_later(dre_store *st)
{
	if (st->readonly)
		return 0;
	pthread_mutex_lock(&st->mu);
	int rc = dre_wq_room(st);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

uint64_t dre_store_room_evicted(dre_store *st, const struct dre_sfile *f)
{
	st->lost_bytes = less(st->lost_bytes, f->lost);
	return less(f->size, f->lost);
}
