#!/usr/bin/env bash
# shimbridge demo: a throwaway sandbox user runs gh and git through the shims against
# local fake GitHub servers, and we show that the token never reaches the sandbox.
# Run as root on Debian 12 via `make demo` (which installs deps and builds first).
# Everything it creates is removed at the end, also on Ctrl-C.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
GROUP=sbdemo-sock
RUNNER=sbdemo-runner
AGENT=sbdemo-agent
D=
PIDS=()

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
note() { printf '    %s\n' "$*"; }
show() { printf '    $ %s\n' "$*"; }

cleanup() {
	set +e
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	pkill -KILL -u "$AGENT" 2>/dev/null
	pkill -KILL -u "$RUNNER" 2>/dev/null
	userdel -r "$AGENT" >/dev/null 2>&1
	userdel "$RUNNER" >/dev/null 2>&1
	groupdel "$GROUP" >/dev/null 2>&1
	[ -n "$D" ] && rm -rf "$D"
}
trap cleanup EXIT
trap 'echo; echo "interrupted; cleaning up"; exit 130' INT TERM

[ "$(id -u)" = 0 ] || { echo "demo: run as root (it creates users)" >&2; exit 1; }
for b in shimbridged shim shimbridge-git; do
	[ -x "$ROOT/build/$b" ] || { echo "demo: build/$b missing; run make demo" >&2; exit 1; }
done

D=$(mktemp -d /tmp/shimbridge-demo.XXXXXX)
chmod 755 "$D"

step "Install into a throwaway prefix ($D/prefix, staged under $D/stage)"
sh "$ROOT/installer/install.sh" --prefix "$D/prefix" --destdir "$D/stage" --prebuilt "$ROOT/build" \
	> "$D/install.log" 2>&1 || { cat "$D/install.log"; exit 1; }
BIN=$(dirname "$(find "$D/stage" -name shimbridged -type f | head -n 1)")
SHIM=$(find "$D/stage" -name shimbridge-shim -type f | head -n 1)
GITHELPER=$(find "$D/stage" -name shimbridge-git -type f | head -n 1)
if [ ! -x "$BIN/shimbridged" ] || [ ! -x "$SHIM" ] || [ ! -x "$GITHELPER" ]; then
	echo "demo: install layout unexpected (see $D/install.log)" >&2
	exit 1
fi
chmod 755 "$D/stage" 2>/dev/null || true
find "$D/stage" -type d -exec chmod go+rx {} +
note "daemon: $BIN/shimbridged"
note "shim:   $SHIM ($(stat -c %s "$SHIM") bytes, $(file -b "$SHIM" | grep -o 'statically linked'))"

step "Create a throwaway sandbox user ($AGENT) and the runner user ($RUNNER)"
getent group "$GROUP" >/dev/null || groupadd "$GROUP"
id "$RUNNER" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$RUNNER"
id "$AGENT" >/dev/null 2>&1 || useradd -m -s /bin/bash -G "$GROUP" "$AGENT"
AHOME=$(getent passwd "$AGENT" | cut -d: -f6)
note "$(id "$AGENT")"

step "Start local fake GitHub servers (API over TLS for gh, smart HTTP for git)"
mkdir -p "$D/gh" "$D/git" "$D/pub" "$D/etc/sessions.d" "$D/run" "$D/state" "$D/log" "$D/shims"
# The fake servers' own logs record the token they receive: root-only, like the bridge's files.
chmod 700 "$D/etc" "$D/log" "$D/gh" "$D/git"
chmod 755 "$D/run" "$D/shims" "$D/pub"
TOKEN="ghp_demo$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s' "$TOKEN" > "$D/etc/github-token"
chmod 600 "$D/etc/github-token"
cp "$D/etc/github-token" "$D/gh/token"
cp "$D/etc/github-token" "$D/git/token"
chmod 600 "$D/gh/token" "$D/git/token"
sh "$ROOT/tests/fixtures/mkcerts.sh" "$D/gh" >/dev/null
install -m 0644 "$D/gh/ca.pem" "$D/pub/ca.pem"
"$PY" "$ROOT/tests/fixtures/fakegh.py" --cert "$D/gh/server.pem" --key "$D/gh/server.key" \
	--token-file "$D/gh/token" --port-file "$D/gh/port" --log "$D/gh/requests.log" >"$D/gh/server.out" 2>&1 &
PIDS+=($!)
mkdir -p "$D/git/root/octo"
git init -q --bare -b main "$D/git/root/octo/demo.git"
git -C "$D/git/root/octo/demo.git" config http.receivepack true
seed=$(mktemp -d)
git -C "$seed" init -q -b main
printf '# demo\n\nA repository served by a fake GitHub.\n' > "$seed/README.md"
git -C "$seed" add README.md
git -C "$seed" -c user.name=demo -c user.email=demo@localhost commit -q -m "Initial commit"
git -C "$seed" push -q "$D/git/root/octo/demo.git" main
rm -rf "$seed"
"$PY" "$ROOT/tests/fixtures/githttp.py" --root "$D/git/root" --token-file "$D/git/token" \
	--port-file "$D/git/port" --log "$D/git/requests.log" >"$D/git/server.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$D/gh/port" ] && [ -s "$D/git/port" ] && break; sleep 0.1; done
