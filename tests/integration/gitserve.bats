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
	export ROOT_DIR BIN T TOKEN PORT PPORT FIXTURES
	ROOT_DIR="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
	if [ -z "${SHIMBRIDGE_GIT_BIN:-}" ] &&
	    ! make -s -C "$ROOT_DIR" build/shimbridge-git >&2; then
		echo "cannot build build/shimbridge-git (make build/shimbridge-git)" >&2
		return 1
	fi
	# Staged copies (the checkout may be unreachable for "nobody"): again, after a build.
	sb_stage
	FIXTURES=$SB_FIXTURES
	# The staged build's (SB_BUILD=build/san: the ASan+UBSan one, as run-all's
	# gitserve-asan); SHIMBRIDGE_GIT_BIN=/abs/path runs the suite on another binary.
	BIN="${SHIMBRIDGE_GIT_BIN:-$SB_BUILD/shimbridge-git}"
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
	# The daemon's loopback injector, played by a proxy that adds the credential.
	sb_bg /usr/bin/python3 "$FIXTURES/authproxy.py" --upstream-port "$PORT" \
	    --token-file "$T/token" --port-file "$T/pport" --log "$T/proxy.jsonl" \
	    --refuse-push-file "$T/refuse-push" >/dev/null 2>"$T/proxy.err"
	echo $! >"$T/proxy.pid"
	for _ in $(seq 100); do
		[ -s "$T/pport" ] && break
		sleep 0.05
	done
	PPORT="$(cat "$T/pport")"
}

