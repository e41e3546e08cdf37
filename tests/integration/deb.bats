#!/usr/bin/env bats
# The Debian package (issue 12 item 1), for real: dpkg-buildpackage builds it from
# a copy of the tree, lintian finds no error, its files are exactly what
# installer/install.sh stages, `apt-get install ./shimbridge_VERSION_amd64.deb`
# makes users and directories (sysusers.d/tmpfiles.d), one shim call goes through
# the installed daemon (started by hand as the unit would), `apt-get remove`
# stops it and keeps config and secrets, `apt-get purge` leaves nothing behind.
#
# It installs into the real system, so it runs only where shimbridge is not
# installed otherwise: if /etc/shimbridge, /usr/sbin/shimbridged or the package
# exist and this suite did not make them (marker below), every test is skipped
# with that reason and nothing is touched. A crashed earlier run of this suite
# (the marker exists) is purged first. teardown_file purges whatever happened.

bats_require_minimum_version 1.5.0
BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-300}
load lib

MARK=/var/lib/sbt-deb-test.marker
DEBUSER=$SB_LANE-deb-alice

# Purge the package and everything the suite made (idempotent).
deb_cleanup() {
	local p
	for p in $(pgrep -x shimbridged); do
		[ "$(readlink "/proc/$p/exe")" = /usr/sbin/shimbridged ] && kill -KILL "$p"
	done
	if dpkg-query -W -f '${Status}' shimbridge 2>/dev/null | grep -q -v 'not-installed'; then
		DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq shimbridge >/dev/null 2>&1 ||
			dpkg --purge shimbridge >/dev/null 2>&1 || true
	fi
	pkill -KILL -u "$DEBUSER" 2>/dev/null || true
	userdel -r "$DEBUSER" >/dev/null 2>&1 || true
	if [ -f "$MARK" ]; then
		# accounts the package made (Debian keeps them on purge; the test does not)
		grep -q '^made-accounts$' "$MARK" && {
			pkill -KILL -u shimbridge-runner 2>/dev/null || true
			userdel shimbridge-runner >/dev/null 2>&1 || true
			for p in shimbridge-runner shimbridge shimbridge-audit; do
				groupdel "$p" >/dev/null 2>&1 || true
			done
		}
		rm -rf /etc/shimbridge /var/lib/shimbridge /var/log/shimbridge /run/shimbridge
		rm -f "$MARK"
	fi
}

setup_file() {
	[ "$(id -u)" = 0 ] || skip "needs root (installs a package)"
	command -v dpkg-buildpackage >/dev/null || skip "dpkg-buildpackage is missing (tests/deps.sh installs dpkg-dev debhelper)"
	command -v apt-get >/dev/null || skip "apt-get is missing (not Debian)"
	[ -f "$MARK" ] && deb_cleanup
	if [ -e /etc/shimbridge ] || [ -e /usr/sbin/shimbridged ] ||
		dpkg-query -W -f '${Status}' shimbridge 2>/dev/null | grep -q ' installed'; then
		export DEB_SKIP="shimbridge is installed on this machine (not by this test): not touching it"
		return 0
	fi
	DEB_TMP=$(mktemp -d "/tmp/$SB_LANE-deb.XXXXXX")
	chmod 755 "$DEB_TMP"
	export DEB_TMP
	VERSION=$(make -s -C "$SB_ROOT" --no-print-directory print-version)
	export VERSION
	local src=$DEB_TMP/shimbridge-$VERSION
	mkdir -p "$src"
	(cd "$SB_ROOT" && git ls-files -co --exclude-standard | grep -v -E '^build' |
		while read -r f; do [ -e "$f" ] && printf '%s\n' "$f"; done | tar -cf - -T -) | tar -xf - -C "$src"
	(cd "$src" && DEB_BUILD_OPTIONS="parallel=2 nocheck" dpkg-buildpackage -us -uc -b \
		>"$DEB_TMP/build.log" 2>&1) || { tail -n 40 "$DEB_TMP/build.log" >&3; return 1; }
	DEB=$DEB_TMP/shimbridge_${VERSION}_amd64.deb
	export DEB
	if getent group shimbridge >/dev/null || id shimbridge-runner >/dev/null 2>&1; then
		echo keep-accounts >"$MARK"
	else
		echo made-accounts >"$MARK"
	fi
}

