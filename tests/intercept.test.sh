#!/usr/bin/env bash
# intercept.test.sh: transparent interception in network namespaces.
#
#   wdm-N-c (client)            wdm-N-r (router: rules + wanopt intercept)      wdm-N-s (server)
#   10.77.1.2  fd77:1::2  --vc/vr--  10.77.1.1  fd77:1::1 | 10.77.2.1  fd77:2::1  --vs/vt--  10.77.2.2  fd77:2::2
#
# The client connects to the server's address; the router's nftables rules
# (conf/intercept-nft.sh) hand the connection to `wanopt intercept`, which must
# report the original destination and carry the bytes there directly (the
# fail-open path).  The server sees the router as the peer, proving the
# connection was intercepted rather than routed.  Modes tproxy and redirect,
# IPv4 and IPv6.
set -eu
cd "$(dirname "$0")/.."
BIN=${BINDIR:-bin}/wanopt
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 0; }

# Bad option values: what is wrong and status 2, before anything listens.
for bad in --port=70000 --port=abc "--port=3129 --mark=zz" "--port=3129 --count=-1" ""; do
	rc=0; out=$(timeout 5 "$BIN" intercept $bad 2>&1) || rc=$?
	case "$rc:$out" in
	2:"wanopt intercept: --"*) ;;
	*) echo "FAIL: 'intercept $bad' gave status $rc: $out"; exit 1 ;;
	esac
done

N=wdm-$$
C=$N-c R=$N-r S=$N-s
LOG=$(mktemp -d /tmp/wdm-intercept.XXXXXX)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	for ns in $C $R $S; do  # whatever still runs in them, then the namespaces
		ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
		ip netns del "$ns" 2>/dev/null || true
	done
	rm -rf "$LOG"
}
trap cleanup EXIT
x() { ip netns exec "$@"; }

for ns in $C $R $S; do ip netns add "$ns"; x "$ns" ip link set lo up; done
ip -n $C link add vc type veth peer name vr netns $R
ip -n $R link add vt type veth peer name vs netns $S
x $C ip addr add 10.77.1.2/24 dev vc; x $C ip addr add fd77:1::2/64 dev vc nodad
x $R ip addr add 10.77.1.1/24 dev vr; x $R ip addr add fd77:1::1/64 dev vr nodad
x $R ip addr add 10.77.2.1/24 dev vt; x $R ip addr add fd77:2::1/64 dev vt nodad
x $S ip addr add 10.77.2.2/24 dev vs; x $S ip addr add fd77:2::2/64 dev vs nodad
for pair in "$C vc" "$R vr" "$R vt" "$S vs"; do set -- $pair; x "$1" ip link set "$2" up; done
x $C ip route add default via 10.77.1.1; x $C ip -6 route add default via fd77:1::1
x $S ip route add default via 10.77.2.1; x $S ip -6 route add default via fd77:2::1
x $R sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 \
	net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0

# Server: per connection, reads until EOF and answers with what it got and who asked.
cat >"$LOG/server.py" <<'PY'
import socket, threading
def serve(c, peer):
    data = b""
    while True:
        b = c.recv(65536)
        if not b: break
        data += b
    c.sendall(b"got %d bytes %s from %s\n" % (len(data), data[:4], peer[0].encode()))
    c.close()
s = socket.socket(socket.AF_INET6)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", 8080)); s.listen(16)
while True:
    c, a = s.accept()
    threading.Thread(target=serve, args=(c, a), daemon=True).start()
PY
# Client: sends ping plus 300 KB, half-closes, prints the answer.
cat >"$LOG/client.py" <<'PY'
import socket, sys
c = socket.create_connection((sys.argv[1], 8080), timeout=10)
c.sendall(b"ping" + b"x" * 300000)
c.shutdown(socket.SHUT_WR)
out = b""
while True:
    b = c.recv(65536)
    if not b: break
    out += b
print(out.decode().strip())
PY
ip netns exec "$S" python3 "$LOG/server.py" & pids="$pids $!" # not via x(): $! must be the server
# and one on the client's side, which the server's side connects to (a connection the LAN did not start)
ip netns exec "$C" python3 "$LOG/server.py" & pids="$pids $!"
for i in $(seq 50); do x $S ss -ltn | grep -q ':8080' && x $C ss -ltn | grep -q ':8080' && break; sleep 0.1; done

