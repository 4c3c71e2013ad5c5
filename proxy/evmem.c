/* evmem.c: libevent's small allocations, kept off the heap (evmem.h). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <event2/event.h>

#include "evmem.h"

#define EVMEM_GRAIN 16                             /* class c holds (c + 1) * GRAIN bytes */
#define EVMEM_CLASSES (PX_EVMEM_SMALL / EVMEM_GRAIN)
#define EVMEM_SPAN ((size_t)16 << 20)              /* address space per class: 1M records of 16 B */

static struct {
	char *base; /* EVMEM_CLASSES spans, reserved at install */
	pthread_mutex_t mu;
	char *next[EVMEM_CLASSES]; /* never handed out yet: from here to the span's end */
	void *freed[EVMEM_CLASSES]; /* handed back, linked through their first word */
	size_t in_use;
} em = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* The size class of p, or -1 when p is not the region's. */
static int em_class(const void *p)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)em.base;
	if (!em.base || a < b || a >= b + EVMEM_CLASSES * EVMEM_SPAN)
		return -1;
	return (int)((a - b) / EVMEM_SPAN);
}

void *px_evmem_malloc(size_t n)
{
	if (!n || n > PX_EVMEM_SMALL || !em.base)
		return malloc(n);
	int c = (int)((n - 1) / EVMEM_GRAIN);
	size_t size = (size_t)(c + 1) * EVMEM_GRAIN;
	char *end = em.base + (size_t)(c + 1) * EVMEM_SPAN;
	void *p = NULL;
	pthread_mutex_lock(&em.mu);
	if (em.freed[c]) {
		p = em.freed[c];
		memcpy(&em.freed[c], p, sizeof(void *));
	} else if ((size_t)(end - em.next[c]) >= size) {
		p = em.next[c];
		em.next[c] += size;
	}
	if (p)
		em.in_use++;
	pthread_mutex_unlock(&em.mu);
	return p ? p : malloc(n);
}

void px_evmem_free(void *p)
{
	int c = em_class(p);
	if (c < 0) {
		free(p);
		return;
	}
	pthread_mutex_lock(&em.mu);
	memcpy(p, &em.freed[c], sizeof(void *));
	em.freed[c] = p;
	em.in_use--;
	pthread_mutex_unlock(&em.mu);
}

void *px_evmem_realloc(void *p, size_t n)
{
	int c = em_class(p);
	if (c < 0)
		return p ? realloc(p, n) : px_evmem_malloc(n);
	if (!n) {
		px_evmem_free(p);
		return NULL;
	}
	size_t have = (size_t)(c + 1) * EVMEM_GRAIN;
	if (n <= have)
		return p;
	void *q = px_evmem_malloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, have);
	px_evmem_free(p);
	return q;
}

int px_evmem_install(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return 1;
#else
	if (em.base)
		return 0;
	void *b = mmap(NULL, EVMEM_CLASSES * EVMEM_SPAN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (b == MAP_FAILED)
		return -1;
	em.base = b;
	for (int c = 0; c < EVMEM_CLASSES; c++)
		em.next[c] = em.base + (size_t)c * EVMEM_SPAN;
	event_set_mem_functions(px_evmem_malloc, px_evmem_realloc, px_evmem_free);
	return 0;
#endif
}

int px_evmem_holds(const void *p)
{
	return em_class(p) >= 0;
}

size_t px_evmem_in_use(void)
{
	pthread_mutex_lock(&em.mu);
	size_t n = em.in_use;
	pthread_mutex_unlock(&em.mu);
	return n;
}
