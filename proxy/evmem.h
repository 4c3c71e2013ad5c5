/* evmem.h: where libevent's small allocations live.
 *
 * libevent keeps a small record (16 bytes) per descriptor number an event
 * base has watched, for the life of the base, allocated the first time that
 * number is used.  During a burst of connections these records land between
 * the streams' buffers on the heap; once the streams close, each one splits
 * the freed memory, and handing it back (malloc_trim) then costs one madvise
 * call per piece: about 1,000 calls and 20-210 ms of a daemon's event loop
 * after 1,000 connections closed, on a VM whose TLB flushes trap.
 *
 * Once installed, libevent's requests of up to PX_EVMEM_SMALL bytes come from
 * a region of their own, one span of address space per 16-byte size class,
 * packed together and reused, never from the heap the streams use; larger
 * requests go to malloc as before.  Freed small objects stay in the region
 * for reuse (their count is bounded by the most libevent held at once).
 * Memory libevent hands over for the caller to free (evbuffer_readln's
 * lines) must go back through px_evmem_free, never free().
 * Thread-safe: every event base of the process shares it.  A sanitizer build
 * does not install it, so its checks still see libevent's objects. */
#ifndef WANOPT_EVMEM_H
#define WANOPT_EVMEM_H

#include <stddef.h>

#define PX_EVMEM_SMALL 64

/* Routes libevent's allocations through the region; call before the
 * process's first libevent call (frees of anything libevent allocated before
 * still work).  0 when installed, or already; 1 in a sanitizer build (not
 * installed, by design); -1 when the address space cannot be reserved
 * (libevent then keeps using malloc). */
int px_evmem_install(void);
/* What libevent is given (usable before install, too): malloc, realloc and
 * free, where n of 1 to PX_EVMEM_SMALL bytes comes from the region (from
 * malloc once its class's span is used up, or before install) and anything
 * else from malloc.  An object of the region that still fits its class stays
 * where it is on realloc; one that outgrows it moves.  free and realloc take
 * pointers of either origin. */
void *px_evmem_malloc(size_t n);
void *px_evmem_realloc(void *p, size_t n);
void px_evmem_free(void *p);
/* Whether p was handed out by the region (tests). */
int px_evmem_holds(const void *p);
/* Objects of the region in use now (tests, stats). */
size_t px_evmem_in_use(void);

#endif
