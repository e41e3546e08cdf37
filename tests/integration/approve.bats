#!/usr/bin/env bats
# Approval ("ask" rules), explain and the sandbox's `shimbridge list`: the real daemon,
# the real shim and the real admin CLI, as real users (lib.bash). One daemon serves
# the file; tests that reload it put the config back.

bats_require_minimum_version 1.5.0
load lib

SB_RUNNER=$SB_LANE-runner-appr
APPROVER=$SB_LANE-approver
BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

# The suite's config; $1: extra top-level members (the approval section).
appr_config() {
	sb_config <<EOF
{ $(sb_config_head)
  ${1:-}
  "secrets": {"tok": {"source": "file", "path": "$SB_DIR/etc/tok"}},
  "tools": {
    "deploy": {"path": "/bin/sh", "timeout": 60, "secrets": {"DEPLOY_TOKEN": "tok"},
               "rules": [{"deny": ["-c", "rm *"], "reason": "removing files is not allowed"},
                         {"allow": ["-c", "echo free*"]},
                         {"ask": ["-c", "**"], "timeout": 60}]},
    "quick": {"path": "/bin/sh", "rules": [{"ask": ["-c", "**"], "timeout": 2}]},
    "gh": {"path": "/usr/bin/gh", "profile": "gh", "secrets": {"GH_TOKEN": "tok"},
           "rules": [{"allow": ["pr", "list", "**"]}, {"ask": ["pr", "merge", "**"]}]}
  },
  "git": {"path": "/usr/bin/git", "helper": "$SB_BUILD/shimbridge-git",
          "hosts": {"github.com": {"upstream": "https://github.com", "secret": "tok"}}}
}
EOF
}

setup_file() {
	sb_build_resolve
	sb_users
	id "$APPROVER" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$APPROVER"
	sb_tree
	export T=$SB_DIR/t
	mkdir -p "$T" "$SB_DIR/tools"
	chmod 755 "$T"
	install -m 0755 "$SB_FIXTURES/tools/approver.sh" "$SB_DIR/tools/"
	SECRET="$SB_LANE-secret-$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
	export SECRET
	(umask 077 && printf '%s\n' "$SECRET" >"$SB_DIR/etc/tok")
	appr_config
	sb_session alice "$SB_ALICE" '["deploy", "quick", "gh", "git"]' '"repos": ["octo/repo"]'
	sb_session bob "$SB_BOB" '["deploy"]'
	sb_shim_links deploy quick gh shimbridge
	sb_start 3>&-
	sb_keep "$SB_PID"
	echo "$SB_PID" >"$SB_DIR/daemon.pid"
}

