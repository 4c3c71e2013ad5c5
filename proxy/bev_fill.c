/* bev_fill.c: see bev_fill.h. */
#include <errno.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "bev_fill.h"

int px_bev_fill(struct bufferevent *bev, size_t upto)
{
	int fd = bufferevent_getfd(bev);
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t have = evbuffer_get_length(in);
	if (fd < 0 || have >= upto)
		return 0;
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	ssize_t n = 0;
	evbuffer_unfreeze(in, 0); /* a socket bufferevent keeps the end frozen but while reading */
	int k = evbuffer_reserve_space(in, (ev_ssize_t)(upto - have), v, 2);
	if (k > 0) {
		for (int i = 0; i < k; i++)
			iov[i] = (struct iovec){ v[i].iov_base, v[i].iov_len };
		n = readv(fd, iov, k);
		size_t left = n > 0 ? (size_t)n : 0;
		for (int i = 0; i < k; i++) {
			v[i].iov_len = left < v[i].iov_len ? left : v[i].iov_len;
			left -= v[i].iov_len;
		}
		if (n > 0)
			evbuffer_commit_space(in, v, k);
	} /* else out of memory: libevent's own reads go on */
	evbuffer_freeze(in, 0);
	return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR ? -1 : 0;
}
