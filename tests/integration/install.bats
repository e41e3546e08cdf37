#!/usr/bin/env bats
# Installation and administration: installer/install.sh and uninstall.sh into
# temporary trees, the systemd units (verify, exposure score), the launchd plist,
# shellcheck over every shell script, and the admin CLI `shimbridge` against a real
# daemon with real users. Names here start with sbi- (users sbi-*, sb-sbi-*, group
# sbi-sock, runner sbi-runner) to stay clear of the lanes' users (sbt-*, sbu-*: lib.bash).

bats_require_minimum_version 1.5.0
load lib

SBI_GROUP=sbi-sock
SBI_RUNNER=sbi-runner
EXPOSURE_MAX=4.0
# lib sets the $SB_LANE-* names; this suite has its own (set again at every test's load).
SB_GROUP=$SBI_GROUP
SB_RUNNER=$SBI_RUNNER

setup_file() {
	[ "$(id -u)" = 0 ] || skip "needs root (users, setuid)"
	for b in shimbridged shimbridge shim; do
		[ -x "$SB_BUILD/$b" ] || skip "$SB_BUILD/$b is not built"
	done
	sbi_users_remove
	getent group "$SB_GROUP" >/dev/null || groupadd "$SB_GROUP"
	id "$SB_RUNNER" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$SB_RUNNER"
	sb_tree
	sb_shim_links say seclen
	SBI_STORE="$SB_DIR/etc/secrets.store"
	SBI_KEY="$SB_DIR/etc/store.key"
	export SBI_STORE SBI_KEY
	# "seclen": shows the length and SHA-256 of the secret it gets, never the value.
	mkdir -m 0755 "$SB_DIR/tools"
	cat >"$SB_DIR/tools/seclen" <<'EOF'
#!/bin/sh
printf 'len=%s sha=%s\n' "$(printf %s "$SBI_TOK" | /usr/bin/wc -c)" \
	"$(printf %s "$SBI_TOK" | /usr/bin/sha256sum | /usr/bin/cut -c1-64)"
EOF
	chmod 0755 "$SB_DIR/tools/seclen"
	# "say": a generic tool that prints its arguments, as the runner. The store is
	# empty until the tests fill it (the admin CLI finds it through this config).
	sb_config <<EOF
{
	$(sb_config_head)
	"store": {"path": "$SBI_STORE", "key": "$SBI_KEY"},
	"secrets": {"tok": {"source": "store", "entry": "tok"}},
	"tools": {"say": {"path": "/bin/echo", "rules": [{"allow": ["**"]}]},
		"seclen": {"path": "$SB_DIR/tools/seclen", "rules": [{"allow": []}],
			"secrets": {"SBI_TOK": "tok"}}}
}
EOF
	sb_start
}

teardown_file() {
	local rc=0
	if [ -n "${SB_DIR:-}" ]; then
		sb_stop || rc=$?
		sbi_sys_cleanup
		rm -rf "$SB_DIR"
	fi
	sbi_users_remove
	sb_reap_suite
	return "$rc"
}

