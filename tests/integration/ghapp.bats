#!/usr/bin/env bats
# GitHub App installation tokens end to end (issue 14): the real daemon with a
# "github_app" secret, real sandbox users running the real gh 2.23 and git 2.39
# through the shim, against the fake GitHub over TLS (tests/fixtures/fakegh.py in
# App mode: it checks the RS256 JWT with the app's public key, mints tokens that live
# GHAPP_TTL seconds, enforces each token's repositories on REST, GraphQL and, through
# githttp.py, git smart HTTP, and honours revocation).
#
# Two sessions: alice may use octo/alpha, bob octo/beta (one installation, 678, of the
# organisation octo). The fake writes every minted token whole to a root-only file
# (--app-reveal-tokens) so that the tests can use a session's real token directly
# (to show that GitHub itself refuses it elsewhere) and search for it everywhere the
# sandbox or an operator can look. The fake's own logs name tokens by fingerprint.
#
# The timing: tokens live GHAPP_TTL (30) s and the bridge refreshes them
# refresh_before (15) s before they expire; it revokes a replaced token after a grace
# of 10 s, so before it expires. The tests wait for rotations and expiries by
# watching the fake's state, never by timing a call.

bats_require_minimum_version 1.5.0
BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-150}
load lib

FIXTURES=$SB_FIXTURES
APP_ID=12345
GHAPP_TTL=${GHAPP_TTL:-30}
GHAPP_REFRESH=${GHAPP_REFRESH:-15}

setup_file() {
	[ -x /usr/bin/gh ] || skip "gh is not installed"
	command -v openssl >/dev/null || skip "openssl is not installed"
	command -v jq >/dev/null || skip "jq is not installed"
	sb_users
	sb_tree
	T=$SB_DIR/t
	mkdir -m 700 "$T"
	: >"$T/sandbox.out"
	export T
	# The app's keys: the bridge reads app.key (a file secret); the fake knows app.pub.
	sh "$FIXTURES/mkappkey.sh" "$T/keys"
	install -m 0600 "$T/keys/app.key" "$SB_DIR/etc/app.key"
	install -m 0600 "$T/keys/other.key" "$SB_DIR/etc/other.key"
	# git: octo/alpha and octo/beta, each with a main branch, served by the fake on its
	# own port (an app token works only on the app's host); app tokens only.
	local up=$SB_DIR/up r
	mkdir -p "$up/root/octo"
	chmod 700 "$up"
	git init -q -b main "$up/seed"
	git -C "$up/seed" -c user.name=Up -c user.email=up@example.com commit -q --allow-empty -m init
	for r in alpha beta; do
		git init -q --bare -b main "$up/root/octo/$r.git"
		git -C "$up/seed" push -q "$up/root/octo/$r.git" main
	done
	GIT_LOG=$up/requests.log
	: >"$GIT_LOG"
	# The fake's static token is never given to the bridge: only app tokens are in play.
	sb_fakegh_start "static-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')" \
		--app-id "$APP_ID" --app-public-key "$T/keys/app.pub" \
		--app-installation 678:octo --app-token-ttl "$GHAPP_TTL" \
		--app-state "$SB_DIR/fakegh/app-state.json" \
		--app-fail-file "$SB_DIR/fakegh/mint-fails" \
		--app-reveal-tokens "$SB_DIR/fakegh/revealed" \
		--git-root "$up/root" --git-log "$GIT_LOG"
	chmod 644 "$FAKEGH_CA"
	STATE=$SB_DIR/fakegh/app-state.json
	REVEAL=$SB_DIR/fakegh/revealed
	: >"$REVEAL"
	chmod 600 "$REVEAL"
	export STATE REVEAL
	GIT_PORT=$FAKEGH_PORT
	export GIT_PORT GIT_LOG
	sb_shim_links gh git-remote-shimbridge
	ghapp_config "$APP_ID" app-key | sb_config
	sb_session alice "$SB_ALICE" '["gh", "git"]' '"repos": ["octo/alpha"]'
	sb_session bob "$SB_BOB" '["gh", "git"]' '"repos": ["octo/beta"]'
	# The sandbox's git sends https://localhost:GIT_PORT/ through the bridge.
	local u home
	for u in alice bob; do
		home=$(getent passwd "$SB_LANE-$u" | cut -d: -f6)
		cat >"$home/.gitconfig" <<EOF
[user]
	name = Agent $u
	email = $u@sandbox.example
[url "shimbridge::https://localhost:$GIT_PORT/"]
	insteadOf = https://localhost:$GIT_PORT/
[init]
	defaultBranch = main
EOF
		chown "$SB_LANE-$u:" "$home/.gitconfig"
		as "$SB_LANE-$u" git init -q w
		as "$SB_LANE-$u" git -C w commit -q --allow-empty -m "work of $u"
	done
	GHAPP_MISSING=
	if ! "$SB_BUILD/shimbridged" -c "$SB_CONFIG" --check-no-secrets >"$T/check.out" 2>&1; then
		if grep -q 'github_app' "$T/check.out"; then
			GHAPP_MISSING="the bridge's secret source github_app ($(grep -m1 github_app "$T/check.out"))"
		else
			cat "$T/check.out" >&2
			return 1
		fi
	fi
	export GHAPP_MISSING
	[ -n "$GHAPP_MISSING" ] || sb_start
}

