#!/usr/bin/env bats
# The four ways a sandbox got the gh token out of the bridge (issue 10), each tried
# as an attacker in the sandbox would, with the real gh 2.23 against the fake GHE
# over TLS (tests/fixtures/fakegh.py, request bodies logged):
#   1. --jq / --template read gh's environment and transform the token;
#   2. file flags (--body-file, -F @file, --input) read host files such as
#      /proc/self/environ and post them;
#   3. one session's tool reads another session's child (/proc/PID/environ), mirror
#      or the state dir;
#   4. any transformation of the token (reversed, shifted, hex, spaced, base64 ...)
#      in anything that reaches the sandbox or leaves in a request.
# Every sandbox-side output is kept in $T/sandbox.out; the last test scans it, and
# the server's log without the Authorization header, with tests/fixtures/leakscan.py.
#
# LEAKS_PENDING lists features not on this branch yet; tests that need one skip and
# say so. Run "LEAKS_PENDING= bats leaks.bats" to try everything.
#   jail    per-call jails and per-session runners (helper "jail", issue 10.3)

bats_require_minimum_version 1.5.0
load lib

FIXTURES=$SB_FIXTURES
LEAKS_PENDING=${LEAKS_PENDING-}

# Skip (saying why) when a test needs a feature listed in LEAKS_PENDING.
leaks_needs() {
	case " $LEAKS_PENDING " in
	*" $1 "*) skip "needs '$1', not on this branch yet (LEAKS_PENDING=\"$LEAKS_PENDING\")" ;;
	esac
}

setup_file() {
	[ -x /usr/bin/gh ] || skip "gh is not installed"
	command -v openssl >/dev/null || skip "openssl is not installed"
	sb_users
	sb_tree
	T=$SB_DIR/t
	mkdir -m 700 "$T"
	: >"$T/sandbox.out"
	export T
	TOKEN="ghe_lk$(od -An -N18 -tx1 /dev/urandom | tr -d ' \n')"
	export TOKEN
	sb_fakegh_start "$TOKEN" --log-bodies
	chmod 644 "$FAKEGH_CA"
	(umask 077 && printf '%s\n' "$TOKEN" >"$SB_DIR/etc/github.token")
	sb_shim_links gh slowgh peek
	sb_config <<EOF
{
	$(sb_config_head)
	"secrets": {"github": {"source": "file", "path": "$SB_DIR/etc/github.token"}},
	"tools": {
		"gh": {"path": "/usr/bin/gh", "profile": "gh", "host": "localhost:$FAKEGH_PORT",
			"ca_file": "$FAKEGH_CA", "secrets": {"GH_ENTERPRISE_TOKEN": "github"}},
		"slowgh": {"path": "$FIXTURES/tools/slowgh", "profile": "gh",
			"host": "localhost:$FAKEGH_PORT", "ca_file": "$FAKEGH_CA",
			"secrets": {"GH_ENTERPRISE_TOKEN": "github"}, "env": {"SLOWGH_GATE": "stdin"}},
		"peek": {"path": "/bin/cat", "rules": [{"allow": ["**"]}]}
	}
}
EOF
	sb_session alice "$SB_ALICE" '["gh", "slowgh"]' '"repos": ["octo/repo"]'
	sb_session bob "$SB_BOB" '["gh", "peek"]' '"repos": ["octo/bob"]'
	sb_start
	# Something of alice's that lives where the runner keeps per-session data: a
	# mirror, as the git leg leaves it (runner-owned, private).
	MIRROR=$SB_DIR/state/mirrors/alice/localhost/octo/repo.git
	mkdir -p "$MIRROR"
	printf 'secret-of-alice %s\n' "$TOKEN" >"$MIRROR/config"
	chown -R "$SB_RUNNER" "$SB_DIR/state/mirrors"
	chmod -R go-rwx "$SB_DIR/state/mirrors"
	export MIRROR
}

teardown_file() {
	local rc=0
	sb_stop || rc=$?
	sb_fakegh_stop
	[ -n "${SB_DIR:-}" ] && rm -rf "$SB_DIR"
	as "$SB_ALICE" rm -f PR.md 2>/dev/null || true
	sb_reap_suite
	return "$rc"
}

