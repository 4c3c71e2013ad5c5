/* test_relay_first.c: the copy a relay keeps of its client's first bytes
 * (px_relay_keep_first, proxy/relay_pump.c) until the peer takes the stream:
 * every byte in order up to PX_RELAY_FIRST_MAX, dropped past it; and which
 * resets hand the copy on.  A coding job's reads: test_relay_job.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "../proxy/relay_int.h"
#include "relay_util.h"
#include "proto.h"

/* Not kept: nothing is copied.  Kept: pieces in order, up to the limit
 * exactly; one byte more drops the copy, and nothing comes back after. */
static void test_copy(void **state)
{
	struct px_relay r = { 0 };
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(80) };
	uint8_t *p = t_pattern(PX_RELAY_FIRST_MAX + 1, 7);
	px_relay_first_add(&r, p, 100);
	assert_null(r.first);
	px_relay_keep_first(&r, (struct sockaddr *)&to, sizeof to);
	assert_non_null(r.first);
	assert_int_equal(r.first_tolen, sizeof to);
	assert_memory_equal(&r.first_to, &to, sizeof to);
	px_relay_first_add(&r, p, 5);
	px_relay_first_add(&r, p + 5, 0);
	px_relay_first_add(&r, p + 5, PX_RELAY_FIRST_MAX - 105);
	px_relay_first_add(&r, p + PX_RELAY_FIRST_MAX - 100, 100);
	assert_non_null(r.first);
	assert_int_equal(evbuffer_get_length(r.first), PX_RELAY_FIRST_MAX);
	assert_memory_equal(evbuffer_pullup(r.first, -1), p, PX_RELAY_FIRST_MAX);
	px_relay_first_add(&r, p + PX_RELAY_FIRST_MAX, 1);
	assert_null(r.first);
	px_relay_first_add(&r, p, 1);
	assert_null(r.first);
	px_relay_first_drop(&r); /* twice is fine */
	free(p);
}

/* The resets after which the client's bytes may go elsewhere: those sent
 * before the target got anything, and only those. */
static void test_untouched(void **state)
{
	assert_true(px_relay_untouched(PROTO_RST_NOT_ALLOWED));
	assert_true(px_relay_untouched(PROTO_RST_CONNECT));
	assert_true(px_relay_untouched(PROTO_RST_REFUSED));
	assert_false(px_relay_untouched(PROTO_RST_CANCEL));
	assert_false(px_relay_untouched(PROTO_RST_TARGET));
	assert_false(px_relay_untouched(PROTO_RST_CODEC));
	assert_false(px_relay_untouched(PROTO_RST_INTERNAL));
	assert_false(px_relay_untouched(PROTO_RST_TUNNEL_DOWN));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copy),
		cmocka_unit_test(test_untouched),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
