#!/usr/bin/env bats
# Tamper-evident audit log (issue 16 item 3): every record carries its sequence
# number and the hash of the record before; every open of the file and the stop
# write a checkpoint, signed with audit.sign_key when one is set.
# `shimbridge audit verify` accepts an untouched log across rotations and restarts
# and names the first broken link (FILE:LINE: KIND) of each kind of tampering.

bats_require_minimum_version 1.5.0
load lib

SB_RUNNER=$SB_LANE-runner-aud
BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

# Config: a tool that runs /bin/sh; extra top-level members in $1.
aud_config() {
	sb_config <<EOF2
{ $(sb_config_head)
  "tools": {"sh": {"path": "/bin/sh", "timeout": 60, "rules": [{"allow": ["-c", "**"]}]}}${1:+, $1}
}
EOF2
}

setup_file() {
	sb_build_resolve
	sb_users
	sb_tree
	sb_session alice "$SB_ALICE" '["sh"]'
	sb_shim_links sh
}

teardown_file() {
	pkill -KILL -u "$SB_RUNNER" 2>/dev/null || true
	sb_users_remove
	rm -rf "$SB_DIR"
	sb_reap_suite
}

teardown() {
	sb_stop || true
	rm -rf "$SB_AUDIT" "$SB_AUDIT".* "$SB_AUDIT"-* "$SB_DIR/etc/audit.key" "$SB_DIR/log/daemon.log" \
		"$SB_DIR/log/ship" "$SB_DIR/log/orig" "$SB_DIR/log/middle" "$SB_DIR/log/new"
	sb_reap
}

# n calls through the shim, each one allowed + done record.
calls() {
	local i
	for i in $(seq "$1"); do as "$SB_ALICE" sh -c "echo call $i" >/dev/null; done
}

# A log of 3 calls between a start and a stop checkpoint (8 records).
small_log() {
	aud_config "$@"
	sb_start
	calls 3
	sb_stop
}

verify() {
	"$SB_BUILD/shimbridge" -c "$SB_CONFIG" audit verify "$@"
}

# Line N of the audit log with a Python expression applied to the text `l`.
edit_line() {
	"$PY" - "$SB_AUDIT" "$1" "$2" <<'PYEOF'
import sys
p, n, expr = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lines = open(p).read().split("\n")
l = lines[n - 1]
lines[n - 1] = eval(expr)
open(p, "w").write("\n".join(lines))
PYEOF
}

@test "an untouched log verifies: records sealed with seq and prev, start and stop checkpoints" {
	small_log
	cat "$SB_AUDIT"
	[ "$(wc -l <"$SB_AUDIT")" = 8 ]
	head -n 1 "$SB_AUDIT" | grep -q '"event":"audit-checkpoint","reason":"start"'
	head -n 1 "$SB_AUDIT" | grep -q '"chain":"new".*"seq":1,"prev":"0000000000000000000000000000000000000000000000000000000000000000"}$'
	tail -n 1 "$SB_AUDIT" | grep -q '"reason":"stop".*"seq":8,'
	# prev is BLAKE2b-256 of the line before (crypto_generichash), checked independently
	"$PY" - "$SB_AUDIT" <<'PYEOF'
import hashlib, json, sys
prev = "0" * 64
for i, line in enumerate(open(sys.argv[1]).read().splitlines(), 1):
    r = json.loads(line)
    assert r["seq"] == i and r["prev"] == prev, (i, r)
    prev = hashlib.blake2b(line.encode(), digest_size=32).hexdigest()
PYEOF
	run verify
	echo "$output"
	[ "$status" = 0 ]
	[[ $output == "OK: 8 records in 1 file(s), seq 1..8, 2 checkpoints, 0 signatures verified"* ]]
	# the table view still reads the log
	run "$SB_BUILD/shimbridge" -c "$SB_CONFIG" audit
	[ "$status" = 0 ]
	[[ $output == *"audit-checkpoint"*"start, seq 1, new chain"* ]]
	[[ $output == *"stop, seq 8"* ]]
}

@test "an edited field: edited, at the line that was changed" {
	small_log
	edit_line 4 'l.replace("call 2", "call 9")'
	grep -q 'call 9' "$SB_AUDIT"
	run verify
	echo "$output"
	[ "$status" = 2 ]
	[[ $output == "$SB_AUDIT:4: edited: "*"(shown by the next record, $SB_AUDIT:5)" ]]
}

