#!/usr/bin/env bash
# proxy_netns.test.sh: transparent interception by a real edge/core pair in
# network namespaces.
#
#   we2e-N-c (client)        we2e-N-r (router + edge)                    we2e-N-s (server + core)
#   10.78.1.2  fd78:1::2 --vc/vr-- 10.78.1.1  fd78:1::1 | 10.78.2.1  fd78:2::1 --vt/vs-- 10.78.2.2  fd78:2::2
#                               nft: TCP to :8080 -> edge --transparent=3129        server :8080, core :7000
#
# The client connects to the server's real address.  The router's nftables
# rules (conf/intercept-nft.sh) hand the connection to the edge, which
# carries it through the tunnel to the core next to the server.  The server
# answers PEER with the address it sees, which tells the path apart:
#   10.78.1.2  not intercepted;  10.78.2.2  through the core;  10.78.2.1  direct
#   from the edge (fail open).
# 1. TPROXY, IPv4 and IPv6: byte-exact both ways, through the core, and the
#    second download of the same data crosses few WAN bytes.
# 2. The core killed, then the path to it blackholed: intercepted connections
#    go direct within a second or three and stay byte-exact; the core back:
#    through it again.
# 3. REDIRECT mode: through the core too.
# (1. also: a destination outside the core's allow, which the core told the
#    edge (ALLOW): connections there go direct, the first one too; 2. also:
#    the core back with an allow list too long to tell: the first connection
#    outside it is reset, and the edge sends the next ones direct.)
# (1. also: the edge finds the core by name (its /etc/hosts); its name server
#    never answers: a forward to a name goes through the core at once; the
#    core reloaded reads its /etc/hosts again.)
# (1. also: `classify` matches the original destination, IPv6 here.)
set -eu
cd "$(dirname "$0")/.."
. tests/proxy/lib.sh
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 0; }
command -v nft >/dev/null || { echo "SKIP: no nft"; exit 0; }

N=we2e-$$
C=$N-c R=$N-r S=$N-s
ns_cleanup() {  # after px_cleanup stopped the daemons
	for ns in $C $R $S; do ip netns del "$ns" 2>/dev/null || true; done
	rm -rf "/etc/netns/$S" "/etc/netns/$R"
	rmdir /etc/netns 2>/dev/null || true # if this test made it
}
CLEANUP_HOOK=ns_cleanup
px_setup
x() { ip netns exec "$@"; }

for ns in $C $R $S; do ip netns add "$ns"; x "$ns" ip link set lo up; done
# the core's /etc/hosts (ip netns exec mounts /etc/netns/NS/* over /etc/*);
# the edge's: the core by name, and a name server that never answers (the
# core's host drops DNS): the WAN's DNS down
mkdir -p "/etc/netns/$S" "/etc/netns/$R"
printf '10.78.2.2 svc.wanopt.test\n10.78.2.2 slow.wanopt.test\n' >"/etc/netns/$S/hosts"
echo "10.78.2.2 core.wanopt.test" >"/etc/netns/$R/hosts"
echo "nameserver 10.78.2.2" >"/etc/netns/$R/resolv.conf"
ip -n $C link add vc type veth peer name vr netns $R
ip -n $R link add vt type veth peer name vs netns $S
x $C ip addr add 10.78.1.2/24 dev vc; x $C ip addr add fd78:1::2/64 dev vc nodad
x $R ip addr add 10.78.1.1/24 dev vr; x $R ip addr add fd78:1::1/64 dev vr nodad
x $R ip addr add 10.78.2.1/24 dev vt; x $R ip addr add fd78:2::1/64 dev vt nodad
x $S ip addr add 10.78.2.2/24 dev vs; x $S ip addr add fd78:2::2/64 dev vs nodad
x $S ip addr add 10.78.2.3/24 dev vs # the server too, outside the core's allow
x $S ip addr add 10.78.2.4/24 dev vs # ... and again
x $S ip addr add 10.78.2.6/24 dev vs # outside the core's allow: many connections at once
x $S ip addr add 10.78.2.5/24 dev vs # in the core's allow, but it cannot connect there (part 5)
x $S ip addr add fd78:2::5/64 dev vs nodad # ... and by IPv6
for pair in "$C vc" "$R vr" "$R vt" "$S vs"; do set -- $pair; x "$1" ip link set "$2" up; done
x $C ip route add default via 10.78.1.1; x $C ip -6 route add default via fd78:1::1
x $S ip route add default via 10.78.2.1; x $S ip -6 route add default via fd78:2::1
x $R sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 \
	net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0