GHPORT=$(cat "$D/gh/port")
GITPORT=$(cat "$D/git/port")
note "fake GitHub API:   https://localhost:$GHPORT (checks Authorization: token ...)"
note "fake git server:   http://127.0.0.1:$GITPORT (checks Basic auth)"

step "Start the bridge with the demo config"
cat > "$D/etc/config.json" <<JSON
{
  "socket": {"path": "$D/run/bridge.sock", "group": "$GROUP", "mode": 432},
  "runner": "$RUNNER",
  "audit_log": "$D/log/audit.log",
  "state_dir": "$D/state",
  "secrets": {"github": {"source": "file", "path": "$D/etc/github-token"}},
  "tools": {
    "gh": {"path": "/usr/bin/gh", "profile": "gh", "host": "localhost:$GHPORT",
           "secrets": {"GH_ENTERPRISE_TOKEN": "github"}, "env": {"SSL_CERT_FILE": "$D/pub/ca.pem"}}
  },
  "git": {"path": "/usr/bin/git", "helper": "$GITHELPER",
          "hosts": {"github.com": {"upstream": "http://127.0.0.1:$GITPORT", "secret": "github"}}}
}
JSON
printf '{"name": "demo", "user": "%s", "tools": ["gh", "git"], "repos": ["octo/demo"]}\n' "$AGENT" \
	> "$D/etc/sessions.d/demo.json"
chmod 600 "$D/etc/config.json" "$D/etc/sessions.d/demo.json"
"$BIN/shimbridged" -c "$D/etc/config.json" --check | sed 's/^/    /'
"$BIN/shimbridged" -c "$D/etc/config.json" >"$D/log/daemon.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do [ -S "$D/run/bridge.sock" ] && break; sleep 0.05; done
install -m 0755 "$SHIM" "$D/shims/shimbridge-shim"
ln -sf shimbridge-shim "$D/shims/gh"
ln -sf shimbridge-shim "$D/shims/git-remote-shimbridge"
cat > "$AHOME/.gitconfig" <<GIT
[user]
	name = Demo Agent
	email = agent@localhost
[url "shimbridge::https://github.com/"]
	insteadOf = https://github.com/
	insteadOf = git@github.com:
[init]
	defaultBranch = main
GIT
chown "$AGENT": "$AHOME/.gitconfig"
note "socket $D/run/bridge.sock, sandbox PATH starts with $D/shims"

# Run a command as the agent with a clean login-like environment; echo it first.
agent() {
	show "$*"
	(cd "$AHOME/${CWD:-}" && runuser -u "$AGENT" -- env -i HOME="$AHOME" USER="$AGENT" \
		PATH="$D/shims:/usr/bin:/bin" SHIMBRIDGE_SOCKET="$D/run/bridge.sock" LANG=C.UTF-8 \
		bash -c "$*") 2>&1 | tee -a "$D/agent-output.txt" | sed 's/^/      /'
	return "${PIPESTATUS[0]}"
}

step "As the sandbox user, through the shims"
agent 'gh api user | grep -o "\"login\":\"[^\"]*\""'
agent 'gh pr list -R octo/demo'
set +e
agent 'gh auth token'
rc=$?
set -e
note "-> refused with exit $rc (126 = denied by policy): the token is not printable"
set +e
agent 'gh api user --jq .login'
rc=$?
set -e
note "-> refused with exit $rc: jq runs inside gh on the host and could read its environment; pipe to jq in the sandbox"
agent 'git clone -q https://github.com/octo/demo.git && ls demo'
CWD=demo agent 'git checkout -q -b agent-change && echo "change by the agent" >> README.md && git commit -qam "Agent change" && git push -q origin agent-change 2>&1; echo "push exit: $?"'
CWD=demo agent 'gh pr create --title "Agent change" --body "Made in the sandbox" --base main'
agent 'gh pr list -R octo/demo'

step "Where did the token go?"
note "upstream saw it: $(grep -c "$TOKEN" "$D/gh/requests.log") API requests carried it; git server: $(grep -c '"auth": true' "$D/git/requests.log") authenticated requests"
note "upstream now has: $(git -C "$D/git/root/octo/demo.git" for-each-ref --format='%(refname:short)' refs/heads | tr '\n' ' ')"
leaks=0
check() {
	if eval "$2" 2>/dev/null | grep -qF "$TOKEN"; then
		note "LEAK: $1"
		leaks=$((leaks + 1))
	else
		note "not in $1"
	fi
}
check "the agent's command output" "cat '$D/agent-output.txt'"
check "the agent's environment" "runuser -u '$AGENT' -- env"
check "the agent's files" "grep -rF '$TOKEN' '$AHOME' 2>/dev/null"
check "any /proc/*/environ or cmdline the agent can read" \
	"runuser -u '$AGENT' -- sh -c 'for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat \$f 2>/dev/null; echo; done'"
check "files under /tmp the agent can read" \
	"runuser -u '$AGENT' -- sh -c 'grep -rsF \"$TOKEN\" /tmp /var/tmp /dev/shm 2>/dev/null'"
note "audit log (root-only): $(wc -l < "$D/log/audit.log") records, token occurrences: $(grep -cF "$TOKEN" "$D/log/audit.log" || true)"
if [ "$leaks" != 0 ]; then
	echo "demo: the token leaked in $leaks place(s)" >&2
	exit 1
fi
step "Done: gh and git worked through the bridge, and the token never appeared in the sandbox."
