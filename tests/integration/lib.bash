# Shared setup for integration tests: real users, a private root-owned socket
# directory, a config written per suite, the real daemon and the real shim.
# Tests run as root (CI does). Users are created with useradd and removed after.
#
#   SB_BUILD   directory with shimbridged and shim (default build; build/san for ASan)
#   SB_LANE    the prefix of every user, group and scratch name (default sbt): suites
#              of different lanes (tests/run-all runs two, sbt and sbu) can run at the
#              same time; two suites of one lane cannot (each lane has its own lock,
#              /tmp/sb-itest.lock for sbt, /tmp/sb-itest-LANE.lock for the others)
#
# Users (fixed names within a lane, so a crashed run is cleaned up by the next one),
# shown for the lane sbt; suites add their own, all named $SB_LANE-*:
#   sbt-runner   $SB_RUNNER    the runner (no login, no home)
#   sbt-alice    $SB_ALICE     a session user, in the socket group $SB_GROUP (sbt-sock)
#   sbt-bob      $SB_BOB       a second session user, in the socket group
#   sbt-mallory  $SB_MALLORY   in the socket group but without a session
#   sbt-eve      $SB_OUTSIDER  not in the socket group (sb_outsider)

# Worked out once per suite where bats loads this file by its absolute path (every
# test's process loads it, and a fork costs ~5 ms here).
if [[ ${BASH_SOURCE[0]} != /* ]] || [ "${SB_LIB:-}" != "${BASH_SOURCE[0]}" ] ||
    [ -z "${SB_ROOT:-}" ]; then
	SB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	SB_LIB=${BASH_SOURCE[0]}
	export SB_ROOT SB_LIB
fi
SB_BUILD=${SB_BUILD:-$SB_ROOT/build}
case $SB_BUILD in /*) ;; *) SB_BUILD=$SB_ROOT/$SB_BUILD ;; esac
SB_LANE=${SB_LANE:-sbt}
# A short prefix keeps every derived name (the longest: $SB_LANE-runner-jail, or
# $SB_LANE-rgb-PID) within the 32 characters of a user name.
[[ $SB_LANE =~ ^[a-z][a-z0-9]{1,7}$ ]] || { echo "lib.bash: bad SB_LANE '$SB_LANE'" >&2; return 2; }
export SB_LANE
SB_GROUP=$SB_LANE-sock
SB_RUNNER=$SB_LANE-runner
SB_ALICE=$SB_LANE-alice
SB_BOB=$SB_LANE-bob
SB_MALLORY=$SB_LANE-mallory
PY=/usr/bin/python3

# ---- Isolation: a checkout anywhere, nothing left running, every test time-limited -----
# The checkout may live in a 0700 directory (/root, mktemp -d) that the runner and the
# session users cannot enter, so what they exec or read (tests/fixtures, the programs in
# $SB_BUILD) is staged when a suite starts into $SB_STAGE: a root-owned copy under /tmp,
# directories 0755, files 0644/0755. SB_FIXTURES and SB_BUILD point into it; tests use only
# those, never $SB_ROOT/tests/fixtures or $SB_ROOT/build for what another user runs.
#
# Every process a suite starts carries SB_PROC_TAG=SUITE/file (setup_file) or SUITE/tN
# (test N) in its environment. Long-lived processes start with sb_bg: their own process
# group, recorded, and no fd above 2 (bats waits for EOF on its fd 3: a daemon holding it
# hangs the run). teardown ends with sb_reap (kills what this test left running),
# teardown_file with sb_reap_suite (what the suite left, and the stage). A suite starting,
# and tests/run-all after each suite, run sb_sweep: it kills and removes whatever runs
# whose bats process is gone (crashed, killed by a timeout) left behind.
# Each test has a hard time limit, BATS_TEST_TIMEOUT seconds (a suite may set its own
# before `load lib`).

umask 022
: "${BATS_TEST_TIMEOUT:=120}"
export BATS_TEST_TIMEOUT
SB_REG=/tmp/sb-itest.reg

# bats runs a DEBUG trap before every command of a test, for the stack trace of a
# failure: ~0.15 ms a command on this 2-vCPU VM, a hundred times what `x=1` costs, so
# helpers that loop (sb_reap reads every process; sb_wait_for polls) cost a tenth of a
# second and more per test. `NAME() { _sb_untraced _NAME "$@"; }` runs such a helper
# with the trap off and puts it back when it returns: a failure inside is reported at
# the line that called it, and set -e behaves as before (a failing command still ends
# the test). Outside bats (scripts that source this file) there is no trap to lift.
# In the teardown of a test that failed, bats has turned the trap off itself, so that
# the failure is reported where it happened: it stays off (putting it back made every
# such failure read as one of the teardown's, at the line that put it back).
_sb_untraced() {
	local _sb_rc
	if [ -z "${SB_DEBUG_TRAP:-}" ]; then
		[ -n "${BATS_TEST_FILENAME:-}" ] && SB_DEBUG_TRAP=$(trap -p DEBUG)
		# "return $?", not "return": bats runs a teardown from its EXIT trap, where a
		# bare return gives the status of the command before the trap (the failure).
		[ -n "${SB_DEBUG_TRAP:-}" ] || { "$@"; return $?; }
	fi
	trap - DEBUG
	"$@"
	_sb_rc=$?
	if [ -z "${BATS_TEARDOWN_STARTED:-}" ] || [ -n "${BATS_TEST_COMPLETED:-}" ]; then
		eval "$SB_DEBUG_TRAP"
	fi
	return "$_sb_rc"
}

# Start time (clock ticks since boot) of process $1; fails when there is none.
_sb_start_time() {
	local s
	{ read -r s <"/proc/$1/stat"; } 2>/dev/null || return 1
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	printf '%s\n' "${20}"
}

# Whether "PID.START" ($1) names a process that still runs.
_sb_id_alive() {
	[ "$(_sb_start_time "${1%%.*}" 2>/dev/null)" = "${1#*.}" ]
}

# Append a line ("dir PATH" or "proc PID.START") to this suite's record.
_sb_record() {
	[ -n "${SB_SUITE_ID:-}" ] && [ -d "$SB_REG" ] || return 0
	printf '%s\n' "$*" >>"$SB_REG/$SB_SUITE_ID"
}

# Pids (one a line) of the processes whose SB_PROC_TAG matches the glob $1, except this
# shell, its ancestors, and the pids $2... with their children. (One grep and builtins:
# it runs after every test.)
_sb_tagged() {
	local pat=$1 line pid tag q p
	shift
	local -A skip=() given=()
	q=$BASHPID
	while [ -n "$q" ] && [ "$q" != 0 ]; do skip[$q]=1; _sb_ppid "$q"; q=$REPLY; done
	skip[$$]=1
	for p in "$@"; do [ -z "$p" ] || given[$p]=1; done
	while IFS= read -r -d '' line; do
		pid=${line#/proc/}
		pid=${pid%%/*}
		tag=${line#*:SB_PROC_TAG=}
		# shellcheck disable=SC2053
		[[ $tag == $pat ]] || continue
		[ -n "${skip[$pid]:-}" ] || [ -n "${given[$pid]:-}" ] && continue
		if [ ${#given[@]} -gt 0 ]; then
			_sb_ppid "$pid"
			[ -z "${given[$REPLY]:-}" ] || continue
		fi
		printf '%s\n' "$pid"
	done < <(unset SB_PROC_TAG; exec grep -Hsaoz '^SB_PROC_TAG=.*' /proc/[0-9]*/environ)
}

