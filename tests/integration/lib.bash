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
