#!/usr/bin/env bats
# Daemon logging and audit rotation (issue 12 items 4 and 5): sd-daemon priority
# prefixes when stderr is the journal, plain lines otherwise; the optional syslog
# audit sink (facility authpriv); SIGUSR1 reopens the audit log while calls run;
# no secret value in any log.

bats_require_minimum_version 1.5.0
load lib

SB_RUNNER=$SB_LANE-runner-log
BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-180}

# Config: one tool that may print its token; extra top-level members in $1.
log_config() {
	sb_config <<EOF2
{ $(sb_config_head)
  "limits": {"max_per_session": 512, "max_connections": 2000},
  "secrets": {"tok": {"source": "file", "path": "$SB_DIR/etc/tok"}},
  "tools": {"sh": {"path": "/bin/sh", "timeout": 60, "secrets": {"MY_TOKEN": "tok"},
                   "rules": [{"allow": ["-c", "**"]}]}}${1:+, $1}
}
EOF2
}

setup_file() {
	sb_build_resolve
	sb_users
	sb_tree
	SECRET="$SB_LANE-logsecret-$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
	export SECRET
	(umask 077 && printf '%s\n' "$SECRET" >"$SB_DIR/etc/tok")
	sb_session alice "$SB_ALICE" '["sh"]'
	sb_shim_links sh
}

teardown_file() {
	pkill -KILL -u "$SB_RUNNER" 2>/dev/null || true
	sb_users_remove
	rm -rf "$SB_DIR"
	sb_reap_suite
}

teardown() {
	sb_stop || true
	if [ -n "${SYSLOG_PID:-}" ]; then
		kill "$SYSLOG_PID" 2>/dev/null || true
		wait "$SYSLOG_PID" 2>/dev/null || true
		rm -f /dev/log
	fi
	rm -f "$SB_AUDIT" "$SB_AUDIT.1" "$SB_DIR/log/daemon.log"
	sb_reap
}

# No line of any log holds the secret value.
no_secret_in() {
	local f
	for f in "$@"; do
		[ -f "$f" ] || continue
		if grep -F -- "$SECRET" "$f"; then
			echo "secret value found in $f" >&2
			return 1
		fi
	done
}

@test "stderr is the journal: every daemon line has an sd-daemon priority prefix" {
	log_config
	: >"$SB_DIR/log/daemon.log"
	JOURNAL_STREAM=$(stat -c '%d:%i' "$SB_DIR/log/daemon.log") sb_start -d
	as "$SB_ALICE" sh -c 'echo "$MY_TOKEN" | wc -c'
	# a warning: an unknown uid without a session is refused and logged
	kill -HUP "$SB_PID"
	sb_wait_for 10 grep -q 'configuration reloaded' "$SB_DIR/log/daemon.log"
	sb_stop
	cat "$SB_DIR/log/daemon.log"
	run grep -c -v -E '^<[0-7]>' "$SB_DIR/log/daemon.log"
	[ "$output" = 0 ]
	grep -q -E '^<6>.*configuration reloaded' "$SB_DIR/log/daemon.log"
	grep -q -E '^<7>debug: ' "$SB_DIR/log/daemon.log"
	no_secret_in "$SB_DIR/log/daemon.log" "$SB_AUDIT"
}

@test "stderr is not the journal (JOURNAL_STREAM names another file): plain lines" {
	log_config
	: >"$SB_DIR/log/daemon.log"
	JOURNAL_STREAM=$(stat -c '%d:%i' /etc/passwd) sb_start
	kill -HUP "$SB_PID"
	sb_wait_for 10 grep -q 'configuration reloaded' "$SB_DIR/log/daemon.log"
	sb_stop
	cat "$SB_DIR/log/daemon.log"
	run grep -c -E '^<[0-7]>' "$SB_DIR/log/daemon.log"
	[ "$output" = 0 ]
	grep -q '^shimbridged: configuration reloaded' "$SB_DIR/log/daemon.log"
}

