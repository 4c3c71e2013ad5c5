/* test_evmem.c: libevent's small allocations in a region of their own
 * (proxy/evmem.h): the allocator's contract, under two threads, and what it
 * is for: after a burst of descriptors watched by a real event base, the
 * freed heap lies in one piece, not one piece per descriptor. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/event.h>

#include "../proxy/evmem.h"

#define BURST 300          /* descriptors watched at once (two each: a pipe) */
#define BURST_BUF (48u << 10) /* a stream's buffer between them, on the heap */

static int installed;

static int setup(void **state)
{
	(void)state;
	int rc = px_evmem_install();
	assert_true(rc >= 0);
	installed = rc == 0;
	return 0;
}

/* Sizes 1 to PX_EVMEM_SMALL come from the region, each object its own
 * (patterns survive), 0 and larger ones do not; freeing gives all back. */
static void test_sizes(void **state)
{
	(void)state;
	if (!installed)
		skip();
	enum { N = 2000 };
	unsigned char *p[N];
	size_t n[N], base = px_evmem_in_use();
	for (int i = 0; i < N; i++) {
		n[i] = 1 + (size_t)(i * 7919) % (PX_EVMEM_SMALL + 40);
		assert_non_null(p[i] = px_evmem_malloc(n[i]));
		assert_int_equal(px_evmem_holds(p[i]), n[i] <= PX_EVMEM_SMALL);
		memset(p[i], i & 0xff, n[i]);
	}
	for (int i = 0; i < N; i++)
		for (size_t k = 0; k < n[i]; k++)
			assert_int_equal(p[i][k], i & 0xff);
	for (int i = 0; i < N; i++)
		px_evmem_free(p[i]);
	assert_int_equal(px_evmem_in_use(), base);
	void *z = px_evmem_malloc(0);
	assert_false(px_evmem_holds(z));
	px_evmem_free(z);
	px_evmem_free(NULL);
}

/* A freed object is the next one of its class handed out. */
static void test_reuse(void **state)
{
	(void)state;
	if (!installed)
		skip();
	void *a = px_evmem_malloc(20), *b = px_evmem_malloc(20);
	px_evmem_free(a);
	assert_ptr_equal(px_evmem_malloc(17), a);
	px_evmem_free(a);
	px_evmem_free(b);
}

/* realloc keeps what fits, moves what outgrows its class (keeping the
 * bytes), frees at 0 and takes heap pointers and NULL. */
static void test_resize(void **state)
{
	(void)state;
	if (!installed)
		skip();
	size_t base = px_evmem_in_use();
	char *p = px_evmem_realloc(NULL, 10);
	assert_true(px_evmem_holds(p));
	memcpy(p, "0123456789", 10);
	assert_ptr_equal(px_evmem_realloc(p, 16), p);
	char *q = px_evmem_realloc(p, 40);
	assert_true(px_evmem_holds(q));
	assert_ptr_not_equal(q, p);
	assert_memory_equal(q, "0123456789", 10);
	char *r = px_evmem_realloc(q, 5000);
	assert_false(px_evmem_holds(r));
	assert_memory_equal(r, "0123456789", 10);
	assert_int_equal(px_evmem_in_use(), base);
	r = px_evmem_realloc(r, 8); /* a heap object stays on the heap */
	assert_false(px_evmem_holds(r));
	assert_memory_equal(r, "01234567", 8);
	px_evmem_free(r);
	p = px_evmem_malloc(30);
	assert_null(px_evmem_realloc(p, 0));
	assert_int_equal(px_evmem_in_use(), base);
}

/* Two threads allocating, filling, checking and freeing at once. */
static void *churn(void *arg)
{
	uintptr_t id = (uintptr_t)arg;
	enum { KEEP = 64 };
	unsigned char *p[KEEP] = { 0 };
	size_t n[KEEP] = { 0 };
	unsigned x = (unsigned)id * 2654435761u + 1;
	for (int i = 0; i < 200000; i++) {
		x = x * 1103515245u + 12345u;
		int s = (int)(x >> 8) % KEEP;
		if (p[s]) {
			for (size_t k = 0; k < n[s]; k++)
				if (p[s][k] != (unsigned char)(id + s))
					return (void *)1;
			px_evmem_free(p[s]);
		}
		n[s] = 1 + (x >> 16) % PX_EVMEM_SMALL;
		if (!(p[s] = px_evmem_malloc(n[s])))
			return (void *)1;
		memset(p[s], (unsigned char)(id + s), n[s]);
	}
	for (int s = 0; s < KEEP; s++)
		px_evmem_free(p[s]);
	return NULL;
}

static void test_threads(void **state)
{
	(void)state;
	if (!installed)
		skip();
	size_t base = px_evmem_in_use();
	pthread_t t[2];
	void *rc[2];
	for (uintptr_t i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, churn, (void *)(i * 100)), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(t[i], &rc[i]), 0);
		assert_null(rc[i]);
	}
	assert_int_equal(px_evmem_in_use(), base);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what, (void)arg;
}

/* A burst as a daemon sees one: each new descriptor watched (libevent keeps
 * a record per descriptor number for good) between buffers of the streams;
 * once all are closed, the freed heap must not be split at every record:
 * malloc_trim pays one madvise call per piece. */
static void test_burst(void **state)
{
	(void)state;
	if (!installed)
		skip();
	struct event_base *base = event_base_new();
	assert_non_null(base);
	struct event *ev[BURST];
	int fds[BURST][2];
	void *buf[BURST];
	size_t records = px_evmem_in_use(), pieces = mallinfo2().ordblks;
	for (int i = 0; i < BURST; i++) {
		assert_non_null(buf[i] = malloc(BURST_BUF));
		memset(buf[i], 1, BURST_BUF);
		assert_int_equal(pipe(fds[i]), 0);
		assert_non_null(ev[i] = event_new(base, fds[i][0], EV_READ | EV_PERSIST, on_read, NULL));
		assert_int_equal(event_add(ev[i], NULL), 0);
	}
	for (int i = 0; i < BURST; i++) {
		event_free(ev[i]);
		close(fds[i][0]);
		close(fds[i][1]);
		free(buf[i]);
	}
	size_t now = mallinfo2().ordblks;
	print_message("records in the region: %zu; free heap pieces: %zu before, %zu after\n",
		      px_evmem_in_use() - records, pieces, now);
	assert_true(px_evmem_in_use() >= records + BURST);
	assert_true(now < pieces + BURST / 10);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_resize),
		cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