# REPLY: the parent pid of process $1 (empty when it is gone).
_sb_ppid() {
	local s
	REPLY=
	{ read -r s <"/proc/$1/stat"; } 2>/dev/null || return 0
	s=${s##*) }
	s=${s#* }
	REPLY=${s%% *}
}

# Whether process $1 exists and is not a zombie.
_sb_running() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $st != Z* ]]
}

# Kill the processes $1..., each with its process group when it leads one: TERM, then
# KILL after 2 s. Reaps them when they are this shell's children.
_sb_kill() {
	local p n left
	[ $# -gt 0 ] || return 0
	for p in "$@"; do
		[ "$(ps -o pgid= -p "$p" 2>/dev/null | tr -d ' ')" = "$p" ] && kill -TERM -- "-$p" 2>/dev/null
		kill -TERM "$p" 2>/dev/null
	done
	for n in $(seq 40); do
		left=0
		for p in "$@"; do _sb_running "$p" && { left=1; break; }; done
		[ "$left" = 0 ] && break
		sleep 0.05
	done
	for p in "$@"; do
		[ "$(ps -o pgid= -p "$p" 2>/dev/null | tr -d ' ')" = "$p" ] && kill -KILL -- "-$p" 2>/dev/null
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	return 0
}

# sb_bg CMD...: start CMD in the background, as `CMD &` would ($! is its pid after), in its
# own process group, with fds 0-2 only (0 is the caller's: redirect it, e.g. </dev/null or
# a here-document), recorded for sb_reap / sb_reap_suite.
sb_bg() {
	(
		for f in "/proc/$BASHPID"/fd/*; do
			fd=${f##*/}
			[ "$fd" -gt 2 ] && [ -e "$f" ] && eval "exec $fd>&-"
		done
		exec setsid "$@"
	) <&0 &
	_sb_record "proc $!.$(_sb_start_time $!)"
}