# Daemons in namespaces: nsrun NAME NS COMMAND...
nsrun() {
	local n=$1 ns=$2
	shift 2
	ip netns exec "$ns" "$@" >>"$T/$n.log" 2>&1 &
	PID[$n]=$!
}
core() { # [-c FILE]: the allow list from FILE instead
	local mark
	mark=$(px_count_log core "tunnel listener on")
	nsrun core $S "$BIN" core --listen=[::]:7000 "${@:---allow=10.78.2.2/32,[fd78:2::2]/128}" --store="$T/core.store" \
		--tls_cert="$T/pki/core.crt" --tls_key="$T/pki/core.key" --tls_ca="$T/pki/ca.crt" --stats=0.0.0.0:9472
	px_wait_count core "tunnel listener on" $((mark + 1)) 10
}
estat() { x $R "$BIN" stats --json --stats=127.0.0.1:9471 | python3 -c 'import json,sys; j=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
cx() { x $C timeout -k 2 60 python3 "$PXTOOL" "$@"; }
# path HOST: what the server sees of a connection from the client
path() { cx peer "$1" 8080 --timeout=10 2>&1 | sed 's/^ok //'; }
expect_path() {  # label host want
	local got
	got=$(path "$2")
	case $got in *"$3") ok "$1: the server sees $got" ;; *) fail "$1: the server sees '$got', expected $3" ;; esac
}

nsrun srv $S python3 "$PXTOOL" server --host=:: --port=8080
for i in $(seq 50); do x $S ss -ltn | grep -q ':8080 ' && break; sleep 0.1; done
expect_path "no interception yet" 10.78.2.2 10.78.1.2

core
x $S nft -f - <<'NFT'
table inet we2e_nodns {
	chain in { type filter hook input priority 0; udp dport 53 drop; tcp dport 53 drop; }
}
NFT
nsrun edge $R "$BIN" edge --peer=core.wanopt.test:7000 --transparent=3129 --store="$T/edge.store" \
	--tls_cert="$T/pki/edge.crt" --tls_key="$T/pki/edge.key" --tls_ca="$T/pki/ca.crt" --stats=127.0.0.1:9471 \
	"--classify=cs1 [fd78:2::2]/128:8080" "--forward=127.0.0.1:8090 -> svc.wanopt.test:8080" \
	"--forward=127.0.0.1:8091 -> slow.wanopt.test:8080"
px_wait_count edge "tunnel up" 1 15
x $R bash conf/intercept-nft.sh apply --mode=tproxy --port=3129 --iface=vr --dports=8080 2>/dev/null

# ---- 1. TPROXY through the core ----
MB=$((1 << 20))
expect_path "tproxy, IPv4" 10.78.2.2 10.78.2.2
expect_path "tproxy, IPv6" fd78:2::2 fd78:2::2
w0=$(estat 'j["total"]["wan_in"]')
expect "tproxy: download 8 MiB" cx get 10.78.2.2 8080 1 $((8 * MB))
w1=$(estat 'j["total"]["wan_in"]')
expect "tproxy: download the same 8 MiB again" cx get 10.78.2.2 8080 1 $((8 * MB))
w2=$(estat 'j["total"]["wan_in"]')
[ $(( (w2 - w1) * 20 )) -lt $((w1 - w0)) ] && ok "tproxy: second download crossed $((w2 - w1)) WAN bytes, first $((w1 - w0))" ||
	fail "tproxy: second download crossed $((w2 - w1)) WAN bytes, first $((w1 - w0))"
expect "tproxy: upload 4 MiB" cx put 10.78.2.2 8080 2 $((4 * MB))
expect "tproxy: IPv6 download 2 MiB" cx get fd78:2::2 8080 3 $((2 * MB))
# classify matches the original destination: the IPv6 server's, not the IPv4 one's
grep -q "open .*fd78:2::2.*8080 (full, .*, class cs1)" "$T/edge.log" && ! grep -q "open .*10\.78\.2\.2:8080 (.*class" "$T/edge.log" &&
	ok "classify by original destination: the IPv6 server's streams in cs1, the IPv4 one's unmarked" ||
	fail "classify by original destination: $(grep "open " "$T/edge.log" | tail -n 3)"