teardown() {
	sb_reap
}

# lk USER ARGS... — run a sandbox command as USER from its home; sets status/output
# and keeps the output for the final scan.
lk() {
	local u=$1
	shift
	run as "$u" timeout 30 "$@"
	{ printf '### %s: %s\n' "$u" "$*"; printf '%s\n' "$output"; } >>"$T/sandbox.out"
}

# no_leak TEXT-FILE... — leakscan over files (and the server log, minus Authorization).
no_leak() {
	"$PY" "$FIXTURES/leakscan.py" "$TOKEN" --fakegh-log "$FAKEGH_LOG" "$@"
}

# The requests the server logged since line FROM, as JSON lines.
since() {
	tail -n +"$(($1 + 1))" "$FAKEGH_LOG"
}

@test "class 1: --jq and --template cannot read gh's environment (refused, nothing sent)" {
	local from a
	from=$(sb_fakegh_count)
	while IFS= read -r a; do
		# shellcheck disable=SC2086 # word splitting is the point: one argv per line
		eval "set -- $a"
		lk "$SB_ALICE" gh "$@"
		[ "$status" -eq 126 ] || { echo "gh $a: status $status: $output" >&2; return 1; }
		[[ $output == *"pipe the output to jq in the sandbox"* ]]
	done <<'EOF'
api user --jq '$ENV.GH_ENTERPRISE_TOKEN'
api user --jq='$ENV | tostring | explode | reverse | implode'
api user -q 'env.GH_ENTERPRISE_TOKEN | @base64'
api user -q.login
api user --template '{{ range $k, $v := . }}{{ $k }}{{ end }}'
api user -t '{{.login}}'
pr list -R octo/repo --json title --jq '[env[]] | join(" ")'
issue list -R octo/repo --json title --template='{{ . }}'
repo view octo/repo --json name -q '$ENV'
search issues x --json title -q '$ENV'
run list -R octo/repo --json name -t '{{ . }}'
pr view 1 -R octo/repo --json body --jq '.body'
-- api user --jq '$ENV'
EOF
	[ "$(sb_fakegh_count)" -eq "$from" ]
}

@test "class 2: --body-file names the sandbox's file: /proc/self/environ is the shim's own" {
	local from
	from=$(sb_fakegh_count)
	lk "$SB_ALICE" gh issue create -R octo/repo -t "environ" --body-file /proc/self/environ
	# The shim reads the file as the sandbox user: it is the shim's environment. Its
	# NUL separators make the injector's HTTP policy refuse the body (a NUL could hide
	# a qualifier from it), so either that refusal came back and nothing reached the
	# server, or what was posted is the shim's environment - never gh's.
	if [ "$status" -ne 0 ]; then
		[[ $output == *"shimbridge: "* ]] || { echo "$output" >&2; return 1; }
		if since "$from" | grep -q 'SHIMBRIDGE_SOCKET'; then
			echo "the refused body reached the server" >&2
			return 1
		fi
	else
		since "$from" | grep -q 'SHIMBRIDGE_SOCKET='
	fi
	if since "$from" | grep -q 'GH_ENTERPRISE_TOKEN\|GH_CONFIG_DIR'; then
		echo "gh's own environment was posted" >&2
		return 1
	fi
	no_leak
}

@test "class 2: host files the sandbox cannot read are refused, nothing is posted" {
	local from f
	from=$(sb_fakegh_count)
	for f in "$SB_DIR/etc/github.token" "$SB_CONFIG" "$MIRROR/config" "$SB_AUDIT"; do
		lk "$SB_ALICE" gh issue comment 1 -R octo/repo --body-file "$f"
		[ "$status" -eq 126 ] || { echo "--body-file $f: status $status: $output" >&2; return 1; }
		[[ $output == *"--body-file $f"* ]]
		[[ $output == *"Nothing was run"* ]]
	done
	lk "$SB_ALICE" gh issue comment 1 -R octo/repo --body-file /nonexistent/body.md
	[ "$status" -eq 126 ]
	[[ $output == *"no such file"* ]]
	lk "$SB_ALICE" gh issue comment 1 -R octo/repo --body-file /dev/zero
	[ "$status" -eq 126 ]
	[[ $output == *"not a regular file"* ]]
	[ "$(sb_fakegh_count)" -eq "$from" ]
}