teardown_file() {
	local rc=0
	[ -e "$SB_DIR/daemon.stopped" ] || ghapp_stop || rc=$?
	sb_fakegh_stop
	# GHAPP_KEEP=DIR: keep the logs, the audit and the fake's state for a look.
	if [ -n "${GHAPP_KEEP:-}" ] && [ -n "${SB_DIR:-}" ]; then
		mkdir -p "$GHAPP_KEEP"
		cp -r "$SB_DIR/log" "$SB_DIR/fakegh" "$SB_DIR/up/requests.log" "$T/sandbox.out" \
			"$GHAPP_KEEP/" 2>/dev/null
	fi
	[ -n "${SB_DIR:-}" ] && rm -rf "$SB_DIR"
	sb_reap_suite
	return "$rc"
}

setup() {
	[ -z "$GHAPP_MISSING" ] || skip "needs $GHAPP_MISSING"
}

teardown() {
	sb_failure_context
	sb_reap
}

# Stop the daemon (started by setup_file, so not this shell's child): TERM, wait for
# it to exit (it revokes its tokens first), fail on a sanitizer report.
ghapp_stop() {
	local pid=${SB_PID:-}
	[ -n "$pid" ] || return 0
	SB_PID=
	kill -0 "$pid" 2>/dev/null || { echo "the daemon was not running" >&2; return 1; }
	kill -TERM "$pid"
	sb_wait_for 30 eval "! kill -0 $pid 2>/dev/null" || { echo "the daemon did not stop" >&2; return 1; }
	! grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$SB_DIR/log/daemon.log" || {
		cat "$SB_DIR/log/daemon.log" >&2; false; }
}

# ghapp_config APP_ID KEY_SECRET [SECRET_NAME] — the main config: the key as a file
# secret, the app secret, gh and git using it.
ghapp_config() {
	cat <<EOF
{ $(sb_config_head)
  "secrets": {
    "app-key": {"source": "file", "path": "$SB_DIR/etc/app.key"},
    "other-key": {"source": "file", "path": "$SB_DIR/etc/other.key"},
    "ghapp-token": {"source": "github_app", "app_id": $1, "installation_id": 678,
                    "private_key": "$2",
                    "permissions": {"contents": "write", "pull_requests": "write", "issues": "write"},
                    "host": "localhost:$FAKEGH_PORT", "ca_file": "$FAKEGH_CA",
                    "refresh_before": $GHAPP_REFRESH}
  },
  "tools": {
    "gh": {"path": "/usr/bin/gh", "profile": "gh", "host": "localhost:$FAKEGH_PORT",
           "ca_file": "$FAKEGH_CA", "secrets": {"GH_ENTERPRISE_TOKEN": "ghapp-token"}}
  },
  "git": {"path": "/usr/bin/git", "helper": "$SB_BUILD/shimbridge-git",
          "hosts": {"localhost:$GIT_PORT": {"upstream": "https://localhost:$GIT_PORT",
                    "secret": "ghapp-token", "username": "x-access-token",
                    "ca_file": "$FAKEGH_CA"}}}
}
EOF
}

