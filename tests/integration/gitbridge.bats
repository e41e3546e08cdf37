#!/usr/bin/env bats
# git through the whole real path: the sandbox user runs the real git, whose
# url.<shimbridge::https://github.com/>.insteadOf sends github.com to the remote helper
# git-remote-shimbridge (the shim), which talks to the real shimbridged, which runs
# shimbridge-git as the runner against a loopback smart-HTTP upstream
# (tests/fixtures/githttp.py) that wants the token on every request.
#
#   bats tests/integration/gitbridge.bats
#   SB_BUILD=build/san bats tests/integration/gitbridge.bats     # ASan/UBSan daemon
#
# One daemon and one upstream (octo/demo and octo/other, both with
# receive.denyNonFastForwards) for the file; sessions alice ($SB_ALICE) and bob ($SB_BOB)
# may reach octo/demo only. Each test makes its own clones and uses its own branch
# names, so the tests do not depend on each other. Every test ends with a check
# (teardown) that the daemon is alive, no runner process is left behind, and the token
# is in none of the output the sandbox saw.
# Note: bash's errexit ignores "! cmd", so negations are written "! cmd || false".

bats_require_minimum_version 1.5.0
load lib

# A runner of our own, per run: a starting daemon SIGKILLs every process of its runner,
# so suites (or two runs of this one) sharing a runner would kill each other's children,
# and the leftover check in teardown would see the other run's processes.
SB_RUNNER=${GB_RUNNER:-$SB_LANE-rgb-$$}
BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-60}

setup_file() {
	local u w helper
	GB_RUNNER=$SB_RUNNER
	export GB_RUNNER
	sb_build_resolve
	sb_users
	sb_tree
	sb_shim_links git-remote-shimbridge shimbridge
	export SB_RUNNER
	# Private copies: a rebuild in the tree during the run must not change the binaries.
	# The helper is never the sanitized one: ASan cannot map its shadow memory under the
	# RLIMIT_AS the daemon gives its children (it aborts at start). GB_HELPER overrides.
	helper=${GB_HELPER:-$SB_BUILD/shimbridge-git}
	case $SB_BUILD in */san) helper=${GB_HELPER:-${SB_BUILD%/san}/shimbridge-git} ;; esac
	[ -x "$helper" ] || helper=$SB_ROOT/build/shimbridge-git
	mkdir -p "$SB_DIR/libexec" "$SB_DIR/out"
	install -m 0755 "$helper" "$SB_DIR/libexec/shimbridge-git"
	chmod 700 "$SB_DIR/out"

	GB_TOKEN="ghp_GbT$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
	(umask 077 && printf '%s' "$GB_TOKEN" >"$SB_DIR/etc/github-token")

	# The upstream ("GitHub"): root-only, like the bridge's own files.
	GB_UP=$SB_DIR/up
	GB_UPREPO=$GB_UP/root/octo/demo.git
	mkdir -p "$GB_UP/root/octo"
	chmod 700 "$GB_UP"
	cp "$SB_DIR/etc/github-token" "$GB_UP/token"
	gb_upstream_init demo
	gb_upstream_init other
	git init -q -b main "$GB_UP/seed"
	printf 'hello from upstream\n' >"$GB_UP/seed/README"
	git -C "$GB_UP/seed" add README
	git -C "$GB_UP/seed" -c user.name=Up -c user.email=up@example.com commit -q -m init
	git -C "$GB_UP/seed" push -q "$GB_UPREPO" main
	git -C "$GB_UP/seed" push -q "$GB_UP/root/octo/other.git" main
	sb_bg "$PY" "$SB_FIXTURES/githttp.py" --root "$GB_UP/root" --token-file "$GB_UP/token" \
		--port-file "$GB_UP/port" --log "$GB_UP/requests.log" \
		--fetch-delay-file "$GB_UP/fetch-delay" </dev/null >"$GB_UP/server.out" 2>&1
	echo $! >"$GB_UP/pid"
	# A second host whose token begins with "0000", the bytes that end every pkt-line
	# message (a flush): output held back as a possible start of the token would stall
	# the protocol. Same repositories, its own token and log.
	GB_ZTOKEN="0000$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
	mkdir -p "$GB_UP/zero"
	(umask 077 && printf '%s' "$GB_ZTOKEN" >"$SB_DIR/etc/zero-token" &&
		printf '%s' "$GB_ZTOKEN" >"$GB_UP/zero/token")
	sb_bg "$PY" "$SB_FIXTURES/githttp.py" --root "$GB_UP/root" --token-file "$GB_UP/zero/token" \
		--port-file "$GB_UP/zero/port" --log "$GB_UP/zero/requests.log" \
		</dev/null >"$GB_UP/zero/server.out" 2>&1
	echo $! >"$GB_UP/zero/pid"

	# A trap for proxies and URL rewrites: any connection to it is recorded.
	GB_SPY=$SB_DIR/spy
	mkdir -p "$GB_SPY"
	sb_bg "$PY" "$SB_FIXTURES/tcpspy.py" --port-file "$GB_SPY/port" --log "$GB_SPY/log" \
		</dev/null >"$GB_SPY/out" 2>&1
	echo $! >"$GB_SPY/pid"
	sb_wait_for 10 test -s "$GB_UP/port"
	sb_wait_for 10 test -s "$GB_SPY/port"
	sb_wait_for 10 test -s "$GB_UP/zero/port"
	GB_UPPORT=$(cat "$GB_UP/port")
	GB_SPYPORT=$(cat "$GB_SPY/port")
	: >"$GB_UP/requests.log"

	sb_config <<EOF
{ $(sb_config_head)
  "limits": {"max_per_session": 16},
  "secrets": {"github": {"source": "file", "path": "$SB_DIR/etc/github-token"},
              "zero": {"source": "file", "path": "$SB_DIR/etc/zero-token"}},
  "tools": {},
  "git": {"path": "/usr/bin/git", "helper": "$SB_DIR/libexec/shimbridge-git",
          "hosts": {"github.com": {"upstream": "http://127.0.0.1:$GB_UPPORT", "secret": "github"},
                    "zero.example": {"upstream": "http://127.0.0.1:$(cat "$GB_UP/zero/port")", "secret": "zero"}},
          "no_push_branches": ["HEAD", "release/frozen"], "ff_only_branches": ["main", "stable"],
          "deny_paths": [".github/workflows/"], "timeout": 60,
          "ask_branches": ["release/*"], "ask_timeout": 30}
}
EOF
	sb_session alice "$SB_ALICE" '["git"]' '"repos": ["octo/demo"]'
	sb_session bob "$SB_BOB" '["git"]' '"repos": ["octo/demo"]'
	sb_start 3>&-
	echo "$SB_PID" >"$SB_DIR/daemon.pid"

	# Each sandbox user's working area and global git config (GIT_CONFIG_GLOBAL, so
	# other suites writing ~/.gitconfig of the same users cannot interfere).
	for u in alice bob; do
		w=$(getent passwd "$SB_LANE-$u" | cut -d: -f6)/gitbridge.$$
		rm -rf "$w"
		mkdir -p "$w"
		cat >"$w/gitconfig" <<EOF
[user]
	name = Agent $u
	email = $u@sandbox.example
[url "shimbridge::https://github.com/"]
	insteadOf = https://github.com/
	insteadOf = git@github.com:
[url "shimbridge::https://gitlab.com/"]
	insteadOf = https://gitlab.com/
[url "shimbridge::https://zero.example/"]
	insteadOf = https://zero.example/
[init]
	defaultBranch = main
[advice]
	detachedHead = false
[pull]
	rebase = false
EOF
		chown -R "$SB_LANE-$u:" "$w"
		chmod 700 "$w"
		printf -v "GB_W_$u" '%s' "$w"
	done
	gb_arm_kit
	GB_MIRROR_ALICE=$SB_DIR/state/mirrors/alice/github.com/octo/demo.git
	GB_MIRROR_BOB=$SB_DIR/state/mirrors/bob/github.com/octo/demo.git
	export GB_TOKEN GB_ZTOKEN GB_UP GB_UPREPO GB_SPY GB_UPPORT GB_SPYPORT GB_W_alice GB_W_bob \
		GB_MIRROR_ALICE GB_MIRROR_BOB SB_PID GB_MK GB_ARM
	# Canary: when git through the bridge hangs, every test would wait out its timeout;
	# fail them all at once instead, with what was seen.
	gb_canary
}

