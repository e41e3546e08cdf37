#!/usr/bin/env bats
# Core integration suite: the real shimbridged and the real shim, run as real,
# separate users (lib.bash) on a private socket. One daemon serves the whole file;
# the tests that stop, reload or reconfigure it put it back as they found it.
#
#   bats tests/integration/core.bats                      # normal build
#   SB_BUILD=build/san bats tests/integration/core.bats   # ASan/UBSan build
#
# Every test ends with a check (teardown) that no process of the runner is left
# and that the daemon is still alive.

bats_require_minimum_version 1.5.0
load lib

# A runner of our own: a starting daemon SIGKILLs every process of its runner, so
# suites sharing one runner (run side by side) would kill each other's children.
SB_RUNNER=$SB_LANE-runner-core
BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

# The config this suite runs with (rewritten by the reload tests, then restored).
core_config() {
	sb_config <<EOF
{ $(sb_config_head)
  "limits": {"max_per_session": 512, "max_connections": 2000},
  "secrets": {"tok": {"source": "file", "path": "$SB_DIR/etc/tok"}},
  "tools": {
    "sh": {"path": "/bin/sh", "timeout": 60, "secrets": {"MY_TOKEN": "tok"},
           "rules": [{"deny": ["-c", "rm *"], "reason": "removing files is not allowed here"},
                     {"allow": ["-c", "**"]}]},
    "slow": {"path": "/bin/sh", "timeout": 2, "rules": [{"allow": ["-c", "**"]}]},
    "report": {"path": "$SB_DIR/tools/report.sh", "rules": [{"allow": []}],
               "secrets": {"MY_TOKEN": "tok"}},
    "detach": {"path": "$SB_DIR/tools/detach.sh", "timeout": 20, "rules": [{"allow": ["*"]}]},
    "notgranted": {"path": "/bin/true", "rules": [{"allow": ["**"]}]}
  }
}
EOF
}

# Start the daemon and record its pid for the tests (each runs in its own process).
core_start() {
	sb_start 3>&-
	sb_keep "$SB_PID"
	echo "$SB_PID" >"$SB_DIR/daemon.pid"
}

# Stop the daemon whether or not it is a child of this shell; fail on sanitizer reports.
core_stop() {
	sb_stop
}

setup_file() {
	sb_build_resolve
	sb_users
	sb_outsider
	sb_tree
	export T=$SB_DIR/t
	mkdir -p "$T" "$SB_DIR/tools"
	install -m 0755 "$SB_FIXTURES"/tools/{detach,report}.sh "$SB_DIR/tools/"
	SECRET="$SB_LANE-secret-$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
	export SECRET
	(umask 077 && printf '%s\n' "$SECRET" >"$SB_DIR/etc/tok")
	core_config
	sb_session alice "$SB_ALICE" '["sh", "slow", "report", "detach"]'
	sb_session eve "$SB_OUTSIDER" '["sh"]'
	sb_shim_links sh slow report detach nope notgranted
	core_start
}

teardown_file() {
	local rc=0
	SB_PID=$(cat "$SB_DIR/daemon.pid" 2>/dev/null)
	core_stop || rc=$?
	pkill -KILL -u "$SB_RUNNER" 2>/dev/null || true
	userdel "$SB_RUNNER" 2>/dev/null || true
	sb_outsider_remove
	[ "$rc" -ne 0 ] || rm -rf "$SB_DIR"
	sb_reap_suite
	return "$rc"
}

setup() {
	SB_PID=$(cat "$SB_DIR/daemon.pid")
	export SB_PID
}

# After every test: nothing of the runner left, the daemon alive.
teardown() {
	local rc=0
	# A held call the failed test did not release ends now.
	sb_gate_release
	if [ -e "$T/config.orig" ]; then
		echo "the test left the config changed; restoring it" >&2
		restore_config || rc=1
	fi
	if ! sb_wait_for 3 sb_no_runner; then
		echo "runner processes outlived the test:" >&2
		ps -o pid,ppid,pgid,sid,stat,etime,args -u "$SB_RUNNER" >&2 || true
		pkill -KILL -u "$SB_RUNNER" || true
		rc=1
	elif ! kill -0 "$SB_PID" 2>/dev/null; then
		echo "the daemon died:" >&2
		tail -n 30 "$SB_DIR/log/daemon.log" >&2
		rc=1
	fi
	sb_reap
	return "$rc"
}

# Put back the config (and alice's drop-in) a test saved to $T/*.orig, and reload.
restore_config() {
	local line
	[ ! -e "$T/alice.orig" ] || mv "$T/alice.orig" "$SB_DIR/etc/sessions.d/alice.json"
	mv "$T/config.orig" "$SB_CONFIG"
	line=$(sb_reload)
	[[ $line == *'"ok":true'* ]] || { echo "reload after restoring the config: $line" >&2; return 1; }
}

# held OUT ERR MARK [SCRIPT]: run `sh -c "SCRIPT read _; : MARK"` as alice in the
# background, its stdin a FIFO the test holds open (sb_gate), its harness HELD_PID.
# The call stays in flight until `release` closes the FIFO, however slow the machine.
held() {
	sb_gate "$T/gate"
	as_t 60 "$SB_ALICE" sh -c "${4:-} read _; : $3" <"$T/gate" >"$1" 2>"$2" 3>&- {GATE_FD}>&- &
	HELD_PID=$!
}

# release: let the held call end; its harness's status.
release() {
	sb_gate_release
	wait "$HELD_PID"
}