# sx USER CMD... — run CMD as the sandbox user $SB_LANE-USER from its home (60 s at most);
# sets status and output, and keeps the output for the leak scan.
sx() {
	local u=$1
	shift
	run as_t 60 "$SB_LANE-$u" "$@"
	{ printf '### %s: %s (exit %s)\n' "$u" "$*" "$status"; printf '%s\n' "$output"; } >>"$T/sandbox.out"
}

# ok_or_show: the last sx succeeded, or print what it said.
ok_or_show() {
	[ "$status" -eq 0 ] && return 0
	printf 'exit %s:\n%s\n' "$status" "$output" >&2
	return 1
}

# fps REPO — fingerprints (the fake's) of the tokens minted for exactly [octo/REPO],
# in mint order.
fps() {
	jq -r --arg r "octo/$1" 'select(.repositories == [$r]) | .fp' "$REVEAL"
}

# tok FP — the whole token with that fingerprint.
tok() {
	jq -r --arg f "$1" 'select(.fp == $f) | .token' "$REVEAL"
}

# tstate FP KEY — a field of the fake's record of that token.
tstate() {
	jq -r --arg f "$1" --arg k "$2" '.tokens[] | select(.fp == $f) | .[$k]' "$STATE"
}

# is_revoked FP — whether the fake holds that token revoked.
is_revoked() {
	[ "$(tstate "$1" revoked)" = true ]
}

# bfp TOKEN — the bridge's fingerprint of a token: the first 8 hex digits of its
# SHA-256 (the fake's has 16).
bfp() {
	printf %s "$1" | sha256sum | cut -c1-8
}

# by_any REPO JQ FILE — JQ (with $f a fingerprint) holds in FILE for some token of octo/REPO.
by_any() {
	local f
	for f in $(fps "$1"); do
		jq -e -s --arg f "$f" "$2" "$3" >/dev/null && return 0
	done
	echo "no token of octo/$1 satisfies $2" >&2
	return 1
}

# fresh REPO — the newest token of octo/REPO if it was minted in the last 8 s (and is
# live): a refresh replaces it no sooner than GHAPP_TTL - GHAPP_REFRESH s after its mint,
# and revokes it a grace later, so it can be used for a while yet. (Take the token from
# the `sb_wait_for fresh` that found it: asked again a moment later, the clock may have
# passed the 8 s.)
fresh() {
	local f
	f=$(fps "$1" | tail -n 1)
	[ -n "$f" ] && [ "$(tstate "$f" revoked)" = false ] &&
		[ "$(tstate "$f" expires)" -gt $(($(date +%s) + GHAPP_TTL - 8)) ] && echo "$f"
}

# live REPO — the newest token of octo/REPO, if the fake holds it live for 5 s more.
live() {
	local f
	f=$(fps "$1" | tail -n 1)
	[ -n "$f" ] && [ "$(tstate "$f" revoked)" = false ] &&
		[ "$(tstate "$f" expires)" -gt $(($(date +%s) + 5)) ] && echo "$f"
}

# api TOKEN METHOD PATH [BODY] — curl the fake with a token; prints the HTTP status.
api() {
	local args=(-sS --cacert "$FAKEGH_CA" -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}'
		-X "$2" -H "Authorization: token $1")
	[ $# -ge 4 ] && args+=(--data-binary "$4")
	curl "${args[@]}" "https://localhost:$FAKEGH_PORT$3"
}

# rawgit TOKEN ARGS... — the host's own git straight to githttp.py with a token (no bridge).
rawgit() {
	local t=$1
	shift
	env -i PATH=/usr/bin:/bin HOME="$T" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null \
		GIT_TERMINAL_PROMPT=0 GIT_SSL_CAINFO="$FAKEGH_CA" \
		git -c "url.https://x-access-token:$t@localhost:$GIT_PORT/.insteadOf=up:" "$@"
}

