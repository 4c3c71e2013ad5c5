/*
 * sizing.c: what a larger store would buy, estimated from what this one
 * evicts (the question users ask when they size a cache: the hit ratio at
 * 2x, 4x and 8x the size).
 *
 * Eviction is by whole data file, oldest first, so a store m times larger
 * keeps a chunk until (m - 1) x size_limit more data file bytes have been
 * evicted from this one after it (m x size_limit less what this one holds,
 * where its file system leaves it less than size_limit: room.c).  The
 * store remembers a sample of the chunks it evicted (1 in 2^shift, by tag,
 * so that 7 x size_limit of evictions fill about half of the table) with
 * the eviction clock (data file bytes evicted so far) at the point its
 * record went: the clock moves when a file is evicted, and its entries,
 * swept out of the index later by the writer, are stamped by their offset
 * in it.  When a sampled chunk is stored anew (it crossed the WAN again)
 * and is still remembered, the bytes evicted since tell which larger stores
 * would have held it; its length, times 2^shift, counts for those.  This
 * is the "ghost list" of cache literature with spatial sampling (SHARDS,
 * Waldspurger et al., FAST '15).
 *
 * Hit bytes (references) and new bytes (chunks stored) are counted too, and
 * all of it persists in DIR/sizing, so figures span runs and restarts.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"

#define SLOTS (1u << 16)   /* remembered evictions: 1 MiB */
#define AVG_CHUNK 4096     /* the encoder's default average chunk */
#define MAGIC "WSIZ0001"

struct dre_ghost {
	uint64_t tag, at;  /* at: the eviction clock when it went, + 1 (0: empty) */
};

/* The sampling shift for a store bounded to `limit` bytes. */
static int shift_for(uint64_t limit)
{
	uint64_t chunks = 7 * (limit / AVG_CHUNK + 1);
	int s = 0;
	while ((chunks >> s) > SLOTS / 2 && s < 40)
		s++;
	return s;
}

static int sampled(const struct dre_sizing *z, uint64_t tag)
{
	return ((tag >> 24) & ((1ull << z->shift) - 1)) == 0;
}

static struct dre_ghost *slot(const struct dre_sizing *z, uint64_t tag)
{
	return &z->ghost[(tag ^ (tag >> 32)) & (SLOTS - 1)];
}

void dre_sizing_limit(dre_store *st, uint64_t limit)
{
	st->sz.shift = shift_for(limit);
}

void dre_sizing_file_gone(dre_store *st, uint32_t num, uint64_t bytes)
{
	struct dre_sizing *z = &st->sz;
	z->gone[z->ngone++ % DRE_SIZING_GONE] = (struct dre_sizing_gone){ num, z->clock };
	z->clock += bytes;
}

/* The clock when file num was evicted, if it is among the last ones. */
static int gone_base(const struct dre_sizing *z, uint32_t num, uint64_t *base)
{
	unsigned n = z->ngone < DRE_SIZING_GONE ? z->ngone : DRE_SIZING_GONE;
	for (unsigned i = 1; i <= n; i++) { /* the newest first */
		unsigned k = (z->ngone - i) % DRE_SIZING_GONE;
		if (z->gone[k].num == num) {
			*base = z->gone[k].base;
			return 1;
		}
	}
	return 0;
}

void dre_sizing_evicted(dre_store *st, const dre_ent *e)
{
	struct dre_sizing *z = &st->sz;
	if (!z->ghost || !sampled(z, e->tag))
		return;
	/* the record went when the clock passed it in its file; a file swept
	 * too late to be remembered counts as gone now */
	uint64_t base, at = z->clock;
	if (gone_base(z, e->file, &base))
		at = base + e->off + DRE_REC_HDR + e->len;
	*slot(z, e->tag) = (struct dre_ghost){ e->tag, at + 1 };
}

void dre_sizing_stored(dre_store *st, uint64_t tag, uint32_t len)
{
	struct dre_sizing *z = &st->sz;
	z->new_bytes += len;
	if (!z->ghost || !sampled(z, tag))
		return;
	struct dre_ghost *g = slot(z, tag);
	if (g->tag != tag || !g->at)
		return;
	double since = (double)(z->clock + 1 - g->at);
	/* what this store holds: store_size, or less while its file system
	 * leaves it less (room.c); a store m x store_size keeps a chunk for
	 * the difference more bytes of eviction */
	uint64_t here = dre_store_bound(st);
	for (int i = 0; i < DRE_SIZING_STEPS; i++) {
		/* the larger store writes (and evicts) only what it would miss */
		double rate = z->new_bytes > z->larger[i] ? (double)(z->new_bytes - z->larger[i]) / (double)z->new_bytes : 0;
		if (since * rate < (double)((2ull << i) * st->limit - here))
			z->larger[i] += (uint64_t)len << z->shift;
	}
	*g = (struct dre_ghost){ 0, 0 };
}

