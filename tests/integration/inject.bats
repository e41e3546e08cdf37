#!/usr/bin/env bats
# The credential injector (bridge/inject.c) on its own, run by tests/tools/injectd
# (the ASan+UBSan build): the real gh 2.23 talks plain HTTP over the injector's Unix
# socket (GH_CONFIG_DIR/config.yml: http_unix_socket) holding only a placeholder;
# the injector checks each request, adds the real token and forwards it over TLS to
# tests/fixtures/fakegh.py, which logs every request with its body. git 2.39 goes
# the same way (Basic auth) to tests/fixtures/githttp.py over HTTPS.
# Run under the suite lock: flock /tmp/sb-itest.lock bats tests/integration/inject.bats

bats_require_minimum_version 1.5.0
load lib

REPO=o/r
PH=shimbridge-placeholder-not-a-token

setup_file() {
	command -v /usr/bin/gh >/dev/null || skip "gh not installed"
	INJECTD=${SB_INJECTD:-$SB_ROOT/build/tools/san/injectd}
	[ -x "$INJECTD" ] || { echo "$INJECTD missing: make build/tools/san/injectd" >&2; return 1; }
	SB_DIR=$(mktemp -d "/tmp/$SB_LANE-inject.XXXXXX")
	chmod 755 "$SB_DIR"
	TOKEN="ghs_real$RANDOM$RANDOM$RANDOM"
	export INJECTD SB_DIR TOKEN
	sb_fakegh_start "$TOKEN" --log-bodies
	(umask 077 && printf '%s\n' "$TOKEN" >"$SB_DIR/secret")
	# A CA that did not sign fakegh's certificate.
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=other-ca -keyout "$SB_DIR/other.key" -out "$SB_DIR/other-ca.pem" 2>/dev/null
	inj_start main --upstream "https://localhost:$FAKEGH_PORT" --host "localhost:$FAKEGH_PORT" \
		--ca "$FAKEGH_CA" --placeholder "$PH" --repo "$REPO"
	inj_start badca --upstream "https://localhost:$FAKEGH_PORT" --host "localhost:$FAKEGH_PORT" \
		--ca "$SB_DIR/other-ca.pem" --placeholder "$PH" --repo "$REPO"
}

