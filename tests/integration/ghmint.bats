#!/usr/bin/env bats
# GitHub App tokens, the bridge's side (docs/GITHUB-APP.md): a session's first call
# mints its token, later calls reuse it, refreshes happen in the background, reload
# and stop revoke, status shows the state without the token. Against the fake GitHub
# (tests/fixtures/fakegh.py --app-*) over TLS.

bats_require_minimum_version 1.5.0
load lib

setup_file() {
	[ -x /usr/bin/gh ] || skip "gh is not installed"
	command -v openssl >/dev/null || skip "openssl is not installed"
	sb_users
	sb_tree
	sh "$SB_FIXTURES/mkappkey.sh" "$SB_DIR/keys"
	install -m 0600 "$SB_DIR/keys/app.key" "$SB_DIR/etc/app.pem"
	install -m 0600 "$SB_DIR/keys/other.key" "$SB_DIR/etc/other.pem"
	PLAIN="ghp_plain$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
	export PLAIN
	sb_fakegh_start "$PLAIN" --app-id 12345 --app-public-key "$SB_DIR/keys/app.pub" \
		--app-installation 678:octo --app-installation 679:other \
		--app-token-ttl 20 --app-state "$SB_DIR/fakegh/state.json" \
		--app-fail-file "$SB_DIR/fakegh/fail"
	chmod 644 "$FAKEGH_CA"
	sb_shim_links gh
	ghm_config 12345 app.pem
	sb_session alice "$SB_ALICE" '["gh"]' '"repos": ["octo/repo"]'
	sb_session bob "$SB_BOB" '["gh"]' '"repos": ["octo/other-repo"]'
	sb_start
}

# The main config: app id $1, key file $2 (under etc/), extra secret members $3.
ghm_config() {
	sb_config <<JSON
{
  $(sb_config_head)
  "secrets": {
    "app-key": {"source": "file", "path": "$SB_DIR/etc/$2"},
    "github": {"source": "github_app", "app_id": $1, "installation_id": 678,
               "private_key": "app-key",
               "permissions": {"contents": "write", "pull_requests": "write", "issues": "write"},
               "host": "localhost:$FAKEGH_PORT", "ca_file": "$FAKEGH_CA", "refresh_before": 600}
  },
  "tools": {
    "gh": {"path": "/usr/bin/gh", "profile": "gh", "host": "localhost:$FAKEGH_PORT",
           "ca_file": "$FAKEGH_CA", "secrets": {"GH_ENTERPRISE_TOKEN": "github"}}
  }
}
JSON
}

teardown_file() {
	local rc=0
	if [ -e "$SB_DIR/stopped" ]; then
		! grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' \
			"$SB_DIR/log/daemon.log" || { cat "$SB_DIR/log/daemon.log" >&2; rc=1; }
	else
		sb_stop || rc=$?
	fi
	sb_fakegh_stop
	[ -n "${SB_DIR:-}" ] && rm -rf "$SB_DIR"
	sb_reap_suite
	return "$rc"
}

teardown() {
	sb_failure_context
	sb_reap
}

# Audit records of the token's life: ghm_audit ACTION SESSION [RESULT]
ghm_audit() {
	sb_audit_grep "r['event'] == 'github_app' and r['action'] == '$1' and r.get('session') == '$2'${3:+ and r['result'] == '$3'}"
}

# The fingerprint of the last minted/refreshed token of session $1.
ghm_fp() {
	sb_audit_grep "r['event'] == 'github_app' and r['action'] in ('mint', 'refresh') and r['session'] == '$1' and r['result'] == 'ok'" |
		tail -n 1 | "$PY" -c 'import json,sys; print(json.loads(sys.stdin.read())["fingerprint"])'
}

# Seconds the fake's token whose fingerprint starts with $1 has to go; -1 if it is
# revoked, expired or unknown.
ghm_fake_left() {
	"$PY" - "$SB_DIR/fakegh/state.json" "${1:-none}" <<'PYEOF'
import json, sys, time
st = json.load(open(sys.argv[1]))
for k, r in st["tokens"].items():
    if k.startswith(sys.argv[2]):
        print(-1 if r["revoked"] else max(-1, int(r["expires"] - time.time())))
        break
else:
    print(-1)
PYEOF
}

# The fake's record of the token whose fingerprint starts with $1: "live", "revoked" or "expired".
ghm_fake_state() {
	"$PY" - "$SB_DIR/fakegh/state.json" "$1" <<'PYEOF'
import json, sys, time
st = json.load(open(sys.argv[1]))
for k, r in st["tokens"].items():
    if k.startswith(sys.argv[2]):
        print("revoked" if r["revoked"] else "expired" if time.time() >= r["expires"] else "live")
        break
else:
    print("unknown")
PYEOF
}

