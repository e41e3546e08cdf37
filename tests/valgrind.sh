#!/usr/bin/env bash
# tests/valgrind.sh — the daemon under valgrind memcheck through a representative
# session: allowed, denied and unknown tools, stdin (with redaction), signals from the
# peer, a peer killed mid-run, a timeout, an output limit, malformed and oversized
# frames, an unauthorized user, a config reload, concurrent calls; then SIGTERM.
#
#   tests/valgrind.sh            (as root; uses build/shimbridged and build/shim)
#   VG_BUILD=DIR                 another build directory
#
# Exits non-zero if valgrind reports any error or a definitely lost block (its exit
# code 99), if the daemon does not stop cleanly, or if a call does not behave as
# expected; the valgrind log is printed then. Prints the elapsed time at the end.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
export SB_BUILD=${VG_BUILD:-$ROOT/build}
case $SB_BUILD in /*) ;; *) SB_BUILD=$ROOT/$SB_BUILD ;; esac
START=$SECONDS

[ "$(id -u)" = 0 ] || { echo "valgrind.sh: run as root" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind is not installed" >&2; exit 2; }
for f in "$SB_BUILD/shimbridged" "$SB_BUILD/shim"; do
	[ -x "$f" ] || { echo "valgrind.sh: $f missing (make all)" >&2; exit 2; }
done

# shellcheck source=tests/integration/lib.bash disable=SC1091
. "$ROOT/tests/integration/lib.bash"
# Stage what other users run (the checkout may be in a 0700 directory).
sb_suite_begin
# Our own runner: a starting daemon kills every process of its runner.
SB_RUNNER=$SB_LANE-runner-vg
RAW=$SB_FIXTURES/rawpeer.py
failures=0
VG_PID=''

cleanup() {
	[ -n "$VG_PID" ] && kill -KILL "$VG_PID" 2>/dev/null
	pkill -KILL -u "$SB_RUNNER" 2>/dev/null
	userdel "$SB_RUNNER" 2>/dev/null
	[ -n "${SB_DIR:-}" ] && rm -rf "$SB_DIR"
	sb_reap_suite
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# check NAME EXPECTED-STATUS ACTUAL-STATUS [OUTPUT-MUST-CONTAIN OUTPUT]
check() {
	local name=$1 want=$2 got=$3
	if [ "$got" != "$want" ]; then
		echo "not ok - $name: exit $got, expected $want" >&2
		failures=$((failures + 1))
	elif [ $# -ge 5 ] && [[ $5 != *"$4"* ]]; then
		echo "not ok - $name: output lacks \"$4\": ${5:0:200}" >&2
		failures=$((failures + 1))
	else
		echo "ok - $name"
	fi
}

# Run as the session user through the sandbox PATH, bounded in time.
asu() {
	local u=$1
	shift
	timeout -k 5 60 runuser -u "$u" -- env -i HOME=/ PATH="$SB_DIR/bin:/usr/bin:/bin" \
		SHIMBRIDGE_SOCKET="$SB_SOCK" LANG=C.UTF-8 "$@"
}
# The pid of the process named $2 among the descendants of pid $1.
descendant() {
	local kid found
	for kid in $(pgrep -P "$1"); do
		if [ "$(cat "/proc/$kid/comm" 2>/dev/null)" = "$2" ]; then echo "$kid"; return 0; fi
		found=$(descendant "$kid" "$2") && { echo "$found"; return 0; }
	done
	return 1
}
raw() {
	timeout -k 5 30 runuser -u "$SB_ALICE" -- "$PY" "$RAW" --sock "$SB_SOCK" --timeout 10 "$@"
}

sb_users
sb_tree
sb_shim_links true cat slow yes denied nosuch
TOKEN="ghp_vgTok$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
(umask 077 && printf '%s\n' "$TOKEN" >"$SB_DIR/etc/tok")
sb_config <<EOF
{ $(sb_config_head)
  "limits": {"max_per_session": 64, "max_connections": 256, "handshake_timeout": 5, "kill_grace": 1},
  "secrets": {"tok": {"source": "file", "path": "$SB_DIR/etc/tok"}},
  "tools": {
    "true": {"path": "/bin/true", "rules": [{"allow": ["**"]}]},
    "cat": {"path": "/bin/cat", "rules": [{"allow": ["**"]}], "secrets": {"X": "tok"}},
    "slow": {"path": "/bin/sleep", "rules": [{"allow": ["*"]}], "timeout": 2},
    "yes": {"path": "/usr/bin/yes", "rules": [{"allow": ["**"]}], "output_limit": 65536},
    "denied": {"path": "/bin/true", "deny_args": ["--evil*"],
               "rules": [{"deny": ["forbidden", "**"], "reason": "not here"}, {"allow": ["ok"]}]}
  }
}
EOF
sb_session alice "$SB_ALICE" '["true", "cat", "slow", "yes", "denied"]'

VGLOG=$SB_DIR/log/valgrind.log
# Under valgrind the daemon's fd hard limit is the soft limit it was started with, and
# valgrind refuses any setrlimit(NOFILE) whose hard value differs from it; children set
# exactly 1024, so start with a soft limit of 1024.
ulimit -Sn 1024
# --no-jail: the jail's init is a copy of the daemon that never execs, so it would run
# under valgrind too, and valgrind's --error-exitcode would replace the tool's status.
# The jail's code path runs under ASan+UBSan instead (test_spawn, the *-asan suites).
sb_bg valgrind --quiet --leak-check=full --show-leak-kinds=definite,possible \
	--errors-for-leak-kinds=definite --error-exitcode=99 --child-silent-after-fork=yes \
	--trace-children=no --num-callers=30 --log-file="$VGLOG" \
	"$SB_BUILD/shimbridged" --no-jail -c "$SB_CONFIG" </dev/null >"$SB_DIR/log/daemon.log" 2>&1
VG_PID=$!
for _ in $(seq 600); do
	[ -S "$SB_SOCK" ] && break
	kill -0 "$VG_PID" 2>/dev/null || break
	sleep 0.1
done
if [ ! -S "$SB_SOCK" ]; then
	echo "valgrind.sh: the daemon did not start under valgrind" >&2
	cat "$SB_DIR/log/daemon.log" "$VGLOG" >&2
	exit 1
fi

# --- The calls -------------------------------------------------------------------------
out=$(asu "$SB_ALICE" true 2>&1); check "allowed tool" 0 $?
out=$(asu "$SB_ALICE" denied forbidden 2>&1); check "denied by a rule" 126 $? "refused" "$out"
out=$(asu "$SB_ALICE" denied ok --evil=1 2>&1); check "denied by deny_args" 126 $?
out=$(asu "$SB_ALICE" denied something 2>&1); check "denied by default" 126 $?
out=$(asu "$SB_ALICE" nosuch 2>&1); check "unknown tool" 127 $?
out=$(printf 'hello %s bye\n' "$TOKEN" | asu "$SB_ALICE" cat 2>&1)
check "stdin through cat" 0 $? "hello" "$out"
if [[ $out == *"$TOKEN"* ]]; then echo "not ok - the secret came back unredacted" >&2; failures=$((failures + 1)); fi
out=$(head -c 3000000 /dev/urandom | base64 | asu "$SB_ALICE" cat | wc -c); check "3 MB of stdin" 0 $? 4052632 "$out"
out=$(asu "$SB_ALICE" slow 10 2>&1); check "timeout" 124 $?
out=$(asu "$SB_ALICE" yes 2>&1 >/dev/null); check "output limit" 118 $?
# The shim forwards SIGINT; the tool dies of it and the shim reports 128+2.
asu "$SB_ALICE" slow 10 >/dev/null 2>&1 & p=$!
sleep 1
kill -INT "$(descendant "$p" slow)"
wait "$p"; check "SIGINT forwarded to the tool" 130 $?
# The peer is SIGKILLed mid-run: the bridge must kill the tool (kill_grace 1 s).
asu "$SB_ALICE" slow 10 >/dev/null 2>&1 & p=$!
sleep 1
kill -KILL "$(descendant "$p" slow)"
wait "$p" 2>/dev/null
sleep 2.5
left=$(pgrep -c -u "$SB_RUNNER" sleep)
check "peer killed mid-run: no tool left behind" 0 "${left:-0}"
out=$(asu "$SB_MALLORY" true 2>&1); check "unauthorized user" 120 $?
out=$(raw header=0x7f,0 read 2>&1); check "unknown frame type" 0 $? "ERROR" "$out"
out=$(raw hello header=0x02,999999 read 2>&1); check "oversized frame" 0 $? "ERROR" "$out"
out=$(raw hello request='{"op":"run","tool":' read 2>&1); check "malformed JSON" 0 $? "ERROR" "$out"
out=$(raw hello request='{"op":"run","tool":"true","argv":[],"x":1}' read 2>&1); check "unknown request key" 0 $? "ERROR" "$out"
out=$(raw hello='{"proto":99}' read 2>&1); check "wrong protocol version" 0 $? "ERROR" "$out"
out=$(raw bytes='\x00\x00' close 2>&1); check "truncated header" 0 $?
out=$(raw hello 'run=["cat"]' stdin=abc close 2>&1); check "peer gone with stdin open" 0 $?
out=$(raw 'frame=0x10,early' read 2>&1); check "data before HELLO" 0 $? "ERROR" "$out"
pids=()
for _ in $(seq 16); do asu "$SB_ALICE" true >/dev/null 2>&1 & pids+=($!); done
bad=0
for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
check "16 concurrent calls" 0 "$bad"
kill -HUP "$VG_PID"
sleep 2
out=$(asu "$SB_ALICE" true 2>&1); check "after a reload" 0 $?
sleep 1

# --- Stop and judge ------------------------------------------------------------------------
kill -TERM "$VG_PID"
wait "$VG_PID"; rc=$?
VG_PID=''
if [ "$rc" = 99 ] || grep -qE 'definitely lost: [1-9]|ERROR SUMMARY: [1-9]' "$VGLOG"; then
	echo "not ok - valgrind found errors or definite leaks:" >&2
	cat "$VGLOG" >&2
	failures=$((failures + 1))
elif [ "$rc" != 0 ]; then
	echo "not ok - the daemon exited $rc after SIGTERM:" >&2
	tail -n 30 "$SB_DIR/log/daemon.log" "$VGLOG" >&2
	failures=$((failures + 1))
else
	echo "ok - valgrind: no errors, no definite leaks ($(grep -c . "$VGLOG") log lines)"
fi
echo "valgrind.sh: $failures failure(s), $((SECONDS - START)) s"
[ "$failures" = 0 ]