expect "tproxy: 20 concurrent streams" cx many 10.78.2.2 8080 20 4 --sizes=0,1000,100000,1000000
grep -q "(full)" "$T/edge.log" && ok "the edge logged optimized intercepted connections" || fail "no (full) connection in the edge log"
# A client marking its packets ef (DSCP 46) gets the answers marked ef too:
# the edge reflects the class of an intercepted connection on its LAN leg.
x $C nft -f - <<'NFT'
table inet we2e_dscp {
	counter ef4 { }
	counter ef6 { }
	chain in {
		type filter hook input priority 0;
		tcp sport 8080 ip dscp ef counter name ef4
		tcp sport 8080 ip6 dscp ef counter name ef6
	}
}
NFT
efb() { x $C nft list counter inet we2e_dscp "$1" | sed -n 's/.*bytes \([0-9]*\).*/\1/p'; }
PX_DSCP=46 expect "tproxy: an ef client downloads 1 MiB" cx get 10.78.2.2 8080 11 $MB
PX_DSCP=46 expect "tproxy: an ef client downloads 1 MiB over IPv6" cx get fd78:2::2 8080 12 $MB
[ "$(efb ef4)" -ge $MB ] && [ "$(efb ef6)" -ge $MB ] && ok "answers to the ef client in ef: $(efb ef4) and $(efb ef6) bytes" ||
	fail "answers to the ef client in ef: $(efb ef4) and $(efb ef6) bytes, expected at least $MB each"
# The stats address also takes warm requests: from this host only.
if out=$(x $R timeout 10 "$BIN" warm --stats=10.78.2.2:9472 /etc/hostname 2>&1); then
	fail "warm from another host was accepted: $out"
else
	# one line with the status and reason, not the error page's HTML
	case $out in 'wanopt warm: the proxy answered 403 "warm is accepted from this host (loopback) only"')
		ok "warm from another host refused: $out" ;;
	*) fail "warm from another host: $out" ;; esac
fi
grep -q "warm: request from 10.78.2.1 refused" "$T/core.log" && ok "the core logged the refused warm" ||
	fail "no refused-warm line in the core log"
x $S timeout 10 "$BIN" stats --stats=127.0.0.1:9472 >/dev/null && ok "stats on 0.0.0.0 still served locally" ||
	fail "wanopt stats against the core failed"
# each side lists the other as a tunnel peer with a measured RTT
peers() { x $1 timeout 10 "$BIN" stats --json --stats=127.0.0.1:$2 |
	python3 -c 'import json,sys; print(" ".join(p["peer"] for p in json.load(sys.stdin)["tunnel"]["peers"] if p["rtt_us"] > 0))'; }
p=$(peers $S 9472)
case $p in *10.78.2.1*) ok "the core lists the edge as a tunnel peer: $p" ;; *) fail "core's tunnel peers: '$p'" ;; esac
p=$(peers $R 9471)
case $p in "core.wanopt.test:7000 ("*) ok "the edge lists the core as its tunnel peer: $p" ;; *) fail "edge's tunnel peers: '$p'" ;; esac
# A destination outside the core's allow: the core told the edge its list,
# so the edge sends even the first connection there direct (before, the core
# reset it, and the edge learned from that).
grep -q "the core's allow list has [0-9]* entries" "$T/edge.log" &&
	ok "the core told its allow list: $(grep -m1 "the core's allow list has" "$T/edge.log" | cut -c26-)" ||
	fail "the edge does not log the core's allow list"
expect_path "outside allow, the first connection goes direct" 10.78.2.3 10.78.2.1
expect_path "outside allow, the next one too" 10.78.2.3 10.78.2.1
grep -q "10.78.2.3:8080: going direct: outside the core's allow list" "$T/edge.log" &&
	ok "the edge said why it went direct" || fail "no 'outside the core's allow list' line in the edge log"
[ "$(grep -c "not in the allow list" "$T/core.log")" = 0 ] && ok "the core refused nothing" ||
	fail "the core refused: $(grep -m1 "not in the allow list" "$T/core.log")"
# A forward to a name the edge's DNS never answers for (the core resolves it):
# the edge's loop does not wait on DNS, the stream goes at once.
t0=$(date +%s%N)
got=$(x $R timeout -k 2 30 python3 "$PXTOOL" peer 127.0.0.1 8091 --timeout=20 2>&1 | sed 's/^ok //')
ms=$((($(date +%s%N) - t0) / 1000000))
case $got in *10.78.2.2) [ $ms -lt 2000 ] && ok "forward to a name the edge cannot look up: through the core in $ms ms" ||
	fail "forward to a name the edge cannot look up took $ms ms" ;;