@test "class 2: the shim sends only regular files, at most 1 MiB each, 4 MiB per command" {
	local from
	from=$(sb_fakegh_count)
	as "$SB_ALICE" sh -c 'rm -f fifo big b1 b2 b3 b4 b5 && mkfifo fifo && mkdir -p adir &&
		head -c 1048577 /dev/zero | tr "\0" x >big &&
		for f in b1 b2 b3 b4 b5; do head -c 900000 /dev/zero | tr "\0" y >$f; done'
	# A FIFO must neither block the shim nor be read.
	lk "$SB_ALICE" gh issue comment 1 -R octo/repo --body-file fifo
	[ "$status" -eq 126 ]
	[[ $output == *"not a regular file"* ]]
	lk "$SB_ALICE" gh issue comment 1 -R octo/repo --body-file adir
	[ "$status" -eq 126 ]
	[[ $output == *"not a regular file"* ]]
	lk "$SB_ALICE" gh issue comment 1 -R octo/repo --body-file big
	[ "$status" -eq 126 ]
	[[ $output == *"larger than the bridge takes"* ]]
	lk "$SB_ALICE" gh issue create -R octo/repo -t x -F b1 --recover b2 -F b3 -F b4 -F b5
	[ "$status" -eq 126 ]
	[[ $output == *"larger than the bridge takes"* ]]
	[ "$(sb_fakegh_count)" -eq "$from" ]
	as "$SB_ALICE" rm -rf fifo big adir b1 b2 b3 b4 b5
}