# The first pid of USER whose command line holds MARK, waiting up to 15 s for it.
pid_of() {
	sb_wait_for 15 eval "pgrep -u '$1' -f -- '$2' >/dev/null" || { echo "no $1 process with $2" >&2; return 1; }
	sb_pids "$1" "$2" | head -n 1
}

# Assert that CMD... fails (a bare `! cmd` never fails a bats test under set -e).
refute() {
	if "$@"; then
		echo "unexpectedly succeeded: $*" >&2
		return 1
	fi
}

# Milliseconds since the epoch.
now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

@test "allowed command: stdout, stderr and exit codes 0, 1, 42 pass through; audited" {
	local m=mk-ok-$RANDOM
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c "echo hi; echo oops >&2; : $m"
	[ "$status" -eq 0 ]
	[ "$output" = hi ]
	[ "$stderr" = oops ]
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c 'exit 1'
	[ "$status" -eq 1 ]
	[ -z "$output" ]
	[ -z "$stderr" ]
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c "exit 42; : $m"
	[ "$status" -eq 42 ]
	[ -z "$output" ]
	[ -z "$stderr" ]
	sb_audit_grep "r['event'] == 'allowed' and r['argv'] == ['-c', 'exit 42; : $m'] and
		r['session'] == 'alice' and r['rule'] == 'tools.sh.rules[1]'"
	sb_audit_grep "r['event'] == 'done' and r['argv'] == ['-c', 'exit 42; : $m'] and r['exit'] == 42"
	sb_audit_grep "r['event'] == 'done' and r['argv'] == ['-c', 'echo hi; echo oops >&2; : $m'] and
		r['exit'] == 0 and r['bytes_out'] == 8"
}

@test "death by signal: the shim dies of the child's signal (TERM 143, SEGV 139), no core file" {
	local pattern home
	pattern=$(cat /proc/sys/kernel/core_pattern)
	home=$(getent passwd "$SB_ALICE" | cut -d: -f6)
	touch "$T/stamp"
	# runuser's pam_limits sets the soft core limit to 0: raise it in the sandbox
	# user's own process, which then execs the shim (or the control program).
	sig_as() { as_t 30 "$SB_ALICE" /bin/sh -c 'ulimit -c unlimited && exec "$@"' sig_as "$@"; }

	run --separate-stderr sig_as sh -c 'kill -TERM $$'
	[ "$status" -eq 143 ]
	[ "$stderr" = Terminated ]	# runuser saw its child (the shim) die of SIGTERM
	run --separate-stderr sig_as sh -c 'kill -SEGV $$'
	[ "$status" -eq 139 ]
	[ "$stderr" = "Segmentation fault" ]	# and not "(core dumped)"
	# The raw wait status, seen by a parent running as the sandbox user.
	run --separate-stderr as_t 30 "$SB_ALICE" "$PY" -c \
		'import subprocess, sys; print(subprocess.run(sys.argv[1:]).returncode)' sh -c 'kill -SEGV $$'
	[ "$status" -eq 0 ]
	[ "$output" = -11 ]
	# The audit records the signal by name.
	sb_audit_grep "r['event'] == 'done' and r['argv'] == ['-c', 'kill -SEGV \$\$'] and r['signal'] == 'SEGV'"

	if [[ $pattern == "|"* ]]; then
		echo "# core_pattern is a pipe ($pattern): core file check skipped" >&3
		return 0
	fi
	# No core anywhere a core could land: the shim's cwd (home), the daemon's dirs.
	# (Only the sandbox user's and the runner's: other lanes' suites write to /tmp too,
	# and remove what they wrote while find walks it: that is no finding.)
	run --separate-stderr find "$home" "$SB_DIR" /tmp -ignore_readdir_race -maxdepth 3 \
		-name 'core*' -newer "$T/stamp" \( -user "$SB_ALICE" -o -user "$SB_RUNNER" \)
	[ -z "$output" ] || { echo "core files: $output" >&2; false; }
	# Control: the same setup does dump a core for a plain program, so the check can fail.
	run sig_as /bin/sh -c 'kill -SEGV $$'
	[ "$status" -eq 139 ]
	[[ $output == *"core dumped"* ]]
	run find "$home" -maxdepth 1 -name 'core*' -newer "$T/stamp"
	[ -n "$output" ]
	rm -f "$home"/core*
}

@test "denied command: exit 126, one structured line naming the rule and what the session may run; audited" {
	local m=mk-deny-$RANDOM
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c "rm -rf /tmp/$m"
	[ "$status" -eq 126 ]
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "shimbridge: refused: sh -c rm -rf /tmp/$m: not allowed for this session (removing files is not allowed here; rule tools.sh.rules[0]); this session may run: sh -c [ARGS] | slow -c [ARGS] | report | detach "*". See \`shimbridge list\`, or ask the operator to allow it" ]]
	sb_audit_grep "r['event'] == 'denied' and r['argv'] == ['-c', 'rm -rf /tmp/$m'] and
		r['rule'] == 'tools.sh.rules[0]' and r['reason'] == 'removing files is not allowed here'"
	refute sb_audit_grep "r['event'] == 'allowed' and r['argv'] == ['-c', 'rm -rf /tmp/$m']"

	# Nothing matches: the default rule refuses.
	run --separate-stderr as_t 30 "$SB_ALICE" sh -s "$m"
	[ "$status" -eq 126 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == *"(no rule allows it; everything not allowed is refused; rule default)"* ]]
	sb_audit_grep "r['event'] == 'denied' and r['argv'] == ['-s', '$m'] and r['rule'] == 'default'"
}

