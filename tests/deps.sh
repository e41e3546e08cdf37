#!/bin/sh
# Install what building and testing shimbridge needs (Debian 12, as root).
# Fast when everything is present: apt runs only if a command or header is missing.
set -eu

PKGS="build-essential pkg-config clang libclang-rt-14-dev llvm libevent-dev libssl-dev libjansson-dev
libsodium-dev libcmocka-dev musl-tools git gh bats python3 valgrind shellcheck openssl
file sudo procps util-linux passwd systemd ca-certificates libcurl4-openssl-dev jq
dpkg-dev debhelper lintian mandoc bash-completion zsh openssh-server openssh-client bubblewrap"

missing=0
for c in cc make clang musl-gcc git gh bats /usr/bin/python3 valgrind shellcheck openssl \
	file sudo pgrep runuser setpriv useradd systemd-analyze jq \
	dpkg-buildpackage dh lintian mandoc zsh ssh ssh-keygen /usr/sbin/sshd bwrap; do
	command -v "$c" >/dev/null 2>&1 || { missing=1; break; }
done
for h in /usr/include/event2/event.h /usr/include/event2/bufferevent_ssl.h \
	/usr/include/openssl/ssl.h /usr/include/jansson.h /usr/include/sodium.h \
	/usr/include/cmocka.h /usr/include/*/curl/curl.h /usr/share/bash-completion/bash_completion; do
	[ -e "$h" ] || missing=1
done
[ "$missing" = 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "deps: missing packages; run as root to install: $PKGS" >&2
	exit 1
fi
echo "deps: installing build and test dependencies with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $PKGS >/dev/null