@test "audit.syslog: each record also goes to syslog as authpriv.info, redacted" {
	[ ! -e /dev/log ] || skip "/dev/log exists (a system logger runs): not replacing it"
	sb_bg "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
with open(sys.argv[1], "ab", buffering=0) as out:
    while True:
        out.write(s.recv(65536) + b"\n")
' "$SB_DIR/log/syslog" </dev/null
	SYSLOG_PID=$!
	sb_wait_for 5 test -S /dev/log
	log_config '"audit": {"syslog": true}'
	sb_start
	as "$SB_ALICE" sh -c 'echo "$MY_TOKEN"; echo "'"$SECRET"'" >/dev/null'
	sb_wait_for 5 grep -q '"event":"done"' "$SB_DIR/log/syslog"
	sb_stop
	# the same records as the file, the stop checkpoint last (a datagram the listener
	# may still be writing)
	sb_wait_for 5 eval '[ "$(grep -c "shimbridged\[" "$SB_DIR/log/syslog")" -eq "$(wc -l <"$SB_AUDIT")" ]'
	cat "$SB_DIR/log/syslog"
	# <86> = authpriv (10) * 8 + info (6)
	grep -q -E '^<86>.*shimbridged\[[0-9]+\]: \{"event":"allowed"' "$SB_DIR/log/syslog"
	# other programs (runuser's PAM) log there too: only shimbridged's lines count
	grep 'shimbridged\[' "$SB_DIR/log/syslog" >"$SB_DIR/log/syslog.sb"
	run grep -c -v -E '^<86>' "$SB_DIR/log/syslog.sb"
	[ "$output" = 0 ]
	# the same records as the file
	[ "$(wc -l <"$SB_DIR/log/syslog.sb")" -eq "$(wc -l <"$SB_AUDIT")" ]
	no_secret_in "$SB_DIR/log/syslog" "$SB_AUDIT" "$SB_DIR/log/daemon.log"
}

@test "audit.syslog must be a boolean" {
	log_config '"audit": {"syslog": "yes"}'
	run "$SB_BUILD/shimbridged" -c "$SB_CONFIG" --check-no-secrets
	[ "$status" -ne 0 ]
	[[ $output == *audit* ]]
	log_config '"audit": {"syslg": true}'
	run "$SB_BUILD/shimbridged" -c "$SB_CONFIG" --check-no-secrets
	[ "$status" -ne 0 ]
}

@test "rotation: mv + SIGUSR1 while 1,000 calls run; each done record in exactly one file, none torn" {
	log_config
	sb_start
	local i pids=()
	for i in 1 2 3 4 5 6 7 8; do
		as "$SB_ALICE" bash -c 'for i in $(seq 125); do sh -c true || exit 1; done' &
		pids+=($!)
	done
	sb_wait_for 60 eval '[ "$(grep -c "\"event\":\"done\"" "$SB_AUDIT")" -ge 300 ]'
	mv "$SB_AUDIT" "$SB_AUDIT.1"
	kill -USR1 "$SB_PID"
	local rc=0
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	[ "$rc" = 0 ]
	sb_wait_for 10 test -f "$SB_AUDIT"
	sb_jsonl_valid "$SB_AUDIT.1"
	sb_jsonl_valid "$SB_AUDIT"
	grep -q 'audit log reopened' "$SB_DIR/log/daemon.log"
	"$PY" - "$SB_AUDIT.1" "$SB_AUDIT" <<'PYEOF'
import json, sys
seen = {}
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        if r.get("event") == "done":
            seen.setdefault(r["conn"], []).append(path)
per_file = [sum(1 for v in seen.values() if v == [p]) for p in sys.argv[1:]]
dups = [k for k, v in seen.items() if len(v) != 1]
print("done records:", len(seen), "per file:", per_file, "duplicates:", len(dups))
assert not dups, dups[:5]
assert len(seen) == 1000, len(seen)
assert per_file[0] > 0 and per_file[1] > 0, per_file
PYEOF
	# the new file has the same owner and mode rules as the old
	[ "$(stat -c '%U %a' "$SB_AUDIT")" = "$(stat -c '%U %a' "$SB_AUDIT.1")" ]
}

