#!/usr/bin/env bats
# The admin CLI and the daemon's start-up as an administrator meets them: exit
# codes, option parsing, --json schemas (docs/CLI.md, checked with jq), broken
# configs, the audit group, the store's writers' lock, session add/remove. Names
# here start with sba- (users sba-*, sessions' users sb-sba*, groups sba-*).

bats_require_minimum_version 1.5.0
load lib

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}
SB_GROUP=sba-sock
SB_RUNNER=sba-runner
SBA_AUDIT_GROUP=sba-audit

setup_file() {
	[ "$(id -u)" = 0 ] || skip "needs root (users)"
	for b in shimbridged shimbridge shim shimbridge-git; do
		[ -x "$SB_BUILD/$b" ] || skip "$SB_BUILD/$b is not built"
	done
	sba_users_remove
	groupadd "$SB_GROUP"
	groupadd "$SBA_AUDIT_GROUP"
	useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$SB_RUNNER"
	useradd -m -s /bin/bash -G "$SB_GROUP,$SBA_AUDIT_GROUP" sba-alice
	useradd -m -s /bin/bash -G "$SB_GROUP" sba-bob
	sb_tree
	sb_shim_links say
	# What other users run must be reachable from any checkout (a 0700 one too).
	install -m 0755 "$SB_BUILD/shimbridged" "$SB_BUILD/shimbridge" "$SB_DIR/bin/"
	mkdir -m 0755 "$SB_DIR/libexec"
	install -m 0755 "$SB_BUILD/shimbridge-git" "$SB_DIR/libexec/"
	# The audit directory as the installer makes it: root:ADMIN-GROUP 0750.
	chgrp "$SBA_AUDIT_GROUP" "$SB_DIR/log"
	chmod 0750 "$SB_DIR/log"
	SBA_STORE=$SB_DIR/etc/secrets.store
	SBA_KEY=$SB_DIR/etc/store.key
	export SBA_STORE SBA_KEY
	sb_config <<EOF
{
	$(sb_config_head)
	"store": {"path": "$SBA_STORE", "key": "$SBA_KEY"},
	"secrets": {"tok": {"source": "store", "entry": "tok"}},
	"tools": {"say": {"path": "/bin/echo", "rules": [{"allow": ["**"]}]}},
	"git": {"path": "/usr/bin/git", "helper": "$SB_DIR/libexec/shimbridge-git",
		"hosts": {"github.com": {"upstream": "https://github.com", "secret": "tok"},
			"git.example.test": {"upstream": "https://git.example.test", "secret": "tok"}}}
}
EOF
	"$SB_BUILD/shimbridge" -c "$SB_CONFIG" secret init >/dev/null
	printf tokvalue | "$SB_BUILD/shimbridge" -c "$SB_CONFIG" secret set tok --no-reload >/dev/null
	sb_session alice sba-alice '["say"]' '"repos": ["octo/one", "octo/two"]'
	sb_start 3>&-
	echo "$SB_PID" >"$SB_DIR/daemon.pid"
}

teardown_file() {
	local rc=0
	if [ -n "${SB_DIR:-}" ]; then
		sb_fakegh_kill "$SB_DIR/fgh"
		[ ! -s "$SB_DIR/githttp.pid" ] || kill "$(cat "$SB_DIR/githttp.pid")" 2>/dev/null || true
		[ ! -s "$SB_DIR/up.pid" ] || kill "$(cat "$SB_DIR/up.pid")" 2>/dev/null || true
		SB_PID=$(cat "$SB_DIR/daemon.pid" 2>/dev/null || true)
		sb_stop || rc=$?
		rm -rf "$SB_DIR"
	fi
	sba_users_remove
	sb_reap_suite
	return "$rc"
}

teardown() {
	sb_reap
}

