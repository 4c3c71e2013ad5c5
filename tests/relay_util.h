/* relay_util.h: test data for the relay's tests (test_relay_job.c,
 * test_relay_first.c). */
#ifndef WANOPT_TEST_RELAY_UTIL_H
#define WANOPT_TEST_RELAY_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* n bytes (malloc'd) of a pattern that tells every offset from seed apart. */
static inline uint8_t *t_pattern(size_t n, uint32_t seed)
{
	uint8_t *p = malloc(n);
	for (size_t i = 0; p && i < n; i++)
		p[i] = (uint8_t)((i * 2654435761u + seed) >> 13);
	return p;
}

#endif
