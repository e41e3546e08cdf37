#!/usr/bin/env bash
# bench/gh-inject.sh — `gh api user` through the credential injector vs directly, against
# the same fake GitHub Enterprise server (tests/fixtures/fakegh.py, TLS), in one run.
#
#   bench/gh-inject.sh [RUNS]      (default 20; interleaved, after 2 warm-up calls each)
#
# "Through the injector": gh holds a placeholder and speaks plain HTTP over the
# injector's Unix socket (GH_CONFIG_DIR/config.yml http_unix_socket); the injector
# (build/tools/injectd, i.e. bridge/inject.c) checks the request, adds the token and
# makes the TLS connection. "Direct": gh holds the token and makes the TLS connection
# itself. Prints one line: "INJECTED_MS DIRECT_MS RATIO" (medians, milliseconds).
#   BENCH_BUILD   build directory (default build)
set -euo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
BUILD=${BENCH_BUILD:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
RUNS=${1:-20}
INJECTD=$BUILD/tools/injectd
[ -x "$INJECTD" ] || { echo "gh-inject.sh: $INJECTD missing (make tools)" >&2; exit 1; }
[ -x /usr/bin/gh ] || { echo "gh-inject.sh: /usr/bin/gh missing" >&2; exit 1; }

W=$(mktemp -d /tmp/shimbridge-ghbench.XXXXXX)
FG='' IJ=''
cleanup() {
	[ -n "$IJ" ] && kill "$IJ" 2>/dev/null && wait "$IJ" 2>/dev/null
	[ -n "$FG" ] && kill "$FG" 2>/dev/null && wait "$FG" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sh "$ROOT/tests/fixtures/mkcerts.sh" "$W/certs"
TOKEN="ghs_bench$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
PH=placeholder-not-a-token
(umask 077 && printf '%s\n' "$TOKEN" >"$W/token")
/usr/bin/python3 "$ROOT/tests/fixtures/fakegh.py" --cert "$W/certs/server.pem" \
	--key "$W/certs/server.key" --token-file "$W/token" --port-file "$W/port" \
	--log "$W/requests.log" </dev/null >/dev/null 2>"$W/fakegh.err" 3>&- &
FG=$!
for _ in $(seq 100); do [ -s "$W/port" ] && break; sleep 0.05; done
[ -s "$W/port" ] || { cat "$W/fakegh.err" >&2; exit 1; }
PORT=$(cat "$W/port")
"$INJECTD" --listen "unix:$W/gh.sock" --upstream "https://localhost:$PORT" \
	--host "localhost:$PORT" --ca "$W/certs/ca.pem" --placeholder "$PH" \
	--secret-file "$W/token" --ready "$W/ready" </dev/null >/dev/null 2>"$W/injectd.err" 3>&- &
IJ=$!
for _ in $(seq 100); do [ -s "$W/ready" ] && break; sleep 0.05; done
[ -s "$W/ready" ] || { cat "$W/injectd.err" >&2; exit 1; }
mkdir -p "$W/inj.gh" "$W/direct.gh" "$W/home"
printf 'http_unix_socket: %s\n' "$W/gh.sock" >"$W/inj.gh/config.yml"

gh_injected() {
	env -i PATH=/usr/bin:/bin HOME="$W/home" GH_CONFIG_DIR="$W/inj.gh" \
		GH_HOST="localhost:$PORT" GH_ENTERPRISE_TOKEN="$PH" GH_PROMPT_DISABLED=1 \
		GH_NO_UPDATE_NOTIFIER=1 /usr/bin/gh api user >/dev/null
}
gh_direct() {
	env -i PATH=/usr/bin:/bin HOME="$W/home" GH_CONFIG_DIR="$W/direct.gh" \
		GH_HOST="localhost:$PORT" GH_ENTERPRISE_TOKEN="$TOKEN" SSL_CERT_FILE="$W/certs/ca.pem" \
		GH_PROMPT_DISABLED=1 GH_NO_UPDATE_NOTIFIER=1 /usr/bin/gh api user >/dev/null
}
us_now() { echo "${EPOCHREALTIME/./}"; }
for _ in 1 2; do gh_injected; gh_direct; done
for _ in $(seq "$RUNS"); do
	for way in injected direct; do
		t=$(us_now)
		"gh_$way"
		echo $(( $(us_now) - t )) >>"$W/$way"
	done
done
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
awk -v a="$(median "$W/injected")" -v b="$(median "$W/direct")" \
	'BEGIN { printf "%.1f %.1f %.2f\n", a / 1000, b / 1000, a / b }'
