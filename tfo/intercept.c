/* intercept.c: transparent interception (TPROXY and REDIRECT listeners, the
 * original destination of an accepted socket) and the fail-open dialer that
 * connects straight to that destination.  Never logs. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>

#include "tfo.h"

/* Writes "what: strerror(errno)" into err, keeps errno, returns -1. */
static int icpt_err(char *err, size_t errlen, const char *what)
{
	int e = errno;
	snprintf(err, errlen, "%s: %s", what, strerror(e));
	errno = e;
	return -1;
}

/* Sets an int socket option to 1. */
static int icpt_on(int fd, int level, int opt)
{
	int one = 1;
	return setsockopt(fd, level, opt, &one, sizeof one);
}

/* Non-blocking, dual-stack for IPv6, transparent for TPROXY; the fd or -1. */
int tfo_icpt_listen(const struct sockaddr *addr, socklen_t len, enum tfo_icpt_mode mode,
		    int backlog, char *err, size_t errlen)
{
	int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int zero = 0;

	if (fd < 0)
		return icpt_err(err, errlen, "socket");
	if (icpt_on(fd, SOL_SOCKET, SO_REUSEADDR) < 0) {
		icpt_err(err, errlen, "SO_REUSEADDR");
		goto fail;
	}
	if (addr->sa_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero) < 0) {
		icpt_err(err, errlen, "IPV6_V6ONLY");
		goto fail;
	}
	if (mode == TFO_ICPT_TPROXY) {
		/* IPv4 traffic on a dual-stack socket is governed by IP_TRANSPARENT. */
		if (icpt_on(fd, SOL_IP, IP_TRANSPARENT) < 0 ||
		    (addr->sa_family == AF_INET6 && icpt_on(fd, SOL_IPV6, IPV6_TRANSPARENT) < 0)) {
			icpt_err(err, errlen, "IP_TRANSPARENT (needs CAP_NET_ADMIN)");
			goto fail;
		}
	}
	if (bind(fd, addr, len) < 0) {
		icpt_err(err, errlen, "bind");
		goto fail;
	}
	tfo_dscp_recv_on(fd); /* the clients' class, for tfo_dscp_peer */
	if (listen(fd, backlog > 0 ? backlog : 512) < 0) {
		icpt_err(err, errlen, "listen");
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/* Rewrites an IPv4-mapped IPv6 sockaddr as AF_INET in place. */
static void icpt_unmap(struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in s4 = { .sin_family = AF_INET };

	if (ss->ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
		return;
	s4.sin_port = s6->sin6_port;
	memcpy(&s4.sin_addr, s6->sin6_addr.s6_addr + 12, 4);
	memset(ss, 0, sizeof *ss);
	memcpy(ss, &s4, sizeof s4);
	*len = sizeof s4;
}

/* getsockname (TPROXY) or the conntrack lookup (REDIRECT), unmapped to IPv4. */
int tfo_icpt_orig_dst(int fd, enum tfo_icpt_mode mode, struct sockaddr_storage *dst,
		      socklen_t *dstlen, char *err, size_t errlen)
{
	socklen_t len = sizeof *dst;

	memset(dst, 0, sizeof *dst);
	if (getsockname(fd, (struct sockaddr *)dst, &len) < 0)
		return icpt_err(err, errlen, "getsockname");
	icpt_unmap(dst, &len);
	if (mode == TFO_ICPT_REDIRECT) {
		/* The IPv4 conntrack lookup also serves v4-mapped connections on
		 * dual-stack sockets (the kernel keeps their IPv4 addresses). */
		int v4 = dst->ss_family == AF_INET;
		len = sizeof *dst;
		memset(dst, 0, sizeof *dst);
		if (getsockopt(fd, v4 ? SOL_IP : SOL_IPV6, v4 ? SO_ORIGINAL_DST : IP6T_SO_ORIGINAL_DST,
			       dst, &len) < 0)
			return icpt_err(err, errlen, "SO_ORIGINAL_DST (no REDIRECT conntrack entry)");
		icpt_unmap(dst, &len);
	}
	*dstlen = len;
	return 0;
}

/* True when the address (AF_INET or AF_INET6) belongs to this host. */
static int icpt_addr_local(const struct sockaddr *sa)
{
	struct ifaddrs *ifa, *i;
	int found = 0;

	if (sa->sa_family == AF_INET &&
	    (ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24) == 127)
		return 1;
	if (sa->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr))
		return 1;
	if (getifaddrs(&ifa) < 0)
		return 0;
	for (i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != sa->sa_family)
			continue;
		if (sa->sa_family == AF_INET)
			found = !memcmp(&((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr,
					&((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
		else
			found = !memcmp(&((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr,
					&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
	}
	freeifaddrs(ifa);
	return found;
}

uint16_t tfo_addr_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
	return 0;
}

/* Port equal to the listener's and a local (or loopback) address. */
int tfo_icpt_is_self(const struct sockaddr *dst, uint16_t listen_port)
{
	if (dst->sa_family != AF_INET && dst->sa_family != AF_INET6)
		return 0;
	return tfo_addr_port(dst) == listen_port && icpt_addr_local(dst);
}

/* Non-blocking socket (+ SO_MARK, DSCP) and connect; EINPROGRESS is success. */
int tfo_dial(const struct sockaddr *dst, socklen_t len, uint32_t mark, int dscp, char *err, size_t errlen)
{
	int fd = socket(dst->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return icpt_err(err, errlen, "socket");
	if (mark && setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof mark) < 0) {
		icpt_err(err, errlen, "SO_MARK (needs CAP_NET_ADMIN)");
		goto fail;
	}
	if (dscp > 0 && tfo_dscp_set(fd, dscp, err, errlen))
		goto fail;
	if (connect(fd, dst, len) < 0 && errno != EINPROGRESS) {
		char what[80], a[64];
		snprintf(what, sizeof what, "connect %s", tfo_addr_str(dst, a, sizeof a));
		icpt_err(err, errlen, what);
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/* SO_ERROR of a finished non-blocking connect. */
int tfo_connect_result(int fd, char *err, size_t errlen)
{
	int e = 0;
	socklen_t len = sizeof e;

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
		return icpt_err(err, errlen, "SO_ERROR");
	if (e) {
		errno = e;
		return icpt_err(err, errlen, "connect");
	}
	return 0;
}

/* inet_ntop plus port, IPv6 in brackets (an IPv4-mapped one as IPv4). */
char *tfo_addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)sa;
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
		snprintf(buf, len, "%s:%u", ip, ntohs(s4->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) { /* an IPv4 client of a dual-stack socket */
			inet_ntop(AF_INET, s6->sin6_addr.s6_addr + 12, ip, sizeof ip);
			snprintf(buf, len, "%s:%u", ip, ntohs(s6->sin6_port));
			return buf;
		}
		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip);
		snprintf(buf, len, "[%s]:%u", ip, ntohs(s6->sin6_port));
	} else {
		snprintf(buf, len, "(family %d)", sa->sa_family);
	}
	return buf;
}
