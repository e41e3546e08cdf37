# Shared by container.bats and remote.bats (issue 16 items 4 and 5): one daemon with
# a gh tool against the fake GitHub Enterprise API (tests/fixtures/fakegh.py) and git
# hosts against a loopback smart-HTTP upstream (tests/fixtures/githttp.py) holding
# octo/demo; session alice ($SB_ALICE) may use gh and git on octo/demo. The shim is
# linked as gh and git-remote-shimbridge in $SB_DIR/bin.
#
# rc_setup_file    users, tree, upstreams, config, daemon (call from setup_file)
# rc_teardown_file stops them all
# rc_gitconfig F   a git config for a sandbox that sends github.com through the shim

# Start everything; exports RC_TOKEN, RC_GIT_TOKEN, RC_UP (upstream dir), FAKEGH_*.
rc_setup_file() {
	sb_build_resolve
	sb_users
	sb_tree
	sb_shim_links gh git-remote-shimbridge
	RC_UP=$SB_DIR/up
	mkdir -p "$RC_UP/root/octo"
	chmod 700 "$RC_UP"
	RC_TOKEN="ghp_rc$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
	RC_GIT_TOKEN="ghp_rcg$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
	(umask 077 && printf '%s\n' "$RC_TOKEN" >"$SB_DIR/etc/gh.token" &&
		printf '%s' "$RC_GIT_TOKEN" >"$SB_DIR/etc/git.token" &&
		printf '%s' "$RC_GIT_TOKEN" >"$RC_UP/token")
	git init -q --bare -b main "$RC_UP/root/octo/demo.git"
	git init -q -b main "$RC_UP/seed"
	printf 'hello from upstream\n' >"$RC_UP/seed/README"
	git -C "$RC_UP/seed" add README
	git -C "$RC_UP/seed" -c user.name=Up -c user.email=up@example.com commit -q -m init
	git -C "$RC_UP/seed" push -q "$RC_UP/root/octo/demo.git" main
	sb_bg "$PY" "$SB_FIXTURES/githttp.py" --root "$RC_UP/root" --token-file "$RC_UP/token" \
		--port-file "$RC_UP/port" --log "$RC_UP/requests.log" \
		</dev/null >"$RC_UP/server.out" 2>&1
	echo $! >"$RC_UP/pid"
	sb_fakegh_start "$RC_TOKEN"
	sb_wait_for 10 test -s "$RC_UP/port"
	# The git helper is never the sanitized one: ASan cannot map its shadow memory under
	# the RLIMIT_AS the daemon gives its children (as in gitbridge.bats).
	local helper=$SB_BUILD/shimbridge-git
	case $SB_BUILD in */san) helper=${SB_BUILD%/san}/shimbridge-git ;; esac
	mkdir -p "$SB_DIR/libexec"
	install -m 0755 "$helper" "$SB_DIR/libexec/shimbridge-git"
	sb_config <<EOF
{ $(sb_config_head)
  "secrets": {"github": {"source": "file", "path": "$SB_DIR/etc/gh.token"},
              "gitup": {"source": "file", "path": "$SB_DIR/etc/git.token"}},
  "tools": {
    "gh": {"path": "/usr/bin/gh", "profile": "gh", "host": "localhost:$FAKEGH_PORT",
           "secrets": {"GH_ENTERPRISE_TOKEN": "github"},
           "env": {"SSL_CERT_FILE": "$FAKEGH_CA"}, "expose": ["$FAKEGH_CA"]}
  },
  "git": {"path": "/usr/bin/git", "helper": "$SB_DIR/libexec/shimbridge-git",
          "hosts": {"github.com": {"upstream": "http://127.0.0.1:$(cat "$RC_UP/port")", "secret": "gitup"}},
          "timeout": 60}
}
EOF
	sb_session alice "$SB_ALICE" '["gh", "git"]' '"repos": ["octo/demo"]'
	sb_start 3>&-
	echo "$SB_PID" >"$SB_DIR/daemon.pid"
	export RC_TOKEN RC_GIT_TOKEN RC_UP SB_PID
}

# Stop the daemon and the upstreams.
rc_teardown_file() {
	local rc=0
	SB_PID=$(cat "$SB_DIR/daemon.pid" 2>/dev/null)
	sb_stop || rc=$?
	sb_fakegh_stop
	[ -s "$RC_UP/pid" ] && kill "$(cat "$RC_UP/pid")" 2>/dev/null
	pkill -KILL -u "$SB_RUNNER" 2>/dev/null || true
	sb_users_remove
	rm -rf "$SB_DIR"
	sb_reap_suite
	return "$rc"
}

# Write a sandbox git config (identity, github.com through the shim) to file $1.
rc_gitconfig() {
	cat >"$1" <<'EOF'
[user]
	name = Agent
	email = agent@sandbox.example
[url "shimbridge::https://github.com/"]
	insteadOf = https://github.com/
[init]
	defaultBranch = main
[advice]
	detachedHead = false
EOF
}

# No token in the given files (what the sandbox saw).
rc_no_token() {
	! grep -qF -e "$RC_TOKEN" -e "$RC_GIT_TOKEN" "$@" || { echo "TOKEN LEAKED" >&2; return 1; }
}
