#!/usr/bin/env bats
# Proves the fake GitHub Enterprise server (tests/fixtures/fakegh.py) works with the
# real gh CLI directly: no shimbridge involved. One server serves the whole file.

load lib	# sb_fakegh_kill; nothing of the bridge is used here

FIXTURES=$SB_FIXTURES
REPO=octo-org/widgets

setup_file() {
	command -v /usr/bin/gh >/dev/null || skip "gh not installed"
	command -v openssl >/dev/null || skip "openssl not installed"
	FAKEGH_DIR=$(mktemp -d "${BATS_RUN_TMPDIR:-/tmp}/fakegh.XXXXXX")
	export FAKEGH_DIR
	mkdir -p "$FAKEGH_DIR/work" "$FAKEGH_DIR/home" "$FAKEGH_DIR/ghconfig"
	sh "$FIXTURES/mkcerts.sh" "$FAKEGH_DIR/certs"
	export FAKEGH_TOKEN="fakegh-tok-$$-$RANDOM$RANDOM"
	# Token via a file so it does not show up in the server's argv.
	(umask 077 && printf '%s\n' "$FAKEGH_TOKEN" >"$FAKEGH_DIR/token")
	sb_bg /usr/bin/python3 "$FIXTURES/fakegh.py" --cert "$FAKEGH_DIR/certs/server.pem" \
		--key "$FAKEGH_DIR/certs/server.key" --token-file "$FAKEGH_DIR/token" \
		--port-file "$FAKEGH_DIR/port" --log "$FAKEGH_DIR/requests.log" \
		</dev/null >"$FAKEGH_DIR/server.out" 2>"$FAKEGH_DIR/server.err"
	echo $! >"$FAKEGH_DIR/pid"
	local _
	for _ in $(seq 100); do
		[ -s "$FAKEGH_DIR/port" ] && break
		kill -0 "$(cat "$FAKEGH_DIR/pid")" 2>/dev/null || break
		sleep 0.1
	done
	if [ ! -s "$FAKEGH_DIR/port" ]; then
		cat "$FAKEGH_DIR/server.err" >&2
		echo "fakegh did not start within 10 s" >&2
		return 1
	fi
	FAKEGH_PORT=$(cat "$FAKEGH_DIR/port")
	export FAKEGH_PORT
}

teardown_file() {
	if [ -n "${FAKEGH_DIR:-}" ]; then
		sb_fakegh_kill "$FAKEGH_DIR"
		rm -rf "$FAKEGH_DIR"
	fi
	sb_reap_suite
}

teardown() {
	sb_reap
}