*) fail "forward to a name the edge cannot look up: '$got' after $ms ms" ;; esac
# A forward to a host name the core resolves (its /etc/hosts); the name moved
# to another address and the core reloaded: new streams go there.
fpath() { x $R timeout -k 2 30 python3 "$PXTOOL" peer 127.0.0.1 8090 --timeout=10 2>&1 | sed 's/^ok //'; }
got=$(fpath)
case $got in *10.78.2.2) ok "forward to svc.wanopt.test: the server sees $got" ;; *) fail "forward to a name: '$got'" ;; esac
echo "fd78:2::2 svc.wanopt.test" >"/etc/netns/$S/hosts"
mark=$(px_count_log core "reloaded")
kill -HUP "${PID[core]}"
px_wait_count core "reloaded" $((mark + 1)) 10 || true
sleep 0.2 # the workers read it again on their own loops
got=$(fpath)
case $got in fd78:2::2) ok "svc.wanopt.test moved in /etc/hosts, the core reloaded: the server sees $got" ;;
*) fail "after /etc/hosts changed and a reload, the server sees '$got', expected fd78:2::2" ;; esac

# ---- 2. fail open ----
kill -KILL "${PID[core]}"
unset "PID[core]"
t0=$(date +%s.%N)
got=""
for i in $(seq 40); do
	got=$(path 10.78.2.2)
	case $got in *10.78.2.1) break ;; esac
	sleep 0.1
done
dt=$(python3 -c "import time; print('%.1f' % (time.time() - $t0))")
case $got in
*10.78.2.1) ok "core killed: intercepted connections go direct after ${dt}s (server sees $got)" ;;
*) fail "core killed: after ${dt}s the server sees '$got', expected the router 10.78.2.1" ;;
esac
python3 -c "import sys; sys.exit(0 if $dt <= 2.5 else 1)" && ok "fail open within 2.5 s" || fail "fail open took ${dt}s"
expect "core down: download 4 MiB direct" cx get 10.78.2.2 8080 5 $((4 * MB))
expect "core down: upload 2 MiB direct" cx put 10.78.2.2 8080 6 $((2 * MB))
expect_path "core down, IPv6" fd78:2::2 fd78:2::1
grep -q "going direct (fail open)" "$T/edge.log" && ok "the edge logged the fail open" || fail "no fail-open line in the edge log"

# The core comes back with an allow list too long for an ALLOW frame (over
# 16 KiB: 2,100 more entries): the edge learns from the core's refusal.
{ echo "allow = 10.78.2.2/32, [fd78:2::2]/128, 10.78.2.5/32, [fd78:2::5]/128"
  for i in $(seq 0 2099); do echo "allow = 10.99.$((i / 256)).$((i % 256))/32"; done; } >"$T/core-long.conf"
core -c "$T/core-long.conf"
px_wait_count edge "tunnel up" 2 15 && ok "the tunnel came back" || fail "the tunnel did not come back"
expect_path "core back" 10.78.2.2 10.78.2.2
expect "core back: download 4 MiB" cx get 10.78.2.2 8080 7 $((4 * MB))
grep -q "allow: the list is too long to tell the edges" "$T/core.log" && grep -q "allow list is too long to tell" "$T/edge.log" &&
	ok "an allow list too long to tell: both say so: $(grep -m1 "too long to tell:" "$T/edge.log" | cut -c26-)" ||
	fail "no 'too long to tell' lines in the core and edge logs"
# the first connection there goes through the core, which refuses it: the
# edge sends it direct, what it read of it first (it used to be reset)
expect_path "outside the untold allow list, the first connection goes direct" 10.78.2.3 10.78.2.1
expect "... and a first upload of 200 KiB elsewhere arrives intact" cx put 10.78.2.4 8080 9 $((200 << 10))
n=$(grep -c "going direct: the core's allow list refuses it (the [0-9]* bytes read go first)" "$T/edge.log")
[ "$n" = 2 ] && ok "the edge handed both over: $(grep -m1 "bytes read go first" "$T/edge.log" | cut -c26-)" ||
	fail "the edge handed $n connections over to go direct"
[ "$(grep -c "refused 10.78.2.3:8080.*not in the allow list" "$T/core.log")" = 1 ] &&
	ok "the core refused it: $(grep -m1 "not in the allow list" "$T/core.log" | cut -c26-)" ||
	fail "the core's refusals: $(grep -c "not in the allow list" "$T/core.log")"
expect_path "outside the untold allow list, the next connection goes direct" 10.78.2.3 10.78.2.1
expect_path "... and the one after" 10.78.2.3 10.78.2.1
[ "$(grep -c "not in the allow list" "$T/core.log")" = 2 ] && ok "the core refused no more" ||
	fail "the core refused $(grep -c "not in the allow list" "$T/core.log") times"
