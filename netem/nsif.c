/* nsif.c: namespaces, TUN devices and addresses, with plain syscalls and ioctls. */
#include "nsif.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Builds /run/netns/NAME, rejecting names that are not plain file names. */
static int ns_path(const char *name, char *path, size_t n, char *err, size_t errlen)
{
	if (!name || !*name || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0 || strlen(name) > 64) {
		snprintf(err, errlen, "bad namespace name '%s'", name ? name : "");
		return -1;
	}
	snprintf(path, n, "%s/%s", WN_NETNS_DIR, name);
	return 0;
}

int wn_ns_exists(const char *name)
{
	char path[128], e[8];
	struct stat st;

	return ns_path(name, path, sizeof path, e, sizeof e) == 0 && stat(path, &st) == 0;
}

int wn_ns_create(const char *name, char *err, size_t errlen)
{
	char path[128];
	int fd, saved;

	if (ns_path(name, path, sizeof path, err, errlen) < 0)
		return -1;
	if (mkdir(WN_NETNS_DIR, 0755) < 0 && errno != EEXIST)
		goto err_sys;
	if ((fd = open(path, O_RDONLY | O_CREAT | O_EXCL, 0444)) < 0)
		goto err_sys;
	close(fd);
	if ((saved = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
		goto err_unlink;
	if (unshare(CLONE_NEWNET) < 0)
		goto err_saved;
	if (mount("/proc/thread-self/ns/net", path, "none", MS_BIND, NULL) < 0)
		goto err_back;
	if (wn_if_up("lo", err, errlen) < 0) {
		wn_ns_leave(saved);
		wn_ns_delete(name, NULL, 0);
		return -1;
	}
	return wn_ns_leave(saved) < 0 ? -1 : 0;
err_back:
	snprintf(err, errlen, "%s: %s", path, strerror(errno));
	wn_ns_leave(saved);
	unlink(path);
	return -1;
err_saved:
	close(saved);
err_unlink:
	snprintf(err, errlen, "%s: %s", path, strerror(errno));
	unlink(path);
	return -1;
err_sys:
	snprintf(err, errlen, "%s: %s", path, strerror(errno));
	return -1;
}

int wn_ns_delete(const char *name, char *err, size_t errlen)
{
	char path[128], e[128];

	if (ns_path(name, path, sizeof path, err ? err : e, err ? errlen : sizeof e) < 0)
		return -1;
	umount2(path, MNT_DETACH);
	if (unlink(path) < 0 && errno != ENOENT) {
		if (err)
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int wn_ns_enter(const char *name, int *saved, char *err, size_t errlen)
{
	char path[128];
	int fd;

	*saved = -1;
	if (ns_path(name, path, sizeof path, err, errlen) < 0)
		return -1;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "namespace %s: %s", name, strerror(errno));
		return -1;
	}
	if ((*saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0 ||
	    setns(fd, CLONE_NEWNET) < 0) {
		snprintf(err, errlen, "entering namespace %s: %s", name, strerror(errno));
		if (*saved >= 0)
			close(*saved);
		*saved = -1;
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int wn_ns_leave(int saved)
{
	int rc;

	if (saved < 0)
		return 0;
	rc = setns(saved, CLONE_NEWNET);
	close(saved);
	return rc;
}

int wn_tun_open(const char *ifname, char *err, size_t errlen)
{
	struct ifreq ifr;
	int fd;

	if (strlen(ifname) >= IFNAMSIZ) {
		snprintf(err, errlen, "interface name '%s' longer than %d characters", ifname,
			 IFNAMSIZ - 1);
		return -1;
	}
	if ((fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "/dev/net/tun: %s", strerror(errno));
		return -1;
	}
	memset(&ifr, 0, sizeof ifr);
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	memcpy(ifr.ifr_name, ifname, strlen(ifname));
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		snprintf(err, errlen, "creating TUN %s: %s", ifname, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Runs one SIOCSIF* ioctl on ifr for ifname; fills err on failure. */
static int if_ioctl(int s, unsigned long req, struct ifreq *ifr, const char *what,
		    char *err, size_t errlen)
{
	if (ioctl(s, req, ifr) < 0) {
		snprintf(err, errlen, "%s %s: %s", what, ifr->ifr_name, strerror(errno));
		return -1;
	}
	return 0;
}

/* Sets IFF_UP on ifname through socket s. */
static int if_up(int s, const char *ifname, char *err, size_t errlen)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
	if (if_ioctl(s, SIOCGIFFLAGS, &ifr, "reading flags of", err, errlen) < 0)
		return -1;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	return if_ioctl(s, SIOCSIFFLAGS, &ifr, "bringing up", err, errlen);
}

int wn_if_up(const char *ifname, char *err, size_t errlen)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

	if (s < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	rc = if_up(s, ifname, err, errlen);
	close(s);
	return rc;
}

/* Writes "1" to this namespace's disable_ipv6 for ifname (best effort: keeps
 * router solicitations off the emulated link). */
static void no_ipv6(const char *ifname)
{
	char path[128];
	int fd;

	snprintf(path, sizeof path, "/proc/sys/net/ipv6/conf/%s/disable_ipv6", ifname);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) >= 0) {
		if (write(fd, "1", 1) < 0) { /* best effort */ }
		close(fd);
	}
}

int wn_if_setup(const char *ifname, const char *addr, int prefix, int mtu,
		char *err, size_t errlen)
{
	struct ifreq ifr;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
	int s, rc = -1;

	if (prefix < 1 || prefix > 32) {
		snprintf(err, errlen, "bad prefix length /%d", prefix);
		return -1;
	}
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	no_ipv6(ifname);
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
	sin->sin_family = AF_INET;
	if (inet_pton(AF_INET, addr, &sin->sin_addr) != 1) {
		snprintf(err, errlen, "bad IPv4 address '%s'", addr);
		goto out;
	}
	if (if_ioctl(s, SIOCSIFADDR, &ifr, "setting address of", err, errlen) < 0)
		goto out;
	sin->sin_addr.s_addr = prefix == 32 ? 0xffffffffu : htonl(~((1u << (32 - prefix)) - 1));
	if (if_ioctl(s, SIOCSIFNETMASK, &ifr, "setting netmask of", err, errlen) < 0)
		goto out;
	ifr.ifr_mtu = mtu;
	if (if_ioctl(s, SIOCSIFMTU, &ifr, "setting mtu of", err, errlen) < 0)
		goto out;
	ifr.ifr_qlen = 1000;
	if (if_ioctl(s, SIOCSIFTXQLEN, &ifr, "setting txqueuelen of", err, errlen) < 0)
		goto out;
	rc = if_up(s, ifname, err, errlen);
out:
	close(s);
	return rc;
}
