/* test_lanbuf.c: the bulk LAN receive buffer (proxy/lanbuf.c) on real
 * loopback sockets: at most lan_bulk_streams streams hold it, a stream gives
 * it back when it ends or waits for tunnel room (and gets none for a second
 * after waiting), and a lower bound takes no buffer back but bars new ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "../proxy/relay_int.h"
#include "conf.h"
#include "stats.h"

enum { NS = 3 };

/* NS connected loopback sockets (the accepted ends) in fd. */
static void sockets(int fd[NS], int peer[NS])
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(ls >= 0);
	assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(ls, NS), 0);
	assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &al), 0);
	for (int i = 0; i < NS; i++) {
		peer[i] = socket(AF_INET, SOCK_STREAM, 0);
		assert_int_equal(connect(peer[i], (struct sockaddr *)&a, sizeof a), 0);
		fd[i] = accept(ls, NULL, NULL);
		assert_true(fd[i] >= 0);
	}
	close(ls);
}

static int rcvbuf(int fd)
{
	int v = 0;
	socklen_t l = sizeof v;
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &l), 0);
	return v;
}

/* The stats say held streams hold the buffer now, given were given it. */
static void bulk_stats(struct stats *st, int held, int given)
{
	char want[96];
	char *j = stats_render_json(st);
	assert_non_null(j);
	snprintf(want, sizeof want, "\"lan_bulk_buffers\":{\"held\":%d,\"given\":%d}", held, given);
	if (!strstr(j, want))
		fail_msg("%s not in %s", want, j);
	free(j);
}

static void test_bound(void **state)
{
	int fd[NS], peer[NS];
	sockets(fd, peer);
	struct stats *st = stats_create("core");
	assert_non_null(st);
	struct px_relay_env env = { .stats = st };
	struct px_relay r[NS];
	memset(r, 0, sizeof r);
	for (int i = 0; i < NS; i++) {
		r[i].env = &env;
		snprintf(r[i].src, sizeof r[i].src, "client %d", i);
		snprintf(r[i].dst, sizeof r[i].dst, "server");
	}
	int small = rcvbuf(fd[2]);
	px_lanbuf_set_max(2);
	for (int i = 0; i < NS; i++)
		px_lanbuf_fast(&r[i], fd[i]);
	assert_true(r[0].lan_bulk && r[1].lan_bulk && !r[2].lan_bulk);
	assert_true(rcvbuf(fd[0]) >= 16 << 20); /* the kernel reports twice what was set */
	assert_int_equal(rcvbuf(fd[2]), small);
	bulk_stats(st, 2, 2);
	px_lanbuf_release(&r[0]); /* r[0] ends: r[2] may have it */
	px_lanbuf_fast(&r[2], fd[2]);
	assert_true(!r[0].lan_bulk && r[2].lan_bulk);
	/* a wait for tunnel room: small again, and none for a second */
	px_lanbuf_room_wait(&r[1], fd[1]);
	assert_false(r[1].lan_bulk);
	assert_true(rcvbuf(fd[1]) < 16 << 20);
	px_lanbuf_fast(&r[1], fd[1]);
	assert_false(r[1].lan_bulk);
	/* a lower bound (a reload) keeps r[2]'s, gives r[0] none */
	px_lanbuf_set_max(0);
	px_lanbuf_fast(&r[0], fd[0]);
	assert_true(!r[0].lan_bulk && r[2].lan_bulk);
	px_lanbuf_set_max(1);
	px_lanbuf_fast(&r[0], fd[0]);
	assert_false(r[0].lan_bulk); /* r[2] holds the one */
	px_lanbuf_release(&r[2]);
	px_lanbuf_fast(&r[0], fd[0]);
	assert_true(r[0].lan_bulk);
	px_lanbuf_release(&r[0]);
	bulk_stats(st, 0, 4);
	px_lanbuf_set_max(CONF_LAN_BULK_DEFAULT);
	for (int i = 0; i < NS; i++) {
		close(fd[i]);
		close(peer[i]);
	}
	stats_free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