@test "unknown tool: exit 127 for a tool not configured and one not granted; audited" {
	local t
	for t in nope notgranted; do
		run -127 --separate-stderr as_t 30 "$SB_ALICE" "$t" --flag
		[ "$status" -eq 127 ]
		[ -z "$output" ]
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ $stderr == "shimbridge: refused: $t: it is not available in this sandbox session (not granted by the shimbridge policy); this session may run: sh -c [ARGS] | "*". See \`shimbridge list\`, or ask the operator to grant it" ]]
		sb_audit_grep "r['event'] == 'denied' and r['tool'] == '$t' and
			r['reason'] == 'tool not granted to the session' and r['argv'] == ['--flag']"
	done
}

@test "unknown uid (in the socket group, no session): exit 120 with a clear message; audited refused" {
	local uid
	uid=$(id -u "$SB_MALLORY")
	run --separate-stderr as_t 30 "$SB_MALLORY" sh -c 'echo should-not-run'
	[ "$status" -eq 120 ]
	[ -z "$output" ]
	[ "$stderr" = "sh: this account is not a shimbridge sandbox session, so the bridge runs nothing for it. Ask the operator to add a session for this user (shimbridge session add)." ]
	sb_audit_grep "r['event'] == 'refused' and r['uid'] == $uid and r['reason'] == 'uid has no session'"
	refute sb_audit_grep "r['uid'] == $uid and r['event'] != 'refused'"
}

@test "a user outside the socket group cannot reach the bridge (exit 122), even with a session" {
	local uid
	uid=$(id -u "$SB_OUTSIDER")
	run --separate-stderr as_t 30 "$SB_OUTSIDER" sh -c 'echo should-not-run'
	[ "$status" -eq 122 ]
	[ -z "$output" ]
	[[ $stderr == "sh: cannot reach the shimbridge bridge at $SB_SOCK (Permission denied). sh runs on the host through that bridge;"* ]]
	refute sb_audit_grep "r['uid'] == $uid"
}

@test "daemon not running: exit 122 (socket gone, or stale after a crash); a restart serves again" {
	local stale=$SB_DIR/run/stale.sock
	core_stop
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c 'echo x'
	[ "$status" -eq 122 ]
	[[ $stderr == "sh: cannot reach the shimbridge bridge at $SB_SOCK (No such file or directory)."* ]]
	# A socket file nobody listens on, as a SIGKILLed daemon leaves behind.
	"$PY" -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$stale"
	chmod 666 "$stale"
	SB_SOCK=$stale run --separate-stderr as_t 30 "$SB_ALICE" sh -c 'echo x'
	[ "$status" -eq 122 ]
	[[ $stderr == "sh: cannot reach the shimbridge bridge at $stale (Connection refused)."* ]]
	rm -f "$stale"
	core_start
	run as_t 30 "$SB_ALICE" sh -c 'echo back'
	[ "$status" -eq 0 ]
	[ "$output" = back ]
}

@test "stdin is streamed: 50 MB through wc -c; ordered data keeps its order" {
	local out want
	out=$(head -c 50000000 /dev/zero | as_t 60 "$SB_ALICE" sh -c 'wc -c')
	[ "$out" = 50000000 ]
	want=$(seq 1 5000000 | sha256sum)
	out=$(seq 1 5000000 | as_t 60 "$SB_ALICE" sh -c 'sha256sum')
	[ "$out" = "$want" ]
	# Both directions at once (backpressure on both legs, no deadlock).
	out=$(seq 1 5000000 | as_t 60 "$SB_ALICE" sh -c 'cat' | sha256sum)
	[ "$out" = "$want" ]
	# stdin that is never read does not block the exit.
	out=$(seq 1 3000000 | as_t 30 "$SB_ALICE" sh -c 'echo early')
	[ "$out" = early ]
}

@test "stdout: 100 MB (20 MB under ASan) arrive intact, in order" {
	# The sanitized daemon relays the same code paths ~5x slower: a fifth is enough there.
	local n=100000000
	ldd "$SB_BUILD/shimbridged" | grep -q libasan && n=20000000
	rm -f "$T/rc"
	cmp <(as_t 60 "$SB_ALICE" sh -c 'head -c "$1" /dev/zero | tr "\0" a' _ "$n"; echo $? >"$T/rc") \
		<(head -c "$n" /dev/zero | tr '\0' a)
	sb_wait_for 5 test -s "$T/rc"
	[ "$(cat "$T/rc")" = 0 ]
	rm -f "$T/rc"
	# Distinct lines: a lost, repeated or reordered chunk changes the bytes.
	cmp <(as_t 60 "$SB_ALICE" sh -c 'seq 1 5000000'; echo $? >"$T/rc") <(seq 1 5000000)
	sb_wait_for 5 test -s "$T/rc"
	[ "$(cat "$T/rc")" = 0 ]
}

@test "stdout: a child that exits while its reader is slow still delivers every byte" {
	# The child writes more than the daemon buffers before pausing, then exits while
	# its reader waits: the tail sits in the pipe, unread, longer than kill_grace + 2 s.
	local out
	out=$(as_t 60 "$SB_ALICE" sh -c 'head -c 500000 /dev/zero | tr "\0" b' | (sleep 7; wc -c))
	[ "$out" -eq 500000 ]
	refute grep -q "output pipes still open" "$SB_DIR/log/daemon.log"
}