@test "a session's first gh call mints its token; the host sees that token" {
	run --separate-stderr as "$SB_ALICE" gh api repos/octo/repo
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; cat "$SB_DIR/log/daemon.log" >&2; return 1; }
	[[ "$output" == *'"full_name"'* ]]
	ghm_audit mint alice ok
	fp=$(ghm_fp alice)
	[ "${#fp}" -eq 8 ]
	# The fake names tokens by their sha256 too: the request carried this very token.
	tail -n 1 "$FAKEGH_LOG" | grep -q "\"token_fp\": \"$fp"
	[ "$(ghm_fake_state "$fp")" = live ]
	# The mint asked for the session's repository and the configured permissions.
	grep '/access_tokens' "$FAKEGH_LOG" | tail -n 1 | grep -q '"repositories": \["octo/repo"\]'
}

@test "later calls reuse the session's token; another session gets its own" {
	n=$(ghm_audit mint alice ok | wc -l)
	# (Mints looked for from here on: alice's background refresh may come after bob's.)
	local from
	from=$(wc -l <"$FAKEGH_LOG")
	run --separate-stderr as "$SB_ALICE" gh api repos/octo/repo
	[ "$status" -eq 0 ]
	[ "$(ghm_audit mint alice ok | wc -l)" -eq "$n" ]
	run --separate-stderr as "$SB_BOB" gh api repos/octo/other-repo
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	[ "$(ghm_fp alice)" != "$(ghm_fp bob)" ]
	tail -n +"$((from + 1))" "$FAKEGH_LOG" | grep '/access_tokens' | grep -q '"repositories": \["octo/other-repo"\]'
	# alice's token is not for bob's repository: the bridge refuses before GitHub would.
	run --separate-stderr as "$SB_ALICE" gh api repos/octo/other-repo
	[ "$status" -ne 0 ]
}

# status_shows_fp: status names alice's newest token (a background refresh may land
# between reading the audit and asking the daemon: then ask again).
status_shows_fp() {
	fpa=$(ghm_fp alice)
	run --separate-stderr "$SB_BUILD/shimbridge" -c "$SB_CONFIG" status
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	echo "$output" | grep -q "github (session alice): token $fpa, expires 20..-..-..T..:..:..Z, repositories octo/repo, permissions contents:write"
}

# list_shows_fp: `secret list --json` names alice's newest token (the same race).
list_shows_fp() {
	fpa=$(ghm_fp alice)
	run --separate-stderr "$SB_BUILD/shimbridge" -c "$SB_CONFIG" secret list --json
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	echo "$output" | "$PY" -c 'import json,sys; l=json.load(sys.stdin); assert {(x["session"], x["fingerprint"]) for x in l if x.get("source")=="github_app"} >= {("alice", sys.argv[1])}, l' "$fpa"
}

@test "status and secret list show each session's token by fingerprint, never the token" {
	sb_wait_for 5 status_shows_fp
	[[ "$output" != *ghs_* ]]
	run --separate-stderr "$SB_BUILD/shimbridge" -c "$SB_CONFIG" status --json
	echo "$output" | "$PY" -c 'import json,sys; s=json.load(sys.stdin); a=[x for x in s["sessions"] if x["name"]=="alice"][0]["github_app"][0]; assert a["secret"]=="github" and a["last_result"]=="ok" and a["repositories"]==["octo/repo"], a'
	sb_wait_for 5 list_shows_fp
	[[ "$output" != *ghs_* ]]
}

@test "tokens are refreshed in the background and the old ones revoked; calls never fail" {
	fp0=$(ghm_fp alice)
	fails=0
	# 20 s tokens are refreshed 10 s after they are minted: 25 s span two refreshes.
	end=$((SECONDS + 25))
	while [ "$SECONDS" -lt "$end" ]; do
		as "$SB_ALICE" gh api repos/octo/repo >/dev/null 2>&1 || fails=$((fails + 1))
		sleep 1
	done
	[ "$fails" -eq 0 ]
	ghm_audit refresh alice ok
	[ "$(ghm_fp alice)" != "$fp0" ]
	sb_wait_for 15 eval "ghm_audit revoke alice ok | grep -q '\"fingerprint\":\"$fp0\"'"
	[ "$(ghm_fake_state "$fp0")" = revoked ]
	[ "$(ghm_fake_state "$(ghm_fp alice)")" = live ]
}

