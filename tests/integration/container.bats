#!/usr/bin/env bats
# Sandboxes in containers on the same kernel (issue 16 item 4): the agent runs in a
# user namespace (bubblewrap, every namespace unshared, no network at all) into which
# only the bridge's socket directory and the shim are mounted. The kernel reports the
# peer's uid translated into the daemon's namespace (SO_PEERCRED), so the session
# user's container works whatever uid it has inside, and a container of anyone else
# is refused, even when it is root inside or its uid is a subordinate id.

bats_require_minimum_version 1.5.0
load lib
load reach

SB_RUNNER=$SB_LANE-runner-ctr
BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-90}

setup_file() {
	command -v bwrap >/dev/null || skip "bubblewrap (bwrap) is not installed: sh tests/deps.sh"
	rc_setup_file
}

teardown_file() {
	rc_teardown_file
}

setup() {
	CT_OUT=$SB_DIR/ct-out.$BATS_TEST_NUMBER
	: >"$CT_OUT"
}

teardown() {
	local rc=0
	rc_no_token "$CT_OUT" || rc=1
	kill -0 "$SB_PID" 2>/dev/null || { echo "the daemon died" >&2; rc=1; }
	sb_reap
	return "$rc"
}

# ct_run USER INNER_ID CMD...: run CMD as USER inside a fresh bubblewrap container where
# USER is INNER_ID: all namespaces unshared (no network), /usr read-only, the socket
# directory at /run/shimbridge (the shim's default), the shim at /opt/shimbridge, a
# work directory (the user's, at /work). Output also goes to $CT_OUT.
ct_run() {
	local u=$1 id=$2 home work
	shift 2
	home=$(getent passwd "$u" | cut -d: -f6)
	work=$home/ctr-work
	runuser -u "$u" -- mkdir -p "$work"
	runuser -u "$u" -- chmod 700 "$work"
	[ -f "$work/gitconfig" ] || { rc_gitconfig "$work/gitconfig"; chown "$u:" "$work/gitconfig"; }
	(cd / && timeout -k 5 60 runuser -u "$u" -- env -i PATH=/usr/bin:/bin bwrap \
		--unshare-all --die-with-parent --uid "$id" --gid "$id" \
		--ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
		--symlink usr/lib64 /lib64 --symlink usr/sbin /sbin \
		--proc /proc --dev /dev --tmpfs /tmp \
		--ro-bind "$SB_DIR/run" /run/shimbridge \
		--ro-bind "$SB_DIR/bin/shimbridge-shim" /opt/shimbridge/shim \
		--symlink /opt/shimbridge/shim /opt/shimbridge/bin/gh \
		--symlink /opt/shimbridge/shim /opt/shimbridge/bin/git-remote-shimbridge \
		--bind "$work" /work --chdir /work \
		--clearenv --setenv HOME /work --setenv PATH /opt/shimbridge/bin:/usr/bin:/bin \
		--setenv LANG C.UTF-8 --setenv GIT_CONFIG_GLOBAL /work/gitconfig \
		--setenv GIT_TERMINAL_PROMPT 0 \
		-- "$@") 2>&1 | tee -a "$CT_OUT"
	return "${PIPESTATUS[0]}"
}

@test "the session user's container (root inside, no network) runs gh through the mounted socket" {
	local m uid
	uid=$(id -u "$SB_ALICE")
	m=$(sb_fakegh_count)
	run ct_run "$SB_ALICE" 0 sh -c 'id -u; ls /run/shimbridge; gh api user'
	echo "$output"
	[ "$status" = 0 ]
	[[ ${lines[0]} == 0 ]]
	[[ $output == *'"login":"octo-agent"'* ]]
	# the bridge saw the host uid, not the container's root
	sb_audit_grep 'r["event"] == "allowed" and r.get("tool") == "gh" and r.get("session") == "alice" and r.get("uid") == '"$uid"
	[ "$(sb_fakegh_count)" -gt "$m" ]
	run sb_audit_grep 'r.get("uid") == 0'
	[ "$status" = 1 ]
}

@test "git clone, commit and push from inside the container, through the shim as remote helper" {
	local br=ctr-$$-$BATS_TEST_NUMBER
	run ct_run "$SB_ALICE" 0 sh -ec "rm -rf demo
		git clone -q https://github.com/octo/demo.git demo
		cd demo
		cat README
		echo from-the-container >file
		git add file
		git commit -q -m 'from a container'
		git push -q origin HEAD:refs/heads/$br
		git ls-remote origin refs/heads/$br"
	echo "$output"
	[ "$status" = 0 ]
	[[ $output == *"hello from upstream"* ]]
	[[ $output == *"refs/heads/$br"* ]]
	git -C "$RC_UP/root/octo/demo.git" log -1 --format=%s "$br" | grep -q 'from a container'
	sb_audit_grep 'r.get("session") == "alice" and r.get("tool") == "git" and r["event"] == "done"'
}

@test "the same user as an unprivileged uid inside (1000) works too: identity is the host uid" {
	run ct_run "$SB_ALICE" 1000 sh -c 'id -u; gh api user'
	echo "$output"
	[ "$status" = 0 ]
	[[ ${lines[0]} == 1000 ]]
	[[ $output == *'"login":"octo-agent"'* ]]
}

@test "another user's container is refused, even as root inside" {
	local uid n
	uid=$(id -u "$SB_MALLORY")
	n=$(grep -c '"event":"refused"' "$SB_AUDIT" || true)
	run ct_run "$SB_MALLORY" 0 sh -c 'id -u; gh api user'
	echo "$output"
	[ "$status" -eq 120 ]	# the shim's "not a shimbridge session"
	[[ ${lines[0]} == 0 ]]
	[[ $output == *"not a shimbridge sandbox session"* ]]
	[ "$(grep -c '"event":"refused"' "$SB_AUDIT")" -eq $((n + 1)) ]
	sb_audit_grep 'r["event"] == "refused" and r.get("uid") == '"$uid"' and r.get("reason") == "uid has no session"'
}

@test "a subordinate uid (a rootless container's user mapped to 231072) is refused by the bridge" {
	local gid n
	gid=$(getent group "$SB_GROUP" | cut -d: -f3)
	n=$(grep -c '"event":"refused"' "$SB_AUDIT" || true)
	# the outer gid is the socket's group, so the socket file lets it connect: the
	# refusal is the bridge's, from the uid the kernel reports
	run env -i PATH=/usr/bin:/bin SHIMBRIDGE_SOCKET="$SB_SOCK" HOME=/ \
		"$PY" "$SB_FIXTURES/userns.py" 231072 "$gid" 1000 1000 -- "$SB_DIR/bin/gh" api user
	echo "$output"
	[ "$status" -eq 120 ]
	[[ $output == *"not a shimbridge sandbox session"* ]]
	[ "$(grep -c '"event":"refused"' "$SB_AUDIT")" -eq $((n + 1)) ]
	sb_audit_grep 'r["event"] == "refused" and r.get("uid") == 231072'
}