# push USER REPO — the sandbox pushes its commit to a new branch of octo/REPO.
N=0
push() {
	N=$((N + 1))
	sx "$1" git -C w push -q "https://localhost:$GIT_PORT/octo/$2.git" \
		"HEAD:refs/heads/$1-$BATS_TEST_NUMBER-$N-$RANDOM"
}

# Lines of FILE after line FROM.
since() {
	tail -n +"$(($2 + 1))" "$1"
}

@test "shimbridge check: the app setup is proven with a throw-away token, minted and revoked" {
	local from
	from=$(wc -l <"$FAKEGH_LOG")
	run "$SB_BUILD/shimbridge" -c "$SB_CONFIG" --shim-dir "$SB_DIR/bin" check
	printf '%s\n' "$output" >>"$T/sandbox.out"
	[[ $output == *ghapp-token* ]] || { echo "$output" >&2; return 1; }
	printf '%s\n' "$output" | grep 'ghapp-token' | grep -qiv 'fail\|reject\|error' ||
		{ echo "$output" >&2; return 1; }
	# The fake saw a mint, and every token minted for the check was revoked.
	local minted f
	minted=$(since "$FAKEGH_LOG" "$from" | jq -r 'select(.app_event == "mint" and .status == 201) | .minted_fp')
	[ -n "$minted" ] || { echo "no mint reached the fake" >&2; return 1; }
	for f in $minted; do
		[ "$(tstate "$f" revoked)" = true ] || { echo "check's token $f was not revoked" >&2; return 1; }
	done
}

@test "shimbridge check: a wrong key or a wrong app id fails with one clear line" {
	local c what from
	for what in key app_id; do
		c=$SB_DIR/etc/bad-$what.json	# next to sessions.d
		if [ "$what" = key ]; then
			ghapp_config "$APP_ID" other-key >"$c"
		else
			ghapp_config 99999 app-key >"$c"
		fi
		chmod 600 "$c"
		from=$(wc -l <"$FAKEGH_LOG")
		run "$SB_BUILD/shimbridge" -c "$c" --shim-dir "$SB_DIR/bin" check
		printf '%s\n' "$output" >>"$T/sandbox.out"
		[ "$status" -ne 0 ] || { echo "bad $what: check passed: $output" >&2; return 1; }
		# Exactly one line about the secret that is not ok, and it says the app's JWT
		# was refused and what to check.
		local lines
		lines=$(grep 'ghapp-token' <<<"$output" | grep -v '^ok \|^warning ') || true
		[ "$(printf '%s\n' "$lines" | grep -c .)" -eq 1 ] ||
			{ echo "bad $what: not one line: $output" >&2; return 1; }
		[[ $lines == FAIL* && $lines == *JWT* && $lines == *app_id* ]] ||
			{ echo "bad $what: unclear: $lines" >&2; return 1; }
		# It did ask GitHub, which refused the JWT for the reason the test made.
		since "$FAKEGH_LOG" "$from" | jq -e -s 'any(.[]; .app_event != null and .status == 401)'
	done
	grep -q 'bad signature' "$FAKEGH_LOG"
	grep -q 'Integration not found' "$FAKEGH_LOG"
	# The messages quote neither the key nor a JWT.
	! grep -qF "$(sed -n 2p "$SB_DIR/etc/other.key")" "$T/sandbox.out" || false
	! grep -q 'eyJ' "$T/sandbox.out" || false
}