teardown_file() {
	[ -n "${SB_DIR:-}" ] || return 0
	local f rc=0
	for f in "$SB_DIR"/*.injpid; do
		[ -e "$f" ] || continue
		kill -TERM "$(cat "$f")" 2>/dev/null
	done
	for f in "$SB_DIR"/*.injpid; do
		[ -e "$f" ] || continue
		sb_wait_for 10 eval "! kill -0 $(cat "$f") 2>/dev/null" || kill -KILL "$(cat "$f")"
	done
	sb_fakegh_stop
	[ -d "$SB_DIR/git/srv" ] && sb_fakegh_kill "$SB_DIR/git/srv"
	for f in "$SB_DIR"/hang/*.pid; do
		[ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	# The sanitized injector must have exited cleanly (no leak or error report).
	if grep -l -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$SB_DIR"/*.injerr \
		2>/dev/null; then
		cat "$SB_DIR"/*.injerr >&2
		rc=1
	fi
	rm -rf "$SB_DIR"
	return "$rc"
}

# inj_start NAME OPTIONS... — an injector on $SB_DIR/NAME.sock (or tcp with --listen),
# auditing to $SB_DIR/NAME.audit; its gh config dir is $SB_DIR/NAME.gh.
inj_start() {
	local name=$1 listen=unix:$SB_DIR/$1.sock _
	shift
	[[ " $* " == *" --listen "* ]] && listen=
	"$INJECTD" ${listen:+--listen "$listen"} --secret-file "$SB_DIR/secret" \
		--audit "$SB_DIR/$name.audit" --ready "$SB_DIR/$name.ready" "$@" \
		</dev/null >"$SB_DIR/$name.injout" 2>"$SB_DIR/$name.injerr" 3>&- &
	echo $! >"$SB_DIR/$name.injpid"
	sb_wait_for 10 test -s "$SB_DIR/$name.ready" || { cat "$SB_DIR/$name.injerr" >&2; return 1; }
	mkdir -p "$SB_DIR/$name.gh"
	printf 'http_unix_socket: %s\n' "$SB_DIR/$name.sock" >"$SB_DIR/$name.gh/config.yml"
}

# ghi NAME [VAR=VALUE...] ARGS... — the real gh through injector NAME, placeholder only.
ghi() {
	local name=$1 envs=()
	shift
	while [ $# -gt 0 ] && [[ $1 == [A-Z]*=* ]]; do
		envs+=("$1")
		shift
	done
	mkdir -p "$SB_DIR/home"
	(cd "$SB_DIR/home" && exec env -i PATH=/usr/bin:/bin HOME="$SB_DIR/home" \
		GH_CONFIG_DIR="$SB_DIR/$name.gh" GH_HOST="localhost:$FAKEGH_PORT" \
		GH_ENTERPRISE_TOKEN="$PH" GH_PROMPT_DISABLED=1 GH_NO_UPDATE_NOTIFIER=1 NO_COLOR=1 \
		GH_PAGER=cat "${envs[@]}" /usr/bin/gh "$@")
}

# Requests fakegh logged so far.
mark() {
	wc -l <"$FAKEGH_LOG"
}

# check_log FROM N — fakegh logged exactly N requests after line FROM (N may be "+":
# at least one), each with the real token in Authorization; neither the token nor the
# placeholder appears anywhere else in the whole log (bodies included).
check_log() {
	"$PY" - "$FAKEGH_LOG" "$1" "$2" "$TOKEN" "$PH" <<'EOF'
import json, sys
path, start, want, token, ph = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
lines = open(path).read().splitlines()
new = lines[start:]
if want == "+" and not new or want != "+" and len(new) != int(want):
    sys.exit("expected %s new requests, got %d:\n%s" % (want, len(new), "\n".join(new)))
for l in new:
    e = json.loads(l)
    if e["authorization"] != "token " + token or not e["auth_ok"]:
        sys.exit("bad authorization upstream: %s" % l)
for l in lines:
    e = json.loads(l)
    e.pop("authorization", None)
    rest = json.dumps(e)
    if token in rest:
        sys.exit("the token appears outside Authorization: %s" % l)
    if ph in l and e.get("auth_ok", True):
        sys.exit("the placeholder reached fakegh: %s" % l)
EOF
}

# raw NAME BYTES-FILE — send a raw request to injector NAME's socket; print the answer.
raw() {
	"$PY" - "$SB_DIR/$1.sock" "$2" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sys.argv[1])
data = open(sys.argv[2], "rb").read()
try:
    s.sendall(data)
except OSError:
    pass
out = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
except OSError:
    pass
sys.stdout.write(out.decode("latin-1"))
EOF
}

@test "gh api user through the injector: real token upstream, placeholder never" {
	local m
	m=$(mark)
	run ghi main api user
	[ "$status" -eq 0 ]
	[[ $output == *'"login":"octo-agent"'* ]]
	check_log "$m" 1
	run tail -n 1 "$SB_DIR/main.audit"
	[[ $output == *'"summary":"GET /api/v3/user","status":200'* ]]
	[[ $output == *'"refusal":null'* ]]
	sb_refute_contains "$TOKEN" "$(cat "$SB_DIR/main.audit")" audit
}

@test "gh pr list -R o/r (GraphQL) through the injector" {
	local m
	m=$(mark)
	run ghi main pr list -R "$REPO"
	[ "$status" -eq 0 ]
	[[ $output == *"1	Add widget support	feature/widgets	OPEN"* ]]
	check_log "$m" +
	grep -q '"graphql": "PullRequestList"' "$FAKEGH_LOG"
}

@test "gh issue create -R o/r: the body goes up, the token only in Authorization" {
	local m
	m=$(mark)
	run ghi main issue create -R "$REPO" --title "via injector" --body "body text 42"
	[ "$status" -eq 0 ]
	[[ $output == *"https://localhost:$FAKEGH_PORT/$REPO/issues/"* ]]
	check_log "$m" +
	tail -n +$((m + 1)) "$FAKEGH_LOG" | grep -q 'body text 42'
	run ghi main issue view -R "$REPO" "${output##*/}"
	[ "$status" -eq 0 ]
	[[ $output == *"body text 42"* ]]
}

@test "the placeholder alone is rejected by the server (injector bypassed)" {
	local m
	m=$(mark)
	run env -i PATH=/usr/bin:/bin HOME="$SB_DIR/home" GH_CONFIG_DIR="$SB_DIR/direct.gh" \
		GH_HOST="localhost:$FAKEGH_PORT" GH_ENTERPRISE_TOKEN="$PH" SSL_CERT_FILE="$FAKEGH_CA" \
		GH_PROMPT_DISABLED=1 GH_NO_UPDATE_NOTIFIER=1 /usr/bin/gh api user
	[ "$status" -ne 0 ]
	[[ $output == *"Bad credentials"* ]]
	run tail -n 1 "$FAKEGH_LOG"
	[[ $output == *'"auth_ok": false'* ]]
}