@test "secret: injected into the child, redacted in output, absent from the shim, child environ unreadable" {
	local m=mk-secret-$RANDOM child shim
	held "$T/secret.out" "$T/secret.err" "$m" 'printf %s "$MY_TOKEN" | sha256sum; echo "token=$MY_TOKEN";'
	child=$(pid_of "$SB_RUNNER" "$m")
	shim=$(pid_of "$SB_ALICE" "$m")
	# Root sees the secret in the child's environment: the pid is the right one.
	tr '\0' '\n' <"/proc/$child/environ" | grep -qxF "MY_TOKEN=$SECRET"
	# The shim's environment holds neither the name nor the value.
	grep -qx "SHIMBRIDGE_SOCKET=$SB_SOCK" <(tr '\0' '\n' <"/proc/$shim/environ")
	refute grep -q -e MY_TOKEN -e "$SECRET" <(tr '\0' '\n' <"/proc/$shim/environ")
	# The sandbox user cannot read the child's environment (nor its memory).
	run as_t 10 "$SB_ALICE" cat "/proc/$child/environ"
	[ "$status" -ne 0 ]
	[[ $output != *"$SECRET"* ]]
	run as_t 10 "$SB_ALICE" head -c 1 "/proc/$child/mem"
	[ "$status" -ne 0 ]
	release
	[ "$(sed -n 1p "$T/secret.out")" = "$(printf %s "$SECRET" | sha256sum)" ]
	[ "$(sed -n 2p "$T/secret.out")" = "token=[REDACTED]" ]
	[ ! -s "$T/secret.err" ]
	refute grep -qF "$SECRET" "$SB_AUDIT" "$SB_DIR/log/daemon.log"
}

@test "the child: runner uid, no supplementary groups, NoNewPrivs, fds 0-2 only, private scratch dir removed after" {
	local m=mk-box-$RANDOM child cwd ruid rgid
	ruid=$(id -u "$SB_RUNNER")
	rgid=$(id -g "$SB_RUNNER")
	held /dev/null /dev/null "$m"
	child=$(pid_of "$SB_RUNNER" "$m")
	grep -qx "Uid:	$ruid	$ruid	$ruid	$ruid" "/proc/$child/status"
	grep -qx "Gid:	$rgid	$rgid	$rgid	$rgid" "/proc/$child/status"
	[ "$(awk '/^Groups:/ {print NF}' "/proc/$child/status")" -eq 1 ]
	grep -qx "NoNewPrivs:	1" "/proc/$child/status"
	[ "$(ls "/proc/$child/fd" | sort -n | tr '\n' ' ')" = "0 1 2 " ]
	[[ $(readlink "/proc/$child/fd/0") == pipe:* ]]
	[[ $(readlink "/proc/$child/fd/1") == pipe:* ]]
	[[ $(readlink "/proc/$child/fd/2") == pipe:* ]]
	# Its own session and process group (so the group can be killed as a whole).
	[ "$(ps -o sid= -p "$child" | tr -d ' ')" = "$child" ]
	[ "$(ps -o pgid= -p "$child" | tr -d ' ')" = "$child" ]
	cwd=$(readlink "/proc/$child/cwd")
	[[ $cwd == "$SB_DIR/state/run/"* ]]
	[ "$(stat -L -c '%U %a' "/proc/$child/cwd")" = "$SB_RUNNER 700" ]
	grep -qE '^Max core file size +0 +0 +bytes' "/proc/$child/limits"
	release
	sb_wait_for 5 test ! -e "$(sb_dview "$cwd")"

	# The same facts as the child sees them.
	run --separate-stderr as_t 30 "$SB_ALICE" report
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "uid $ruid gid $rgid groups $rgid" ]
	[ "${lines[1]}" = "core 0 0" ]
	[[ ${lines[2]} == "cwd $SB_DIR/state/run/"* ]]
	[ "${lines[3]}" = "home ${lines[2]#cwd }" ]
	[ "${lines[4]}" = "fds 0 1 2" ]
	[ "${lines[5]}" = "NoNewPrivs: 1" ]
	sb_wait_for 5 test ! -e "$(sb_dview "${lines[2]#cwd }")"
	# Nothing left behind in the scratch parent (but the directories of the jails
	# built in advance for the next calls, docs/JAIL.md).
	# (A jail the pool is still building holds its directory before it shows as held.)
	sb_wait_for 5 eval '[ -z "$(sb_scratch_leftovers "$SB_DIR/state/run" "$SB_RUNNER")" ]' ||
		{ sb_scratch_leftovers "$SB_DIR/state/run" "$SB_RUNNER" >&2; false; }
}

@test "scratch directories: in the daemon's own tmpfs, unseen by the host; limits.scratch_tmpfs 0 keeps them on disk" {
	local m=mk-tmpfs-$RANDOM child cwd rc=0
	grep -q "scratch directories in memory (tmpfs of 1024 MiB on $SB_DIR/state/run)" \
	    "$SB_DIR/log/daemon.log"
	held /dev/null /dev/null "$m"
	child=$(pid_of "$SB_RUNNER" "$m")
	cwd=$(readlink "/proc/$child/cwd")
	[[ $cwd == "$SB_DIR/state/run/"* ]]
	[ "$(stat -f -L -c %T "/proc/$child/cwd")" = tmpfs ]
	[ -d "$(sb_dview "$cwd")" ]
	[ ! -e "$cwd" ]
	release
	# On disk: the host sees the call's directory while it runs, and not after.
	local n
	core_stop
	cp -p "$SB_CONFIG" "$SB_DIR/etc/disk.json"
	sb_json_edit "$SB_DIR/etc/disk.json" 'c.setdefault("limits", {})["scratch_tmpfs"] = 0'
	n=$(wc -l <"$SB_DIR/log/daemon.log")
	SB_CONFIG=$SB_DIR/etc/disk.json core_start
	m=mk-disk-$RANDOM
	held /dev/null /dev/null "$m"
	child=$(pid_of "$SB_RUNNER" "$m")
	cwd=$(readlink "/proc/$child/cwd")
	[ -d "$cwd" ] && [ "$(stat -c '%U %a' "$cwd")" = "$SB_RUNNER 700" ] || rc=1
	release
	sb_wait_for 2 test ! -e "$cwd" || rc=1
	tail -n +"$((n + 1))" "$SB_DIR/log/daemon.log" | grep -q "scratch directories in memory" && rc=1
	core_stop
	core_start
	[ "$rc" -eq 0 ]
}

