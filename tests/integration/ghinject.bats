#!/usr/bin/env bats
# gh through the bridge with the credential injector wired in (bridge/ghinject.c,
# op-run.c): the real gh 2.23 runs as the runner with a placeholder token and a
# per-call http_unix_socket; the daemon adds the real token and talks TLS to
# tests/fixtures/fakegh.py. One daemon and one server serve the whole file.

bats_require_minimum_version 1.5.0
load lib

setup_file() {
	[ -x /usr/bin/gh ] || skip "gh is not installed"
	sb_users
	sb_tree
	T=$SB_DIR/t
	mkdir -m 700 "$T"
	export T
	GH_TOKEN_VALUE="ghp_inj$(od -An -N18 -tx1 /dev/urandom | tr -d ' \n')"
	export GH_TOKEN_VALUE
	sb_fakegh_start "$GH_TOKEN_VALUE" --log-bodies
	(umask 077 && printf '%s\n' "$GH_TOKEN_VALUE" >"$SB_DIR/etc/github.token" &&
		printf 'ghp_revoked0000000000000000\n' >"$SB_DIR/etc/revoked.token")
	ln -sf shimbridge-shim "$SB_DIR/bin/gh"
	ln -sf shimbridge-shim "$SB_DIR/bin/ghrevoked"
	sb_config <<EOF
{
	$(sb_config_head)
	"secrets": {"github": {"source": "file", "path": "$SB_DIR/etc/github.token"},
		"revoked": {"source": "file", "path": "$SB_DIR/etc/revoked.token"}},
	"tools": {
		"gh": {"path": "/usr/bin/gh", "profile": "gh", "host": "localhost:$FAKEGH_PORT",
			"secrets": {"GH_ENTERPRISE_TOKEN": "github"}, "ca_file": "$FAKEGH_CA"},
		"ghrevoked": {"path": "/usr/bin/gh", "profile": "gh", "host": "localhost:$FAKEGH_PORT",
			"secrets": {"GH_ENTERPRISE_TOKEN": "revoked"}, "ca_file": "$FAKEGH_CA"}
	}
}
EOF
	sb_session alice "$SB_ALICE" '["gh", "ghrevoked"]' '"repos": ["octo/repo"]'
	sb_start
}

teardown_file() {
	local rc=0
	sb_stop || rc=$?
	sb_fakegh_stop
	[ -n "${SB_DIR:-}" ] && rm -rf "$SB_DIR"
	return "$rc"
}

# gha TOOL ARGS... — a gh tool through the shim as $SB_ALICE; the output must not hold
# the token.
gha() {
	run as "$SB_ALICE" timeout 30 "$@"
	sb_refute_contains "$GH_TOKEN_VALUE" "$output" "$*"
}

@test "gh api user through the bridge: real token upstream, one audit record per API request" {
	local m
	m=$(sb_fakegh_count)
	gha gh api user
	[ "$status" -eq 0 ]
	[[ $output == *'"login":"octo-agent"'* ]]
	# Upstream saw the real token and nothing else.
	tail -n +$((m + 1)) "$FAKEGH_LOG" | grep -q "\"authorization\": \"token $GH_TOKEN_VALUE\""
	run ! grep -q placeholder "$FAKEGH_LOG"
	# The API request's own audit record, linked to the call by id.
	local rec id
	rec=$(sb_audit_grep 'r["event"] == "http" and r["request"] == "GET /api/v3/user"' | tail -n 1)
	[[ $rec == *'"status":200'* ]]
	id=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["conn"])' "$rec")
	sb_audit_grep "r[\"event\"] == \"allowed\" and r[\"conn\"] == $id"
	sb_audit_grep "r[\"event\"] == \"done\" and r[\"conn\"] == $id"
	run ! grep -qF "$GH_TOKEN_VALUE" "$SB_AUDIT"
}

@test "gh issue create and pr list through the bridge" {
	gha gh issue create -R octo/repo --title "from the injector suite" --body "b0dy"
	[ "$status" -eq 0 ]
	[[ $output == *"/octo/repo/issues/"* ]]
	gha gh pr list -R octo/repo
	[ "$status" -eq 0 ]
	[[ $output == *"Add widget support"* ]]
	sb_audit_grep 'r["event"] == "http" and r["request"].startswith("graphql") and r["status"] == 200'
}

@test "one gh command's API requests share one upstream connection (keep-alive)" {
	local m
	m=$(sb_fakegh_count)
	gha gh issue create -R octo/repo --title "over one connection" --body "b0dy"
	[ "$status" -eq 0 ]
	# fakegh numbers the TLS connections it accepts: gh's requests came over one.
	run "$PY" - "$FAKEGH_LOG" "$m" <<'PY'
import json, sys
recs = [json.loads(line) for line in open(sys.argv[1]).read().splitlines()[int(sys.argv[2]):]]
print(len(recs), len({r["conn"] for r in recs}))
PY
	echo "requests, connections: $output"
	[ "${output% *}" -ge 2 ]
	[ "${output#* }" -eq 1 ]
}

@test "the HTTP policy refuses a search of another repository; it never reaches the server" {
	local m
	m=$(sb_fakegh_count)
	gha gh issue list -R octo/repo --search "repo:someone/else"
	[ "$status" -ne 0 ]
	[[ $output == *"shimbridge: "* ]]
	run ! bash -c "tail -n +$((m + 1)) '$FAKEGH_LOG' | grep -q someone/else"
	sb_audit_grep 'r["event"] == "http" and r["status"] == 403 and "refused" in r'
}

@test "a token the host rejects: 401 reaches gh, and the agent is told what to do" {
	gha ghrevoked api user
	[ "$status" -ne 0 ]
	[[ $output == *"HTTP 401"* ]]
	[[ $output == *'shimbridge: the host'"'"'s token was rejected (HTTP 401); the operator can run `shimbridge check`.'* ]]
	sb_audit_grep 'r["event"] == "upstream_unauthorized" and r["tool"] == "ghrevoked"'
	sb_audit_grep 'r["event"] == "http" and r["status"] == 401'
}

@test "no gh socket or scratch directory is left after the calls" {
	# Only the (empty) directories of the jails built in advance for the next calls.
	# (A jail the pool is still building holds its directory before it shows as held.)
	sb_wait_for 5 eval '[ -z "$(sb_scratch_leftovers "$SB_DIR/state/run" "$SB_RUNNER")" ]' ||
		{ sb_scratch_leftovers "$SB_DIR/state/run" "$SB_RUNNER" >&2; false; }
	run find "$(sb_dview "$SB_DIR/state/run")" -mindepth 2
	[ -z "$output" ]
}
