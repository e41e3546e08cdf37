#!/usr/bin/env bats
# Remote sandboxes over SSH (issue 16 item 5): on the host, the session's own user
# ($SB_ALICE) runs `ssh -N` with a RemoteForward of the bridge socket to an account on
# the "remote machine" — here a loopback sshd started by this suite (its own config,
# host key and authorized key in a staged directory) and a second local account,
# $SB_LANE-remote. The bridge sees $SB_ALICE's uid (the ssh client's), so no new
# authentication is involved. The remote account runs gh and git through a shim
# pointed at the forwarded socket; another remote-side user cannot use it (sshd
# creates it 0600, StreamLocalBindMask 0177). The ssh client config is the one
# docs/REMOTE.md describes; the systemd unit that keeps it up passes systemd-analyze.

bats_require_minimum_version 1.5.0
load lib
load reach

SB_RUNNER=$SB_LANE-runner-rem
BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-90}
SSHD=/usr/sbin/sshd

setup_file() {
	[ -x "$SSHD" ] || skip "openssh-server is not installed: sh tests/deps.sh"
	rc_setup_file
	useradd -m -s /bin/bash "$SB_LANE-remote"
	usermod -p '*' "$SB_LANE-remote"	# not locked (sshd refuses "!"), no password either
	RM_HOME=$(getent passwd "$SB_LANE-remote" | cut -d: -f6)
	chmod 711 "$RM_HOME"
	# where the forwarded socket appears: a directory others may traverse, so that
	# only the socket's own mode keeps them out
	runuser -u "$SB_LANE-remote" -- mkdir -m 0711 "$RM_HOME/.shimbridge"
	RM_SOCK=$RM_HOME/.shimbridge/bridge.sock

	# sshd: own config, host key, privilege separation directory
	RM_D=$SB_DIR/sshd
	mkdir -m 700 "$RM_D"
	ssh-keygen -q -t ed25519 -N '' -f "$RM_D/host_ed25519"
	RM_PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	cat >"$RM_D/sshd_config" <<EOF
Port $RM_PORT
ListenAddress 127.0.0.1
HostKey $RM_D/host_ed25519
PidFile none
AllowUsers $SB_LANE-remote
AuthenticationMethods publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin no
AllowStreamLocalForwarding remote
StreamLocalBindUnlink yes
StreamLocalBindMask 0177
AllowTcpForwarding remote
PermitListen none
AllowAgentForwarding no
X11Forwarding no
PermitTTY no
PrintMotd no
LogLevel VERBOSE
EOF
	RM_MADE_PRIVSEP=0
	[ -d /run/sshd ] || { mkdir -m 755 /run/sshd; RM_MADE_PRIVSEP=1; }
	"$SSHD" -t -f "$RM_D/sshd_config"
	sb_bg "$SSHD" -D -e -f "$RM_D/sshd_config" </dev/null >"$RM_D/sshd.log" 2>&1
	echo $! >"$RM_D/pid"

	# the host side, as docs/REMOTE.md has it: a root-owned ssh config per session user,
	# with the key (owned by that user) and the known host beside it
	RM_ETC=$SB_DIR/remote
	mkdir -m 755 "$RM_ETC"
	ssh-keygen -q -t ed25519 -N '' -C "$SB_ALICE@host" -f "$RM_ETC/$SB_ALICE.key"
	chown "$SB_ALICE:" "$RM_ETC/$SB_ALICE.key"
	printf '[127.0.0.1]:%s %s\n' "$RM_PORT" "$(cut -d' ' -f1,2 "$RM_D/host_ed25519.pub")" \
		>"$RM_ETC/$SB_ALICE.known_hosts"
	cat >"$RM_ETC/$SB_ALICE.ssh_config" <<EOF
Host shimbridge-remote
	HostName 127.0.0.1
	Port $RM_PORT
	User $SB_LANE-remote
	IdentityFile $RM_ETC/$SB_ALICE.key
	IdentitiesOnly yes
	UserKnownHostsFile $RM_ETC/$SB_ALICE.known_hosts
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking yes
	RemoteForward $RM_SOCK $SB_SOCK
	ForwardAgent no
	ForwardX11 no
	PermitLocalCommand no
EOF
	chmod 644 "$RM_ETC/$SB_ALICE.ssh_config" "$RM_ETC/$SB_ALICE.known_hosts"
	# the remote account trusts the host's key, for forwarding only
	runuser -u "$SB_LANE-remote" -- mkdir -m 700 "$RM_HOME/.ssh"
	printf 'restrict,port-forwarding,command="/bin/false" %s\n' "$(cat "$RM_ETC/$SB_ALICE.key.pub")" \
		>"$RM_HOME/.ssh/authorized_keys"
	chown "$SB_LANE-remote:" "$RM_HOME/.ssh/authorized_keys"
	chmod 600 "$RM_HOME/.ssh/authorized_keys"
	sb_wait_for 10 "$PY" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$RM_PORT"

	# the remote account's git config and work area
	RM_WORK=$RM_HOME/work
	runuser -u "$SB_LANE-remote" -- mkdir -m 700 "$RM_WORK"
	rc_gitconfig "$RM_WORK/gitconfig"
	chown "$SB_LANE-remote:" "$RM_WORK/gitconfig"
	export RM_HOME RM_SOCK RM_D RM_PORT RM_ETC RM_WORK RM_MADE_PRIVSEP
	rm_forward
}

