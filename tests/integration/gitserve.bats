#!/usr/bin/env bats
# shimbridge-git driven directly (no daemon) by a real git client through git's ext::
# transport, against a loopback smart-HTTP upstream (tests/fixtures/githttp.py) that
# needs the token on every request. Each test gets its own upstream repository,
# mirror and wrapper; the server is shared.
#
# The wrapper plays the daemon: `env -i` and exactly the documented variables.
# Note: bash's errexit ignores "! cmd", so negations are written "! cmd || false".

bats_require_minimum_version 1.5.0
load lib	# staging, sb_bg, sb_reap; nothing of the bridge is used here

setup_file() {
	export ROOT_DIR BIN T TOKEN PORT FIXTURES
	ROOT_DIR="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
	# The Makefile target needs all of common/ to build; fall back to the file set this
	# program actually uses.
	if [ -z "${SHIMBRIDGE_GIT_BIN:-}" ] &&
	    ! make -s -C "$ROOT_DIR" build/shimbridge-git >/dev/null 2>&1; then
		mkdir -p "$ROOT_DIR/build"
		gcc -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -Wshadow \
		    -Wstrict-prototypes -Wmissing-prototypes -I"$ROOT_DIR/common" \
		    "$ROOT_DIR"/gitserve/*.c "$ROOT_DIR/common/util.c" -o "$ROOT_DIR/build/shimbridge-git"
	fi
	# Staged copies (the checkout may be unreachable for "nobody"): again, after a build.
	sb_stage
	FIXTURES=$SB_FIXTURES
	# SHIMBRIDGE_GIT_BIN=/abs/build/san/shimbridge-git runs the suite on another build.
	BIN="${SHIMBRIDGE_GIT_BIN:-$SB_STAGE/build/shimbridge-git}"
	T="$(mktemp -d /tmp/gitserve-bats.XXXXXX)"
	_sb_record "dir $T"
	chmod 755 "$T"
	TOKEN="ghs_TeSt$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
	mkdir -p "$T/root/owner"
	(umask 077 && printf '%s\n' "$TOKEN" >"$T/token")
	sb_bg /usr/bin/python3 "$FIXTURES/githttp.py" --root "$T/root" --token-file "$T/token" \
	    --port-file "$T/port" --log "$T/log.jsonl" >/dev/null 2>"$T/server.err"
	echo $! >"$T/server.pid"
	for _ in $(seq 100); do
		[ -s "$T/port" ] && break
		sleep 0.05
	done
	PORT="$(cat "$T/port")"
}

teardown_file() {
	if [ -f "$T/server.pid" ]; then
		kill "$(cat "$T/server.pid")" 2>/dev/null || true
	fi
	rm -rf "$T"
	sb_reap_suite
}

setup() {
	export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME="$T/clienthome"
	unset GIT_DIR GIT_WORK_TREE GIT_PROTOCOL
	mkdir -p "$HOME"
	N="$BATS_TEST_NUMBER"
	REPO="repo$N"
	UP="$T/root/owner/$REPO.git"
	UPURL="http://127.0.0.1:$PORT/owner/$REPO.git"
	MIRROR="$T/mirrors/s$N/127.0.0.1:$PORT/owner/$REPO.git"
	W="$T/work$N"
	CLIENT_LOG="$T/client$N.log"
	mkdir -p "$W" "$(dirname "$MIRROR")" "$T/home$N"
	: >"$CLIENT_LOG"

	git init -q --bare -b main "$UP"
	git -C "$UP" config receive.denyNonFastForwards true
	git -C "$UP" config core.hooksPath "$FIXTURES/upstream-hooks"
	git init -q -b main "$W/seed"
	echo hello >"$W/seed/README"
	git -C "$W/seed" add README
	git -C "$W/seed" -c user.name=Up -c user.email=up@example.com commit -q -m init
	git -C "$W/seed" push -q "$UP" main

	make_wrapper "$T/srv$N.sh" "$TOKEN" version=2
	URL="ext::$T/srv$N.sh %S"
}

teardown() {
	local rc=0
	# Whatever happened, the client must never have seen the token.
	if grep -qF "$TOKEN" "$CLIENT_LOG"; then
		echo "TOKEN LEAKED to the client:" >&2
		grep -F "$TOKEN" "$CLIENT_LOG" >&2
		rc=1
	fi
	sb_reap
	return "$rc"
}

# make_wrapper FILE TOKEN PROTOCOL [RUNAS...]: the daemon's role, env built from nothing.
make_wrapper() {
	local f="$1" tok="$2" proto="$3"
	shift 3
	cat >"$f" <<EOF
#!/bin/sh
exec $* /usr/bin/env -i \\
    SHIMBRIDGE_SERVICE="\$1" \\
    SHIMBRIDGE_MIRROR='$MIRROR' \\
    SHIMBRIDGE_UPSTREAM='$UPURL' \\
    SHIMBRIDGE_USERNAME=x-access-token \\
    SHIMBRIDGE_TOKEN='$tok' \\
    SHIMBRIDGE_PROTECTED=main,master \\
    SHIMBRIDGE_DENY_PATHS=.github/workflows/ \\
    SHIMBRIDGE_GIT='${WRAP_GIT:-/usr/bin/git}' \\
    SHIMBRIDGE_GIT_PROTOCOL='$proto' \\
    HOME='$T/home$N' PATH=/usr/bin:/bin LANG=C.UTF-8 \\
    '$BIN'
EOF
	chmod 755 "$f"
}

# The sandbox's git, through ext::; output is kept for the token check.
cgit() {
	run git -c protocol.ext.allow=always -c user.name=Agent -c user.email=agent@example.com \
	    -c advice.detachedHead=false "$@"
	printf '%s\n' "$output" >>"$CLIENT_LOG"
}

# Upstream's value of a ref, or "none".
upref() {
	git --git-dir="$UP" rev-parse -q --verify "$1" || echo none
}

# Requests the upstream saw for this test's repository matching a pattern.
upstream_requests() {
	grep -F "\"/owner/$REPO.git/" "$T/log.jsonl" | grep -E "$1" || true
}

# A human commits directly upstream (not through shimbridge).
upstream_commit() {
	local file="$1" text="$2"
	git -C "$W/seed" pull -q "$UP" main
	mkdir -p "$W/seed/$(dirname "$file")"
	echo "$text" >"$W/seed/$file"
	git -C "$W/seed" add "$file"
	git -C "$W/seed" -c user.name=Up -c user.email=up@example.com commit -q -m "upstream $file"
	git -C "$W/seed" push -q "$UP" main
}

clone() {
	cgit clone "$URL" "$W/c"
	[ "$status" -eq 0 ]
}

commit_file() {
	local dir="$1" file="$2"
	mkdir -p "$dir/$(dirname "$file")"
	echo "$RANDOM $file" >>"$dir/$file"
	git -C "$dir" add -- "$file"
	git -C "$dir" -c user.name=Agent -c user.email=agent@example.com commit -q -m "change $file"
}

@test "clone works and every upstream request is authenticated with the token" {
	clone
	[ "$(cat "$W/c/README")" = hello ]
	[ "$(git -C "$W/c" symbolic-ref --short HEAD)" = main ]
	# git first asks without credentials (401), then with ours (200).
	upstream_requests '"auth": false' | grep -q '"status": 401'
	upstream_requests '"auth": true' | grep -F 'git-upload-pack' | grep -q '"status": 200'
	# The mirror is ours and configured as designed.
	[ "$(git --git-dir="$MIRROR" config transfer.fsckObjects)" = true ]
	[ "$(git --git-dir="$MIRROR" config core.hooksPath)" = "$MIRROR/hooks" ]
	[ "$(git --git-dir="$MIRROR" config gc.auto)" = 0 ]
	grep -q 'hook pre-receive' "$MIRROR/hooks/pre-receive"
	[ -z "$(find "$MIRROR" -name '*.sample')" ]
	! grep -rqF "$TOKEN" "$MIRROR" || false
}

@test "fetch brings in a new upstream commit, and branches deleted upstream go away" {
	git -C "$W/seed" push -q "$UP" main:doomed
	clone
	[ "$(git -C "$W/c" rev-parse origin/doomed)" = "$(upref refs/heads/doomed)" ]
	upstream_commit NEWS "news"
	git -C "$W/seed" push -q "$UP" :doomed
	cgit -C "$W/c" fetch --prune origin
	[ "$status" -eq 0 ]
	[ "$(git -C "$W/c" rev-parse origin/main)" = "$(upref refs/heads/main)" ]
	! git -C "$W/c" rev-parse -q --verify origin/doomed || false
	! git --git-dir="$MIRROR" rev-parse -q --verify refs/heads/doomed || false
}

@test "a fetch with a big negotiation (gzip'd HTTP upstream) works" {
	# 40 branches that all move between the clone and the fetch: >1 KiB of haves.
	branches() {
		local i c p
		for i in $(seq 40); do
			p=HEAD
			[ "$1" = new ] || p="refs/heads/b$i"
			c="$(git -C "$W/seed" -c user.name=Up -c user.email=up@example.com \
			    commit-tree -p "$p" -m "$1 $i" 'HEAD^{tree}')"
			git -C "$W/seed" update-ref "refs/heads/b$i" "$c"
		done
		git -C "$W/seed" push -q "$UP" 'refs/heads/b*:refs/heads/b*'
	}
	branches new
	clone
	branches moved
	cgit -C "$W/c" fetch origin
	[ "$status" -eq 0 ]
	[ "$(git -C "$W/c" rev-parse origin/b40)" = "$(upref refs/heads/b40)" ]
	upstream_requests 'git-upload-pack"' | grep -q '"encoding": "gzip"'
}

@test "the mirror follows upstream's default branch" {
	git -C "$UP" symbolic-ref HEAD refs/heads/trunk
	git -C "$W/seed" push -q "$UP" main:trunk
	cgit clone "$URL" "$W/c"
	[ "$status" -eq 0 ]
	[ "$(git -C "$W/c" symbolic-ref --short HEAD)" = trunk ]
}

@test "an empty upstream can be cloned and takes its first push" {
	REPO="empty$N"
	UP="$T/root/owner/$REPO.git"
	UPURL="http://127.0.0.1:$PORT/owner/$REPO.git"
	MIRROR="$T/mirrors/s$N/127.0.0.1:$PORT/owner/$REPO.git"
	git init -q --bare -b main "$UP"
	make_wrapper "$T/empty$N.sh" "$TOKEN" version=2
	cgit clone "ext::$T/empty$N.sh %S" "$W/c"
	[ "$status" -eq 0 ]
	[[ "$output" == *"cloned an empty repository"* ]]
	commit_file "$W/c" first.txt
	cgit -C "$W/c" push origin HEAD:main
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/main)" = "$(git -C "$W/c" rev-parse HEAD)" ]
}

@test "push of a new branch lands upstream" {
	clone
	git -C "$W/c" checkout -q -b feature
	commit_file "$W/c" src/a.c
	cgit -C "$W/c" push origin feature
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/feature)" = "$(git -C "$W/c" rev-parse HEAD)" ]
	[ "$(git --git-dir="$MIRROR" rev-parse refs/heads/feature)" = "$(git -C "$W/c" rev-parse HEAD)" ]
}

@test "fast-forward push lands upstream" {
	clone
	commit_file "$W/c" README
	commit_file "$W/c" docs/x.md
	cgit -C "$W/c" push origin main
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/main)" = "$(git -C "$W/c" rev-parse HEAD)" ]
}

@test "a large push (chunked HTTP upstream) lands" {
	clone
	git -C "$W/c" checkout -q -b big
	head -c 3000000 /dev/urandom >"$W/c/big.bin"
	git -C "$W/c" add big.bin
	git -C "$W/c" -c user.name=A -c user.email=a@b commit -q -m big
	cgit -C "$W/c" push origin big
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/big)" = "$(git -C "$W/c" rev-parse HEAD)" ]
	upstream_requests 'git-receive-pack"' | grep -q '"chunked": true'
}

@test "non-fast-forward force push to an unprotected branch is refused by upstream, with its message" {
	clone
	git -C "$W/c" checkout -q -b feature
	commit_file "$W/c" a
	cgit -C "$W/c" push origin feature
	[ "$status" -eq 0 ]
	before="$(upref refs/heads/feature)"
	git -C "$W/c" -c user.name=A -c user.email=a@b commit -q --amend -m rewritten
	cgit -C "$W/c" push --force origin feature
	[ "$status" -ne 0 ]
	[[ "$output" == *"upstream refused the push"* ]]
	[[ "$output" == *"denying non-fast-forward refs/heads/feature"* ]]
	[[ "$output" == *"! [remote rejected] feature"* ]]
	[ "$(upref refs/heads/feature)" = "$before" ]
	[ "$(git --git-dir="$MIRROR" rev-parse refs/heads/feature)" = "$before" ]
}

@test "upstream's own hook refusal reaches the client and nothing changes" {
	clone
	git -C "$W/c" checkout -q -b upstream-reject-1
	commit_file "$W/c" b
	cgit -C "$W/c" push origin upstream-reject-1
	[ "$status" -ne 0 ]
	[[ "$output" == *"upstream: GH006: Protected branch update failed for refs/heads/upstream-reject-1."* ]]
	[ "$(upref refs/heads/upstream-reject-1)" = none ]
	! git --git-dir="$MIRROR" rev-parse -q --verify refs/heads/upstream-reject-1 || false
}

@test "deleting a protected branch is refused by the policy and nothing is sent upstream" {
	clone
	cgit -C "$W/c" push origin :main
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing to delete branch 'main': it is protected"* ]]
	[[ "$output" == *"nothing was pushed upstream"* ]]
	[ "$(upref refs/heads/main)" != none ]
	[ -z "$(upstream_requests 'receive-pack')" ]
}

@test "force push to a protected branch is refused by the policy and nothing is sent upstream" {
	clone
	git -C "$W/c" -c user.name=A -c user.email=a@b commit -q --amend -m rewritten
	cgit -C "$W/c" push --force origin main
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing to force-push branch 'main'"* ]]
	[ -z "$(upstream_requests 'receive-pack')" ]
}

@test "deleting an unprotected branch works" {
	clone
	cgit -C "$W/c" push origin main:scratch
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/scratch)" != none ]
	cgit -C "$W/c" push origin :scratch
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/scratch)" = none ]
}

@test "push touching .github/workflows is refused, in any commit and in any spelling" {
	clone
	git -C "$W/c" checkout -q -b wf
	commit_file "$W/c" .github/workflows/x.yml
	cgit -C "$W/c" push origin wf
	[ "$status" -ne 0 ]
	[[ "$output" == *"changes '.github/workflows/x.yml'"* ]]
	[ "$(upref refs/heads/wf)" = none ]

	# Hidden under a later commit on an existing branch, with a quoted name.
	git -C "$W/c" checkout -q main
	git -C "$W/c" checkout -q -b wf2
	commit_file "$W/c" '.github/workflows/we "ird" name.yml'
	commit_file "$W/c" ok.txt
	cgit -C "$W/c" push origin wf2
	[ "$status" -ne 0 ]
	[[ "$output" == *'we "ird" name.yml'* ]]

	# Case-folded spelling.
	git -C "$W/c" checkout -q main
	git -C "$W/c" checkout -q -b wf3
	commit_file "$W/c" .GitHub/Workflows/y.yml
	cgit -C "$W/c" push origin wf3
	[ "$status" -ne 0 ]
	[ -z "$(upstream_requests 'receive-pack')" ]
}

@test "merging upstream work that touched .github/workflows is not a denied change" {
	clone
	git -C "$W/c" checkout -q -b feature
	commit_file "$W/c" mine.txt
	upstream_commit .github/workflows/ci.yml "by a human"
	cgit -C "$W/c" fetch origin
	[ "$status" -eq 0 ]
	git -C "$W/c" -c user.name=A -c user.email=a@b merge -q --no-edit origin/main
	cgit -C "$W/c" push origin feature
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/feature)" = "$(git -C "$W/c" rev-parse HEAD)" ]
}

@test "refs other than branches and tags are refused; tags are pushed" {
	clone
	cgit -C "$W/c" push origin HEAD:refs/notes/x
	[ "$status" -ne 0 ]
	[[ "$output" == *"only branches (refs/heads/...) and tags"* ]]
	git -C "$W/c" tag v1
	cgit -C "$W/c" push origin v1
	[ "$status" -eq 0 ]
	[ "$(upref refs/tags/v1)" = "$(git -C "$W/c" rev-parse v1)" ]
}

@test "credential helper answers only for the exact upstream" {
	cred() {
		run --separate-stderr env -i SHIMBRIDGE_UPSTREAM="$UPURL" \
		    SHIMBRIDGE_USERNAME=x-access-token SHIMBRIDGE_TOKEN="$TOKEN" \
		    "$BIN" credential "$@"
	}
	ok=$'username=x-access-token\npassword='"$TOKEN"
	cred get <<<$'protocol=http\nhost=127.0.0.1:'"$PORT"$'\npath=owner/'"$REPO"'.git'
	[ "$status" -eq 0 ]
	[ "$output" = "$ok" ]
	cred get <<<$'protocol=http\nhost=127.0.0.1:'"$PORT"$'\npath=owner/'"$REPO"
	[ "$status" -eq 0 ]
	[ "$output" = "$ok" ]

	for req in \
	    $'protocol=https\nhost=127.0.0.1:'"$PORT"$'\npath=owner/'"$REPO"'.git' \
	    $'protocol=http\nhost=127.0.0.1\npath=owner/'"$REPO"'.git' \
	    $'protocol=http\nhost=127.0.0.1:1\npath=owner/'"$REPO"'.git' \
	    $'protocol=http\nhost=localhost:'"$PORT"$'\npath=owner/'"$REPO"'.git' \
	    $'protocol=http\nhost=evil.example:'"$PORT"$'\npath=owner/'"$REPO"'.git' \
	    $'protocol=http\nhost=127.0.0.1:'"$PORT"$'\npath=owner/other.git' \
	    $'protocol=http\nhost=127.0.0.1:'"$PORT"$'\npath=owner/'"$REPO"'.git/x' \
	    $'protocol=http\nhost=127.0.0.1:'"$PORT"$'\npath=Owner/'"$REPO"'.git' \
	    $'protocol=http\nhost=127.0.0.1:'"$PORT" \
	    $'protocol=http\nhost=127.0.0.1:'"$PORT"$'\npath=owner/'"$REPO"$'.git\nusername=someone' \
	    $'host=127.0.0.1:'"$PORT"$'\npath=owner/'"$REPO"'.git' \
	    $'protocol=http\nhost=127.0.0.1:'"$PORT"$'\nhost=127.0.0.1:'"$PORT"$'\npath=owner/'"$REPO"'.git' \
	    $'url='"$UPURL"; do
		cred get <<<"$req"
		[ -z "$output" ] || { echo "answered for: $req"; return 1; }
	done

	# Malformed or oversized requests get no answer either.
	run bash -c 'printf "protocol=http\0\nhost=127.0.0.1:%s\npath=owner/%s.git\n" "$1" "$2" |
	    env -i SHIMBRIDGE_UPSTREAM="$3" SHIMBRIDGE_USERNAME=u SHIMBRIDGE_TOKEN=t "$4" credential get 2>/dev/null' \
	    _ "$PORT" "$REPO" "$UPURL" "$BIN"
	[ -z "$output" ]
	run bash -c '{ printf "protocol=http\nhost=127.0.0.1:%s\npath=owner/%s.git\n" "$1" "$2";
	    for i in $(seq 70); do echo "x$i=y"; done; } |
	    env -i SHIMBRIDGE_UPSTREAM="$3" SHIMBRIDGE_USERNAME=u SHIMBRIDGE_TOKEN=t "$4" credential get 2>/dev/null' \
	    _ "$PORT" "$REPO" "$UPURL" "$BIN"
	[ -z "$output" ]
	run bash -c '{ printf "protocol=http\nhost=127.0.0.1:%s\npath=owner/%s.git\nwwwauth[]=" "$1" "$2";
	    head -c 5000 /dev/zero | tr "\0" a; echo; } |
	    env -i SHIMBRIDGE_UPSTREAM="$3" SHIMBRIDGE_USERNAME=u SHIMBRIDGE_TOKEN=t "$4" credential get 2>/dev/null' \
	    _ "$PORT" "$REPO" "$UPURL" "$BIN"
	[ -z "$output" ]

	cred store <<<$'protocol=http\nhost=127.0.0.1:'"$PORT"$'\npath=owner/'"$REPO"$'.git\npassword=zzz'
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	cred erase <<<$'protocol=http\nhost=127.0.0.1:'"$PORT"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

@test "two concurrent pushes to different branches both land and the mirror stays clean" {
	clone
	cgit clone "$URL" "$W/d"
	[ "$status" -eq 0 ]
	git -C "$W/c" checkout -q -b one
	git -C "$W/d" checkout -q -b two
	for i in 1 2 3; do
		commit_file "$W/c" "one/$i"
		commit_file "$W/d" "two/$i"
	done
	g="git -c protocol.ext.allow=always"
	$g -C "$W/c" push origin one >"$W/p1.out" 2>&1 &
	p1=$!
	$g -C "$W/d" push origin two >"$W/p2.out" 2>&1 &
	p2=$!
	s1=0 s2=0
	wait $p1 || s1=$?
	wait $p2 || s2=$?
	cat "$W/p1.out" "$W/p2.out" >>"$CLIENT_LOG"
	[ "$s1" -eq 0 ]
	[ "$s2" -eq 0 ]
	[ "$(upref refs/heads/one)" = "$(git -C "$W/c" rev-parse HEAD)" ]
	[ "$(upref refs/heads/two)" = "$(git -C "$W/d" rev-parse HEAD)" ]
	git --git-dir="$MIRROR" fsck --strict --no-dangling
	git --git-dir="$UP" fsck --strict --no-dangling
	[ "$(git --git-dir="$MIRROR" rev-parse refs/heads/one)" = "$(upref refs/heads/one)" ]
	[ "$(git --git-dir="$MIRROR" rev-parse refs/heads/two)" = "$(upref refs/heads/two)" ]
}

@test "operations on one mirror wait for its lock" {
	clone
	flock "$MIRROR.lock" sh -c 'touch "$1"; sleep 1.5' _ "$W/held" 3>&- &
	holder=$!
	for _ in $(seq 100); do
		[ -e "$W/held" ] && break
		sleep 0.02
	done
	start=$(date +%s%N)
	cgit -C "$W/c" fetch origin
	end=$(date +%s%N)
	wait $holder
	[ "$status" -eq 0 ]
	[[ "$output" == *"shimbridge: waiting for another git operation on this repository"* ]]
	[ $(((end - start) / 1000000)) -ge 1000 ]

	# While upload-pack serves, the lock is held shared: readers may enter, writers wait.
	mkfifo "$W/in"
	"$T/srv$N.sh" git-upload-pack <"$W/in" >"$W/adv" 2>/dev/null 3>&- &
	server=$!
	exec 8>"$W/in"
	for _ in $(seq 250); do
		[ -s "$W/adv" ] && break
		sleep 0.02
	done
	[ -s "$W/adv" ]
	flock -s -n "$MIRROR.lock" true
	! flock -x -n "$MIRROR.lock" true || false
	exec 8>&-
	wait "$server" || true
	flock -x -n "$MIRROR.lock" true
}

@test "a wrong token fails with upstream's message and exit 128, and is not shown" {
	make_wrapper "$T/bad$N.sh" "bad-token-ZQXJ" version=2
	cgit clone "ext::$T/bad$N.sh %S" "$W/c"
	[ "$status" -ne 0 ]
	[[ "$output" == *"shimbridge: cannot fetch $UPURL from upstream:"*"Authentication failed"* ]]
	[[ "$output" != *bad-token-ZQXJ* ]]
	run "$T/bad$N.sh" git-upload-pack </dev/null
	[ "$status" -eq 128 ]
}

@test "the token never reaches the client, even when upstream prints it" {
	clone
	echo "debug: token is $TOKEN" >"$UP/echo-message"
	git -C "$W/c" checkout -q -b upstream-reject-2
	commit_file "$W/c" z
	cgit -C "$W/c" push origin upstream-reject-2
	[ "$status" -ne 0 ]
	[[ "$output" == *"debug: token is [REDACTED]"* ]]
	cgit -C "$W/c" fetch origin
	cgit -C "$W/c" push origin :main
	! grep -qF "$TOKEN" "$CLIENT_LOG" || false
}

@test "protocol v2 is served when asked for, and an invalid GIT_PROTOCOL is ignored" {
	clone
	(cd "$W/c" && GIT_TRACE_PACKET="$W/v2.trace" git -c protocol.ext.allow=always ls-remote origin >/dev/null)
	grep -q 'version 2' "$W/v2.trace"
	make_wrapper "$T/v9$N.sh" "$TOKEN" 'version=9'
	GIT_TRACE_PACKET="$W/v9.trace" git -c protocol.ext.allow=always ls-remote "ext::$T/v9$N.sh %S" >/dev/null
	! grep -q 'version 2' "$W/v9.trace" || false
	grep -q 'refs/heads/main' "$W/v9.trace"
}

@test "a killed creation or a vanished client leaves a mirror that works and is consistent" {
	# A creation killed half-way leaves only a temporary directory; it is cleaned up.
	mkdir -p "$MIRROR.tmp-AbC123/objects"
	clone
	[ ! -e "$MIRROR.tmp-AbC123" ]
	# A client that vanishes before sending anything.
	run "$T/srv$N.sh" git-receive-pack </dev/null
	run "$T/srv$N.sh" git-upload-pack </dev/null
	commit_file "$W/c" after
	cgit -C "$W/c" push origin main
	[ "$status" -eq 0 ]
	git --git-dir="$MIRROR" fsck --strict --no-dangling
	[ "$(git --git-dir="$MIRROR" rev-parse main)" = "$(upref refs/heads/main)" ]
}

@test "maintain gcs a mirror under its lock" {
	clone
	commit_file "$W/c" m
	cgit -C "$W/c" push origin main
	run env -i SHIMBRIDGE_GIT=/usr/bin/git HOME="$T/home$N" "$BIN" maintain "$MIRROR"
	[ "$status" -eq 0 ]
	[ "$(git --git-dir="$MIRROR" count-objects -v | sed -n 's/^count: //p')" = 0 ]
	git --git-dir="$MIRROR" fsck --strict --no-dangling
	run env -i "$BIN" maintain "$T/nonexistent/x.git"
	[ "$status" -ne 0 ]
}

@test "works as an unprivileged user" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to switch users"
	command -v setpriv >/dev/null || skip "no setpriv"
	chown -R nobody:nogroup "$(dirname "$MIRROR")" "$T/home$N"
	chmod 755 "$T/mirrors" "$T/mirrors/s$N" "$T/mirrors/s$N/127.0.0.1:$PORT"
	make_wrapper "$T/nobody$N.sh" "$TOKEN" version=2 \
	    setpriv --reuid=nobody --regid=nogroup --clear-groups
	cgit clone "ext::$T/nobody$N.sh %S" "$W/c"
	[ "$status" -eq 0 ]
	[ "$(stat -c %U "$MIRROR")" = nobody ]
	git -C "$W/c" checkout -q -b from-nobody
	commit_file "$W/c" n
	cgit -C "$W/c" push origin from-nobody
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/from-nobody)" = "$(git -C "$W/c" rev-parse HEAD)" ]
}

@test "every host git gets fds 0-2 only, no token in argv, and a built environment" {
	cat >"$T/spy$N" <<EOF
#!/usr/bin/python3 -I
import os, sys
fds = []
for fd in range(3, 1024):
    try:
        os.fstat(fd)
        fds.append(str(fd))
    except OSError:
        pass
with open("$W/spy.log", "a") as f:
    f.write("%s|%s|%s\n" % (" ".join(sys.argv[1:]), ",".join(fds), " ".join(sorted(os.environ))))
os.execv("/usr/bin/git", ["git"] + sys.argv[1:])
EOF
	chmod 755 "$T/spy$N"
	WRAP_GIT="$T/spy$N" make_wrapper "$T/spied$N.sh" "$TOKEN" version=2
	# Leak an fd into the serving process on purpose: its children must not get it.
	exec 7</dev/null
	cgit clone "ext::$T/spied$N.sh %S" "$W/c"
	[ "$status" -eq 0 ]
	git -C "$W/c" checkout -q -b spied
	commit_file "$W/c" s
	cgit -C "$W/c" push origin spied
	exec 7<&-
	[ "$status" -eq 0 ]
	# init, fetch, upload-pack, receive-pack, rev-list, diff-tree and push at least.
	for cmd in init fetch upload-pack receive-pack rev-list diff-tree push; do
		cut -d'|' -f1 "$W/spy.log" | grep -qE -- "(^| )$cmd " || { echo "no git $cmd seen"; return 1; }
	done
	# Fields: argv | fds above 2 | variable names.
	! cut -d'|' -f2 "$W/spy.log" | grep -q . || false
	! cut -d'|' -f1 "$W/spy.log" | grep -qF "$TOKEN" || false
	while IFS='|' read -r args fds names; do
		for v in $names; do
			[[ "$v" =~ ^(PATH|HOME|LANG|LC_ALL|GIT_[A-Z_]+|SHIMBRIDGE_[A-Z_]+)$ ]] ||
			    { echo "unexpected variable $v for: $args"; return 1; }
		done
		[[ " $names " == *" GIT_CONFIG_NOSYSTEM "* && " $names " == *" GIT_CONFIG_GLOBAL "* ]] ||
		    { echo "unhardened: $args / $fds / $names"; return 1; }
		[[ " $names " != *" GIT_TRACE"* && " $names " != *" GIT_ASKPASS "* ]]
		case "$args" in
		*"upload-pack --strict "*|*" rev-list "*|*" diff-tree "*|*" init --bare "*)
			[[ " $names " != *" SHIMBRIDGE_TOKEN "* ]] ||
			    { echo "token given to: $args"; return 1; } ;;
		esac
	done <"$W/spy.log"
}

@test "usage, version and unknown modes" {
	run "$BIN" --version
	[ "$status" -eq 0 ]
	[[ "$output" == "shimbridge-git "* ]]
	run "$BIN" --help
	[ "$status" -eq 0 ]
	[[ "$output" == *SHIMBRIDGE_MIRROR* ]]
	run "$BIN" frobnicate
	[ "$status" -eq 2 ]
	run env -i "$BIN"
	[ "$status" -eq 128 ]
	[[ "$output" == *"SHIMBRIDGE_SERVICE is not set"* ]]
}