@test "a deleted record: deleted, where the sequence jumps" {
	small_log
	sed -i 5d "$SB_AUDIT"
	run verify
	echo "$output"
	[ "$status" = 2 ]
	[[ $output == "$SB_AUDIT:5: deleted: seq jumps from 4 to 6: 1 record(s) missing"* ]]
}

@test "two records swapped: reordered, naming where the missing one went" {
	small_log
	"$PY" -c 'import sys
p = sys.argv[1]
l = open(p).read().splitlines(True)
l[3], l[4] = l[4], l[3]
open(p, "w").write("".join(l))' "$SB_AUDIT"
	run verify
	echo "$output"
	[ "$status" = 2 ]
	[[ $output == "$SB_AUDIT:4: reordered: seq jumps from 3 to 5"*"seq 4 is further on, at $SB_AUDIT:5" ]]
}

@test "an inserted record: without chain members, and with forged ones" {
	small_log
	cp "$SB_AUDIT" "$SB_DIR/log/orig"
	sed -i '4i {"event":"allowed","session":"alice","tool":"sh","argv":["-c","rm -rf /"]}' "$SB_AUDIT"
	run verify
	echo "$output"
	[ "$status" = 2 ]
	[[ $output == "$SB_AUDIT:4: inserted: a record without chain members"* ]]
	# a forged copy of line 4 that carries line 4's own seq and prev: it fits where it
	# stands, and the record after it shows that it does not belong
	cp "$SB_DIR/log/orig" "$SB_AUDIT"
	edit_line 4 'l + "\n" + l.replace("call 2", "call X")'
	sed -n 4,5p "$SB_AUDIT"
	run verify
	echo "$output"
	[ "$status" = 2 ]
	[[ $output == "$SB_AUDIT:4: inserted: the line before this one is not part of the chain"* ]] ||
	[[ $output == "$SB_AUDIT:5: "* ]]
	[[ $output == *inserted* ]]
}

@test "the head of the first file cut: truncated-head" {
	small_log
	sed -i 1,2d "$SB_AUDIT"
	run verify
	echo "$output"
	[ "$status" = 2 ]
	[[ $output == "$SB_AUDIT:1: truncated-head: the chain starts at seq 3"* ]]
}

@test "a line cut in the middle: torn" {
	small_log
	truncate -s -20 "$SB_AUDIT"
	run verify
	echo "$output"
	[ "$status" = 2 ]
	[[ $output == "$SB_AUDIT:8: torn: "* ]]
}

@test "rotation (mv + SIGUSR1) keeps the chain across files; a missing middle file is named" {
	aud_config
	sb_start
	calls 2
	mv "$SB_AUDIT" "$SB_AUDIT.2"
	kill -USR1 "$SB_PID"
	sb_wait_for 10 test -s "$SB_AUDIT"
	calls 2
	mv "$SB_AUDIT" "$SB_AUDIT.1"
	kill -USR1 "$SB_PID"
	sb_wait_for 10 test -s "$SB_AUDIT"
	calls 1
	kill -HUP "$SB_PID"	# a reload reopens the file too: one more checkpoint
	sb_wait_for 10 grep -q '"event":"reload"' "$SB_AUDIT"
	sb_stop
	head -n 1 "$SB_AUDIT.1" | grep -q '"reason":"reopen","file":"'"$SB_AUDIT"'".*"chain":"continued"'
	# with no FILE the configured log and its rotated predecessors are read, oldest first
	run verify
	echo "$output"
	[ "$status" = 0 ]
	[[ $output == "OK: "*" in 3 file(s), seq 1.."* ]]
	# logrotate's compress: the oldest file as .gz is read through gzip -dc
	gzip "$SB_AUDIT.2"
	run verify
	echo "$output"
	[ "$status" = 0 ]
	[[ $output == "OK: "*" in 3 file(s), seq 1.."* ]]
	gunzip "$SB_AUDIT.2.gz"
	# the same files given in another order break the chain
	run verify "$SB_AUDIT.1" "$SB_AUDIT.2" "$SB_AUDIT"
	[ "$status" = 2 ]
	# a whole middle file removed
	mv "$SB_AUDIT.1" "$SB_DIR/log/middle"
	run verify "$SB_AUDIT.2" "$SB_AUDIT"
	echo "$output"
	[ "$status" = 2 ]
	[[ $output == "$SB_AUDIT:1: deleted: seq jumps from "*"a rotated file between them is missing)" ]]
	# the newest file alone: its chain continues from a file not given
	run verify "$SB_AUDIT"
	echo "$output"
	[ "$status" = 0 ]
	[[ $output == *"the chain continues from seq"* ]]
}

