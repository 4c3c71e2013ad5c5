/* nsif.h: network namespaces (as `ip netns` names them), TUN devices and
 * IPv4 interface setup.  Helpers never print: they fill the caller's err. */
#ifndef WN_NSIF_H
#define WN_NSIF_H

#include <stddef.h>

#define WN_NETNS_DIR "/run/netns"

/* Returns 1 if /run/netns/NAME exists, else 0. */
int wn_ns_exists(const char *name);

/* Creates /run/netns/NAME holding a new network namespace (like `ip netns add`),
 * with its loopback up.  The caller's namespace is unchanged.  Returns 0 or -1. */
int wn_ns_create(const char *name, char *err, size_t errlen);

/* Removes /run/netns/NAME (the namespace dies with its last user).  Returns 0 or -1. */
int wn_ns_delete(const char *name, char *err, size_t errlen);

/* Switches the calling thread into namespace NAME; *saved receives an fd of the
 * previous namespace for wn_ns_leave.  Returns 0 or -1. */
int wn_ns_enter(const char *name, int *saved, char *err, size_t errlen);

/* Returns to the namespace saved by wn_ns_enter and closes the fd.  Accepts -1. */
int wn_ns_leave(int saved);

/* Opens a non-blocking TUN device (IP packets, no extra header) named ifname in
 * the current namespace.  Returns the fd or -1. */
int wn_tun_open(const char *ifname, char *err, size_t errlen);

/* Gives ifname the IPv4 address addr/prefix and the mtu, disables IPv6 on it and
 * brings it up, in the current namespace.  Returns 0 or -1. */
int wn_if_setup(const char *ifname, const char *addr, int prefix, int mtu,
		char *err, size_t errlen);

/* Brings an interface up in the current namespace (e.g. "lo").  Returns 0 or -1. */
int wn_if_up(const char *ifname, char *err, size_t errlen);

#endif