@test "two sessions get different tokens; each reaches its own repository only, refused by the bridge and by GitHub elsewhere" {
	# Each pushes and opens a pull request in its own repository.
	push alice alpha
	ok_or_show
	sx alice gh pr create -R octo/alpha --title "alice's change" --body "by alice" \
		--head alice-topic --base main
	ok_or_show
	[[ $output == *"/octo/alpha/pull/"* ]]
	push bob beta
	ok_or_show
	sx bob gh pr create -R octo/beta --title "bob's change" --body "by bob" --head bob-topic \
		--base main
	ok_or_show
	local a b
	a=$(fps alpha | tail -n 1) b=$(fps beta | tail -n 1)
	[ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ]
	[ "$(tok "$a")" != "$(tok "$b")" ]
	# Minted for exactly the session's repository, with the configured permissions.
	jq -e --arg f "$a" '.tokens[] | select(.fp == $f) | .repositories == ["octo/alpha"] and
		.permissions == {"contents": "write", "pull_requests": "write", "issues": "write",
		"metadata": "read"}' "$STATE"
	# The PR and the push each carried a token of the session's own (one of them: under
	# load a refresh may have replaced the one in use since).
	by_any alpha 'any(.[]; .token_fp == $f and .graphql == "PullRequestCreate")' "$FAKEGH_LOG"
	by_any beta 'any(.[]; .token_fp == $f and .graphql == "PullRequestCreate")' "$FAKEGH_LOG"
	by_any alpha 'any(.[]; .token_fp == $f and (.path | endswith("/octo/alpha.git/git-receive-pack")) and .status == 200)' "$GIT_LOG"
	by_any beta 'any(.[]; .token_fp == $f and (.path | endswith("/octo/beta.git/git-receive-pack")) and .status == 200)' "$GIT_LOG"

	# The bridge refuses each in the other's repository, and sends nothing.
	local from gfrom
	from=$(wc -l <"$FAKEGH_LOG") gfrom=$(wc -l <"$GIT_LOG")
	sx alice gh pr create -R octo/beta --title x --body x --head alice-topic --base main
	[ "$status" -ne 0 ]
	[[ $output == *octo/beta* ]] || { echo "$output" >&2; return 1; }
	sx alice gh issue list -R octo/beta
	[ "$status" -ne 0 ]
	push alice beta
	[ "$status" -ne 0 ]
	sx bob gh pr list -R octo/alpha
	[ "$status" -ne 0 ]
	push bob alpha
	[ "$status" -ne 0 ]
	# (only the bridge's own App calls, mints and revocations, may have happened since)
	! since "$FAKEGH_LOG" "$from" | jq -e -s 'any(.[]; .app_event == null)' >/dev/null || false
	[ -z "$(since "$GIT_LOG" "$gfrom")" ]

	# GitHub (the fake) refuses them too: each session's token, used directly. One
	# minted in the last 8 s, so that no refresh revokes it while it is in use here.
	local ta tb beta_id
	b=$(sb_wait_for 25 fresh beta)
	[ -n "$b" ]
	tb=$(tok "$b")
	[ "$(api "$tb" GET /api/v3/repos/octo/beta)" = 200 ]
	beta_id=$(jq -r .node_id "$BATS_TEST_TMPDIR/body")
	[ "$(api "$tb" GET /api/v3/repos/octo/alpha/pulls)" = 404 ]
	run rawgit "$tb" ls-remote up:octo/alpha.git
	[ "$status" -ne 0 ]
	jq -e -s --arg f "$b" 'any(.[]; .token_fp == $f and .status == 404 and (.path | startswith("/octo/alpha.git")))' "$GIT_LOG"
	a=$(sb_wait_for 25 fresh alpha)
	[ -n "$a" ]
	ta=$(tok "$a")
	[ "$(api "$ta" GET /api/v3/repos/octo/alpha)" = 200 ]
	[ "$(api "$ta" GET /api/v3/repos/octo/beta)" = 404 ]
	[ "$(api "$ta" POST /api/v3/repos/octo/beta/pulls '{"title":"x","head":"h","base":"main"}')" = 404 ]
	api "$ta" POST /api/graphql "{\"query\":\"mutation { createPullRequest(input: {repositoryId: \\\"$beta_id\\\", headRefName: \\\"h\\\", baseRefName: \\\"main\\\", title: \\\"x\\\"}) { pullRequest { number } } }\"}"
	jq -e '.errors[0].type == "NOT_FOUND"' "$BATS_TEST_TMPDIR/body"
	rawgit "$ta" ls-remote up:octo/alpha.git
	run rawgit "$ta" -C "$SB_DIR/up/seed" push -q up:octo/beta.git "HEAD:refs/heads/x$RANDOM"
	[ "$status" -ne 0 ]
	jq -e -s --arg f "$a" 'any(.[]; .token_fp == $f and .status == 404 and (.path | startswith("/octo/beta.git")))' "$GIT_LOG"
	jq -e -s --arg f "$a" 'any(.[]; .token_fp == $f and .status == 404 and .path == "/api/v3/repos/octo/beta")' "$FAKEGH_LOG"
}

