#!/usr/bin/env bats
# The per-call jail and per-session runners (docs/JAIL.md), as an attacker in a
# session would try them: the real daemon and shim, real users, two sessions with
# runners of their own, and a generic tool that lets the session run any shell.
#
#   bats tests/integration/jail.bats

bats_require_minimum_version 1.5.0
load lib

# Runners of our own: a starting daemon kills every process of each of its runners.
SB_RUNNER=$SB_LANE-runner-jail
RUN_A=$SB_LANE-run-ja
RUN_B=$SB_LANE-run-jb
BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

jail_config() {
	sb_config <<EOF
{ $(sb_config_head)
  "secrets": {"tok": {"source": "file", "path": "$SB_DIR/etc/tok"}},
  "tools": {
    "sh": {"path": "/bin/bash", "timeout": 60, "rules": [{"allow": ["-c", "**"]}]},
    "hold": {"path": "/bin/sh", "timeout": 60, "secrets": {"MY_TOKEN": "tok"},
             "rules": [{"allow": ["-c", "**"]}]},
    "nonet": {"path": "/bin/bash", "network": "none", "timeout": 30,
              "rules": [{"allow": ["-c", "**"]}]},
    "ghnet": {"path": "$SB_DIR/tools/netinfo.sh", "profile": "gh", "network": "none",
              "timeout": 30}
  }
}
EOF
}

# Start the daemon; its pid in a file, for the tests (each runs in its own process).
jail_start() {
	sb_start 3>&-
	echo "$SB_PID" >"$SB_DIR/daemon.pid"
}

setup_file() {
	sb_build_resolve
	sb_users
	local u
	for u in "$RUN_A" "$RUN_B"; do
		id "$u" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$u"
	done
	sb_tree
	mkdir -p "$SB_DIR/tools"
	# A gh-profile stand-in: whatever gh is asked, it reports the network it has.
	cat >"$SB_DIR/tools/netinfo.sh" <<'EOF'
#!/bin/bash
echo "ifaces: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"
{ echo x >/dev/tcp/127.0.0.1/9; } 2>&1 | grep -o 'Network is unreachable' | head -n 1
EOF
	chmod 755 "$SB_DIR/tools/netinfo.sh"
	SECRET="$SB_LANE-jail-$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
	export SECRET
	(umask 077 && printf '%s\n' "$SECRET" >"$SB_DIR/etc/tok")
	jail_config
	sb_session alice "$SB_ALICE" '["sh", "hold", "nonet", "ghnet"]' \
		"\"runner\": \"$RUN_A\", \"repos\": [\"octo/repo\"]"
	sb_session bob "$SB_BOB" '["sh", "hold"]' "\"runner\": \"$RUN_B\""
	sb_shim_links sh hold nonet gh
	ln -sf shimbridge-shim "$SB_DIR/bin/ghnet"
	jail_start
	# Bob's mirror directory, as the git transport leaves it: his runner's, 0700.
	mkdir -p "$SB_DIR/state/mirrors/bob/github.com/octo"
	echo "bob-mirror-$SECRET" >"$SB_DIR/state/mirrors/bob/github.com/octo/HEAD"
	chown -R "$RUN_B:" "$SB_DIR/state/mirrors/bob"
	chmod 700 "$SB_DIR/state/mirrors/bob"
	# A world-readable file in the host's /tmp.
	HOSTFILE=$(mktemp "/tmp/$SB_LANE-jail-host.XXXXXX")
	echo "host-tmp-$SECRET" >"$HOSTFILE"
	chmod 644 "$HOSTFILE"
	echo "$HOSTFILE" >"$SB_DIR/hostfile"
}

