# Shared setup for integration tests: real users, a private root-owned socket
# directory, a config written per suite, the real daemon and the real shim.
# Tests run as root (CI does). Users are created with useradd and removed after.
#
#   SB_BUILD   directory with shimbridged and shim (default build; build/san for ASan)
#
# Users (fixed names so a crashed run is cleaned up by the next one):
#   sbt-runner   the runner (no login, no home)
#   sbt-alice    a session user, in the socket group
#   sbt-bob      a second session user, in the socket group
#   sbt-mallory  in the socket group but without a session

SB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SB_BUILD=${SB_BUILD:-$SB_ROOT/build}
case $SB_BUILD in /*) ;; *) SB_BUILD=$SB_ROOT/$SB_BUILD ;; esac
SB_GROUP=sbt-sock
SB_RUNNER=sbt-runner
PY=/usr/bin/python3

# Create the users and group if missing.
sb_users() {
	getent group "$SB_GROUP" >/dev/null || groupadd "$SB_GROUP"
	id "$SB_RUNNER" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$SB_RUNNER"
	local u
	for u in sbt-alice sbt-bob sbt-mallory; do
		id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash -G "$SB_GROUP" "$u"
	done
}

# Remove users, group and their homes.
sb_users_remove() {
	local u
	for u in sbt-alice sbt-bob sbt-mallory "$SB_RUNNER"; do
		pkill -KILL -u "$u" 2>/dev/null || true
		userdel -r "$u" >/dev/null 2>&1 || userdel "$u" >/dev/null 2>&1 || true
	done
	groupdel "$SB_GROUP" >/dev/null 2>&1 || true
}

# Make the suite's directory tree: $SB_DIR/{etc,etc/sessions.d,run,state,log,bin}.
sb_tree() {
	SB_DIR=$(mktemp -d /tmp/sbt.XXXXXX)
	chmod 755 "$SB_DIR"
	mkdir -p "$SB_DIR/etc/sessions.d" "$SB_DIR/run" "$SB_DIR/state" "$SB_DIR/log" "$SB_DIR/bin"
	chmod 755 "$SB_DIR/run" "$SB_DIR/bin"
	chmod 700 "$SB_DIR/etc" "$SB_DIR/log"
	SB_SOCK=$SB_DIR/run/bridge.sock
	SB_AUDIT=$SB_DIR/log/audit.log
	SB_CONFIG=$SB_DIR/etc/config.json
	install -m 0755 "$SB_BUILD/shim" "$SB_DIR/bin/shimbridge-shim"
	export SB_DIR SB_SOCK SB_AUDIT SB_CONFIG
}

# Link the shim under tool names in the sandbox bin directory.
sb_shim_links() {
	local t
	for t in "$@"; do ln -sf shimbridge-shim "$SB_DIR/bin/$t"; done
}

# Write the main config from stdin (root-owned, 0600).
sb_config() {
	cat > "$SB_CONFIG"
	chmod 600 "$SB_CONFIG"
}

# Write a session drop-in: sb_session NAME USER TOOLS_JSON [EXTRA_JSON_MEMBERS]
sb_session() {
	local extra=${4:+, $4}
	printf '{"name": "%s", "user": "%s", "tools": %s%s}\n' "$1" "$2" "$3" "$extra" \
		> "$SB_DIR/etc/sessions.d/$1.json"
	chmod 600 "$SB_DIR/etc/sessions.d/$1.json"
}

# Common top of a config: socket, runner, audit, state. Usage: "$(sb_config_head)".
sb_config_head() {
	printf '"socket": {"path": "%s", "group": "%s", "mode": 432},\n' "$SB_SOCK" "$SB_GROUP"
	printf '"runner": "%s", "audit_log": "%s", "state_dir": "%s",\n' "$SB_RUNNER" "$SB_AUDIT" "$SB_DIR/state"
}

# Start the daemon in the background and wait for its socket.
sb_start() {
	"$SB_BUILD/shimbridged" -c "$SB_CONFIG" "$@" >>"$SB_DIR/log/daemon.log" 2>&1 &
	SB_PID=$!
	export SB_PID
	local i
	for i in $(seq 1 100); do
		[ -S "$SB_SOCK" ] && return 0
		kill -0 "$SB_PID" 2>/dev/null || { cat "$SB_DIR/log/daemon.log" >&2; return 1; }
		sleep 0.05
	done
	echo "daemon did not create its socket" >&2
	return 1
}

# Stop the daemon; fail if it died (e.g. a sanitizer report) before being asked.
sb_stop() {
	[ -n "${SB_PID:-}" ] || return 0
	if ! kill -0 "$SB_PID" 2>/dev/null; then
		echo "daemon was not running at teardown:" >&2
		cat "$SB_DIR/log/daemon.log" >&2
		return 1
	fi
	kill -TERM "$SB_PID"
	local rc=0
	wait "$SB_PID" || rc=$?
	SB_PID=
	if grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$SB_DIR/log/daemon.log"; then
		cat "$SB_DIR/log/daemon.log" >&2
		return 1
	fi
	return "$rc"
}

# Run a command as a user with a clean environment and the sandbox PATH.
#   as USER CMD...   (cwd: the user's home)
as() {
	local u=$1
	shift
	local home
	home=$(getent passwd "$u" | cut -d: -f6)
	(cd "$home" 2>/dev/null || cd /tmp; runuser -u "$u" -- env -i HOME="$home" \
		PATH="$SB_DIR/bin:/usr/bin:/bin" SHIMBRIDGE_SOCKET="$SB_SOCK" LANG=C.UTF-8 "$@")
}

# Last audit record matching a jq-less grep pattern.
sb_audit_last() {
	grep -- "$1" "$SB_AUDIT" | tail -n 1
}

# Count of open fds of the daemon.
sb_daemon_fds() {
	ls "/proc/$SB_PID/fd" | wc -l
}

# RSS of the daemon in KiB.
sb_daemon_rss() {
	awk '/^VmRSS:/ {print $2}' "/proc/$SB_PID/status"
}

# --- fake GitHub Enterprise server (tests/fixtures/fakegh.py) -------------------
# sb_fakegh_run DIR TOKEN [fakegh options...] — start a server whose token, log
# (DIR/requests.log), port (DIR/port), pid (DIR/pid) and output live in DIR,
# created root-only. Certificates come from $SB_DIR/certs (made on first use,
# readable by the runner, which needs ca.pem). Returns once the port is known.
sb_fakegh_run() {
	local dir=$1 token=$2 pid _
	shift 2
	mkdir -p "$dir"
	chmod 700 "$dir"
	sh "$SB_ROOT/tests/fixtures/mkcerts.sh" "$SB_DIR/certs" || return 1
	chmod 755 "$SB_DIR/certs"
	(umask 077 && printf '%s\n' "$token" >"$dir/token" && : >"$dir/requests.log")
	"$PY" "$SB_ROOT/tests/fixtures/fakegh.py" --cert "$SB_DIR/certs/server.pem" \
		--key "$SB_DIR/certs/server.key" --token-file "$dir/token" \
		--port-file "$dir/port" --log "$dir/requests.log" "$@" \
		</dev/null >"$dir/server.out" 2>"$dir/server.err" 3>&- &
	pid=$!
	echo "$pid" >"$dir/pid"
	for _ in $(seq 100); do
		[ -s "$dir/port" ] && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	cat "$dir/server.err" >&2
	echo "fakegh did not start within 10 s" >&2
	kill -KILL "$pid" 2>/dev/null
	return 1
}

# sb_fakegh_kill DIR — stop a server started by sb_fakegh_run (TERM, then KILL after 5 s).
sb_fakegh_kill() {
	local pid _
	[ -s "$1/pid" ] || return 0
	pid=$(cat "$1/pid")
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$1/pid"
}

# sb_fakegh_start TOKEN [fakegh options...] — the suite's main server, in $SB_DIR/fakegh.
# Sets FAKEGH_PORT, FAKEGH_LOG, FAKEGH_CA.
sb_fakegh_start() {
	sb_fakegh_run "$SB_DIR/fakegh" "$@" || return 1
	FAKEGH_PORT=$(cat "$SB_DIR/fakegh/port")
	FAKEGH_LOG=$SB_DIR/fakegh/requests.log
	FAKEGH_CA=$SB_DIR/certs/ca.pem
	export FAKEGH_PORT FAKEGH_LOG FAKEGH_CA
}

# Stop the main server.
sb_fakegh_stop() {
	sb_fakegh_kill "$SB_DIR/fakegh"
}

# Number of requests the fake server has logged so far.
sb_fakegh_count() {
	wc -l <"$FAKEGH_LOG"
}

# Run a command as a user from a directory (relative to the user's home or absolute),
# with the same clean environment as `as`: as_in USER DIR CMD...
as_in() {
	local u=$1 d=$2
	shift 2
	local home
	home=$(getent passwd "$u" | cut -d: -f6)
	case $d in /*) ;; *) d=$home/$d ;; esac
	(cd "$d" && runuser -u "$u" -- env -i HOME="$home" \
		PATH="$SB_DIR/bin:/usr/bin:/bin" SHIMBRIDGE_SOCKET="$SB_SOCK" LANG=C.UTF-8 "$@")
}

# Fail (printing where) if the fixed string $1 occurs in the text $2.
sb_refute_contains() {
	if [[ $2 == *"$1"* ]]; then
		echo "found a forbidden string in: ${3:-output}" >&2
		return 1
	fi
}

# ---- Added for core.bats and faults.bats (append-only section) ----

SB_FIXTURES=$SB_ROOT/tests/fixtures
SB_OUTSIDER=sbt-eve

# Older Makefiles put the sanitized shim's objects in build/san/shim/, so the binary
# could not be linked there (fixed in 18b37b7: objects now in build/san/obj/). For such
# a build dir, link the sanitized shim from those objects into a private dir that
# points back at the sanitized daemon. No-op when $SB_BUILD/shim is a file (the normal
# case now). Sets and exports SB_BUILD.
sb_build_resolve() {
	[ -d "$SB_BUILD/shim" ] || return 0
	local dir=${BATS_RUN_TMPDIR:-/tmp}/sb-build.$$ o=$SB_BUILD
	mkdir -p "$dir"
	if [ -f "$o/shim/shim.o" ] && cc -fsanitize=address,undefined -o "$dir/shim" "$o"/shim/*.o \
		"$o/common/frame.o" "$o/common/jsonw.o" "$o/common/proto.o" "$o/common/util.o"; then
		:
	else
		echo "sb_build_resolve: no sanitized shim objects in $o/shim; using $SB_ROOT/build/shim" >&2
		cp "$SB_ROOT/build/shim" "$dir/shim"
	fi
	ln -sf "$(cd "$o" && pwd)/shimbridged" "$dir/shimbridged"
	SB_BUILD=$dir
	export SB_BUILD
}

# A user that is NOT in the socket group (removed by sb_outsider_remove).
sb_outsider() {
	id "$SB_OUTSIDER" >/dev/null 2>&1 || useradd -m -s /bin/bash "$SB_OUTSIDER"
}

sb_outsider_remove() {
	pkill -KILL -u "$SB_OUTSIDER" 2>/dev/null || true
	userdel -r "$SB_OUTSIDER" >/dev/null 2>&1 || true
}

# `as`, bounded: as_t SECONDS USER CMD... The whole call (runuser and the shim) is
# killed after SECONDS; then the status is timeout's 124, which is also the shim's
# own timeout code, so a test expecting 124 must check the shim's message too.
as_t() {
	local t=$1 u=$2 home
	shift 2
	home=$(getent passwd "$u" | cut -d: -f6)
	(cd "$home" 2>/dev/null || cd /tmp; exec timeout -k 5 "$t" runuser -u "$u" -- env -i \
		HOME="$home" PATH="$SB_DIR/bin:/usr/bin:/bin" SHIMBRIDGE_SOCKET="$SB_SOCK" \
		LANG=C.UTF-8 "$@")
}

# Retry CMD... every 50 ms until it succeeds or SECONDS (may be fractional) pass.
sb_wait_for() {
	local n
	n=$(awk -v s="$1" 'BEGIN { printf "%d", s * 20 }')
	shift
	while ! "$@"; do
		[ "$n" -gt 0 ] || return 1
		n=$((n - 1))
		sleep 0.05
	done
}

# Whether no live process of the runner user exists. Zombies count (a zombie of the
# daemon is a reaping bug) except those of PID 1: a container's PID 1 may never reap
# what a killed daemon left to it.
sb_no_runner() {
	! ps -u "$SB_RUNNER" -o stat=,ppid= 2>/dev/null | awk '$1 !~ /^Z/ || $2 != 1 { found = 1 } END { exit !found }'
}

# Pids of USER's processes whose command line contains TEXT, oldest first.
sb_pids() {
	pgrep -u "$1" -f -- "$2" | sort -n
}

# Audit records (one JSON line each) for which the Python expression EXPR is true;
# the record is `r`. Exit 1 when none matches.  sb_audit_grep 'r["event"] == "denied"'
sb_audit_grep() {
	"$PY" - "$SB_AUDIT" "$1" <<'PYEOF'
import json, sys
hits = 0
for line in open(sys.argv[1], encoding="utf-8"):
    r = json.loads(line)
    if eval("(" + sys.argv[2] + "\n)", {}, {"r": r}):
        print(line, end="")
        hits += 1
sys.exit(0 if hits else 1)
PYEOF
}

# Every line of a JSON-lines file parses (no partial or torn line).
sb_jsonl_valid() {
	"$PY" -c 'import json, sys
n = 0
with open(sys.argv[1], "rb") as f:
    data = f.read()
if data and not data.endswith(b"\n"):
    sys.exit("last line is not terminated")
for n, l in enumerate(data.splitlines(), 1):
    json.loads(l)
print(n)' "$1"
}

# Edit a JSON file in place with Python statements on `c`, keeping owner and mode.
sb_json_edit() {
	"$PY" - "$1" "$2" <<'PYEOF'
import json, sys
p = sys.argv[1]
with open(p) as f:
    c = json.load(f)
exec(sys.argv[2])
with open(p, "w") as f:
    json.dump(c, f, indent=1)
PYEOF
}

# Send SIGHUP and wait (10 s) for the reload's audit line; print it.
sb_reload() {
	local n
	n=$(wc -l <"$SB_AUDIT")
	kill -HUP "$SB_PID"
	sb_wait_for 10 eval "tail -n +$((n + 1)) \"\$SB_AUDIT\" | grep -q '\"event\":\"reload\"'" || return 1
	tail -n +$((n + 1)) "$SB_AUDIT" | grep '"event":"reload"' | tail -n 1
}
