#!/usr/bin/env bash
# netem/netem.sh: the tc netem arguments derived from profiles (both directions,
# queue limit = in-flight packets + one BDP), and apply/remove on a veth pair in
# a scratch namespace where the kernel has sch_netem.  A few seconds.
set -u
cd "$(dirname "$0")/.."
export WANEM="${BINDIR:-bin}/wanem"
ns="wnm-t$$-tc" fail=0
trap 'ip netns del "$ns" 2>/dev/null' EXIT

# same DESCRIPTION GOT WANT
same() {
	if [ "$2" = "$3" ]; then echo "ok    $1"; else echo "FAIL  $1: got '$2', want '$3'"; fail=1; fi
}
same "t1 up" "$(netem/netem.sh show netem/profiles/t1.conf up)" \
	"netem limit 8 delay 20000us rate 1544000bit"
same "highlat down" "$(netem/netem.sh show netem/profiles/highlat.conf down)" \
	"netem limit 113 delay 150000us loss 0.2% rate 3000000bit"
same "lossy4g up (asymmetric, jitter)" "$(netem/netem.sh show netem/profiles/lossy4g.conf up)" \
	"netem limit 63 delay 30000us 8000us loss 1% rate 5000000bit"
same "lossy4g down" "$(netem/netem.sh show netem/profiles/lossy4g.conf down)" \
	"netem limit 250 delay 30000us 8000us loss 1% rate 20000000bit"
same "bad direction refused" "$(netem/netem.sh show netem/profiles/t1.conf left 2>&1)" \
	"netem.sh: direction must be up or down, not 'left'"
same "missing profile refused" "$(netem/netem.sh show /nonexistent.conf up 2>&1 >/dev/null | head -1)" \
	"wanem: /nonexistent.conf: cannot open: No such file or directory"
same "wanem check takes a profile's name" "$(w=$(realpath "$WANEM") && cd /tmp && "$w" check t1 | head -1)" "name='t1'"
same "wanem check names an unknown profile" "$("$WANEM" check nosuch 2>&1)" \
	"wanem: nosuch: cannot open: No such file or directory"

ip netns add "$ns"
ip -n "$ns" link add wnmt0 type veth peer name wnmt1
if netem/netem.sh available; then
	netem/netem.sh apply wnmt0 netem/profiles/t1.conf up "$ns"
	same "applied" "$(tc -n "$ns" qdisc show dev wnmt0 | grep -c 'netem.* limit 8 ')" "1"
	netem/netem.sh remove wnmt0 "$ns"
	same "removed" "$(tc -n "$ns" qdisc show dev wnmt0 | grep -c netem)" "0"
else
	echo "      (no sch_netem in this kernel: apply must fail cleanly)"
	netem/netem.sh apply wnmt0 netem/profiles/t1.conf up "$ns" 2>/dev/null
	same "apply fails without sch_netem" "$?" "2"
fi
netem/netem.sh remove wnmt0 "$ns"
same "remove with nothing applied" "$?" "0"
same "available leaves no namespace" "$(ip netns list | grep -c "^wnm-probe-")" "0"
exit $fail
