#!/usr/bin/env bats
# GitHub Enterprise Server as documented: the config block of docs/CONFIG.md
# ("GitHub Enterprise Server") is extracted from the doc and run as it is, with only
# the host name, the absolute paths and the user names replaced (ghe_config below),
# against the fake GHE server (tests/fixtures/fakegh.py) over TLS with a private CA.
# Also: --check refuses the wrong token variable for the host, with the fix, and
# ca_file is what makes gh trust the server.

bats_require_minimum_version 1.5.0
load lib

DOC="$BATS_TEST_DIRNAME/../../docs/CONFIG.md"

# The documented block: the first ```json fence after "<!-- ghe-config" is the main
# file, the second the session drop-in. Prints "main" or "session" as asked.
ghe_doc_block() {
	"$PY" - "$DOC" "$1" <<'PYEOF'
import sys
text = open(sys.argv[1]).read()
start = text.index("<!-- ghe-config")
end = text.index("<!-- /ghe-config -->", start)
fences = text[start:end].split("```json\n")[1:]
blocks = [f.split("```", 1)[0] for f in fences]
assert len(blocks) == 2, "expected two json blocks in the ghe-config section"
sys.stdout.write(blocks[0] if sys.argv[2] == "main" else blocks[1])
PYEOF
}

# The block with this machine's names: the host, the paths and the users. Nothing else
# changes, so a key or a value the doc gets wrong fails here.
ghe_config() {
	ghe_doc_block "$1" | sed \
		-e "s#/etc/shimbridge/ghe-ca.pem#$FAKEGH_CA#g" \
		-e "s#/etc/shimbridge/#$SB_DIR/etc/#g" \
		-e "s#/run/shimbridge/bridge.sock#$SB_SOCK#g" \
		-e "s#/var/log/shimbridge/audit.log#$SB_AUDIT#g" \
		-e "s#/var/lib/shimbridge#$SB_DIR/state#g" \
		-e "s#/usr/local/libexec/shimbridge/shimbridge-git#$SB_BUILD/shimbridge-git#g" \
		-e "s#\"group\": \"shimbridge\"#\"group\": \"$SB_GROUP\"#g" \
		-e "s#\"shimbridge-runner\"#\"$SB_RUNNER\"#g" \
		-e "s#\"sb-alice\"#\"$SB_ALICE\"#g" \
		-e "s#ghe\\.example\\.com#localhost:$FAKEGH_PORT#g"
}

setup_file() {
	[ -x /usr/bin/gh ] || skip "gh is not installed"
	command -v openssl >/dev/null || skip "openssl is not installed"
	sb_users
	sb_tree
	T=$SB_DIR/t
	mkdir -m 700 "$T"
	export T
	GHE_TOKEN="ghe_sbt$(od -An -N18 -tx1 /dev/urandom | tr -d ' \n')"
	export GHE_TOKEN
	sb_fakegh_start "$GHE_TOKEN"
	chmod 644 "$FAKEGH_CA"
	(umask 077 && printf '%s\n' "$GHE_TOKEN" >"$SB_DIR/etc/ghe.token")
	sb_shim_links gh
	ghe_config main | sb_config
	ghe_config session >"$SB_DIR/etc/sessions.d/alice.json"
	chmod 600 "$SB_DIR/etc/sessions.d/alice.json"
	sb_start
}

teardown_file() {
	local rc=0
	sb_stop || rc=$?
	sb_fakegh_stop
	[ -n "${SB_DIR:-}" ] && rm -rf "$SB_DIR"
	sb_reap_suite
	return "$rc"
}

teardown() {
	sb_reap
}

@test "the documented GHE config passes --check as it is" {
	run --separate-stderr "$SB_BUILD/shimbridged" -c "$SB_CONFIG" --check
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
	[[ $output == *": ok"* ]]
	# The documented config carries no env workaround: ca_file alone does the TLS.
	run grep -c SSL_CERT_FILE "$SB_CONFIG"
	[ "$output" = 0 ]
	grep -q '"GH_ENTERPRISE_TOKEN"' "$SB_CONFIG"
}