@test "timeout kills the whole group: exit 124 after ~2 s, no runner process left" {
	local t0 t1 m=mk-to-$RANDOM
	t0=$(now_ms)
	run --separate-stderr as_t 30 "$SB_ALICE" slow -c "sleep 100 & sleep 100; wait; : $m"
	t1=$(now_ms)
	[ "$status" -eq 124 ]
	[[ $stderr == "slow: slow was stopped after 2 seconds: it reached its time limit on the bridge."* ]]
	[ $((t1 - t0)) -ge 1900 ]
	# (Well short of the tool's own 100 s; the rest is a loaded machine's slack.)
	[ $((t1 - t0)) -le 8000 ]
	sb_wait_for 1 sb_no_runner
	sb_audit_grep "r['event'] == 'done' and r.get('argv') and r['argv'][-1].endswith('$m') and r['killed'] == 'timeout'"
}

@test "timeout: a child that ignores SIGTERM is SIGKILLed after the grace period" {
	local t0 t1
	t0=$(now_ms)
	run --separate-stderr as_t 30 "$SB_ALICE" slow -c 'trap "" TERM; sleep 100 & sleep 100; wait'
	t1=$(now_ms)
	[ "$status" -eq 124 ]
	[[ $stderr == "slow: slow was stopped after "* ]]
	# 2 s limit + 2 s kill_grace (the default)
	[ $((t1 - t0)) -ge 3900 ]
	[ $((t1 - t0)) -le 10000 ]
	sb_wait_for 1 sb_no_runner
}

@test "killing the shim mid-run kills the child's group within 1 s; audited peer-gone" {
	local m=mk-kill-$RANDOM shim
	as_t 30 "$SB_ALICE" sh -c "sleep 100 & sleep 100; : $m" >/dev/null 2>&1 3>&- &
	local bg=$!
	pid_of "$SB_RUNNER" "$m" >/dev/null
	sb_wait_for 5 eval "[ \$(pgrep -u $SB_RUNNER | wc -l) -ge 3 ]"
	shim=$(pid_of "$SB_ALICE" "$m")
	kill -KILL "$shim"
	sb_wait_for 1 sb_no_runner
	wait "$bg" || true
	sb_wait_for 2 sb_audit_grep "r['event'] == 'peer-gone' and r.get('argv') and r['argv'][-1].endswith('$m')"
}

@test "a detached grandchild (setsid) does not outlive its request" {
	local t0 t1
	# It closes stdio: the tool exits at once and the orphan is killed.
	run --separate-stderr as_t 30 "$SB_ALICE" detach quiet
	[ "$status" -eq 0 ]
	[[ $output == "grandchild "* ]]
	sb_wait_for 1 sb_no_runner
	# (It dies with the jail's PID namespace when the tool exits. The pid it printed is
	# the jail's own, so only "no process of the runner" says it is gone.)

	# It keeps the output pipes open: the request still ends promptly.
	t0=$(now_ms)
	run --separate-stderr as_t 30 "$SB_ALICE" detach loud
	t1=$(now_ms)
	[ "$status" -eq 0 ]
	[[ $output == "grandchild "* ]]
	[ $((t1 - t0)) -le 5000 ]
	sb_wait_for 1 sb_no_runner

	# The tool is still running when the shim is killed.
	as_t 30 "$SB_ALICE" detach stay >"$T/detach.out" 2>&1 3>&- &
	local bg=$!
	sb_wait_for 5 grep -q grandchild "$T/detach.out"
	# The tool's sleep and the grandchild's both run (the tool prints before its own
	# sleep starts).
	sb_wait_for 5 eval '[ "$(pgrep -u "$SB_RUNNER" -f "^sleep 100" | wc -l)" -ge 2 ]'
	kill -KILL "$(pid_of "$SB_ALICE" 'detach stay')"
	sb_wait_for 1 sb_no_runner
	wait "$bg" || true
}

@test "SIGHUP with a good config: a new tool appears, a request in flight completes" {
	local m=mk-hup-$RANDOM line
	cp -p "$SB_CONFIG" "$T/config.orig"
	cp -p "$SB_DIR/etc/sessions.d/alice.json" "$T/alice.orig"
	sb_shim_links when
	run -127 --separate-stderr as_t 30 "$SB_ALICE" when +%Y

	# The request in flight (held) is still running across the reload.
	held "$T/inflight.out" "$T/inflight.err" "$m" 'echo survived;'
	pid_of "$SB_RUNNER" "$m" >/dev/null
	sb_json_edit "$SB_CONFIG" 'c["tools"]["when"] = {"path": "/bin/date", "rules": [{"allow": ["+%Y"]}]}'
	sb_json_edit "$SB_DIR/etc/sessions.d/alice.json" 'c["tools"].append("when")'
	line=$(sb_reload)
	[[ $line == *'"ok":true'* ]]
	run --separate-stderr as_t 30 "$SB_ALICE" when +%Y
	[ "$status" -eq 0 ]
	[ "$output" = "$(date +%Y)" ]
	# Still on the old config: the running request is unaffected.
	kill -0 "$HELD_PID"
	release
	[ "$(cat "$T/inflight.out")" = survived ]
	[ ! -s "$T/inflight.err" ]

	restore_config
	run -127 as_t 30 "$SB_ALICE" when +%Y
}

