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
	# GitHub App mode on too (app 12345, installations 678 = every repository of
	# octo-app, 679 = other-org's x and y): the static token must work as before.
	sh "$FIXTURES/mkappkey.sh" "$FAKEGH_DIR/keys"
	# Bare repositories for the git servers (githttp.py, and fakegh.py's --git-root).
	local g=$FAKEGH_DIR/git r
	mkdir -p "$g/root/octo-app" "$g/root/other-org"
	for r in octo-app/alpha octo-app/beta other-org/x; do
		git init -q --bare -b main "$g/root/$r.git"
	done
	sb_bg /usr/bin/python3 "$FIXTURES/fakegh.py" --cert "$FAKEGH_DIR/certs/server.pem" \
		--key "$FAKEGH_DIR/certs/server.key" --token-file "$FAKEGH_DIR/token" \
		--port-file "$FAKEGH_DIR/port" --log "$FAKEGH_DIR/requests.log" \
		--app-id 12345 --app-public-key "$FAKEGH_DIR/keys/app.pub" \
		--app-installation 678:octo-app --app-installation 679:other-org:x,y \
		--app-token-ttl 600 --app-state "$FAKEGH_DIR/app-state.json" \
		--app-fail-file "$FAKEGH_DIR/mint-fails" \
		--app-reveal-tokens "$FAKEGH_DIR/revealed" \
		--git-root "$g/root" --git-log "$FAKEGH_DIR/git-own.log" \
		--connect-delay-file "$FAKEGH_DIR/connect-delay" \
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
	# The git server: the static token, and the app tokens of fakegh's state file.
	sb_bg /usr/bin/python3 "$FIXTURES/githttp.py" --root "$g/root" \
		--token-file "$FAKEGH_DIR/token" --app-state "$FAKEGH_DIR/app-state.json" \
		--cert "$FAKEGH_DIR/certs/server.pem" --key "$FAKEGH_DIR/certs/server.key" \
		--port-file "$g/port" --log "$g/requests.log" --delay-file "$g/delay" \
		--connect-delay-file "$g/connect-delay" </dev/null >"$g/out" 2>"$g/err"
	echo $! >"$g/pid"
	for _ in $(seq 100); do
		[ -s "$g/port" ] && break
		sleep 0.1
	done
	[ -s "$g/port" ] || { cat "$g/err" >&2; return 1; }
	GIT_PORT=$(cat "$g/port")
	export GIT_PORT
}

