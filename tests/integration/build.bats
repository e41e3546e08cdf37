#!/usr/bin/env bats
# The Makefile's dependency check: on a machine without a library or tool, `make` stops
# before compiling anything, with one line naming the Debian packages and the command
# that installs them. A fake pkg-config (or a missing command) plays the machine.

bats_require_minimum_version 1.5.0
load lib

setup_file() {
	command -v pkg-config >/dev/null || skip "pkg-config is not installed"
}

teardown_file() {
	sb_reap_suite
}

teardown() {
	sb_reap
}

# A pkg-config that reports the modules $@ missing and asks the real one for the rest.
fake_pkg_config() {
	local f=$BATS_TEST_TMPDIR/pkg-config m
	{
		echo '#!/bin/sh'
		echo 'for a in "$@"; do case $a in'
		for m in "$@"; do echo "	$m) exit 1 ;;"; done
		echo 'esac; done'
		echo 'exec pkg-config "$@"'
	} >"$f"
	chmod 755 "$f"
	echo "$f"
}

# make_refused ARGS...: run make in the tree; the one-line refusal and status 2 expected.
make_refused() {
	run --separate-stderr make -C "$SB_ROOT" --no-print-directory "$@"
	[ "$status" -eq 2 ] || { echo "make $*: status $status: $stderr" >&2; return 1; }
	[ -z "$output" ] || { echo "make $* printed on stdout: $output" >&2; return 1; }
	[ "${#stderr_lines[@]}" -eq 1 ] || { echo "make $*: not one line: $stderr" >&2; return 1; }
	[[ $stderr == *"missing build dependencies"* ]]
	[[ $stderr == *"sh tests/deps.sh"* ]]
}

@test "a missing library: one line with the Debian package and apt-get install, exit 2, nothing compiled" {
	local pc
	pc=$(fake_pkg_config libsodium)
	make_refused all PKG_CONFIG="$pc"
	[[ $stderr == *"apt-get install libsodium-dev "* ]]
	# only the missing one is named
	[[ $stderr != *libevent-dev* && $stderr != *libjansson-dev* ]]
	[[ $stderr != *"error:"* && $stderr != *" -c "* ]]
}

@test "several missing libraries are named together, in one line" {
	local pc
	pc=$(fake_pkg_config libevent jansson)
	make_refused all PKG_CONFIG="$pc"
	[[ $stderr == *"apt-get install libevent-dev libjansson-dev "* ]]
}

@test "no pkg-config at all: pkg-config and every library package are named" {
	make_refused all PKG_CONFIG=/nonexistent/pkg-config
	[[ $stderr == *"apt-get install pkg-config libevent-dev libssl-dev libjansson-dev libsodium-dev libcurl4-openssl-dev "* ]]
}

@test "no musl-gcc: the shim names musl-tools" {
	make_refused build/shim MUSLCC=/nonexistent/musl-gcc
	[[ $stderr == *"apt-get install musl-tools "* ]]
}

@test "no cmocka: the unit tests name libcmocka-dev" {
	local pc t
	pc=$(fake_pkg_config cmocka)
	t=$(cd "$SB_ROOT" && ls tests/unit/test_*.c | head -n 1)
	t=${t#tests/unit/}
	make_refused "build/unit/${t%.c}" PKG_CONFIG="$pc"
	[[ $stderr == *"apt-get install libcmocka-dev "* ]]
}

@test "everything installed: the checks pass silently" {
	run make -s -C "$SB_ROOT" --no-print-directory deps deps-shim deps-test deps-fuzz
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

# macOS is not available here: `make portcheck` compiles every source as a macOS build
# would see it (tests/port/darwin.h). These tests run it, and show that it fails where
# a macOS build would.
@test "macOS in principle: every source compiles against the macOS stand-in (make portcheck)" {
	run --separate-stderr make -s -C "$SB_ROOT" --no-print-directory portcheck
	[ "$status" -eq 0 ] || { echo "status $status: $stderr" >&2; return 1; }
	[[ $output == *"compilations for macOS passed"* ]]
}

@test "the macOS stand-in refuses Linux-only calls, constants and headers outside #if defined(__linux__)" {
	local d=$BATS_TEST_TMPDIR src what
	# Each case: what the compiler must name, then the code.
	for src in 'pipe2|int f(int *p); int f(int *p) { return pipe2(p, 0); }' \
	    'O_PATH|int f(int *p); int f(int *p) { return open("/", O_PATH) + *p; }' \
	    'setresuid|int f(int *p); int f(int *p) { return setresuid(1, 1, 1) + *p; }' \
	    'sys/prctl.h|#include <sys/prctl.h>'; do
		what=${src%%|*} src=${src#*|}
		printf '#include <fcntl.h>\n#include <unistd.h>\n%s\n' "$src" >"$d/bad.c"
		run --separate-stderr make -s -C "$SB_ROOT" --no-print-directory portcheck \
			PORT_SRC="$d/bad.c" SHIM_SRC= SHIM_COMMON=
		[ "$status" -ne 0 ] || { echo "accepted: $src" >&2; return 1; }
		[[ $stderr == *"$what"* ]] || { echo "$src: $stderr" >&2; return 1; }
		[[ $stderr == *"bad.c  does not build for macOS"* ]]
		# The same code where only Linux builds it passes.
		printf '#include <fcntl.h>\n#include <unistd.h>\n#if defined(__linux__)\n%s\n#endif\n' \
			"$src" >"$d/bad.c"
		run --separate-stderr make -s -C "$SB_ROOT" --no-print-directory portcheck \
			PORT_SRC="$d/bad.c" SHIM_SRC= SHIM_COMMON=
		[ "$status" -eq 0 ] || { echo "refused under __linux__: $src: $stderr" >&2; return 1; }
	done
}
