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

/* Whether the store a volatile one stands in for could be opened again
 * (its directory takes writes that reach the disk, its lock is free),
 * probed on a thread of its own: a failing disk may hang the probe. */
struct px_volprobe;
enum { PX_VOLPROBE_NO, PX_VOLPROBE_RUNNING, PX_VOLPROBE_OK };
/* A probe of the store in dir (copied); NULL when out of memory. */
struct px_volprobe *px_volprobe_new(const char *dir);
/* The last probe's result (PX_VOLPROBE_RUNNING while one runs); unless one
 * runs, starts another.  Returns at once. */
int px_volprobe_poll(struct px_volprobe *p);
/* Drops the caller's reference (a probe still running keeps its own). */
void px_volprobe_free(struct px_volprobe *p);

#endif
