#!/usr/bin/env bats
# Man pages (issue 12 item 2): mandoc-clean, and complete. Every key the config
# parser accepts (taken mechanically from bridge/config.c's key tables and
# bridge/secret.c's source keys, so a key added later without documentation
# fails here) is an item in shimbridge.json(5); every command in
# `shimbridge --help` is an item in shimbridge(8).

bats_require_minimum_version 1.5.0
load lib

MAN=$SB_ROOT/man

setup_file() {
	command -v mandoc >/dev/null || skip "mandoc is missing (tests/deps.sh installs it)"
}

teardown_file() {
	sb_reap_suite
}

teardown() {
	sb_reap
}

# Every string in a `static const char *const NAME[] = { ... };` table of config.c,
# and the keys secret.c accepts for a source.
config_keys() {
	local root=${1:-$SB_ROOT}
	"$PY" - "$root/bridge/config.c" "$root/bridge/secret.c" <<'PYEOF'
import re, sys
keys = set()
src = open(sys.argv[1]).read()
for body in re.findall(r'static\s+const\s+char\s*\*\s*const\s+\w+\[\]\s*=\s*\{(.*?)\};', src, re.S):
    keys.update(re.findall(r'"([^"]+)"', body))
sec = open(sys.argv[2]).read()
keys.update(re.findall(r'argkey\s*=\s*"([^"]+)"', sec))
keys.update(re.findall(r'json_object_get\(\s*obj\s*,\s*"([^"]+)"\s*\)', sec))
if len(keys) < 40:
    sys.exit("only %d keys found: the extraction no longer matches config.c" % len(keys))
print("\n".join(sorted(keys)))
PYEOF
}

@test "mandoc -T lint: no warnings or errors in any page" {
	local p
	for p in "$MAN"/*.[1-8]; do
		run mandoc -T lint -W warning "$p"
		echo "$output" | grep -v 'outdated mandoc.db' || true
		[ -z "$(echo "$output" | grep -v 'outdated mandoc.db')" ]
	done
	[ -f "$MAN/shimbridged.8" ] && [ -f "$MAN/shimbridge.8" ] &&
		[ -f "$MAN/shimbridge-git.8" ] && [ -f "$MAN/shimbridge.json.5" ]
}

@test "every config key the parser accepts is an item in shimbridge.json(5)" {
	local k missing=
	config_keys >"$BATS_TEST_TMPDIR/keys"
	echo "$(wc -l <"$BATS_TEST_TMPDIR/keys") keys"
	while read -r k; do
		grep -q -E "^\.It Cm ${k//./\\.}( |$)" "$MAN/shimbridge.json.5" || missing="$missing $k"
	done <"$BATS_TEST_TMPDIR/keys"
	[ -z "$missing" ] || { echo "not in man/shimbridge.json.5:$missing" >&2; return 1; }
}

@test "the key extraction sees a key added to a table" {
	local tmp=$BATS_TEST_TMPDIR/src
	mkdir -p "$tmp/bridge"
	# Into the first key table, whatever its last key is today.
	sed '0,/", NULL };/s//", "sbt_new_key", NULL };/' "$SB_ROOT/bridge/config.c" >"$tmp/bridge/config.c"
	grep -q sbt_new_key "$tmp/bridge/config.c"
	cp "$SB_ROOT/bridge/secret.c" "$tmp/bridge/"
	run config_keys "$tmp"
	[ "$status" -eq 0 ]
	[[ $output == *sbt_new_key* ]]
	run config_keys
	[[ $output != *sbt_new_key* ]]
}

@test "every command in shimbridge --help is an item in shimbridge(8)" {
	local c missing= n=0
	"$SB_ROOT/build/shimbridge" --help |
		sed -n '/^Commands:/,/^[^ ]/p' | grep -E '^  [a-z]' |
		sed -E 's/^  ([a-z]+( [a-z]+)?)( .*)?$/\1/' >"$BATS_TEST_TMPDIR/cmds"
	while read -r c; do
		n=$((n + 1))
		grep -q -E "^\.It Cm $c( |$)" "$MAN/shimbridge.8" || missing="$missing '$c'"
	done <"$BATS_TEST_TMPDIR/cmds"
	echo "$n commands"
	[ "$n" -ge 10 ]
	[ -z "$missing" ] || { echo "not in man/shimbridge.8:$missing" >&2; return 1; }
}

@test "every option of shimbridged --help is in shimbridged(8)" {
	local o missing=
	for o in $("$SB_ROOT/build/shimbridged" --help | grep -o -E -- '--[a-z-]+' | sort -u); do
		grep -q -E "Fl -${o#--}( |$)" "$MAN/shimbridged.8" || missing="$missing $o"
	done
	[ -z "$missing" ] || { echo "not in man/shimbridged.8:$missing" >&2; return 1; }
}
