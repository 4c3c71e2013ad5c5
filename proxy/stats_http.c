/* stats_http.c: the stats HTTP server (evhttp: /metrics, /stats.json), a
 * small blocking HTTP client, and `wanopt stats`, which prints the figures of
 * a running edge or core as a table (from /metrics) or as JSON. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "log.h"
#include "stats.h"
#include "tun.h"

#define STATS_BODY_MAX (64u << 20)

struct stats_http {
	struct evhttp *http;
	struct evconnlistener *lis; /* evhttp's, guarded against accept failures */
	struct stats *s;
	uint16_t port;
};

/* Sends body (freed here) with a content type, or 500 when body is NULL;
 * 405 to anything but GET and HEAD (a role may allow POST for a path of its
 * own, e.g. /warm, which widens what the server takes for every path). */
static void stats_http_send(struct evhttp_request *req, const char *ctype, char *body)
{
	struct evbuffer *out = evhttp_request_get_output_buffer(req);

	if (!(evhttp_request_get_command(req) & (EVHTTP_REQ_GET | EVHTTP_REQ_HEAD))) {
		free(body);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
		evhttp_send_error(req, 405, "GET it");
		return;
	}
	if (!body) {
		evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
		return;
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
	evbuffer_add(out, body, strlen(body));
	free(body);
	evhttp_send_reply(req, HTTP_OK, "OK", NULL);
}

/* GET /metrics. */
static void stats_http_metrics(struct evhttp_request *req, void *arg)
{
	struct stats_http *h = arg;
	stats_http_send(req, "text/plain; version=0.0.4; charset=utf-8", stats_render_prom(h->s));
}

/* GET /stats.json. */
static void stats_http_json(struct evhttp_request *req, void *arg)
{
	struct stats_http *h = arg;
	stats_http_send(req, "application/json", stats_render_json(h->s));
}

/* Anything else. */
static void stats_http_other(struct evhttp_request *req, void *arg)
{
	evhttp_send_error(req, HTTP_NOTFOUND, "try /metrics or /stats.json");
}

/* evhttp on base bound to host:port with the two handlers; NULL + err on failure. */
struct stats_http *stats_http_start(struct event_base *base, struct stats *s, const char *host,
				    uint16_t port, char *err, size_t errlen)
{
	struct stats_http *h = calloc(1, sizeof *h);
	struct evhttp_bound_socket *bs;
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	if (!h || !(h->http = evhttp_new(base))) {
		snprintf(err, errlen, "stats: out of memory");
		goto fail;
	}
	h->s = s;
	evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
	evhttp_set_timeout(h->http, 10);
	evhttp_set_max_headers_size(h->http, 16384);
	evhttp_set_max_body_size(h->http, 0);
	evhttp_set_cb(h->http, "/metrics", stats_http_metrics, h);
	evhttp_set_cb(h->http, "/stats.json", stats_http_json, h);
	evhttp_set_gencb(h->http, stats_http_other, h);
	if (!strcmp(host, "*"))
		host = "::"; /* every address, IPv4 and IPv6 */
	if (!(bs = evhttp_bind_socket_with_handle(h->http, host, port))) {
		snprintf(err, errlen, "stats: cannot listen on %s%s%s:%u: %s", strchr(host, ':') ? "[" : "",
			 host, strchr(host, ':') ? "]" : "", port, strerror(errno));
		goto fail;
	}
	h->lis = evhttp_bound_socket_get_listener(bs);
	tun_lguard_watch(h->lis, "stats listener", log_warn_cb, NULL);
	if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &len) == 0)
		h->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
				: ((struct sockaddr_in *)&ss)->sin_port);
	return h;
fail:
	stats_http_free(h);
	return NULL;
}

/* The bound port (useful after binding port 0). */
struct evhttp *stats_http_evhttp(struct stats_http *h)
{
	return h ? h->http : NULL;
}

uint16_t stats_http_port(const struct stats_http *h)
{
	return h->port;
}

/* Stops the server (open requests are dropped); NULL is fine. */
void stats_http_free(struct stats_http *h)
{
	if (!h)
		return;
	tun_lguard_forget(h->lis);
	if (h->http)
		evhttp_free(h->http);
	free(h);
}

/* Connects to host:port within timeout_ms; returns the fd or -1. */
static int stats_connect(const char *host, uint16_t port, int timeout_ms, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	char ps[8];
	int fd = -1, rc;

	snprintf(ps, sizeof ps, "%u", port);
	if ((rc = getaddrinfo(host, ps, &hints, &res))) {
		snprintf(err, errlen, "%s: %s", host, gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			int e = 0;
			socklen_t el = sizeof e;
			if (poll(&p, 1, timeout_ms) == 1 &&
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0)
				break;
			errno = e ? e : ETIMEDOUT;
		}
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		snprintf(err, errlen, "connect to %s port %u: %s", host, port, strerror(errno));
	return fd;
}

/* Reads until EOF (bounded); returns the malloc'd response or NULL. */
static char *stats_read_all(int fd, int timeout_ms, char *err, size_t errlen)
{
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap + 1), *nb;

	while (buf) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, timeout_ms) != 1) {
			snprintf(err, errlen, "timed out reading the answer");
			break;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n == 0) {
			buf[len] = 0;
			return buf;
		}
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			snprintf(err, errlen, "read: %s", strerror(errno));
			break;
		}
		len += (size_t)n;
		if (len == cap) {
			if (cap >= STATS_BODY_MAX || !(nb = realloc(buf, 2 * cap + 1))) {
				snprintf(err, errlen, "answer too large");
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	free(buf);
	return NULL;
}

/* HTTP/1.0 GET with Connection: close; the body of a 200 answer into *body. */
int stats_fetch(const char *host, uint16_t port, const char *path, int timeout_ms,
		char **body, char *err, size_t errlen)
{
	char req[512], *resp;
	int fd = stats_connect(host, port, timeout_ms, err, errlen);

	if (fd < 0)
		return -1;
	int v6 = strchr(host, ':') != NULL;
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s%s%s\r\nConnection: close\r\n\r\n",
			 path, v6 ? "[" : "", host, v6 ? "]" : "");
	if (n < 0 || (size_t)n >= sizeof req || write(fd, req, (size_t)n) != n) {
		snprintf(err, errlen, "sending the request failed");
		close(fd);
		return -1;
	}
	resp = stats_read_all(fd, timeout_ms, err, errlen);
	close(fd);
	if (!resp)
		return -1;
	char *hdr_end = strstr(resp, "\r\n\r\n");
	int status = 0;
	if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1 || !hdr_end || status != 200) {
		snprintf(err, errlen, "GET %s: HTTP status %d", path, status);
		free(resp);
		return -1;
	}
	memmove(resp, hdr_end + 4, strlen(hdr_end + 4) + 1);
	*body = resp;
	return 0;
}