teardown_file() {
	local rc=0 u
	SB_PID=$(cat "$SB_DIR/daemon.pid" 2>/dev/null)
	sb_stop || rc=$?
	# The stop takes every jail waiting in the pool, and its directory, with it.
	if ! sb_wait_for 5 eval '[ -z "$(pgrep -u "$RUN_A,$RUN_B,$SB_RUNNER")" ]'; then
		echo "runner processes outlived the daemon:" >&2
		ps -o pid,ppid,stat,user,args -u "$RUN_A,$RUN_B,$SB_RUNNER" >&2 || true
		rc=1
	fi
	if [ -n "$(ls -A "$SB_DIR/state/run" 2>/dev/null)" ]; then
		echo "scratch directories outlived the daemon: $(ls -A "$SB_DIR/state/run")" >&2
		rc=1
	fi
	for u in "$SB_RUNNER" "$RUN_A" "$RUN_B"; do
		pkill -KILL -u "$u" 2>/dev/null || true
		userdel "$u" 2>/dev/null || true
	done
	for u in sb-sbtjx-run sb-sbtjx; do
		pkill -KILL -u "$u" 2>/dev/null || true
		userdel -r "$u" >/dev/null 2>&1 || userdel "$u" 2>/dev/null || true
	done
	rm -f "$(cat "$SB_DIR/hostfile" 2>/dev/null)"
	[ "$rc" -ne 0 ] || rm -rf "$SB_DIR"
	sb_reap_suite
	return "$rc"
}

setup() {
	SB_PID=$(cat "$SB_DIR/daemon.pid")
	HOSTFILE=$(cat "$SB_DIR/hostfile")
	export SB_PID HOSTFILE
}

# Whether no process of any of our runners is alive.
no_runners() {
	[ -z "$(sb_runner_procs "$RUN_A,$RUN_B,$SB_RUNNER")" ]
}

# After every test: nothing of the runners left, the daemon alive.
teardown() {
	local rc=0
	if ! sb_wait_for 3 no_runners; then
		echo "runner processes outlived the test:" >&2
		ps -o pid,ppid,stat,user,args -u "$RUN_A,$RUN_B,$SB_RUNNER" >&2 || true
		pkill -KILL -u "$RUN_A" || true
		pkill -KILL -u "$RUN_B" || true
		rc=1
	elif ! kill -0 "$SB_PID" 2>/dev/null; then
		echo "the daemon died:" >&2
		tail -n 30 "$SB_DIR/log/daemon.log" >&2
		rc=1
	fi
	sb_reap
	return "$rc"
}

# Fail if $1 (a secret-bearing text) holds the secret in any of a few transformations.
no_secret() {
	local rev hex
	rev=$(printf '%s' "$SECRET" | rev)
	hex=$(printf '%s' "$SECRET" | od -An -tx1 | tr -d ' \n')
	sb_refute_contains "$SECRET" "$1" "$2"
	sb_refute_contains "$rev" "$1" "$2 (reversed)"
	sb_refute_contains "$hex" "$1" "$2 (hex)"
}

