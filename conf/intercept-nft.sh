#!/bin/sh
# intercept-nft.sh: nftables rules that hand TCP connections crossing this
# host to wanopt's transparent listener (`transparent = PORT` in edge.conf).
#
#   intercept-nft.sh apply  [options]    install the rules (replacing earlier ones)
#   intercept-nft.sh remove [options]    remove them
#   intercept-nft.sh show                print the ruleset that `apply` would load
#
# Options (also as environment variables of the same name in capitals):
#   --mode=tproxy|redirect  tproxy (default): TPROXY + policy routing, the edge
#                           sees the original destination as its local address.
#                           redirect: NAT REDIRECT, read back by SO_ORIGINAL_DST.
#   --port=PORT             wanopt's transparent port (default 3129)
#   --iface=IF[,IF...]      LAN interfaces to intercept on (default: every one)
#   --dports=LIST           destination ports, e.g. 80,443,1000-2000 (default: all)
#   --exclude=CIDR[,...]    destinations never intercepted (e.g. the core's
#                           address); IPv4 and IPv6 may be mixed
#   --mark=N                fwmark routing TPROXY'd packets locally (default 0x1)
#   --bypass=N              SO_MARK on wanopt's own sockets: never intercepted
#                           (default 0x2; must equal the edge's bypass_mark)
#   --table=N               routing table for --mark (default 100)
#
# The rules only see forwarded traffic (the prerouting hook): the edge is the
# LAN's gateway or sits on its path.  Traffic to this host's own addresses is
# never intercepted, and only connections a LAN host starts are (its SYN):
# connections from the WAN side to LAN hosts, and those open before the rules
# were applied, are routed as before.  `apply` replaces the rules in one step
# (a bad option leaves the running ones in place).
#
# iptables equivalents (IPv4; use ip6tables with the same arguments for IPv6):
#   tproxy:
#     iptables -t mangle -N WANOPT
#     iptables -t mangle -A WANOPT -m mark --mark 0x2/0x2 -j RETURN
#     iptables -t mangle -A WANOPT -m addrtype --dst-type LOCAL -j RETURN
#     iptables -t mangle -A WANOPT -p tcp -m socket --transparent -j MARK --set-mark 0x1
#     iptables -t mangle -A WANOPT -p tcp -m socket --transparent -j ACCEPT
#     iptables -t mangle -A WANOPT -p tcp --syn [--dport 80] -j TPROXY --on-port 3129 --tproxy-mark 0x1/0x1
#     iptables -t mangle -A PREROUTING -i LAN_IF -j WANOPT
#     ip rule add fwmark 0x1/0x1 lookup 100
#     ip route add local 0.0.0.0/0 dev lo table 100      (ip -6 ... ::/0 for IPv6)
#   redirect:
#     iptables -t nat -A PREROUTING -i LAN_IF -p tcp [--dport 80] -j REDIRECT --to-ports 3129
set -eu

MODE=${MODE:-tproxy} PORT=${PORT:-3129} IFACE=${IFACE:-} DPORTS=${DPORTS:-}
EXCLUDE=${EXCLUDE:-} MARK=${MARK:-0x1} BYPASS=${BYPASS:-0x2} TABLE=${TABLE:-100}
NFT_TABLE=wanopt

usage() { sed -n '2,/^set -eu/p' "$0" | sed 's/^# \{0,1\}//; /^set -eu/d'; exit "${1:-2}"; }

cmd=${1:-}; [ $# -gt 0 ] && shift
case $cmd in -h|--help) usage 0 ;; esac
for a in "$@"; do
	case $a in
	--mode=*) MODE=${a#*=} ;; --port=*) PORT=${a#*=} ;; --iface=*) IFACE=${a#*=} ;;
	--dports=*) DPORTS=${a#*=} ;; --exclude=*) EXCLUDE=${a#*=} ;; --mark=*) MARK=${a#*=} ;;
	--bypass=*) BYPASS=${a#*=} ;; --table=*) TABLE=${a#*=} ;;
	-h|--help) usage 0 ;;
	*) echo "intercept-nft.sh: unknown option $a" >&2; usage 2 ;;
	esac