# Every account and group this suite may have made (also after a crashed run).
sba_users_remove() {
	local u
	for u in $(getent passwd | cut -d: -f1 | grep -E '^(sba-|sb-sba)'); do
		pkill -KILL -u "$u" 2>/dev/null || true
		userdel -r "$u" >/dev/null 2>&1 || userdel "$u" >/dev/null 2>&1 || true
		rm -rf "/home/$u"
	done
	for u in $(getent group | cut -d: -f1 | grep -E '^(sba-|sb-sba)'); do
		groupdel "$u" >/dev/null 2>&1 || true
	done
}

# The admin CLI on this suite's config.
sba() {
	"$SB_BUILD/shimbridge" -c "$SB_CONFIG" --shim-dir "$SB_DIR/bin" "$@"
}

sba_tmp() {
	mktemp -d "${BATS_TEST_TMPDIR:-/tmp}/sba.XXXXXX"
}

# --- shimbridged start-up ---------------------------------------------------------

@test "shimbridged as a user: 'must run as root' and why, exit 77 (not an invalid config)" {
	run -77 runuser -u sba-bob -- "$SB_DIR/bin/shimbridged" -c "$SB_CONFIG"
	[[ $output == *"must run as root"* ]]
	[[ $output == *"runner user"* ]]
	[[ $output != *"invalid"* ]]
	run "$SB_BUILD/shimbridged" --help
	[[ $output == *"77 not started as root"* ]]
	[[ $output == *"1 invalid configuration"* ]]
}

@test "shimbridged exit codes: 64 usage, 1 invalid config, 2 runtime failure" {
	local t
	t=$(sba_tmp)
	run -64 "$SB_BUILD/shimbridged" --frobnicate
	run -64 "$SB_BUILD/shimbridged" extra-argument
	printf '{"socket": \n' >"$t/broken.json"
	chmod 600 "$t/broken.json"
	run -1 "$SB_BUILD/shimbridged" -c "$t/broken.json"
	[[ $output == *"line 2"* ]]
	# A valid config whose audit log cannot be created: a runtime failure.
	cp "$SB_CONFIG" "$t/config.json"
	mkdir -m 700 "$t/sessions.d"
	sb_json_edit "$t/config.json" "c['audit_log'] = '/proc/sba-none/audit.log'; c['socket']['path'] = '$t/b.sock'"
	run -2 timeout 20 "$SB_BUILD/shimbridged" -c "$t/config.json"
}

# --- option parsing ---------------------------------------------------------------

@test "global options work before and after the command, --no-reload included" {
	local t
	t=$(sba_tmp)
	run -0 "$SB_BUILD/shimbridge" --no-reload -c "$SB_CONFIG" --store "$t/s.store" --key "$SBA_KEY" \
		secret set one <<<"v1"
	[[ $output == *"secret one set"* ]]
	[[ $output != *"reloaded"* ]]
	run -0 "$SB_BUILD/shimbridge" secret set two -c "$SB_CONFIG" --store "$t/s.store" \
		--key "$SBA_KEY" --no-reload <<<"v2"
	run -0 "$SB_BUILD/shimbridge" --store "$t/s.store" secret list --key "$SBA_KEY" -c "$SB_CONFIG"
	[ "$output" = "$(printf 'one\ntwo')" ]
	run -0 "$SB_BUILD/shimbridge" status -c "$SB_CONFIG"
	run -0 "$SB_BUILD/shimbridge" -c "$SB_CONFIG" --no-reload session list
	run -0 "$SB_BUILD/shimbridge" --shim-dir "$SB_DIR/bin" mirror list -c "$SB_CONFIG"
	run -0 "$SB_BUILD/shimbridge" --no-reload audit --file "$SB_AUDIT" -c "$SB_CONFIG"
	run -64 "$SB_BUILD/shimbridge" --no-such-option status
}

# --- --json schemas (docs/CLI.md) -------------------------------------------------