teardown_file() {
	rm_unforward
	[ -s "$RM_D/pid" ] && kill "$(cat "$RM_D/pid")" 2>/dev/null
	[ "${RM_MADE_PRIVSEP:-0}" = 1 ] && rmdir /run/sshd 2>/dev/null
	rc_teardown_file
}

setup() {
	RM_OUT=$SB_DIR/rm-out.$BATS_TEST_NUMBER
	: >"$RM_OUT"
}

teardown() {
	local rc=0
	rc_no_token "$RM_OUT" || rc=1
	kill -0 "$SB_PID" 2>/dev/null || { echo "the daemon died" >&2; rc=1; }
	return "$rc"
}

# Start the forward as the session user, exactly as the unit does (ssh -F CONFIG -N ...),
# and wait for the socket on the remote side.
rm_forward() {
	local old
	old=$(stat -c '%i %z' "$RM_SOCK" 2>/dev/null) || old=none
	(cd / && sb_bg runuser -u "$SB_ALICE" -- env -i PATH=/usr/bin:/bin HOME=/nonexistent \
		/usr/bin/ssh -F "$RM_ETC/$SB_ALICE.ssh_config" -N -T -o BatchMode=yes \
		-o ExitOnForwardFailure=yes -o ServerAliveInterval=15 -o ServerAliveCountMax=3 \
		shimbridge-remote </dev/null >>"$RM_D/ssh.log" 2>&1)
	sb_wait_for 20 eval '[ -S "$RM_SOCK" ] && [ "$(stat -c "%i %z" "$RM_SOCK")" != "'"$old"'" ]' || {
		cat "$RM_D/ssh.log" "$RM_D/sshd.log" >&2
		return 1
	}
	sb_wait_for 10 eval 'pgrep -u "$SB_ALICE" -x ssh >/dev/null'
}

# Stop the forward (the session user's ssh).
rm_unforward() {
	pkill -TERM -u "$SB_ALICE" -x ssh 2>/dev/null || true
	sb_wait_for 10 eval '! pgrep -u "$SB_ALICE" -x ssh >/dev/null' || true
}

# rm_as USER CMD...: run CMD on the "remote machine" as USER, with the shim pointed at
# the forwarded socket; output also in $RM_OUT.
rm_as() {
	local u=$1
	shift
	(cd "$RM_WORK" 2>/dev/null || cd /; timeout -k 5 60 runuser -u "$u" -- env -i \
		HOME="$RM_HOME" PATH="$SB_DIR/bin:/usr/bin:/bin" SHIMBRIDGE_SOCKET="$RM_SOCK" \
		LANG=C.UTF-8 GIT_CONFIG_GLOBAL="$RM_WORK/gitconfig" GIT_TERMINAL_PROMPT=0 \
		"$@") 2>&1 | tee -a "$RM_OUT"
	return "${PIPESTATUS[0]}"
}

