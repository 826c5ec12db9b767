#!/usr/bin/env bash
# make bench: ffpf's throughput and filter cost, each against a baseline
# measured in the same run (the machine is shared; only ratios are stable).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
BIN=bin/ffpf
OUT=out/bench
mkdir -p "$OUT"
PACKETS=${PACKETS:-2000000}
COUNT=${COUNT:-5}

echo "== 1. flowgraph datapath: (bpf,\"tcp and dst port 80\") > [(pktcount)|(bytecount)], in-memory trace, one core"
$GO test -run '^$' -bench 'BenchmarkFlowgraph' -benchtime 2s -count "$COUNT" ./flowgraph/ | tee "$OUT/graph.txt" | grep -E '^Benchmark' || true
awk '/^BenchmarkFlowgraph/ { for (i=1;i<=NF;i++) if ($(i+1)=="Mpps") { s+=$i; n++ } }
     END { if (n) printf "   mean %.1f Mpps/core over %d runs (target >= 20)\n", s/n, n }' "$OUT/graph.txt"

echo
echo "== 2. cBPF engines on the same packets (ns/packet, lower is better)"
$GO test -run '^$' -bench 'BenchmarkEngine' -benchtime 1s -count 3 ./functions/bpf/ > "$OUT/engine.txt"
awk '/^BenchmarkEngine\// {
       split($1, p, "/"); eng=p[2]; name=p[3]; sub(/-[0-9]+$/, "", name)
       for (i=1;i<=NF;i++) if ($(i+1)=="ns/pkt") { s[eng" "name]+=$i; n[eng" "name]++; names[name]=1; engs[eng]=1 } }
     END {
       for (name in names) {
         printf "   %-34s", name
         for (e in engs) if (n[e" "name]) printf "  %s %6.1f", e, s[e" "name]/n[e" "name]
         if (n["ffpf "name] && n["libpcap "name]) printf "   libpcap/ffpf %.1fx", (s["libpcap "name]/n["libpcap "name])/(s["ffpf "name]/n["ffpf "name])
         printf "\n"
       } }' "$OUT/engine.txt" | sort

echo
echo "== 3. wall time on one file: ffpf run -r F EXPR vs tcpdump -r F -w /dev/null EXPR ($PACKETS packets)"
F="$OUT/trace-$PACKETS.pcap"
[ -f "$F" ] || $BIN gen -o "$F" --packets "$PACKETS" --seed 7
EXPR='tcp and dst port 80'
best() { # best wall time in ms of $COUNT runs of "$@"
	local b=999999999
	for _ in $(seq "$COUNT"); do
		local t0 t1
		t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N)
		local ms=$(( (t1 - t0) / 1000000 ))
		(( ms < b )) && b=$ms
	done
	echo "$b"
}
TCPDUMP=$(command -v tcpdump || echo /usr/sbin/tcpdump)
ffpf_ms=$(best $BIN run --progress=false -r "$F" "(bpf,expr=\"$EXPR\") > (pktcount)")
tcpd_ms=$(best "$TCPDUMP" -r "$F" -w /dev/null "$EXPR")
echo "   ffpf    ${ffpf_ms} ms"
echo "   tcpdump ${tcpd_ms} ms"
awk -v a="$ffpf_ms" -v b="$tcpd_ms" 'BEGIN { printf "   ffpf/tcpdump = %.2f (target <= 0.50)\n", a/b }'
matches=$($BIN run --json -r "$F" "(bpf,expr=\"$EXPR\") > (pktcount)" | grep -o '"packets": [0-9]*' | tail -1 | awk '{print $2}')
tmatches=$("$TCPDUMP" -r "$F" -w - "$EXPR" 2>/dev/null | "$TCPDUMP" -r - 2>/dev/null | wc -l)
echo "   matches: ffpf $matches, tcpdump $tmatches"