@test "a loop of gh and git calls across several token lifetimes: no failure, tokens rotated, old ones revoked" {
	local from gfrom a0 b0 i=0 fails=0 deadline u r
	from=$(wc -l <"$FAKEGH_LOG") gfrom=$(wc -l <"$GIT_LOG")
	a0=$(fps alpha | wc -l) b0=$(fps beta | wc -l)
	# What sandbox and runner processes expose while calls run: sampled for the leak scan.
	# shellcheck disable=SC2016 # expanded by the inner bash
	sb_bg bash -c 'while :; do
		for p in $(pgrep -u "$1"); do
			cat "/proc/$p/environ" "/proc/$p/cmdline" 2>/dev/null; echo
		done
		sleep 0.2
	done' _ "$SB_ALICE,$SB_BOB,$SB_RUNNER" </dev/null >"$T/proc.sample" 2>/dev/null
	local sampler=$!
	# At least three rotations for each session (four tokens), at most five lifetimes.
	deadline=$(($(date +%s) + 5 * GHAPP_TTL))
	while [ "$(($(fps alpha | wc -l) - a0))" -lt 3 ] || [ "$(($(fps beta | wc -l) - b0))" -lt 3 ]; do
		[ "$(date +%s)" -lt "$deadline" ] || { echo "tokens were not rotated" >&2; break; }
		i=$((i + 1))
		for u in alice bob; do
			r=alpha
			[ "$u" = bob ] && r=beta
			sx "$u" gh pr list -R "octo/$r"
			[ "$status" -eq 0 ] || { fails=$((fails + 1)); echo "gh pr list ($u, round $i): $output" >&2; }
			sx "$u" gh issue create -R "octo/$r" --title "round $i" --body "loop"
			[ "$status" -eq 0 ] || { fails=$((fails + 1)); echo "gh issue create ($u, round $i): $output" >&2; }
			push "$u" "$r"
			[ "$status" -eq 0 ] || { fails=$((fails + 1)); echo "git push ($u, round $i): $output" >&2; }
			sx "$u" git ls-remote "https://localhost:$GIT_PORT/octo/$r.git"
			[ "$status" -eq 0 ] || { fails=$((fails + 1)); echo "git ls-remote ($u, round $i): $output" >&2; }
		done
	done
	kill -- "-$sampler" 2>/dev/null || kill "$sampler"
	echo "rounds: $i, tokens: alpha $(($(fps alpha | wc -l) - a0)), beta $(($(fps beta | wc -l) - b0))" >&3
	[ "$fails" -eq 0 ]
	[ "$(($(fps alpha | wc -l) - a0))" -ge 3 ] && [ "$(($(fps beta | wc -l) - b0))" -ge 3 ]
	# No request ever carried an expired or revoked token.
	! since "$FAKEGH_LOG" "$from" | jq -e -s 'any(.[]; .status == 401 and .token_fp)' >/dev/null || {
		since "$FAKEGH_LOG" "$from" | jq -c 'select(.status == 401)' >&2; false; }
	! since "$GIT_LOG" "$gfrom" | jq -e -s 'any(.[]; .status == 401 and .token_fp)' >/dev/null || {
		since "$GIT_LOG" "$gfrom" | jq -c 'select(.status == 401)' >&2; false; }
	# Every replaced token is revoked (by its grace period's end, before it expires).
	local f
	for r in alpha beta; do
		for f in $(fps "$r" | head -n -1); do
			sb_wait_for "$GHAPP_TTL" is_revoked "$f" ||
				{ echo "octo/$r token $f was replaced but not revoked" >&2; return 1; }
		done
	done
	# The fake logged each revocation, with the token's own credential.
	jq -e -s '[.[] | select(.app_event == "revoke" and .status == 204)] | length >= 6' "$FAKEGH_LOG"
	# The audit names each mint, refresh and revocation by the bridge's fingerprint (a
	# refresh the fake has answered may still be on its way into the audit: wait for it).
	for f in $(fps alpha | tail -n 3); do
		sb_wait_for 10 grep -q "\"fingerprint\":\"$(bfp "$(tok "$f")")\"" "$SB_AUDIT" ||
			{ echo "no audit record for token $f" >&2; return 1; }
	done
	sb_audit_grep 'r.get("event") == "github_app" and r.get("action") == "refresh" and r.get("result") == "ok"' >/dev/null
	sb_audit_grep 'r.get("event") == "github_app" and r.get("action") == "revoke" and r.get("result") == "ok"' >/dev/null
}

