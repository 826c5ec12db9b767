#!/usr/bin/env bash
# The funnel effect (FFPF §2.1): the same 1 %-selective filter and counter
# (a) in userspace behind a libpcap capture and (b) in XDP, on a veth
# interface in a network namespace, fed by `ffpf gen -i` from another one.
# Prints, per placement, the packets offered and received (loss), and the
# CPU time ffpf spent per offered packet. Needs root, ip(8).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/ffpf}
PACKETS=${FUNNEL_PACKETS:-2000000}
EXPR='udp and port 123' # 1.0 % of gen's traffic
tag="ffb$$"
A="${tag}na" B="${tag}nb"
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; }
trap cleanup EXIT
set +o pipefail # grep finding nothing is not an error here
ip netns add "$A"; ip netns add "$B"
ip link add "${tag}a" netns "$A" type veth peer name "${tag}b" netns "$B"
ip netns exec "$A" sysctl -qw "net.ipv6.conf.${tag}a.disable_ipv6=1"
ip netns exec "$B" sysctl -qw "net.ipv6.conf.${tag}b.disable_ipv6=1"
ip -n "$A" link set "${tag}a" up; ip -n "$B" link set "${tag}b" up
OUT=$(mktemp -d); printf 'children: []\n' > "$OUT/user.yaml"

ticks() { awk '{print $14+$15}' "/proc/$1/stat"; } # utime+stime of a process, in clock ticks
hz=$(getconf CLK_TCK)
for place in user xdp; do
	args=(run --json -i "${tag}b")
	[ "$place" = user ] && args+=(--hierarchy "$OUT/user.yaml")
	ip netns exec "$B" "$BIN" "${args[@]}" "(bpf,\"$EXPR\") > (pktcount)" > "$OUT/$place.json" &
	pid=$!
	sleep 1
	ffpf_pid=$(pgrep -P "$pid" ffpf || echo "$pid")
	t0=$(ticks "$ffpf_pid")
	s0=$(date +%s%N)
	ip netns exec "$A" "$BIN" gen -i "${tag}a" --packets "$PACKETS" --seed 9 2> "$OUT/gen-$place.txt"
	s1=$(date +%s%N)
	sleep 0.5
	t1=$(ticks "$ffpf_pid")
	kill -INT "$ffpf_pid"; wait "$pid" || true
	sent=$(grep -o 'sent [0-9]*' "$OUT/gen-$place.txt" | awk '{print $2}')
	read -r got drop match < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
f = {x["class"]: x for x in d["functions"]}
print(f["dev"]["out"], f["dev"]["dropped"], f["pktcount"]["state"]["packets"])' "$OUT/$place.json")
	cpu_ns=$(( (t1 - t0) * 1000000000 / hz ))
	rate=$(( sent * 1000000000 / (s1 - s0) ))
	printf '   %-5s offered %8d at %7d pps: received %8d, lost %6d, matched %6d; ffpf CPU %5d ms = %6.1f ns per offered packet\n' \
		"$place" "$sent" "$rate" "$got" "${drop:-0}" "${match:-0}" $((cpu_ns / 1000000)) "$(awk -v c="$cpu_ns" -v n="$sent" 'BEGIN{print c/n}')"
	echo "$cpu_ns $sent" > "$OUT/$place.cpu"
done
awk 'NR==FNR { u=$1/$2; next } { x=$1/$2 } END { if (x > 0) printf "   userspace CPU per offered packet / XDP: %.1fx (target >= 5)\n", u/x; else print "   XDP used no measurable CPU" }' "$OUT/user.cpu" "$OUT/xdp.cpu"
rm -rf "$OUT"
