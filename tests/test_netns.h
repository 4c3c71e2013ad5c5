/* test_netns.h: lets a test run in a network namespace of its own. */
#ifndef WANOPT_TEST_NETNS_H
#define WANOPT_TEST_NETNS_H

#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* As root, moves the test into a fresh network namespace with only lo (up),
 * so nothing here touches the host's network; otherwise does nothing. */
static inline void private_netns(void)
{
	struct ifreq ifr = { 0 };
	int fd;

	if (geteuid() != 0 || unshare(CLONE_NEWNET) < 0)
		return;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	close(fd);
}

#endif