teardown_file() {
	[ -n "${DEB_SKIP:-}" ] || deb_cleanup
	[ -z "${DEB_TMP:-}" ] || rm -rf "$DEB_TMP"
	sb_reap_suite
}

setup() {
	[ -z "${DEB_SKIP:-}" ] || skip "$DEB_SKIP"
}

teardown() {
	sb_reap
}

@test "dpkg-buildpackage built shimbridge_VERSION_amd64.deb; changelog agrees with the Makefile" {
	[ -f "$DEB" ]
	[ "$(dpkg-deb -f "$DEB" Version)" = "$VERSION" ]
	[ "$(dpkg-parsechangelog -l "$SB_ROOT/debian/changelog" -S Version)" = "$VERSION" ]
}

@test "lintian: no errors (kept warnings are overridden with reasons)" {
	command -v lintian >/dev/null || skip "lintian is missing (tests/deps.sh installs it)"
	run lintian "$DEB"
	echo "$output"
	[ "$(printf '%s\n' "$output" | grep -c -E '^(E|W): ')" = 0 ]
}

@test "the package holds exactly the files installer/install.sh stages" {
	local st=$DEB_TMP/stage
	sh "$SB_ROOT/installer/install.sh" --prefix /usr --destdir "$st" --prebuilt "$SB_BUILD" \
		--unitdir /lib/systemd/system >/dev/null
	(cd "$st" && find . \( -type f -o -type l \) | grep -v -E '^\./(usr/share/shimbridge/manifest|var/)' |
		sed 's/\.gz$//' | sort) >"$DEB_TMP/script.list"
	dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ {print $6}' | sed 's/\.gz$//' |
		grep -v -E '^\./usr/share/(doc/shimbridge/(changelog|copyright)|lintian/overrides/shimbridge)$' | sort >"$DEB_TMP/deb.list"
	diff "$DEB_TMP/script.list" "$DEB_TMP/deb.list"
}