@test "minting fails while the token is valid: calls keep working; after expiry a clear refusal; then recovery" {
	local f exp from
	sx alice gh pr list -R octo/alpha
	ok_or_show
	echo 500 >"$SB_DIR/fakegh/mint-fails"
	from=$(wc -l <"$FAKEGH_LOG")
	# The token in use now is the newest; it stays valid until it expires.
	f=$(fps alpha | tail -n 1)
	exp=$(tstate "$f" expires)
	sx alice gh pr list -R octo/alpha
	local ok1=$status
	push alice alpha
	local ok2=$status
	if [ "$(date +%s)" -lt "$exp" ]; then
		[ "$ok1" -eq 0 ] && [ "$ok2" -eq 0 ] || { echo "calls failed while the token was valid: $output" >&2; return 1; }
	fi
	# The bridge tries to refresh it (and fails) before it expires.
	sb_wait_for "$GHAPP_TTL" eval "since '$FAKEGH_LOG' $from | grep -q 'minting is switched off'"
	# The newest token now (a refresh answered before the switch may have minted one
	# after the one above) is the last that can be valid: wait until it has expired.
	f=$(fps alpha | tail -n 1)
	exp=$(tstate "$f" expires)
	while [ "$(date +%s)" -le "$exp" ]; do sleep 0.5; done
	sleep 1
	local gfrom
	from=$(wc -l <"$FAKEGH_LOG") gfrom=$(wc -l <"$GIT_LOG")
	sx alice gh pr list -R octo/alpha
	[ "$status" -ne 0 ]
	[[ $output == *"GitHub App token"* ]] || { echo "unclear: $output" >&2; return 1; }
	push alice alpha
	[ "$status" -ne 0 ]
	[[ $output == *"GitHub App token"* ]] || { echo "unclear: $output" >&2; return 1; }
	# Refused by the bridge: no request went out with the expired token.
	! since "$FAKEGH_LOG" "$from" | jq -e -s --arg f "$f" 'any(.[]; .token_fp == $f)' >/dev/null || false
	! since "$GIT_LOG" "$gfrom" | jq -e -s --arg f "$f" 'any(.[]; .token_fp == $f)' >/dev/null || false
	# The operator sees the failed refresh in the audit.
	sb_audit_grep 'r.get("event") == "github_app" and r.get("session") == "alice" and r.get("result") != "ok" and r.get("action") in ("mint", "refresh")' >/dev/null
	# Minting works again: the session recovers (after the bridge's back-off).
	rm -f "$SB_DIR/fakegh/mint-fails"
	sb_wait_for 90 eval 'as_t 60 "$SB_ALICE" gh pr list -R octo/alpha >/dev/null 2>&1'
	push alice alpha
	ok_or_show
}

@test "status and secret list show the token by fingerprint, with repositories and expiry" {
	local f bf
	sx alice gh pr list -R octo/alpha
	ok_or_show
	sb_wait_for 20 live alpha >/dev/null
	run "$SB_BUILD/shimbridge" -c "$SB_CONFIG" status
	printf '%s\n' "$output" >>"$T/sandbox.out"
	[ "$status" -eq 0 ]
	# The newest token the fake minted, as the bridge names it (a refresh the fake has
	# answered but the bridge not yet taken in shows the one before: ask again).
	status_names_live() {
		f=$(live alpha) || return 1
		bf=$(bfp "$(tok "$f")")
		run "$SB_BUILD/shimbridge" -c "$SB_CONFIG" status --json
		[[ $output == *"$bf"* ]]
	}
	sb_wait_for 10 status_names_live || { echo "status --json lacks fingerprint $bf: $output" >&2; return 1; }
	printf '%s\n' "$output" >>"$T/sandbox.out"
	[[ $output == *octo/alpha* ]]
	run "$SB_BUILD/shimbridge" -c "$SB_CONFIG" secret list
	printf '%s\n' "$output" >>"$T/sandbox.out"
	[ "$status" -eq 0 ]
	[[ $output == *ghapp-token* ]]
}