@test "SIGHUP with a broken config: the old config keeps serving; the failure names file and location" {
	local line
	cp -p "$SB_CONFIG" "$T/config.orig"
	# Invalid JSON.
	printf '{\n  "runner": "x",\n  oops\n}\n' >"$SB_CONFIG"
	line=$(sb_reload)
	[[ $line == *'"ok":false'* ]]
	[[ $line == *"\"reason\":\"$SB_CONFIG: line 3 column "* ]]
	grep -qF "reload failed, keeping the running config: $SB_CONFIG: line 3 column" "$SB_DIR/log/daemon.log"
	run as_t 30 "$SB_ALICE" sh -c 'echo still-serving'
	[ "$status" -eq 0 ]
	[ "$output" = still-serving ]
	# Valid JSON, invalid policy.
	cp -p "$T/config.orig" "$SB_CONFIG"
	sb_json_edit "$SB_CONFIG" 'c["tools"]["sh"]["rules"][0]["allow"] = ["x"]'
	line=$(sb_reload)
	[[ $line == *'"ok":false'* ]]
	[[ $line == *"\"reason\":\"$SB_CONFIG: tools.sh.rules[0]: "* ]]
	run as_t 30 "$SB_ALICE" sh -c 'echo still-serving'
	[ "$output" = still-serving ]
	# The old policy still holds, too.
	run as_t 30 "$SB_ALICE" sh -c 'rm x'
	[ "$status" -eq 126 ]
	restore_config
}

@test "shimbridged --check: ok on the good config; exit 1 naming file and location on broken ones" {
	local c=$T/check
	rm -rf "$c"
	mkdir -m 700 "$c"
	cp -a "$SB_DIR/etc/." "$c/"
	run --separate-stderr "$SB_BUILD/shimbridged" -c "$c/config.json" --check
	[ "$status" -eq 0 ]
	[[ $output == "$c/config.json: ok (version "*", 5 tools, 2 sessions, 1 secrets)" ]]

	chk() {	# chk EXPECTED-STDERR-SUBSTRING
		run --separate-stderr "$SB_BUILD/shimbridged" -c "$c/config.json" --check
		[ "$status" -eq 1 ] || { echo "status $status: $stderr" >&2; return 1; }
		[ -z "$output" ]
		[[ $stderr == *"$1"* ]] || { echo "stderr: $stderr" >&2; return 1; }
		cp -p "$SB_CONFIG" "$c/config.json"
	}
	printf '{\n "tools": {\n  "sh": {"path": "/bin/sh",\n' >"$c/config.json"
	chk "shimbridged: $c/config.json: line 4 column "
	sb_json_edit "$c/config.json" 'c["tools"]["sh"]["rules"][0]["bogus"] = 1'
	chk "shimbridged: $c/config.json: tools.sh.rules[0].bogus: unknown key"
	sb_json_edit "$c/config.json" 'c["tools"]["sh"]["rules"][0]["allow"] = ["x"]'
	chk "shimbridged: $c/config.json: tools.sh.rules[0]: a rule has exactly one of"
	sb_json_edit "$c/config.json" 'c["tools"]["sh"]["rules"][1]["allow"] = ["**", "x"]'
	chk "shimbridged: $c/config.json: tools.sh.rules[1]: \"**\" may only be the last pattern"
	sb_json_edit "$c/config.json" 'c["tools"]["sh"]["timeout"] = 0'
	chk "tools.sh.timeout: expected an integer"
	# Permissions: group-writable, then not root's.
	chmod 660 "$c/config.json"
	chk "shimbridged: $c/config.json: must not be group- or world-writable (mode 0660)"
	chmod 600 "$c/config.json"
	chown "$SB_ALICE" "$c/config.json"
	chk "shimbridged: $c/config.json: must be owned by root (owner uid is $(id -u "$SB_ALICE"))"
	chown root "$c/config.json"
	# A broken drop-in is named, not the main file.
	cp -p "$c/sessions.d/alice.json" "$T/alice.json"
	sb_json_edit "$c/sessions.d/alice.json" 'c["tools"].append("no-such-tool")'
	chk "shimbridged: $c/sessions.d/alice.json: alice: tool no-such-tool is not defined"
	cp -p "$T/alice.json" "$c/sessions.d/alice.json"
	chmod 666 "$c/sessions.d/alice.json"
	chk "$c/sessions.d/alice.json: must not be group- or world-writable (mode 0666)"
	chmod 600 "$c/sessions.d/alice.json"
	# The daemon refuses to start on a broken config the same way.
	sb_json_edit "$c/config.json" 'c["tools"]["sh"]["rules"][0]["bogus"] = 1'
	run --separate-stderr "$SB_BUILD/shimbridged" -c "$c/config.json"
	[ "$status" -eq 1 ]
	[[ $stderr == *"$c/config.json: tools.sh.rules[0].bogus: unknown key"* ]]
}

