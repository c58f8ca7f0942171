#!/bin/sh
# Measures `d1bridge import` on the embedded node (SQLite catalog, files store):
#   1. 10,000 small files (1 KiB) in 100 folders: files/s, peak RSS of import and node;
#   2. one 5 GiB file (sparse: its bytes are read, hashed and stored as any): MB/s, peak RSS;
#   3. the same 5 GiB served over HTTP (urls:FILE: streamed once, system metadata after).
# Each part runs against a node started fresh. Everything is made under a
# temporary directory and deleted at the end. Usage, from the module root:
#   sh cmd/d1bridge/testdata/import-bench.sh [JOBS]
set -eu
JOBS=${1:-4}
W=$(mktemp -d /tmp/d1bridge-import-bench.XXXXXX)
NODE_PID=
WEB_PID=
cleanup() {
	[ -n "$NODE_PID" ] && kill "$NODE_PID" 2>/dev/null || true
	[ -n "$WEB_PID" ] && kill "$WEB_PID" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT INT TERM
go build -o "$W/d1bridge" ./cmd/d1bridge
BIN=$W/d1bridge
SUBJECT="CN=Bench Importer,O=d1bridge,DC=example,DC=org"
$BIN token --subject "$SUBJECT" --new-key "$W/signing.key" >/dev/null 2>&1
printf 'auth:\n  signingKey: %s\n' "$W/signing.key" >"$W/d1bridge.yaml"
PORT=18431

start_node() { # a fresh embedded node in $W/data-$1
	D1BRIDGE_LISTEN=127.0.0.1:$PORT D1BRIDGE_DATADIR=$W/data-$1 D1BRIDGE_AUTH_SIGNINGKEY=$W/signing.key \
		D1BRIDGE_NODE_SUBMITTERS=authenticatedUser D1BRIDGE_MAXUPLOADSIZE=6000000000 D1BRIDGE_LOG_LEVEL=error \
		$BIN serve --config "$W/d1bridge.yaml" >"$W/node-$1.log" 2>&1 &
	NODE_PID=$!
	until curl -sf "http://127.0.0.1:$PORT/d1/mn/v2/monitor/ping" >/dev/null; do sleep 0.1; done
}
stop_node() { # prints the node's peak RSS
	echo "  node peak RSS: $(awk '/VmHWM/ {printf "%.0f MiB", $2/1024}' /proc/$NODE_PID/status)"
	kill "$NODE_PID"
	wait "$NODE_PID" 2>/dev/null || true
	NODE_PID=
}
import() { # runs import with the arguments, prints its summary and peak RSS
	/usr/bin/time -f '%M' -o "$W/time" $BIN import --config "$W/d1bridge.yaml" --node "http://127.0.0.1:$PORT/d1" \
		--subject "$SUBJECT" --access read:public --jobs "$JOBS" --progress lines "$@" 2>"$W/import.err" | head -1 | sed 's/^/  /'
	echo "  import peak RSS: $(awk '{printf "%.0f MiB", $1/1024}' "$W/time")"
}

echo "10,000 files of 1 KiB, --jobs $JOBS:"
mkdir "$W/small"
i=0
while [ $i -lt 100 ]; do
	mkdir "$W/small/d$i"
	j=0
	while [ $j -lt 100 ]; do
		head -c 1024 /dev/urandom >"$W/small/d$i/f$j.bin"
		j=$((j + 1))
	done
	i=$((i + 1))
done
start_node small
import "$W/small"
echo " again (everything skipped):"
import "$W/small"
stop_node
rm -rf "$W/small" "$W/data-small"

echo "one 5 GiB file (local, hashed then sent with its system metadata first):"
truncate -s 5G "$W/big.bin"
mkdir "$W/one" && mv "$W/big.bin" "$W/one/"
start_node big
import "$W/one"
stop_node
rm -rf "$W/data-big"

echo "one 5 GiB file over HTTP (urls:, streamed once, system metadata after):"
(cd "$W/one" && exec python3 -m http.server 18432 --bind 127.0.0.1 >/dev/null 2>&1) &
WEB_PID=$!
until curl -sf -o /dev/null -r 0-0 "http://127.0.0.1:18432/big.bin"; do sleep 0.1; done
echo "http://127.0.0.1:18432/big.bin" >"$W/urls.txt"
start_node url
import "urls:$W/urls.txt"
stop_node