void dre_sizing_hit(dre_store *st, uint32_t len)
{
	st->sz.hit_bytes += len;
}

#define NFIELDS (4 + DRE_SIZING_STEPS)

/* The counters, in the order DIR/sizing holds them. */
static void fields(struct dre_sizing *z, uint64_t *p[NFIELDS])
{
	p[0] = &z->since;
	p[1] = &z->clock;
	p[2] = &z->hit_bytes;
	p[3] = &z->new_bytes;
	for (int i = 0; i < DRE_SIZING_STEPS; i++)
		p[4 + i] = &z->larger[i];
}

int dre_sizing_open(dre_store *st)
{
	struct dre_sizing *z = &st->sz;
	if (!(z->ghost = calloc(SLOTS, sizeof *z->ghost)))
		return DRE_ENOMEM;
	z->since = (uint64_t)time(NULL);
	dre_sizing_limit(st, st->limit);
	char path[4200];
	snprintf(path, sizeof path, "%s/sizing", st->dir);
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0; /* a new store, or one from before: counting starts now */
	char magic[8];
	uint64_t *v[NFIELDS], tmp[NFIELDS], cnt = 0;
	fields(z, v);
	int ok = fread(magic, 8, 1, f) == 1 && !memcmp(magic, MAGIC, 8) && fread(tmp, 8, NFIELDS, f) == NFIELDS &&
		 fread(&cnt, 8, 1, f) == 1 && cnt <= SLOTS;
	struct dre_ghost g;
	for (uint64_t i = 0; ok && i < cnt; i++)
		if ((ok = fread(&g, sizeof g, 1, f) == 1) && g.at)
			*slot(z, g.tag) = g;
	fclose(f);
	if (ok) {
		for (int i = 0; i < NFIELDS; i++)
			*v[i] = tmp[i];
	} else { /* an estimate lost: start again */
		memset(z->ghost, 0, SLOTS * sizeof *z->ghost);
	}
	return 0;
}

/* DIR/sizing from a copy of the counters and the remembered chunks (temp
 * file + rename); needs no lock. */
static int write_file(const char *dir, const uint64_t v[NFIELDS], const struct dre_ghost *g, uint64_t cnt)
{
	char path[4200], tmp[4300];
	snprintf(path, sizeof path, "%s/sizing", dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = dre_fopen_w(tmp, "wb");
	if (!f)
		return DRE_EIO;
	int ok = fwrite(MAGIC, 8, 1, f) == 1 && fwrite(v, 8, NFIELDS, f) == NFIELDS && fwrite(&cnt, 8, 1, f) == 1 &&
		 fwrite(g, sizeof *g, cnt, f) == cnt;
	ok = fclose(f) == 0 && ok && rename(tmp, path) == 0;
	if (!ok)
		unlink(tmp);
	return ok ? 0 : DRE_EIO;
}

int dre_sizing_save(dre_store *st, pthread_mutex_t *held)
{
	struct dre_sizing *z = &st->sz;
	if (st->readonly || !z->ghost)
		return 0;
	uint64_t *p[NFIELDS], v[NFIELDS], cnt = 0;
	fields(z, p);
	for (int i = 0; i < NFIELDS; i++)
		v[i] = *p[i];
	struct dre_ghost *g = malloc(SLOTS * sizeof *g);
	if (!g)
		return DRE_ENOMEM;
	for (size_t i = 0; i < SLOTS; i++)
		if (z->ghost[i].at)
			g[cnt++] = z->ghost[i];
	if (held)
		pthread_mutex_unlock(held);
	int rc = write_file(st->dir, v, g, cnt);
	if (held)
		pthread_mutex_lock(held);
	free(g);
	return rc;
}

void dre_sizing_close(dre_store *st)
{
	free(st->sz.ghost);
	st->sz.ghost = NULL;
}