# ghx [VAR=VALUE...] ARGS... — run the real gh against fakegh, in an empty directory
# with a clean environment; leading VAR=VALUE words override that environment.
ghx() {
	local envs=()
	while [ $# -gt 0 ] && [[ $1 == [A-Z]*=* ]]; do
		envs+=("$1")
		shift
	done
	(cd "$FAKEGH_DIR/work" && exec env -i PATH=/usr/bin:/bin HOME="$FAKEGH_DIR/home" \
		GH_HOST="localhost:$FAKEGH_PORT" GH_ENTERPRISE_TOKEN="$FAKEGH_TOKEN" \
		SSL_CERT_FILE="$FAKEGH_DIR/certs/ca.pem" GH_CONFIG_DIR="$FAKEGH_DIR/ghconfig" \
		GH_PROMPT_DISABLED=1 GH_NO_UPDATE_NOTIFIER=1 NO_COLOR=1 GH_PAGER=cat \
		"${envs[@]}" /usr/bin/gh "$@")
}

# mark — print the number of requests logged so far.
mark() {
	wc -l <"$FAKEGH_DIR/requests.log"
}

# assert_log FROM OK AUTH [NAME...] — every request logged after line FROM has
# auth_ok == OK (true/false) and the raw Authorization header AUTH ("" = absent),
# at least one request was logged, and each NAME ("METHOD /path" or a GraphQL
# operation name) is among them.
assert_log() {
	/usr/bin/python3 - "$FAKEGH_DIR/requests.log" "$@" <<'EOF'
import json, sys
path, start, want_ok, want_auth, names = (sys.argv[1], int(sys.argv[2]),
                                          sys.argv[3] == "true", sys.argv[4] or None,
                                          sys.argv[5:])
with open(path) as f:
    lines = f.read().splitlines()[start:]
if not lines:
    sys.exit("no requests were logged")
seen = set()
for line in lines:
    e = json.loads(line)
    if e["auth_ok"] is not want_ok or e["authorization"] != want_auth:
        sys.exit("unexpected log entry: %s" % line)
    seen.add("%s %s" % (e["method"], e["path"]))
    if e.get("graphql"):
        seen.add(e["graphql"])
missing = [n for n in names if n not in seen]
if missing:
    sys.exit("not logged: %s\nlog:\n%s" % (missing, "\n".join(lines)))
EOF
}

@test "mkcerts.sh: CA + localhost cert, right modes, idempotent" {
	local d="$FAKEGH_DIR/certs"
	[ "$(stat -c %a "$d/ca.key")" = 600 ]
	[ "$(stat -c %a "$d/server.key")" = 600 ]
	[ "$(stat -c %a "$d/ca.pem")" = 644 ]
	[ "$(stat -c %a "$d/server.pem")" = 644 ]
	openssl verify -CAfile "$d/ca.pem" -purpose sslserver "$d/server.pem"
	run openssl x509 -in "$d/server.pem" -noout -ext subjectAltName
	[[ $output == *"DNS:localhost"* && $output == *"IP Address:127.0.0.1"* ]]
	local before
	before=$(cat "$d"/*.pem "$d"/*.key | sha256sum)
	run sh "$FIXTURES/mkcerts.sh" "$d"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[ "$(cat "$d"/*.pem "$d"/*.key | sha256sum)" = "$before" ]
}

@test "gh api user" {
	local m
	m=$(mark)
	run ghx api user
	[ "$status" -eq 0 ]
	[[ $output == *'"login":"octo-agent"'* ]]
	assert_log "$m" true "token $FAKEGH_TOKEN" "GET /api/v3/user"
}

@test "gh api repos/OWNER/REPO" {
	local m
	m=$(mark)
	run ghx api "repos/$REPO" --jq .full_name
	[ "$status" -eq 0 ]
	[ "$output" = "$REPO" ]
	assert_log "$m" true "token $FAKEGH_TOKEN" "GET /api/v3/repos/$REPO"
}

@test "gh repo view" {
	local m
	m=$(mark)
	run ghx repo view "$REPO"
	[ "$status" -eq 0 ]
	[[ $output == *"name:	$REPO"* ]]
	assert_log "$m" true "token $FAKEGH_TOKEN" RepositoryInfo "GET /api/v3/repos/$REPO/readme"
}

@test "gh pr list" {
	local m
	m=$(mark)
	run ghx pr list -R "$REPO"
	[ "$status" -eq 0 ]
	[[ $output == *"1	Add widget support	feature/widgets	OPEN"* ]]
	assert_log "$m" true "token $FAKEGH_TOKEN" PullRequestList
}

@test "gh pr view 1" {
	local m
	m=$(mark)
	run ghx pr view 1 -R "$REPO"
	[ "$status" -eq 0 ]
	[[ $output == *"title:	Add widget support"* ]]
	[[ $output == *"url:	https://localhost:$FAKEGH_PORT/$REPO/pull/1"* ]]
	assert_log "$m" true "token $FAKEGH_TOKEN" PullRequestByNumber
}

@test "gh pr create, then gh pr list and gh pr view show it" {
	local m
	m=$(mark)
	run ghx pr create -R "$REPO" --title "Agent PR" --body "made by fakegh.bats" \
		--head agent/branch --base main
	[ "$status" -eq 0 ]
	[[ $output =~ https://localhost:$FAKEGH_PORT/$REPO/pull/([0-9]+) ]]
	local n=${BASH_REMATCH[1]}
	[ "$n" -ge 2 ]
	assert_log "$m" true "token $FAKEGH_TOKEN" RepositoryInfo PullRequestForBranch PullRequestCreate
	run ghx pr list -R "$REPO"
	[ "$status" -eq 0 ]
	[[ $output == *"$n	Agent PR	agent/branch	OPEN"* ]]
	run ghx pr view "$n" -R "$REPO"
	[ "$status" -eq 0 ]
	[[ $output == *"made by fakegh.bats"* ]]
	# Same head again: gh itself refuses, as it does against github.com.
	run ghx pr create -R "$REPO" --title again --body x --head agent/branch --base main
	[ "$status" -ne 0 ]
	[[ $output == *"already exists"* ]]
}

@test "gh pr comment 1" {
	local m
	m=$(mark)
	run ghx pr comment 1 -R "$REPO" --body "LGTM from the agent"
	[ "$status" -eq 0 ]
	[[ $output == *"https://localhost:$FAKEGH_PORT/$REPO/pull/1#issuecomment-"* ]]
	assert_log "$m" true "token $FAKEGH_TOKEN" PullRequestByNumber CommentCreate
	run ghx pr view 1 -R "$REPO" --comments
	[[ $output == *"LGTM from the agent"* ]]
}

@test "gh issue list" {
	local m
	m=$(mark)
	run ghx issue list -R "$REPO"
	[ "$status" -eq 0 ]
	[[ $output == *"1	OPEN	Widgets crash on empty input	bug"* ]]
	assert_log "$m" true "token $FAKEGH_TOKEN" IssueList
}

@test "gh issue view 1" {
	local m
	m=$(mark)
	run ghx issue view 1 -R "$REPO"
	[ "$status" -eq 0 ]
	[[ $output == *"title:	Widgets crash on empty input"* ]]
	[[ $output == *"state:	OPEN"* ]]
	assert_log "$m" true "token $FAKEGH_TOKEN" IssueByNumber
}

@test "gh issue create, then gh issue list shows it" {
	local m
	m=$(mark)
	run ghx issue create -R "$REPO" --title "Agent issue" --body "filed by fakegh.bats"
	[ "$status" -eq 0 ]
	[[ $output =~ https://localhost:$FAKEGH_PORT/$REPO/issues/([0-9]+) ]]
	local n=${BASH_REMATCH[1]}
	assert_log "$m" true "token $FAKEGH_TOKEN" RepositoryInfo IssueCreate
	run ghx issue list -R "$REPO"
	[ "$status" -eq 0 ]
	[[ $output == *"$n	OPEN	Agent issue"* ]]
}

@test "gh issue comment 1" {
	local m
	m=$(mark)
	run ghx issue comment 1 -R "$REPO" --body "agent was here"
	[ "$status" -eq 0 ]
	[[ $output == *"https://localhost:$FAKEGH_PORT/$REPO/issues/1#issuecomment-"* ]]
	assert_log "$m" true "token $FAKEGH_TOKEN" IssueByNumber CommentCreate
	run ghx issue view 1 -R "$REPO" --comments
	[[ $output == *"agent was here"* ]]
}

@test "GH_REPO=localhost:PORT/OWNER/REPO selects the repository" {
	run ghx GH_REPO="localhost:$FAKEGH_PORT/$REPO" pr list
	[ "$status" -eq 0 ]
	[[ $output == *"Add widget support"* ]]
}

@test "wrong token: gh fails and the log shows the mismatch (REST and GraphQL)" {
	local m
	m=$(mark)
	run ghx GH_ENTERPRISE_TOKEN=wrong-token api user
	[ "$status" -ne 0 ]
	[[ $output == *"Bad credentials"* ]]
	run ghx GH_ENTERPRISE_TOKEN=wrong-token pr list -R "$REPO"
	[ "$status" -ne 0 ]
	run ghx GH_ENTERPRISE_TOKEN=wrong-token issue create -R "$REPO" --title nope --body nope
	[ "$status" -ne 0 ]
	assert_log "$m" false "token wrong-token" "GET /api/v3/user" "POST /api/graphql"
	# Nothing was created by the rejected request.
	run ghx issue list -R "$REPO" --state all
	[[ $output != *nope* ]]
}

@test "GH_TOKEN is not used for an enterprise host: no Authorization header, 401" {
	local m
	m=$(mark)
	run ghx GH_ENTERPRISE_TOKEN= GH_TOKEN="$FAKEGH_TOKEN" api user
	[ "$status" -ne 0 ]
	assert_log "$m" false "" "GET /api/v3/user"
}

@test "unsupported GraphQL query gives a GraphQL error" {
	local m
	m=$(mark)
	run ghx api graphql -f query='query Bogus { enterprise(slug: "x") { name } }'
	[ "$status" -ne 0 ]
	[[ $output == *"fakegh: unsupported query Bogus"* ]]
	assert_log "$m" true "token $FAKEGH_TOKEN" Bogus
}

@test "fakegh exits 0 on SIGTERM" {
	local d="$FAKEGH_DIR/second" pid _ rc=0
	mkdir -p "$d"
	/usr/bin/python3 "$FIXTURES/fakegh.py" --cert "$FAKEGH_DIR/certs/server.pem" \
		--key "$FAKEGH_DIR/certs/server.key" --token t --port-file "$d/port" \
		--log "$d/log" </dev/null >/dev/null 2>"$d/err" 3>&- &
	pid=$!
	for _ in $(seq 100); do
		[ -s "$d/port" ] && break
		sleep 0.1
	done
	[ -s "$d/port" ]
	[ "$(cat "$d/port")" != "$FAKEGH_PORT" ]
	kill -TERM "$pid"
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ]
	[ ! -s "$d/err" ]
}