# malformed ACTIONS... : run rawpeer as alice, print its output into $output.
malformed() {
	run --separate-stderr as_t 30 "$SB_ALICE" "$PY" "$SB_FIXTURES/rawpeer.py" --timeout 10 "$@"
	[ "$status" -eq 0 ] || { echo "rawpeer: $status $stderr" >&2; return 1; }
}

# After a malformed peer: protocol-error audited with WHY, nothing run, the daemon serves.
after_malformed() {
	local why=$1 n_allowed=$2
	sb_wait_for 2 sb_audit_grep "r['event'] == 'protocol-error' and r['reason'].startswith('''$why''')" >/dev/null
	[ "$(grep -c '"event":"allowed"' "$SB_AUDIT")" -eq "$n_allowed" ]
	run as_t 30 "$SB_ALICE" sh -c 'echo alive'
	[ "$status" -eq 0 ]
	[ "$output" = alive ]
	kill -0 "$SB_PID"
}

hello_line='HELLO {"proto":2,"server":"shimbridged 0.1.0","session":"alice"}'
perr() { printf 'ERROR {"code":"protocol","message":"%s"}' "$1"; }

@test "malformed: unknown frame type (first, and after HELLO) gets ERROR protocol and is closed" {
	local n
	n=$(grep -c '"event":"allowed"' "$SB_AUDIT")
	malformed frame=0x7f,abc read read
	[ "${#lines[@]}" -eq 2 ]
	[ "${lines[0]}" = "$(perr 'unknown frame type')" ]
	[ "${lines[1]}" = EOF ]
	malformed hello frame=0x33, read read
	[ "${#lines[@]}" -eq 3 ]
	[ "${lines[0]}" = "$hello_line" ]
	[ "${lines[1]}" = "$(perr 'unknown frame type')" ]
	[ "${lines[2]}" = EOF ]
	after_malformed 'unknown frame type' "$n"
}

@test "malformed: a header announcing 16 MiB gets ERROR protocol before any payload" {
	local n fds0
	n=$(grep -c '"event":"allowed"' "$SB_AUDIT")
	fds0=$(sb_daemon_fds_settled)
	malformed hello header=0x02,0x1000000 read read
	[ "${lines[0]}" = "$hello_line" ]
	[ "${lines[1]}" = "$(perr 'frame too large')" ]
	[ "${lines[2]}" = EOF ]
	malformed header=0x10,0xffffffff read read
	[ "${lines[0]}" = "$(perr 'frame too large')" ]
	[ "${lines[1]}" = EOF ]
	after_malformed 'frame too large' "$n"
	sb_wait_for 5 eval '[ "$(sb_daemon_fds)" -eq "$fds0" ]'
}

@test "malformed: a truncated frame then close frees the connection; the daemon keeps serving" {
	local fds0
	fds0=$(sb_daemon_fds_settled)
	malformed hello header=0x02,100 'bytes={"op":"run"' close
	[ "${#lines[@]}" -eq 0 ]
	malformed 'bytes=\x00\x00' close
	sb_wait_for 5 eval '[ "$(sb_daemon_fds)" -eq "$fds0" ]'
	run as_t 30 "$SB_ALICE" sh -c 'echo alive'
	[ "$output" = alive ]
}

@test "malformed: invalid JSON, invalid UTF-8 and embedded NULs in argv get ERROR protocol" {
	local n bad='the request is not a JSON object with an \"op\"' req
	local unreadable='ERROR {"code":"protocol","message":"the request could not be read ('
	n=$(grep -c '"event":"allowed"' "$SB_AUDIT")
	# Valid JSON of the wrong shape.
	malformed hello 'request=[1, 2]' read read
	[ "${lines[1]}" = "$(perr "$bad")" ]
	[ "${lines[2]}" = EOF ]
	# Unreadable requests: the message says why and what to do instead.
	for req in 'request={"op": "run", "tool": "sh", "argv": [' \
	    'request={"op":"run","tool":"sh","argv":["-c","echo \xff\xfe"]}' \
	    'request={"op":"run","tool":"sh","argv":["-c","echo a\\u0000b"]}' \
	    'request={"op":"run","tool":"sh","argv":["-c","echo a\0b"]}' \
	    'request={"op":"run","tool":"s\\u0000h","argv":[]}'; do
		malformed hello "$req" read read
		[[ ${lines[1]} == "$unreadable"* ]]
		[[ ${lines[1]} == *"must be valid UTF-8 without NUL bytes"* ]]
		[ "${lines[2]}" = EOF ]
	done
	after_malformed 'the request could not be read' "$n"
}

@test "malformed: invalid UTF-8 in argv from the real shim is refused cleanly (exit 125), not run" {
	local n
	n=$(grep -c '"event":"allowed"' "$SB_AUDIT")
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c $'echo \xff'
	echo "status $status stdout $output stderr $stderr"
	[ "$status" -eq 125 ]
	[ -z "$output" ]
	[[ $stderr == "sh: "* ]]
	[ "$(grep -c '"event":"allowed"' "$SB_AUDIT")" -eq "$n" ]
}