teardown_file() {
	local pid
	pid=$(cat "$SB_DIR/daemon.pid" 2>/dev/null)
	[ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null || true
	sb_wait_for 10 eval "! kill -0 $pid 2>/dev/null" || true
	pkill -KILL -u "$SB_RUNNER" 2>/dev/null || true
	pkill -KILL -u "$APPROVER" 2>/dev/null || true
	userdel "$SB_RUNNER" 2>/dev/null || true
	userdel "$APPROVER" 2>/dev/null || true
	rm -rf "$SB_DIR"
	sb_reap_suite
}

setup() {
	SB_PID=$(cat "$SB_DIR/daemon.pid")
	export SB_PID
}

teardown() {
	local rc=0
	if ! kill -0 "$SB_PID" 2>/dev/null; then
		echo "the daemon died:" >&2
		tail -n 30 "$SB_DIR/log/daemon.log" >&2
		rc=1
	fi
	if grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$SB_DIR/log/daemon.log"; then
		cat "$SB_DIR/log/daemon.log" >&2
		rc=1
	fi
	sb_reap
	return "$rc"
}

# The admin CLI against this suite's daemon.
adm() {
	"$SB_BUILD/shimbridge" -c "$SB_CONFIG" "$@"
}

# call NAME USER TOOL ARG...: a shim call in the background; its stdout, stderr and
# exit status go to $T/NAME.{out,err,rc}.
call() {
	local name=$1 u=$2 home
	shift 2
	home=$(getent passwd "$u" | cut -d: -f6)
	rm -f "$T/$name".out "$T/$name".err "$T/$name".rc
	sb_bg /bin/sh -c 'n=$1; u=$2; h=$3; shift 3; cd "$h" || exit 1
	    runuser -u "$u" -- env -i HOME="$h" PATH="$SB_DIR/bin:/usr/bin:/bin" \
	    SHIMBRIDGE_SOCKET="$SB_SOCK" LANG=C.UTF-8 "$@" >"$T/$n.out" 2>"$T/$n.err"
	    echo $? >"$T/$n.rc"' call "$name" "$u" "$home" "$@" </dev/null
}

# Whether a pending request's command contains TEXT.
has_pending() {
	adm pending --json | grep -q -F -- "$1"
}

# The id of the pending request whose command contains TEXT (waits up to 10 s).
pending_id() {
	sb_wait_for 10 has_pending "$1" || {
		echo "no pending request with $1:" >&2
		adm pending >&2
		return 1
	}
	adm pending --json | "$PY" -c 'import json, sys
for e in json.load(sys.stdin):
    if sys.argv[1] in e["command"]:
        print(e["id"]); break' "$1"
}

# Wait for call NAME to end (30 s) and print its exit status.
call_rc() {
	sb_wait_for 30 test -s "$T/$1.rc" || { echo "call $1 did not end" >&2; return 1; }
	cat "$T/$1.rc"
}

@test "approve: the call waits with one line on stderr, then runs once approved" {
	call a1 "$SB_ALICE" deploy -c 'echo approved-ran'
	id=$(pending_id "approved-ran")
	sb_wait_for 5 grep -q "waiting" "$T/a1.err"
	run cat "$T/a1.err"
	[ "$output" = "shimbridge: waiting for the operator to approve request $id: deploy -c 'echo approved-ran'" ]
	[ ! -s "$T/a1.rc" ]
	run -0 adm pending
	[[ $output == *"alice"*"deploy -c 'echo approved-ran'"*"tools.deploy.rules[2]"* ]]
	run -0 adm approve "$id"
	[ "$output" = "approved request $id" ]
	[ "$(call_rc a1)" = 0 ]
	[ "$(cat "$T/a1.out")" = approved-ran ]
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r['decision'] == 'approve' and r['decided_by'] == 'operator' and r['operator_uid'] == 0 and r['session'] == 'alice'"
	sb_audit_grep "r['event'] == 'pending' and r['request'] == $id and r['rule'] == 'tools.deploy.rules[2]'"
	run -0 adm pending
	[ "$output" = "no requests wait for approval" ]
}

@test "deny: the operator's reason reaches the agent in one structured line, exit 126" {
	call d1 "$SB_ALICE" deploy -c 'echo never-runs'
	id=$(pending_id "never-runs")
	run -0 adm deny "$id" --why "use the staging deploy instead"
	[ "$output" = "denied request $id" ]
	[ "$(call_rc d1)" = 126 ]
	[ ! -s "$T/d1.out" ]
	run tail -n 1 "$T/d1.err"
	[ "$output" = "shimbridge: refused: deploy -c 'echo never-runs' (request $id): the operator denied it (use the staging deploy instead); do not retry it unchanged; change the approach or ask the operator" ]
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r['decision'] == 'deny' and r['decided_by'] == 'operator'"
	# Nothing ran: no "allowed" record for it.
	run -1 sb_audit_grep "r['event'] == 'allowed' and 'echo never-runs' in str(r.get('argv'))"
	# A decided request is gone: deciding again fails with exit 2.
	run -2 adm approve "$id"
	[[ $output == *"no request $id is waiting"* ]]
	run -64 adm approve notanumber
	run -2 adm approve "$id" --for 10x
	[[ $output == *"expected a duration"* ]]
}

@test "timeout: no answer within the rule's timeout is a denial" {
	call t1 "$SB_ALICE" quick -c 'echo too-late'
	id=$(pending_id "too-late")
	[ "$(call_rc t1)" = 126 ]
	run tail -n 1 "$T/t1.err"
	[ "$output" = "shimbridge: refused: quick -c 'echo too-late' (request $id): nobody approved it within 2 seconds; run it again when the operator can answer, or ask them to approve such calls ahead (shimbridge approve ID --for DURATION)" ]
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r['decided_by'] == 'timeout' and r['decision'] == 'deny'"
}

@test "concurrent pending calls: approve one, deny another, each gets its own answer" {
	call c1 "$SB_ALICE" deploy -c 'echo first'
	call c2 "$SB_BOB" deploy -c 'echo second'
	call c3 "$SB_ALICE" deploy -c 'echo third'
	id1=$(pending_id "echo first")
	id2=$(pending_id "echo second")
	id3=$(pending_id "echo third")
	run -0 adm pending --json
	"$PY" -c 'import json, sys
rows = json.loads(sys.argv[1])
assert len(rows) == 3, rows
for r in rows:
    assert set(r) == {"id", "session", "age", "expires_in", "command", "rule", "approver"}, r
assert {r["session"] for r in rows} == {"alice", "bob"}' "$output"
	adm deny "$id2" --why "bob may not"
	adm approve "$id3"
	[ "$(call_rc c2)" = 126 ]
	[ "$(call_rc c3)" = 0 ]
	[ "$(cat "$T/c3.out")" = third ]
	[[ $(cat "$T/c2.err") == *"(bob may not)"* ]]
	[ ! -s "$T/c1.rc" ]
	adm approve "$id1"
	[ "$(call_rc c1)" = 0 ]
	[ "$(cat "$T/c1.out")" = first ]
}

@test "--for: identical calls of that session run without asking; others still ask" {
	call f1 "$SB_ALICE" deploy -c 'echo same'
	id=$(pending_id "echo same")
	run -0 adm approve "$id" --for 10m
	[ "$output" = "approved request $id, and identical calls of that session for 600 seconds" ]
	[ "$(call_rc f1)" = 0 ]
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r.get('for') == 600"
	# The same call again: no wait, no line on stderr.
	run -0 --separate-stderr as_t 20 "$SB_ALICE" deploy -c 'echo same'
	[ "$output" = same ]
	[ -z "$stderr" ]
	sb_audit_grep "r['event'] == 'approval' and r['decided_by'] == 'cache --for' and r['session'] == 'alice'"
	# Another session's identical call still asks.
	call f2 "$SB_BOB" deploy -c 'echo same'
	id2=$(pending_id "echo same")
	adm deny "$id2"
	[ "$(call_rc f2)" = 126 ]
	[[ $(cat "$T/f2.err") == *"the operator denied it (no reason given)"* ]]
	# A different call of the same session still asks.
	call f3 "$SB_ALICE" deploy -c 'echo other'
	id3=$(pending_id "echo other")
	adm deny "$id3"
	[ "$(call_rc f3)" = 126 ]
}

@test "the agent's Ctrl-C or going away cancels its pending request" {
	call x1 "$SB_ALICE" deploy -c 'echo cancel-me'
	id=$(pending_id "cancel-me")
	pid=$(pgrep -u "$SB_ALICE" -f -- "echo cancel-me" | head -n 1)
	kill -INT "$pid"
	[ "$(call_rc x1)" = 126 ]
	[ "$(tail -n 1 "$T/x1.err")" = "shimbridge: refused: deploy -c 'echo cancel-me' (request $id): interrupted while waiting for approval; run it again if it is still needed" ]
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r['decided_by'] == 'cancelled'"
	# Killed outright: the connection closes and the request disappears.
	call x2 "$SB_ALICE" deploy -c 'echo killed'
	id=$(pending_id "echo killed")
	pkill -KILL -u "$SB_ALICE" -f -- "echo killed"
	sb_wait_for 10 eval "! has_pending 'echo killed'"
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r['decided_by'] == 'cancelled' and r['reason'] == 'the connection ended while waiting'"
}

@test "reload while pending: a reload that keeps the rule keeps the call waiting; one that drops it denies it" {
	call r1 "$SB_ALICE" deploy -c 'echo across-reload'
	id=$(pending_id "across-reload")
	sb_reload | grep -q '"ok":true'
	run -0 adm pending --json
	[[ $output == *"across-reload"* ]]
	adm approve "$id"
	[ "$(call_rc r1)" = 0 ]
	[ "$(cat "$T/r1.out")" = across-reload ]
	# Now the rule goes away: the waiting call is refused with the reason.
	call r2 "$SB_ALICE" deploy -c 'echo dropped'
	id=$(pending_id "echo dropped")
	sb_json_edit "$SB_CONFIG" 'c["tools"]["deploy"]["rules"][2] = {"deny": ["-c", "**"], "reason": "frozen"}'
	sb_reload | grep -q '"ok":true'
	[ "$(call_rc r2)" = 126 ]
	run tail -n 1 "$T/r2.err"
	[ "$output" = "shimbridge: refused: deploy -c 'echo dropped' (request $id): the bridge's configuration was reloaded and now refuses it (frozen); run it again" ]
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r['decided_by'] == 'reload'"
	appr_config
	sb_reload | grep -q '"ok":true'
}

@test "approver command: approves, denies with its reason, its timeout denies; it runs as its own user" {
	install -m 0666 /dev/null "$SB_DIR/tools/approver.log"
	appr_config "\"approval\": {\"command\": [\"$SB_DIR/tools/approver.sh\"], \"user\": \"$APPROVER\", \"command_timeout\": 2},"
	sb_reload | grep -q '"ok":true'
	run -0 as_t 30 "$SB_ALICE" deploy -c 'echo ok-by-approver'
	[[ $output == *ok-by-approver ]]
	sb_audit_grep "r['event'] == 'approval' and r['decided_by'] == 'approver' and r['decision'] == 'approve' and r['reason'] == 'looks fine'"
	run -126 as_t 30 "$SB_ALICE" deploy -c 'echo no-by-approver'
	[[ $output == *"shimbridge: refused: deploy -c 'echo no-by-approver' (request "*"): the approver denied it (not during the freeze); do not retry it unchanged; ask the operator what to do instead" ]]
	run -126 as_t 30 "$SB_ALICE" deploy -c 'echo hang-approver'
	[[ $output == *"the approver did not decide within 2 seconds, which counts as a denial"* ]]
	run -126 as_t 30 "$SB_ALICE" deploy -c 'echo unknown-to-approver'
	[[ $output == *"the approver failed (status 3), which counts as a denial"* ]]
	# It ran as its dedicated user, with the request on stdin; nothing of it is left.
	grep -q "^uid=$(id -u "$APPROVER") req={\"id\":[0-9]*,\"session\":\"alice\",\"command\":\"deploy -c 'echo ok-by-approver'\"" "$SB_DIR/tools/approver.log"
	sb_wait_for 5 eval "! pgrep -u $APPROVER >/dev/null"
	# The operator can still decide first: the approver is stopped.
	appr_config "\"approval\": {\"command\": [\"$SB_DIR/tools/approver.sh\"], \"user\": \"$APPROVER\", \"command_timeout\": 60},"
	sb_reload | grep -q '"ok":true'
	call h1 "$SB_ALICE" deploy -c 'echo hang-but-operator'
	id=$(pending_id "hang-but-operator")
	sb_wait_for 10 eval "pgrep -u $APPROVER >/dev/null"
	run -0 adm pending
	[[ $output == *"(approver running)"* ]]
	adm approve "$id"
	[ "$(call_rc h1)" = 0 ]
	sb_wait_for 5 eval "! pgrep -u $APPROVER >/dev/null"
	appr_config
	sb_reload | grep -q '"ok":true'
}

@test "approval.user must be a dedicated user: a session user or the runner is refused" {
	cp "$SB_CONFIG" "$T/good.json"
	appr_config "\"approval\": {\"command\": [\"$SB_DIR/tools/approver.sh\"], \"user\": \"$SB_ALICE\"},"
	run -1 "$SB_BUILD/shimbridged" -c "$SB_CONFIG" --check
	[[ $output == *"approval.user: $SB_ALICE is a user of session alice"* ]]
	appr_config "\"approval\": {\"command\": [\"$SB_DIR/tools/approver.sh\"], \"user\": \"$SB_RUNNER\"},"
	run -1 "$SB_BUILD/shimbridged" -c "$SB_CONFIG" --check
	[[ $output == *"must be a dedicated user"* ]]
	appr_config "\"approval\": {\"command\": [\"$SB_DIR/tools/approver.sh\"]},"
	run -1 "$SB_BUILD/shimbridged" -c "$SB_CONFIG" --check
	[[ $output == *"\"command\" and \"user\" go together"* ]]
	cp "$T/good.json" "$SB_CONFIG"
}

@test "explain: verdict, rule, environment names, secrets by name and jail for allow, deny and ask; nothing runs" {
	n=$(wc -l <"$SB_AUDIT")
	run -0 adm explain --session alice -- deploy -c 'echo free lunch'
	[[ $output == *"verdict:  allow"* ]]
	[[ $output == *"rule:     tools.deploy.rules[1]"* ]]
	[[ $output == *"DEPLOY_TOKEN"* ]]
	[[ $output == *"tok as DEPLOY_TOKEN: the value, in the environment"* ]]
	[[ $output == *"jail:     namespaces pid mount ipc uts; network host; runner $SB_RUNNER"* ]]
	[[ $output == *"Nothing was run."* ]]
	[[ $output != *"$SECRET"* ]]
	run -0 adm explain --session alice -- deploy -c 'rm -rf /'
	[[ $output == *"verdict:  deny"* ]]
	[[ $output == *"removing files is not allowed"* ]]
	run -0 adm explain --session alice -- deploy -c 'echo x'
	[[ $output == *"verdict:  ask (waits up to 60 s for the operator; no answer = refused)"* ]]
	run -0 adm explain --session alice --json -- gh pr merge 3
	"$PY" -c 'import json, sys
o = json.loads(sys.argv[1])
assert o["verdict"] == "ask", o
assert o["rule"] == "tools.gh.rules[1]", o
assert o["argv_run"] == ["pr", "merge", "3", "-R", "octo/repo"], o
assert "GH_CONFIG_DIR" in o["env"] and "GH_TOKEN" in o["env"], o
assert o["secrets"][0]["secret"] == "tok" and "placeholder" in o["secrets"][0]["delivery"], o
assert set(o["jail"]["namespaces"]) >= {"pid", "mount", "ipc", "uts"}, o
assert sys.argv[2] not in sys.argv[1]' "$output" "$SECRET"
	run -0 adm explain --session alice -- git push https://github.com/octo/repo
	[[ $output == *"verdict:  allow"* ]]
	[[ $output == *"rule:     git.hosts.github.com/sessions.alice.repos"* ]]
	[[ $output == *"upstream: https://github.com/octo/repo.git"* ]]
	[[ $output == *"network loopback only, reaching the bridge's injector"* ]]
	run -0 adm explain --session alice -- git push https://github.com/other/repo main
	[[ $output == *"verdict:  deny"* ]]
	run -2 adm explain --session nosuch -- deploy -c true
	# Nothing ran: no allowed, pending or done record since.
	run -1 grep -E '"event":"(allowed|pending|done)"' <(tail -n +$((n + 1)) "$SB_AUDIT")
}

@test "shimbridge list in the sandbox: tools, what each allows, repositories; --json; --help, --version" {
	run -0 as_t 20 "$SB_ALICE" shimbridge list
	[[ $output == *"Session alice."* ]]
	[[ $output == *"deploy -c echo free*, deploy -c [ARGS] (after the operator approves)"* ]]
	[[ $output == *"gh pr merge [ARGS] (after the operator approves)"* ]]
	[[ $output == *"git    git (push/fetch of allowed repositories)"* ]]
	[[ $output == *"Repositories: octo/repo"* ]]
	[[ $output == *"shimbridge: refused: WHAT: WHY; WHAT TO DO INSTEAD"* ]]
	[[ $output != *"$SECRET"* ]]
	run -0 as_t 20 "$SB_ALICE" shimbridge list --json
	"$PY" -c 'import json, sys
o = json.loads(sys.argv[1])
assert o["session"] == "alice" and o["repos"] == ["octo/repo"], o
assert [t["name"] for t in o["tools"]] == ["deploy", "quick", "gh", "git"], o' "$output"
	run -0 as_t 20 "$SB_BOB" shimbridge list
	[[ $output == *"Session bob."* ]]
	[[ $output != *"gh pr"* ]]
	run -0 as_t 20 "$SB_ALICE" shimbridge --help
	[[ $output == *"shimbridge list"* ]]
	run -0 as_t 20 "$SB_ALICE" shimbridge --version
	run -64 as_t 20 "$SB_ALICE" shimbridge approve 1
	# A user without a session gets the usual refusal.
	run -120 as_t 20 "$SB_MALLORY" shimbridge list
}

@test "only root decides: a session user cannot send approve, deny, pending or explain" {
	call p1 "$SB_ALICE" deploy -c 'echo guarded'
	id=$(pending_id "echo guarded")
	for op in "{\"op\":\"approve\",\"id\":$id}" "{\"op\":\"deny\",\"id\":$id}" '{"op":"pending"}' \
	    '{"op":"explain","session":"alice","tool":"deploy","argv":[]}'; do
		run -0 runuser -u "$SB_ALICE" -- "$PY" -c '
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
def frame(t, p):
    p = p.encode()
    s.sendall(struct.pack(">IB", len(p), t) + p)
frame(1, json.dumps({"proto": 2, "client": "test"}))
frame(2, sys.argv[2])
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
off = 0
while off + 5 <= len(data):
    n, t = struct.unpack(">IB", data[off:off + 5])
    if t == 3:
        print(json.loads(data[off + 5:off + 5 + n])["code"])
    off += 5 + n' "$SB_SOCK" "$op"
		[ "$output" = protocol ]
	done
	run -0 adm pending --json
	[[ $output == *"echo guarded"* ]]
	run -1 runuser -u "$SB_ALICE" -- "$SB_BUILD/shimbridge" -c "$SB_CONFIG" pending
	adm approve "$id"
	[ "$(call_rc p1)" = 0 ]
}