@test "a failing mint keeps the valid token in use; after expiry calls are refused clearly" {
	echo 502 >"$SB_DIR/fakegh/fail"
	sb_wait_for 20 eval "ghm_audit refresh alice | grep -q 'HTTP 502'"
	# The last token minted before the switch (a refresh may have been under way when
	# it was thrown) is the one that must stay in use.
	fp=$(ghm_fp alice)
	run --separate-stderr as "$SB_ALICE" gh api repos/octo/repo
	[ "$status" -eq 0 ]
	[ "$(ghm_fp alice)" = "$fp" ]
	# Wait for the token to expire (20 s at most), then the bridge refuses with the reason.
	sb_wait_for 25 eval "[ \"\$(ghm_fake_state $fp)\" = expired ]"
	run --separate-stderr as "$SB_ALICE" gh api repos/octo/repo
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"could not get a GitHub App token for this session"*"HTTP 502"*"Tell the operator"* ]]
	grep -q "refreshing the token failed\|minting a token failed" "$SB_DIR/log/daemon.log"
	rm -f "$SB_DIR/fakegh/fail"
	sb_wait_for 70 eval "as $SB_ALICE gh api repos/octo/repo >/dev/null 2>&1"
	[ "$(ghm_fp alice)" != "$fp" ]
}

@test "a reload that changes a session's repositories revokes its token; removing a session too" {
	# The tokens to be revoked: each session's newest, once the fake has it live with
	# 8 s or more to go. A token that expires before the reload's revocation reaches
	# the fake is audited "expired already", not revoked: after the previous test's
	# failed refreshes, bob's may be about to expire (seen: 2 s left). A call that
	# finds its session's token expired mints a new one. (The newest token's audit
	# record may still be on its way when a call returns: asked again each round.)
	local end=$((SECONDS + 45))
	until as "$SB_ALICE" gh api repos/octo/repo >/dev/null 2>&1 &&
	    as "$SB_BOB" gh api repos/octo/other-repo >/dev/null 2>&1 &&
	    [ "$(ghm_fake_left "$(ghm_fp alice)")" -ge 8 ] &&
	    [ "$(ghm_fake_left "$(ghm_fp bob)")" -ge 8 ]; do
		[ "$SECONDS" -lt "$end" ] || { echo "no token with 8 s to go for alice and bob in 45 s" >&2; false; }
		sleep 0.5
	done
	fpa=$(ghm_fp alice)
	fpb=$(ghm_fp bob)
	# (Mints looked for from here on: the new token may be minted as soon as the reload
	# has revoked the old one, before the call below asks for it.)
	local from
	from=$(wc -l <"$FAKEGH_LOG")
	sb_session alice "$SB_ALICE" '["gh"]' '"repos": ["octo/repo", "octo/third"]'
	rm "$SB_DIR/etc/sessions.d/bob.json"
	sb_reload | grep -q '"ok":true'
	sb_wait_for 10 eval "ghm_audit revoke alice ok | grep -q '\"fingerprint\":\"$fpa\"'"
	sb_wait_for 10 eval "ghm_audit revoke bob ok | grep -q '\"fingerprint\":\"$fpb\"'"
	[ "$(ghm_fake_state "$fpa")" = revoked ]
	[ "$(ghm_fake_state "$fpb")" = revoked ]
	run --separate-stderr as "$SB_ALICE" gh api repos/octo/third
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	tail -n +"$((from + 1))" "$FAKEGH_LOG" | grep '/access_tokens' | grep -q '"repositories": \["octo/repo", "octo/third"\]'
}

@test "a reload that changes nothing for a session keeps its token" {
	fpa=$(ghm_fp alice)
	sb_reload | grep -q '"ok":true'
	run --separate-stderr as "$SB_ALICE" gh api repos/octo/repo
	[ "$status" -eq 0 ]
	[ "$(ghm_fp alice)" = "$fpa" ] || ghm_audit refresh alice ok
	! ghm_audit revoke alice | grep -q "\"fingerprint\":\"$fpa\"" || ghm_audit refresh alice ok
}

# Mint requests the fake has seen, less those the daemon made (its audited mints
# and refreshes, whatever their result): what anything else asked for.
ghm_other_mints() {
	local reqs daemon
	reqs=$(grep -c '/access_tokens' "$FAKEGH_LOG" || true)
	daemon=$(sb_audit_grep "r['event'] == 'github_app' and r['action'] in ('mint', 'refresh')" | wc -l)
	echo $((reqs - daemon))
}