@test "the forwarded socket: the remote account's, mode 0600 (StreamLocalBindMask)" {
	[ "$(stat -c '%U %a %F' "$RM_SOCK")" = "$SB_LANE-remote 600 socket" ]
}

@test "gh on the remote account runs through the forward as session alice" {
	local m uid
	uid=$(id -u "$SB_ALICE")
	m=$(sb_fakegh_count)
	run rm_as "$SB_LANE-remote" gh api user
	echo "$output"
	[ "$status" = 0 ]
	[[ $output == *'"login":"octo-agent"'* ]]
	[ "$(sb_fakegh_count)" -gt "$m" ]
	# the bridge's peer is the ssh client: $SB_ALICE's uid, session alice
	sb_audit_grep 'r["event"] == "allowed" and r.get("tool") == "gh" and r.get("session") == "alice" and r.get("uid") == '"$uid"
}

@test "git clone, commit and push on the remote account through the forward" {
	local br=remote-$$-$BATS_TEST_NUMBER
	run rm_as "$SB_LANE-remote" sh -ec "cd '$RM_WORK'
		rm -rf demo
		git clone -q https://github.com/octo/demo.git demo
		cd demo
		cat README
		echo from-the-remote >file
		git add file
		git commit -q -m 'from a remote machine'
		git push -q origin HEAD:refs/heads/$br"
	echo "$output"
	[ "$status" = 0 ]
	[[ $output == *"hello from upstream"* ]]
	git -C "$RC_UP/root/octo/demo.git" log -1 --format=%s "$br" | grep -q 'from a remote machine'
	sb_audit_grep 'r.get("session") == "alice" and r.get("tool") == "git" and r["event"] == "done"'
}

@test "another user on the remote side cannot use the forwarded socket" {
	local n
	n=$(wc -l <"$SB_AUDIT")
	# the directory lets them reach it; the socket's mode does not let them connect
	runuser -u "$SB_MALLORY" -- test -S "$RM_SOCK"
	run rm_as "$SB_MALLORY" gh api user
	echo "$output"
	[ "$status" -eq 122 ]	# the shim's "bridge unreachable or not allowed"
	[[ $output == *"ermission denied"* ]]
	run rm_as "$SB_BOB" gh api user
	[ "$status" -eq 122 ]
	# nothing reached the bridge
	[ "$(wc -l <"$SB_AUDIT")" -eq "$n" ]
}

@test "a dropped forward comes back over its stale socket (StreamLocalBindUnlink)" {
	rm_unforward
	[ -S "$RM_SOCK" ]	# sshd leaves the socket file behind
	run rm_as "$SB_LANE-remote" gh api user
	[ "$status" -eq 122 ]
	rm_forward
	run rm_as "$SB_LANE-remote" gh api user
	echo "$output"
	[ "$status" = 0 ]
	[[ $output == *'"login":"octo-agent"'* ]]
}

@test "the systemd unit that keeps the forward up passes systemd-analyze verify" {
	command -v systemd-analyze >/dev/null || skip "systemd-analyze not installed"
	local t
	t=$(mktemp -d "$SB_DIR/unit.XXXXXX")
	cp "$SB_ROOT/systemd/shimbridge-remote@.service" "$t/"
	run systemd-analyze verify "$t/shimbridge-remote@$SB_ALICE.service"
	echo "$output"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	grep -q '^User=%i$' "$t/shimbridge-remote@.service"
	grep -q '^Restart=always$' "$t/shimbridge-remote@.service"
	grep -q -- '-o ExitOnForwardFailure=yes' "$t/shimbridge-remote@.service"
	# its ssh command line is the one this suite runs
	grep -q -- '-F /etc/shimbridge/remote/%i.ssh_config -N -T -o BatchMode=yes -o ExitOnForwardFailure=yes -o ServerAliveInterval=15 -o ServerAliveCountMax=3 shimbridge-remote$' "$t/shimbridge-remote@.service"
}