# sb_keep PID: a process a test starts for the tests after it (a restarted daemon):
# sb_reap leaves it, sb_reap_suite ends it.
sb_keep() {
	_sb_record "keep $1.$(_sb_start_time "$1")"
}

# In a teardown, when the test failed: what the daemon logged and audited last, for the
# failure's report (suites whose failures depend on timing: token lifetimes, reloads).
sb_failure_context() {
	[ -z "${BATS_TEST_COMPLETED:-}" ] || return 0
	if [ -s "${SB_DIR:-/nonexistent}/log/daemon.log" ]; then
		echo "# the daemon's log, last 30 lines:"
		tail -n 30 "$SB_DIR/log/daemon.log"
	fi
	if [ -s "${SB_AUDIT:-/nonexistent}" ]; then
		echo "# the audit log, last 15 records:"
		tail -n 15 "$SB_AUDIT"
	fi
	return 0
} >&2

# Kill what this test started and left running (call last in teardown, whatever failed
# before), except what sb_keep kept. Prints what it had to kill.
sb_reap() { _sb_untraced _sb_reap "$@"; }
_sb_reap() {
	local pids kind what keep=()
	sb_gate_release	# a test that failed while holding a call lets it go
	if [ -n "${SB_SUITE_ID:-}" ] && [ -f "$SB_REG/$SB_SUITE_ID" ]; then
		while read -r kind what; do
			[ "$kind" = keep ] && _sb_id_alive "$what" && keep+=("${what%%.*}")
		done <"$SB_REG/$SB_SUITE_ID"
	fi
	# killer_pid / BATS_killer_pid: bats' own time-limit watchdog, which carries our tag.
	pids=$(_sb_tagged "${SB_PROC_TAG:-none}" "${killer_pid:-}" "${BATS_killer_pid:-}" "${keep[@]}")
	[ -n "$pids" ] || return 0
	echo "sb_reap: killing what the test left running:" >&2
	# shellcheck disable=SC2086
	ps -o pid,pgid,user,args -p "$(echo $pids | tr ' ' ,)" >&2 || true
	# shellcheck disable=SC2086
	_sb_kill $pids
}

# Kill what the suite left running, remove its stage and record (call last in teardown_file).
sb_reap_suite() { _sb_untraced _sb_reap_suite "$@"; }
_sb_reap_suite() {
	[ -n "${SB_SUITE_ID:-}" ] || return 0
	local pids
	pids=$(_sb_tagged "$SB_SUITE_ID/*")
	if [ -n "$pids" ]; then
		echo "sb_reap_suite: killing what the suite left running:" >&2
		# shellcheck disable=SC2086
		ps -o pid,pgid,user,args -p "$(echo $pids | tr ' ' ,)" >&2 || true
		# shellcheck disable=SC2086
		_sb_kill $pids
	fi
	# Whatever else still writes to bats' output pipe (our fd 3) would keep the run
	# waiting for EOF: untagged processes, such as a session user's, that inherited it.
	pids=$(_sb_pipe_writers 3)
	if [ -n "$pids" ]; then
		echo "sb_reap_suite: killing processes that hold bats' output open:" >&2
		# shellcheck disable=SC2086
		ps -o pid,pgid,user,args -p "$(echo $pids | tr ' ' ,)" >&2 || true
		# shellcheck disable=SC2086
		_sb_kill $pids
	fi
	[ -n "${SB_STAGE:-}" ] && rm -rf "$SB_STAGE"
	rm -f "$SB_REG/$SB_SUITE_ID"
	return 0
}

