#!/usr/bin/env bats
# Secrets end to end: every source (file, env, systemd credential, encrypted store,
# command with ttl and timeout), per-session overrides, and redaction of what a
# host tool prints (tests/fixtures/tools/printsecret) plus audit lines and error
# messages. One daemon serves the whole file; tools are printsecret under many
# names, one per secret source.

bats_require_minimum_version 1.5.0
load lib

FIXTURES=$SB_FIXTURES
PRINTSECRET="$FIXTURES/tools/printsecret"

# A value that makes every encoding differ from the others: '/', '+', '?', '=',
# '&', '"', '\', non-ASCII letters; '???' and '>>>' put '/' and '+' into the
# base64 of every byte offset, so the standard and URL-safe alphabets differ too.
secret_value() {
	printf 's3cr3t/+?=&"\\value-ÄÖ-???>>>-%s' "$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
}

setup_file() {
	sb_users
	sb_tree
	# Root-only scratch for what the tests capture ($SB_DIR itself is 0755).
	T=$SB_DIR/t
	mkdir -m 700 "$T"
	export T
	local e=$SB_DIR/etc
	S_FILE=$(secret_value)
	S_BOB="bob-$(secret_value)"
	S_BAD="bad-$(secret_value)"
	S_ENV="env-$(secret_value)"
	S_CRED="cred-$(secret_value)"
	S_STORE="store-$(secret_value)"
	S_ASCII="ghp_sbt$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
	CMD_SALT=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
	export S_FILE S_BOB S_BAD S_ENV S_CRED S_STORE S_ASCII CMD_SALT
	(umask 077
		printf '%s\n' "$S_ASCII" >"$e/s_ascii.secret"
		printf '%s\n' "$S_FILE" >"$e/s_file.secret"
		printf '%s' "$S_BOB" >"$e/bob.secret")
	printf '%s\n' "$S_BAD" >"$e/s_bad.secret"
	chmod 644 "$e/s_bad.secret"
	# systemd credentials: a root-only directory, as systemd makes it.
	mkdir -m 700 "$SB_DIR/creds"
	(umask 077 && printf '%s' "$S_CRED" >"$SB_DIR/creds/gh-cred")
	# Command sources: root-owned scripts the runner may run; the counter keeps
	# its state in a runner-owned directory, so each run prints a new value. It
	# comes last in "secrets", after the slow ones, so its value is fresh when a
	# (re)load ends.
	mkdir -m 755 "$SB_DIR/cmd"
	install -d -m 700 -o "$SB_RUNNER" "$SB_DIR/cmdstate"
	cat >"$SB_DIR/cmd/counter" <<'EOF'
#!/bin/sh
# counter STATEDIR SALT: prints cmdtok-SALT-N, N = 1, 2, ... one more per run.
n=$(cat "$1/n" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" >"$1/n"
printf 'cmdtok-%s-%d\n' "$2" "$n"
EOF
	printf '#!/bin/sh\necho "vault is sealed" >&2\nexit 3\n' >"$SB_DIR/cmd/failing"
	printf '#!/bin/sh\nexec sleep 60\n' >"$SB_DIR/cmd/hanging"
	chmod 755 "$SB_DIR/cmd/counter" "$SB_DIR/cmd/failing" "$SB_DIR/cmd/hanging"
	# The store: with the admin CLI if it is built, else with a helper built
	# against bridge/store.c.
	STORE_HOW=
	if [ -x "$SB_BUILD/shimbridge" ] && "$SB_BUILD/shimbridge" --help 2>&1 | grep -q 'secret set' &&
	    "$SB_BUILD/shimbridge" --store "$e/secrets.store" --key "$e/store.key" secret init \
		>"$T/store.log" 2>&1 &&
	    printf '%s' "$S_STORE" | "$SB_BUILD/shimbridge" --store "$e/secrets.store" \
		--key "$e/store.key" secret set gh-store --no-reload >>"$T/store.log" 2>&1; then
		STORE_HOW="the admin CLI ($SB_BUILD/shimbridge secret init/set)"
	else
		rm -f "$e/secrets.store" "$e/store.key"
		if (cd "$SB_ROOT" && cc -std=c11 -D_GNU_SOURCE -Icommon -Ibridge \
			tests/fixtures/mkstore.c bridge/store.c common/util.c -lsodium \
			-o "$T/mkstore") >>"$T/store.log" 2>&1 &&
		    printf '%s' "$S_STORE" | "$T/mkstore" "$e/store.key" "$e/secrets.store" \
			gh-store >>"$T/store.log" 2>&1; then
			STORE_HOW="tests/fixtures/mkstore.c (no usable admin CLI)"
		fi
	fi
	export STORE_HOW
	local store_cfg='' store_secret='' store_tool=''
	if [ -n "$STORE_HOW" ]; then
		store_cfg="\"store\": {\"path\": \"$e/secrets.store\", \"key\": \"$e/store.key\"},"
		store_secret="\"s_store\": {\"source\": \"store\", \"entry\": \"gh-store\"},"
		store_tool=", \"ps_store\": $(ps_tool s_store)"
	fi
	sb_shim_links ps_file ps_bad ps_env ps_cred ps_store ps_cmd ps_fail ps_hang ps_deny plain
	sb_config <<EOF
{
	$(sb_config_head)
	$store_cfg
	"secrets": {
		"s_file": {"source": "file", "path": "$e/s_file.secret"},
		"s_bad": {"source": "file", "path": "$e/s_bad.secret"},
		"s_env": {"source": "env", "variable": "SANDBOX_GH_TOKEN"},
		"s_cred": {"source": "systemd", "credential": "gh-cred"},
		"s_ascii": {"source": "file", "path": "$e/s_ascii.secret"},
		$store_secret
		"s_fail": {"source": "command", "command": ["$SB_DIR/cmd/failing"]},
		"s_hang": {"source": "command", "command": ["$SB_DIR/cmd/hanging"], "timeout": 2},
		"s_cmd": {"source": "command", "command": ["$SB_DIR/cmd/counter", "$SB_DIR/cmdstate", "$CMD_SALT"],
			"ttl": 2, "timeout": 5}
	},
	"tools": {
		"ps_file": $(ps_tool s_file),
		"ps_bad": $(ps_tool s_bad),
		"ps_env": $(ps_tool s_env),
		"ps_cred": $(ps_tool s_cred),
		"ps_cmd": $(ps_tool s_cmd),
		"ps_fail": $(ps_tool s_fail),
		"ps_hang": $(ps_tool s_hang),
		"ps_deny": {"path": "$PRINTSECRET", "secrets": {"PS_SECRET": "s_file"},
			"rules": [{"deny": ["--forbidden", "**"], "reason": "forbidden by the test"},
				{"allow": ["**"]}]},
		"plain": {"path": "/bin/echo", "rules": [{"allow": ["**"]}]}
		$store_tool
	}
}
EOF
	sb_session alice "$SB_ALICE" \
		'["ps_file", "ps_bad", "ps_env", "ps_cred", "ps_store", "ps_cmd", "ps_fail", "ps_hang", "ps_deny", "plain"]'
	sb_session bob "$SB_BOB" '["ps_file", "plain"]' \
		"\"secrets\": {\"s_file\": {\"source\": \"file\", \"path\": \"$e/bob.secret\"}}"
	# Without a store there is no ps_store tool to grant.
	[ -n "$STORE_HOW" ] || sed -i 's/"ps_store", //' "$SB_DIR/etc/sessions.d/alice.json"
	SANDBOX_GH_TOKEN=$S_ENV CREDENTIALS_DIRECTORY=$SB_DIR/creds sb_start
}

teardown_file() {
	local rc=0
	sb_stop || rc=$?
	[ -n "${SB_DIR:-}" ] && rm -rf "$SB_DIR"
	sb_reap_suite
	return "$rc"
}

teardown() {
	sb_reap
}

# ps_tool SECRET — a printsecret tool entry with PS_SECRET from SECRET.
ps_tool() {
	printf '{"path": "%s", "secrets": {"PS_SECRET": "%s"}, "rules": [{"allow": ["**"]}]}' \
		"$PRINTSECRET" "$1"
}

# check_redacted VALUE FILE — FILE holds printsecret's lines for VALUE: exactly the
# expected lines, each form of the value replaced by one [REDACTED] and the text
# around it intact; and no form of VALUE anywhere (check_no_forms).
check_redacted() {
	check_no_forms "$1" "$2"
	V=$1 "$PY" - "$2" <<'PYEOF'
import base64, os, sys
MASK = b"[REDACTED]"
v = os.environb[b"V"]
got = open(sys.argv[1], "rb").read().split(b"\n")
if got and got[-1] == b"":
    got.pop()
want = [b"raw<<" + MASK + b">>"]
for k in range(3):
    # base64 of K filler bytes + the value: only the characters made of the
    # value's bits alone are masked; those mixed with filler or padding stay.
    lo, hi = -(-8 * k // 6), 8 * (k + len(v)) // 6
    for lab, f in (("b64-%d" % k, base64.b64encode), ("b64url-%d" % k, base64.urlsafe_b64encode)):
        t = f(b"#" * k + v)
        want.append(lab.encode() + b"<<" + t[:lo] + MASK + t[hi:] + b">>")
want += [b"url<<" + MASK + b">>", b"url-lower<<" + MASK + b">>",
         b'json<<{"token": "' + MASK + b'", "n": 1}>>',
         b"hex<<" + MASK + b">>", b"HEX<<" + MASK + b">>", b"done"]
bad = []
for w in want:
    if w not in got:
        lab = w.split(b"<<")[0]
        line = [g for g in got if g.split(b"<<")[0] == lab]
        bad.append("line %s: want %r, got %r" % (lab.decode(), w,
                   line[0].replace(v, b"<SECRET>") if line else b"(missing)"))
extra = [g for g in got if g not in want]
if extra:
    bad.append("%d unexpected lines" % len(extra))
if bad:
    sys.exit("\n".join(bad))
PYEOF
}

# psrun USER TOOL ARGS... — run a tool through the shim, stdout and stderr to
# $T/out and $T/err (root-only; the tests read them as root).
psrun() {
	local u=$1
	shift
	PSRC=0
	as "$u" timeout 30 "$@" >"$T/out" 2>"$T/err" || PSRC=$?
}

# sha256 of a string, hex.
sha() {
	printf '%s' "$1" | sha256sum | cut -d' ' -f1
}

@test "redaction: every form of the secret on stdout is masked, the text around it intact" {
	psrun "$SB_ALICE" ps_file PS_SECRET
	[ "$PSRC" -eq 0 ]
	check_redacted "$S_FILE" "$T/out"
	[ ! -s "$T/err" ]
}

@test "redaction: the same on stderr" {
	psrun "$SB_ALICE" ps_file --stderr PS_SECRET
	[ "$PSRC" -eq 0 ]
	[ "$(cat "$T/out")" = "stdout-ok" ]
	check_redacted "$S_FILE" "$T/err"
}

@test "redaction: the secret as the last bytes before exit, no newline" {
	psrun "$SB_ALICE" ps_file --last PS_SECRET
	[ "$PSRC" -eq 0 ]
	[ "$(cat "$T/out")" = "tail:[REDACTED]" ]
	# and byte-exact: nothing held back, nothing added
	[ "$(wc -c <"$T/out")" -eq 15 ]
}

@test "file source (root, 0600): the tool gets the value" {
	psrun "$SB_ALICE" ps_file --sha256 PS_SECRET
	[ "$PSRC" -eq 0 ]
	[ "$(cat "$T/out")" = "$(sha "$S_FILE")" ]
}

@test "file source with mode 0644: daemon up, that tool refused (119, names the secret), others work" {
	psrun "$SB_ALICE" ps_bad --sha256 PS_SECRET
	[ "$PSRC" -eq 119 ]
	grep -qF "secret s_bad" "$T/err"
	run ! grep -aqF "$S_BAD" "$T/err" "$T/out" "$SB_DIR/log/daemon.log" "$SB_AUDIT"
	# The operator learns why.
	grep -q "s_bad.*must be owned by root with mode 0600" "$SB_DIR/log/daemon.log"
	psrun "$SB_ALICE" plain still-here
	[ "$PSRC" -eq 0 ]
	[ "$(cat "$T/out")" = "still-here" ]
	psrun "$SB_ALICE" ps_file --sha256 PS_SECRET
	[ "$PSRC" -eq 0 ]
}

@test "env source: the value comes from the daemon's environment" {
	psrun "$SB_ALICE" ps_env --sha256 PS_SECRET
	[ "$PSRC" -eq 0 ]
	[ "$(cat "$T/out")" = "$(sha "$S_ENV")" ]
	psrun "$SB_ALICE" ps_env PS_SECRET
	check_redacted "$S_ENV" "$T/out"
}

@test "systemd source: \$CREDENTIALS_DIRECTORY/<credential>" {
	psrun "$SB_ALICE" ps_cred --sha256 PS_SECRET
	[ "$PSRC" -eq 0 ]
	[ "$(cat "$T/out")" = "$(sha "$S_CRED")" ]
	psrun "$SB_ALICE" ps_cred PS_SECRET
	check_redacted "$S_CRED" "$T/out"
}

@test "store source: an entry of the encrypted store" {
	[ -n "$STORE_HOW" ] || skip "no store: neither the admin CLI ($SB_BUILD/shimbridge secret init/set) nor tests/fixtures/mkstore.c could make one: $(tail -c 300 "$T/store.log" 2>/dev/null)"
	echo "# store made with $STORE_HOW" >&3
	psrun "$SB_ALICE" ps_store --sha256 PS_SECRET
	[ "$PSRC" -eq 0 ]
	[ "$(cat "$T/out")" = "$(sha "$S_STORE")" ]
	psrun "$SB_ALICE" ps_store PS_SECRET
	check_redacted "$S_STORE" "$T/out"
	# The value is nowhere in the store file or the key in clear.
	run ! grep -aqF "$S_STORE" "$SB_DIR/etc/secrets.store"
}

# reload_daemon — SIGHUP, then wait (15 s) for the reload's audit line.
reload_daemon() {
	local n _
	n=$(wc -l <"$SB_AUDIT")
	kill -HUP "$SB_PID"
	for _ in $(seq 150); do
		tail -n +"$((n + 1))" "$SB_AUDIT" | grep -q '"event":"reload","ok":true' && return 0
		sleep 0.1
	done
	echo "no reload line in the audit log" >&2
	return 1
}

# cmd_n SHA — which counter value N (cmdtok-SALT-N) has this SHA-256; empty if none.
cmd_n() {
	# The counter runs about once a second for as long as the daemon lives: every value
	# up to its newest, hashed in one process.
	"$PY" - "$CMD_SALT" "$(($(cat "$SB_DIR/cmdstate/n") + 1))" "$1" <<'PYEOF'
import hashlib, sys
salt, top, want = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for n in range(top, 0, -1):
    if hashlib.sha256(f"cmdtok-{salt}-{n}".encode()).hexdigest() == want:
        print(n)
        break
PYEOF
}

@test "command source: run as the runner, renewed in the background before its ttl, requests never wait" {
	local a b n v i t0 t1
	# A reload runs the command (the slow sources come first): value N, fresh.
	reload_daemon
	n=$(cat "$SB_DIR/cmdstate/n")
	psrun "$SB_ALICE" ps_cmd --sha256 PS_SECRET
	[ "$PSRC" -eq 0 ]
	a=$(cmd_n "$(cat "$T/out")")
	# (N, or a renewal of it: with ttl 2 one may run right after the reload.)
	[ -n "$a" ] && [ "$a" -ge "$n" ]
	# Calls keep succeeding while the bridge renews the value in the background (ttl 2:
	# renewed from age 1 s); within a few seconds a newer value is in use.
	v=$a
	for i in $(seq 1 40); do
		t0=$(date +%s%N)
		psrun "$SB_ALICE" ps_cmd --sha256 PS_SECRET
		t1=$(date +%s%N)
		[ "$PSRC" -eq 0 ] || { cat "$T/err"; false; }
		# No call waits for the command (it runs in the background): a loaded machine's
		# call, not a stall.
		[ $(((t1 - t0) / 1000000)) -lt 5000 ]
		v=$(cmd_n "$(cat "$T/out")")
		[ "$v" -gt "$n" ] && break
		sleep 0.2
	done
	[ "$v" -gt "$n" ]
	# The renewed value is redacted from the output too.
	psrun "$SB_ALICE" ps_cmd PS_SECRET
	b=$(cat "$SB_DIR/cmdstate/n")
	# It printed the value of one of the last runs (b counts runs started; the value
	# in use is the last one finished, and under load a renewal or two may be under
	# way): no form of any of them in clear, and the lines of one of them, each form
	# masked.
	local k ok=0
	for k in $(seq 0 9); do
		[ $((b - k)) -ge 1 ] || continue
		check_no_forms "cmdtok-$CMD_SALT-$((b - k))" "$T/out"
	done
	for k in $(seq 0 9); do
		[ $((b - k)) -ge 1 ] || continue
		check_redacted "cmdtok-$CMD_SALT-$((b - k))" "$T/out" 2>/dev/null && { ok=1; break; }
	done
	[ "$ok" = 1 ] || check_redacted "cmdtok-$CMD_SALT-$b" "$T/out"
	# It ran as the runner: the counter's state file is the runner's.
	[ "$(stat -c %U "$SB_DIR/cmdstate/n")" = "$SB_RUNNER" ]
}

@test "command source that fails: 119 naming the secret; the operator sees the command" {
	local m
	m=$(wc -l <"$SB_AUDIT")
	psrun "$SB_ALICE" ps_fail --sha256 PS_SECRET
	[ "$PSRC" -eq 119 ]
	grep -qF "secret s_fail" "$T/err"
	[ ! -s "$T/out" ]
	tail -n +"$((m + 1))" "$SB_AUDIT" | grep -q '"event":"denied".*"tool":"ps_fail"'
	# The daemon's log (at start) and --check name the command and its error.
	grep -qF "$SB_DIR/cmd/failing failed (status 3): vault is sealed" "$SB_DIR/log/daemon.log"
	run --separate-stderr "$SB_BUILD/shimbridged" -c "$SB_CONFIG" --check
	[[ $stderr == *"secret s_fail (command): $SB_DIR/cmd/failing failed (status 3): vault is sealed"* ]]
}

@test "command source that hangs: refused (it timed out at start; back-off), nothing left running" {
	local t0 t1
	t0=$(date +%s%N)
	psrun "$SB_ALICE" ps_hang --sha256 PS_SECRET
	t1=$(date +%s%N)
	[ "$PSRC" -eq 119 ]
	grep -qF "secret s_hang" "$T/err"
	# It timed out (2 s) when the daemon started; within its back-off the request is
	# refused at once instead of stalling the bridge for another run.
	# (A stall would take the command's 2 s.)
	[ $(((t1 - t0) / 1000000)) -lt 1900 ]
	grep -qF "did not finish within 2 seconds" "$SB_DIR/log/daemon.log"
	# the command's process group was killed and reaped (jails waiting in the pool
	# are the runner's too, and belong to no call: docs/JAIL.md)
	sb_wait_for 10 sb_no_runner || { sb_runner_procs "$SB_RUNNER"; false; }
}

@test "a hanging command source does not stall other sessions' requests" {
	local t0 t1 pid
	as "$SB_ALICE" timeout 30 ps_hang --sha256 PS_SECRET >/dev/null 2>&1 &
	pid=$!
	sleep 0.3
	t0=$(date +%s%N)
	psrun "$SB_BOB" plain bob-is-served
	t1=$(date +%s%N)
	wait "$pid" || true
	[ "$PSRC" -eq 0 ]
	[ "$(cat "$T/out")" = "bob-is-served" ]
	echo "bob waited $(((t1 - t0) / 1000000)) ms" >&2
	# (Stalled behind alice's command, bob would wait its 2 s less the 0.3 s above.)
	[ $(((t1 - t0) / 1000000)) -lt 1600 ]
}

@test "per-session override: alice and bob each get their own value of s_file" {
	psrun "$SB_ALICE" ps_file --sha256 PS_SECRET
	[ "$(cat "$T/out")" = "$(sha "$S_FILE")" ]
	psrun "$SB_BOB" ps_file --sha256 PS_SECRET
	[ "$(cat "$T/out")" = "$(sha "$S_BOB")" ]
	# bob's output is redacted with bob's value, and alice's value is not in it
	psrun "$SB_BOB" ps_file PS_SECRET
	check_redacted "$S_BOB" "$T/out"
	run ! grep -aqF "$S_FILE" "$T/out"
}

@test "redaction: every redactor knows every session's secrets (bob's value in alice's output is masked)" {
	# A tool of alice's session that gets hold of bob's token (here simply given
	# it; in real life read from a child of bob's under the same runner) prints it:
	# masked, although alice's request never holds bob's secret.
	psrun "$SB_ALICE" plain "x${S_BOB}y"
	[ "$PSRC" -eq 0 ]
	[ "$(cat "$T/out")" = "x[REDACTED]y" ]
	run ! grep -aqF "$S_BOB" "$T/out"
	# and alice's value printed by a tool of bob's (one that holds no secret)
	psrun "$SB_BOB" plain "x${S_FILE}y" "${S_ENV}"
	[ "$PSRC" -eq 0 ]
	[ "$(cat "$T/out")" = "x[REDACTED]y [REDACTED]" ]
	# the audit line of alice's request does not carry bob's value either
	run ! grep -aqF "$S_BOB" "$SB_AUDIT"
}

@test "redaction: JSON with non-ASCII characters as \\uXXXX escapes (Python's json.dumps default)" {
	psrun "$SB_ALICE" ps_file --json-ascii PS_SECRET
	[ "$PSRC" -eq 0 ]
	check_no_forms "$S_FILE" "$T/out"
	[ "$(cat "$T/out")" = 'json-ascii<<{"token": "[REDACTED]", "n": 1}>>' ]
}

# audit_since N — the audit lines after line N, into $T/audit.new.
audit_since() {
	tail -n +"$(($1 + 1))" "$SB_AUDIT" >"$T/audit.new"
	[ -s "$T/audit.new" ]
}

@test "audit lines redact secrets in argv (a token of ASCII characters)" {
	local m
	m=$(wc -l <"$SB_AUDIT")
	psrun "$SB_ALICE" plain "x${S_ASCII}y" "$S_ASCII"
	[ "$PSRC" -eq 0 ]
	audit_since "$m"
	grep -q '"event":"allowed".*"tool":"plain".*"argv":\["x\[REDACTED\]y","\[REDACTED\]"\]' "$T/audit.new"
	grep -q '"event":"done".*"tool":"plain".*"argv":\["x\[REDACTED\]y","\[REDACTED\]"\]' "$T/audit.new"
	check_no_forms "$S_ASCII" "$T/audit.new"
}

@test "audit lines redact secrets in argv (a value with quotes, backslash, non-ASCII)" {
	local m
	m=$(wc -l <"$SB_AUDIT")
	psrun "$SB_ALICE" plain "x${S_FILE}y" "$S_BOB"
	[ "$PSRC" -eq 0 ]
	audit_since "$m"
	check_no_forms "$S_FILE" "$T/audit.new"
	check_no_forms "$S_BOB" "$T/audit.new"
	grep -q '"event":"allowed".*"tool":"plain".*"argv":\["x\[REDACTED\]y","\[REDACTED\]"\]' "$T/audit.new"
}

@test "audit lines redact a command secret's refreshed value" {
	local m n
	# Let the ttl pass, so this call refreshes the value.
	sleep 2.1
	psrun "$SB_ALICE" ps_cmd --sha256 PS_SECRET
	n=$(cmd_n "$(cat "$T/out")")
	[ -n "$n" ]
	# A value two runs before the newest: finished, so live or one of the last values
	# replaced. (The daemon masks the last 8 replaced values; with ttl 2 a loaded
	# machine can renew more often than that between two calls, so not necessarily the
	# value the call above saw.)
	n=$(($(cat "$SB_DIR/cmdstate/n") - 2))
	m=$(wc -l <"$SB_AUDIT")
	psrun "$SB_ALICE" plain "cmdtok-$CMD_SALT-$n"
	audit_since "$m"
	check_no_forms "cmdtok-$CMD_SALT-$n" "$T/audit.new"
}

@test "error messages redact secrets (policy refusal quoting argv)" {
	local m
	m=$(wc -l <"$SB_AUDIT")
	psrun "$SB_ALICE" ps_deny --forbidden "$S_FILE" "x${S_ASCII}"
	[ "$PSRC" -eq 126 ]
	grep -qF "forbidden by the test" "$T/err"
	grep -qF 'shimbridge: refused: ps_deny --forbidden [REDACTED] x[REDACTED]: not allowed' "$T/err"
	check_no_forms "$S_FILE" "$T/err"
	check_no_forms "$S_ASCII" "$T/err"
	# and the denied audit line (an ASCII value: see the test above for the others)
	m=$(wc -l <"$SB_AUDIT")
	psrun "$SB_ALICE" ps_deny --forbidden "$S_ASCII"
	[ "$PSRC" -eq 126 ]
	audit_since "$m"
	grep -q '"event":"denied".*"argv":\["--forbidden","\[REDACTED\]"\]' "$T/audit.new"
	check_no_forms "$S_ASCII" "$T/audit.new"
}

# PR_SET_DUMPABLE 0 cannot be seen from /proc for a root process (its files are
# root's either way; on the kernel tried, even a root reader without
# CAP_SYS_PTRACE could read a non-dumpable root process's environ), and with the
# daemon's RLIMIT_CORE at 0/0 a core dump would not tell either. So ask the
# process itself: tests/fixtures/dumpable.py makes it run prctl(PR_GET_DUMPABLE)
# once under ptrace. A throwaway second daemon takes the probe, then must still
# serve a request; a plain process is the control (dumpable 1).
@test "the daemon is not dumpable: PR_GET_DUMPABLE is 0 (asked of the process), no core limit" {
	local d=$SB_DIR/dump pid q v _
	[ "$(uname -m)" = x86_64 ] || skip "the ptrace probe is x86_64 only"
	sleep 30 &
	q=$!
	v=$("$PY" "$FIXTURES/dumpable.py" "$q" 2>&1) || true
	kill "$q"
	[ "$v" = 1 ] || skip "the ptrace probe does not work here: $v"
	mkdir -p "$d/run" "$d/state" "$d/sessions.d"
	chmod 755 "$d/run"
	cat >"$SB_DIR/etc/dump.json" <<EOF
{
	"socket": {"path": "$d/run/bridge.sock", "group": "$SB_GROUP", "mode": 432},
	"runner": "$SB_RUNNER", "audit_log": "$d/audit.log", "state_dir": "$d/state",
	"sessions_dir": "$d/sessions.d",
	"secrets": {"s_file": {"source": "file", "path": "$SB_DIR/etc/s_file.secret"}},
	"tools": {"ps_file": $(ps_tool s_file)}
}
EOF
	printf '{"name": "alice", "user": "%s", "tools": ["ps_file"]}\n' "$SB_ALICE" >"$d/sessions.d/alice.json"
	chmod 600 "$SB_DIR/etc/dump.json" "$d/sessions.d/alice.json"
	sb_bg "$SB_BUILD/shimbridged" -c "$SB_DIR/etc/dump.json" </dev/null >"$d/daemon.log" 2>&1
	pid=$!
	for _ in $(seq 100); do
		[ -S "$d/run/bridge.sock" ] && break
		sleep 0.05
	done
	[ -S "$d/run/bridge.sock" ]
	v=$("$PY" "$FIXTURES/dumpable.py" "$pid")
	# core dumps off too, hard limit included
	grep -Eq '^Max core file size +0 +0 ' "/proc/$pid/limits"
	# the probe left it intact: it still serves
	as "$SB_ALICE" env SHIMBRIDGE_SOCKET="$d/run/bridge.sock" timeout 20 ps_file --sha256 PS_SECRET >"$T/out"
	[ "$(cat "$T/out")" = "$(sha "$S_FILE")" ]
	kill -TERM "$pid"
	wait "$pid"
	run ! grep -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$d/daemon.log"
	[ "$v" = 0 ]
	# A session user cannot read the main daemon's environ (the env source's value
	# is in there).
	run ! as "$SB_ALICE" cat "/proc/$SB_PID/environ"
}

@test "nothing sbt-alice can read holds a secret value" {
	local v
	for v in "$S_FILE" "$S_BOB" "$S_ENV" "$S_CRED" "$S_STORE" "$S_ASCII" "cmdtok-$CMD_SALT"; do
		run bash -c 'printf "%s\n" "$1" | (source "$2"; as "$SB_ALICE" timeout 20 grep -rlsF -f - \
			"/home/$SB_ALICE" /tmp /var/tmp /dev/shm)' _ "$v" "$BATS_TEST_DIRNAME/lib.bash"
		[ "$status" -eq 1 ] || [ "$status" -eq 2 ]
		[ -z "$output" ]
	done
}

# check_no_forms VALUE FILE — none of the redactor's forms of VALUE is in FILE.
check_no_forms() {
	V=$1 "$PY" - "$2" <<'PYEOF'
import base64, json, os, re, sys, urllib.parse
v = os.environb[b"V"]
out = open(sys.argv[1], "rb").read()
forms = {"raw": v, "hex": v.hex().encode(), "HEX": v.hex().upper().encode(),
         "url": urllib.parse.quote_from_bytes(v, safe="").encode(),
         "json": json.dumps(v.decode(), ensure_ascii=False)[1:-1].encode(),
         "json-ascii": json.dumps(v.decode())[1:-1].encode(),
         "json-ascii-upper": re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(),
                                    json.dumps(v.decode())[1:-1]).encode()}
for k in range(3):
    lo, hi = -(-8 * k // 6), 8 * (k + len(v)) // 6
    forms["b64-%d" % k] = base64.b64encode(b"#" * k + v)[lo:hi]
    forms["b64url-%d" % k] = base64.urlsafe_b64encode(b"#" * k + v)[lo:hi]
bad = [n for n, f in forms.items() if f in out]
if bad:
    sys.exit("forms of the secret found: %s" % ", ".join(bad))
PYEOF
}
