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

#endif