@test "--json: status, session list, secret list, audit, mirror list follow docs/CLI.md" {
	run -0 sba status --json
	printf '%s' "$output" | jq -e '
		.up == true and (.pid | type == "number") and (.version | type == "string") and
		(.protocol | type == "number") and (.uptime | type == "number") and
		(.config | type == "string") and (.config_version | type == "string") and
		(.connections | type == "number") and (.running | type == "number") and
		(.sessions | type == "array") and
		(.sessions[] | (.name | type == "string") and (.uid | type == "number") and
			(.running | type == "number"))'

	run -0 sba session list --json
	printf '%s' "$output" | jq -e --arg uid "$(id -u sba-alice)" '
		type == "array" and length == 1 and
		(.[0] | .name == "alice" and .user == "sba-alice" and .uid == ($uid | tonumber) and
			.tools == ["say"] and .repos == ["octo/one", "octo/two"] and .running == 0 and
			(.file | endswith("sessions.d/alice.json")) and .error == null and
			has("workspace"))'

	run -0 sba secret list --json
	printf '%s' "$output" | jq -e '. == [{"name": "tok"}]'

	as sba-alice say hello >/dev/null
	run -0 sba audit --json --session alice
	# One object a line, as the daemon wrote it.
	printf '%s\n' "$output" | jq -se 'length >= 1 and all(.[]; type == "object" and
		.session == "alice" and (.time | type == "string") and (.event | type == "string"))'
	printf '%s\n' "$output" | jq -se 'any(.[]; .event == "done" and .tool == "say")'

	mkdir -p "$SB_DIR/state/mirrors/alice/github.com/octo/one.git/objects"
	head -c 10000 /dev/urandom >"$SB_DIR/state/mirrors/alice/github.com/octo/one.git/objects/pack"
	run -0 sba mirror list --json
	printf '%s' "$output" | jq -e --arg p "$SB_DIR/state/mirrors/alice/github.com/octo/one.git" '
		type == "array" and length == 1 and
		(.[0] | .session == "alice" and .host == "github.com" and .repo == "octo/one" and
			.path == $p and .bytes >= 10000 and
			(.modified | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$")))'
	rm -rf "$SB_DIR/state/mirrors/alice"
	run -0 sba mirror list --json
	[ "$output" = "[]" ]
	# Every key the tests check is documented.
	for k in up config_version sessions tools repos running error bytes modified; do
		grep -q -- "\`$k\`" "$SB_ROOT/docs/CLI.md"
	done
	grep -q '"unparsed"' "$SB_ROOT/docs/CLI.md"
}

# --- a broken config --------------------------------------------------------------

@test "broken drop-in: session list shows the rest and file:line:column; status and audit work" {
	local bad=$SB_DIR/etc/sessions.d/zz-broken.json
	printf '{"name": "zz-broken",\n "user": "sba-bob"\n "tools": []}\n' >"$bad"
	chmod 600 "$bad"
	run -2 sba session list
	local text=$output
	run -2 --separate-stderr sba session list --json
	local json=$output stderr_json=$stderr
	rm -f "$bad"
	[[ $text == *"alice"*"sba-alice"* ]]
	[[ $text == *"zz-broken"*"BROKEN: $bad:3:"* ]]
	[[ $stderr_json == *"zz-broken.json"* ]]
	printf '%s' "$json" | jq -e --arg f "$bad" '
		(.[] | select(.name == "alice") | .tools == ["say"] and .error == null) and
		(.[] | select(.name == "zz-broken") | .error | startswith($f + ":3:"))'
	printf '%s\n' '{"name": "zz-broken",' >"$bad"
	chmod 600 "$bad"
	run -0 sba status
	[[ $output == *"running, pid"* ]]
	run -0 sba audit
	rm -f "$bad"
}

@test "broken main config: status asks the daemon, audit reads the configured log" {
	local t
	t=$(sba_tmp)
	mkdir -m 700 "$t/sessions.d"
	# A missing comma after the audit log's line: the paths are still named.
	sed -e 's|"audit_log": "\([^"]*\)",|"audit_log": "\1"|' "$SB_CONFIG" >"$t/config.json"
	! jq . "$t/config.json" >/dev/null 2>&1
	run -0 "$SB_BUILD/shimbridge" -c "$t/config.json" status
	[[ $output == *"$t/config.json:"*":"*": "* ]]
	[[ $output == *"running, pid $(cat "$SB_DIR/daemon.pid")"* ]]
	run -0 --separate-stderr "$SB_BUILD/shimbridge" -c "$t/config.json" status --json
	printf '%s' "$output" | jq -e '.up == true'
	[[ $stderr == *"$t/config.json:"* ]]
	run -0 "$SB_BUILD/shimbridge" -c "$t/config.json" audit
	[[ $output == *"alice"* ]]
	run -2 "$SB_BUILD/shimbridge" -c "$t/config.json" session list
	[[ $output == *"$t/config.json"* ]]
	# The store the broken file names, not the default one.
	run -0 --separate-stderr "$SB_BUILD/shimbridge" -c "$t/config.json" secret list
	[ "$output" = tok ]
	[[ $stderr == *"$t/config.json:"* ]]
}

# --- the audit log's group --------------------------------------------------------

@test "audit: members of the audit group read the log as themselves; others are told why" {
	[ "$(stat -c '%a %G' "$SB_AUDIT")" = "640 $SBA_AUDIT_GROUP" ]
	run -0 runuser -u sba-alice -- "$SB_DIR/bin/shimbridge" audit --file "$SB_AUDIT"
	[[ $output == *"reload"* ]] || [[ $output == *"alice"* ]]
	run -0 runuser -u sba-alice -- "$SB_DIR/bin/shimbridge" audit --file "$SB_AUDIT" --json
	printf '%s\n' "$output" | jq -se 'length >= 1'
	run -1 runuser -u sba-bob -- "$SB_DIR/bin/shimbridge" audit --file "$SB_AUDIT"
	[[ $output == *"Permission denied"* ]]
	[[ $output == *"readable by root and the members of the group $SBA_AUDIT_GROUP"* ]]
	# A log rotated away and recreated by someone else gets the same owner and mode.
	mv "$SB_AUDIT" "$SB_AUDIT.1"
	(umask 077 && : >"$SB_AUDIT")
	kill -HUP "$(cat "$SB_DIR/daemon.pid")"
	sb_wait_for 10 eval '[ "$(stat -c "%a %U %G" "$SB_AUDIT")" = "640 root $SBA_AUDIT_GROUP" ]'
	as sba-alice say rotated >/dev/null
	grep -q rotated "$SB_AUDIT"
	rm -f "$SB_AUDIT.1"
	run sba check --no-secrets
	[[ $output == *"audit log $SB_AUDIT (readable by group $SBA_AUDIT_GROUP)"* ]]
}

# --- the store under concurrent writers ---------------------------------------------

@test "secret set: 50 parallel writers, all 50 kept; a killed writer leaves the store as it was" {
	local t i pids=()
	t=$(sba_tmp)
	for i in $(seq -w 1 50); do
		printf 'value-%s' "$i" | "$SB_BUILD/shimbridge" -c "$SB_CONFIG" --store "$t/p.store" \
			--no-reload secret set "p$i" >/dev/null 2>"$t/err.$i" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	run -0 "$SB_BUILD/shimbridge" -c "$SB_CONFIG" --store "$t/p.store" secret list --json
	[ "$(printf '%s' "$output" | jq length)" = 50 ]
	[ "$(printf '%s' "$output" | jq -r '.[0].name, .[49].name' | tr '\n' ' ')" = "p01 p50 " ]
	# A writer killed while its value is still arriving changes nothing.
	cp "$t/p.store" "$t/before"
	mkfifo "$t/fifo"
	# Held open read-write here, so the writer's open for reading does not block.
	exec 5<>"$t/fifo"
	sb_bg "$SB_BUILD/shimbridge" -c "$SB_CONFIG" --store "$t/p.store" --no-reload \
		secret set late <"$t/fifo" >/dev/null 2>&1
	local w=$!
	printf 'half a val' >&5
	sleep 0.3
	kill -KILL "$w"
	wait "$w" 2>/dev/null || true
	exec 5>&-
	rm -f "$t/fifo"
	cmp "$t/before" "$t/p.store"
	run -0 "$SB_BUILD/shimbridge" -c "$SB_CONFIG" --store "$t/p.store" secret list
	[ "${#lines[@]}" = 50 ]
	# Only the store and its lock file: no temporary file left behind.
	[ "$(find "$t" -maxdepth 1 -name 'p.store*' | sort | xargs -n1 basename | tr '\n' ' ')" = "p.store p.store.lock " ]
}

# --- sessions -----------------------------------------------------------------------

@test "session add: git rewrites for every configured git host" {
	run -0 sba --no-reload session add sbagit --tools say
	local home
	home=$(getent passwd sb-sbagit | cut -d: -f6)
	grep -q 'shimbridge::https://github.com/' "$home/.gitconfig"
	grep -q 'shimbridge::https://git.example.test/' "$home/.gitconfig"
	run -0 runuser -u sb-sbagit -- env -i HOME="$home" /usr/bin/git ls-remote --get-url https://git.example.test/octo/one
	[ "$output" = "shimbridge::https://git.example.test/octo/one" ]
	run -0 runuser -u sb-sbagit -- env -i HOME="$home" /usr/bin/git ls-remote --get-url git@git.example.test:octo/one
	[ "$output" = "shimbridge::https://git.example.test/octo/one" ]
	run -0 runuser -u sb-sbagit -- env -i HOME="$home" /usr/bin/git ls-remote --get-url ssh://git@github.com/octo/one
	[ "$output" = "shimbridge::https://github.com/octo/one" ]
	run -0 sba --no-reload session remove sbagit
}

@test "session remove deletes the session's mirrors; --keep-mirrors keeps them" {
	local m=$SB_DIR/state/mirrors
	run -0 sba --no-reload session add sbam1 --tools say
	run -0 sba --no-reload session add sbam2 --tools say
	for s in sbam1 sbam2; do
		mkdir -p "$m/$s/github.com/octo/one.git/objects" "$m/$s/git.example.test/o/r.git"
		head -c 200000 /dev/urandom >"$m/$s/github.com/octo/one.git/objects/pack"
		: >"$m/$s/github.com/octo/one.git.lock"
	done
	mkdir -p "$m/alice/github.com/octo/one.git"
	run -0 sba --no-reload session remove sbam1
	[[ $output == *"removed 2 mirrors of session sbam1"* ]]
	[ ! -e "$m/sbam1" ]
	[ -d "$m/alice/github.com/octo/one.git" ]
	run -0 sba --no-reload session remove sbam2 --keep-mirrors
	[[ $output == *"kept the mirrors of session sbam2"* ]]
	[ -f "$m/sbam2/github.com/octo/one.git/objects/pack" ]
	rm -rf "$m/sbam2" "$m/alice"
}

# --- check: the secrets against their hosts ------------------------------------------

@test "check: one authenticated request per secret and host (ok + scopes, rejected, TLS verified); --offline skips" {
	local t good gport gsport fport ca
	t=$(sba_tmp)
	good="sbagood$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
	sb_fakegh_run "$SB_DIR/fgh" "$good"
	fport=$(cat "$SB_DIR/fgh/port")
	ca=$SB_DIR/certs/ca.pem
	mkdir -p "$t/git/root/octo"
	git init -q --bare "$t/git/root/octo/one.git"
	printf '%s' "$good" >"$t/git/token"
	sb_bg "$PY" "$SB_FIXTURES/githttp.py" --root "$t/git/root" --token-file "$t/git/token" \
		--port-file "$t/git/port" --log "$t/git/log" </dev/null >"$t/git/out" 2>&1
	echo $! >"$SB_DIR/githttp.pid"
	sb_wait_for 10 test -s "$t/git/port"
	gport=$(cat "$t/git/port")
	# The same repositories over TLS, for a git host with its own ca_file.
	mkdir -p "$t/gits"
	sb_bg "$PY" "$SB_FIXTURES/githttp.py" --root "$t/git/root" --token-file "$t/git/token" \
		--cert "$SB_DIR/certs/server.pem" --key "$SB_DIR/certs/server.key" \
		--port-file "$t/gits/port" --log "$t/gits/log" </dev/null >"$t/gits/out" 2>&1
	echo $! >"$SB_DIR/githttps.pid"
	sb_wait_for 10 test -s "$t/gits/port"
	gsport=$(cat "$t/gits/port")
	(umask 077 && printf '%s' "$good" >"$t/good" && printf 'sbawrongtoken' >"$t/bad")
	mkdir -m 700 "$t/sessions.d"
	cat >"$t/config.json" <<EOF
{
	$(sb_config_head)
	"secrets": {"good": {"source": "file", "path": "$t/good"},
		"bad": {"source": "file", "path": "$t/bad"}},
	"tools": {
		"ghgood": {"path": "/usr/bin/gh", "profile": "gh", "host": "localhost:$fport",
			"secrets": {"GH_ENTERPRISE_TOKEN": "good"}, "env": {"SSL_CERT_FILE": "$ca"}},
		"ghbad": {"path": "/usr/bin/gh", "profile": "gh", "host": "localhost:$fport",
			"secrets": {"GH_ENTERPRISE_TOKEN": "bad"}, "env": {"SSL_CERT_FILE": "$ca"}},
		"ghnoca": {"path": "/usr/bin/gh", "profile": "gh", "host": "localhost:$fport",
			"secrets": {"GH_ENTERPRISE_TOKEN": "good"}}
	},
	"git": {"path": "/usr/bin/git", "helper": "$SB_DIR/libexec/shimbridge-git",
		"hosts": {"good.example.test": {"upstream": "http://127.0.0.1:$gport", "secret": "good"},
			"bad.example.test": {"upstream": "http://127.0.0.1:$gport", "secret": "bad"},
			"tls.example.test": {"upstream": "https://localhost:$gsport", "secret": "good",
				"ca_file": "$ca"}}}
}
EOF
	chmod 600 "$t/config.json"
	printf '{"name": "g", "user": "sba-bob", "tools": ["git", "ghgood", "ghbad", "ghnoca"], "repos": ["octo/one"]}\n' \
		>"$t/sessions.d/g.json"
	chmod 600 "$t/sessions.d/g.json"

	run -2 env -u SSL_CERT_FILE "$SB_BUILD/shimbridge" -c "$t/config.json" check
	sb_fakegh_kill "$SB_DIR/fgh"
	kill "$(cat "$SB_DIR/githttp.pid")" "$(cat "$SB_DIR/githttps.pid")"
	sb_refute_contains "$good" "$output"
	sb_refute_contains sbawrongtoken "$output"
	[[ $output == *"ok       secret good on localhost:$fport (tool ghgood): accepted (HTTP 200), scopes: repo, read:org, gist, workflow"* ]]
	[[ $output == *"FAIL     secret bad on localhost:$fport (tool ghbad): rejected (HTTP 401)"*"shimbridge secret set bad"* ]]
	# The same secret without the host's CA: the certificate is not trusted.
	[[ $output =~ FAIL\ +secret\ good\ on\ localhost:$fport\ \(tool\ ghnoca\):\ no\ answer[^$'\n']*certificate ]]
	[[ $output == *"ok       secret good on git host good.example.test (ls-remote octo/one): accepted (HTTP 200)"* ]]
	[[ $output == *"FAIL     secret bad on git host bad.example.test (ls-remote octo/one): rejected (HTTP 401)"* ]]
	# One request per secret and host: good and bad once each at the API.
	[ "$(grep -c '"/api/v3/user"' "$SB_DIR/fgh/requests.log")" = 2 ]
	grep '"/api/v3/user"' "$SB_DIR/fgh/requests.log" | grep -q '"auth_ok": *true'
	grep '"/api/v3/user"' "$SB_DIR/fgh/requests.log" | grep -q '"auth_ok": *false'
	[ "$(grep -c 'info/refs' "$t/git/log")" = 2 ]
	# A git host's own ca_file verifies its TLS (the caller has no SSL_CERT_FILE).
	[[ $output == *"ok       secret good on git host tls.example.test (ls-remote octo/one): accepted (HTTP 200)"* ]]
	[ "$(grep -c 'info/refs' "$t/gits/log")" = 1 ]

	# --offline (and --no-secrets) make no request at all.
	: >"$SB_DIR/fgh/requests.log"
	run env -u SSL_CERT_FILE "$SB_BUILD/shimbridge" -c "$t/config.json" check --offline
	[[ $output != *"accepted"* ]]
	[[ $output != *"rejected"* ]]
	[ ! -s "$SB_DIR/fgh/requests.log" ]
}

# --- docs -----------------------------------------------------------------------------

@test "README's links to documents resolve; docs/THREATS.md covers the boundaries" {
	local l
	for l in $(grep -o '](\(docs/\)\?[A-Za-z0-9_./-]*\.md)' "$SB_ROOT/README.md" | sed 's/^](//; s/)$//'); do
		[ -f "$SB_ROOT/$l" ] || { echo "README links to missing $l" >&2; return 1; }
	done
	grep -q '(docs/THREATS.md)' "$SB_ROOT/README.md"
	! grep -q '`THREATS.md` of' "$SB_ROOT/README.md"
	for l in "Trust boundaries" "HTTP-layer injection" "jails" "runner" "Redaction" "Does not stop"; do
		grep -qi -- "$l" "$SB_ROOT/docs/THREATS.md"
	done
}

@test "check: a token the host calls expired is reported expired; one expiring within 7 days is a warning" {
	local t port soon
	t=$(sba_tmp)
	soon=$(date -u -d '+2 days' '+%Y-%m-%d %H:%M:%S UTC')
	# A stand-in upstream: 401 "token expired" for one token, 200 with an expiry for the other.
	cat >"$t/up.py" <<'EOF'
import base64, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
soon = sys.argv[2]
class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        auth = self.headers.get("Authorization", "")
        cred = base64.b64decode(auth[6:]).decode() if auth.startswith("Basic ") else ""
        if cred.endswith(":sbaexpired"):
            body = b'{"message": "Token expired"}'
            self.send_response(401)
        else:
            body = b"ok"
            self.send_response(200)
            self.send_header("GitHub-Authentication-Token-Expiration", soon)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
s = HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_port))
s.serve_forever()
EOF
	sb_bg "$PY" "$t/up.py" "$t/port" "$soon" </dev/null >/dev/null 2>&1
	echo $! >"$SB_DIR/up.pid"
	sb_wait_for 10 test -s "$t/port"
	port=$(cat "$t/port")
	(umask 077 && printf sbaexpired >"$t/expired" && printf sbasoon >"$t/soon")
	mkdir -m 700 "$t/sessions.d"
	cat >"$t/config.json" <<EOF
{
	$(sb_config_head)
	"secrets": {"old": {"source": "file", "path": "$t/expired"},
		"soon": {"source": "file", "path": "$t/soon"}},
	"tools": {},
	"git": {"path": "/usr/bin/git", "helper": "$SB_DIR/libexec/shimbridge-git",
		"hosts": {"old.example.test": {"upstream": "http://127.0.0.1:$port", "secret": "old"},
			"soon.example.test": {"upstream": "http://127.0.0.1:$port", "secret": "soon"}}}
}
EOF
	chmod 600 "$t/config.json"
	printf '{"name": "g", "user": "sba-bob", "tools": ["git"], "repos": ["octo/one"]}\n' >"$t/sessions.d/g.json"
	chmod 600 "$t/sessions.d/g.json"
	run -2 "$SB_BUILD/shimbridge" -c "$t/config.json" check
	kill "$(cat "$SB_DIR/up.pid")"
	[[ $output == *"FAIL     secret old on git host old.example.test (ls-remote octo/one): expired (HTTP 401)"* ]]
	[[ $output == *"warning  secret soon on git host soon.example.test (ls-remote octo/one): accepted (HTTP 200), but the token expires $soon"* ]]
}
