/* dscp.c: DiffServ code points on TCP sockets: setting a socket's own
 * marking, and reading the marking its peer's packets carried (the SYN and
 * the handshake's last ACK, or later data for IPv6), so a proxy can carry a
 * client's class onward.  Class names as in RFC 4594: csN, afXY, ef, or a
 * number 0-63.  Never logs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "tfo.h"

#ifndef IPV6_2292PKTOPTIONS
#define IPV6_2292PKTOPTIONS 6
#endif

/* The socket's address family (AF_UNSPEC if unknown). */
static int sock_family(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	return getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 ? ss.ss_family : AF_UNSPEC;
}

int tfo_dscp_set(int fd, int dscp, char *err, size_t errlen)
{
	int tos = (dscp & 63) << 2;
	int fam = sock_family(fd);
	/* an IPv6 socket may carry IPv4 (mapped) traffic: mark both */
	if (fam == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos) < 0) {
		snprintf(err, errlen, "IPV6_TCLASS: %s", strerror(errno));
		return -1;
	}
	if (setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos) < 0 && fam != AF_INET6) {
		snprintf(err, errlen, "IP_TOS: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int tfo_dscp_get(int fd)
{
	int v = 0;
	socklen_t l = sizeof v;
	if (sock_family(fd) == AF_INET6 && getsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &v, &l) == 0 && v > 0)
		return (v >> 2) & 63;
	l = sizeof v;
	return getsockopt(fd, IPPROTO_IP, IP_TOS, &v, &l) == 0 ? (v >> 2) & 63 : 0;
}

void tfo_dscp_recv_on(int fd)
{
	int on = 1;
	setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof on);
	if (sock_family(fd) == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &on, sizeof on);
}

/* The TOS / traffic class byte in a getsockopt(*_PKTOPTIONS) answer, or -1. */
static int pktopt_tos(int fd, int level, int opt, int cmsg_level, int cmsg_type)
{
	union {
		struct cmsghdr align;
		char b[256];
	} u;
	socklen_t len = sizeof u.b;
	if (getsockopt(fd, level, opt, u.b, &len) < 0)
		return -1;
	struct msghdr m = { .msg_control = u.b, .msg_controllen = len };
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != cmsg_level || c->cmsg_type != cmsg_type)
			continue;
		if (c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int v;
			memcpy(&v, CMSG_DATA(c), sizeof v);
			return v & 0xff;
		}
		if (c->cmsg_len >= CMSG_LEN(1))
			return *(unsigned char *)CMSG_DATA(c);
	}
	return -1;
}

int tfo_dscp_peer(int fd)
{
	/* IPv4, also on an IPv6 socket carrying mapped IPv4; then IPv6 proper */
	int v4 = pktopt_tos(fd, IPPROTO_IP, IP_PKTOPTIONS, IPPROTO_IP, IP_TOS);
	int v6 = sock_family(fd) == AF_INET6 ? pktopt_tos(fd, IPPROTO_IPV6, IPV6_2292PKTOPTIONS, IPPROTO_IPV6,
							   IPV6_TCLASS)
					       : -1;
	int tos = v4 > 0 ? v4 : v6 > 0 ? v6 : (v4 == 0 || v6 == 0) ? 0 : -1;
	return tos < 0 ? -1 : tos >> 2;
}

int tfo_dscp_parse(const char *s)
{
	char *end;
	if (!strncasecmp(s, "cs", 2) && s[2] >= '0' && s[2] <= '7' && !s[3])
		return (s[2] - '0') * 8;
	if (!strncasecmp(s, "af", 2) && s[2] >= '1' && s[2] <= '4' && s[3] >= '1' && s[3] <= '3' && !s[4])
		return (s[2] - '0') * 8 + (s[3] - '0') * 2;
	if (!strcasecmp(s, "ef"))
		return 46;
	if (!strcasecmp(s, "default") || !strcasecmp(s, "be"))
		return 0;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	long v = strtol(s, &end, 0);
	return errno || *end || v < 0 || v > 63 ? -1 : (int)v;
}

char *tfo_dscp_name(int dscp, char *buf, size_t len)
{
	if (dscp == 46)
		snprintf(buf, len, "ef");
	else if (dscp % 8 == 0)
		snprintf(buf, len, "cs%d", dscp / 8);
	else if (dscp / 8 >= 1 && dscp / 8 <= 4 && dscp % 2 == 0 && dscp % 8 <= 6)
		snprintf(buf, len, "af%d%d", dscp / 8, dscp % 8 / 2);
	else
		snprintf(buf, len, "%d", dscp);
	return buf;
}