@test "a request for another host is refused and never sent" {
	local m
	m=$(mark)
	run ghi main GH_HOST=evil.example api user
	[ "$status" -ne 0 ]
	[[ $output == *"this call may only talk to localhost:$FAKEGH_PORT, not evil.example"* ]]
	[[ $output == *"HTTP 403"* ]]
	[ "$(mark)" -eq "$m" ]
	run tail -n 1 "$SB_DIR/main.audit"
	[[ $output == *'"status":403'* && $output == *'not evil.example'* ]]
}

@test "a credential other than the placeholder is refused and never sent" {
	local m
	m=$(mark)
	run ghi main GH_ENTERPRISE_TOKEN=guessed-token api user
	[ "$status" -ne 0 ]
	[[ $output == *"only this call's placeholder is accepted"* ]]
	[ "$(mark)" -eq "$m" ]
}

@test "the HTTP policy's refusal reaches gh as a 403 message, nothing is sent" {
	local m
	m=$(mark)
	run ghi main api repos/forbidden/x
	[ "$status" -ne 0 ]
	[[ $output == *"HTTP 403"* ]]
	[[ $output == *"shimbridge: "* ]]
	[ "$(mark)" -eq "$m" ]
	run tail -n 1 "$SB_DIR/main.audit"
	[[ $output == *'"status":403'* && $output == *'forbidden'* ]]
}

@test "an upstream certificate from another CA: refused, nothing sent in clear" {
	local m
	m=$(mark)
	run ghi badca api user
	[ "$status" -ne 0 ]
	[[ $output == *"TLS certificate of localhost:$FAKEGH_PORT was not accepted"* ]]
	[[ $output == *"HTTP 502"* ]]
	[ "$(mark)" -eq "$m" ]
	run tail -n 1 "$SB_DIR/badca.audit"
	[[ $output == *'"status":502'* && $output == *'not accepted'* ]]
}

@test "oversized request head (over 64 KiB): refused before anything is sent" {
	local m
	m=$(mark)
	"$PY" -c 'import sys
sys.stdout.write("GET /api/v3/user HTTP/1.1\r\nHost: localhost:%s\r\nX-Big: %s\r\n\r\n" % (sys.argv[1], "a" * 70000))' \
		"$FAKEGH_PORT" >"$SB_DIR/bighead"
	run raw main "$SB_DIR/bighead"
	[[ $output == "HTTP/1.1 4"* ]]
	[[ $output != "HTTP/1.1 200"* ]]
	[ "$(mark)" -eq "$m" ]
}

@test "oversized request body (over 25 MiB): 413 before the body is read" {
	local m
	m=$(mark)
	printf 'POST /api/graphql HTTP/1.1\r\nHost: localhost:%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{' \
		"$FAKEGH_PORT" $((25 * 1024 * 1024 + 1)) >"$SB_DIR/bigbody"
	run raw main "$SB_DIR/bigbody"
	[[ $output == "HTTP/1.1 413"* ]]
	[ "$(mark)" -eq "$m" ]
}

@test "methods other than GET/POST/PATCH/PUT/DELETE/HEAD and bodies on GET are refused" {
	local m
	m=$(mark)
	printf 'OPTIONS /api/v3/user HTTP/1.1\r\nHost: localhost:%s\r\nConnection: close\r\n\r\n' \
		"$FAKEGH_PORT" >"$SB_DIR/opt"
	run raw main "$SB_DIR/opt"
	[[ $output == "HTTP/1.1 403"* ]]
	[[ $output == *'"message":"shimbridge: only GET, POST'* ]]
	printf 'GET /api/v3/user HTTP/1.1\r\nHost: localhost:%s\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc' \
		"$FAKEGH_PORT" >"$SB_DIR/getbody"
	run raw main "$SB_DIR/getbody"
	[[ $output == "HTTP/1.1 403"* ]]
	printf 'GET /api/v3/user HTTP/1.1\r\nHost: localhost:%s\r\nHost: localhost:%s\r\nConnection: close\r\n\r\n' \
		"$FAKEGH_PORT" "$FAKEGH_PORT" >"$SB_DIR/twohost"
	run raw main "$SB_DIR/twohost"
	[[ $output == "HTTP/1.1 403"* ]]
	[ "$(mark)" -eq "$m" ]
}

@test "two requests on one kept-alive connection (with Cookie, Proxy-Authorization) both go up with the real token only" {
	local m
	m=$(mark)
	printf 'GET /api/v3/user HTTP/1.1\r\nHost: localhost:%s\r\nCookie: c=1\r\nProxy-Authorization: Basic eDp5\r\nX-Keep: yes\r\n\r\nGET /api/v3/user HTTP/1.1\r\nHost: localhost:%s\r\nConnection: close\r\n\r\n' \
		"$FAKEGH_PORT" "$FAKEGH_PORT" >"$SB_DIR/two"
	run raw main "$SB_DIR/two"
	[ "$(grep -o 'HTTP/1.1 200 OK' <<<"$output" | wc -l)" -eq 2 ]
	check_log "$m" 2
}