# The system-wide install of the uninstall test (only when this suite made it).
SBI_SYS_PREFIX=/opt/sbi-sys
sbi_sys_cleanup() {
	[ -f "$SB_DIR/sys-install" ] || return 0
	local p
	for p in $(pgrep -x shimbridged); do
		case $(readlink "/proc/$p/exe") in "$SBI_SYS_PREFIX"/*) kill -KILL "$p" ;; esac
	done
	pkill -KILL -u shimbridge-runner 2>/dev/null || true
	userdel shimbridge-runner >/dev/null 2>&1 || true
	for p in shimbridge-runner shimbridge shimbridge-audit; do
		groupdel "$p" >/dev/null 2>&1 || true
	done
	rm -rf /etc/shimbridge /var/lib/shimbridge /var/log/shimbridge /run/shimbridge \
		"$SBI_SYS_PREFIX"
	rm -f "$SB_DIR/sys-install"
}

teardown() {
	sb_reap
}

# Remove every account this suite may have made (also after a crashed run).
sbi_users_remove() {
	local u
	# sb-alice-run: the runner `session add alice` creates for its session.
	for u in $(getent passwd | cut -d: -f1 | grep -E '^(sbi-|sb-sbi|sb-alice-run$)'); do
		pkill -KILL -u "$u" 2>/dev/null || true
		userdel -r "$u" >/dev/null 2>&1 || userdel "$u" >/dev/null 2>&1 || true
		rm -rf "/home/$u"
	done
	for u in $(getent group | cut -d: -f1 | grep -E '^(sbi-|sb-sbi)'); do
		groupdel "$u" >/dev/null 2>&1 || true
	done
}

# The admin CLI on this suite's config, store and shims.
sbi() {
	"$SB_BUILD/shimbridge" -c "$SB_CONFIG" --shim-dir "$SB_DIR/bin" "$@"
}

# A scratch directory for one test, removed by the test's teardown.
sbi_tmp() {
	mktemp -d "${BATS_TEST_TMPDIR:-/tmp}/sbi.XXXXXX"
}

# --- admin CLI basics -------------------------------------------------------------

@test "shimbridge --help documents commands and exit codes; bad usage exits 64" {
	run "$SB_BUILD/shimbridge" --help
	[ "$status" -eq 0 ]
	[[ $output == *"secret set NAME"* ]]
	[[ $output == *"session exec NAME"* ]]
	[[ $output == *"Exit codes: 0 ok; 1 failure"* ]]
	[[ $output == *"64 usage"* ]]
	run "$SB_BUILD/shimbridge" --version
	[ "$status" -eq 0 ]
	[[ $output == "shimbridge "* ]]
	run "$SB_BUILD/shimbridge"
	[ "$status" -eq 64 ]
	run "$SB_BUILD/shimbridge" frobnicate
	[ "$status" -eq 64 ]
	run "$SB_BUILD/shimbridge" session exec
	[ "$status" -eq 64 ]
}

@test "status: human-readable and --json from the running daemon" {
	run sbi status
	[ "$status" -eq 0 ]
	[[ $output == *"shimbridged "*" running, pid $SB_PID"* ]]
	[[ $output == *"config:"*"version "* ]]
	run sbi status --json
	[ "$status" -eq 0 ]
	[ "$(printf '%s' "$output" | jq -r .pid)" = "$SB_PID" ]
	[ "$(printf '%s' "$output" | jq -r .up)" = true ]
	printf '%s' "$output" | jq -e '.config_version | length == 12'
	printf '%s' "$output" | jq -e '.sessions | type == "array"'
}

@test "status and reload report a daemon that is not running (exit 1)" {
	local t
	t=$(sbi_tmp)
	cp "$SB_CONFIG" "$t/config.json"
	sb_json_edit "$t/config.json" "c['socket']['path'] = '$t/none.sock'"
	run "$SB_BUILD/shimbridge" -c "$t/config.json" status
	[ "$status" -eq 1 ]
	[[ $output == *"not running"* ]]
	run "$SB_BUILD/shimbridge" -c "$t/config.json" reload
	[ "$status" -eq 1 ]
}

@test "check: a good config passes, a bad one fails with its location (exit 2)" {
	run sbi check
	[ "$status" -eq 0 ]
	[[ $output == *"ok       config $SB_CONFIG"* ]]
	[[ $output == *"ok       tool say /bin/echo"* ]]
	[[ $output == *"shimbridged running (pid $SB_PID)"* ]]
	[[ $output == *"no problems found"* ]]

	local t
	t=$(sbi_tmp)
	mkdir -p "$t/sessions.d"
	chmod 700 "$t" "$t/sessions.d"
	cp "$SB_CONFIG" "$t/config.json"
	sb_json_edit "$t/config.json" 'c["tools"]["say"]["colour"] = "blue"'
	run "$SB_BUILD/shimbridge" -c "$t/config.json" check
	[ "$status" -eq 2 ]
	[[ $output == *"FAIL"*"$t/config.json: tools.say.colour: unknown key"* ]]

	# Environment problems are found too: a group-writable state directory.
	cp "$SB_CONFIG" "$t/config.json"
	mkdir -m 0775 "$t/state"
	sb_json_edit "$t/config.json" "c['state_dir'] = '$t/state'"
	run "$SB_BUILD/shimbridge" -c "$t/config.json" check
	[ "$status" -eq 2 ]
	[[ $output == *"FAIL     state directory $t/state is writable by group or others"* ]]
}

@test "check runs gh and git --version as the runner" {
	[ -x /usr/bin/gh ] && [ -x /usr/bin/git ] || skip "gh or git not installed"
	local t
	t=$(sbi_tmp)
	chmod 700 "$t"
	cp "$SB_CONFIG" "$t/config.json"
	sb_json_edit "$t/config.json" 'c["tools"]["gh"] = {"path": "/usr/bin/gh", "profile": "gh"}; c["git"] = {"path": "/usr/bin/git"}'
	run "$SB_BUILD/shimbridge" -c "$t/config.json" check --no-secrets
	[[ $output == *"ok       tool gh /usr/bin/gh: gh version "* ]]
	[[ $output == *"ok       git /usr/bin/git: git version "* ]]
}

@test "reload: accepted, then a bad drop-in is rejected and named with its audit line" {
	run sbi reload
	[ "$status" -eq 0 ]
	[[ $output == *"reloaded shimbridged (pid $SB_PID)"* ]]

	printf '{"name": "broken", "user": "sbi-nosuchuser", "tools": []}\n' \
		>"$SB_DIR/etc/sessions.d/broken.json"
	chmod 600 "$SB_DIR/etc/sessions.d/broken.json"
	run sbi reload
	rm -f "$SB_DIR/etc/sessions.d/broken.json"
	[ "$status" -eq 1 ]
	[[ $output == *"reload rejected"* ]]
	[[ $output == *"user sbi-nosuchuser does not exist"* ]]
	[[ $output == *"(audit log $SB_AUDIT line "* ]]
	# The daemon still serves with its old config.
	run sbi status
	[ "$status" -eq 0 ]
	run sbi reload
	[ "$status" -eq 0 ]
}

# --- secrets ----------------------------------------------------------------------

@test "secret: init, set from stdin, list, rm; the value never appears in argv or output" {
	run sbi secret list
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	run sbi secret set tok </dev/null
	[ "$status" -eq 2 ]
	[[ $output == *"secret init"* ]]
	run sbi secret init
	[ "$status" -eq 0 ]
	[ "$(stat -c '%a %u' "$SBI_KEY")" = "600 0" ]
	run sbi secret init
	[ "$status" -eq 0 ]
	[[ $output == *"already exists"* ]]

	local value t pid i found=0
	value="sbi-secret-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
	t=$(sbi_tmp)
	mkfifo "$t/in"
	"$SB_BUILD/shimbridge" -c "$SB_CONFIG" secret set tok <"$t/in" >"$t/out" 2>&1 &
	pid=$!
	exec 7>"$t/in"
	# While it waits for the value, nothing's command line holds the value.
	sleep 0.2
	for i in /proc/[0-9]*/cmdline; do
		if tr '\0' ' ' <"$i" 2>/dev/null | grep -qF "$value"; then found=1; fi
	done
	printf '%s\n' "$value" >&7
	exec 7>&-
	wait "$pid"
	[ "$found" = 0 ]
	grep -q "secret tok set" "$t/out"
	! grep -qF "$value" "$t/out"
	! grep -qF "$value" "$SBI_STORE"
	[ "$(stat -c '%a %u' "$SBI_STORE")" = "600 0" ]

	printf 'second' | sbi secret set other --no-reload
	run sbi secret list
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'other\ntok')" ]
	run sbi check
	[[ $output == *"secret store $SBI_STORE: 2 secrets"* ]]

	run sbi secret rm tok
	[ "$status" -eq 0 ]
	run sbi secret rm tok
	[ "$status" -eq 2 ]
	run sbi secret list
	[ "$output" = other ]
}