@test "session remove revokes the session's token" {
	local f
	sb_wait_for 60 eval 'as_t 60 "$SB_BOB" gh pr list -R octo/beta >/dev/null 2>&1'
	f=$(sb_wait_for 20 live beta)
	[ -n "$f" ]
	run "$SB_BUILD/shimbridge" -c "$SB_CONFIG" --shim-dir "$SB_DIR/bin" session remove bob
	printf '%s\n' "$output" >>"$T/sandbox.out"
	[ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
	sb_wait_for 15 is_revoked "$f" ||
		{ echo "bob's token $f is not revoked" >&2; return 1; }
	jq -e -s --arg f "$f" 'any(.[]; .app_event == "revoke" and .token_fp == $f and .status == 204)' "$FAKEGH_LOG"
	[ "$(api "$(tok "$f")" GET /api/v3/repos/octo/beta)" = 401 ]
	# alice is untouched.
	sx alice gh pr list -R octo/alpha
	ok_or_show
}

@test "daemon stop revokes every live token" {
	local f
	sx alice gh pr list -R octo/alpha
	ok_or_show
	f=$(sb_wait_for 20 live alpha)
	[ -n "$f" ]
	ghapp_stop
	: >"$SB_DIR/daemon.stopped"
	[ "$(tstate "$f" revoked)" = true ] || { echo "alice's token $f survived the stop" >&2; return 1; }
	[ "$(api "$(tok "$f")" GET /api/v3/repos/octo/alpha)" = 401 ]
	# No token of the app is left live.
	jq -e --argjson now "$(date +%s)" '[.tokens[] | select(.revoked == false and .expires > $now)] | length == 0' "$STATE"
}

@test "no token or key anywhere: logs, audit, outputs, the sandbox's home and processes, the state" {
	local files=() f
	[ -s "$REVEAL" ]
	# Everything an operator or the sandbox could read, except the fake's own token file
	# and the key files themselves.
	while IFS= read -r -d '' f; do
		files+=("$f")
	done < <(find "$SB_DIR" "/home/$SB_ALICE" "/home/$SB_BOB" -type f \
		! -path "$REVEAL" ! -path "$SB_DIR/etc/app.key" ! -path "$SB_DIR/etc/other.key" \
		! -path "$T/keys/*" ! -path "$SB_DIR/certs/*" ! -path "$SB_DIR/bin/*" \
		! -path "$SB_DIR/up/root/*" ! -path "$SB_DIR/up/seed/*" -size -8M -print0)
	[ "${#files[@]}" -gt 5 ]
	printf '%s\n' "${files[@]}" | grep -q "$SB_AUDIT"
	printf '%s\n' "${files[@]}" | grep -q "$T/proc.sample"
	grep -q 'SHIMBRIDGE_SOCKET' "$T/proc.sample"	# it did see sandbox processes
	# Every token the fake minted, and the app key (its first PEM lines), under every
	# transformation tests/fixtures/leakscan.py knows.
	"$PY" - "$FIXTURES" "$REVEAL" "$SB_DIR/etc/app.key" "${files[@]}" <<'PYEOF'
import json, sys
sys.path.insert(0, sys.argv[1])
import leakscan
secrets = [json.loads(l)["token"] for l in open(sys.argv[2])]
key = open(sys.argv[3]).read().splitlines()
secrets.append("".join(key[1:3]))
found = []
for path in sys.argv[4:]:
    data = open(path, "rb").read().decode("utf-8", "replace")
    for s in secrets:
        found += leakscan.scan(data, s, path)
if found:
    sys.exit("a token or the key was found:\n  " + "\n  ".join(found[:20]))
print("scanned %d files for %d secrets" % (len(sys.argv) - 4, len(secrets)))
PYEOF
}