# Pids, other than this shell and its ancestors, that hold the pipe of our fd $1 open
# for writing.
_sb_pipe_writers() {
	local pipe pat fd pid flags q p
	pipe=$(readlink "/proc/$BASHPID/fd/$1" 2>/dev/null) || return 0
	case $pipe in pipe:*) ;; *) return 0 ;; esac
	local -A skip=()
	q=$BASHPID
	while [ -n "$q" ] && [ "$q" != 0 ]; do
		skip[$q]=1
		q=$(ps -o ppid= -p "$q" 2>/dev/null | tr -d ' ')
	done
	pat=${pipe//[/\\[}
	pat=${pat//]/\\]}
	while read -r fd; do
		pid=${fd#/proc/}
		pid=${pid%%/*}
		[ -z "${skip[$pid]:-}" ] || continue
		flags=$(sed -n 's/^flags:[[:space:]]*//p' "/proc/$pid/fdinfo/${fd##*/}" 2>/dev/null)
		# O_WRONLY or O_RDWR: the low two bits of the octal flags
		[ $((8#${flags:-0} & 3)) -ne 0 ] && p+=" $pid"
	done < <(find /proc/[0-9]*/fd -lname "$pat" 2>/dev/null)
	# shellcheck disable=SC2086
	[ -z "${p:-}" ] || printf '%s\n' $p | sort -u
}

# Clean up after runs whose bats process is gone: kill their tagged and recorded
# processes (with their process groups), remove their recorded directories. Prints what
# it found; exits 2 if it killed a process, 1 if it only removed directories, else 0.
sb_sweep() { _sb_untraced _sb_sweep "$@"; }
_sb_sweep() {
	local f id kind what found=0 p pids=()
	[ -d "$SB_REG" ] || mkdir -p -m 700 "$SB_REG"	# -p: the other lane may make it too
	for f in "$SB_REG"/*; do
		[ -f "$f" ] || continue
		id=${f##*/}
		_sb_id_alive "$id" && continue
		while read -r kind what; do
			case $kind in
			proc) _sb_id_alive "$what" && pids+=("${what%%.*}") ;;
			dir) [ -d "$what" ] && { rm -rf "$what"; echo "sb_sweep: removed $what" >&2; } ;;
			esac
		done <"$f"
		rm -f "$f"
		found=1
	done
	while read -r p; do
		[ -n "$p" ] && pids+=("$p")
	done < <(_sb_tagged '*' | while read -r p; do
		id=$({ tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | sed -n 's/^SB_PROC_TAG=//p')
		id=${id%%/*}
		[ -n "$id" ] && ! _sb_id_alive "$id" && echo "$p"
	done)
	if [ ${#pids[@]} -gt 0 ]; then
		echo "sb_sweep: killing processes left by an earlier run:" >&2
		ps -o pid,pgid,user,args -p "$(IFS=,; echo "${pids[*]}")" >&2 || true
		_sb_kill "${pids[@]}"
		return 2
	fi
	[ "$found" = 0 ]
}

# Copy into $SB_STAGE what other users exec or read: tests/fixtures, and the programs of
# $SB_BUILD (and of its parent for a build/san). Again after a rebuild: it recopies.
sb_stage() { _sb_untraced _sb_stage "$@"; }
_sb_stage() {
	local src=${SB_BUILD_SRC:-$SB_BUILD}
	mkdir -p "$SB_STAGE/fixtures" "$SB_STAGE/build"
	cp -R "$SB_ROOT/tests/fixtures/." "$SB_STAGE/fixtures/"
	case $src in
	*/san) _sb_stage_progs "${src%/san}" "$SB_STAGE/build"
		_sb_stage_progs "$src" "$SB_STAGE/build/san"
		SB_BUILD=$SB_STAGE/build/san ;;
	*) _sb_stage_progs "$src" "$SB_STAGE/build"
		SB_BUILD=$SB_STAGE/build ;;
	esac
	chown -R 0:0 "$SB_STAGE"
	chmod -R u=rwX,go=rX "$SB_STAGE"
	SB_FIXTURES=$SB_STAGE/fixtures
	export SB_STAGE SB_BUILD SB_FIXTURES
}

# Copy the executables at the top of build directory $1 into $2.
_sb_stage_progs() {
	local f
	mkdir -p "$2"
	[ -d "$1" ] || return 0
	for f in "$1"/*; do
		[ -f "$f" ] && [ -x "$f" ] && cp "$f" "$2/"
	done
	return 0
}

# Begin a suite (bats runs this when a .bats file loads lib in its setup_file process;
# scripts call it themselves): clean up after dead runs, name the suite, tag its
# processes, stage.
sb_suite_begin() {
	sb_sweep || true
	SB_SUITE_ID=$$.$(_sb_start_time $$)
	SB_PROC_TAG=$SB_SUITE_ID/file
	SB_BUILD_SRC=$SB_BUILD
	SB_STAGE=$(mktemp -d "/tmp/$SB_LANE-stage.XXXXXX")
	chmod 755 "$SB_STAGE"
	: >"$SB_REG/$SB_SUITE_ID"
	_sb_record "dir $SB_STAGE"
	export SB_SUITE_ID SB_PROC_TAG SB_BUILD_SRC
	sb_stage
	cd "$SB_STAGE" || return 1
}

if [ -n "${BATS_TEST_FILENAME:-}" ] && [ -z "${BATS_TEST_NAME:-}" ] &&
    { [ -z "${SB_SUITE_ID:-}" ] || ! _sb_id_alive "$SB_SUITE_ID"; }; then
	sb_suite_begin
elif [ -n "${BATS_TEST_NAME:-}" ] && [ -n "${SB_SUITE_ID:-}" ]; then
	SB_PROC_TAG=$SB_SUITE_ID/t${BATS_SUITE_TEST_NUMBER:-${BATS_TEST_NUMBER:-0}}
	export SB_PROC_TAG
fi
# Work from the stage, not the checkout: commands run as other users (runuser) start
# in the current directory, which they may not be able to enter.
if [ -n "${BATS_TEST_FILENAME:-}" ] && [ -n "${SB_STAGE:-}" ] && [ -d "$SB_STAGE" ]; then
	cd "$SB_STAGE" || true
fi
SB_FIXTURES=${SB_FIXTURES:-$SB_ROOT/tests/fixtures}

# Create the users and group afresh: whatever a crashed earlier run left (processes,
# homes, suite-specific users of the lane such as $SB_OUTSIDER or $SB_LANE-runner-act) is
# removed first.
sb_users() {
	sb_users_remove
	groupadd "$SB_GROUP"
	useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$SB_RUNNER"
	local u
	for u in "$SB_ALICE" "$SB_BOB" "$SB_MALLORY"; do
		useradd -m -s /bin/bash -G "$SB_GROUP" "$u"
	done
}

# Remove every user of this lane, $SB_LANE-* (with its processes and home), and the group.
# Other lanes' users are left alone: their suites may be running.
sb_users_remove() { _sb_untraced _sb_users_remove "$@"; }
_sb_users_remove() {
	local u
	for u in $(getent passwd | cut -d: -f1 | grep -E "^$SB_LANE-") "$SB_RUNNER"; do
		id "$u" >/dev/null 2>&1 || continue
		pkill -KILL -u "$u" 2>/dev/null || true
		sb_wait_for 5 eval "! pgrep -u '$u' >/dev/null" || true
		userdel -r "$u" >/dev/null 2>&1 || userdel -f "$u" >/dev/null 2>&1 || true
	done
	groupdel "$SB_GROUP" >/dev/null 2>&1 || true
}

# Make the suite's directory tree: $SB_DIR/{etc,etc/sessions.d,run,state,log,bin}.
sb_tree() {
	SB_DIR=$(mktemp -d "/tmp/$SB_LANE.XXXXXX")
	chmod 755 "$SB_DIR"
	_sb_record "dir $SB_DIR"
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
sb_start() { _sb_untraced _sb_start "$@"; }
_sb_start() {
	local i old
	# A socket left by a killed daemon is not the new one: wait for a new file.
	old=$(stat -c '%i %z' "$SB_SOCK" 2>/dev/null) || old=none
	# shellcheck disable=SC2086 # SB_DAEMON_PREFIX: words of a wrapper command, e.g. setpriv
	sb_bg ${SB_DAEMON_PREFIX:-} "$SB_BUILD/shimbridged" -c "$SB_CONFIG" "$@" </dev/null >>"$SB_DIR/log/daemon.log" 2>&1
	SB_PID=$!
	export SB_PID
	for i in $(seq 1 100); do
		[ -S "$SB_SOCK" ] && [ "$(stat -c '%i %z' "$SB_SOCK" 2>/dev/null)" != "$old" ] && return 0
		kill -0 "$SB_PID" 2>/dev/null || { cat "$SB_DIR/log/daemon.log" >&2; return 1; }
		sleep 0.05
	done
	echo "daemon did not create its socket" >&2
	return 1
}

# The capability bounding set of systemd/shimbridge.service (CapabilityBoundingSet=)
# as setpriv's --bounding-set argument: -all,+setuid,+setgid,... Leave out the
# capabilities named in $1 (comma-separated, e.g. sys_admin) for negative controls.
sb_unit_caps() {
	local c out=-all
	for c in $(sed -n 's/^CapabilityBoundingSet=//p' "$SB_ROOT/systemd/shimbridge.service"); do
		c=${c#CAP_}
		c=${c,,}
		[[ ",${1:-}," == *",$c,"* ]] || out+=",+$c"
	done
	echo "$out"
}

# Stop the daemon, whether or not it is a child of this shell (a test may stop the
# daemon its suite's setup started); fail if it died before being asked, did not stop
# within 10 s, or left a sanitizer report.
sb_stop() { _sb_untraced _sb_stop "$@"; }
_sb_stop() {
	local pid=${SB_PID:-} i rc=0
	[ -n "$pid" ] || return 0
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "daemon was not running at teardown:" >&2
		cat "$SB_DIR/log/daemon.log" >&2
		return 1
	fi
	kill -TERM "$pid"
	for i in $(seq 200); do
		[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = "" ] && break
		[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && break
		sleep 0.05
	done
	wait "$pid" 2>/dev/null || rc=$?
	[ "$rc" -eq 127 ] && rc=0	# not our child: its status is not ours to read
	if kill -0 "$pid" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$pid/stat")" != Z ]; then
		echo "daemon did not stop within 10 s" >&2
		kill -KILL "$pid"
		return 1
	fi
	SB_PID=
	if grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$SB_DIR/log/daemon.log"; then
		cat "$SB_DIR/log/daemon.log" >&2
		return 1
	fi
	return "$rc"
}

# REPLY: the home directory of user $1 from /etc/passwd (builtins only: `as` runs
# thousands of times a suite).
sb_home() { _sb_untraced _sb_home "$@"; }
_sb_home() {
	local name home
	REPLY=
	while IFS=: read -r name _ _ _ _ home _; do
		[ "$name" = "$1" ] && { REPLY=$home; return 0; }
	done </etc/passwd
	return 0
}

# Run a command as a user with a clean environment and the sandbox PATH.
#   as USER CMD...   (cwd: the user's home)
as() {
	local u=$1
	shift
	local home
	sb_home "$u"
	home=$REPLY
	(cd "$home" 2>/dev/null || cd /tmp; exec runuser -u "$u" -- env -i HOME="$home" \
		PATH="$SB_DIR/bin:/usr/bin:/bin" SHIMBRIDGE_SOCKET="$SB_SOCK" LANG=C.UTF-8 "$@")
}

# Last audit record matching a jq-less grep pattern.
sb_audit_last() {
	grep -- "$1" "$SB_AUDIT" | tail -n 1
}

# Count of open fds of the daemon. (From /proc with builtins: monitoring loops call it
# several times a second, and ps reads every process.)
sb_daemon_fds() { _sb_untraced _sb_daemon_fds "$@"; }
_sb_daemon_fds() {
	local n=0 f p t st comm w=0
	local -a kids=() more
	for f in "/proc/$SB_PID/fd/"*; do
		if [ -e "$f" ] || [ -L "$f" ]; then n=$((n + 1)); fi
	done
	# Less one control socket per jail waiting in the pool (docs/JAIL.md): the
	# daemon's children that are a shimbridge-jail without a child of their own.
	# (These files end without a newline: read then fails but fills its variables.)
	for t in "/proc/$SB_PID/task/"*/children; do
		more=()
		{ read -r -a more <"$t" || :; } 2>/dev/null
		kids+=("${more[@]}")
	done
	for p in "${kids[@]}"; do
		comm= st=
		{ read -r comm <"/proc/$p/comm" || :; read -r st <"/proc/$p/stat" || :; } 2>/dev/null
		st=${st##*) }
		[ "$comm" = shimbridge-jail ] && [ -n "$st" ] && [ "${st%% *}" != Z ] || continue
		_sb_has_children "$p" || w=$((w + 1))
	done
	echo $((n - w))
}

# sb_daemon_fds once it has read the same three times 100 ms apart (5 s at most): a
# baseline. While the pool builds a jail the daemon holds its control socket before
# the jail shows as such, so a single reading may count one descriptor too many.
sb_daemon_fds_settled() { _sb_untraced _sb_daemon_fds_settled "$@"; }
_sb_daemon_fds_settled() {
	local a b c i
	a=$(sb_daemon_fds)
	b=-1 c=-2
	for i in $(seq 50); do
		sleep 0.1
		c=$b b=$a
		a=$(sb_daemon_fds)
		[ "$a" = "$b" ] && [ "$b" = "$c" ] && break
	done
	echo "$a"
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
sb_fakegh_run() { _sb_untraced _sb_fakegh_run "$@"; }
_sb_fakegh_run() {
	local dir=$1 token=$2 pid _
	shift 2
	mkdir -p "$dir"
	chmod 700 "$dir"
	sh "$SB_FIXTURES/mkcerts.sh" "$SB_DIR/certs" || return 1
	chmod 755 "$SB_DIR/certs"
	(umask 077 && printf '%s\n' "$token" >"$dir/token" && : >"$dir/requests.log")
	sb_bg "$PY" "$SB_FIXTURES/fakegh.py" --cert "$SB_DIR/certs/server.pem" \
		--key "$SB_DIR/certs/server.key" --token-file "$dir/token" \
		--port-file "$dir/port" --log "$dir/requests.log" "$@" \
		</dev/null >"$dir/server.out" 2>"$dir/server.err"
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
sb_fakegh_kill() { _sb_untraced _sb_fakegh_kill "$@"; }
_sb_fakegh_kill() {
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
	sb_home "$u"
	home=$REPLY
	case $d in /*) ;; *) d=$home/$d ;; esac
	(cd "$d" && exec runuser -u "$u" -- env -i HOME="$home" \
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

SB_OUTSIDER=$SB_LANE-eve

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
	sb_home "$u"
	home=$REPLY
	(cd "$home" 2>/dev/null || cd /tmp; exec timeout -k 5 "$t" runuser -u "$u" -- env -i \
		HOME="$home" PATH="$SB_DIR/bin:/usr/bin:/bin" SHIMBRIDGE_SOCKET="$SB_SOCK" \
		LANG=C.UTF-8 "$@")
}

# sb_kill_bg PID: end a background `as_t ... &` job: SIGTERM to its timeout (the
# job's child), which passes it on to the command; then reap the job.
sb_kill_bg() {
	pkill -TERM -P "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# sb_gate FIFO: make FIFO and hold it open (fd GATE_FD) for a call to take as its stdin:
# a `read` there waits until sb_gate_release (or the teardown's sb_reap) closes it,
# however slow the machine. Opened read-write, so neither side waits for the other to
# open it; a call started in the background must not keep it (`{GATE_FD}>&-`; sb_bg
# closes it in its child), or its stdin never ends.
sb_gate() {
	rm -f "$1"
	mkfifo -m 600 "$1"
	exec {GATE_FD}<>"$1"
}

# sb_gate_release: let the call sb_gate holds go (its stdin ends).
sb_gate_release() {
	[ -z "${GATE_FD:-}" ] || exec {GATE_FD}>&-
	GATE_FD=
}

# Retry CMD... every 50 ms until it succeeds or SECONDS (may be fractional) pass. (Its
# counter has a name no caller uses: an `eval` CMD sees the caller's variables.)
sb_wait_for() { _sb_untraced _sb_wait_for "$@"; }
_sb_wait_for() {
	local _sb_wait_left _sb_wait_i=${1%%.*} _sb_wait_f=00
	# SECONDS * 20 polls, truncated (as awk's "%d" did), without a process for it.
	[[ $1 == *.* ]] && _sb_wait_f=${1#*.}00
	_sb_wait_left=$((10#${_sb_wait_i:-0} * 20 + 10#${_sb_wait_f:0:1} * 2 + 10#${_sb_wait_f:1:1} / 5))
	shift
	while ! "$@"; do
		[ "$_sb_wait_left" -gt 0 ] || return 1
		_sb_wait_left=$((_sb_wait_left - 1))
		sleep 0.05
	done
}

# Processes of the users in $1 (comma-separated) that belong to a call: all of them
# but the jails waiting in the daemon's pool (docs/JAIL.md), which are a live
# shimbridge-jail with no child. Zombies count (a zombie of the daemon is a reaping
# bug) except those of PID 1: a container's PID 1 may never reap what a killed
# daemon left to it. One "pid stat ppid comm" line each.
sb_runner_procs() { _sb_untraced _sb_runner_procs "$@"; }
_sb_runner_procs() {
	local line pid stat ppid comm
	while IFS= read -r line; do
		read -r pid stat ppid comm <<<"$line"
		[[ $stat == Z* ]] && [ "$ppid" = 1 ] && continue
		[[ $stat != Z* ]] && [ "$comm" = shimbridge-jail ] && ! _sb_has_children "$pid" &&
			continue
		printf '%s\n' "$line"
	done < <(ps -u "$1" -o pid=,stat=,ppid=,comm= 2>/dev/null)
	return 0
}

# Whether process $1 has a child (from /proc: these files end without a newline, so
# read fails but fills its variable).
_sb_has_children() {
	local t f
	for t in "/proc/$1/task/"*/children; do
		f=
		{ read -r f <"$t" || :; } 2>/dev/null
		[ -z "$f" ] || return 0
	done
	return 1
}

# Whether no process of the runner user is left of any call.
sb_no_runner() {
	[ -z "$(sb_runner_procs "$SB_RUNNER")" ]
}

# PATH as the running daemon ($SB_PID) sees it: its scratch directories (state_dir/run)
# are on a tmpfs in a mount namespace of its own (limits.scratch_tmpfs), which the
# host's namespace does not show. PATH itself once the daemon is gone.
sb_dview() {
	if [ -n "${SB_PID:-}" ] && [ -d "/proc/$SB_PID/root/" ]; then
		printf '/proc/%s/root%s\n' "$SB_PID" "$1"
	else
		printf '%s\n' "$1"
	fi
}

# Entries of the scratch parent $1 (state_dir/run, as the daemon sees it) that no jail
# waiting in the pool for the users in $2 holds (each waiting jail has its own scratch
# dir bound in).
sb_scratch_leftovers() { _sb_untraced _sb_scratch_leftovers "$@"; }
_sb_scratch_leftovers() {
	local held=" " p d view
	view=$(sb_dview "$1")
	for p in $(sb_pool_pids "$2"); do
		held+="$(awk '{print $5}' "/proc/$p/mountinfo" 2>/dev/null | tr '\n' ' ')"
	done
	for d in "$view"/* "$view"/.[!.]*; do
		[ -e "$d" ] || continue
		d=$1/${d##*/}
		[[ $held == *" $d "* ]] || echo "$d"
	done
	return 0
}

# The jails waiting in the pool for the users in $1 (comma-separated): their pids.
sb_pool_pids() { _sb_untraced _sb_pool_pids "$@"; }
_sb_pool_pids() {
	local pid stat comm
	while read -r pid stat comm; do
		[[ $stat != Z* ]] && [ "$comm" = shimbridge-jail ] && ! _sb_has_children "$pid" &&
			printf '%s\n' "$pid"
	done < <(ps -u "$1" -o pid=,stat=,comm= 2>/dev/null)
	return 0
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