@test "class 2: gh api -F key=@FILE and --input read the sandbox's file" {
	local from
	from=$(sb_fakegh_count)
	# The sandbox's file, as in the test above: posted as the shim's environment, or
	# refused by the injector's policy (NUL bytes) with nothing sent upstream.
	lk "$SB_ALICE" gh api -X GET search/issues -F q=@/proc/self/environ
	if [ "$status" -ne 0 ]; then
		[[ $output == *"shimbridge: "* ]] || { echo "$output" >&2; return 1; }
		[ "$(sb_fakegh_count)" -eq "$from" ]
	else
		since "$from" | grep -q 'SHIMBRIDGE_SOCKET'
	fi
	as "$SB_ALICE" sh -c 'printf "repo:octo/repo from-the-sandbox" > q.txt'
	lk "$SB_ALICE" gh api -X GET search/issues -F q=@q.txt
	[ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
	since "$from" | grep -q 'from-the-sandbox'
	as "$SB_ALICE" rm -f q.txt
	lk "$SB_ALICE" gh api -X GET repos/octo/repo/issues --input /proc/self/environ
	lk "$SB_ALICE" gh api -X GET search/issues -F "q=@$SB_DIR/etc/github.token"
	[ "$status" -eq 126 ]
	no_leak
}

@test "class 2: --body-file PR.md in the sandbox does what the agent expects" {
	local from
	from=$(sb_fakegh_count)
	as "$SB_ALICE" sh -c 'printf "Fixes the frobnicator.\n\nDetails: see commit.\n" >PR.md'
	lk "$SB_ALICE" gh pr comment 1 -R octo/repo --body-file PR.md
	[ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
	since "$from" | grep -q 'Fixes the frobnicator'
	lk "$SB_ALICE" gh pr comment 1 -R octo/repo --body-file - <<<"from stdin"
	[ "$status" -eq 0 ]
}

@test "class 2: a shim that never answers, or answers wrongly, loses only its own request" {
	local out from
	from=$(sb_fakegh_count)
	# No answer: cut off after the handshake timeout (10 s), nothing runs.
	out=$(as "$SB_ALICE" timeout 30 "$PY" "$FIXTURES/rawpeer.py" --timeout 20 hello \
	    'run=["gh","issue","comment","1","-R","octo/repo","--body-file","x.md"]' read read read)
	[[ $out == *"FILE_REQ x.md"* ]] || { echo "$out" >&2; return 1; }
	[[ $out == *'ERROR {"code":"protocol","message":"the file arguments did not arrive in time"}'* ]]
	# More bytes than FILE_END says, and data for a file nobody asked for.
	out=$(as "$SB_ALICE" timeout 30 "$PY" "$FIXTURES/rawpeer.py" --timeout 10 hello \
	    'run=["gh","issue","comment","1","-R","octo/repo","--body-file","x.md"]' read-hello \
	    'frame=0x13,abc' 'frame=0x14,{"status":"ok","size":2}' read)
	[[ $out == *'"code":"protocol"'* ]] || { echo "$out" >&2; return 1; }
	out=$(as "$SB_ALICE" timeout 30 "$PY" "$FIXTURES/rawpeer.py" --timeout 10 hello \
	    'run=["gh","pr","list","-R","octo/repo"]' 'frame=0x13,unasked' read)
	[[ $out == *'"code":"protocol"'* ]] || { echo "$out" >&2; return 1; }
	[ "$(sb_fakegh_count)" -eq "$from" ]
	# The bridge still serves the session.
	lk "$SB_ALICE" gh api user
	[ "$status" -eq 0 ]
}

@test "class 3: another session's tool cannot read alice's child, mirror or the state dir" {
	leaks_needs jail
	local pid p
	# alice's gh waits for its stdin, a FIFO held open here until bob has tried: its
	# process is alive, with the placeholder in its environment, for all of the test.
	sb_gate "$T/gate"
	sb_bg runuser -u "$SB_ALICE" -- env -i "HOME=/home/$SB_ALICE" PATH="$SB_DIR/bin:/usr/bin:/bin" \
	    SHIMBRIDGE_SOCKET="$SB_SOCK" LANG=C.UTF-8 slowgh api user <"$T/gate" >/dev/null 2>&1
	sb_wait_for 15 pgrep -u "$SB_RUNNER" -f slowgh >/dev/null
	pid=$(pgrep -u "$SB_RUNNER" -f slowgh | head -n 1)
	[ -n "$pid" ]
	for p in "/proc/$pid/environ" "/proc/$pid/cmdline" "$MIRROR/config" \
	    "$SB_DIR/state/run" "$SB_DIR/etc/github.token"; do
		lk "$SB_BOB" peek "$p"
		[ "$status" -ne 0 ] || { echo "bob's peek read $p" >&2; return 1; }
		sb_refute_contains "$TOKEN" "$output" "bob's peek $p"
	done
	# Nor through a file flag: bob's sandbox cannot read alice's runner process.
	lk "$SB_BOB" gh issue create -R octo/bob -t x --body-file "/proc/$pid/environ"
	[ "$status" -eq 126 ]
	# alice's process was there all along: refused, not merely gone.
	kill -0 "$pid"
	sb_gate_release
	no_leak "$T/sandbox.out"
}

@test "class 4: no transformation of the token in anything that reached the sandbox or left in a request" {
	local n
	# Try the transforming paths that are left once the flags are refused: post gh's
	# own environment and read it back, in the forms an attacker would use.
	lk "$SB_ALICE" gh issue create -R octo/repo -t "t4" --body-file /proc/self/environ
	n=$(printf '%s\n' "$output" | grep -o '[0-9]*$' | tail -n 1)
	if [ -n "$n" ]; then
		lk "$SB_ALICE" gh issue view "$n" -R octo/repo
		lk "$SB_ALICE" gh issue view "$n" -R octo/repo --json body
	fi
	# shellcheck disable=SC2016 # a jq expression, not shell
	lk "$SB_ALICE" gh api user --jq '$ENV.GH_ENTERPRISE_TOKEN | explode | map(. + 1) | implode'
	lk "$SB_ALICE" gh api -X GET repos/octo/repo/issues -F state=all
	# Everything any sandbox saw in this file, and every request minus Authorization.
	no_leak "$T/sandbox.out"
}
