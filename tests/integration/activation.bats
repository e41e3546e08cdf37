#!/usr/bin/env bats
# Service-manager integration: systemd socket activation (LISTEN_FDS), readiness
# and reload notifications (NOTIFY_SOCKET), and refusal of abstract sockets.

load lib

setup_file() {
	sb_users
	SB_RUNNER=$SB_LANE-runner-act
	id "$SB_RUNNER" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$SB_RUNNER"
	export SB_RUNNER
	sb_tree
	sb_shim_links echo
	sb_config <<EOF2
{
	$(sb_config_head)
	"tools": {"echo": {"path": "/bin/echo", "rules": [{"allow": ["**"]}]}}
}
EOF2
	sb_session alice "$SB_ALICE" '["echo"]'
}

teardown_file() {
	pkill -KILL -u "$SB_RUNNER" 2>/dev/null || true
	userdel "$SB_RUNNER" >/dev/null 2>&1 || true
	rm -rf "$SB_DIR"
	sb_reap_suite
}

teardown() {
	[ -z "${ACT_PID:-}" ] || { kill "$ACT_PID" 2>/dev/null; wait "$ACT_PID" 2>/dev/null || true; }
	[ -z "${NOTIFY_PID:-}" ] || { kill "$NOTIFY_PID" 2>/dev/null; wait "$NOTIFY_PID" 2>/dev/null || true; }
	ACT_PID= NOTIFY_PID=
	sb_reap
}

# A datagram listener that appends each notification to a file, one per line.
notify_listener() {
	local sock=$1 out=$2
	sb_bg "$PY" - "$sock" "$out" <<'PYEOF'
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o600)
while True:
    data = s.recv(4096)
    with open(sys.argv[2], "a") as f:
        f.write(data.decode() + "\n")
PYEOF
	NOTIFY_PID=$!
	sb_wait_for 5 test -S "$sock"
}

@test "socket activation: the daemon serves on the socket systemd hands it, and leaves it in place" {
	local sock=$SB_DIR/run/activated.sock
	rm -f "$sock"
	systemd-socket-activate -l "$sock" "$SB_BUILD/shimbridged" -c "$SB_CONFIG" \
		>>"$SB_DIR/log/act.log" 2>&1 &
	ACT_PID=$!
	sb_wait_for 5 test -S "$sock"
	chgrp "$SB_GROUP" "$sock"
	chmod 0660 "$sock"
	run as_t 30 "$SB_ALICE" env SHIMBRIDGE_SOCKET="$sock" echo hello activated
	[ "$status" -eq 0 ]
	[ "$output" = "hello activated" ]
	# The configured socket was not created: the activated one was used instead.
	[ ! -e "$SB_SOCK" ]
	kill "$ACT_PID"
	wait "$ACT_PID" || true
	ACT_PID=
	# Whoever bound the socket owns it: the daemon does not unlink it.
	[ -S "$sock" ]
}

@test "sd_notify: READY=1 at start, RELOADING=1 then READY=1 on SIGHUP, STOPPING=1 on SIGTERM" {
	local nsock=$SB_DIR/run/notify.sock out=$SB_DIR/log/notify.out
	rm -f "$nsock" "$out"
	notify_listener "$nsock" "$out"
	NOTIFY_SOCKET=$nsock "$SB_BUILD/shimbridged" -c "$SB_CONFIG" >>"$SB_DIR/log/daemon.log" 2>&1 &
	ACT_PID=$!
	sb_wait_for 5 grep -qx READY=1 "$out"
	kill -HUP "$ACT_PID"
	sb_wait_for 5 eval '[ "$(grep -c . "$out")" -ge 3 ]'
	run sed -n '2,3p' "$out"
	[ "${lines[0]}" = RELOADING=1 ]
	[ "${lines[1]}" = READY=1 ]
	run as_t 30 "$SB_ALICE" echo after reload
	[ "$output" = "after reload" ]
	kill -TERM "$ACT_PID"
	wait "$ACT_PID"
	ACT_PID=
	sb_wait_for 5 grep -qx STOPPING=1 "$out"
}

@test "an abstract socket from the service manager is refused: the daemon does not start" {
	local name=$SB_LANE-abstract-$$ out=$SB_DIR/log/abstract.out rc=0
	# systemd-socket-activate execs the daemon when the first connection arrives.
	timeout 10 systemd-socket-activate -l "@$name" "$SB_BUILD/shimbridged" -c "$SB_CONFIG" \
		>"$out" 2>&1 &
	ACT_PID=$!
	sb_wait_for 5 grep -q "Listening on" "$out"
	"$PY" -c "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect('\0' + sys.argv[1]); s.settimeout(5); s.recv(1)" "$name" || true
	wait "$ACT_PID" || rc=$?
	ACT_PID=
	[ "$rc" -eq 2 ]
	grep -q "abstract or unnamed socket; only pathname sockets are accepted" "$out"
}

@test "started by hand: the daemon creates its missing socket directory (root, 0755); refuses one owned by another user or a symlink" {
	local rt=$SB_DIR/rt cfg=$SB_DIR/etc/rt.json
	rm -rf "$rt"
	sed "s|\"$SB_SOCK\"|\"$rt/bridge.sock\"|" "$SB_CONFIG" >"$cfg"
	chmod 600 "$cfg"
	grep -qF "\"$rt/bridge.sock\"" "$cfg"
	# As under systemd's UMask=0077: the directory still ends up 0755.
	umask 077
	"$SB_BUILD/shimbridged" -c "$cfg" >>"$SB_DIR/log/rt.log" 2>&1 &
	ACT_PID=$!
	sb_wait_for 5 test -S "$rt/bridge.sock"
	[ "$(stat -c '%u %a %F' "$rt")" = "0 755 directory" ]
	run as_t 30 "$SB_ALICE" env SHIMBRIDGE_SOCKET="$rt/bridge.sock" echo started by hand
	[ "$status" -eq 0 ]
	[ "$output" = "started by hand" ]
	kill -TERM "$ACT_PID"
	wait "$ACT_PID" || true
	ACT_PID=
	# A directory someone else owns: refused, no socket made in it.
	rm -rf "$rt"
	mkdir -m 755 "$rt"
	chown "$SB_ALICE" "$rt"
	run timeout 10 "$SB_BUILD/shimbridged" -c "$cfg"
	[ "$status" -ne 0 ]
	[[ $output == *"socket directory $rt is owned by uid $(id -u "$SB_ALICE"), not root"* ]]
	[ ! -e "$rt/bridge.sock" ]
	# A symbolic link, even to a good directory: refused.
	rm -rf "$rt"
	ln -s "$SB_DIR/run" "$rt"
	run timeout 10 "$SB_BUILD/shimbridged" -c "$cfg"
	[ "$status" -ne 0 ]
	[[ $output == *"socket directory $rt is a symbolic link"* ]]
	[ ! -e "$SB_DIR/run/bridge.sock" ]
	rm -f "$rt" "$cfg"
}