@test "secret set refuses an empty value, a value in argv and a bad name" {
	run sbi secret set empty </dev/null
	[ "$status" -eq 2 ]
	[[ $output == *"refusing an empty value"* ]]
	run sbi secret set empty <<<""
	[ "$status" -eq 2 ]
	run sbi secret set name value
	[ "$status" -eq 64 ]
	[[ $output == *"never from the command line"* ]]
	run sbi secret set ../evil <<<"x"
	[ "$status" -eq 2 ]
}

# --- sessions ---------------------------------------------------------------------

@test "session add: locked user, private home and workspace, PATH, git config, drop-in, reload" {
	run sbi session add alice --user sbi-alice --tools say,seclen --repo octo/widgets --repo octo/gadgets
	[ "$status" -eq 0 ]
	[[ $output == *"created user sbi-alice"* ]]
	[[ $output == *"reloaded shimbridged"* ]]

	# The account: a system user, password locked, in the socket group, bash.
	run getent passwd sbi-alice
	[[ $output == *":shimbridge session alice:/home/sbi-alice:/bin/bash" ]]
	[ "$(id -u sbi-alice)" -lt 1000 ]
	[[ $(getent shadow sbi-alice | cut -d: -f2) == '!'* ]]
	id -nG sbi-alice | grep -qw "$SB_GROUP"
	[ "$(stat -c '%a %U' /home/sbi-alice)" = "700 sbi-alice" ]
	[ "$(stat -c '%a %U' /home/sbi-alice/work)" = "700 sbi-alice" ]

	# PATH for login and non-login shells, and git remotes through the bridge.
	grep -q ">>> shimbridge >>>" /home/sbi-alice/.profile
	head -n 1 /home/sbi-alice/.bashrc | grep -q ">>> shimbridge >>>"
	[ "$(stat -c %U /home/sbi-alice/.profile)" = sbi-alice ]
	run runuser -u sbi-alice -- env -i HOME=/home/sbi-alice PATH=/usr/bin:/bin bash -lc 'echo "$PATH"'
	[[ $output == "$SB_DIR/bin:"* ]]
	run runuser -u sbi-alice -- env -i HOME=/home/sbi-alice PATH=/usr/bin:/bin bash -c '. ~/.bashrc; echo "$PATH"'
	[[ $output == "$SB_DIR/bin:"* ]]
	run runuser -u sbi-alice -- env -i HOME=/home/sbi-alice git config --global --get-all \
		url.shimbridge::https://github.com/.insteadOf
	[ "$output" = "$(printf 'https://github.com/\ngit@github.com:\nssh://git@github.com/')" ]
	run runuser -u sbi-alice -- env -i HOME=/home/sbi-alice git config --global user.email
	[ "$output" = "sbi-alice@localhost" ]

	# The drop-in, root-only, and the daemon knows the session.
	local f=$SB_DIR/etc/sessions.d/alice.json
	[ "$(stat -c '%a %U' "$f")" = "600 root" ]
	[ "$(jq -r .user "$f")" = sbi-alice ]
	[ "$(jq -r .workspace "$f")" = /home/sbi-alice/work ]
	[ "$(jq -c .tools "$f")" = '["say","seclen"]' ]
	[ "$(jq -c .repos "$f")" = '["octo/widgets","octo/gadgets"]' ]
	sbi status --json | jq -e '.sessions | map(.name) | index("alice") != null'
}

