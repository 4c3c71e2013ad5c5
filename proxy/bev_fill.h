/* bev_fill.h: reading a socket bufferevent's input in large pieces.
 *
 * libevent 2.1 reads at most 4 KiB per readiness event (EVBUFFER_MAX_READ),
 * whatever bufferevent_set_max_single_read says: a bulk transfer then costs an
 * epoll_wait, a FIONREAD and a read per 4 KiB.  A read callback calls
 * px_bev_fill first to take what else the socket holds in one read. */
#ifndef WANOPT_BEV_FILL_H
#define WANOPT_BEV_FILL_H

#include <stddef.h>

struct bufferevent;

/* Read from bev's socket into its input buffer until the buffer holds upto
 * bytes or the socket is empty (one read).  End of file is left for
 * libevent's next read to report; a socket error is returned instead (-1,
 * errno set), as the socket does not report it twice: the caller handles it
 * as its event callback would.  Not for pairs (no socket): 0 at once. */
int px_bev_fill(struct bufferevent *bev, size_t upto);

#endif