@test "gh through the bridge reaches the GHE host with GH_ENTERPRISE_TOKEN and the configured CA" {
	local from
	from=$(sb_fakegh_count)
	run as "$SB_ALICE" timeout 30 gh api user
	[ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
	[[ $output == *'"login"'* ]]
	sb_refute_contains "$GHE_TOKEN" "$output" "gh api user"
	run as "$SB_ALICE" timeout 30 gh pr list -R octo/repo
	[ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
	# Every request the server saw was GHE-shaped and carried the configured token.
	"$PY" - "$FAKEGH_LOG" "$from" "token $GHE_TOKEN" <<'PYEOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()[int(sys.argv[2]):]
assert lines, "no request reached the server"
for l in lines:
    e = json.loads(l)
    assert e["auth_ok"] is True and e["authorization"] == sys.argv[3], e
    assert e["path"].startswith("/api/v3/") or e["path"] == "/api/graphql", e["path"]
PYEOF
}

@test "--check refuses GH_TOKEN for an enterprise host and prints the fix" {
	local c=$T/wrongvar
	mkdir -p "$c/sessions.d"
	sed 's/"GH_ENTERPRISE_TOKEN"/"GH_TOKEN"/' "$SB_CONFIG" >"$c/config.json"
	sb_json_edit "$c/config.json" 'c["sessions_dir"] = "'"$c"'/sessions.d"'
	run --separate-stderr "$SB_BUILD/shimbridged" -c "$c/config.json" --check
	[ "$status" -eq 1 ]
	[[ $stderr == *"GH_TOKEN is the wrong variable for host localhost:$FAKEGH_PORT"* ]]
	[[ $stderr == *'Fix: "secrets": {"GH_ENTERPRISE_TOKEN": "ghe"}'* ]]
	# And the other way round: github.com takes GH_TOKEN only.
	sed -e 's/"host": "localhost:[0-9]*"/"host": "github.com"/' "$SB_CONFIG" >"$c/config.json"
	sb_json_edit "$c/config.json" 'c["sessions_dir"] = "'"$c"'/sessions.d"'
	run --separate-stderr "$SB_BUILD/shimbridged" -c "$c/config.json" --check
	[ "$status" -eq 1 ]
	[[ $stderr == *"GH_ENTERPRISE_TOKEN is the wrong variable for host github.com"* ]]
	[[ $stderr == *'Fix: "secrets": {"GH_TOKEN": "ghe"}'* ]]
}

@test "ca_file: must be an absolute existing file; a private one is warned about" {
	local c=$T/cafile
	mkdir -p "$c/sessions.d"
	cp "$SB_CONFIG" "$c/config.json"
	sb_json_edit "$c/config.json" 'c["sessions_dir"] = "'"$c"'/sessions.d"; c["tools"]["gh"]["ca_file"] = "relative.pem"'
	run --separate-stderr "$SB_BUILD/shimbridged" -c "$c/config.json" --check
	[ "$status" -eq 1 ]
	[[ $stderr == *"tools.gh.ca_file: must be an absolute path"* ]]
	sb_json_edit "$c/config.json" 'c["tools"]["gh"]["ca_file"] = "/nonexistent/ca.pem"'
	run --separate-stderr "$SB_BUILD/shimbridged" -c "$c/config.json" --check
	[ "$status" -eq 1 ]
	[[ $stderr == *"/nonexistent/ca.pem is not a readable file"* ]]
	install -m 600 "$FAKEGH_CA" "$c/private-ca.pem"
	sb_json_edit "$c/config.json" 'c["tools"]["gh"]["ca_file"] = "'"$c"'/private-ca.pem"'
	run --separate-stderr "$SB_BUILD/shimbridged" -c "$c/config.json" --check
	[ "$status" -eq 0 ]
	[[ $stderr == *"ca_file"*"not world-readable"* ]]
}

@test "without ca_file gh does not trust the server: the CA is what the option supplies" {
	local from
	cp "$SB_CONFIG" "$T/config.keep"
	sb_json_edit "$SB_CONFIG" 'del c["tools"]["gh"]["ca_file"]'
	sb_reload >/dev/null
	from=$(sb_fakegh_count)
	run as "$SB_ALICE" timeout 30 gh api user
	cp "$T/config.keep" "$SB_CONFIG"
	sb_reload >/dev/null
	[ "$status" -ne 0 ]
	[[ $output == *"certificate"* || $output == *"x509"* ]] || { echo "$output" >&2; return 1; }
	[ "$(sb_fakegh_count)" -eq "$from" ]
	run as "$SB_ALICE" timeout 30 gh api user
	[ "$status" -eq 0 ]
}