@test "session add refuses duplicates, unknown tools and bad names" {
	run sbi session add alice --user sbi-alice2 --tools say
	[ "$status" -eq 2 ]
	[[ $output == *"already exists"* ]]
	run sbi session add bob --user sbi-bob --tools nosuchtool
	[ "$status" -eq 2 ]
	[[ $output == *"tool nosuchtool is not defined"* ]]
	! id sbi-bob 2>/dev/null
	run sbi session add bob --user sbi-bob --repo not-a-repo
	[ "$status" -eq 2 ]
	run sbi session add ../x
	[ "$status" -eq 2 ]
	run sbi session add Bob
	[ "$status" -eq 2 ]
	[[ $output == *"not a portable user name"* ]]
}

@test "session add: the default user is sb-NAME; --no-reload leaves the daemon alone" {
	local before after
	before=$(sbi status --json | jq -r .config_version)
	run sbi session add sbi-dflt --tools say --no-reload
	[ "$status" -eq 0 ]
	id sb-sbi-dflt
	[ -d /home/sb-sbi-dflt/work ]
	after=$(sbi status --json | jq -r .config_version)
	[ "$before" = "$after" ]
	run sbi session remove sbi-dflt
	[ "$status" -eq 0 ]
	! id sb-sbi-dflt 2>/dev/null
	[ ! -e /home/sb-sbi-dflt ]
}

@test "secret set reaches the daemon through its reload, with or without a trailing newline" {
	local value want
	value="sbi-tok-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
	want="len=${#value} sha=$(printf %s "$value" | sha256sum | cut -c1-64)"
	printf '%s\n' "$value" | sbi secret set tok
	run sbi session exec alice seclen </dev/null
	[ "$status" -eq 0 ]
	[ "$output" = "$want" ]
	# A new value is served after the reload that secret set triggers.
	value="${value}-2"
	want="len=${#value} sha=$(printf %s "$value" | sha256sum | cut -c1-64)"
	printf '%s' "$value" | sbi secret set tok
	run sbi session exec alice seclen </dev/null
	[ "$output" = "$want" ]
	sbi secret rm tok
	run sbi session exec alice seclen </dev/null
	[ "$status" -ne 0 ]
}

@test "session add --workspace: nested in the home (made by the user) or elsewhere (made by root)" {
	run sbi session add frank --user sbi-frank --workspace /home/sbi-frank/src/agent --tools say --no-reload
	[ "$status" -eq 0 ]
	[ "$(stat -c '%a %U' /home/sbi-frank/src)" = "700 sbi-frank" ]
	[ "$(stat -c '%a %U' /home/sbi-frank/src/agent)" = "700 sbi-frank" ]
	run sbi session exec frank pwd </dev/null
	[ "$output" = /home/sbi-frank/src/agent ]
	run sbi session remove frank --no-reload
	[ "$status" -eq 0 ]

	run sbi session add gina --user sbi-gina --workspace "$SB_DIR/ws/gina" --tools say --no-reload
	[ "$status" -eq 0 ]
	[ "$(stat -c '%a %U' "$SB_DIR/ws/gina")" = "700 sbi-gina" ]
	[ "$(stat -c %U "$SB_DIR/ws")" = root ]
	[ "$(jq -r .workspace "$SB_DIR/etc/sessions.d/gina.json")" = "$SB_DIR/ws/gina" ]
	run sbi session remove gina
	[ "$status" -eq 0 ]
	[ ! -e "$SB_DIR/ws/gina" ]

	# An existing directory of somebody else is never handed to a session.
	run sbi session add hank --user sbi-hank --workspace "$SB_DIR/tools" --tools say --no-reload
	[ "$status" -ne 0 ]
	[[ $output == *"exists and belongs to uid 0"* ]]
	[ "$(stat -c %U "$SB_DIR/tools")" = root ]
	! id sbi-hank 2>/dev/null
}

@test "session list: name, user, uid, tools, repos, running" {
	run sbi session list
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == NAME*USER*UID*TOOLS*REPOS*RUNNING ]]
	local uid
	uid=$(id -u sbi-alice)
	[[ $output =~ alice\ +sbi-alice\ +$uid\ +say,seclen\ +octo/widgets,octo/gadgets\ +0 ]]
	run sbi session list --json
	[ "$(printf '%s' "$output" | jq -r '.[] | select(.name == "alice") | .running')" = 0 ]
}

