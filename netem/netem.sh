#!/usr/bin/env bash
# netem/netem.sh: apply a wanopt link profile to interfaces with the kernel's
# `tc qdisc ... netem`, or remove it again.  For hosts whose kernel has sch_netem
# (many do not: then use bin/wanem, which needs no qdisc).
#
#   netem.sh available
#       exit 0 if this kernel can run netem (tried on a veth pair in a scratch namespace)
#   netem.sh apply DEV PROFILE up|down [NETNS]
#       shape DEV's egress with one direction of PROFILE ("up" = branch -> datacenter).
#       A link needs both: on a veth pair, "up" on the branch end and "down" on the
#       datacenter end (netem/testbed does exactly that).
#   netem.sh remove DEV [NETNS]
#       delete the qdisc (no error if none is there)
#   netem.sh show PROFILE up|down
#       print the tc arguments without applying them
#
# The queue: netem's limit counts packets, including those still in their delay, so
# the limit is the one-way in-flight packets (rate x delay / MTU) plus the profile's
# drop-tail queue (limit bytes, one BDP by default) in MTU-sized packets.
# Jitter: netem reorders jittered packets unless a rate is set; bin/wanem never reorders.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
WANEM="${WANEM:-$here/../bin/wanem}"

die() { echo "netem.sh: $*" >&2; exit 2; }

# tc_args PROFILE DIR: prints the netem arguments for one direction of PROFILE.
tc_args() {
	local profile=$1 dir=$2 vars rate delay jitter loss limit mtu pkts
	# a name (t1) stands for netem/profiles/NAME.conf, as with netem/testbed
	[ -f "$profile" ] || [ ! -f "$here/profiles/$profile.conf" ] || profile="$here/profiles/$profile.conf"
	[ -x "$WANEM" ] || die "$WANEM not built (run make): it validates profiles"
	vars=$("$WANEM" check "$profile") || exit 2
	eval "$vars"
	case $dir in up|down) ;; *) die "direction must be up or down, not '$dir'" ;; esac
	eval "rate=\$${dir}_rate_bit delay=\$${dir}_delay_us jitter=\$${dir}_jitter_us"
	eval "loss=\$${dir}_loss_pct limit=\$${dir}_limit_bytes"
	pkts=$(( (rate * delay / 8000000 + limit + mtu - 1) / mtu ))
	[ "$pkts" -lt 4 ] && pkts=4
	printf 'netem limit %d delay %dus' "$pkts" "$delay"
	[ "$jitter" -gt 0 ] && printf ' %dus' "$jitter"   # netem's default jitter is uniform, like wanem's
	[ "$loss" != 0 ] && printf ' loss %s%%' "$loss"
	[ "$rate" -gt 0 ] && printf ' rate %dbit' "$rate"
	echo
}

# nsx NETNS CMD...: runs CMD in NETNS (or here if NETNS is empty).
nsx() {
	local ns=$1; shift
	if [ -n "$ns" ]; then ip netns exec "$ns" "$@"; else "$@"; fi
}

available() {
	local ns="wnm-probe-$$" rc=1
	ip netns add "$ns" 2>/dev/null || return 1
	if ip -n "$ns" link add wnmp0 type veth peer name wnmp1 2>/dev/null &&
	   tc -n "$ns" qdisc add dev wnmp0 root netem delay 1ms 2>/dev/null; then
		rc=0
	fi
	ip netns del "$ns" 2>/dev/null
	return $rc
}

case "${1:-}" in
available)
	available ;;
apply)
	[ $# -ge 4 ] && [ $# -le 5 ] || die "usage: netem.sh apply DEV PROFILE up|down [NETNS]"
	args=$(tc_args "$3" "$4")
	# shellcheck disable=SC2086
	nsx "${5:-}" tc qdisc replace dev "$2" root $args ;;
remove)
	[ $# -ge 2 ] && [ $# -le 3 ] || die "usage: netem.sh remove DEV [NETNS]"
	nsx "${3:-}" tc qdisc del dev "$2" root 2>/dev/null || true ;;
show)
	[ $# -eq 3 ] || die "usage: netem.sh show PROFILE up|down"
	tc_args "$2" "$3" ;;
*)
	sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2 ;;
esac
