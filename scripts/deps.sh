#!/usr/bin/env bash
# Installs what building and testing ffpf needs from Debian's packages:
# libpcap's headers (cgo, for compiling pcap-filter expressions) and tcpdump
# (the oracle in tests and benchmarks). As root it installs them; otherwise
# it prints the command to run. "deps.sh chromium" installs Debian's
# chromium instead, for the web page's tests (flowgraph/daemon).
set -euo pipefail

missing=()
if [ "${1:-}" = chromium ]; then
	command -v chromium >/dev/null 2>&1 || missing+=(chromium)
else
	[ -f /usr/include/pcap.h ] || [ -f /usr/include/pcap/pcap.h ] || missing+=(libpcap0.8-dev)
	command -v tcpdump >/dev/null 2>&1 || [ -x /usr/sbin/tcpdump ] || missing+=(tcpdump)
	command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || missing+=(iproute2)
	command -v gcc >/dev/null 2>&1 || missing+=(gcc)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "deps: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq "${missing[@]}" >/dev/null
	exit 0
fi
echo "deps: missing ${missing[*]}; run: sudo apt-get install -y ${missing[*]}" >&2
exit 1