@test "install, one shim call through the installed daemon, remove keeps config and secrets, purge leaves nothing" {
	DEBIAN_FRONTEND=noninteractive run apt-get install -y -qq --no-install-recommends "$DEB"
	echo "$output"
	[ "$status" -eq 0 ]
	# what install.sh makes: programs, accounts, directories with their modes
	[ -x /usr/sbin/shimbridged ] && [ -x /usr/sbin/shimbridge ]
	[ -x /usr/libexec/shimbridge/shimbridge-git ]
	[ -x /usr/libexec/shimbridge/shimbridge-jail ]
	[ "$(readlink /usr/libexec/shimbridge/shims/gh)" = shimbridge-shim ]
	getent group shimbridge >/dev/null && getent group shimbridge-audit >/dev/null
	id shimbridge-runner
	[ "$(stat -c '%a %U %G' /etc/shimbridge)" = "700 root root" ]
	[ "$(stat -c '%a %U' /etc/shimbridge/config.json)" = "600 root" ]
	[ "$(stat -c '%a %U %G' /var/log/shimbridge)" = "750 root shimbridge-audit" ]
	[ "$(stat -c '%a %U' /var/lib/shimbridge)" = "755 root" ]
	[ "$(stat -c '%a %U %G' /run/shimbridge)" = "750 root shimbridge" ]
	[ -f /usr/share/man/man5/shimbridge.json.5.gz ] && [ -f /etc/logrotate.d/shimbridge ]
	[ -f /usr/share/bash-completion/completions/shimbridge ]
	grep -q '^ConditionPathExists=/etc/shimbridge/config.json' /lib/systemd/system/shimbridge.socket
	if [ -d /run/systemd/system ]; then
		systemctl is-enabled shimbridge.socket
	else
		[ -L /etc/systemd/system/sockets.target.wants/shimbridge.socket ]
	fi

	# A session user, a generic tool, a secret; the daemon as the unit starts it.
	useradd -m -s /bin/bash -G shimbridge "$DEBUSER"
	printf '%s\n' '{"socket": {"path": "/run/shimbridge/bridge.sock", "group": "shimbridge"},' \
		'"runner": "shimbridge-runner",' \
		'"tools": {"say": {"path": "/bin/echo", "rules": [{"allow": ["**"]}]}}}' \
		>/etc/shimbridge/config.json
	printf '{"name": "deb", "user": "%s", "tools": ["say"]}\n' "$DEBUSER" \
		>/etc/shimbridge/sessions.d/deb.json
	chmod 600 /etc/shimbridge/sessions.d/deb.json
	/usr/sbin/shimbridge secret init >/dev/null
	printf value | /usr/sbin/shimbridge --no-reload secret set tok >/dev/null
	local pid=
	if [ -d /run/systemd/system ]; then
		# systemd runs here: the package started the socket; the call starts the service
		systemctl restart shimbridge.socket
	else
		sb_bg /usr/sbin/shimbridged -c /etc/shimbridge/config.json </dev/null >"$DEB_TMP/daemon.log" 2>&1
		pid=$!
	fi
	sb_wait_for 10 test -S /run/shimbridge/bridge.sock || { cat "$DEB_TMP/daemon.log"; return 1; }
	mkdir -p "$DEB_TMP/bin"
	ln -s /usr/libexec/shimbridge/shims/shimbridge-shim "$DEB_TMP/bin/say"
	run runuser -u "$DEBUSER" -- env -i PATH="$DEB_TMP/bin:/usr/bin:/bin" HOME=/tmp say hello from the deb
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = "hello from the deb" ]
	grep -q '"event":"done".*"tool":"say"' /var/log/shimbridge/audit.log

	# remove: the daemon stops, config and secrets stay
	DEBIAN_FRONTEND=noninteractive run apt-get remove -y -qq shimbridge
	echo "$output"
	[ "$status" -eq 0 ]
	if [ -n "$pid" ]; then
		sb_wait_for 20 eval "! kill -0 $pid 2>/dev/null"
	else
		sb_wait_for 20 eval "! systemctl is-active --quiet shimbridge.service"
		sb_wait_for 20 eval "! systemctl is-active --quiet shimbridge.socket"
	fi
	[ ! -e /usr/sbin/shimbridged ]
	[ -f /etc/shimbridge/config.json ] && [ -f /etc/shimbridge/secrets.store ] &&
		[ -f /etc/shimbridge/store.key ] && [ -f /var/log/shimbridge/audit.log ]
	dpkg-query -W -f '${Status}\n' shimbridge | grep -q config-files

	# purge: nothing left of the package, its config, secrets, state or log
	DEBIAN_FRONTEND=noninteractive run apt-get purge -y -qq shimbridge
	echo "$output"
	[ "$status" -eq 0 ]
	run dpkg-query -W -f '${Status}' shimbridge
	[[ $output != *installed* ]] || [[ $output == *not-installed* ]]
	local f left=
	dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ {print $6}' >"$DEB_TMP/deb.files"
	while read -r f; do
		{ [ -e "${f#.}" ] || [ -L "${f#.}" ]; } && left="$left ${f#.}"
	done <"$DEB_TMP/deb.files"
	for f in /etc/shimbridge /var/lib/shimbridge /var/log/shimbridge /run/shimbridge \
		/usr/libexec/shimbridge /usr/share/shimbridge /usr/share/doc/shimbridge; do
		[ -e "$f" ] && left="$left $f"
	done
	[ -z "$left" ] || { echo "left after purge:$left" >&2; return 1; }
}
