/* volstore.h: a store in memory for a node whose own store cannot be
 * opened (volstore.c). */
#ifndef WANOPT_VOLSTORE_H
#define WANOPT_VOLSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "dre.h"

#define PX_VOLSTORE_MAX (256ull << 20) /* its size at most (and an eighth of the host's memory) */
#define PX_VOLSTORE_ENV "WANOPT_VOLATILE_DIR" /* where it is made; /dev/shm unless set */

/* Opens a new, empty store of px_volstore_size(size) bytes in a
 * directory of its own under /dev/shm (or PX_VOLSTORE_ENV), first removing
 * those that processes gone since left there.  Its path goes to dir.  NULL,
 * with err set, when none can be made. */
dre_store *px_volstore_open(uint64_t size, char *dir, size_t dirlen, char *err, size_t errlen);
/* The size a volatile store keeps to for a configured store_size. */
uint64_t px_volstore_size(uint64_t size);
/* Removes the directory of a volatile store, once it is closed. */
void px_volstore_remove(const char *dir);

/* Whether a store can be opened (its directory takes writes that reach the
 * disk, its lock is free), and if so the store opened, on a thread of its
 * own: a failing disk may hang the probe, and opening a large store takes
 * a while.  For the store a volatile one stands in for, or one a reload
 * names (node_swap.c). */
struct px_volprobe;
enum { PX_VOLPROBE_NO, PX_VOLPROBE_RUNNING, PX_VOLPROBE_OPEN };
/* A probe of the store in dir (copied); NULL when out of memory. */
struct px_volprobe *px_volprobe_new(const char *dir);
/* The last probe's result (PX_VOLPROBE_RUNNING while one runs; then
 * PX_VOLPROBE_OPEN until px_volprobe_take); unless one runs or a store
 * waits to be taken, starts another, which opens the store with a size
 * limit of size (and creates it if absent).  Returns at once. */
int px_volprobe_poll(struct px_volprobe *p, uint64_t size);
/* The store the last probe opened, now the caller's; NULL if none.  Unless
 * a probe runs, why the last one could not open it goes to err ("" if none
 * ran). */
dre_store *px_volprobe_take(struct px_volprobe *p, char *err, size_t errlen);
/* The directory p probes. */
const char *px_volprobe_dir(const struct px_volprobe *p);
/* Drops the caller's reference (a probe still running keeps its own, and
 * closes what it opens). */
void px_volprobe_free(struct px_volprobe *p);

#endif