teardown_file() {
	local p
	for p in server proxy; do
		if [ -f "$T/$p.pid" ]; then
			kill "$(cat "$T/$p.pid")" 2>/dev/null || true
		fi
	done
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
# TOKEN "-" gives no credential at all (as when the daemon's loopback injector adds it).
# The policy lists come from WRAP_* variables and default to what most tests expect:
# main and master take fast-forwards only, every existing tag stays where it is.
make_wrapper() {
	local f="$1" tok="$2" proto="$3" cred
	shift 3
	cred="SHIMBRIDGE_USERNAME=x-access-token SHIMBRIDGE_TOKEN='$tok'"
	[ "$tok" != - ] || cred=
	cat >"$f" <<EOF
#!/bin/sh
${WRAP_PRE:-}
exec $* /usr/bin/env -i \\
    SHIMBRIDGE_SERVICE="\$1" \\
    SHIMBRIDGE_MIRROR='$MIRROR' \\
    SHIMBRIDGE_UPSTREAM='${WRAP_UPURL:-$UPURL}' \\
    $cred \\
    SHIMBRIDGE_NO_PUSH='${WRAP_NO_PUSH-}' \\
    SHIMBRIDGE_FF_ONLY='${WRAP_FF_ONLY-main,master}' \\
    SHIMBRIDGE_PROTECTED_TAGS='${WRAP_TAGS-*}' \\
    SHIMBRIDGE_DENY_PATHS=.github/workflows/ \\
    SHIMBRIDGE_GIT='${WRAP_GIT:-/usr/bin/git}' \\
    SHIMBRIDGE_GIT_PROTOCOL='$proto' \\
    ${WRAP_ENV:-} \\
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
	# Every setting, as git reads the file (written in one go, not by git config).
	diff <(git config --file "$MIRROR/config" --list | sort) <(sort <<EOF
core.repositoryformatversion=0
core.filemode=true
core.bare=true
transfer.fsckobjects=true
receive.fsckobjects=true
receive.denydeletes=false
receive.denynonfastforwards=false
receive.autogc=false
receive.advertisepushoptions=false
fetch.fsckobjects=true
uploadpack.allowanysha1inwant=false
gc.auto=0
maintenance.auto=false
core.fsmonitor=false
core.logallrefupdates=false
core.hookspath=$MIRROR/hooks
remote.upstream.url=$UPURL
remote.upstream.fetch=+refs/heads/*:refs/heads/*
remote.upstream.fetch=+refs/tags/*:refs/tags/*
EOF
)
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

# Hold a FIFO open with file $1 in it, as the bridge holds SHIMBRIDGE_UPSTREAM_REFS.
refs_fifo() {
	rm -f "$W/refs"
	mkfifo "$W/refs"
	sb_bg bash -c 'exec 3<>"$1" && cat "$2" >&3 && exec sleep 60' _ "$W/refs" "$1"
	REFS_HOLDER=$!
}

# Repository $1's heads and tags as the bridge's message says them, into file $2.
refs_message() {
	{
		echo refs
		git --git-dir="$1" for-each-ref --format='%(objectname) %(refname)' refs/heads/ \
		    refs/tags/
		echo end
	} >"$2"
}

@test "upstream's refs from the bridge: the same as the mirror's, no fetch; else, or none, a fetch" {
	clone
	WRAP_ENV="SHIMBRIDGE_UPSTREAM_REFS='$W/refs'" make_wrapper "$T/srv$N.sh" "$TOKEN" version=2
	# Up to date: the fetch from upstream is skipped.
	refs_message "$MIRROR" "$W/same"
	refs_fifo "$W/same"
	n=$(upstream_requests 'upload-pack' | wc -l)
	cgit -C "$W/c" fetch origin
	[ "$status" -eq 0 ]
	[ "$(upstream_requests 'upload-pack' | wc -l)" = "$n" ]
	kill "$REFS_HOLDER"

	# Upstream moved and the message says so: the mirror fetches.
	upstream_commit refs-news.txt "news"
	refs_message "$UP" "$W/moved"
	refs_fifo "$W/moved"
	cgit -C "$W/c" fetch origin
	[ "$status" -eq 0 ]
	[ "$(git -C "$W/c" rev-parse origin/main)" = "$(upref refs/heads/main)" ]
	[ "$(upstream_requests 'upload-pack' | wc -l)" -gt "$n" ]
	kill "$REFS_HOLDER"

	# "none" (the bridge cannot say): the mirror fetches.
	upstream_commit refs-news2.txt "more news"
	printf 'none\n' >"$W/none"
	refs_fifo "$W/none"
	cgit -C "$W/c" fetch origin
	[ "$status" -eq 0 ]
	[ "$(git -C "$W/c" rev-parse origin/main)" = "$(upref refs/heads/main)" ]
	kill "$REFS_HOLDER"
}

# POSTs upstream saw for this test's repository to the service $1.
up_posts() {
	upstream_requests '"method": "POST"' | grep -c "$1" || true
}

@test "a push does not refresh the mirror; an update from a value upstream has left is refused, by the bridge's list or by asking" {
	clone
	git -C "$W/c" checkout -q -b feature
	commit_file "$W/c" f1.txt
	cgit -C "$W/c" push origin feature
	[ "$status" -eq 0 ]
	# Upstream's main moves: a push to feature fetches nothing and lands.
	upstream_commit push-news.txt "news"
	commit_file "$W/c" f2.txt
	n=$(up_posts git-upload-pack)
	cgit -C "$W/c" push origin feature
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/feature)" = "$(git -C "$W/c" rev-parse HEAD)" ]
	[ "$(up_posts git-upload-pack)" = "$n" ]
	[ "$(git --git-dir="$MIRROR" rev-parse refs/heads/main)" != "$(upref refs/heads/main)" ]

	# A human pushes to feature. With no list from the bridge, the hook asks upstream.
	git -C "$W/seed" fetch -q "$UP" feature
	git -C "$W/seed" checkout -q -B feature FETCH_HEAD
	echo theirs >"$W/seed/theirs.txt"
	git -C "$W/seed" add theirs.txt
	git -C "$W/seed" -c user.name=Up -c user.email=up@example.com commit -q -m theirs
	git -C "$W/seed" push -q "$UP" feature
	git -C "$W/seed" checkout -q main
	theirs=$(upref refs/heads/feature)
	commit_file "$W/c" f3.txt
	pushes=$(up_posts git-receive-pack)
	cgit -C "$W/c" push origin feature
	[ "$status" -ne 0 ]
	[[ "$output" == *"upstream's branch 'feature' has moved since this repository last fetched"* ]]
	[[ "$output" == *"nothing was pushed upstream"* ]]
	[ "$(upref refs/heads/feature)" = "$theirs" ]
	[ "$(up_posts git-receive-pack)" = "$pushes" ]

	# The same with the bridge's list (upstream's refs now), and no request to learn them.
	WRAP_ENV="SHIMBRIDGE_UPSTREAM_REFS='$W/refs'" make_wrapper "$T/srv$N.sh" "$TOKEN" version=2
	refs_message "$UP" "$W/now"
	refs_fifo "$W/now"
	n=$(upstream_requests 'info/refs' | wc -l)
	cgit -C "$W/c" push origin feature
	[ "$status" -ne 0 ]
	[[ "$output" == *"upstream's branch 'feature' has moved since this repository last fetched"* ]]
	[ "$(upstream_requests 'info/refs' | wc -l)" = "$n" ]
	[ "$(upref refs/heads/feature)" = "$theirs" ]
	kill "$REFS_HOLDER"
	make_wrapper "$T/srv$N.sh" "$TOKEN" version=2
	# After a fetch and a rebase the push goes.
	cgit -C "$W/c" pull -q --rebase origin feature
	[ "$status" -eq 0 ]
	cgit -C "$W/c" push origin feature
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/feature)" = "$(git -C "$W/c" rev-parse HEAD)" ]
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

@test "a rewrite of an unprotected branch lands where upstream takes it, from the value the sandbox saw" {
	git -C "$UP" config receive.denyNonFastForwards false
	clone
	git -C "$W/c" checkout -q -b feature
	commit_file "$W/c" a
	cgit -C "$W/c" push origin feature
	[ "$status" -eq 0 ]
	git -C "$W/c" -c user.name=A -c user.email=a@b commit -q --amend -m rewritten
	cgit -C "$W/c" push --force origin feature
	[ "$status" -eq 0 ]
	[[ "$output" == *"+ "*"feature -> feature (forced update)"* ]]
	[ "$(upref refs/heads/feature)" = "$(git -C "$W/c" rev-parse HEAD)" ]
	[ "$(git --git-dir="$MIRROR" rev-parse refs/heads/feature)" = "$(git -C "$W/c" rev-parse HEAD)" ]
	# Upstream's branch moves (a person's push); a rewrite from the old value is refused.
	git -C "$W/seed" fetch -q "$UP" feature
	git -C "$W/seed" checkout -q FETCH_HEAD
	git -C "$W/seed" -c user.name=Up -c user.email=up@example.com commit -q --allow-empty -m person
	git -C "$W/seed" push -q "$UP" HEAD:refs/heads/feature
	moved=$(upref refs/heads/feature)
	git -C "$W/c" -c user.name=A -c user.email=a@b commit -q --amend -m again
	cgit -C "$W/c" push --force origin feature
	[ "$status" -ne 0 ]
	[[ "$output" == *"upstream's branch 'feature' has moved since this repository last fetched"* ]]
	[ "$(upref refs/heads/feature)" = "$moved" ]
	git -C "$W/seed" checkout -q main
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

# Pushes (receive-pack POSTs) upstream has seen for this test's repository.
up_pushes() {
	upstream_requests '"method": "POST"' | grep -c 'git-receive-pack' || true
}

@test "protected tags can be created but never moved or deleted; a branch named HEAD is refused" {
	clone
	git -C "$W/c" tag v1
	cgit -C "$W/c" push origin v1
	[ "$status" -eq 0 ]
	v1=$(upref refs/tags/v1)
	[ "$v1" = "$(git -C "$W/c" rev-parse v1)" ]
	pushes=$(up_pushes)

	commit_file "$W/c" later
	git -C "$W/c" tag -f v1
	cgit -C "$W/c" push --force origin v1
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing to move tag 'v1': it is protected by the shimbridge policy"* ]]
	[[ "$output" == *"create a new tag instead"* ]]
	[ "$(upref refs/tags/v1)" = "$v1" ]
	cgit -C "$W/c" push origin :refs/tags/v1
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing to delete tag 'v1'"* ]]
	[ "$(upref refs/tags/v1)" = "$v1" ]

	# A tag a person made upstream is just as fixed. Before the sandbox has fetched it
	# (a push does not refresh the mirror) a push of that name is a creation, and the
	# tag exists upstream; after a fetch, a deletion, and the policy's.
	git --git-dir="$UP" tag up1 "$v1"
	git -C "$W/c" tag up1 HEAD
	cgit -C "$W/c" push --force origin up1
	[ "$status" -ne 0 ]
	[[ "$output" == *"tag 'up1' already exists upstream"* ]]
	[ "$(upref refs/tags/up1)" = "$v1" ]
	git -C "$W/c" tag -d up1 >/dev/null
	cgit -C "$W/c" fetch origin
	[ "$status" -eq 0 ]
	cgit -C "$W/c" push origin :refs/tags/up1
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing to delete tag 'up1'"* ]]
	[ "$(upref refs/tags/up1)" = "$v1" ]

	# refs/heads/HEAD: created, or updated if it exists upstream, never.
	cgit -C "$W/c" push origin HEAD:refs/heads/HEAD
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing to update refs/heads/HEAD: a branch named HEAD"* ]]
	[ "$(upref refs/heads/HEAD)" = none ]
	git --git-dir="$UP" update-ref refs/heads/HEAD "$v1"
	cgit -C "$W/c" push --force origin HEAD:refs/heads/HEAD
	[ "$status" -ne 0 ]
	[ "$(upref refs/heads/HEAD)" = "$v1" ]
	[ "$(up_pushes)" = "$pushes" ]

	# New tags still go up.
	git -C "$W/c" tag v2
	cgit -C "$W/c" push origin v2
	[ "$status" -eq 0 ]
	[ "$(upref refs/tags/v2)" = "$(git -C "$W/c" rev-parse HEAD)" ]
}

@test "only the configured tag patterns are protected; other tags may move with force, or go" {
	WRAP_TAGS='release-*' make_wrapper "$T/srv$N.sh" "$TOKEN" version=2
	clone
	git -C "$W/c" tag release-1
	git -C "$W/c" tag tmp
	cgit -C "$W/c" push origin release-1 tmp
	[ "$status" -eq 0 ]
	first=$(git -C "$W/c" rev-parse HEAD)
	commit_file "$W/c" x
	git -C "$W/c" tag -f tmp
	git -C "$W/c" tag -f release-1
	cgit -C "$W/c" push --force origin tmp
	[ "$status" -eq 0 ]
	[ "$(upref refs/tags/tmp)" = "$(git -C "$W/c" rev-parse HEAD)" ]
	cgit -C "$W/c" push --force origin release-1
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing to move tag 'release-1'"* ]]
	[ "$(upref refs/tags/release-1)" = "$first" ]
	cgit -C "$W/c" push origin :refs/tags/tmp
	[ "$status" -eq 0 ]
	[ "$(upref refs/tags/tmp)" = none ]
}

@test "no-push branches take no direct push at all: the default branch (HEAD) and named ones" {
	WRAP_NO_PUSH='HEAD,release' make_wrapper "$T/srv$N.sh" "$TOKEN" version=2
	clone
	before=$(upref refs/heads/main)
	pushes=$(up_pushes)
	commit_file "$W/c" ff.txt
	cgit -C "$W/c" push origin main
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing to push to branch 'main': the shimbridge policy takes no direct pushes to it"* ]]
	[[ "$output" == *"Push to a new branch"*"open a pull request with gh pr create"* ]]
	[[ "$output" == *"! [remote rejected] main -> main"* ]]
	cgit -C "$W/c" push origin :main
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing to delete branch 'main'"* ]]
	# Not even its creation, for a named one.
	cgit -C "$W/c" push origin HEAD:release
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing to push to branch 'release'"* ]]
	[ "$(upref refs/heads/release)" = none ]
	[ "$(upref refs/heads/main)" = "$before" ]
	[ "$(up_pushes)" = "$pushes" ]
	# The way the message points to works.
	cgit -C "$W/c" push origin HEAD:my-change
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/my-change)" = "$(git -C "$W/c" rev-parse HEAD)" ]
}

@test "ff-only branches take fast-forwards, and refuse force and delete with what to do instead" {
	clone
	commit_file "$W/c" ff.txt
	cgit -C "$W/c" push origin main
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/main)" = "$(git -C "$W/c" rev-parse HEAD)" ]
	git -C "$W/c" -c user.name=A -c user.email=a@b commit -q --amend -m rewritten
	cgit -C "$W/c" push --force origin main
	[ "$status" -ne 0 ]
	[[ "$output" == *"fast-forward pushes only"*"gh pr create"* ]]
}

@test "a policy refusal reaches the bridge through the refusal pipe, and no file is written" {
	clone
	mkfifo "$W/refusal"
	cat "$W/refusal" >"$W/refusal.out" 3>&- &
	reader=$!
	WRAP_PRE="exec 3>'$W/refusal'" WRAP_ENV="SHIMBRIDGE_REFUSAL_FD=3" \
	    make_wrapper "$T/srv$N.sh" "$TOKEN" version=2
	cgit -C "$W/c" push origin :main
	[ "$status" -ne 0 ]
	wait "$reader"
	grep -q "refusing to delete branch 'main': it is protected" "$W/refusal.out"
	grep -q "nothing was pushed upstream" "$W/refusal.out"
	[ ! -e "$T/home$N/.shimbridge-refused" ]

	# An allowed push leaves the pipe empty.
	cat "$W/refusal" >"$W/refusal2.out" 3>&- &
	reader=$!
	git -C "$W/c" checkout -q -b fine
	commit_file "$W/c" fine.txt
	cgit -C "$W/c" push origin fine
	[ "$status" -eq 0 ]
	wait "$reader"
	[ ! -s "$W/refusal2.out" ]

	# Whatever fd 3 is, it must be a pipe.
	WRAP_PRE="exec 3</dev/null" WRAP_ENV="SHIMBRIDGE_REFUSAL_FD=3" \
	    make_wrapper "$T/bad$N.sh" "$TOKEN" version=2
	run "$T/bad$N.sh" git-receive-pack </dev/null
	[ "$status" -eq 128 ]
	[[ "$output" == *"fd 3 is not a socket or pipe"* ]]
}

# ask_wrapper ANSWER: the wrapper behind askbridge.py (the bridge's end of the refusal
# channel, a socket pair), which answers a question with ANSWER; branches release/*
# ask. What the bridge received ends up in $W/chan.
ask_wrapper() {
	printf '%s\n' "$1" >"$W/answer"
	WRAP_ENV="SHIMBRIDGE_REFUSAL_FD=3 SHIMBRIDGE_ASK_BRANCHES='release/*' ${2:-}" \
	    make_wrapper "$T/srv$N.sh" "$TOKEN" version=2 \
	    /usr/bin/python3 "$FIXTURES/askbridge.py" "$W/answer" "$W/chan"
}

@test "a push to an ask branch asks the bridge on the refusal socket and waits: approved, it lands" {
	clone
	ask_wrapper Y SHIMBRIDGE_PHASES=1
	git -C "$W/c" checkout -q -b release/1
	commit_file "$W/c" r1.txt
	cgit -C "$W/c" push origin release/1
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/release/1)" = "$(git -C "$W/c" rev-parse HEAD)" ]
	grep -qx "A create 0000000000000000000000000000000000000000 $(git -C "$W/c" rev-parse HEAD) refs/heads/release/1" "$W/chan"
	grep -qx W "$W/chan"
	grep -q '^T approved [0-9]*$' "$W/chan"
	# A fast-forward asks as an update; a branch outside the list does not ask.
	old=$(git -C "$W/c" rev-parse HEAD)
	commit_file "$W/c" r2.txt
	cgit -C "$W/c" push origin release/1
	[ "$status" -eq 0 ]
	grep -qx "A update $old $(git -C "$W/c" rev-parse HEAD) refs/heads/release/1" "$W/chan"
	git -C "$W/c" checkout -q -b topic
	cgit -C "$W/c" push origin topic
	[ "$status" -eq 0 ]
	! grep -q '^[AW]' "$W/chan" || false
}

@test "refused by the bridge, or no answer at all, the push is refused and nothing reaches upstream" {
	clone
	ask_wrapper "N not approved (operator)"
	git -C "$W/c" checkout -q -b release/2
	commit_file "$W/c" r2.txt
	cgit -C "$W/c" push origin release/2
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing push: not approved (operator)."* ]]
	[[ "$output" == *"nothing was pushed upstream"* ]]
	[[ "$output" == *"! [remote rejected] release/2"* ]]
	[ "$(upref refs/heads/release/2)" = none ]
	grep -q '^R refusing push: not approved (operator)' "$W/chan"
	# The bridge hangs up instead of answering.
	ask_wrapper ""
	cgit -C "$W/c" push origin release/2
	[ "$status" -ne 0 ]
	[[ "$output" == *"the bridge gave no answer about the operator's approval"* ]]
	[ "$(upref refs/heads/release/2)" = none ]
	# An answer that is neither Y nor N.
	ask_wrapper "maybe"
	cgit -C "$W/c" push origin release/2
	[ "$status" -ne 0 ]
	[[ "$output" == *"was not understood"* ]]
	[ "$(upref refs/heads/release/2)" = none ]
	# The policy refuses first: a push to a no-push branch never asks.
	ask_wrapper Y "SHIMBRIDGE_NO_PUSH=release/3"
	git -C "$W/c" checkout -q -b release/3
	cgit -C "$W/c" push origin release/3
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing to push to branch 'release/3'"* ]]
	! grep -q '^[AW]' "$W/chan" || false
}

@test "an ask branch without a socket to ask on is refused; another contract version is refused" {
	clone
	mkfifo "$W/refusal"
	cat "$W/refusal" >"$W/refusal.out" 3>&- &
	reader=$!
	WRAP_PRE="exec 3>'$W/refusal'" WRAP_ENV="SHIMBRIDGE_REFUSAL_FD=3 SHIMBRIDGE_ASK_BRANCHES=release/*" \
	    make_wrapper "$T/srv$N.sh" "$TOKEN" version=2
	git -C "$W/c" checkout -q -b release/4
	commit_file "$W/c" r4.txt
	cgit -C "$W/c" push origin release/4
	[ "$status" -ne 0 ]
	wait "$reader"
	[[ "$output" == *"there is no bridge here to ask"* ]]
	[ "$(upref refs/heads/release/4)" = none ]
	WRAP_ENV="SHIMBRIDGE_CONTRACT=1" make_wrapper "$T/bad$N.sh" "$TOKEN" version=2
	run "$T/bad$N.sh" git-receive-pack </dev/null
	[ "$status" -eq 128 ]
	[[ "$output" == *"SHIMBRIDGE_CONTRACT is 1; this shimbridge-git speaks version 2"* ]]
	WRAP_ENV="SHIMBRIDGE_ASK_BRANCHES=refs/tags/x,-y" make_wrapper "$T/bad$N.sh" "$TOKEN" version=2
	run "$T/bad$N.sh" git-receive-pack </dev/null
	[ "$status" -eq 128 ]
	[[ "$output" == *"SHIMBRIDGE_ASK_BRANCHES has an invalid item"* ]]
}

@test "without a token, upstream's words from the hook go to the bridge as M records, not to the client" {
	WRAP_UPURL="http://127.0.0.1:$PPORT/owner/$REPO.git" make_wrapper "$T/srv$N.sh" - version=2
	clone
	mkfifo "$W/pipe"
	cat "$W/pipe" >"$W/pipe.out" 3>&- &
	reader=$!
	WRAP_UPURL="http://127.0.0.1:$PPORT/owner/$REPO.git" WRAP_PRE="exec 3>'$W/pipe'" \
	    WRAP_ENV="SHIMBRIDGE_REFUSAL_FD=3" make_wrapper "$T/srv$N.sh" - version=2
	git -C "$W/c" checkout -q -b upstream-reject-m
	commit_file "$W/c" m.txt
	cgit -C "$W/c" push origin upstream-reject-m
	[ "$status" -ne 0 ]
	wait "$reader"
	# Upstream's reason: in the pipe for the bridge to redact, not in the client's output.
	grep -q '^M shimbridge: upstream: GH006: Protected branch update failed' "$W/pipe.out"
	grep -q '^M shimbridge: upstream refused the push' "$W/pipe.out"
	[[ "$output" != *"GH006"* ]] || false
	! grep -q '^R ' "$W/pipe.out" || false
	[ "$(upref refs/heads/upstream-reject-m)" = none ]
}

@test "without a token no host git holds a credential: the loopback injector adds it" {
	cat >"$T/spy$N" <<EOF
#!/usr/bin/python3 -I
import os, sys
with open("$W/spy.log", "a") as f:
    f.write("%s|%s\\n" % (" ".join(sys.argv[1:]), " ".join(sorted(os.environ))))
os.execv("/usr/bin/git", ["git"] + sys.argv[1:])
EOF
	chmod 755 "$T/spy$N"
	WRAP_GIT="$T/spy$N" WRAP_UPURL="http://127.0.0.1:$PPORT/owner/$REPO.git" \
	    make_wrapper "$T/srv$N.sh" - version=2
	clone
	git -C "$W/c" checkout -q -b via-injector
	commit_file "$W/c" i.txt
	cgit -C "$W/c" push origin via-injector
	[ "$status" -eq 0 ]
	[ "$(upref refs/heads/via-injector)" = "$(git -C "$W/c" rev-parse HEAD)" ]
	# Host git sent no credential of its own; the injector added it on every request.
	grep -F "/owner/$REPO.git/" "$T/proxy.jsonl" | grep -q 'git-receive-pack'
	! grep -F "/owner/$REPO.git/" "$T/proxy.jsonl" | grep -q '"client_auth": true' || false
	! upstream_requests '"auth": false' | grep -q . || false
	# No helper, no token variable, anywhere.
	grep -q ' fetch ' "$W/spy.log"
	# The push went upstream as the hook's own request: host git only built its pack.
	grep -q ' pack-objects ' "$W/spy.log"
	! grep -q ' push ' "$W/spy.log" || false
	! grep -qE 'credential\.helper=!|SHIMBRIDGE_TOKEN|SHIMBRIDGE_USERNAME' "$W/spy.log" || false

	# Against an upstream that wants a credential it fails at once, prompting nobody.
	WRAP_UPURL="$UPURL" make_wrapper "$T/direct$N.sh" - version=2
	start=$(date +%s)
	run timeout 20 "$T/direct$N.sh" git-upload-pack </dev/null
	[ "$status" -eq 128 ]
	[[ "$output" == *"cannot fetch $UPURL from upstream"* ]]
	[ $(($(date +%s) - start)) -lt 10 ]
}

@test "without a token, a push the injector refuses says the injector's reason, and nothing lands" {
	WRAP_UPURL="http://127.0.0.1:$PPORT/owner/$REPO.git" make_wrapper "$T/srv$N.sh" - version=2
	clone
	git -C "$W/c" checkout -q -b injector-refused
	commit_file "$W/c" r.txt
	printf 'shimbridge: the push was not sent: tag v9 is protected\n' >"$T/refuse-push"
	cgit -C "$W/c" push origin injector-refused
	rm -f "$T/refuse-push"
	[ "$status" -ne 0 ]
	[[ "$output" == *"push to upstream failed: upstream answered the push with HTTP 403: shimbridge: the push was not sent: tag v9 is protected"* ]]
	[ "$(upref refs/heads/injector-refused)" = none ]
	! git --git-dir="$MIRROR" rev-parse -q --verify refs/heads/injector-refused || false
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
	# The holder keeps the lock until the FIFO on its stdin is closed here; the
	# fetch must say it waits, still be waiting, and succeed once let go.
	local hold fetcher
	mkfifo "$W/hold"
	exec {hold}<>"$W/hold"
	flock "$MIRROR.lock" sh -c 'touch "$1"; read _ || :' _ "$W/held" <"$W/hold" 3>&- {hold}>&- &
	holder=$!
	sb_wait_for 30 test -e "$W/held"
	git -c protocol.ext.allow=always -C "$W/c" fetch origin >"$W/fetch.out" 2>&1 3>&- {hold}>&- &
	fetcher=$!
	sb_wait_for 30 grep -q "shimbridge: waiting for another git operation on this repository" \
	    "$W/fetch.out" || { cat "$W/fetch.out" >&2; false; }
	sleep 0.5
	kill -0 "$fetcher"
	exec {hold}>&-
	wait "$holder"
	status=0
	wait "$fetcher" || status=$?
	cat "$W/fetch.out" >>"$CLIENT_LOG"
	[ "$status" -eq 0 ] || { cat "$W/fetch.out" >&2; false; }

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

@test "a token upstream prints split across lines and across writes is still masked" {
	clone
	b64=$(printf %s "$TOKEN" | base64 -w0)
	cat >"$UP/echo-script" <<EOF
printf 'debug: token is %s' '${TOKEN:0:15}'; sleep 0.3; printf '%s\n' '${TOKEN:15:5}'; sleep 0.3
printf '%s\n' '${TOKEN:20}'
echo 'a line between'
printf 'b64: %s\n%s\n' '${b64:0:10}' '${b64:10}'
printf 'tiny: %s\n%s\n%s\n' '${TOKEN:0:6}' '${TOKEN:6:3}' '${TOKEN:9}'
printf 'sgr: %s\033[31m%s\033[0m%s\n' '${TOKEN:0:7}' '${TOKEN:7:7}' '${TOKEN:14}'
echo 'an innocent line'
EOF
	git -C "$W/c" checkout -q -b upstream-reject-3
	commit_file "$W/c" z
	cgit -C "$W/c" push origin upstream-reject-3
	[ "$status" -ne 0 ]
	[[ "$output" == *"upstream: [REDACTED]"* ]]
	[[ "$output" == *"GH006: Changes must be made through a pull request."* ]]
	[[ "$output" == *"upstream: a line between"* ]]
	[[ "$output" == *"upstream: an innocent line"* ]]
	[[ "$output" == *"upstream: sgr: [REDACTED]"* ]]
	for part in "${TOKEN:8:7}" "${TOKEN:15:5}" "${TOKEN:20}" "${b64:10}" "${TOKEN:9}" \
	    "${TOKEN:7:7}" "${TOKEN:14}"; do
		[[ "$output" != *"$part"* ]] || { echo "leaked: $part"; return 1; }
	done
	rm -f "$UP/echo-script"
}

@test "upstream progress is relayed as it comes when the client asked for it, and not otherwise" {
	clone
	upstream_commit quiet.txt one
	cgit -C "$W/c" fetch origin
	[ "$status" -eq 0 ]
	[[ "$output" != *"objects:"* ]] || false
	git -C "$W/c" checkout -q -b quiet
	commit_file "$W/c" q.txt
	cgit -C "$W/c" push origin quiet
	[ "$status" -eq 0 ]
	[[ "$output" != *"shimbridge: "*"objects:"* ]] || false

	WRAP_ENV="SHIMBRIDGE_PROGRESS=1" make_wrapper "$T/srv$N.sh" "$TOKEN" version=2
	upstream_commit loud.txt two
	cgit -C "$W/c" fetch origin
	[ "$status" -eq 0 ]
	# Upstream's meters for the fetch into the mirror, as git shows them.
	[[ "$output" == *"shimbridge: remote: Enumerating objects: "*", done."* ]]
	[[ "$output" == *"shimbridge: remote: Total "* ]]
	git -C "$W/c" checkout -q -b loud
	commit_file "$W/c" l.txt
	cgit -C "$W/c" push origin loud
	[ "$status" -eq 0 ]
	# The push upstream's own meters, through the hook (remote: to the client).
	[[ "$output" == *"remote: shimbridge: Writing objects: 100% ("* ]]
	[ "$(upref refs/heads/loud)" = "$(git -C "$W/c" rev-parse HEAD)" ]
}

@test "progress detection takes git's meters and nothing else" {
	# Upstream can fill a remote line with text of its choosing: that is never a meter.
	WRAP_ENV="SHIMBRIDGE_PROGRESS=1" make_wrapper "$T/srv$N.sh" "$TOKEN" version=2
	clone
	cat >"$UP/echo-script" <<EOF
echo 'Counting objects: ${TOKEN:0:16}'
echo '${TOKEN:16}'
echo 'Writing objects: 100% (3/3) (from a hook)'
EOF
	git -C "$W/c" checkout -q -b upstream-reject-4
	commit_file "$W/c" p.txt
	cgit -C "$W/c" push origin upstream-reject-4
	[ "$status" -ne 0 ]
	# Not relayed live as a meter: said with upstream's other words, split token masked.
	[[ "$output" == *"shimbridge: upstream: Writing objects: 100% (3/3) (from a hook)"* ]]
	[[ "$output" != *"shimbridge: remote: Writing objects: 100% (3/3) (from"* ]] || false
	[[ "$output" != *"${TOKEN:8:8}"* && "$output" != *"${TOKEN:16}"* ]] || false
	[[ "$output" == *"upstream: [REDACTED]"* ]]
	rm -f "$UP/echo-script"
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

@test "the quarantine of a push killed mid-way is removed at the next call once stale; fresh ones stay" {
	clone
	git -C "$W/c" checkout -q -b big
	head -c 30000000 /dev/urandom >"$W/c/big.bin"
	git -C "$W/c" add big.bin
	git -C "$W/c" -c user.name=A -c user.email=a@b commit -q -m big
	# As the bridge does when the sandbox's git goes (Ctrl-C): kill the whole group.
	setsid git -c protocol.ext.allow=always -C "$W/c" push origin big >"$W/big.out" 2>&1 3>&- &
	pusher=$!
	for _ in $(seq 500); do
		compgen -G "$MIRROR/objects/tmp_objdir-*/*" >/dev/null && break
		sleep 0.02
	done
	compgen -G "$MIRROR/objects/tmp_objdir-*" >/dev/null
	kill -KILL -- "-$pusher"
	wait "$pusher" || true
	sleep 0.2
	q=$(compgen -G "$MIRROR/objects/tmp_objdir-*")
	[ -d "$q" ]
	[ "$(upref refs/heads/big)" = none ]

	# Still fresh: the next call leaves it (a straggler might still write there).
	mkdir "$MIRROR/objects/tmp_objdir-incoming-Fresh1"
	cgit -C "$W/c" fetch origin
	[ "$status" -eq 0 ]
	[ -d "$q" ]
	# Stale: removed at the next call, under the mirror's lock; fresh ones stay.
	find "$q" -exec touch -h -d '10 minutes ago' {} +
	cgit -C "$W/c" fetch origin
	[ "$status" -eq 0 ]
	[ ! -e "$q" ]
	[ -d "$MIRROR/objects/tmp_objdir-incoming-Fresh1" ]
	git --git-dir="$MIRROR" fsck --strict --no-dangling
	# maintain cleans them too.
	find "$MIRROR/objects/tmp_objdir-incoming-Fresh1" -exec touch -h -d '1 hour ago' {} +
	run env -i SHIMBRIDGE_GIT=/usr/bin/git HOME="$T/home$N" "$BIN" maintain "$MIRROR"
	[ "$status" -eq 0 ]
	! compgen -G "$MIRROR/objects/tmp_objdir-*" >/dev/null || false
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

# Loose objects in a mirror's objects/17 (git's sample for gc.auto), and its packs.
loose17() { find "$MIRROR/objects/17" -type f 2>/dev/null | wc -l; }
packs() { find "$MIRROR/objects/pack" -name '*.pack' | wc -l; }

@test "a mirror past git's gc thresholds is gc'd at a call's start: loose objects packed, packs joined" {
	clone
	# 30 files whose blobs' names start with 17: one push leaves them loose in the
	# mirror (receive-pack unpacks fewer than 100 objects), past gc.auto's sample (27).
	"$PY" - "$W/c" <<'PY'
import hashlib, os, sys
n = i = 0
while n < 30:
    data = b"gc sample %d\n" % i
    i += 1
    if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest().startswith("17"):
        with open(os.path.join(sys.argv[1], "gc%02d.txt" % n), "wb") as f:
            f.write(data)
        n += 1
PY
	git -C "$W/c" add gc*.txt
	git -C "$W/c" -c user.name=Agent -c user.email=agent@example.com commit -q -m "gc sample"
	cgit -C "$W/c" push origin main
	[ "$status" -eq 0 ]
	[ "$(loose17)" -ge 30 ]
	# The next call finds them and gcs first; the fetch itself is served as usual.
	upstream_commit gc-next.txt next
	cgit -C "$W/c" pull -q --no-rebase origin main
	[ "$status" -eq 0 ]
	[ -f "$W/c/gc-next.txt" ]
	[ "$(loose17)" = 0 ]
	git --git-dir="$MIRROR" cat-file -e "$(git -C "$W/c" rev-parse HEAD:gc00.txt)"
	git --git-dir="$MIRROR" fsck --strict --no-dangling
	# More than gc.autoPackLimit (50) packs: joined into one at the next call.
	local i oid
	for i in $(seq 51); do
		oid=$(echo "pack $i" | git --git-dir="$MIRROR" hash-object -w --stdin)
		echo "$oid" | git --git-dir="$MIRROR" pack-objects -q "$MIRROR/objects/pack/pack" >/dev/null
	done
	git --git-dir="$MIRROR" prune-packed
	[ "$(packs)" -gt 51 ]
	cgit -C "$W/c" fetch origin
	[ "$status" -eq 0 ]
	[ "$(packs)" -le 2 ]
	git --git-dir="$MIRROR" fsck --strict --no-dangling
	# Below both thresholds nothing is done: the pack stays as it is.
	before=$(ls "$MIRROR/objects/pack")
	cgit -C "$W/c" fetch origin
	[ "$status" -eq 0 ]
	[ "$(ls "$MIRROR/objects/pack")" = "$before" ]
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