@test "each session's child runs as that session's own runner" {
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c 'id -u; id -G; echo "$USER"'
	[ "$status" -eq 0 ]
	[ "$output" = "$(id -u "$RUN_A")
$(id -g "$RUN_A")
$RUN_A" ]
	run --separate-stderr as_t 30 "$SB_BOB" sh -c 'id -u; echo "$USER"'
	[ "$status" -eq 0 ]
	[ "$output" = "$(id -u "$RUN_B")
$RUN_B" ]
}

@test "a child's /proc shows only its own jail: it is PID 2 under the jail's init" {
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c 'echo "pid $$"; cat /proc/sys/kernel/hostname; ls /proc | grep -c "^[0-9]"'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "pid 2" ]
	[ "${lines[1]}" = "shimbridge" ]
	# init, bash, ls and grep
	[ "${lines[2]}" -le 4 ]
	# The host has many more (sanity: the count would fail on the host).
	[ "$(ls /proc | grep -c '^[0-9]')" -gt 10 ]
}

@test "session A cannot see session B's running child, its environ, or its secret" {
	local m=mk-hold-$RANDOM p
	as_t 40 "$SB_BOB" hold -c "sleep 30; : $m" </dev/null >/dev/null 2>&1 3>&- &
	local bg=$!
	sb_wait_for 5 eval "pgrep -u $RUN_B -f -- '$m' >/dev/null"
	p=$(pgrep -u "$RUN_B" -f -- "$m" | head -n 1)
	# Sanity, as root on the host: bob's child does hold the secret in its environment.
	grep -q "MY_TOKEN=$SECRET" <(tr '\0' '\n' <"/proc/$p/environ")
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c "cat /proc/$p/environ; ls /proc/$p;
		for f in /proc/[0-9]*/environ; do tr '\0' '\n' <\$f; done; pgrep -a sleep; echo end"
	[ "$status" -eq 0 ]
	no_secret "$output$stderr" "alice's view of /proc"
	[[ $stderr == *"/proc/$p/environ: No such file or directory"* ]]
	[[ $output != *"sleep 30"* ]]
	[ "${lines[-1]}" = end ]
	kill "$bg" 2>/dev/null || true
	pkill -KILL -u "$RUN_B" || true
	wait "$bg" 2>/dev/null || true
}

@test "filesystem: no state dir, no other mirrors, no homes, no host /tmp; system dirs read-only" {
	local st=$SB_DIR/state
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c "
		ls /; echo --;
		ls -a $st; ls -a $st/run | wc -l; echo --;
		for p in $st/mirrors $st/mirrors/bob $SB_DIR/etc $SB_DIR/log $SB_DIR/bin /home /root /run /var /mnt $HOSTFILE; do
			test -e \$p && echo visible:\$p; done;
		cat $st/mirrors/bob/github.com/octo/HEAD $HOSTFILE $SB_DIR/etc/tok 2>/dev/null;
		touch /usr/x /etc/x /x 2>/dev/null && echo writable;
		echo data >\$HOME/f && cat \$HOME/f; echo t >/tmp/probe 2>/dev/null && echo tmp-writable;
		awk '\$5 == \"$st/run\" { for (i = 7; i < NF; i++) if (\$i == \"-\") print \"run:\" \$(i + 1) }' /proc/self/mountinfo;
		echo end"
	[ "$status" -eq 0 ]
	no_secret "$output$stderr" "alice's view of the filesystem"
	[[ $output != *visible:* ]]
	[[ $output != *writable* ]]
	# / holds the system dirs, /dev, /proc and the path to the scratch dir (below /tmp here).
	[ "${output%%--*}" = "bin
dev
etc
lib
lib32
lib64
proc
sbin
tmp
usr
" ] || [ "${output%%--*}" = "bin
dev
etc
lib
lib64
proc
sbin
tmp
usr
" ]
	# state/ holds only run/, and run/ only this call's own scratch dir.
	[[ $output == *"--
.
..
run
3
--"* ]]
	# A copy of the template: run/ is a tmpfs of this jail's own, holding only the
	# mount point of its scratch dir.
	[[ $output == *"data
run:tmpfs
end" ]]
	# Sanity: the host has all of these.
	[ -e "$st/mirrors/bob/github.com/octo/HEAD" ] && [ -e /home ] && [ -e "$HOSTFILE" ]
}

@test "network none: only lo, and it is down; the host network tool sees the host's" {
	run --separate-stderr as_t 30 "$SB_ALICE" nonet -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "; { echo x >/dev/tcp/127.0.0.1/9; } 2>&1 | grep -o "Network is unreachable" | head -n 1'
	[ "$status" -eq 0 ]
	[ "$output" = "lo
Network is unreachable" ]
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c 'tail -n +3 /proc/net/dev | wc -l'
	[ "$output" -eq "$(tail -n +3 /proc/net/dev | wc -l)" ]
}

@test "gh-profile children with network none see no network" {
	run --separate-stderr as_t 30 "$SB_ALICE" ghnet api repos/octo/repo
	echo "$output $stderr"
	[ "$status" -eq 0 ]
	[ "$output" = "ifaces: lo 
Network is unreachable" ]
}

# Restart the suite's daemon with setpriv's --bounding-set $1 (empty: plainly), for
# the tests after this one too.
jail_restart_caps() {
	sb_stop
	if [ -n "$1" ]; then
		SB_DAEMON_PREFIX="setpriv --bounding-set=$1" jail_start
	else
		jail_start
	fi
	sb_keep "$SB_PID"
}

@test "with only the systemd unit's capabilities (CapabilityBoundingSet=), jailed calls run" {
	command -v setpriv >/dev/null || skip "setpriv (util-linux) is missing"
	local caps
	caps=$(sb_unit_caps)
	echo "bounding set: $caps" >&2
	jail_restart_caps "$caps"
	# The daemon holds what the unit grants and nothing more (ptrace, bit 19, is out).
	run grep -E '^CapEff:' "/proc/$SB_PID/status"
	[ $(( 0x${output##*[[:space:]]} >> 19 & 1 )) -eq 0 ]
	# Namespaces, the tmpfs root, pivot_root, /proc and the hostname; network none too.
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c 'echo "$(hostname) $$"; touch /usr/x 2>/dev/null || echo ro'
	echo "$output $stderr"
	[ "$status" -eq 0 ]
	[ "$output" = "shimbridge 2
ro" ]
	run --separate-stderr as_t 30 "$SB_ALICE" nonet -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
	[ "$status" -eq 0 ]
	[ "$output" = lo ]
	# Without CAP_SYS_PTRACE too, the daemon holds a running call's mount namespace
	# (its init sends it with READY), so the jail's unmounting waits until the call
	# has been answered.
	# The call waits in `read` on a FIFO held open here: in flight however slow the machine.
	local m=mk-ns-$RANDOM tool ns gate
	rm -f "$SB_DIR/gate"
	mkfifo -m 600 "$SB_DIR/gate"
	as_t 60 "$SB_ALICE" sh -c "read _; : $m" <"$SB_DIR/gate" >/dev/null 2>&1 3>&- &
	local bg=$!
	exec {gate}>"$SB_DIR/gate"
	sb_wait_for 15 eval "pgrep -u $RUN_A -f -- 'read _; : $m' >/dev/null"
	tool=$(pgrep -u "$RUN_A" -f -- "read _; : $m" | head -n 1)
	ns=$(readlink "/proc/$tool/ns/mnt")
	[ "$ns" != "$(readlink "/proc/$SB_PID/ns/mnt")" ]
	for f in /proc/"$SB_PID"/fd/*; do readlink "$f"; done | grep -qxF "$ns"
	exec {gate}>&-
	wait "$bg"
	# The negative control: without CAP_SYS_ADMIN no jail can be built, and the
	# call is refused with the reason (this is what the unit granted before).
	jail_restart_caps "$(sb_unit_caps sys_admin)"
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c 'echo ran'
	echo "$output $stderr"
	[ "$status" -ne 0 ]
	[ "$output" != ran ]
	jail_restart_caps ""
}

@test "a detached grandchild dies with the jail when the tool exits" {
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c 'setsid sleep 300 </dev/null >/dev/null 2>&1 & echo started'
	[ "$status" -eq 0 ]
	[ "$output" = started ]
	sb_wait_for 1 no_runners
}

@test "the audit log keeps a jailed tool's death by signal" {
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c 'kill -TERM $$'
	[ "$status" -eq 143 ]
	sb_wait_for 2 sb_audit_grep "r['event'] == 'done' and r.get('signal') == 'TERM' and r.get('session') == 'alice'"
}

@test "check warns when sessions share the global runner, naming them and what to do" {
	local d=$SB_DIR/check
	mkdir -p "$d/sessions.d"
	cp "$SB_CONFIG" "$d/config.json"
	printf '{"name": "s1", "user": "%s", "tools": ["sh"]}\n' "$SB_ALICE" >"$d/sessions.d/s1.json"
	printf '{"name": "s2", "user": "%s", "tools": ["sh"]}\n' "$SB_BOB" >"$d/sessions.d/s2.json"
	chmod 600 "$d/config.json" "$d"/sessions.d/*.json
	chmod 700 "$d"
	run "$SB_BUILD/shimbridged" --check-no-secrets -c "$d/config.json"
	[ "$status" -eq 0 ]
	[[ $output == *"sessions s1, s2 share the global runner $SB_RUNNER"*"shimbridge session add"* ]]
	# Two sessions naming the same own runner are refused.
	printf '{"name": "s1", "user": "%s", "runner": "%s", "tools": ["sh"]}\n' "$SB_ALICE" "$RUN_A" >"$d/sessions.d/s1.json"
	printf '{"name": "s2", "user": "%s", "runner": "%s", "tools": ["sh"]}\n' "$SB_BOB" "$RUN_A" >"$d/sessions.d/s2.json"
	run "$SB_BUILD/shimbridged" --check-no-secrets -c "$d/config.json"
	[ "$status" -eq 1 ]
	[[ $output == *"runner $RUN_A is also the runner of session s1"* ]]
	rm -rf "$d"
}

@test "session add creates the session's own locked runner; session remove removes it" {
	[ -x "$SB_BUILD/shimbridge" ] || skip "no admin CLI in $SB_BUILD"
	local d=$SB_DIR/adm
	mkdir -p "$d/sessions.d"
	cp "$SB_CONFIG" "$d/config.json"
	chmod 600 "$d/config.json"
	chmod 700 "$d"
	run "$SB_BUILD/shimbridge" session add sbtjx -c "$d/config.json" --tools sh --no-reload \
		--shim-dir "$SB_DIR/bin"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"created runner sb-sbtjx-run"* ]]
	getent passwd sb-sbtjx-run | grep -q ':/nonexistent:/usr/sbin/nologin$'
	[ "$(passwd -S sb-sbtjx-run | cut -d' ' -f2)" = L ]
	[ "$(id -u sb-sbtjx-run)" != "$(id -u "$SB_RUNNER")" ]
	grep -q '"runner": "sb-sbtjx-run"' "$d/sessions.d/sbtjx.json"
	run "$SB_BUILD/shimbridge" session remove sbtjx -c "$d/config.json" --no-reload
	echo "$output"
	[ "$status" -eq 0 ]
	[[ $output == *"removed runner sb-sbtjx-run"* ]]
	refute_user() { ! getent passwd "$1" >/dev/null; }
	refute_user sb-sbtjx-run
	refute_user sb-sbtjx
	rm -rf "$d"
}

# The pool of pre-built jails (docs/JAIL.md, "The pool"): limits.jail_pool, default 2.

# The number of jails waiting for the users in $1 is $2 (else show them).
pool_is() {
	[ "$(sb_pool_pids "$1" | wc -l)" -eq "$2" ] && return 0
	ps -o pid,ppid,stat,user,args -u "$1" >"$BATS_TEST_TMPDIR/pool.ps" 2>&1
	return 1
}

@test "pool: a waiting jail's init is shimbridge-jail (forked by the jail server), as the runner, with an empty environment" {
	run --separate-stderr as_t 30 "$SB_ALICE" nonet -c 'echo warm-up'
	[ "$status" -eq 0 ]
	sb_wait_for 5 eval "[ \$(sb_pool_pids $RUN_A | wc -l) -ge 2 ]"
	local p exe
	for p in $(sb_pool_pids "$RUN_A"); do
		exe=$(readlink "/proc/$p/exe")
		[ "$exe" = "$(readlink -f "$SB_BUILD/shimbridge-jail")" ]
		# Nothing of the daemon: no environment, its own command line, no daemon maps.
		[ "$(stat -c %s "/proc/$p/environ"; wc -c <"/proc/$p/environ")" = "0
0" ]
		[ "$(tr '\0' ' ' <"/proc/$p/cmdline")" = "shimbridge-jail " ]
		run ! grep -E 'libsodium|libevent|libjansson|shimbridged' "/proc/$p/maps"
		grep -q "^Uid:[[:space:]]$(id -u "$RUN_A")[[:space:]]$(id -u "$RUN_A")[[:space:]]" "/proc/$p/status"
		# Its own PID namespace, not the daemon's.
		[ "$(readlink "/proc/$p/ns/pid")" != "$(readlink /proc/self/ns/pid)" ]
		[ "$(readlink "/proc/$p/ns/mnt")" != "$(readlink "/proc/$SB_PID/ns/mnt")" ]
		# Closed to the runner (non-dumpable): the same uid cannot read its memory map.
		run ! runuser -u "$RUN_A" -- cat "/proc/$p/maps"
	done
}

@test "jail servers: one root process forks every init as the daemon's child, another forks the template's; killed, the next jails start new ones" {
	local srv srv2 tsrv tsrv2 p
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c 'echo warm-up'
	[ "$status" -eq 0 ]
	grep -q "jail template built" "$SB_DIR/log/daemon.log"
	srv=$(pgrep -P "$SB_PID" -x sb-jail-server)
	[ -n "$srv" ] && [ "$(wc -w <<<"$srv")" -eq 1 ]
	tsrv=$(pgrep -P "$SB_PID" -x sb-jail-tmpl)
	[ -n "$tsrv" ] && [ "$(wc -w <<<"$tsrv")" -eq 1 ]
	# The jail program itself, as root, with its own command line and no environment.
	for p in "$srv" "$tsrv"; do
		[ "$(stat -c %u "/proc/$p")" -eq 0 ]
		[ "$(readlink "/proc/$p/exe")" = "$(readlink -f "$SB_BUILD/shimbridge-jail")" ]
		[ "$(tr '\0' ' ' <"/proc/$p/cmdline")" = "shimbridge-jail --server " ]
		[ "$(wc -c <"/proc/$p/environ")" -eq 0 ]
	done
	# The template server lives in a mount namespace of its own: the template.
	[ "$(readlink "/proc/$tsrv/ns/mnt")" != "$(readlink "/proc/$SB_PID/ns/mnt")" ]
	[ "$(readlink "/proc/$srv/ns/mnt")" = "$(readlink "/proc/$SB_PID/ns/mnt")" ]
	# The inits they forked are the daemon's children (CLONE_PARENT), not theirs.
	sb_wait_for 5 eval "[ \$(sb_pool_pids $RUN_A | wc -l) -ge 2 ]"
	[ -z "$(pgrep -P "$srv")" ] && [ -z "$(pgrep -P "$tsrv")" ]
	for p in $(sb_pool_pids "$RUN_A"); do
		[ "$(ps -o ppid= -p "$p" | tr -d ' ')" = "$SB_PID" ]
	done
	# Killed: the daemon says so, and the calls go on with new ones (the next
	# template jail asks the jail server for a template server).
	kill -KILL "$srv"
	sb_wait_for 5 grep -q "the jail server (pid $srv) ended" "$SB_DIR/log/daemon.log"
	kill -KILL "$tsrv"
	sb_wait_for 5 grep -q "the jail template server (pid $tsrv) ended" "$SB_DIR/log/daemon.log"
	for p in 1 2 3; do
		run --separate-stderr as_t 30 "$SB_ALICE" sh -c "echo call-$p"
		[ "$status" -eq 0 ] && [ "$output" = "call-$p" ]
	done
	sb_wait_for 5 eval "pgrep -P $SB_PID -x sb-jail-tmpl >/dev/null"
	srv2=$(pgrep -P "$SB_PID" -x sb-jail-server)
	[ -n "$srv2" ] && [ "$srv2" != "$srv" ]
	tsrv2=$(pgrep -P "$SB_PID" -x sb-jail-tmpl)
	[ -n "$tsrv2" ] && [ "$tsrv2" != "$tsrv" ]
	kill -0 "$SB_PID"
	# The finished jails' mount namespaces it was handed (DROP) are closed once it is
	# idle: it holds its socket to the daemon and nothing else.
	sb_wait_for 5 eval "[ \"\$(ls /proc/$srv2/fd)\" = 0 ]"
}

@test "pool: every call gets a jail of its own from the pool, and the pool refills" {
	local m=mk-pool-$RANDOM before tool init home1 home2
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c 'echo warm-up'
	sb_wait_for 5 eval "[ \$(sb_pool_pids $RUN_A | wc -l) -ge 2 ]"
	before=" $(sb_pool_pids "$RUN_A" | paste -sd' ') "
	as_t 40 "$SB_ALICE" sh -c "echo \$HOME; sleep 30; : $m" >"$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
	local bg=$!
	sb_wait_for 5 eval "pgrep -u $RUN_A -f -- '$m' >/dev/null"
	tool=$(pgrep -u "$RUN_A" -f -- "$m" | head -n 1)
	init=$(ps -o ppid= -p "$tool" | tr -d ' ')
	# The call's init was one of the waiting jails, and it is no longer waiting.
	[[ $before == *" $init "* ]]
	[[ " $(sb_pool_pids "$RUN_A" | paste -sd' ') " != *" $init "* ]]
	home1=$(head -n 1 "$BATS_TEST_TMPDIR/out")
	# A second call at the same time: another jail, another scratch dir; the first
	# call's directory and processes are not there for it.
	run --separate-stderr as_t 30 "$SB_ALICE" sh -c "echo \$HOME; ls -d '$home1' 2>&1;
		ls /proc | grep -c '^[0-9]'; pgrep -a sleep; echo end"
	[ "$status" -eq 0 ]
	home2=${lines[0]}
	[ "$home2" != "$home1" ]
	[[ ${lines[1]} == *"No such file or directory"* ]]
	[ "${lines[2]}" -le 5 ]
	[ "${lines[-1]}" = end ]
	[[ $output != *"sleep 30"* ]]
	kill "$bg" 2>/dev/null || true
	kill -KILL "$tool" 2>/dev/null || true
	wait "$bg" 2>/dev/null || true
	# Both calls' directories are gone once they end; the pool is full again, with
	# neither call's init in it (a jail serves one call only).
	sb_wait_for 5 eval "[ ! -e '$home1' ] && [ ! -e '$home2' ]"
	sb_wait_for 5 eval "[ \$(sb_pool_pids $RUN_A | wc -l) -ge 2 ]"
	[[ " $(sb_pool_pids "$RUN_A" | paste -sd' ') " != *" $init "* ]]
}

@test "pool: a reload that removes a session tears its waiting jails down; the rest rebuild" {
	run --separate-stderr as_t 30 "$SB_BOB" sh -c 'echo warm-up'
	[ "$status" -eq 0 ]
	sb_wait_for 5 pool_is "$RUN_B" 2 || { cat "$BATS_TEST_TMPDIR/pool.ps"; false; }
	local old
	old=$(sb_pool_pids "$RUN_B" | paste -sd' ')
	mv "$SB_DIR/etc/sessions.d/bob.json" "$SB_DIR/bob.json.off"
	sb_reload | grep -q '"ok":true'
	# No process of bob's runner is left, and no scratch dir of his jails.
	sb_wait_for 5 eval "[ -z \"\$(pgrep -u $RUN_B)\" ]"
	for p in $old; do
		run ! kill -0 "$p"
	done
	sb_wait_for 5 eval '[ -z "$(find "$(sb_dview "$SB_DIR/state/run")" -mindepth 1 -maxdepth 1 -user "$RUN_B")" ]'
	run --separate-stderr as_t 30 "$SB_BOB" sh -c 'echo hi'
	[ "$status" -ne 0 ]
	# Put bob back; his calls work again with fresh jails, then pooled ones.
	mv "$SB_DIR/bob.json.off" "$SB_DIR/etc/sessions.d/bob.json"
	sb_reload | grep -q '"ok":true'
	run --separate-stderr as_t 30 "$SB_BOB" sh -c 'echo back'
	[ "$status" -eq 0 ]
	[ "$output" = back ]
	sb_wait_for 5 pool_is "$RUN_B" 2 || { cat "$BATS_TEST_TMPDIR/pool.ps"; tail "$SB_DIR/log/daemon.log"; false; }
	run --separate-stderr as_t 30 "$SB_BOB" sh -c 'echo pooled'
	[ "$output" = pooled ]
}