teardown_file() {
	if [ -n "${FAKEGH_DIR:-}" ]; then
		sb_fakegh_kill "$FAKEGH_DIR/git"
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

# ---- GitHub App mode: JWTs, installation tokens, their scope, revocation, expiry ----

APP_ID=12345

# jwt [KEY [ISS [IAT_OFFSET [EXP_OFFSET [ALG]]]]] — an app JWT made by openssl.
jwt() {
	sh "$FIXTURES/mkjwt.sh" "${1:-$FAKEGH_DIR/keys/app.key}" "${2:-$APP_ID}" "${3:--60}" \
		"${4:-540}" "${5:-RS256}"
}

# call [-p PORT] METHOD PATH AUTH [BODY] — curl the fake; prints the HTTP status, the
# response body goes to $BATS_TEST_TMPDIR/body.
call() {
	local port=$FAKEGH_PORT
	[ "$1" = -p ] && { port=$2; shift 2; }
	local args=(-sS --cacert "$FAKEGH_DIR/certs/ca.pem" -o "$BATS_TEST_TMPDIR/body"
		-w '%{http_code}' -X "$1")
	[ -n "$3" ] && args+=(-H "Authorization: $3")
	[ $# -ge 4 ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	curl "${args[@]}" "https://localhost:$port$2"
}

body() { cat "$BATS_TEST_TMPDIR/body"; }

# mint [-p PORT] INSTALLATION BODY — mint an installation token into TOKEN.
mint() {
	local p=() code
	[ "$1" = -p ] && { p=(-p "$2"); shift 2; }
	code=$(call "${p[@]}" POST "/api/v3/app/installations/$1/access_tokens" "Bearer $(jwt)" "$2")
	[ "$code" = 201 ] || { echo "mint: HTTP $code $(body)" >&2; return 1; }
	TOKEN=$(jq -r .token "$BATS_TEST_TMPDIR/body")
}

# fp TOKEN — the fingerprint the fake logs a token by: sha256 hex, 16 digits.
fp() { printf %s "$1" | sha256sum | cut -c1-16; }

# last [FILE] — the last log line of the fake (or of FILE).
last() { tail -n 1 "${1:-$FAKEGH_DIR/requests.log}"; }

# gitx TOKEN ARGS... — git with Basic auth x-access-token:TOKEN against githttp.py;
# URLs are written as git://O/R and rewritten to the server.
gitx() {
	local tok=$1 port=${GITX_PORT:-$GIT_PORT}
	shift
	env -i PATH=/usr/bin:/bin HOME="$FAKEGH_DIR/home" GIT_CONFIG_NOSYSTEM=1 \
		GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0 \
		GIT_SSL_CAINFO="$FAKEGH_DIR/certs/ca.pem" \
		git -c "url.https://x-access-token:$tok@localhost:$port/.insteadOf=git://" \
		-c user.name=t -c user.email=t@example.com "$@"
}

# push TOKEN OWNER/REPO — push a new commit to a new branch.
push() {
	local w=$BATS_TEST_TMPDIR/w
	if [ ! -d "$w" ]; then
		git init -q -b main "$w"
		gitx x -C "$w" commit -q --allow-empty -m "fakegh.bats"
	fi
	gitx "$1" -C "$w" push -q "git://$2.git" "HEAD:refs/heads/b$RANDOM$RANDOM"
}

@test "app: a JWT lists installations and mints a token for the requested repositories" {
	local code state
	code=$(call GET /api/v3/app/installations "Bearer $(jwt)")
	[ "$code" = 200 ]
	[ "$(jq -r '.[] | select(.id == 678) | .account.login' "$BATS_TEST_TMPDIR/body")" = octo-app ]
	[ "$(jq -r '.[] | select(.id == 679) | .repository_selection' "$BATS_TEST_TMPDIR/body")" = selected ]
	last | jq -e '.app_event == "installations" and .result == "ok" and .auth_ok'
	mint 678 '{"repositories":["alpha"],"permissions":{"contents":"write","pull_requests":"write"}}'
	[[ $TOKEN =~ ^ghs_[A-Z2-7]{36}$ ]]
	body | jq -e '.repository_selection == "selected" and .repositories[0].full_name == "octo-app/alpha"
		and (.repositories | length) == 1 and .permissions.contents == "write"
		and .permissions.pull_requests == "write" and .permissions.metadata == "read"'
	# expires_at: ISO 8601 in UTC, --app-token-ttl (600 s) from now.
	local exp now
	exp=$(body | jq -r .expires_at)
	[[ $exp =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]]
	now=$(date +%s)
	[ "$(date -d "$exp" +%s)" -gt $((now + 590)) ] && [ "$(date -d "$exp" +%s)" -le $((now + 600)) ]
	# The log and the state file name the token by fingerprint only.
	last | jq -e --arg fp "$(fp "$TOKEN")" '.app_event == "mint" and .installation == 678
		and .minted_fp == $fp and .repositories == ["octo-app/alpha"] and .result == "ok"
		and .status == 201 and .jwt_iss == 12345'
	state=$FAKEGH_DIR/app-state.json
	jq -e --arg k "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)" --arg fp "$(fp "$TOKEN")" \
		'.tokens[$k].fp == $fp and .tokens[$k].revoked == false' "$state"
	! grep -rqF "$TOKEN" "$FAKEGH_DIR/requests.log" "$state" "$FAKEGH_DIR/git/requests.log" || false
	# Only --app-reveal-tokens has it (root-only), with its fingerprint.
	[ "$(stat -c %a "$FAKEGH_DIR/revealed")" = 600 ]
	[ "$(jq -r --arg fp "$(fp "$TOKEN")" 'select(.fp == $fp) | .token' "$FAKEGH_DIR/revealed")" = "$TOKEN" ]
	# Every mint is a new token; an iss given as a string works too.
	local first=$TOKEN
	code=$(call POST /api/v3/app/installations/678/access_tokens "Bearer $(jwt "" '"12345"')" \
		'{"repositories":["alpha"]}')
	[ "$code" = 201 ]
	[ "$(body | jq -r .token)" != "$first" ]
	# No repositories asked for: all of a "selected" installation's.
	mint 679 ''
	body | jq -e '[.repositories[].full_name] == ["other-org/x", "other-org/y"]'
	code=$(call GET /api/v3/app/installations/679 "Bearer $(jwt)")
	[ "$code" = 200 ]
	code=$(call GET /api/v3/orgs/octo-app/installation "Bearer $(jwt)")
	[ "$code" = 200 ] && [ "$(body | jq .id)" = 678 ]
}

@test "app: forged, expired, not yet valid, too long-lived or foreign JWTs get 401" {
	local code j what
	local -a cases=(
		"other key|$(jwt "$FAKEGH_DIR/keys/other.key")"
		"expired|$(jwt "" "" -700 -10)"
		"not yet valid|$(jwt "" "" 300 600)"
		"too long|$(jwt "" "" -60 3600)"
		"other app id|$(jwt "" 99999)"
		"HS256 header|$(jwt "" "" -60 540 HS256)"
		"garbage|eyJhbGciOi.e30.c2ln"
		"static token|$FAKEGH_TOKEN"
	)
	for c in "${cases[@]}"; do
		what=${c%%|*} j=${c#*|}
		code=$(call GET /api/v3/app/installations "Bearer $j")
		[ "$code" = 401 ] || { echo "$what: HTTP $code" >&2; return 1; }
		code=$(call POST /api/v3/app/installations/678/access_tokens "Bearer $j" '{}')
		[ "$code" = 401 ] || { echo "$what: mint HTTP $code" >&2; return 1; }
		last | jq -e '.auth_ok == false and .result != "ok" and .app_event == "app_api"'
	done
	# Each refusal says why.
	grep -q "bad signature" "$FAKEGH_DIR/requests.log"
	grep -q "Integration not found" "$FAKEGH_DIR/requests.log"
	grep -q "too far in the future" "$FAKEGH_DIR/requests.log"
	# JWTs are logged by fingerprint, never whole.
	j=$(jwt)
	code=$(call GET /api/v3/app/installations "Bearer $j")
	[ "$code" = 200 ]
	! grep -qF "${j##*.}" "$FAKEGH_DIR/requests.log" || false
	# The edges GitHub allows: iat backdated 60 s and exp 10 minutes ahead.
	code=$(call GET /api/v3/app/installations "Bearer $(jwt "" "" -60 600)")
	[ "$code" = 200 ]
	# A JWT is no token for the rest of the API.
	code=$(call GET /api/v3/repos/octo-app/alpha "Bearer $j")
	[ "$code" = 401 ]
}

@test "app: mint errors: 404 unknown installation, 422 unknown repository or permission, the fail switch" {
	local code
	code=$(call POST /api/v3/app/installations/999/access_tokens "Bearer $(jwt)" '{}')
	[ "$code" = 404 ]
	last | jq -e '.app_event == "mint" and .installation == 999 and .result == "Not Found"'
	code=$(call POST /api/v3/app/installations/678/access_tokens "Bearer $(jwt)" \
		'{"repositories":["does-not-exist"]}')
	[ "$code" = 422 ]
	code=$(call POST /api/v3/app/installations/679/access_tokens "Bearer $(jwt)" \
		'{"repositories":["x","z"]}')
	[ "$code" = 422 ]
	last | jq -e '.repositories == ["x","z"] and (.result | test("not accessible"))'
	code=$(call POST /api/v3/app/installations/678/access_tokens "Bearer $(jwt)" \
		'{"permissions":{"administration":"write"}}')
	[ "$code" = 422 ]
	code=$(call POST /api/v3/app/installations/678/access_tokens "Bearer $(jwt)" \
		'{"permissions":{"contents":"superuser"}}')
	[ "$code" = 422 ]
	# The switch: minting fails with the status in the file; a live token keeps working.
	mint 678 '{"repositories":["alpha"]}'
	echo 500 >"$FAKEGH_DIR/mint-fails"
	code=$(call POST /api/v3/app/installations/678/access_tokens "Bearer $(jwt)" '{}') || true
	echo 503 >"$FAKEGH_DIR/mint-fails"
	local code2
	code2=$(call POST /api/v3/app/installations/678/access_tokens "Bearer $(jwt)" '{}') || true
	local live
	live=$(call GET /api/v3/repos/octo-app/alpha "token $TOKEN")
	rm -f "$FAKEGH_DIR/mint-fails"
	[ "$code" = 500 ] && [ "$code2" = 503 ] && [ "$live" = 200 ]
	grep -q "minting is switched off" "$FAKEGH_DIR/requests.log"
	mint 678 '{"repositories":["alpha"]}'
}

@test "app: a token reaches only its repositories over REST, GraphQL and search" {
	local code beta t
	# The node ID of octo-app/beta, as the static token sees it.
	code=$(call POST /api/graphql "token $FAKEGH_TOKEN" \
		'{"query":"{ repository(owner: \"octo-app\", name: \"beta\") { id } }"}')
	[ "$code" = 200 ]
	beta=$(body | jq -r .data.repository.id)
	[[ $beta == R_* ]]
	mint 678 '{"repositories":["alpha"],"permissions":{"contents":"write","pull_requests":"write","issues":"write"}}'
	t=$TOKEN
	[ "$(call GET /api/v3/repos/octo-app/alpha "token $t")" = 200 ]
	last | jq -e --arg fp "$(fp "$t")" '.token_fp == $fp and .installation == 678 and .auth_ok'
	for p in repos/octo-app/beta repos/octo-app/beta/pulls repos/octo-app/beta/issues/1 \
		repos/other-org/x repos/octo-org/widgets; do
		code=$(call GET "/api/v3/$p" "token $t")
		[ "$code" = 404 ] || { echo "$p: HTTP $code" >&2; return 1; }
	done
	[ "$(call POST /api/v3/repos/octo-app/beta/issues "token $t" '{"title":"nope"}')" = 404 ]
	# GraphQL: the repository, its node ID, a mutation on it: not found.
	call POST /api/graphql "token $t" \
		'{"query":"{ repository(owner: \"octo-app\", name: \"beta\") { id } }"}'
	body | jq -e '.data.repository == null and .errors[0].type == "NOT_FOUND"'
	call POST /api/graphql "token $t" "{\"query\":\"{ node(id: \\\"$beta\\\") { id } }\"}"
	body | jq -e '.data.node == null'
	call POST /api/graphql "token $t" "{\"query\":\"mutation { createIssue(input: {repositoryId: \\\"$beta\\\", title: \\\"nope\\\"}) { issue { number } } }\"}"
	body | jq -e '.errors[0].type == "NOT_FOUND"'
	# Search: nothing from beyond the scope.
	[ "$(call GET '/api/v3/search/issues?q=repo:octo-app/beta' "token $FAKEGH_TOKEN")" = 200 ]
	body | jq -e '.total_count > 0'
	[ "$(call GET '/api/v3/search/issues?q=repo:octo-app/beta' "token $t")" = 200 ]
	body | jq -e '.total_count == 0'
	[ "$(call GET '/api/v3/search/issues?q=is:open' "token $t")" = 200 ]
	body | jq -e '.total_count > 0 and all(.items[]; .repository_url | endswith("/repos/octo-app/alpha"))'
	# An installation token is no user: REST /user 403; GraphQL's viewer is the app's bot.
	[ "$(call GET /api/v3/user "token $t")" = 403 ]
	call POST /api/graphql "token $t" '{"query":"{ viewer { login } }"}'
	body | jq -e '.data.viewer.login == "shimbridge-test[bot]"'
	# The real gh with the token: its own repository works, the other one is refused.
	run ghx GH_ENTERPRISE_TOKEN="$t" pr create -R octo-app/alpha --title "App PR" --body x \
		--head app/branch --base main
	[ "$status" -eq 0 ]
	[[ $output == *"/octo-app/alpha/pull/"* ]]
	run ghx GH_ENTERPRISE_TOKEN="$t" pr list -R octo-app/beta
	[ "$status" -ne 0 ]
	[[ $output == *"Could not resolve to a Repository"* ]]
	last | jq -e --arg fp "$(fp "$t")" '.token_fp == $fp and .graphql == "PullRequestList"'
	run ghx issue list -R octo-app/beta --state all
	[[ $output != *nope* ]]
	# Permissions: issues:read cannot create an issue.
	mint 678 '{"repositories":["alpha"],"permissions":{"issues":"read","pull_requests":"read"}}'
	run ghx GH_ENTERPRISE_TOKEN="$TOKEN" issue create -R octo-app/alpha --title ro --body x
	[ "$status" -ne 0 ]
	[[ $output == *"Resource not accessible by integration"* ]]
	[ "$(call POST /api/v3/repos/octo-app/alpha/pulls "token $TOKEN" '{"title":"ro","head":"h"}')" = 403 ]
}

# ls_remote_ms — how long one ls-remote of octo-app/alpha takes, in ms.
ls_remote_ms() {
	local t=${EPOCHREALTIME/./}
	gitx "$FAKEGH_TOKEN" ls-remote git://octo-app/alpha.git >/dev/null
	echo $(((${EPOCHREALTIME/./} - t) / 1000))
}

@test "githttp.py --delay-file: every answer waits the file's milliseconds, re-read each time" {
	local g=$FAKEGH_DIR/git n ms
	n=$(cat "$g/requests.log" 2>/dev/null | wc -l)
	echo 700 >"$g/delay"
	ms=$(ls_remote_ms)
	rm -f "$g/delay"
	# protocol v2: the ref list is two requests (capabilities, ls-refs), each 700 ms later.
	[ "$ms" -ge 1400 ] || { echo "ls-remote took $ms ms with the delay" >&2; false; }
	[ "$(tail -n +"$((n + 1))" "$g/requests.log" | jq -s 'length')" -ge 2 ]
	# No file, and a file that holds no number: no wait.
	ms=$(ls_remote_ms)
	[ "$ms" -lt 1400 ] || { echo "ls-remote took $ms ms without the delay" >&2; false; }
	echo soon >"$g/delay"
	ms=$(ls_remote_ms)
	rm -f "$g/delay"
	[ "$ms" -lt 1400 ] || { echo "ls-remote took $ms ms with a delay file of no number" >&2; false; }
}

@test "--connect-delay-file: a new connection waits, requests kept alive on it do not; logs number connections" {
	local g=$FAKEGH_DIR/git n ms t
	# githttp.py: ls-remote (protocol v2) asks without credentials first (401: that
	# connection closes), then with them: the ref list and ls-refs, over one connection.
	n=$(cat "$g/requests.log" 2>/dev/null | wc -l)
	echo 700 >"$g/connect-delay"
	ms=$(ls_remote_ms)
	rm -f "$g/connect-delay"
	[ "$ms" -ge 1400 ] || { echo "ls-remote took $ms ms" >&2; false; }
	tail -n +"$((n + 1))" "$g/requests.log" |
		jq -s -e 'length == 3 and .[0].status == 401 and .[1].conn == .[2].conn and
			.[0].conn != .[1].conn and .[2].method == "POST"'
	ms=$(ls_remote_ms)
	[ "$ms" -lt 1400 ] || { echo "ls-remote took $ms ms without the delay" >&2; false; }
	# fakegh.py: gh's API requests of one command share its one connection, which waited.
	n=$(cat "$FAKEGH_DIR/requests.log" 2>/dev/null | wc -l)
	echo 700 >"$FAKEGH_DIR/connect-delay"
	t=${EPOCHREALTIME/./}
	run ghx issue create -R octo/keepalive --title t --body b
	ms=$(((${EPOCHREALTIME/./} - t) / 1000))
	rm -f "$FAKEGH_DIR/connect-delay"
	[ "$status" -eq 0 ]
	[ "$ms" -ge 700 ] || { echo "gh took $ms ms" >&2; false; }
	tail -n +"$((n + 1))" "$FAKEGH_DIR/requests.log" |
		jq -s -e 'length >= 2 and ([.[].conn] | unique | length) == 1'
}

@test "app: a token reaches only its repositories over git smart HTTP" {
	local gl=$FAKEGH_DIR/git/requests.log
	mint 678 '{"repositories":["alpha"],"permissions":{"contents":"write"}}'
	push "$TOKEN" octo-app/alpha
	last "$gl" | jq -e --arg fp "$(fp "$TOKEN")" '.token_fp == $fp and .status == 200 and .auth'
	run push "$TOKEN" octo-app/beta
	[ "$status" -ne 0 ]
	[[ $output == *"Repository not found"* ]]
	last "$gl" | jq -e --arg fp "$(fp "$TOKEN")" '.token_fp == $fp and .status == 404
		and .reason == "repository not in the token'"'"'s scope"'
	run push "$TOKEN" other-org/x
	[ "$status" -ne 0 ]
	# contents:read fetches but does not push.
	mint 678 '{"repositories":["alpha"],"permissions":{"contents":"read"}}'
	gitx "$TOKEN" ls-remote git://octo-app/alpha.git
	run push "$TOKEN" octo-app/alpha
	[ "$status" -ne 0 ]
	last "$gl" | jq -e '.status == 403 and .reason == "contents permission read"'
	# The static token works everywhere, as before; a made-up app token nowhere.
	push "$FAKEGH_TOKEN" octo-app/beta
	run gitx ghs_NOTATOKEN000000000000000000000000000 ls-remote git://octo-app/alpha.git
	[ "$status" -ne 0 ]
	last "$gl" | jq -e '.status == 401 and .reason == "unknown token"'
	! grep -qF "$TOKEN" "$gl" || false
}

@test "app: DELETE /installation/token revokes a token everywhere" {
	local t other gl=$FAKEGH_DIR/git/requests.log
	mint 678 '{"repositories":["alpha"]}'
	other=$TOKEN
	mint 678 '{"repositories":["alpha"]}'
	t=$TOKEN
	[ "$(call GET /api/v3/repos/octo-app/alpha "token $t")" = 200 ]
	gitx "$t" ls-remote git://octo-app/alpha.git
	[ "$(call DELETE /api/v3/installation/token "token $t")" = 204 ]
	last | jq -e --arg fp "$(fp "$t")" '.app_event == "revoke" and .token_fp == $fp
		and .result == "ok" and .status == 204'
	jq -e --arg k "$(printf %s "$t" | sha256sum | cut -d' ' -f1)" '.tokens[$k].revoked' \
		"$FAKEGH_DIR/app-state.json"
	[ "$(call GET /api/v3/repos/octo-app/alpha "token $t")" = 401 ]
	last | jq -e '.reason == "revoked" and .auth_ok == false'
	[ "$(call POST /api/graphql "token $t" '{"query":"{ viewer { login } }"}')" = 401 ]
	run gitx "$t" ls-remote git://octo-app/alpha.git
	[ "$status" -ne 0 ]
	last "$gl" | jq -e --arg fp "$(fp "$t")" '.token_fp == $fp and .status == 401 and .reason == "revoked"'
	[ "$(call DELETE /api/v3/installation/token "token $t")" = 401 ]
	# Only that token: another one of the same installation still works.
	[ "$(call GET /api/v3/repos/octo-app/alpha "token $other")" = 200 ]
	gitx "$other" ls-remote git://octo-app/alpha.git
	# Revoking needs the token itself, not the static one or a JWT.
	[ "$(call DELETE /api/v3/installation/token "token $FAKEGH_TOKEN")" = 401 ]
	[ "$(call DELETE /api/v3/installation/token "Bearer $(jwt)")" = 401 ]
}

@test "app: tokens expire after --app-token-ttl seconds (REST and git)" {
	local d=$FAKEGH_DIR/ttl exp port gport _
	mkdir -p "$d"
	sb_bg /usr/bin/python3 "$FIXTURES/fakegh.py" --cert "$FAKEGH_DIR/certs/server.pem" \
		--key "$FAKEGH_DIR/certs/server.key" --token-file "$FAKEGH_DIR/token" \
		--port-file "$d/port" --log "$d/requests.log" --app-id "$APP_ID" \
		--app-public-key "$FAKEGH_DIR/keys/app.pub" --app-installation 678:octo-app \
		--app-token-ttl 2 --app-state "$d/state.json" </dev/null >/dev/null 2>"$d/err"
	sb_bg /usr/bin/python3 "$FIXTURES/githttp.py" --root "$FAKEGH_DIR/git/root" \
		--app-state "$d/state.json" --cert "$FAKEGH_DIR/certs/server.pem" \
		--key "$FAKEGH_DIR/certs/server.key" --port-file "$d/gport" --log "$d/git.log" \
		</dev/null >/dev/null 2>"$d/gerr"
	for _ in $(seq 100); do
		[ -s "$d/port" ] && [ -s "$d/gport" ] && break
		sleep 0.1
	done
	port=$(cat "$d/port") gport=$(cat "$d/gport")
	mint -p "$port" 678 '{"repositories":["alpha"]}'
	exp=$(date -d "$(body | jq -r .expires_at)" +%s)
	[ "$exp" -le $(($(date +%s) + 2)) ]
	# Within its life it works (if this run was too slow for that, it was not).
	local rest git
	rest=$(call -p "$port" GET /api/v3/repos/octo-app/alpha "token $TOKEN")
	GITX_PORT=$gport gitx "$TOKEN" ls-remote git://octo-app/alpha.git && git=0 || git=$?
	if [ "$(date +%s)" -lt "$exp" ]; then
		[ "$rest" = 200 ] && [ "$git" = 0 ]
	fi
	while [ "$(date +%s)" -lt "$exp" ]; do sleep 0.2; done
	[ "$(call -p "$port" GET /api/v3/repos/octo-app/alpha "token $TOKEN")" = 401 ]
	last "$d/requests.log" | jq -e '.reason == "expired"'
	GITX_PORT=$gport run gitx "$TOKEN" ls-remote git://octo-app/alpha.git
	[ "$status" -ne 0 ]
	last "$d/git.log" | jq -e '.status == 401 and .reason == "expired"'
	[ "$(call -p "$port" DELETE /api/v3/installation/token "token $TOKEN")" = 401 ]
	[ ! -s "$d/err" ] && [ ! -s "$d/gerr" ]
}

@test "app: --git-root serves git on the API's own port, with the same token rules" {
	local gl=$FAKEGH_DIR/git-own.log
	mint 678 '{"repositories":["alpha"],"permissions":{"contents":"write"}}'
	GITX_PORT=$FAKEGH_PORT push "$TOKEN" octo-app/alpha
	last "$gl" | jq -e --arg fp "$(fp "$TOKEN")" '.token_fp == $fp and .status == 200'
	GITX_PORT=$FAKEGH_PORT run push "$TOKEN" octo-app/beta
	[ "$status" -ne 0 ]
	last "$gl" | jq -e '.status == 404'
	GITX_PORT=$FAKEGH_PORT push "$FAKEGH_TOKEN" octo-app/beta
	[ "$(call DELETE /api/v3/installation/token "token $TOKEN")" = 204 ]
	GITX_PORT=$FAKEGH_PORT run gitx "$TOKEN" ls-remote git://octo-app/alpha.git
	[ "$status" -ne 0 ]
	last "$gl" | jq -e '.status == 401 and .reason == "revoked"'
	# The API log has no git request, the git log no API request.
	! grep -q '\.git/' "$FAKEGH_DIR/requests.log" || false
	! grep -q '/api/' "$gl" || false
}