teardown_file() {
	local rc=0 f
	SB_PID=$(cat "$SB_DIR/daemon.pid" 2>/dev/null)
	# A test may have restarted it (then it is not our child): sb_stop handles both.
	sb_stop || rc=$?
	for f in "$GB_UP/pid" "$GB_UP/zero/pid" "$GB_SPY/pid"; do
		[ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	gb_runner_pids | xargs -r kill -KILL 2>/dev/null || true
	userdel "$SB_RUNNER" 2>/dev/null || true
	rm -rf "${GB_W_alice:-/nonexistent}" "${GB_W_bob:-/nonexistent}" "${GB_MK:-/nonexistent}"
	rm -rf "$SB_DIR"
	sb_reap_suite
	return "$rc"
}

setup() {
	SB_PID=$(cat "$SB_DIR/daemon.pid")	# a test may have restarted it
	GB_OUT=$SB_DIR/out/$BATS_TEST_NUMBER.log
	: >"$GB_OUT"
	GB_ENV=()
	AW=$GB_W_alice/t$BATS_TEST_NUMBER
	BW=$GB_W_bob/t$BATS_TEST_NUMBER
	runuser -u "$SB_ALICE" -- mkdir -p "$AW"
	runuser -u "$SB_BOB" -- mkdir -p "$BW"
}

teardown() {
	local rc=0
	if grep -qF -e "$GB_TOKEN" -e "$GB_ZTOKEN" "$GB_OUT"; then
		echo "TOKEN LEAKED into the sandbox's output" >&2
		rc=1
	fi
	if ! kill -0 "$SB_PID" 2>/dev/null; then
		echo "the daemon died:" >&2
		tail -n 30 "$SB_DIR/log/daemon.log" >&2
		rc=1
	fi
	if ! sb_wait_for 10 gb_no_runner; then
		echo "runner processes left behind:" >&2
		ps -o pid,ppid,stat,args -p "$(gb_runner_pids | paste -sd,)" >&2
		rc=1
	fi
	sb_reap
	return "$rc"
}

# --- helpers -----------------------------------------------------------------------

# One ls-remote through the bridge within 15 s, or a report of what was seen.
gb_canary() {
	local out rc=0 BATS_TEST_NUMBER=0
	GB_ENV=()
	out=$(GB_T=15 gb_as alice "$GB_W_alice" git ls-remote https://github.com/octo/demo.git) || rc=$?
	[ "$rc" -eq 0 ] && [[ "$out" == *refs/heads/main* ]] && return 0
	{
		echo "setup: git ls-remote through the bridge failed (exit $rc; 124: it hung for 15 s):"
		printf '%s\n' "$out" | grep -vF "$GB_TOKEN" | tail -n 5
		echo "last audit records:"
		tail -n 2 "$SB_AUDIT" | grep -vF "$GB_TOKEN"
	} >&2
	return 1
}

# The kit that arms a sandbox repository: $GB_ARM holds root-owned programs that record
# in the world-writable $GB_MK that they ran, and as which uid (mark.UID.WHAT.PID), and
# $GB_ARM/config names them in every config key that can run a program or redirect
# traffic (the traffic goes to the TCP trap on $GB_SPYPORT).
gb_arm_kit() {
	local a h k v spy=http://127.0.0.1:$GB_SPYPORT up=http://127.0.0.1:$GB_UPPORT
	GB_MK=$(mktemp -d "/tmp/$SB_LANE-gb-mark.XXXXXX")
	_sb_record "dir $GB_MK"
	chmod 1777 "$GB_MK"
	GB_ARM=$SB_DIR/arm
	a=$GB_ARM
	mkdir -p "$a/hooks" "$a/template/hooks"
	# mark WHAT: WHAT ran, as this uid.
	printf '#!/bin/sh\nu=$(id -u)\necho "$u $1" >"%s/mark.$u.$1.$$"\n' "$GB_MK" >"$a/mark"
	for h in applypatch-msg pre-applypatch post-applypatch pre-commit pre-merge-commit \
		prepare-commit-msg commit-msg post-commit pre-rebase post-checkout post-merge \
		pre-push pre-receive update proc-receive post-receive post-update \
		reference-transaction push-to-checkout pre-auto-gc post-rewrite \
		post-index-change fsmonitor-watchman; do
		printf '#!/bin/sh\n%s/mark hook-%s\ncat >/dev/null 2>&1\nexit 0\n' "$a" "$h" >"$a/hooks/$h"
		cp "$a/hooks/$h" "$a/template/hooks/$h"
	done
	printf '#!/bin/sh\n%s/mark fsmonitor\nexit 1\n' "$a" >"$a/fsmonitor"
	printf '#!/bin/sh\n%s/mark filter-clean\nexec cat\n' "$a" >"$a/filter-clean"
	printf '#!/bin/sh\n%s/mark filter-smudge\nexec cat\n' "$a" >"$a/filter-smudge"
	printf '#!/bin/sh\ncat >"%s/cred.$(id -u).$$"\n%s/mark credential\n' "$GB_MK" "$a" >"$a/cred"
	printf '#!/bin/sh\n%s/mark ssh\nexit 255\n' "$a" >"$a/ssh"
	printf '#!/bin/sh\n%s/mark gitproxy\nexit 1\n' "$a" >"$a/gitproxy"
	printf '#!/bin/sh\n%s/mark pager\nexec cat\n' "$a" >"$a/pager"
	printf '#!/bin/sh\n%s/mark editor\nexit 0\n' "$a" >"$a/editor"
	printf '#!/bin/sh\n%s/mark askpass\necho nope\n' "$a" >"$a/askpass"
	printf '#!/bin/sh\n%s/mark gpg\nexit 1\n' "$a" >"$a/gpg"
	printf '#!/bin/sh\n%s/mark diff-external\nexit 0\n' "$a" >"$a/diffext"
	printf '#!/bin/sh\n%s/mark pack-objects-hook\nexec "$@"\n' "$a" >"$a/packhook"
	printf '#!/bin/sh\n%s/mark servpath\nexit 1\n' "$a" >"$a/servpath"
	chmod 755 "$a" "$a"/* "$a/hooks"/* "$a/template/hooks"/*
	while read -r k v; do
		git config -f "$a/config" --add "$k" "$v"
	done <<EOF
core.hooksPath $a/hooks
core.fsmonitor $a/fsmonitor
core.sshCommand $a/ssh
core.gitProxy $a/gitproxy
core.pager $a/pager
core.editor $a/editor
core.askPass $a/askpass
sequence.editor $a/editor
pager.push $a/pager
pager.fetch $a/pager
credential.helper $a/cred
credential.$up.helper $a/cred
credential.https://github.com.helper $a/cred
filter.x.clean $a/filter-clean
filter.x.smudge $a/filter-smudge
diff.ext.command $a/diffext
diff.external $a/diffext
gpg.program $a/gpg
uploadpack.packObjectsHook $a/packhook
url.$spy/.insteadOf $up/
url.$spy/.pushInsteadOf $up/
http.proxy $spy
http.https://github.com/.proxy $spy
http.$up/.proxy $spy
transfer.fsckObjects false
receive.denyDeletes false
EOF
	chmod 644 "$a/config"
}

# The sandbox's environment, armed the same way (added to gb_as's by GB_ENV).
gb_arm_env() {
	local spy=http://127.0.0.1:$GB_SPYPORT a=$GB_ARM
	GB_ENV=(GIT_CONFIG_GLOBAL="$GB_W_alice/armed-gitconfig" GIT_TEMPLATE_DIR="$a/template"
		GIT_SSH_COMMAND="$a/ssh" GIT_SSH="$a/ssh" GIT_PROXY_COMMAND="$a/gitproxy"
		GIT_ASKPASS="$a/askpass" SSH_ASKPASS="$a/askpass" GIT_EDITOR="$a/editor"
		GIT_PAGER="$a/pager" PAGER="$a/pager" EDITOR="$a/editor" VISUAL="$a/editor"
		GIT_EXTERNAL_DIFF="$a/diffext"
		http_proxy="$spy" https_proxy="$spy" HTTP_PROXY="$spy" HTTPS_PROXY="$spy"
		ALL_PROXY="$spy" all_proxy="$spy" no_proxy= NO_PROXY=
		GIT_CONFIG_COUNT=2 GIT_CONFIG_KEY_0=core.hooksPath GIT_CONFIG_VALUE_0="$a/hooks"
		GIT_CONFIG_KEY_1=http.proxy GIT_CONFIG_VALUE_1="$spy"
		GIT_CONFIG_PARAMETERS="'core.sshcommand'='$a/ssh' 'credential.helper'='$a/cred'")
}

# Markers and credential records written by a uid other than $SB_LANE-USER's: something that
# ran on the host side (the runner, root). Prints them.
gb_host_markers() {
	local f u ok
	ok=$(id -u "$SB_LANE-$1")
	for f in "$GB_MK"/mark.* "$GB_MK"/cred.*; do
		[ -e "$f" ] || continue
		u=${f##*/}
		u=${u#*.}
		u=${u%%.*}
		[ "$u" = "$ok" ] || echo "$f (uid $u)"
	done
}

# Files, and /proc entries of live processes, that $SB_LANE-USER can read and that hold the
# token (plain, base64, or as the Basic credential made from it). The patterns travel on stdin, so that
# the searching grep's own argv does not hold them.
gb_token_visible() {
	{ printf '%s\n' "$GB_TOKEN"; printf 'x-access-token:%s' "$GB_TOKEN" | base64 -w0; echo
	  printf '%s' "$GB_TOKEN" | base64 -w0; echo; } |
		runuser -u "$SB_LANE-$1" -- grep -rlsF -D skip -f - /tmp /var/tmp /dev/shm /run /home \
		/proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null || true
}

# A bare upstream repository octo/NAME that refuses non-fast-forward updates, as a
# GitHub branch rule would.
gb_upstream_init() {
	local r=$GB_UP/root/octo/$1.git
	git init -q --bare -b main "$r"
	git -C "$r" config receive.denyNonFastForwards true
}

# gb_as USER DIR CMD...: run CMD as $SB_LANE-USER in DIR (relative: the test's area of that
# user) with the sandbox's clean environment plus "${GB_ENV[@]}", bounded by GB_T (30)
# seconds; stderr goes to stdout.
gb_as() {
	local u=$1 d=$2 home w
	shift 2
	home=$(getent passwd "$SB_LANE-$u" | cut -d: -f6)
	w=GB_W_$u
	case $d in /*) ;; *) d=${!w}/t$BATS_TEST_NUMBER/$d ;; esac
	(cd "$d" && exec timeout -k 5 "${GB_T:-30}" runuser -u "$SB_LANE-$u" -- env -i \
		HOME="$home" PATH="$SB_DIR/bin:/usr/bin:/bin" SHIMBRIDGE_SOCKET="$SB_SOCK" \
		LANG=C.UTF-8 GIT_CONFIG_GLOBAL="${!w}/gitconfig" GIT_TERMINAL_PROMPT=0 \
		"${GB_ENV[@]}" "$@") 2>&1
}

# sgit USER DIR GIT-ARGS...: the sandbox's git; sets $status and $output, and keeps the
# output for the token check in teardown.
sgit() {
	local u=$1 d=$2
	shift 2
	run gb_as "$u" "$d" git "$@"
	printf '%s\n' "$output" >>"$GB_OUT"
}

# The last sgit must have exited with STATUS; if not, show what it printed.
gb_status() {
	[ "$status" -eq "$1" ] && return 0
	printf 'expected exit %s, got %s; output:\n%s\n' "$1" "$status" "$output" >&2
	return 1
}

# gb_clone USER DIR: clone octo/demo through the bridge into DIR; fail loudly.
gb_clone() {
	sgit "$1" . clone https://github.com/octo/demo.git "$2"
	gb_status 0
}

# gb_commit USER DIR FILE [TEXT]: a commit in the sandbox changing FILE.
gb_commit() {
	local u=$1 d=$2 f=$3 text=${4:-"$RANDOM $3"}
	run gb_as "$u" "$d" sh -c 'mkdir -p "$(dirname "$1")" && printf "%s\n" "$2" >>"$1" &&
		git add -- "$1" && git commit -q -m "change $1"' _ "$f" "$text"
	printf '%s\n' "$output" >>"$GB_OUT"
	gb_status 0
}

# The sandbox repository's value of a revision.
gb_rev() {
	gb_as "$1" "$2" git rev-parse --verify -q "$3"
}

# Upstream's value of a ref, or "none".
gb_upref() {
	git --git-dir="$GB_UPREPO" rev-parse -q --verify "$1" || echo none
}

# A mirror's value of a ref, or "none".
gb_mirref() {
	git -c safe.directory='*' --git-dir="$1" rev-parse -q --verify "$2" || echo none
}

# Requests the upstream has seen so far, and the pushes among them (POST .../git-receive-pack;
# every push call also reads receive-pack's ref advertisement ahead, which pushes nothing).
gb_uplines() {
	wc -l <"$GB_UP/requests.log"
}
# The upstream's log lines of receive-pack POSTs, oldest first.
gb_up_posts() {
	grep '"method": "POST", "path": "[^"]*/git-receive-pack"' "$GB_UP/requests.log" || true
}

gb_up_receive() {
	grep -c '"method": "POST", "path": "[^"]*/git-receive-pack"' "$GB_UP/requests.log" || true
}

# A human commits directly upstream (not through shimbridge) on main; prints the commit.
gb_upstream_commit() {
	local f=$1
	git -C "$GB_UP/seed" pull -q --ff-only "$GB_UPREPO" main
	printf '%s\n' "upstream $RANDOM" >>"$GB_UP/seed/$f"
	git -C "$GB_UP/seed" add "$f"
	git -C "$GB_UP/seed" -c user.name=Up -c user.email=up@example.com commit -q -m "upstream $f"
	git -C "$GB_UP/seed" push -q "$GB_UPREPO" main
	git -C "$GB_UP/seed" rev-parse HEAD
}

# fsck of a runner-owned mirror, run as root.
gb_fsck() {
	git -c safe.directory='*' --git-dir="$1" fsck --strict --no-dangling --no-progress
}

# gb_audit_denied SESSION 'PYTHON-STRING': some audit record denies a request of
# SESSION with a reason containing that string.
gb_audit_denied() {
	sb_audit_grep 'r["event"] == "denied" and r.get("session") == "'"$1"'" and '"$2"' in r.get("reason", "")'
}

# Live processes of our runner that our daemon started: their environment names our
# directory. (Not just the uid: uids are recycled, and processes of a runner user that
# another suite deleted while they ran may hold ours.)
gb_runner_pids() {
	local p
	for p in $(pgrep -u "$SB_RUNNER"); do
		grep -qaF "$SB_DIR/" "/proc/$p/environ" 2>/dev/null && echo "$p"
	done
	return 0
}
gb_no_runner() {
	[ -z "$(gb_runner_pids)" ]
}

# Every process below PID (not PID itself).
gb_descendants() {
	ps -e -o pid=,ppid= | awk -v root="$1" '
		{ parent[$1] = $2 }
		END {
			for (p in parent) {
				q = p
				while (q in parent && q != root && q > 1) q = parent[q]
				if (q == root && p != root) print p
			}
		}'
}

# The admin CLI against this suite's daemon.
adm() {
	"$SB_BUILD/shimbridge" -c "$SB_CONFIG" "$@"
}

# gb_bgpush NAME USER DIR GIT-ARGS...: the sandbox's git in the background, as gb_as
# runs it; its output goes to $SB_DIR/out/NAME.log, its exit status to NAME.rc.
gb_bgpush() {
	local n=$1 u=$2 d=$3 home w
	shift 3
	home=$(getent passwd "$SB_LANE-$u" | cut -d: -f6)
	w=GB_W_$u
	case $d in /*) ;; *) d=${!w}/t$BATS_TEST_NUMBER/$d ;; esac
	rm -f "$SB_DIR/out/$n.log" "$SB_DIR/out/$n.rc"
	# shellcheck disable=SC2016
	sb_bg /bin/sh -c 'o=$1; d=$2; shift 2; cd "$d" || exit 1; "$@" >"$o.log" 2>&1
	    echo $? >"$o.rc"' _ "$SB_DIR/out/$n" "$d" timeout -k 5 90 runuser -u "$SB_LANE-$u" -- \
		env -i HOME="$home" PATH="$SB_DIR/bin:/usr/bin:/bin" SHIMBRIDGE_SOCKET="$SB_SOCK" \
		LANG=C.UTF-8 GIT_CONFIG_GLOBAL="${!w}/gitconfig" GIT_TERMINAL_PROMPT=0 git "$@" \
		</dev/null
}

# gb_bgwait NAME: wait (60 s) for a gb_bgpush to end; sets $status and $output like run,
# and keeps the output for the token check in teardown.
gb_bgwait() {
	sb_wait_for 60 test -s "$SB_DIR/out/$1.rc" || { echo "push $1 did not end" >&2; return 1; }
	status=$(cat "$SB_DIR/out/$1.rc")
	output=$(cat "$SB_DIR/out/$1.log")
	printf '%s\n' "$output" >>"$GB_OUT"
}

# Whether a waiting request's command contains TEXT.
gb_has_pending() {
	adm pending --json | grep -qF -- "$1"
}

# The id of the waiting request whose command contains TEXT (waits up to 20 s).
gb_pending_id() {
	sb_wait_for 20 gb_has_pending "$1" || {
		echo "no pending request with $1:" >&2
		adm pending >&2
		return 1
	}
	adm pending --json | "$PY" -c 'import json, sys
for e in json.load(sys.stdin):
    if sys.argv[1] in e["command"]:
        print(e["id"]); break' "$1"
}

# gb_askbranch USER DIR BRANCH: a clone in DIR with a new commit on a new BRANCH.
gb_askbranch() {
	gb_clone "$1" "$2"
	gb_as "$1" "$2" git checkout -q -b "$3"
	gb_commit "$1" "$2" "ask-$RANDOM.txt"
}

# --- the network operations, through the bridge -------------------------------------

@test "clone through the bridge: upstream's content, a runner-owned mirror, an audited request" {
	nreq=$(gb_uplines)
	gb_clone alice c
	[ "$(cat "$AW/c/README")" = "hello from upstream" ]
	[ "$(gb_as alice c git symbolic-ref --short HEAD)" = main ]
	[ "$(gb_as alice c git config remote.origin.url)" = https://github.com/octo/demo.git ]
	[ "$(gb_rev alice c HEAD)" = "$(gb_upref refs/heads/main)" ]
	# Served from the session's mirror, which the runner owns and the sandbox cannot read.
	[ "$(stat -c %U "$GB_MIRROR_ALICE")" = "$SB_RUNNER" ]
	! runuser -u "$SB_ALICE" -- ls "$GB_MIRROR_ALICE" >/dev/null 2>&1 || false
	# Upstream saw authenticated upload-pack requests, from the runner's git.
	tail -n +"$((nreq + 1))" "$GB_UP/requests.log" | grep 'git-upload-pack' | grep '"auth": true' |
		grep -q '"status": 200'
	sb_audit_grep 'r["event"] == "allowed" and r.get("session") == "alice" and r.get("tool") == "git" and r.get("argv") == ["git-upload-pack", "https://github.com/octo/demo.git"]'
	sb_audit_grep 'r["event"] == "done" and r.get("session") == "alice" and r.get("tool") == "git" and r.get("exit") == 0'
	# The scp-like spelling goes the same way.
	sgit alice . clone git@github.com:octo/demo.git c2
	gb_status 0
	[ "$(gb_rev alice c2 HEAD)" = "$(gb_upref refs/heads/main)" ]
}

@test "ls-remote lists upstream's refs" {
	git -C "$GB_UP/seed" push -q "$GB_UPREPO" main:refs/heads/gb-lsr
	git -C "$GB_UP/seed" tag -f gb-lsr-tag >/dev/null
	git -C "$GB_UP/seed" push -q -f "$GB_UPREPO" refs/tags/gb-lsr-tag
	sgit alice . ls-remote https://github.com/octo/demo.git
	gb_status 0
	[[ "$output" == *"$(gb_upref refs/heads/main)"$'\trefs/heads/main'* ]]
	[[ "$output" == *$'\trefs/heads/gb-lsr'* ]]
	[[ "$output" == *$'\trefs/tags/gb-lsr-tag'* ]]
}

@test "fetch brings in a new upstream commit" {
	gb_clone alice c
	new=$(gb_upstream_commit fetch-news.txt)
	[ "$(gb_rev alice c origin/main)" != "$new" ]
	sgit alice c fetch origin
	gb_status 0
	[ "$(gb_rev alice c origin/main)" = "$new" ]
	[ "$(gb_mirref "$GB_MIRROR_ALICE" refs/heads/main)" = "$new" ]
}

@test "a fetch's ref list is asked for while the jail starts, once, audited; the call's phases are audited" {
	gb_clone alice c
	new=$(gb_upstream_commit prefetch-news.txt)
	nreq=$(gb_uplines)
	sgit alice c fetch origin
	gb_status 0
	[ "$(gb_rev alice c origin/main)" = "$new" ]
	# One ref list upstream for the whole call: the bridge's prefetch, handed to git.
	[ "$(tail -n +"$((nreq + 1))" "$GB_UP/requests.log" | grep -c 'info/refs')" = 1 ]
	# git's POST went over the prefetch's connection, kept open (keep-alive): one
	# connection upstream, one TLS handshake with a real host.
	run "$PY" - "$GB_UP/requests.log" "$nreq" <<'PY'
import json, sys
recs = [json.loads(line) for line in open(sys.argv[1]).read().splitlines()[int(sys.argv[2]):]]
refs = [r["conn"] for r in recs if r["path"].endswith("/info/refs")]
posts = [r["conn"] for r in recs if r["method"] == "POST" and r["path"].endswith("/git-upload-pack")]
print("connections: ref list %s, POSTs %s" % (refs, posts))
sys.exit(0 if len(refs) == 1 and posts and set(posts) == set(refs) else 1)
PY
	echo "$output"
	[ "$status" -eq 0 ]
	conn=$(sb_audit_grep 'r["event"] == "http" and r.get("session") == "alice" and r.get("request") == "prefetch GET /octo/demo.git/info/refs?service=git-upload-pack" and r.get("status") == 200' |
		tail -n 1 | "$PY" -c 'import json, sys; print(json.loads(sys.stdin.read())["conn"])')
	sb_audit_grep "r['event'] == 'http' and r.get('conn') == $conn and r.get('request', '').endswith('(prefetched)') and r.get('status') == 200"
	# The phases, in order, each once: the bridge's spawn, shimbridge-git's marks, done.
	sb_audit_grep "r['event'] == 'git-phases' and r.get('conn') == $conn and 0 < r['ms']['spawn'] <= r['ms']['start'] <= r['ms']['mirror'] <= r['ms']['end'] <= r['ms']['done'] and 'hook' not in r['ms']"
}

@test "a push's phases are audited: mirror, receive, policy, upstream" {
	gb_clone alice c
	gb_as alice c git checkout -q -b gb-phases
	gb_commit alice c phases.txt
	sgit alice c push origin gb-phases
	gb_status 0
	sb_audit_grep "r['event'] == 'git-phases' and r.get('argv', [''])[0] == 'git-receive-pack' and r['ms']['start'] <= r['ms']['mirror'] <= r['ms']['hook'] <= r['ms']['policy'] <= r['ms']['upstream'] <= r['ms']['end'] <= r['ms']['done']"
}

@test "a mirror due a gc gets it jailed, as its runner, at a call's start; the audit's phases say so" {
	local i oid
	gb_clone alice c
	# More than gc.autoPackLimit (50) packs in the mirror (objects nothing reaches).
	for i in $(seq 51); do
		oid=$(echo "gb pack $i $RANDOM" | git --git-dir="$GB_MIRROR_ALICE" hash-object -w --stdin)
		echo "$oid" | git --git-dir="$GB_MIRROR_ALICE" pack-objects -q \
			"$GB_MIRROR_ALICE/objects/pack/pack" >/dev/null
	done
	git --git-dir="$GB_MIRROR_ALICE" prune-packed
	chown -R --reference="$GB_MIRROR_ALICE" "$GB_MIRROR_ALICE/objects"
	[ "$(find "$GB_MIRROR_ALICE/objects/pack" -name '*.pack' | wc -l)" -gt 51 ]
	sgit alice c fetch origin
	gb_status 0
	[ "$(find "$GB_MIRROR_ALICE/objects/pack" -name '*.pack' | wc -l)" -le 2 ]
	# The new pack is the runner's: the gc ran as the session's runner, not as root.
	[ -z "$(find "$GB_MIRROR_ALICE/objects/pack" -name '*.pack' ! -user "$(stat -c %U "$GB_MIRROR_ALICE")")" ]
	sb_audit_grep "r['event'] == 'git-phases' and r.get('session') == 'alice' and r.get('argv', [''])[0] == 'git-upload-pack' and 'gc' in r['ms'] and r['ms']['start'] <= r['ms']['gc'] <= r['ms']['mirror'] <= r['ms']['end']"
}

@test "progress: with --progress the upstream leg's meters reach the sandbox, without it none" {
	gb_clone alice c
	gb_upstream_commit progress-quiet.txt >/dev/null
	sgit alice c fetch origin
	gb_status 0
	[[ "$output" != *"objects:"* ]] || false
	gb_as alice c git checkout -q -b gb-progress-quiet
	gb_commit alice c pq.txt
	sgit alice c push origin gb-progress-quiet
	gb_status 0
	[[ "$output" != *"shimbridge: "*"objects:"* ]] || false

	# As a direct git would on a terminal: the remote helper is told "option progress true".
	gb_upstream_commit progress-loud.txt >/dev/null
	sgit alice c fetch --progress origin
	gb_status 0
	[[ "$output" == *"shimbridge: remote: Enumerating objects: "*", done."* ]]
	gb_as alice c git checkout -q -b gb-progress-loud
	gb_commit alice c pl.txt
	sgit alice c push --progress origin gb-progress-loud
	gb_status 0
	[[ "$output" == *"remote: shimbridge: Writing objects: 100% ("* ]]
	[ "$(gb_upref refs/heads/gb-progress-loud)" = "$(gb_rev alice c HEAD)" ]
}

@test "pull merges a new upstream commit into local work" {
	gb_clone alice c
	gb_commit alice c local-work.txt
	local_head=$(gb_rev alice c HEAD)
	new=$(gb_upstream_commit pull-news.txt)
	sgit alice c pull --no-edit origin main
	gb_status 0
	# A merge of both: upstream's commit and ours are ancestors of the new HEAD.
	gb_as alice c git merge-base --is-ancestor "$new" HEAD
	gb_as alice c git merge-base --is-ancestor "$local_head" HEAD
	[ -f "$AW/c/pull-news.txt" ]
}

@test "push of a new branch lands upstream" {
	local n
	gb_clone alice c
	gb_as alice c git checkout -q -b gb-new
	gb_commit alice c src/new.c
	n=$(gb_uplines)
	sgit alice c push origin gb-new
	gb_status 0
	[[ "$output" == *"* [new branch]"*"gb-new -> gb-new"* ]]
	[ "$(gb_upref refs/heads/gb-new)" = "$(gb_rev alice c HEAD)" ]
	[ "$(gb_mirref "$GB_MIRROR_ALICE" refs/heads/gb-new)" = "$(gb_rev alice c HEAD)" ]
	sb_audit_grep 'r["event"] == "allowed" and r.get("session") == "alice" and r.get("argv", [""])[0] == "git-receive-pack"'
	# The upstream leg went through the bridge's injector: shimbridge-git held no token.
	sb_audit_grep 'r["event"] == "http" and r.get("session") == "alice" and r.get("tool") == "git" and "git-receive-pack" in r.get("request", "") and r.get("status") == 200'
	# Receive-pack's ref advertisement was asked for while the sandbox's pack came in,
	# and the hook's git push got it from there: one GET of it upstream, one push.
	sb_audit_grep 'r["event"] == "http" and r.get("session") == "alice" and r.get("request") == "prefetch GET /octo/demo.git/info/refs?service=git-receive-pack" and r.get("status") == 200'
	sb_audit_grep 'r["event"] == "http" and r.get("session") == "alice" and r.get("request") == "GET /octo/demo.git/info/refs?service=git-receive-pack (prefetched)" and r.get("status") == 200'
	[ "$(gb_up_since "$n" '"query": "service=git-receive-pack"')" = 1 ]
	[ "$(gb_up_since "$n" '"method": "POST", "path": "/octo/demo.git/git-receive-pack"')" = 1 ]
}

# gb_up_since N PATTERN: how many of upstream's requests after the first N match PATTERN.
gb_up_since() {
	tail -n +"$(($1 + 1))" "$GB_UP/requests.log" | grep -c -- "$2" || true
}

# gb_audit_since N EXPR: sb_audit_grep over the audit records after the first N.
gb_audit_since() {
	SB_AUDIT=<(tail -n +"$(($1 + 1))" "$SB_AUDIT") sb_audit_grep "$2"
}

# gb_human_push BRANCH FILE: a human pushes a commit to BRANCH directly upstream; prints it.
gb_human_push() {
	local h=$BATS_TEST_TMPDIR/human
	rm -rf "$h"
	git clone -q -b "$1" "$GB_UPREPO" "$h"
	printf '%s\n' "human $RANDOM" >>"$h/$2"
	git -C "$h" add "$2"
	git -C "$h" -c user.name=Up -c user.email=up@example.com commit -q -m "human $2"
	git -C "$h" push -q origin "$1"
	git -C "$h" rev-parse HEAD
}

@test "a push does not wait for what others pushed, and warms the mirror after its answer; one from a value upstream has left is refused, nothing sent" {
	gb_clone alice c
	gb_as alice c git checkout -q -b gb-stale
	gb_commit alice c stale-1.txt
	sgit alice c push origin gb-stale
	gb_status 0
	# A human pushes to main: alice's mirror is behind on a branch her push does not touch.
	news=$(gb_upstream_commit stale-news.txt)
	gb_commit alice c stale-2.txt
	n=$(gb_uplines)
	a=$(wc -l <"$SB_AUDIT")
	# Upstream's fetches take 1.5 s more than its pushes here: the warming fetch
	# outlasts the push it runs beside. One call at a time for the session.
	echo 1500 >"$GB_UP/fetch-delay"
	cp "$SB_CONFIG" "$SB_DIR/out/config.json"
	sb_json_edit "$SB_CONFIG" 'c.setdefault("limits", {})["max_per_session"] = 1'
	sb_reload | grep -q '"ok":true'
	sgit alice c push origin gb-stale
	gb_status 0
	# The agent's next command is not refused as one too many: the warming is the
	# bridge's work, not a call of the session's (it waits for the mirror's lock).
	sgit alice c ls-remote origin refs/heads/gb-stale
	gb_status 0
	[[ "$output" == *"$(gb_rev alice c HEAD)"$'\t'"refs/heads/gb-stale"* ]]
	rm -f "$GB_UP/fetch-delay"
	cp "$SB_DIR/out/config.json" "$SB_CONFIG"
	sb_reload | grep -q '"ok":true'
	[ "$(gb_upref refs/heads/gb-stale)" = "$(gb_rev alice c HEAD)" ]
	# The sandbox had its answer once upstream took the push; the call waited for the
	# warming fetch after that, and ended then.
	sb_wait_for 20 gb_audit_since "$a" 'r["event"] == "git-phases" and "warm" in r.get("ms", {})'
	gb_audit_since "$a" 'r["event"] == "git-phases" and r["argv"][0] == "git-receive-pack" and r["ms"]["upstream"] < r["ms"]["end"] < r["ms"]["answered"] < r["ms"]["warm"] < r["ms"]["done"] and r["ms"]["warm"] > 1500'
	gb_audit_since "$a" 'r["event"] == "done" and r["argv"][0] == "git-receive-pack" and r.get("exit") == 0 and 0 < r.get("answered", 0) < r["duration"] - 0.5'
	# Upstream's ref list was asked for once for the push (the bridge's prefetch, also
	# the warming fetch's), once for the ls-remote; main came into the mirror beside the
	# push, with one upload-pack POST.
	[ "$(gb_up_since "$n" '"query": "service=git-upload-pack"')" = 2 ]
	[ "$(gb_up_since "$n" '"path": "/octo/demo.git/git-upload-pack"')" = 1 ]
	[ "$(gb_up_since "$n" '"path": "/octo/demo.git/git-receive-pack"')" = 1 ]
	# Both the hook's own requests (gitserve/gitpush.c), not git fetch's and git push's.
	[ "$(gb_up_since "$n" '"agent": "git/shimbridge-[^"]*".*"path": "/octo/demo.git/git-\(upload\|receive\)-pack"')" = 2 ]
	[ "$(gb_mirref "$GB_MIRROR_ALICE" refs/heads/main)" = "$news" ]
	gb_fsck "$GB_MIRROR_ALICE"
	# So a fetch now finds the mirror fresh: no request beyond the prefetch.
	n=$(gb_uplines)
	sgit alice c fetch origin main
	gb_status 0
	[ "$(gb_rev alice c origin/main)" = "$news" ]
	[ "$(gb_up_since "$n" '"path": "/octo/demo.git/git-upload-pack"')" = 0 ]

	# A human pushes to gb-stale itself: alice's next push starts from a value upstream left.
	theirs=$(gb_human_push gb-stale human.txt)
	gb_commit alice c stale-3.txt
	n=$(gb_uplines)
	sgit alice c push origin gb-stale
	gb_status 1
	[[ "$output" == *"upstream's branch 'gb-stale' has moved since this repository last fetched"* ]]
	[[ "$output" == *"git pull --rebase"* ]]
	[[ "$output" == *"! [remote rejected] gb-stale -> gb-stale"* ]]
	[ "$(gb_upref refs/heads/gb-stale)" = "$theirs" ]
	[ "$(gb_up_since "$n" '"path": "/octo/demo.git/git-receive-pack"')" = 0 ]
	# As the message says: integrate, push again.
	sgit alice c pull -q --rebase origin gb-stale
	gb_status 0
	sgit alice c push origin gb-stale
	gb_status 0
	[ "$(gb_upref refs/heads/gb-stale)" = "$(gb_rev alice c HEAD)" ]
	[ "$(gb_as alice c git rev-parse HEAD~1)" = "$theirs" ]

	# A branch created upstream after the mirror last fetched, and one deleted there.
	git --git-dir="$GB_UPREPO" update-ref refs/heads/gb-theirs "$theirs"
	gb_as alice c git checkout -q -b gb-theirs
	sgit alice c push origin gb-theirs
	gb_status 1
	[[ "$output" == *"branch 'gb-theirs' already exists upstream"* ]]
	[ "$(gb_upref refs/heads/gb-theirs)" = "$theirs" ]
	git --git-dir="$GB_UPREPO" update-ref -d refs/heads/gb-stale
	gb_commit alice c stale-4.txt
	sgit alice c push origin HEAD:gb-stale
	gb_status 1
	[[ "$output" == *"branch 'gb-stale' no longer exists upstream"* ]]
	[ "$(gb_upref refs/heads/gb-stale)" = none ]
}

@test "the default branch takes no direct push: refused with the pull-request hint, nothing sent" {
	gb_clone alice c
	before=$(gb_upref refs/heads/main)
	pushes=$(gb_up_receive)
	gb_commit alice c ff-1.txt
	sgit alice c push origin main
	gb_status 1
	[[ "$output" == *"refusing to push to branch 'main': the shimbridge policy takes no direct pushes to it"* ]]
	[[ "$output" == *"open a pull request with gh pr create"* ]]
	[[ "$output" == *"! [remote rejected] main -> main"* ]]
	[ "$(gb_upref refs/heads/main)" = "$before" ]
	[ "$(gb_up_receive)" = "$pushes" ]
	sb_audit_grep 'r["event"] == "denied" and r.get("session") == "alice" and "takes no direct pushes" in r.get("reason", "")'
}

# Check out the ff-only branch "stable", creating it upstream if this is the first test to.
gb_stable() {
	if [ "$(gb_upref refs/heads/stable)" = none ]; then
		gb_as "$1" "$2" git checkout -q -b stable
		sgit "$1" "$2" push origin stable
		gb_status 0
	else
		gb_as "$1" "$2" git checkout -q -b stable origin/stable
	fi
}

@test "fast-forward push to an ff-only branch lands upstream" {
	gb_clone alice c
	gb_stable alice c
	gb_commit alice c ff-1.txt
	gb_commit alice c docs/ff-2.md
	sgit alice c push origin stable
	gb_status 0
	[ "$(gb_upref refs/heads/stable)" = "$(gb_rev alice c HEAD)" ]
}

@test "a force push that upstream refuses as non-fast-forward fails with upstream's message" {
	gb_clone alice c
	gb_as alice c git checkout -q -b gb-nff
	gb_commit alice c nff.txt
	sgit alice c push origin gb-nff
	gb_status 0
	before=$(gb_upref refs/heads/gb-nff)
	gb_as alice c git commit -q --amend -m rewritten
	sgit alice c push --force origin gb-nff
	# As against GitHub: exit 1, a rejected ref, and the server's reason.
	gb_status 1
	[[ "$output" == *"denying non-fast-forward refs/heads/gb-nff"* ]]
	[[ "$output" == *"! [remote rejected] gb-nff -> gb-nff"* ]]
	[ "$(gb_upref refs/heads/gb-nff)" = "$before" ]
	[ "$(gb_mirref "$GB_MIRROR_ALICE" refs/heads/gb-nff)" = "$before" ]
}

@test "deleting the protected branch main is refused by the bridge; nothing is pushed upstream" {
	gb_clone alice c
	before=$(gb_upref refs/heads/main)
	pushes=$(gb_up_receive)
	sgit alice c push origin :main
	gb_status 1
	[[ "$output" == *"refusing to delete branch 'main'"* ]]
	[[ "$output" == *"nothing was pushed upstream"* ]]
	[[ "$output" == *"! [remote rejected] main"* ]]
	[ "$(gb_upref refs/heads/main)" = "$before" ]
	[ "$(gb_up_receive)" = "$pushes" ]
}

@test "force-pushing the ff-only branch stable is refused by the bridge; nothing is pushed upstream" {
	gb_clone alice c
	gb_stable alice c
	before=$(gb_upref refs/heads/stable)
	pushes=$(gb_up_receive)
	gb_as alice c git commit -q --amend -m "rewritten history"
	sgit alice c push --force origin stable
	gb_status 1
	[[ "$output" == *"refusing to force-push branch 'stable'"* ]]
	[[ "$output" == *"gh pr create"* ]]
	[[ "$output" == *"! [remote rejected] stable"* ]]
	[ "$(gb_upref refs/heads/stable)" = "$before" ]
	[ "$(gb_mirref "$GB_MIRROR_ALICE" refs/heads/stable)" = "$before" ]
	[ "$(gb_up_receive)" = "$pushes" ]
}

@test "tags pushed through the bridge can be created but never moved or deleted; no branch HEAD" {
	gb_clone alice c
	gb_as alice c git tag gb-v1
	sgit alice c push origin gb-v1
	gb_status 0
	v1=$(gb_upref refs/tags/gb-v1)
	[ "$v1" = "$(gb_rev alice c HEAD)" ]
	pushes=$(gb_up_receive)
	gb_commit alice c tag-later.txt
	gb_as alice c git tag -f gb-v1
	sgit alice c push --force origin gb-v1
	gb_status 1
	[[ "$output" == *"refusing to move tag 'gb-v1': it is protected"* ]]
	sgit alice c push origin :refs/tags/gb-v1
	gb_status 1
	[[ "$output" == *"refusing to delete tag 'gb-v1'"* ]]
	sgit alice c push origin HEAD:refs/heads/HEAD
	gb_status 1
	[[ "$output" == *"refusing to update refs/heads/HEAD"* ]]
	[ "$(gb_upref refs/tags/gb-v1)" = "$v1" ]
	[ "$(gb_upref refs/heads/HEAD)" = none ]
	[ "$(gb_up_receive)" = "$pushes" ]
}

# --- refusals -----------------------------------------------------------------------

@test "a repository outside the session's list is refused, audited, and nothing reaches upstream" {
	nreq=$(gb_uplines)
	sgit alice . clone https://github.com/octo/other.git o
	# As GitHub's "repository not found": exit 128, and a message saying what to do.
	gb_status 128
	[[ "$output" == *"git access to octo/other is refused: this session may only reach octo/demo. Nothing was sent."* ]]
	[ ! -e "$AW/o" ]
	gb_audit_denied alice '"repository octo/other not allowed"'
	[ "$(gb_uplines)" = "$nreq" ]

	# Pushing and fetching there from a clone of an allowed repository: the same.
	gb_clone alice c
	gb_as alice c git remote set-url origin https://github.com/octo/other.git
	nreq=$(gb_uplines)
	before=$(git --git-dir="$GB_UP/root/octo/other.git" for-each-ref)
	sgit alice c push origin main:gb-other
	gb_status 128
	[[ "$output" == *"git access to octo/other is refused"* ]]
	sgit alice c fetch origin
	gb_status 128
	[[ "$output" == *"git access to octo/other is refused"* ]]
	sb_audit_grep 'r["event"] == "denied" and r.get("argv") == ["git-receive-pack", "https://github.com/octo/other.git"] and "not allowed" in r.get("reason", "")'
	[ "$(gb_uplines)" = "$nreq" ]
	[ "$(git --git-dir="$GB_UP/root/octo/other.git" for-each-ref)" = "$before" ]
	[ ! -e "$SB_DIR/state/mirrors/alice/github.com/octo/other.git" ]
}

@test "other hosts and malformed URLs are refused, audited, and nothing is sent anywhere" {
	nreq=$(gb_uplines)
	# Through an extra insteadOf of the sandbox's own, and spelled out by hand.
	sgit alice . ls-remote https://gitlab.com/x/y
	gb_status 128
	[[ "$output" == *"git access to gitlab.com is refused: the bridge serves no such host. Nothing was sent."* ]]
	gb_audit_denied alice '"host not served"'
	sgit alice . ls-remote shimbridge::https://evil.example/octo/demo
	gb_status 128
	[[ "$output" == *"git access to evil.example is refused: the bridge serves no such host"* ]]
	sgit alice . clone shimbridge::https://evil.example/octo/demo e
	gb_status 128
	[ ! -e "$AW/e" ]
	n=$(grep -c '"event":"denied"' "$SB_AUDIT")
	for url in \
		"shimbridge::https://github.com.evil.example/octo/demo" \
		"shimbridge::https://github.com:$GB_SPYPORT/octo/demo" \
		"shimbridge::https://x-access-token:guess@github.com/octo/demo" \
		"shimbridge::https://github.com@127.0.0.1:$GB_SPYPORT/octo/demo" \
		"shimbridge::https://github.com/octo/demo/../other" \
		"shimbridge::https://github.com/octo/demo/info/refs" \
		"shimbridge::https://github.com/octo/%64emo" \
		"shimbridge::http://127.0.0.1:$GB_UPPORT/octo/demo" \
		"shimbridge::file:///tmp/octo/demo" \
		"shimbridge::ext::sh -c touch% $GB_MK/ext-ran" \
		"shimbridge::ssh://git@evil.example/octo/demo"; do
		sgit alice . ls-remote "$url"
		[ "$status" -ne 0 ] || { echo "served: $url: $output"; return 1; }
		[[ "$output" == *"is refused"* ]] || { echo "no refusal for $url: $output"; return 1; }
		[[ "$output" != *refs/heads* ]]
		n=$((n + 1))
		[ "$(grep -c '"event":"denied"' "$SB_AUDIT")" -eq "$n" ] || { echo "not audited: $url"; return 1; }
	done
	[ ! -e "$GB_MK/ext-ran" ]
	[ "$(gb_uplines)" = "$nreq" ]
	[ ! -s "$GB_SPY/log" ]
	[ -z "$(ls "$SB_DIR/state/mirrors/alice" | grep -v '^github.com$')" ]
}

@test "a push touching .github/workflows is refused with the bridge's reason and never reaches upstream" {
	gb_clone alice c
	pushes=$(gb_up_receive)
	gb_as alice c git checkout -q -b gb-wf
	gb_commit alice c .github/workflows/ci.yml "on: push"
	gb_commit alice c harmless.txt
	sgit alice c push origin gb-wf
	gb_status 1
	[[ "$output" == *"changes '.github/workflows/ci.yml'"* ]]
	[[ "$output" == *"nothing was pushed upstream"* ]]
	[[ "$output" == *"! [remote rejected] gb-wf -> gb-wf"* ]]
	[ "$(gb_upref refs/heads/gb-wf)" = none ]
	[ "$(gb_mirref "$GB_MIRROR_ALICE" refs/heads/gb-wf)" = none ]
	[ "$(gb_up_receive)" = "$pushes" ]
	# On an existing branch too.
	sgit alice c push origin main:gb-wf2
	gb_status 0
	before=$(gb_upref refs/heads/gb-wf2)
	pushes=$(gb_up_receive)
	sgit alice c push origin gb-wf:gb-wf2
	gb_status 1
	[[ "$output" == *"changes '.github/workflows/ci.yml'"* ]]
	[ "$(gb_upref refs/heads/gb-wf2)" = "$before" ]
	[ "$(gb_up_receive)" = "$pushes" ]
	# Like every refusal, it is in the audit log as "denied", with the reason.
	gb_audit_denied alice '".github/workflows/ci.yml"'
}

# --- the sandbox repository cannot make the host run anything -------------------------

@test "an armed sandbox repository, config and environment make nothing run or connect on the host" {
	uid_alice=$(id -u "$SB_ALICE")
	# The trap works: a host git that read this config, as the runner, would trip it.
	st=$SB_DIR/selftest
	mkdir -p "$st"
	git init -q "$st"
	cat "$GB_ARM/config" >>"$st/.git/config"
	chown -R "$SB_RUNNER:" "$st"
	runuser -u "$SB_RUNNER" -- env -i HOME="$st" PATH=/usr/bin:/bin timeout 10 \
		git -C "$st" fetch -q "http://127.0.0.1:$GB_UPPORT/octo/demo.git" >/dev/null 2>&1 || true
	runuser -u "$SB_RUNNER" -- env -i HOME="$st" PATH=/usr/bin:/bin timeout 10 \
		git -C "$st" status >/dev/null 2>&1 || true
	[ -s "$GB_SPY/log" ]
	ls "$GB_MK"/mark."$(id -u "$SB_RUNNER")".fsmonitor.*
	[ -n "$(gb_host_markers alice)" ]
	rm -rf "$st" "${GB_MK:?}"/*
	: >"$GB_SPY/log"

	# Armed global config and environment for the sandbox's git, from the clone on.
	cp "$GB_W_alice/gitconfig" "$GB_W_alice/armed-gitconfig"
	git config -f "$GB_W_alice/armed-gitconfig" include.path "$GB_ARM/config"
	chown "$SB_ALICE:" "$GB_W_alice/armed-gitconfig"
	gb_arm_env
	gb_clone alice c
	# Armed repository: its own config, hooks, attributes and submodule URLs.
	gb_as alice c sh -c 'cat "$1" >>.git/config && cp "$2"/* .git/hooks/' _ "$GB_ARM/config" "$GB_ARM/hooks"
	gb_as alice c git config remote.origin.proxy "http://127.0.0.1:$GB_SPYPORT"
	gb_as alice c git config remote.origin.uploadpack "$GB_ARM/servpath"
	gb_as alice c git config remote.origin.receivepack "$GB_ARM/servpath"
	gb_as alice c sh -c 'printf "* filter=x\n*.c diff=ext\n" >.gitattributes &&
		printf "[submodule \"s\"]\n\tpath = s\n\turl = http://127.0.0.1:%s/s.git\n" "$1" >.gitmodules' _ "$GB_SPYPORT"
	gb_as alice c git checkout -q -b gb-armed
	gb_as alice c git add .gitattributes .gitmodules
	gb_commit alice c armed.c

	new=$(gb_upstream_commit armed-news.txt)
	sgit alice c fetch origin
	gb_status 0
	[ "$(gb_rev alice c origin/main)" = "$new" ]
	sgit alice c pull --no-edit origin main
	gb_status 0
	sgit alice c ls-remote origin
	gb_status 0
	sgit alice c push origin gb-armed
	gb_status 0
	[ "$(gb_upref refs/heads/gb-armed)" = "$(gb_rev alice c HEAD)" ]
	gb_commit alice c armed2.c
	sgit alice c push origin gb-armed
	gb_status 0
	[ "$(gb_upref refs/heads/gb-armed)" = "$(gb_rev alice c HEAD)" ]

	# The sandbox's own git was armed: its hooks and filter ran, as alice ...
	ls "$GB_MK/mark.$uid_alice".hook-pre-push.*
	ls "$GB_MK/mark.$uid_alice".hook-reference-transaction.*
	ls "$GB_MK/mark.$uid_alice".filter-clean.*
	# ... but nothing ran as the runner or root, nothing connected to the trap, and the
	# token is nowhere alice can read, nor in what a credential helper was given.
	run gb_host_markers alice
	[ -z "$output" ] || { echo "ran on the host: $output"; return 1; }
	[ ! -s "$GB_SPY/log" ] || { echo "connections to the trap:"; cat "$GB_SPY/log"; return 1; }
	! grep -rqsF "$GB_TOKEN" "$GB_MK" || false
	run gb_token_visible alice
	[ -z "$output" ] || { echo "token readable by alice in: $output"; return 1; }
	# The mirror took none of it.
	! grep -qF "$GB_ARM" "$GB_MIRROR_ALICE/config" || false
	[ "$(git -c safe.directory='*' --git-dir="$GB_MIRROR_ALICE" config transfer.fsckObjects)" = true ]
}

@test "the token is in no output and no trace file, with every git tracing variable set in the sandbox" {
	td=$AW/trace
	runuser -u "$SB_ALICE" -- mkdir -p "$td"
	tr=(GIT_TRACE=1 GIT_TRACE_PACKET=1 GIT_TRACE_CURL=1 GIT_CURL_VERBOSE=1 GIT_TRACE_REDACT=0
		GIT_TRACE_SETUP=1 GIT_TRACE_PERFORMANCE=1 GIT_TRACE_SHALLOW=1 GIT_TRACE_REFS=1
		GIT_TRACE_FSMONITOR=1 GIT_TRACE_PACKFILE="$td/packfile" GIT_TRACE2="$td/t2"
		GIT_TRACE2_EVENT="$td/t2-event" GIT_TRACE2_PERF="$td/t2-perf" GIT_TRACE2_BRIEF=0
		GIT_TRACE2_CONFIG_PARAMS='*' GIT_TRACE2_ENV_VARS='*'
		GIT_PROTOCOL=version=2 GIT_REDACT_COOKIES=)
	GB_ENV=("${tr[@]}")
	gb_clone alice c
	GB_ENV=()
	gb_as alice c git checkout -q -b gb-trace
	gb_commit alice c traced.txt
	GB_ENV=("${tr[@]}")
	sgit alice c push origin gb-trace
	gb_status 0
	GB_ENV=()
	[ "$(gb_upref refs/heads/gb-trace)" = "$(gb_rev alice c HEAD)" ]
	new=$(gb_upstream_commit traced-news.txt)
	GB_ENV=("${tr[@]}")
	sgit alice c fetch origin
	gb_status 0
	sgit alice c ls-remote origin
	gb_status 0
	GB_ENV=()
	[ "$(gb_rev alice c origin/main)" = "$new" ]
	# The tracing was on: packets and trace2 events were written.
	grep -qE 'packet: +(clone|fetch|push|git)< ' "$GB_OUT"
	grep -q '"event":"start"' "$td/t2-event"
	[ -s "$td/t2" ] && [ -s "$td/t2-perf" ]
	# No token, no Basic credential made from it, no header carrying either, and nothing
	# that the bridge had to redact (so no trace setting crossed to the host side).
	b64=$(printf 'x-access-token:%s' "$GB_TOKEN" | base64 -w0)
	for f in "$GB_OUT" "$td"/*; do
		! grep -qaF -e "$GB_TOKEN" -e "$b64" "$f" || { echo "token in $f"; return 1; }
		! grep -qai -e 'authorization:' -e '\[REDACTED\]' "$f" || { echo "credential trace in $f"; return 1; }
	done
	run gb_token_visible alice
	[ -z "$output" ] || { echo "token readable by alice in: $output"; return 1; }
}

# --- concurrency and interruption ----------------------------------------------------

@test "concurrent pushes from two sessions and within one session all land; the mirrors stay clean" {
	gb_clone alice a1
	gb_clone alice a2
	gb_clone bob b1
	gb_as alice a1 git checkout -q -b gb-conc-a1
	gb_as alice a2 git checkout -q -b gb-conc-a2
	gb_as bob b1 git checkout -q -b gb-conc-b1
	for i in 1 2 3; do
		gb_commit alice a1 "a1/$i"
		gb_commit alice a2 "a2/$i"
		gb_commit bob b1 "b1/$i"
	done
	pids=()
	for x in alice:a1 alice:a2 bob:b1; do
		u=${x%%:*} d=${x#*:}
		(gb_as "$u" "$d" git push origin "gb-conc-$d" >"$SB_DIR/out/conc-$d" 2>&1
		 echo $? >"$SB_DIR/out/conc-$d.rc") 3>&- &
		pids+=($!)
	done
	wait "${pids[@]}"
	for d in a1 a2 b1; do
		cat "$SB_DIR/out/conc-$d" >>"$GB_OUT"
		[ "$(cat "$SB_DIR/out/conc-$d.rc")" = 0 ] || { echo "push $d:"; cat "$SB_DIR/out/conc-$d"; return 1; }
	done
	[ "$(gb_upref refs/heads/gb-conc-a1)" = "$(gb_rev alice a1 HEAD)" ]
	[ "$(gb_upref refs/heads/gb-conc-a2)" = "$(gb_rev alice a2 HEAD)" ]
	[ "$(gb_upref refs/heads/gb-conc-b1)" = "$(gb_rev bob b1 HEAD)" ]
	[ "$(gb_mirref "$GB_MIRROR_ALICE" refs/heads/gb-conc-a1)" = "$(gb_rev alice a1 HEAD)" ]
	[ "$(gb_mirref "$GB_MIRROR_ALICE" refs/heads/gb-conc-a2)" = "$(gb_rev alice a2 HEAD)" ]
	[ "$(gb_mirref "$GB_MIRROR_BOB" refs/heads/gb-conc-b1)" = "$(gb_rev bob b1 HEAD)" ]
	gb_fsck "$GB_MIRROR_ALICE"
	gb_fsck "$GB_MIRROR_BOB"
	git --git-dir="$GB_UPREPO" fsck --strict --no-dangling --no-progress
	# Each session fetches what the other pushed.
	sgit bob b1 fetch origin
	gb_status 0
	[ "$(gb_rev bob b1 origin/gb-conc-a2)" = "$(gb_rev alice a2 HEAD)" ]
}

@test "a sandbox git killed mid-push leaves a consistent mirror, and the next push works" {
	gb_clone alice c
	gb_as alice c git checkout -q -b gb-kill
	gb_as alice c sh -c 'head -c 24000000 /dev/urandom >big.bin && git add big.bin && git commit -q -m big'
	(gb_as alice c git push origin gb-kill >"$SB_DIR/out/kill" 2>&1) 3>&- &
	job=$!
	# Mid-push: the mirror's receive-pack is already taking the pack in.
	sb_wait_for 20 pgrep -u "$SB_RUNNER" -f 'index-pack|unpack-objects' >/dev/null
	victims=$(gb_descendants "$job" | while read -r p; do
		if [ "$(stat -c %U "/proc/$p" 2>/dev/null)" = "$SB_ALICE" ]; then echo "$p"; fi; done)
	[ -n "$victims" ]
	kill -KILL $victims 2>/dev/null || true
	wait "$job" || true
	cat "$SB_DIR/out/kill" >>"$GB_OUT"
	# The runner side is torn down, nothing reached upstream, the mirror is consistent.
	sb_wait_for 15 gb_no_runner
	[ "$(gb_upref refs/heads/gb-kill)" = none ]
	[ "$(gb_mirref "$GB_MIRROR_ALICE" refs/heads/gb-kill)" = none ]
	gb_fsck "$GB_MIRROR_ALICE"
	# The daemon writes the call's "done" record once it has torn the call down: wait for
	# it. (The kill may land after the whole pack went in, while the mirror still checks
	# it: bytes_in is then the whole pack.)
	sb_wait_for 10 sb_audit_grep 'r["event"] == "done" and r.get("session") == "alice" and r.get("argv", [""])[0] == "git-receive-pack" and r.get("killed") == "peer-gone" and r.get("bytes_in", 0) > 0' || {
		echo "no done record of the killed push; the last ones:" >&2
		grep '"event":"done"' "$SB_AUDIT" | tail -n 3 >&2
		return 1
	}
	# The killed receive-pack left its quarantine (the pack so far) in the mirror; once
	# stale it goes at the next call on that mirror.
	q=$(compgen -G "$GB_MIRROR_ALICE/objects/tmp_objdir-*" || true)
	[ -n "$q" ]
	find "$q" -exec touch -h -d '10 minutes ago' {} +
	# And the next push works.
	gb_as alice c git checkout -q -b gb-after-kill main
	gb_commit alice c after-kill.txt
	sgit alice c push origin gb-after-kill
	gb_status 0
	[ "$(gb_upref refs/heads/gb-after-kill)" = "$(gb_rev alice c HEAD)" ]
	gb_fsck "$GB_MIRROR_ALICE"
	[ ! -e "$q" ]
}

# --- administration -----------------------------------------------------------------

@test "shimbridge mirror list shows each session's mirror" {
	adm=$SB_BUILD/shimbridge
	[ -x "$adm" ] || adm=$SB_ROOT/build/shimbridge
	[ -x "$adm" ] || skip "no admin CLI (build/shimbridge) was built"
	"$adm" --help 2>&1 | grep -q 'mirror list' || skip "this shimbridge has no 'mirror list' command"
	gb_clone alice c
	gb_clone bob c
	run "$adm" -c "$SB_CONFIG" mirror list
	gb_status 0
	[[ "$output" == *SESSION*HOST*REPOSITORY* ]]
	echo "$output" | grep -qE '^alice +github\.com +octo/demo '
	echo "$output" | grep -qE '^bob +github\.com +octo/demo '
	run "$adm" -c "$SB_CONFIG" mirror list --session bob
	gb_status 0
	echo "$output" | grep -qE '^bob +github\.com +octo/demo '
	! echo "$output" | grep -qE '^alice ' || false
}

@test "git works whatever the token looks like: one that begins with 0000, the bytes of a flush packet" {
	# zero.example's token starts with the pkt-line flush "0000" that ends every message
	# of the protocol: held back as a possible start of the token, it stalls git.
	GB_T=15
	sgit alice . ls-remote https://zero.example/octo/demo.git
	gb_status 0
	[[ "$output" == *$'\trefs/heads/main'* ]]
	sgit alice . clone https://zero.example/octo/demo.git z
	gb_status 0
	gb_as alice z git checkout -q -b gb-zero
	gb_commit alice z zero.txt
	sgit alice z push origin gb-zero
	gb_status 0
	[ "$(gb_upref refs/heads/gb-zero)" = "$(gb_rev alice z HEAD)" ]
	! grep -qF "$GB_ZTOKEN" "$GB_OUT" || false
}

@test "upstream's messages reach the sandbox, but not the token they carry, in any encoding" {
	# A misbehaving upstream prints the token, the Basic credential and their encodings
	# while refusing a push (tests/fixtures/upstream-hooks: branches upstream-reject*).
	git --git-dir="$GB_UPREPO" config core.hooksPath "$SB_FIXTURES/upstream-hooks"
	b64=$(printf '%s' "$GB_TOKEN" | base64 -w0)
	basic=$(printf 'x-access-token:%s' "$GB_TOKEN" | base64 -w0)
	hex=$(printf '%s' "$GB_TOKEN" | od -An -tx1 | tr -d ' \n')
	printf 'token %s\nbase64 %s\nauthorization: Basic %s\nhex %s\n' \
		"$GB_TOKEN" "$b64" "$basic" "$hex" >"$GB_UPREPO/echo-message"
	gb_clone alice c
	gb_as alice c git checkout -q -b upstream-reject-gb
	gb_commit alice c rejected.txt
	sgit alice c push origin upstream-reject-gb
	rm -f "$GB_UPREPO/echo-message"
	git --git-dir="$GB_UPREPO" config --unset core.hooksPath
	gb_status 1
	[[ "$output" == *"GH006: Protected branch update failed for refs/heads/upstream-reject-gb."* ]]
	[ "$(gb_upref refs/heads/upstream-reject-gb)" = none ]
	leaked=
	[[ "$output" != *"$GB_TOKEN"* ]] || leaked+=" plain"
	[[ "$output" != *"$b64"* ]] || leaked+=" base64"
	[[ "$output" != *"$basic"* ]] || leaked+=" basic-credential"
	[[ "$output" != *"$hex"* ]] || leaked+=" hex"
	[ -z "$leaked" ] || { echo "the token reached the sandbox's output, encoded as:$leaked"; return 1; }
}

# --- approval of pushes (git.ask_branches) -------------------------------------------

@test "ask: a push to an ask branch waits with one line for the agent; approved, it lands upstream" {
	gb_askbranch alice c release/1.0
	pushes=$(gb_up_receive)
	gb_bgpush p1 alice c push origin release/1.0
	id=$(gb_pending_id "release/1.0")
	sb_wait_for 10 grep -q "waiting for the operator" "$SB_DIR/out/p1.log"
	grep -qxF "shimbridge: waiting for the operator to approve request $id: git push https://github.com/octo/demo release/1.0" "$SB_DIR/out/p1.log"
	run -0 adm pending
	[[ $output == *"alice"*"git push https://github.com/octo/demo release/1.0"*"git.ask_branches"* ]]
	# Nothing went upstream while it waits.
	[ "$(gb_upref refs/heads/release/1.0)" = none ]
	[ "$(gb_up_receive)" = "$pushes" ]
	run -0 adm approve "$id"
	[ "$output" = "approved request $id" ]
	gb_bgwait p1
	gb_status 0
	[[ "$output" == *"* [new branch]"*"release/1.0 -> release/1.0"* ]]
	[ "$(gb_upref refs/heads/release/1.0)" = "$(gb_rev alice c HEAD)" ]
	sb_audit_grep "r['event'] == 'pending' and r['request'] == $id and r['rule'] == 'git.ask_branches' and r['session'] == 'alice' and r['tool'] == 'git'"
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r['decision'] == 'approve' and r['decided_by'] == 'operator' and r['operator_uid'] == 0 and r['session'] == 'alice'"
	sb_audit_grep "r['event'] == 'git-phases' and 'approved' in r['ms'] and r['ms']['policy'] <= r['ms']['approved'] <= r['ms']['upstream']"
	run -0 adm pending
	[ "$output" = "no requests wait for approval" ]
}

@test "ask: denied with a reason, the agent sees it in one structured line; git reports the push rejected; upstream unchanged" {
	gb_askbranch alice c release/deny
	pushes=$(gb_up_receive)
	gb_bgpush p2 alice c push origin release/deny
	id=$(gb_pending_id "release/deny")
	run -0 adm deny "$id" --why "release branches are cut by the release manager"
	gb_bgwait p2
	gb_status 1
	[[ "$output" == *"shimbridge: refused: git push https://github.com/octo/demo release/deny (request $id): the operator denied it (release branches are cut by the release manager); do not retry it unchanged; change the approach or ask the operator"* ]]
	[[ "$output" == *"! [remote rejected] release/deny -> release/deny"* ]]
	[[ "$output" == *"nothing was pushed upstream"* ]]
	[ "$(gb_upref refs/heads/release/deny)" = none ]
	[ "$(gb_mirref "$GB_MIRROR_ALICE" refs/heads/release/deny)" = none ]
	[ "$(gb_up_receive)" = "$pushes" ]
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r['decision'] == 'deny' and r['decided_by'] == 'operator' and r['operator_uid'] == 0 and 'release manager' in r['reason']"
	gb_audit_denied alice '"not approved (operator)"'
}

@test "ask: no answer in time is a refusal, and the call's own time limit waits meanwhile" {
	gb_askbranch alice c release/late
	cp "$SB_CONFIG" "$SB_DIR/out/config.json"
	sb_json_edit "$SB_CONFIG" 'c["git"]["ask_timeout"] = 10; c["git"]["timeout"] = 6'
	sb_reload | grep -q '"ok":true'
	gb_bgpush p3 alice c push origin release/late
	id=$(gb_pending_id "release/late")
	gb_bgwait p3
	cp "$SB_DIR/out/config.json" "$SB_CONFIG"
	sb_reload | grep -q '"ok":true'
	gb_status 1
	# Refused by the approval's timeout (10 s), not stopped by git.timeout (6 s, which
	# must leave the push's own work before the question time under load).
	[[ "$output" == *"shimbridge: refused: git push https://github.com/octo/demo release/late (request $id): nobody approved it within 10 seconds; run it again when the operator can answer"* ]]
	[[ "$output" != *"time limit"* ]]
	[ "$(gb_upref refs/heads/release/late)" = none ]
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r['decided_by'] == 'timeout' and r['decision'] == 'deny'"
	run -1 sb_audit_grep "r['event'] == 'done' and r.get('killed') == 'timeout' and r.get('session') == 'alice'"
}

@test "ask: --for approves identical pushes of that session; another branch, or another session, still asks" {
	gb_askbranch alice c release/for
	gb_bgpush p4 alice c push origin release/for
	id=$(gb_pending_id "release/for")
	run -0 adm approve "$id" --for 10m
	gb_bgwait p4
	gb_status 0
	# The same push (new commits, same branch): no wait, no line.
	gb_commit alice c "for-again.txt"
	sgit alice c push origin release/for
	gb_status 0
	[[ "$output" != *"waiting for the operator"* ]]
	[ "$(gb_upref refs/heads/release/for)" = "$(gb_rev alice c HEAD)" ]
	sb_audit_grep "r['event'] == 'approval' and r['decided_by'] == 'cache --for' and r['session'] == 'alice' and r['rule'] == 'git.ask_branches'"
	# Another branch of the same session still asks.
	gb_as alice c git checkout -q -b release/for2
	gb_bgpush p5 alice c push origin release/for2
	id=$(gb_pending_id "release/for2")
	adm deny "$id"
	gb_bgwait p5
	gb_status 1
	# Bob's identical push still asks.
	gb_clone bob c
	gb_as bob c git checkout -q -b release/for origin/release/for
	gb_commit bob c "for-bob.txt"
	gb_bgpush p6 bob c push origin release/for
	id=$(gb_pending_id "release/for")
	adm deny "$id" --why "bob may not"
	gb_bgwait p6
	gb_status 1
	[[ "$output" == *"(bob may not)"* ]]
}

@test "ask: a push to another branch does not ask, and a push the policy refuses is refused without asking" {
	gb_askbranch alice c gb-noask
	sgit alice c push origin gb-noask
	gb_status 0
	[[ "$output" != *"waiting for the operator"* ]]
	[ "$(gb_upref refs/heads/gb-noask)" = "$(gb_rev alice c HEAD)" ]
	# release/frozen matches release/* but takes no direct push: refused at once.
	gb_as alice c git checkout -q -b release/frozen
	pushes=$(gb_up_receive)
	sgit alice c push origin release/frozen
	gb_status 1
	[[ "$output" == *"refusing to push to branch 'release/frozen'"* ]]
	[[ "$output" != *"waiting for the operator"* ]]
	[ "$(gb_up_receive)" = "$pushes" ]
	run -1 sb_audit_grep "r['event'] == 'pending' and 'gb-noask' in r.get('command', '') + str(r)"
	run -1 sb_audit_grep "r['event'] == 'pending' and 'release/frozen' in str(r)"
	run -0 adm pending
	[ "$output" = "no requests wait for approval" ]
}

@test "ask: the agent's Ctrl-C cancels the waiting push; a reload that drops the rule refuses it" {
	gb_askbranch alice c release/intr
	gb_bgpush p7 alice c push origin release/intr
	id=$(gb_pending_id "release/intr")
	pid=$(pgrep -u "$SB_ALICE" -f -- "git-remote-shimbridge" | head -n 1)
	[ -n "$pid" ]
	kill -INT "$pid"
	gb_bgwait p7
	[ "$status" -ne 0 ]
	[[ "$output" == *"shimbridge: refused: git push https://github.com/octo/demo release/intr (request $id): interrupted while waiting for approval; run it again if it is still needed"* ]]
	[ "$(gb_upref refs/heads/release/intr)" = none ]
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r['decided_by'] == 'cancelled'"
	# A reload that no longer asks for the branch refuses the waiting push.
	gb_bgpush p8 alice c push origin release/intr
	id=$(gb_pending_id "release/intr")
	cp "$SB_CONFIG" "$SB_DIR/out/config.json"
	sb_json_edit "$SB_CONFIG" 'c["git"]["ask_branches"] = ["hotfix/*"]'
	sb_reload | grep -q '"ok":true'
	gb_bgwait p8
	cp "$SB_DIR/out/config.json" "$SB_CONFIG"
	sb_reload | grep -q '"ok":true'
	gb_status 1
	[[ "$output" == *"(request $id): the bridge's configuration was reloaded and git.ask_branches no longer names branch release/intr; run it again"* ]]
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r['decided_by'] == 'reload'"
	[ "$(gb_upref refs/heads/release/intr)" = none ]
}

@test "ask: the agent going away drops the waiting push; explain and list say a push there asks" {
	gb_askbranch alice c release/gone
	gb_bgpush p9 alice c push origin release/gone
	id=$(gb_pending_id "release/gone")
	pkill -KILL -u "$SB_ALICE" -f -- "git-remote-shimbridge"
	sb_wait_for 20 eval '! gb_has_pending release/gone'
	gb_bgwait p9
	[ "$status" -ne 0 ]
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r['decided_by'] == 'cancelled' and r['reason'] == 'the connection ended while waiting'"
	[ "$(gb_upref refs/heads/release/gone)" = none ]
	run -0 adm explain --session alice -- git push https://github.com/octo/demo release/2.0
	[[ $output == *"verdict:  ask"* ]]
	[[ $output == *"rule:     git.ask_branches"* ]]
	[[ $output == *"release/2.0"* ]]
	run -0 adm explain --session alice -- git push https://github.com/octo/demo gb-x
	[[ $output == *"verdict:  allow"* ]]
	run -0 gb_as alice . shimbridge list
	[[ $output == *"a push to release/* waits for the operator's approval"* ]]
}

@test "ask: the approver command decides a push too, as its own user" {
	local approver=$SB_LANE-approver
	id "$approver" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$approver"
	mkdir -p "$SB_DIR/tools"
	install -m 0755 "$SB_FIXTURES/tools/approver.sh" "$SB_DIR/tools/"
	cp "$SB_CONFIG" "$SB_DIR/out/config.json"
	sb_json_edit "$SB_CONFIG" 'c["approval"] = {"command": ["'"$SB_DIR"'/tools/approver.sh"], "user": "'"$approver"'", "command_timeout": 10}'
	sb_reload | grep -q '"ok":true'
	gb_askbranch alice c release/ok
	sgit alice c push origin release/ok
	gb_status 0
	[[ "$output" == *"waiting for the operator"* ]]
	[ "$(gb_upref refs/heads/release/ok)" = "$(gb_rev alice c HEAD)" ]
	gb_as alice c git checkout -q -b release/no
	sgit alice c push origin release/no
	cp "$SB_DIR/out/config.json" "$SB_CONFIG"
	sb_reload | grep -q '"ok":true'
	gb_status 1
	[[ "$output" == *"the approver denied it (not this release)"* ]]
	[ "$(gb_upref refs/heads/release/no)" = none ]
	sb_audit_grep "r['event'] == 'approval' and r['decided_by'] == 'approver' and r['decision'] == 'approve' and r['reason'] == 'release ok'"
	sb_audit_grep "r['event'] == 'approval' and r['decided_by'] == 'approver' and r['decision'] == 'deny'"
	sb_wait_for 5 eval "! pgrep -u $approver >/dev/null"
	userdel "$approver" 2>/dev/null || true
}

# Last: it restarts the daemon.
@test "ask: the daemon stopping refuses a waiting push; nothing reaches upstream" {
	gb_askbranch alice c release/stop
	gb_bgpush p10 alice c push origin release/stop
	id=$(gb_pending_id "release/stop")
	kill -TERM "$SB_PID"
	sb_wait_for 20 eval "! kill -0 $SB_PID 2>/dev/null"
	gb_bgwait p10
	[ "$status" -ne 0 ]
	[ "$(gb_upref refs/heads/release/stop)" = none ]
	sb_audit_grep "r['event'] == 'approval' and r['request'] == $id and r['decision'] == 'deny' and r['decided_by'] == 'cancelled'"
	! grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$SB_DIR/log/daemon.log" || false
	sb_start 3>&-
	sb_keep "$SB_PID"
	echo "$SB_PID" >"$SB_DIR/daemon.pid"
	gb_canary
}

# Restart the daemon with setpriv's --bounding-set $1 (empty: plainly), for later tests too.
gb_restart_caps() {
	sb_stop
	if [ -n "$1" ]; then
		SB_DAEMON_PREFIX="setpriv --bounding-set=$1" sb_start 3>&-
	else
		sb_start 3>&-
	fi
	sb_keep "$SB_PID"
	echo "$SB_PID" >"$SB_DIR/daemon.pid"
}

@test "with only the systemd unit's capabilities, pushes and fetches work (the git jail's network namespace)" {
	command -v setpriv >/dev/null || skip "setpriv (util-linux) is missing"
	gb_restart_caps "$(sb_unit_caps)"
	gb_clone alice c
	gb_as alice c git checkout -q -b gb-caps
	gb_commit alice c src/caps.c
	sgit alice c push origin gb-caps
	gb_status 0 || { tail -n 5 "$SB_DIR/log/daemon.log" >&2; return 1; }
	[ "$(gb_upref refs/heads/gb-caps)" = "$(gb_rev alice c HEAD)" ]
	sgit alice c fetch origin
	gb_status 0
	# The negative control: without CAP_NET_ADMIN the git jail's loopback stays down
	# and the call is refused; nothing reaches upstream.
	gb_restart_caps "$(sb_unit_caps net_admin)"
	gb_as alice c git checkout -q -b gb-nocaps
	gb_commit alice c src/nocaps.c
	sgit alice c push origin gb-nocaps
	[ "$status" -ne 0 ]
	[ "$(gb_upref refs/heads/gb-nocaps)" = none ]
	gb_restart_caps ""
	gb_canary
}

@test "a shimbridge-git that skips its hook still cannot push what the policy protects: the daemon reads each push's ref updates" {
	local evil=$SB_DIR/libexec/evil-git main0 stable0 r
	gb_clone alice ev
	[ "$(gb_upref refs/heads/stable)" != none ] ||
		git --git-dir="$GB_UPREPO" update-ref refs/heads/stable refs/heads/main
	main0=$(gb_upref refs/heads/main)
	stable0=$(gb_upref refs/heads/stable)
	# A helper that pushes straight through the injector, as a shimbridge-git made
	# to skip its mirror's hook could (docs/THREATS.md: host tools are not trusted).
	cat >"$evil" <<'SH'
#!/bin/sh
u=$SHIMBRIDGE_UPSTREAM
cd "$HOME" && git init -q evil && cd evil || exit 1
git fetch -q "$u" main || { echo "evil: fetch failed" >&2; exit 1; }
c=$(git -c user.name=Evil -c user.email=evil@example.com commit-tree -p FETCH_HEAD \
    -m evil 'FETCH_HEAD^{tree}') || exit 1
try() { git push -q "$u" "$1" >/dev/null 2>&1; echo "evil: $1 $?" >&2; }
try "$c:refs/heads/gb-evil-ok"
try "$c:refs/heads/main"
try "$c:refs/heads/release/frozen"
try "$c:refs/heads/release/evil"
try ":refs/heads/stable"
try "FETCH_HEAD:refs/tags/gb-evil-t"
try "+$c:refs/tags/gb-evil-t"
try "$c:refs/heads/HEAD"
try "$c:refs/notes/evil"
exit 1
SH
	chmod 755 "$evil"
	sb_json_edit "$SB_CONFIG" "c['git']['helper'] = '$evil'"
	sb_reload | grep -q '"ok":true'
	gb_as alice ev git checkout -q -b gb-evil-trigger
	sgit alice ev push origin gb-evil-trigger
	sb_json_edit "$SB_CONFIG" "c['git']['helper'] = '$SB_DIR/libexec/shimbridge-git'"
	sb_reload | grep -q '"ok":true'
	[ "$status" -ne 0 ]
	# The control: an ordinary branch and a new tag go through, so the helper can push.
	r=$(gb_upref refs/heads/gb-evil-ok)
	[ "$r" != none ] && [ "$r" != "$main0" ]
	[ "$(gb_upref refs/tags/gb-evil-t)" = "$main0" ]
	# Nothing the policy protects moved.
	[ "$(gb_upref refs/heads/main)" = "$main0" ]
	[ "$(gb_upref refs/heads/stable)" = "$stable0" ]
	for r in refs/heads/release/frozen refs/heads/release/evil refs/heads/HEAD refs/notes/evil; do
		[ "$(gb_upref "$r")" = none ] || { echo "$r reached upstream" >&2; return 1; }
	done
	# Each refusal is the daemon's, in the audit, with its reason.
	for r in "branch main is upstream's default branch and takes no direct push" \
	    "branch release/frozen takes no direct push" \
	    "a push to branch release/evil needs approval" \
	    "branch stable may not be deleted" \
	    "tag gb-evil-t is protected" \
	    "a branch named HEAD is refused" \
	    "refs/notes/evil is neither a branch nor a tag"; do
		sb_audit_grep "r['event'] == 'http' and r.get('status') == 403 and \"$r\" in r.get('refused', '')" >/dev/null ||
			{ echo "no refusal: $r" >&2; return 1; }
	done
}

@test "a push larger than git's post buffer (sent chunked) is read, checked and relayed whole" {
	gb_clone alice big
	gb_as alice big git checkout -q -b gb-big
	gb_as alice big sh -c 'head -c 3000000 /dev/urandom >blob.bin && git add blob.bin &&
		git commit -q -m "a 3 MB blob"'
	sgit alice big push origin gb-big
	gb_status 0
	[ "$(gb_upref refs/heads/gb-big)" = "$(gb_rev alice big HEAD)" ]
	sb_audit_grep 'r["event"] == "http" and r.get("status") == 200 and r.get("request", "").startswith("POST") and r.get("request", "").endswith("git-receive-pack") and r.get("bytes_up", 0) > 3000000' >/dev/null
	# A pack over git's post buffer goes by git push itself (chunked to the injector),
	# not by the hook's own request, which is for what fits in one buffer.
	gb_up_posts | tail -n 1 | grep -q '"agent": "git/2\.'
}

@test "a push goes upstream as one request of the hook's own; upstream's refusal still says why, per branch" {
	gb_clone alice own
	gb_as alice own git checkout -q -b gb-own
	# 200 KB that do not compress: a pack that carried them again would show.
	gb_as alice own sh -c 'head -c 200000 /dev/urandom >own.bin && git add own.bin &&
		git commit -q -m "200 KB"'
	nreq=$(gb_uplines)
	sgit alice own push origin gb-own
	gb_status 0
	[ "$(gb_upref refs/heads/gb-own)" = "$(gb_rev alice own HEAD)" ]
	[ "$(gb_mirref "$GB_MIRROR_ALICE" refs/heads/gb-own)" = "$(gb_rev alice own HEAD)" ]
	# One POST, shimbridge-git's (no git push: no git/2.x agent), and the advertisement
	# only as the bridge prefetched it as the call began.
	tail -n +"$((nreq + 1))" "$GB_UP/requests.log" >"$SB_DIR/out/own.log"
	[ "$(grep -c '"method": "POST", "path": "[^"]*/git-receive-pack"' "$SB_DIR/out/own.log")" = 1 ]
	grep '"method": "POST", "path": "[^"]*/git-receive-pack"' "$SB_DIR/out/own.log" |
		grep -q '"agent": "git/shimbridge-[^"]*".*"chunked": false'
	[ "$(grep -c 'service=git-receive-pack' "$SB_DIR/out/own.log")" = 1 ]
	! grep -q '"agent": "git/2\.' "$SB_DIR/out/own.log" || false

	# A new branch's pack holds the new commit, not the history upstream has (own.bin).
	gb_as alice own git checkout -q -b gb-own-2
	gb_commit alice own own2.txt
	sgit alice own push origin gb-own-2
	gb_status 0
	[ "$(gb_upref refs/heads/gb-own-2)" = "$(gb_rev alice own HEAD)" ]
	sb_audit_grep 'r["event"] == "http" and r.get("request", "").startswith("POST") and r.get("request", "").endswith("git-receive-pack")' |
		tail -n 1 | grep -q '"status": *200'
	sb_audit_grep 'r["event"] == "http" and r.get("request", "").startswith("POST") and r.get("request", "").endswith("git-receive-pack")' |
		tail -n 1 | "$PY" -c 'import json, sys; r = json.loads(sys.stdin.read()); sys.exit(0 if r["bytes_up"] < 2000 else 1)'

	# Upstream refuses (tests/fixtures/upstream-hooks): its words and the refused branch.
	git --git-dir="$GB_UPREPO" config core.hooksPath "$SB_FIXTURES/upstream-hooks"
	gb_as alice own git checkout -q -b upstream-reject-own
	gb_commit alice own rejected-own.txt
	sgit alice own push origin upstream-reject-own
	git --git-dir="$GB_UPREPO" config --unset core.hooksPath
	gb_status 1
	[[ "$output" == *"shimbridge: upstream refused the push, so nothing was changed (not here either)."* ]]
	[[ "$output" == *"shimbridge:   ! [remote rejected] upstream-reject-own (pre-receive hook declined)"* ]]
	[[ "$output" == *"shimbridge: upstream: GH006: Protected branch update failed for refs/heads/upstream-reject-own."* ]]
	[ "$(gb_upref refs/heads/upstream-reject-own)" = none ]
	[ "$(gb_mirref "$GB_MIRROR_ALICE" refs/heads/upstream-reject-own)" = none ]
}