@test "a restarted daemon continues the chain from the file's last record" {
	small_log
	local last
	last=$(tail -n 1 "$SB_AUDIT" | "$PY" -c 'import json, sys; print(json.loads(sys.stdin.read())["seq"])')
	sb_start
	calls 1
	sb_stop
	sed -n "$((last + 1))p" "$SB_AUDIT" | grep -q '"reason":"start",.*"chain":"continued".*"seq":'"$((last + 1))"','
	run verify
	echo "$output"
	[ "$status" = 0 ]
	[[ $output == "OK: 12 records in 1 file(s), seq 1..12"* ]]
	# a daemon started after the file was rotated away finds the chain in PATH.1
	mv "$SB_AUDIT" "$SB_AUDIT.1"
	sb_start
	sb_stop
	head -n 1 "$SB_AUDIT" | grep -q '"chain":"continued".*"seq":13,'
	run verify
	[ "$status" = 0 ]
	# a log whose records were removed wholesale starts a new chain: restarted
	: >"$SB_AUDIT.1"
	rm "$SB_AUDIT"
	echo '{"event":"legacy"}' >"$SB_AUDIT.1"
	sb_start
	sb_stop
	head -n 1 "$SB_AUDIT" | grep -q '"chain":"new"'
	cp "$SB_AUDIT" "$SB_DIR/log/new"
	run verify "$SB_DIR/log/new"
	[ "$status" = 0 ]
}

@test "signed checkpoints: keygen, pubkey, verify with --pubkey; a bad signature and a rewritten chain are caught" {
	aud_config '"audit": {"sign_key": "'"$SB_DIR/etc/audit.key"'"}'
	run "$SB_BUILD/shimbridge" -c "$SB_CONFIG" audit keygen
	echo "$output"
	[ "$status" = 0 ]
	[ "$(stat -c '%U %a' "$SB_DIR/etc/audit.key")" = "root 600" ]
	local pk
	pk=$("$SB_BUILD/shimbridge" -c "$SB_CONFIG" audit pubkey)
	[[ $pk =~ ^[0-9a-f]{64}$ ]]
	[[ $output == *"$pk"* ]]
	# never over an existing key
	run "$SB_BUILD/shimbridge" -c "$SB_CONFIG" audit keygen
	[ "$status" = 1 ]
	sb_start
	calls 2
	mv "$SB_AUDIT" "$SB_AUDIT.1"
	kill -USR1 "$SB_PID"
	sb_wait_for 10 test -s "$SB_AUDIT"
	calls 1
	sb_stop
	grep -q '"key":"'"$pk"'".*"sig":"[0-9a-f]\{128\}"}$' "$SB_AUDIT"
	mkdir -p "$SB_DIR/log/ship"
	echo "$pk" >"$SB_DIR/log/ship/pub"
	cp "$SB_AUDIT.1" "$SB_AUDIT" "$SB_DIR/log/ship/"
	# shipped off the host: only the files and the public key
	run "$SB_BUILD/shimbridge" -c /nonexistent audit verify --pubkey "$SB_DIR/log/ship/pub" \
		"$SB_DIR/log/ship/audit.log.1" "$SB_DIR/log/ship/audit.log"
	echo "$output"
	[ "$status" = 0 ]
	[[ $output == *"3 checkpoints, 3 signatures verified"* ]]
	[[ $output == *"signed by the key given (Ed25519): $pk"* ]]
	# another key
	run verify --pubkey "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	echo "$output"
	[ "$status" = 2 ]
	[[ $output == "$SB_AUDIT.1:1: bad-signature: "* ]]
	# one signature byte changed (the last record: nothing after it chains to it)
	edit_line "$(wc -l <"$SB_AUDIT")" 'l[:-3] + ("0" if l[-3] != "0" else "1") + l[-2:]'
	run verify --pubkey "$pk"
	echo "$output"
	[ "$status" = 2 ]
	[[ $output == "$SB_AUDIT:$(wc -l <"$SB_AUDIT"): bad-signature: checkpoint seq"* ]]
	# the signature removed
	cp "$SB_DIR/log/ship/audit.log" "$SB_AUDIT"
	edit_line 1 'l[:l.index(",\"sig\":")] + "}"'
	run verify --pubkey "$pk"
	echo "$output"
	[ "$status" = 2 ]
	[[ $output == *unsigned* || $output == *edited* ]]
	# a record edited and every hash after it recomputed: the chain alone is consistent,
	# the signed checkpoints are not
	cp "$SB_DIR/log/ship/audit.log" "$SB_AUDIT"
	"$PY" - "$SB_AUDIT.1" "$SB_AUDIT" <<'PYEOF'
import hashlib, re, sys
prev = "0" * 64
for p in sys.argv[1:]:
    out = []
    for l in open(p).read().splitlines():
        l = l.replace("call 1", "call 7")
        l = re.sub(r'"prev":"[0-9a-f]{64}"', '"prev":"%s"' % prev, l)
        out.append(l)
        prev = hashlib.blake2b(l.encode(), digest_size=32).hexdigest()
    open(p, "w").write("\n".join(out) + "\n")
PYEOF
	grep -q 'call 7' "$SB_AUDIT.1"
	run verify --pubkey "$pk" "$SB_AUDIT.1" "$SB_AUDIT"
	echo "$output"
	[ "$status" = 2 ]
	[[ $output == *bad-signature* ]]
}