done
case $MODE in tproxy|redirect) ;; *) echo "intercept-nft.sh: --mode must be tproxy or redirect" >&2; exit 2 ;; esac
case $PORT in ''|*[!0-9]*) echo "intercept-nft.sh: --port must be a number" >&2; exit 2 ;; esac
[ "$PORT" -ge 1 ] && [ "$PORT" -le 65535 ] || { echo "intercept-nft.sh: --port must be 1-65535" >&2; exit 2; }
# Marks: decimal or 0x hex, nonzero; written in hex (as `ip rule` shows them).
mark_of() {  # option value
	case $2 in 0x*) v=$2 ;; *[!0-9]*|'') v=bad ;; *) v=$2 ;; esac
	if [ "$v" = bad ] || ! v=$(printf '0x%x' "$v" 2>/dev/null) || [ "$v" = 0x0 ]; then
		echo "intercept-nft.sh: --$1 must be a nonzero number (decimal or 0x hex)" >&2
		exit 2
	fi
	echo "$v"
}
MARK=$(mark_of mark "$MARK") || exit 2
BYPASS=$(mark_of bypass "$BYPASS") || exit 2
case $TABLE in ''|*[!0-9]*) echo "intercept-nft.sh: --table must be a number" >&2; exit 2 ;; esac
case $DPORTS in *[!0-9,-]*) echo "intercept-nft.sh: --dports: ports, ranges LO-HI, commas" >&2; exit 2 ;; esac

# Prints "{ a, b }" from "a,b".
set_of() { printf '{ %s }' "$(echo "$1" | sed 's/,/, /g')"; }

# The ruleset: one inet table, so IPv4 and IPv6 share the rules.
ruleset() {
	ifm="" dpm="" ex4="" ex6=""
	[ -n "$IFACE" ] && ifm="iifname $(set_of "$IFACE") "
	[ -n "$DPORTS" ] && dpm="tcp dport $(set_of "$DPORTS") "
	for c in $(echo "$EXCLUDE" | tr ',' ' '); do
		case $c in *:*) ex6="$ex6${ex6:+, }$c" ;; *) ex4="$ex4${ex4:+, }$c" ;; esac
	done
	# in one transaction: the table made (if missing), emptied, filled
	echo "table inet $NFT_TABLE"
	echo "delete table inet $NFT_TABLE"
	echo "table inet $NFT_TABLE {"
	if [ "$MODE" = tproxy ]; then
		echo "	chain prerouting {"
		echo "		type filter hook prerouting priority mangle; policy accept;"
	else
		echo "	chain prerouting {"
		echo "		type nat hook prerouting priority dstnat; policy accept;"
	fi
	echo "		meta l4proto != tcp return"
	echo "		meta mark & $BYPASS == $BYPASS return"
	echo "		fib daddr type local return"
	[ -n "$ex4" ] && echo "		ip daddr { $ex4 } return"
	[ -n "$ex6" ] && echo "		ip6 daddr { $ex6 } return"
	if [ "$MODE" = tproxy ]; then
		# Packets of connections already handed over: route them locally.
		echo "		${ifm}socket transparent 1 meta mark set $MARK accept"
		# New connections only: a LAN host's SYN (not a reply to a connection
		# from the WAN side, nor a packet of one open before the rules).
		syn="tcp flags & (fin | syn | rst | ack) == syn "
		echo "		${ifm}meta l4proto tcp ${syn}${dpm}meta nfproto ipv4 tproxy ip to :$PORT meta mark set $MARK accept"
		echo "		${ifm}meta l4proto tcp ${syn}${dpm}meta nfproto ipv6 tproxy ip6 to :$PORT meta mark set $MARK accept"
	else
		echo "		${ifm}meta l4proto tcp ${dpm}redirect to :$PORT"
	fi
	echo "	}"
	echo "}"
}

# Policy routing for TPROXY: marked packets are delivered locally.
routes() {  # add|del
	for fam in -4 -6; do
		dflt=0.0.0.0/0; [ $fam = -6 ] && dflt=::/0
		if [ "$1" = add ]; then
			ip $fam rule show | grep -q "fwmark $MARK/$MARK lookup $TABLE" ||
				ip $fam rule add fwmark "$MARK/$MARK" lookup "$TABLE"
			ip $fam route replace local "$dflt" dev lo table "$TABLE"
		else
			ip $fam rule del fwmark "$MARK/$MARK" lookup "$TABLE" 2>/dev/null || true
			ip $fam route del local "$dflt" dev lo table "$TABLE" 2>/dev/null || true
		fi
	done
}

case $cmd in
apply)
	ruleset | nft -f -
	[ "$MODE" = tproxy ] && routes add
	echo "intercept-nft.sh: $MODE rules to port $PORT applied" >&2
	;;
remove)
	nft list table inet $NFT_TABLE >/dev/null 2>&1 && nft delete table inet $NFT_TABLE
	routes del
	;;
show) ruleset | sed 1,2d ;;
*) usage 2 ;;
esac
