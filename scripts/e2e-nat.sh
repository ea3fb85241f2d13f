#!/usr/bin/env bash
# Clients on two private networks behind NAT routers federate through a TURN relay, over
# HTTPS/WSS with a certificate from a test CA (js/e2e/nat.mjs). The topology is network
# namespaces made here and removed on exit (root; no traffic leaves this machine):
#
#   n1 198.51.100.10/25 ── r1 (NAT) ──┐                        ┌── coturn, signalling,
#                                     ├── pub 203.0.113.0/24 ──┤   HTTPS page server
#   n2 198.51.100.130/25 ─ r2 (NAT) ──┘    (bridge in "pub")    └── 203.0.113.1
#
# r1 and r2 masquerade with fully random ports (a symmetric NAT: a mapping made toward one
# address is useless from another), and nothing routes between n1 and n2, so a link
# between them can only go through the relay. The federated server (Node) runs in n1 with
# one Chromium client; two Chromium clients run in n2. Ends with `e2e: N passed, M failed`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "e2e-nat: $*"; echo "e2e: 0 passed, 1 failed"; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root for network namespaces"
for f in "$root/js/dist/index.js" "$root/js/wasm/bb.wasm"; do [ -f "$f" ] || fail "$f is missing: build first"; done
for tool in nft turnserver certutil /usr/bin/chromium; do command -v "$tool" >/dev/null || fail "$tool is missing: run scripts/setup.sh"; done

id="bbnat$$"
work=$(mktemp -d)
cleanup() {
  [ -f "$work/turn.pid" ] && kill "$(cat "$work/turn.pid")" 2>/dev/null || true
  for n in n1 n2 r1 r2 pub inet; do ip netns del "$id-$n" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
in_ns() { local n=$1; shift; ip netns exec "$id-$n" "$@"; }

for n in pub inet r1 r2 n1 n2; do ip netns add "$id-$n"; in_ns "$n" ip link set lo up; done
# the public segment: a bridge in pub, the servers' address on it, a leg to each router
in_ns pub ip link add br0 type bridge
in_ns pub ip addr add 203.0.113.1/24 dev br0
in_ns pub ip link set br0 up
# The public segment routes everywhere, as a host on the internet does: its default route
# leads to "inet", which drops what it is sent. A relayed packet toward an address behind a
# NAT (a peer's host candidate) is lost on the way instead of failing at send: coturn closes
# a relay whose send fails, and the clients behind it would then receive nothing more.
ip link add "$id-up" netns "$id-pub" type veth peer name "$id-dn" netns "$id-inet"
in_ns pub ip link set "$id-up" name uplink
in_ns pub ip addr add 192.0.2.1/30 dev uplink
in_ns pub ip link set uplink up
in_ns inet ip link set "$id-dn" name uplink
in_ns inet ip addr add 192.0.2.2/30 dev uplink
in_ns inet ip link set uplink up
in_ns pub ip route add default via 192.0.2.2
router() { # router NAME public-address inside-address/prefix host-namespace host-address/prefix
  local r=$1 wan=$2 lan=$3 host=$4 hostaddr=$5
  ip link add "$id$r-w" netns "$id-$r" type veth peer name "$r" netns "$id-pub"
  in_ns pub ip link set "$r" master br0 up
  in_ns "$r" ip link set "$id$r-w" name wan
  in_ns "$r" ip addr add "$wan/24" dev wan
  in_ns "$r" ip link set wan up
  ip link add "$id$r-l" netns "$id-$r" type veth peer name eth0 netns "$id-$host"
  in_ns "$r" ip link set "$id$r-l" name lan
  in_ns "$r" ip addr add "$lan" dev lan
  in_ns "$r" ip link set lan up
  in_ns "$r" sysctl -qw net.ipv4.ip_forward=1
  in_ns "$r" ip route add default via 203.0.113.1
  in_ns "$r" nft -f - <<EOF
table ip nat {
  chain masq { type nat hook postrouting priority 100; oifname "wan" masquerade fully-random; }
}
table ip filter {
  chain guard { type filter hook forward priority 0; policy drop;
    iifname "lan" oifname "wan" accept
    iifname "wan" oifname "lan" ct state established,related accept
  }
}
EOF
  in_ns "$host" ip addr add "$hostaddr" dev eth0
  in_ns "$host" ip link set eth0 up
  in_ns "$host" ip route add default via "${lan%/*}"
}
router r1 203.0.113.11 198.51.100.1/25 n1 198.51.100.10/25
router r2 203.0.113.12 198.51.100.129/25 n2 198.51.100.130/25

# the private networks reach the public segment, and not each other
in_ns n1 ping -c1 -W2 203.0.113.1 >/dev/null || fail "n1 cannot reach the public segment"
in_ns n2 ping -c1 -W2 203.0.113.1 >/dev/null || fail "n2 cannot reach the public segment"
if in_ns n1 ping -c1 -W1 198.51.100.130 >/dev/null 2>&1; then fail "n1 reaches n2 directly: the NATs do not separate them"; fi
# a send from the public segment toward an address behind a NAT succeeds (and is lost later)
in_ns pub bash -c 'echo probe >/dev/udp/198.51.100.10/9' 2>/dev/null || fail "pub cannot send toward 198.51.100.10: coturn would close a relay whose send fails"

# coturn on the public segment, with a REST secret the signalling server shares
secret=$(openssl rand -hex 16)
cat >"$work/turnserver.conf" <<EOF
listening-ip=203.0.113.1
relay-ip=203.0.113.1
listening-port=3478
min-port=49152
max-port=49407
realm=bb.test
use-auth-secret
static-auth-secret=$secret
fingerprint
no-tls
no-dtls
no-cli
no-multicast-peers
allowed-peer-ip=203.0.113.1
pidfile=$work/turn.pid
log-file=$work/turn.log
simple-log
EOF
in_ns pub turnserver -c "$work/turnserver.conf" -o >/dev/null 2>&1 || fail "coturn did not start"
for _ in $(seq 50); do [ -s "$work/turn.pid" ] && break; sleep 0.1; done

cd "$root/js"
in_ns pub env BB_NAT_NS_PREFIX="$id" BB_TURN_SECRET="$secret" BB_NAT_WORK="$work" node e2e/nat.mjs "$@" || status=$?
if [ "${status:-0}" -ne 0 ] && [ -f "$work/turn.log" ]; then echo "--- coturn log (last lines)"; tail -n 15 "$work/turn.log"; fi
exit "${status:-0}"