@test "session exec: as the user, in its workspace, clean environment, exit status passed on" {
	run env -i PATH=/usr/bin:/bin LANG=C.UTF-8 TERM=dumb LEAKME=root-secret \
		"$SB_BUILD/shimbridge" -c "$SB_CONFIG" --shim-dir "$SB_DIR/bin" session exec alice -- \
		sh -c 'id -un; pwd; env | sort; exit 7' </dev/null
	[ "$status" -eq 7 ]
	[ "${lines[0]}" = sbi-alice ]
	[ "${lines[1]}" = /home/sbi-alice/work ]
	[[ $output != *LEAKME* ]]
	[[ $output == *"HOME=/home/sbi-alice"* ]]
	[[ $output == *"LOGNAME=sbi-alice"* ]]
	[[ $output == *"USER=sbi-alice"* ]]
	[[ $output == *"SHELL=/bin/bash"* ]]
	[[ $output == *"PATH=$SB_DIR/bin:/usr/local/bin:/usr/bin:/bin"* ]]
	[[ $output == *"TERM=dumb"* ]]
	[[ $output == *"LANG=C.UTF-8"* ]]
	[[ $output == *"SHIMBRIDGE_SOCKET=$SB_SOCK"* ]]
	# Only these (plus what sh itself sets).
	run env -i PATH=/usr/bin:/bin FOO=1 "$SB_BUILD/shimbridge" -c "$SB_CONFIG" \
		--shim-dir "$SB_DIR/bin" session exec alice env </dev/null
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | cut -d= -f1 | sort | tr '\n' ' ')" = \
		"HOME LOGNAME PATH SHELL SHIMBRIDGE_SOCKET USER " ]
	# Supplementary groups are the user's own, not root's.
	run sbi session exec alice id -G </dev/null
	[[ " $output " != *" 0 "* ]]
	run sbi session exec nosuch true </dev/null
	[ "$status" -eq 2 ]
	run -127 sbi session exec alice /nonexistent/program </dev/null
}

@test "session exec: tools reach the bridge through the shims; audit --session shows them" {
	run sbi session exec alice say hello $'\e[31mred' </dev/null
	[ "$status" -eq 0 ]
	[[ $output == "hello "* ]]
	run sbi audit --session alice
	[ "$status" -eq 0 ]
	[[ $output == *" alice "*"allowed"*"say"*"hello"* ]]
	[[ $output == *" alice "*"done"*"say"*"=> exit 0"* ]]
	# Control characters from the sandbox are shown escaped, never sent raw.
	[[ $output == *'\x1b[31mred'* ]]
	[[ $output != *$'\e'* ]]
	run sbi audit --session nosuchsession
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	run sbi audit
	[[ $output == *"reload"*"ok, config version"* ]]
}

@test "audit --follow prints records as they are written" {
	local t pid
	t=$(sbi_tmp)
	"$SB_BUILD/shimbridge" -c "$SB_CONFIG" audit --follow --session alice >"$t/out" 2>&1 &
	pid=$!
	sleep 0.3
	sbi session exec alice say follow-marker </dev/null
	sb_wait_for 5 grep -q follow-marker "$t/out" || true
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	grep -q "follow-marker" "$t/out"
}

@test "session exec on a terminal gets its own pseudo-terminal, never the caller's" {
	command -v script >/dev/null || skip "script(1) not installed"
	local t
	t=$(sbi_tmp)
	run script -qec "'$SB_BUILD/shimbridge' -c '$SB_CONFIG' session exec alice -- sh -c 'tty; stat -c %U \$(tty); exit 3'" "$t/typescript"
	[ "$status" -eq 3 ]
	[[ $output == *"/dev/pts/"* ]]
	[[ $output == *"sbi-alice"* ]]
	# No CMD: a login shell.
	run script -qec "'$SB_BUILD/shimbridge' -c '$SB_CONFIG' session exec alice" "$t/typescript" <<<'echo "login:$0:$(id -un)"; exit 5'
	[ "$status" -eq 5 ]
	[[ $output == *"login:-bash:sbi-alice"* ]]
}

@test "session remove: kills the user's processes, deletes user, home and drop-in, reloads" {
	run sbi session add carol --user sbi-carol --tools say
	[ "$status" -eq 0 ]
	sbi session exec carol -- sh -c 'sleep 300 >/dev/null 2>&1 & sleep 300 >/dev/null 2>&1 & echo started' </dev/null
	pgrep -u sbi-carol >/dev/null
	run sbi session remove carol
	[ "$status" -eq 0 ]
	[[ $output == *"removed user sbi-carol"* ]]
	[[ $output == *"reloaded shimbridged"* ]]
	! id sbi-carol 2>/dev/null
	[ ! -e /home/sbi-carol ]
	[ ! -e "$SB_DIR/etc/sessions.d/carol.json" ]
	! sbi status --json | jq -e '.sessions | map(.name) | index("carol") != null'
	run sbi session remove carol
	[ "$status" -eq 2 ]
}

@test "session remove --keep-workspace keeps the home; a foreign user is never deleted" {
	run sbi session add dave --user sbi-dave --tools say
	[ "$status" -eq 0 ]
	echo work >/home/sbi-dave/work/notes
	run sbi session remove dave --keep-workspace
	[ "$status" -eq 0 ]
	! id sbi-dave 2>/dev/null
	[ -f /home/sbi-dave/work/notes ]
	rm -rf /home/sbi-dave

	# A user that session add did not create stays, with its files.
	useradd -m -s /bin/bash sbi-erin
	run sbi session add erin --user sbi-erin --tools say
	[ "$status" -eq 0 ]
	[[ $output == *"using existing user sbi-erin"* ]]
	run sbi session remove erin
	[ "$status" -eq 0 ]
	[[ $output == *"was not created by shimbridge"* ]]
	id sbi-erin
	[ -d /home/sbi-erin ]
	[ ! -e "$SB_DIR/etc/sessions.d/erin.json" ]
}