# Unintercepted baseline: the server sees the client itself.
out=$(x $C timeout 10 python3 "$LOG/client.py" 10.77.2.2)
echo "direct: $out"
[ "$out" = "got 300004 bytes ping from ::ffff:10.77.1.2" ]

fails=0
check() {  # mode family-address server-sees
	local mode=$1 dst=$2 via=$3 out shown
	x $R bash conf/intercept-nft.sh apply --mode="$mode" --port=3129 --iface=vr --dports=8080 \
		--exclude=10.77.9.9 2>/dev/null
	x $R "$BIN" intercept --port=3129 --mode="$mode" --count=1 >"$LOG/icpt.log" 2>&1 &
	local ip=$!
	for i in $(seq 50); do x $R ss -ltn | grep -q ':3129' && break; sleep 0.1; done
	out=$(x $C timeout 10 python3 "$LOG/client.py" "$dst" 2>&1) || true
	for i in $(seq 50); do kill -0 $ip 2>/dev/null || break; sleep 0.1; done
	kill $ip 2>/dev/null || true
	wait $ip 2>/dev/null || true
	# every port intercepted: a connection from the WAN side to a LAN host is
	# routed all the same (its replies come in on the LAN side)
	# (with the listener there, which such replies once reached)
	x $R bash conf/intercept-nft.sh apply --mode="$mode" --port=3129 --iface=vr 2>/dev/null
	ip netns exec "$R" "$BIN" intercept --port=3129 --mode="$mode" >"$LOG/icpt2.log" 2>&1 & # $!: it
	ip=$!
	for i in $(seq 50); do x $R ss -ltn | grep -q ':3129' && break; sleep 0.1; done
	local back from
	case $dst in *:*) back=fd77:1::2 from=fd77:2::2 ;; *) back=10.77.1.2 from=::ffff:10.77.2.2 ;; esac
	local wan
	wan=$(x $S timeout 10 python3 "$LOG/client.py" "$back" 2>&1) || true
	kill $ip 2>/dev/null || true
	wait $ip 2>/dev/null || true
	if [ "$wan" = "got 300004 bytes ping from $from" ]; then
		echo "ok   $mode: from the WAN side to $back, routed: $wan"
	else
		echo "FAIL $mode: from the WAN side to $back: '$wan'"
		fails=$((fails + 1))
	fi
	# a bad option leaves the rules in place (one transaction)
	if x $R bash conf/intercept-nft.sh apply --mode="$mode" --port=3129 --iface=vr --dports=99999 2>/dev/null ||
	   ! x $R nft list table inet wanopt >/dev/null 2>&1; then
		echo "FAIL $mode: a failed apply took the rules away"
		fails=$((fails + 1))
	fi
	x $R bash conf/intercept-nft.sh remove --mode="$mode"
	case $dst in *:*) shown="[$dst]:8080" ;; *) shown="$dst:8080" ;; esac
	if [ "$out" = "got 300004 bytes ping from $via" ] &&
	   grep -qF -- "-> $shown (original destination)" "$LOG/icpt.log"; then
		echo "ok   $mode $dst: $out"
	else
		echo "FAIL $mode $dst: client got '$out'; intercept log:"; sed 's/^/   /' "$LOG/icpt.log"
		fails=$((fails + 1))
	fi
}
check tproxy   10.77.2.2 ::ffff:10.77.2.1
check tproxy   fd77:2::2 fd77:2::1
check redirect 10.77.2.2 ::ffff:10.77.2.1
check redirect fd77:2::2 fd77:2::1

# Rules removed: traffic flows directly again.
out=$(x $C timeout 10 python3 "$LOG/client.py" 10.77.2.2)
[ "$out" = "got 300004 bytes ping from ::ffff:10.77.1.2" ] || { echo "FAIL after remove: $out"; fails=$((fails + 1)); }
[ $fails -eq 0 ] && echo "intercept: all passed"
exit $fails