# 30 connections at once to another destination outside it (gets, puts and
# echoes of up to 100 KB): those the core turns back go direct, every one exact
h0=$(grep -c "bytes read go first" "$T/edge.log")
expect "outside the untold allow list, 30 connections at once" cx many 10.78.2.6 8080 30 5 --sizes=0,1000,100000
ok "... $(( $(grep -c "bytes read go first" "$T/edge.log") - h0 )) of them handed back by the core, the rest direct from the start"
# A destination the core may reach but cannot connect to (its own
# connections there rejected): the connection goes direct, what it sent first.
x $S nft -f - <<'NFT'
table inet we2e_noreach {
	chain out {
		type filter hook output priority 0;
		ip daddr 10.78.2.5 tcp dport 8080 reject with tcp reset;
		ip6 daddr fd78:2::5 tcp dport 8080 reject with tcp reset;
	}
}
NFT
expect_path "the core cannot connect: the connection goes direct" 10.78.2.5 10.78.2.1
expect_path "... and by IPv6" fd78:2::5 fd78:2::1
grep -q "10.78.2.5:8080: going direct: the core cannot connect to it (the [0-9]* bytes read go first)" "$T/edge.log" &&
	ok "... the edge says why: $(grep -m1 "the core cannot connect to it" "$T/edge.log" | cut -c26-)" ||
	fail "no 'the core cannot connect to it' line in the edge log"
x $S nft delete table inet we2e_noreach
h=$(estat 'j["connections"]["handed_back"]')
hb=$(grep -c "bytes read go first" "$T/edge.log")
[ "$h" = "$hb" ] && [ "$h" -ge 5 ] && ok "the edge's stats count the $h connections the core turned back" ||
	fail "connections turned back in the edge's stats: $h, in its log $hb"
expect_path "... and once it can, through the core again" 10.78.2.5 10.78.2.2

# The WAN path to the core blackholed (no FIN, no RST: only keepalives tell).
x $S nft -f - <<'NFT'
table inet we2e_blackhole {
	chain in { type filter hook input priority 0; tcp dport 7000 drop; }
	chain out { type filter hook output priority 0; tcp sport 7000 drop; }
}
NFT
t0=$(date +%s.%N)
for i in $(seq 60); do
	got=$(path 10.78.2.2)
	case $got in *10.78.2.1) break ;; esac
	sleep 0.1
done
dt=$(python3 -c "import time; print('%.1f' % (time.time() - $t0))")
case $got in
*10.78.2.1) ok "core unreachable: intercepted connections go direct after ${dt}s" ;;
*) fail "core unreachable: after ${dt}s the server sees '$got', expected the router 10.78.2.1" ;;
esac
python3 -c "import sys; sys.exit(0 if $dt <= 3.5 else 1)" && ok "fail open within 3.5 s" || fail "fail open took ${dt}s"
# the edge's own measure: silence from the core's last frame to the tunnel declared down
q=$(grep -o "keepalive timeout: nothing received for [0-9]* ms" "$T/edge.log" | tail -n 1 | grep -o "[0-9]* ms" | cut -d' ' -f1)
[ -n "$q" ] && [ "$q" -le 1000 ] && ok "the edge noticed the dead path within a second: $q ms after the core's last frame" ||
	fail "the dead path noticed after '${q:-?}' ms: $(grep "keepalive" "$T/edge.log" | tail -n 1)"
expect "core unreachable: download 4 MiB direct" cx get 10.78.2.2 8080 10 $((4 * MB))
x $S nft delete table inet we2e_blackhole
px_wait_count edge "tunnel up" 3 20 && ok "the tunnel came back after the blackhole" || fail "no tunnel after the blackhole"
expect_path "core reachable again" 10.78.2.2 10.78.2.2

# ---- 3. REDIRECT ----
x $R bash conf/intercept-nft.sh remove --mode=tproxy
expect_path "rules removed" 10.78.2.2 10.78.1.2
x $R bash conf/intercept-nft.sh apply --mode=redirect --port=3129 --iface=vr --dports=8080 2>/dev/null
expect_path "redirect, IPv4" 10.78.2.2 10.78.2.2
expect_path "redirect, IPv6" fd78:2::2 fd78:2::2
expect "redirect: download 4 MiB" cx get 10.78.2.2 8080 8 $((4 * MB))
expect "redirect: upload 4 MiB" cx put 10.78.2.2 8080 9 $((4 * MB))
x $R bash conf/intercept-nft.sh remove --mode=redirect
px_alive edge && ok "the edge is alive" || fail "the edge died"
px_done