# --- mirrors ----------------------------------------------------------------------

@test "mirror list and prune --older-than --session" {
	local m=$SB_DIR/state/mirrors
	mkdir -p "$m/alice/github.com/octo/old.git/objects" "$m/alice/github.com/octo/new.git/objects" \
		"$m/bob/github.com/octo/old.git/objects"
	head -c 50000 /dev/urandom >"$m/alice/github.com/octo/old.git/objects/pack"
	touch "$m/alice/github.com/octo/new.git/objects/pack" "$m/bob/github.com/octo/old.git/HEAD"
	find "$m/alice/github.com/octo/old.git" "$m/bob" -exec touch -d '40 days ago' {} +
	run sbi mirror list
	[ "$status" -eq 0 ]
	[[ $output =~ alice\ +github.com\ +octo/old\ +[0-9.]+K ]]
	[[ $output == *"octo/new"* ]]
	run sbi mirror list --session bob
	[[ $output != *alice* ]]
	run sbi mirror prune --older-than 30 --session alice
	[ "$status" -eq 0 ]
	[[ $output == *"removed $m/alice/github.com/octo/old.git"* ]]
	[[ $output == *"1 mirror removed"* ]]
	[ -d "$m/alice/github.com/octo/new.git" ]
	[ -d "$m/bob/github.com/octo/old.git" ]
	run sbi mirror prune --session bob
	[ ! -e "$m/bob/github.com/octo/old.git" ]
	run sbi mirror prune --older-than soon
	[ "$status" -eq 64 ]
}

# --- installer --------------------------------------------------------------------

@test "install.sh into a DESTDIR: layout, modes; a second run reports no changes" {
	local d
	d=$(sbi_tmp)
	run sh "$SB_ROOT/installer/install.sh" --prefix /usr/local --destdir "$d" --prebuilt "$SB_BUILD"
	[ "$status" -eq 0 ]
	[[ $output == *"install /usr/local/sbin/shimbridged"* ]]
	[[ $output != *"create user"* ]]
	[ -x "$d/usr/local/sbin/shimbridged" ]
	[ -x "$d/usr/local/sbin/shimbridge" ]
	[ -x "$d/usr/local/libexec/shimbridge/shimbridge-git" ]
	[ -x "$d/usr/local/libexec/shimbridge/shimbridge-jail" ]
	[ "$(readlink "$d/usr/local/libexec/shimbridge/shims/gh")" = shimbridge-shim ]
	[ "$(readlink "$d/usr/local/libexec/shimbridge/shims/git-remote-shimbridge")" = shimbridge-shim ]
	[ "$(readlink "$d/usr/local/libexec/shimbridge/shims/shimbridge")" = shimbridge-shim ]
	[ "$(stat -c %a "$d/etc/shimbridge")" = 700 ]
	[ "$(stat -c %a "$d/etc/shimbridge/sessions.d")" = 700 ]
	[ "$(stat -c %a "$d/etc/shimbridge/config.json")" = 600 ]
	[ "$(stat -c %a "$d/var/lib/shimbridge")" = 755 ]
	[ "$(stat -c %a "$d/var/log/shimbridge")" = 750 ]
	[ -f "$d/usr/local/lib/systemd/system/shimbridge.socket" ]
	grep -q '^ExecStart=/usr/local/sbin/shimbridged ' "$d/usr/local/lib/systemd/system/shimbridge.service"

	run sh "$SB_ROOT/installer/install.sh" --prefix /usr/local --destdir "$d" --prebuilt "$SB_BUILD"
	[ "$status" -eq 0 ]
	[[ $output == *"no changes"* ]]
	run sh "$SB_ROOT/installer/install.sh" --prefix /usr/local --destdir "$d" --prebuilt "$SB_BUILD" --dry-run
	[[ $output == *"no changes"* ]]

	# An administrator's config is never overwritten; a changed binary is updated.
	echo '{"edited": true}' >"$d/etc/shimbridge/config.json"
	echo tampered >"$d/usr/local/sbin/shimbridge"
	run sh "$SB_ROOT/installer/install.sh" --prefix /usr/local --destdir "$d" --prebuilt "$SB_BUILD" --dry-run
	[[ $output == *"would update /usr/local/sbin/shimbridge"* ]]
	[ "$(cat "$d/usr/local/sbin/shimbridge")" = tampered ]
	run sh "$SB_ROOT/installer/install.sh" --prefix /usr/local --destdir "$d" --prebuilt "$SB_BUILD"
	[[ $output == *"update /usr/local/sbin/shimbridge"* ]]
	[[ $output == *"1 change(s) made"* ]]
	cmp "$SB_BUILD/shimbridge" "$d/usr/local/sbin/shimbridge"
	[ "$(cat "$d/etc/shimbridge/config.json")" = '{"edited": true}' ]
}