@test "git clone and push over the injector: Basic auth added, TLS upstream, 8 MB streamed" {
	command -v git >/dev/null || skip "git not installed"
	local d=$SB_DIR/git srv=$SB_DIR/git/srv
	mkdir -p "$d/root/o" "$srv"
	git init -q --bare -b main "$d/root/o/r.git"
	git init -q -b main "$d/src"
	head -c 8000000 /dev/urandom >"$d/src/blob"
	git -C "$d/src" add blob
	git -C "$d/src" -c user.name=t -c user.email=t@t commit -qm one
	git -C "$d/src" push -q "$d/root/o/r.git" main
	"$PY" "$SB_ROOT/tests/fixtures/githttp.py" --root "$d/root" --token-file "$SB_DIR/secret" \
		--port-file "$srv/port" --log "$d/git.log" --cert "$SB_DIR/certs/server.pem" \
		--key "$SB_DIR/certs/server.key" </dev/null >/dev/null 2>"$d/githttp.err" 3>&- &
	echo $! >"$srv/pid"
	sb_wait_for 10 test -s "$srv/port"
	inj_start git --api git --auth basic --user x-access-token --listen tcp:0 \
		--upstream "https://localhost:$(cat "$srv/port")" --ca "$FAKEGH_CA" \
		--repo "$REPO" --push
	local port
	port=$(cat "$SB_DIR/git.ready")
	run env -i PATH=/usr/bin:/bin HOME="$d" GIT_TERMINAL_PROMPT=0 GIT_CONFIG_NOSYSTEM=1 \
		git clone -q "http://127.0.0.1:$port/o/r.git" "$d/clone"
	[ "$status" -eq 0 ]
	cmp "$d/clone/blob" "$d/src/blob"
	head -c 3000000 /dev/urandom >"$d/clone/b2"
	git -C "$d/clone" add b2
	git -C "$d/clone" -c user.name=t -c user.email=t@t commit -qm two
	run env -i PATH=/usr/bin:/bin HOME="$d" GIT_TERMINAL_PROMPT=0 GIT_CONFIG_NOSYSTEM=1 \
		git -C "$d/clone" push -q origin main
	[ "$status" -eq 0 ]
	[ "$(git -C "$d/root/o/r.git" rev-parse main)" = "$(git -C "$d/clone" rev-parse main)" ]
	# Every request reached githttp authenticated; none without.
	! grep -q '"auth": false' "$d/git.log"
	grep -q '"auth": true' "$d/git.log"
	grep -q '"summary":"POST /o/r.git/git-receive-pack","status":200' "$SB_DIR/git.audit"
	# A git request carrying its own Authorization is refused.
	printf 'GET /o/r.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic eDp5\r\nConnection: close\r\n\r\n' \
		>"$SB_DIR/gitauth"
	run "$PY" -c 'import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(open(sys.argv[2], "rb").read())
print(s.recv(65536).decode("latin-1"))' "$port" "$SB_DIR/gitauth"
	[[ $output == "HTTP/1.1 403"* ]]
}

@test "stopping the injector with a request in flight: audited with status 0, freed cleanly" {
	local d=$SB_DIR/hang port
	mkdir -p "$d"
	# An upstream that accepts (saying so in $d/accepted) and never answers.
	"$PY" -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(5)
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); open(sys.argv[1], "w").close(); time.sleep(60)' "$d/accepted" \
		>"$d/port" </dev/null 2>/dev/null 3>&- &
	echo $! >"$d/blackhole.pid"
	sb_wait_for 10 test -s "$d/port"
	port=$(cat "$d/port")
	inj_start hang --upstream "http://127.0.0.1:$port" --host h --placeholder "$PH" --repo "$REPO"
	"$PY" -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b"GET /api/v3/user HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"); time.sleep(60)' \
		"$SB_DIR/hang.sock" </dev/null 3>&- &
	echo $! >"$d/client.pid"
	# In flight: the injector has passed the request on and waits for the answer.
	sb_wait_for 15 test -e "$d/accepted"
	kill -TERM "$(cat "$SB_DIR/hang.injpid")"
	sb_wait_for 10 eval "! kill -0 $(cat "$SB_DIR/hang.injpid") 2>/dev/null"
	kill "$(cat "$d/blackhole.pid")" "$(cat "$d/client.pid")" 2>/dev/null || true
	run cat "$SB_DIR/hang.audit"
	[[ $output == *'"summary":"GET /api/v3/user","status":0'* ]]
	[[ $output == *'the call ended before the answer was complete'* ]]
	run ! grep -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$SB_DIR/hang.injerr"
}