@test "audit.checkpoint_interval: a signed checkpoint follows new records within the interval" {
	aud_config '"audit": {"sign_key": "'"$SB_DIR/etc/audit.key"'", "checkpoint_interval": 1}'
	"$SB_BUILD/shimbridge" -c "$SB_CONFIG" audit keygen
	sb_start
	calls 1
	# A checkpoint may also fall between the call's "allowed" and "done": wait for one
	# after "done".
	sb_wait_for 20 eval 'sed -n "/\"event\":\"done\"/,\$p" "$SB_AUDIT" | grep -q "\"reason\":\"interval\""'
	grep '"reason":"interval"' "$SB_AUDIT" | tail -n 1 | grep -q '"sig":"[0-9a-f]\{128\}"}$'
	# it comes after the call's records, and signs them
	"$PY" - "$SB_AUDIT" <<'PYEOF'
import json, sys
ev = [json.loads(l)["event"] for l in open(sys.argv[1])]
i = [n for n, r in enumerate(open(sys.argv[1])) if '"reason":"interval"' in r][-1]
assert "done" in ev[:i], ev
PYEOF
	run verify
	echo "$output"
	[ "$status" = 0 ]
	[[ $output == *"signatures verified"* ]]
	sb_stop
	run "$SB_BUILD/shimbridged" -c "$SB_CONFIG" --check-no-secrets
	[ "$status" = 0 ]
	aud_config '"audit": {"checkpoint_interval": -1}'
	run "$SB_BUILD/shimbridged" -c "$SB_CONFIG" --check-no-secrets
	[ "$status" -ne 0 ]
}

@test "audit.sign_key must be absolute; a key file others may read stops the start" {
	aud_config '"audit": {"sign_key": "audit.key"}'
	run "$SB_BUILD/shimbridged" -c "$SB_CONFIG" --check-no-secrets
	[ "$status" -ne 0 ]
	[[ $output == *audit.sign_key* ]]
	aud_config '"audit": {"sign_key": "'"$SB_DIR/etc/audit.key"'"}'
	"$SB_BUILD/shimbridge" -c "$SB_CONFIG" audit keygen
	chmod 644 "$SB_DIR/etc/audit.key"
	run "$SB_BUILD/shimbridged" -c "$SB_CONFIG"
	echo "$output"
	[ "$status" -ne 0 ]
	[[ $output == *"only its owner may read"* ]]
}

@test "verify: usage and unreadable files have their own exit codes" {
	run verify --pubkey nothex
	[ "$status" = 64 ]
	run verify /nonexistent/audit.log
	[ "$status" = 1 ]
	: >"$SB_AUDIT"
	run verify "$SB_AUDIT"
	[ "$status" = 2 ]
	[[ $output == "no chained records"* ]]
}