@test "the installed config skeleton is valid for shimbridged --check-no-secrets" {
	[ -x /usr/bin/gh ] && [ -x /usr/bin/git ] || skip "gh or git not installed"
	local d
	d=$(sbi_tmp)
	sh "$SB_ROOT/installer/install.sh" --prefix /opt/sbi --destdir "$d" --prebuilt "$SB_BUILD" >/dev/null
	local c=$d/etc/shimbridge/config.json
	grep -q '"/opt/sbi/libexec/shimbridge/shimbridge-git"' "$c"
	# On the target the runner exists and the helper is at its place; here, stand in.
	sed -i -e "s|\"shimbridge-runner\"|\"$SBI_RUNNER\"|" \
		-e "s|\"/opt/sbi/libexec/|\"$d/opt/sbi/libexec/|" -e "s|\"shimbridge\"|\"$SBI_GROUP\"|" "$c"
	run "$SB_BUILD/shimbridged" --check-no-secrets -c "$c"
	[ "$status" -eq 0 ]
	[[ $output == *": ok (version "* ]]
}

@test "install.sh --uninstall stops a daemon started by hand first, then removes users, groups, /run/shimbridge; --purge secrets and audit" {
	[ ! -d /run/systemd/system ] || skip "systemd runs here: uninstall uses systemctl"
	if [ -e /etc/shimbridge ] || getent group shimbridge >/dev/null || id shimbridge-runner >/dev/null 2>&1; then
		skip "shimbridge is installed system-wide on this machine"
	fi
	local p=$SBI_SYS_PREFIX pid runner
	: >"$SB_DIR/sys-install"
	run -0 sh "$SB_ROOT/installer/install.sh" --prefix "$p" --prebuilt "$SB_BUILD"
	getent group shimbridge >/dev/null
	getent group shimbridge-audit >/dev/null
	id shimbridge-runner >/dev/null
	[ "$(stat -c '%a %U %G' /var/log/shimbridge)" = "750 root shimbridge-audit" ]
	# A config the daemon starts with, a secret, and the daemon started by hand.
	printf '%s\n' '{"socket": {"path": "/run/shimbridge/bridge.sock", "group": "shimbridge"},' \
		'"runner": "shimbridge-runner",' \
		'"tools": {"say": {"path": "/bin/echo", "rules": [{"allow": ["**"]}]}}}' \
		>/etc/shimbridge/config.json
	mkdir -p -m 0755 /run/shimbridge
	"$p/sbin/shimbridge" secret init >/dev/null
	printf value | "$p/sbin/shimbridge" --no-reload secret set tok >/dev/null
	"$p/sbin/shimbridged" -c /etc/shimbridge/config.json </dev/null >"$SB_DIR/sys.log" 2>&1 3>&- &
	pid=$!
	sb_wait_for 10 test -S /run/shimbridge/bridge.sock
	[ "$(stat -c '%a %U %G' /var/log/shimbridge/audit.log)" = "640 root shimbridge-audit" ]
	runuser -u shimbridge-runner -- sleep 300 </dev/null >/dev/null 2>&1 3>&- &
	runner=$!

	run -0 sh "$SB_ROOT/installer/install.sh" --uninstall --prefix "$p"
	# The daemon went first, before its user and its files.
	[[ $output == *"stopped shimbridged (pid $pid)"*"removed $p/sbin/shimbridged"*"removed user shimbridge-runner"* ]]
	! kill -0 "$pid" 2>/dev/null
	wait "$pid" || true
	wait "$runner" || true
	! pgrep -u shimbridge-runner >/dev/null 2>&1
	! id shimbridge-runner 2>/dev/null
	! getent group shimbridge
	! getent group shimbridge-audit
	! getent group shimbridge-runner
	[ ! -e /run/shimbridge ]
	[ ! -e "$p" ]
	[ ! -e /var/lib/shimbridge ]
	# Kept without --purge: config, secrets, audit log (now root-only).
	[ -f /etc/shimbridge/config.json ]
	[ -f /etc/shimbridge/secrets.store ]
	[ -f /etc/shimbridge/store.key ]
	[ "$(stat -c '%a %U %G' /var/log/shimbridge/audit.log)" = "600 root root" ]
	[ "$(stat -c '%a %G' /var/log/shimbridge)" = "700 root" ]

	run -0 sh "$SB_ROOT/installer/uninstall.sh" --prefix "$p" --purge
	[ ! -e /etc/shimbridge ]
	[ ! -e /var/log/shimbridge ]
	rm -f "$SB_DIR/sys-install"
}