@test "SIGUSR1 with an unwritable audit path keeps the old file" {
	log_config
	sb_start
	mv "$SB_AUDIT" "$SB_AUDIT.1"
	mkdir "$SB_AUDIT"	# a directory where the file should be: open fails
	kill -USR1 "$SB_PID"
	sb_wait_for 5 grep -q 'audit stays on the old file' "$SB_DIR/log/daemon.log"
	as "$SB_ALICE" sh -c true
	rmdir "$SB_AUDIT"
	grep -q '"event":"done"' "$SB_AUDIT.1"
}

@test "SIGHUP (reload) also reopens the audit log: the reload record is in the new file" {
	log_config
	sb_start
	as "$SB_ALICE" sh -c true
	mv "$SB_AUDIT" "$SB_AUDIT.1"
	kill -HUP "$SB_PID"
	sb_wait_for 10 grep -q '"event":"reload"' "$SB_AUDIT"
	as "$SB_ALICE" sh -c true
	[ "$(grep -c '"event":"done"' "$SB_AUDIT.1")" = 1 ]
	[ "$(grep -c '"event":"done"' "$SB_AUDIT")" = 1 ]
	run grep -c '"event":"reload"' "$SB_AUDIT.1"
	[ "$output" = 0 ]
}

# The writable cgroup2 hierarchy of this host, or nothing.
cgroup2_mount() {
	awk '$9 == "cgroup2" && $4 == "/" { print $5; exit }' /proc/self/mountinfo
}

@test "containment: the daemon says once at start which path it uses (cgroup v2, or why not)" {
	local mnt
	mnt=$(cgroup2_mount)
	log_config
	: >"$SB_DIR/log/daemon.log"
	sb_start
	as "$SB_ALICE" sh -c 'echo hi'
	kill -HUP "$SB_PID"
	sb_wait_for 10 grep -q 'configuration reloaded' "$SB_DIR/log/daemon.log"
	run grep -c 'process containment: ' "$SB_DIR/log/daemon.log"
	[ "$output" = 1 ]
	if [ -n "$mnt" ] && [ -w "$mnt" ] && [ -e "$mnt/cgroup.procs" ] && grep -q '^0::/' /proc/self/cgroup; then
		grep -q "process containment: cgroup v2, a cgroup per session under $mnt/.*shimbridged\.$SB_PID, torn down with cgroup.kill" "$SB_DIR/log/daemon.log"
		sb_stop
		# Stopping removes the daemon's subtree.
		run find "$mnt" -maxdepth 3 -name "shimbridged.$SB_PID"
		[ -z "$output" ]
	else
		grep -q 'process containment: process groups, PID namespaces and the orphan scan; cgroup v2 is not used because' "$SB_DIR/log/daemon.log"
	fi
}

@test "containment: without a writable cgroup2 hierarchy the daemon says so (and why) and serves as before" {
	local mnt
	mnt=$(cgroup2_mount)
	[ -n "$mnt" ] || skip "no cgroup2 hierarchy here: the other test covers the fallback"
	log_config
	: >"$SB_DIR/log/daemon.log"
	# A private mount namespace in which the hierarchy is read-only (ProtectControlGroups=yes).
	sb_bg unshare -m --propagation private sh -c 'mount -o remount,bind,ro "$1" && exec "$2" -c "$3"' \
		sh "$mnt" "$SB_BUILD/shimbridged" "$SB_CONFIG" </dev/null >>"$SB_DIR/log/daemon.log" 2>&1
	SB_PID=$!
	sb_wait_for 10 test -S "$SB_SOCK"
	run as "$SB_ALICE" sh -c 'echo still served'
	[ "$status" -eq 0 ]
	[ "$output" = "still served" ]
	run grep -c 'process containment: ' "$SB_DIR/log/daemon.log"
	[ "$output" = 1 ]
	grep -q "process containment: process groups, PID namespaces and the orphan scan; cgroup v2 is not used because cannot create $mnt/.*: Read-only file system" "$SB_DIR/log/daemon.log"
}