@test "malformed: HELLO with the wrong version, REQUEST before HELLO, unknown field, unknown op" {
	local n
	n=$(grep -c '"event":"allowed"' "$SB_AUDIT")
	malformed 'hello={"proto":99,"client":"rawpeer"}' read read
	[ "${lines[0]}" = "$(perr 'protocol version mismatch: this bridge speaks version 2; reinstall the shim from the same release as the bridge')" ]
	[ "${lines[1]}" = EOF ]
	malformed 'hello={"proto":"1"}' read read
	[[ ${lines[0]} == 'ERROR {"code":"protocol","message":"protocol version mismatch'* ]]
	malformed 'run=["sh", "-c", "echo hi"]' read read
	[ "${lines[0]}" = "$(perr 'expected a HELLO frame first')" ]
	[ "${lines[1]}" = EOF ]
	malformed hello hello read read
	[ "${lines[1]}" = "$(perr 'expected a REQUEST frame')" ]
	[ "${lines[2]}" = EOF ]
	malformed hello 'request={"op":"run","tool":"sh","argv":["-c","echo hi"],"evil":1}' read read
	[ "${lines[1]}" = "$(perr 'unknown field in request')" ]
	[ "${lines[2]}" = EOF ]
	malformed hello 'request={"op":"exec","tool":"sh","argv":["-c","echo hi"]}' read read
	[ "${lines[1]}" = "$(perr 'unknown op')" ]
	[ "${lines[2]}" = EOF ]
	after_malformed 'unknown field in request' "$n"
	sb_audit_grep "r['event'] == 'protocol-error' and r['reason'] == 'expected a HELLO frame first'" >/dev/null
	sb_audit_grep "r['event'] == 'protocol-error' and r['reason'] == 'unknown op'" >/dev/null
}

@test "malformed: a forbidden SIGNAL (KILL) while running gets ERROR protocol; the child's group dies" {
	local n m=mk-sig-$RANDOM
	malformed hello "run=[\"sh\", \"-c\", \"sleep 100; : $m\"]" sleep=0.5 signal=KILL read read
	[ "${lines[0]}" = "$hello_line" ]
	[ "${lines[1]}" = "$(perr 'unexpected or malformed frame while running')" ]
	[ "${lines[2]}" = EOF ]
	sb_wait_for 1 sb_no_runner
}

@test "200 concurrent invocations all succeed with their own output" {
	local d=$T/c200 i bad=0
	rm -rf "$d"
	mkdir -p "$d"
	chown "$SB_ALICE" "$d"
	as_t 90 "$SB_ALICE" bash -c 'd=$1
		for i in $(seq 200); do
			(sh -c "echo \$0-\$1" "n$i" "x" >"$d/out.$i" 2>"$d/err.$i"; echo $? >"$d/rc.$i") &
		done
		wait' _ "$d"
	# read, not $(cat): no process per file.
	local rc out
	for i in $(seq 200); do
		rc= out=
		read -r rc <"$d/rc.$i" 2>/dev/null
		read -r out <"$d/out.$i" 2>/dev/null
		if [ "$rc" != 0 ] || [ "$out" != "n$i-x" ] || [ -s "$d/err.$i" ]; then
			echo "call $i: rc $rc out $out err $(cat "$d/err.$i")" >&2
			bad=$((bad + 1))
		fi
	done
	[ "$bad" -eq 0 ]
}

@test "signal forwarding: SIGINT to the shim reaches the child (trap exits 7)" {
	local m=mk-int-$RANDOM shim rc=0
	as_t 30 "$SB_ALICE" sh -c "trap 'echo got-int; exit 7' INT; echo ready; sleep 100; : $m" \
		>"$T/int.out" 2>"$T/int.err" 3>&- &
	local bg=$!
	sb_wait_for 5 grep -q ready "$T/int.out"
	shim=$(pid_of "$SB_ALICE" "$m")
	kill -INT "$shim"
	wait "$bg" || rc=$?
	[ "$rc" -eq 7 ]
	[ "$(cat "$T/int.out")" = "$(printf 'ready\ngot-int')" ]
	[ ! -s "$T/int.err" ]
	# TERM is forwarded too (default action: the child dies of it, so does the shim).
	rc=0
	as_t 30 "$SB_ALICE" sh -c "echo ready; sleep 100; : $m" >"$T/term.out" 2>/dev/null 3>&- &
	bg=$!
	sb_wait_for 5 grep -q ready "$T/term.out"
	kill -TERM "$(pid_of "$SB_ALICE" "$m")"
	wait "$bg" || rc=$?
	[ "$rc" -eq 143 ]
}

@test "forwarded environment: TERM and LC_ALL pass; FOO, PATH, LD_PRELOAD, GIT_DIR do not" {
	local preload=/nonexistent/x.so
	# A dynamic (sanitized) shim would have ld.so complain about a missing preload.
	ldd "$SB_DIR/bin/shimbridge-shim" >/dev/null 2>&1 && preload=
	run --separate-stderr as_t 30 "$SB_ALICE" env TERM=xterm-sbt LC_ALL=C.UTF-8 FOO=bar \
		LD_PRELOAD="$preload" GIT_DIR=/tmp/evil GH_TOKEN=nope sh -c 'env | sort'
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	grep -qx 'TERM=xterm-sbt' <<<"$output"
	grep -qx 'LC_ALL=C.UTF-8' <<<"$output"
	grep -qx 'PATH=/usr/bin:/bin' <<<"$output"
	grep -qx "USER=$SB_RUNNER" <<<"$output"
	grep -qx 'MY_TOKEN=\[REDACTED\]' <<<"$output"
	refute grep -q -e '^FOO=' -e '^LD_' -e '^GIT_' -e '^GH_' -e "$SB_DIR/bin" -e SHIMBRIDGE <<<"$output"
	# Exactly these names, nothing else.
	[ "$(cut -d= -f1 <<<"$output" | tr '\n' ' ')" = \
		"HOME LANG LC_ALL LOGNAME MY_TOKEN PATH PWD TERM TMPDIR USER " ]
}