@test "shimbridge check mints a throw-away token and revokes it" {
	n=$(ghm_other_mints)
	run --separate-stderr "$SB_BUILD/shimbridge" -c "$SB_CONFIG" check
	echo "$output" | grep -E '^ok +secret github \(github_app, app 12345\): minted token [0-9a-f]{8} for session alice \(installation 678, expires .*\) and revoked it$'
	fp=$(echo "$output" | sed -n 's/.*minted token \([0-9a-f]*\) .*/\1/p')
	[ "$(ghm_fake_state "$fp")" = revoked ]
	# Exactly one mint of its own (a refresh of the daemon's may be under way meanwhile).
	sb_wait_for 5 eval '[ "$(ghm_other_mints)" -eq $((n + 1)) ]'
	[[ "$output" != *ghs_* ]]
}

@test "shimbridge check: a wrong app id or a wrong key fails with one clear line" {
	(SB_CONFIG=$SB_DIR/etc/check.json; ghm_config 99999 app.pem)
	run --separate-stderr "$SB_BUILD/shimbridge" -c "$SB_DIR/etc/check.json" check
	[ "$status" -ne 0 ]
	[ "$(echo "$output" | grep -c 'github_app')" -eq 1 ]
	echo "$output" | grep -E '^FAIL +secret github \(github_app, app 99999\): GitHub refused the app.s JWT \(HTTP 401: Integration not found.*\): check app_id 99999 and that secret app-key holds this app.s private key$'
	(SB_CONFIG=$SB_DIR/etc/check.json; ghm_config 12345 other.pem)
	run --separate-stderr "$SB_BUILD/shimbridge" -c "$SB_DIR/etc/check.json" check
	[ "$status" -ne 0 ]
	[ "$(echo "$output" | grep -c 'github_app')" -eq 1 ]
	echo "$output" | grep -E '^FAIL +secret github \(github_app, app 12345\): GitHub refused the app.s JWT \(HTTP 401: .*signature.*\): check app_id 12345'
	# Not a key at all.
	(umask 077; echo "not a key" >"$SB_DIR/etc/junk.pem")
	(SB_CONFIG=$SB_DIR/etc/check.json; ghm_config 12345 junk.pem)
	run --separate-stderr "$SB_BUILD/shimbridge" -c "$SB_DIR/etc/check.json" check
	[ "$status" -ne 0 ]
	echo "$output" | grep -E '^FAIL +secret github \(github_app, app 12345\): secret app-key: the private key is not a PEM RSA private key'
	rm -f "$SB_DIR/etc/check.json"
}

@test "the config check refuses app tokens for sessions whose repositories have two owners" {
	cp "$SB_CONFIG" "$SB_DIR/etc/two.json"
	mkdir -m 700 "$SB_DIR/etc2"
	sed "s#$SB_DIR/etc/sessions.d#x#" "$SB_CONFIG" >"$SB_DIR/etc2/config.json"
	mkdir -m 700 "$SB_DIR/etc2/sessions.d"
	printf '{"name": "carol", "user": "%s", "tools": ["gh"], "repos": ["octo/repo", "other/repo"]}\n' "$SB_ALICE" \
		>"$SB_DIR/etc2/sessions.d/carol.json"
	chmod 600 "$SB_DIR/etc2/config.json" "$SB_DIR/etc2/sessions.d/carol.json"
	run --separate-stderr "$SB_BUILD/shimbridged" -c "$SB_DIR/etc2/config.json" --check-no-secrets
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"a GitHub App token covers one owner, but its repositories octo/repo and other/repo have different owners"* ]]
	rm -rf "$SB_DIR/etc2" "$SB_DIR/etc/two.json"
}

@test "stopping the daemon revokes every live token" {
	sb_wait_for 30 eval "as $SB_ALICE gh api repos/octo/repo >/dev/null 2>&1"
	# The newest token, once the fake has it live (a refresh may be under way) with
	# 8 s or more to go (one that expires first is not revoked: see test 6).
	sb_wait_for 15 eval '[ "$(ghm_fake_left "$(ghm_fp alice)")" -ge 8 ]'
	fpa=$(ghm_fp alice)
	touch "$SB_DIR/stopped"
	kill -TERM "$SB_PID"
	sb_wait_for 10 eval "! kill -0 $SB_PID 2>/dev/null"
	grep -q "token $fpa" "$SB_DIR/log/daemon.log"
	[ "$(ghm_fake_state "$fpa")" = revoked ]
	"$PY" - "$SB_DIR/fakegh/state.json" <<'PYEOF'
import json, sys, time
st = json.load(open(sys.argv[1]))
live = [r["fp"] for r in st["tokens"].values() if not r["revoked"] and time.time() < r["expires"]]
assert not live, live
PYEOF
}