@test "make install PREFIX= DESTDIR= works, and uninstall leaves only the kept config" {
	local d
	d=$(sbi_tmp)
	run make -s -C "$SB_ROOT" install PREFIX=/opt/sbi DESTDIR="$d"
	[ "$status" -eq 0 ]
	[ -x "$d/opt/sbi/sbin/shimbridged" ]
	[ -x "$d/opt/sbi/libexec/shimbridge/shims/shimbridge-shim" ]
	# Another prefix: the units go to /etc/systemd/system with the prefix's paths.
	grep -q '^ExecStart=/opt/sbi/sbin/shimbridged ' "$d/etc/systemd/system/shimbridge.service"
	mkdir -p "$d/var/log/shimbridge" && echo '{}' >"$d/var/log/shimbridge/audit.log"
	mkdir -p "$d/var/lib/shimbridge/mirrors/x"

	run make -s -C "$SB_ROOT" uninstall PREFIX=/opt/sbi DESTDIR="$d"
	[ "$status" -eq 0 ]
	[[ $output == *"kept /etc/shimbridge"* ]]
	run find "$d" -mindepth 1 ! -type d
	[ "$output" = "$(printf '%s\n' "$d/etc/shimbridge/config.json" "$d/var/log/shimbridge/audit.log" | sort)" ] ||
		[ "$(printf '%s\n' "$output" | sort)" = "$(printf '%s\n' "$d/etc/shimbridge/config.json" "$d/var/log/shimbridge/audit.log" | sort)" ]
	[ ! -e "$d/opt" ]
	[ ! -e "$d/var/lib/shimbridge" ]

	run sh "$SB_ROOT/installer/uninstall.sh" --prefix /opt/sbi --destdir "$d" --purge
	[ "$status" -eq 0 ]
	run find "$d" -mindepth 1 ! -type d
	[ -z "$output" ]
}

# --- service definitions ----------------------------------------------------------

@test "systemd units pass systemd-analyze verify" {
	command -v systemd-analyze >/dev/null || skip "systemd-analyze not installed"
	local t
	t=$(sbi_tmp)
	cp "$SB_ROOT/systemd/shimbridge.socket" "$SB_ROOT/systemd/shimbridge.service" "$t/"
	# verify wants the program to exist: point it at the build.
	sed -i "s|/usr/local/sbin/shimbridged|$SB_BUILD/shimbridged|g" "$t/shimbridge.service"
	run systemd-analyze verify "$t/shimbridge.socket" "$t/shimbridge.service"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

@test "shimbridge.service exposure (systemd-analyze security --offline) is at most $EXPOSURE_MAX" {
	command -v systemd-analyze >/dev/null || skip "systemd-analyze not installed"
	systemd-analyze security --help 2>/dev/null | grep -q -- --offline || skip "systemd-analyze has no --offline"
	local t level
	t=$(sbi_tmp)
	cp "$SB_ROOT/systemd/shimbridge.socket" "$SB_ROOT/systemd/shimbridge.service" "$t/"
	run systemd-analyze security --offline=yes --no-pager "$t/shimbridge.service"
	level=$(printf '%s\n' "$output" | sed -n 's/.*Overall exposure level for shimbridge.service: \([0-9.]*\).*/\1/p')
	echo "exposure: $level" >&3
	[ -n "$level" ]
	awk -v l="$level" -v m="$EXPOSURE_MAX" 'BEGIN { exit !(l <= m) }'
	# The choices the daemon depends on are there.
	grep -qx 'Type=notify' "$t/shimbridge.service"
	grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$t/shimbridge.service"
	grep -qx 'CapabilityBoundingSet=CAP_SETUID CAP_SETGID CAP_CHOWN CAP_FOWNER CAP_KILL CAP_DAC_OVERRIDE CAP_SYS_ADMIN CAP_NET_ADMIN' "$t/shimbridge.service"
	# What the jail needs from the sandbox around the daemon (jail.bats runs the capabilities).
	grep -qx 'SystemCallFilter=@system-service @mount sethostname' "$t/shimbridge.service"
	grep -qx 'RestrictNamespaces=no' "$t/shimbridge.service"
	grep -qx 'ProtectHostname=no' "$t/shimbridge.service"
	grep -qx 'ListenStream=/run/shimbridge/bridge.sock' "$t/shimbridge.socket"
	grep -qx 'SocketMode=0660' "$t/shimbridge.socket"
	grep -qx 'SocketGroup=shimbridge' "$t/shimbridge.socket"
}

@test "launchd plist is a valid property list with socket activation" {
	run "$PY" - "$SB_ROOT/launchd/org.shimbridge.shimbridged.plist" <<'EOF'
import plistlib, sys
with open(sys.argv[1], "rb") as f:
    d = plistlib.load(f)
assert d["Label"] == "org.shimbridge.shimbridged", d["Label"]
args = d["ProgramArguments"]
assert args[0].startswith("/") and args[0].endswith("/shimbridged"), args
assert d.get("UserName") == "root"
ls = d["Sockets"]["Listeners"]
assert ls["SockPathName"] == "/var/run/shimbridge/bridge.sock", ls
assert ls["SockPathMode"] == 0o660 == 432, ls
assert ls.get("SockType", "stream") == "stream" and ls.get("SockFamily") == "Unix", ls
assert d.get("RunAtLoad") is False
assert d["HardResourceLimits"]["Core"] == 0
print("ok")
EOF
	[ "$status" -eq 0 ]
	[ "$output" = ok ]
}

@test "shellcheck: every shell script in the repository" {
	command -v shellcheck >/dev/null || skip "shellcheck not installed"
	local files
	files=$(cd "$SB_ROOT" && { git ls-files '*.sh'; ls installer/*.sh; } | sort -u)
	[ -n "$files" ]
	cd "$SB_ROOT"
	# shellcheck disable=SC2086
	run shellcheck $files
	[ "$status" -eq 0 ] || { printf '%s\n' "$output"; false; }
}
