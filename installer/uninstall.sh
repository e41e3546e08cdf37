#!/bin/sh
# Remove what installer/install.sh created, as its manifest lists it. First the
# daemon is stopped (systemd or launchd when they run it, else the shimbridged of
# this prefix found through its socket and its pid), and only then its files,
# the runtime directory /run/shimbridge, the runner user and the groups.
# Keeps /etc/shimbridge (config, sessions.d, the secret store and its key) and
# /var/log/shimbridge (the audit log) unless --purge. The state directory
# /var/lib/shimbridge only holds caches (git mirrors, scratch) and always goes.
# Session users made by `shimbridge session add`, and their runners (sb-NAME-run),
# are not touched: remove them first with `shimbridge session remove NAME`.
#   sh installer/uninstall.sh [--prefix P] [--destdir D] [--purge] [--dry-run]
# (also reached as `sh installer/install.sh --uninstall [...]`)
set -eu

prog=uninstall.sh
prefix=/usr/local
destdir=
purge=0
dry=0

usage() {
	cat <<EOF
usage: sh installer/uninstall.sh [--prefix P] [--destdir D] [--purge] [--dry-run]
  --prefix P   the prefix given to install.sh (default /usr/local)
  --destdir D  the staging directory given to install.sh
  --purge      also remove /etc/shimbridge (config, secrets, store key) and the logs
  --dry-run    print what would be removed, remove nothing
Exit codes: 0 ok, 1 failure, 64 usage.
EOF
}

while [ $# -gt 0 ]; do
	case $1 in
	--prefix) [ $# -ge 2 ] || { usage >&2; exit 64; }; prefix=$2; shift 2 ;;
	--prefix=*) prefix=${1#*=}; shift ;;
	--destdir) [ $# -ge 2 ] || { usage >&2; exit 64; }; destdir=$2; shift 2 ;;
	--destdir=*) destdir=${1#*=}; shift ;;
	--purge) purge=1; shift ;;
	--dry-run) dry=1; shift ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 64 ;;
	esac
done
prefix=${prefix%/}
[ -n "$prefix" ] || prefix=/
destdir=${destdir%/}
staging=0
[ -n "$destdir" ] && staging=1
os=$(uname -s)
confdir=/etc/shimbridge
statedir=/var/lib/shimbridge
logdir=/var/log/shimbridge
rundir=/run/shimbridge
[ "$os" = Darwin ] && rundir=/var/run/shimbridge
manifest=$prefix/share/shimbridge/manifest
removed=0

# Do (or, with --dry-run, describe) one removal step.
act() {
	what=$1
	shift
	removed=$((removed + 1))
	if [ "$dry" = 1 ]; then
		echo "would remove $what"
	else
		"$@"
		echo "removed $what"
	fi
}

# Whether a target path is kept (config and logs) in this run.
kept() {
	[ "$purge" = 0 ] || return 1
	case $1 in
	"$confdir"|"$confdir"/*|"$logdir"|"$logdir"/*) return 0 ;;
	esac
	return 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/shimbridge-uninstall.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

if [ -f "$destdir$manifest" ]; then
	cp "$destdir$manifest" "$work/manifest"
else
	# No manifest (an install by hand?): the standard layout, without accounts.
	echo "$prog: no manifest at $destdir$manifest; removing the standard layout" >&2
	cat > "$work/manifest" <<EOF
file $prefix/sbin/shimbridged
file $prefix/sbin/shimbridge
file $prefix/libexec/shimbridge/shimbridge-git
file $prefix/libexec/shimbridge/shimbridge-jail
file $prefix/libexec/shimbridge/shims/shimbridge-shim
link $prefix/libexec/shimbridge/shims/gh
link $prefix/libexec/shimbridge/shims/git-remote-shimbridge
link $prefix/libexec/shimbridge/shims/shimbridge
dir $prefix/libexec/shimbridge/shims
dir $prefix/libexec/shimbridge
dir $prefix/share/shimbridge
EOF
fi

# --- Stop the service first ------------------------------------------------------
# Nothing may be removed under a running daemon: it would lose its runner user and
# socket group while children still run as them.

# Pids of shimbridged processes started from this prefix (also when their binary
# was already replaced or deleted), and the one answering on the socket.
daemon_pids() {
	{
		if [ -x "$prefix/sbin/shimbridge" ] && [ -f "$confdir/config.json" ]; then
			"$prefix/sbin/shimbridge" -c "$confdir/config.json" status --json 2>/dev/null |
				sed -n 's/.*"pid":\([0-9][0-9]*\).*/\1/p'
		fi
		for p in $(pgrep -x shimbridged 2>/dev/null || pidof shimbridged 2>/dev/null || true); do
			exe=$(readlink "/proc/$p/exe" 2>/dev/null || true)
			case $exe in
			"$prefix/sbin/shimbridged"|"$prefix/sbin/shimbridged (deleted)") echo "$p" ;;
			esac
		done
	} | sort -u
}

# SIGTERM each daemon and wait for it (10 s), then SIGKILL.
stop_daemons() {
	for pid in $(daemon_pids); do
		if [ "$dry" = 1 ]; then
			echo "would stop shimbridged (pid $pid)"
			removed=$((removed + 1))
			continue
		fi
		kill -TERM "$pid" 2>/dev/null || continue
		n=0
		while kill -0 "$pid" 2>/dev/null && [ "$n" -lt 100 ]; do
			sleep 0.1
			n=$((n + 1))
		done
		if kill -0 "$pid" 2>/dev/null; then
			kill -KILL "$pid" 2>/dev/null || true
			echo "$prog: shimbridged (pid $pid) did not stop on SIGTERM; killed it" >&2
		fi
		echo "stopped shimbridged (pid $pid)"
		removed=$((removed + 1))
	done
}

if [ "$staging" = 0 ]; then
	case $os in
	Linux)
		if [ -d /run/systemd/system ] && grep -q '^unit ' "$work/manifest"; then
			act "the shimbridge units from systemd" systemctl disable --now \
				shimbridge.socket shimbridge.service
		fi
		;;
	Darwin)
		if grep -q '^launchd ' "$work/manifest"; then
			act "org.shimbridge.shimbridged from launchd" \
				launchctl bootout system/org.shimbridge.shimbridged
		fi
		;;
	esac
	# Also one started by hand (no service manager, or an admin debugging).
	stop_daemons
fi

# --- Files and links -------------------------------------------------------------
sed -n 's/^file //p; s/^link //p' "$work/manifest" > "$work/files"
while IFS= read -r p; do
	[ -n "$p" ] || continue
	kept "$p" && continue
	if [ -e "$destdir$p" ] || [ -L "$destdir$p" ]; then
		act "$p" rm -f "$destdir$p"
	fi
done < "$work/files"
if [ -f "$destdir$manifest" ]; then
	act "$manifest" rm -f "$destdir$manifest"
fi

if [ "$staging" = 0 ] && [ "$dry" = 0 ] && [ "$os" = Linux ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload
fi

# --- Configuration, state and logs -----------------------------------------------
if [ "$staging" = 0 ] && [ -d "$rundir" ]; then
	act "$rundir (runtime directory)" rm -rf "$rundir"
fi
if [ -d "$destdir$statedir" ]; then
	act "$statedir (mirrors and scratch: caches)" rm -rf "$destdir$statedir"
fi
if [ "$purge" = 1 ]; then
	for d in "$confdir" "$logdir"; do
		if [ -d "$destdir$d" ]; then
			act "$d" rm -rf "$destdir$d"
		fi
	done
fi

# --- Directories we created, deepest first, when empty ---------------------------
sed -n 's/^dir //p' "$work/manifest" | awk '{ print length($0) " " $0 }' | sort -rn |
	cut -d' ' -f2- > "$work/dirs"
while IFS= read -r d; do
	[ -n "$d" ] || continue
	kept "$d" && continue
	if [ -d "$destdir$d" ] && [ -z "$(ls -A "$destdir$d")" ]; then
		act "$d/" rmdir "$destdir$d"
	fi
done < "$work/dirs"

# --- Accounts --------------------------------------------------------------------
if [ "$staging" = 0 ]; then
	if grep -qx 'user shimbridge-runner' "$work/manifest" && id shimbridge-runner >/dev/null 2>&1; then
		# The daemon is stopped: whatever still runs as the runner is left over.
		if [ "$dry" = 0 ]; then
			pkill -KILL -u shimbridge-runner 2>/dev/null || true
			# SIGKILL is asynchronous (a jail's init tears its namespaces down as
			# it exits), and userdel refuses a user that still has processes.
			n=0
			while pgrep -u shimbridge-runner >/dev/null 2>&1 && [ "$n" -lt 50 ]; do
				sleep 0.1
				n=$((n + 1))
			done
		fi
		case $os in
		Linux)
			act "user shimbridge-runner" userdel shimbridge-runner
			# useradd --user-group made a group of the same name.
			if [ "$dry" = 0 ] && getent group shimbridge-runner >/dev/null 2>&1; then
				groupdel shimbridge-runner 2>/dev/null || true
			fi
			;;
		Darwin) act "user shimbridge-runner" dscl . -delete /Users/shimbridge-runner ;;
		esac
	fi
	if grep -qx 'group shimbridge' "$work/manifest"; then
		case $os in
		Linux)
			members=$(getent group shimbridge | cut -d: -f4)
			if ! getent group shimbridge >/dev/null 2>&1; then
				:
			elif [ -n "$members" ] && [ "$purge" = 0 ]; then
				echo "$prog: kept group shimbridge: session users $members are still in it (remove them with shimbridge session remove, or use --purge)"
			else
				act "group shimbridge" groupdel shimbridge
			fi
			;;
		Darwin)
			if dscl . -read /Groups/shimbridge >/dev/null 2>&1; then
				act "group shimbridge" dseditgroup -o delete shimbridge
			fi
			;;
		esac
	fi
	if grep -qx 'group shimbridge-audit' "$work/manifest"; then
		# A kept audit log becomes root-only before its group goes.
		if [ "$purge" = 0 ] && [ "$dry" = 0 ] && [ -d "$logdir" ]; then
			chgrp -R 0 "$logdir" && chmod 0700 "$logdir" &&
				find "$logdir" -type f -exec chmod go-rwx {} +
		fi
		case $os in
		Linux)
			if getent group shimbridge-audit >/dev/null 2>&1; then
				act "group shimbridge-audit" groupdel shimbridge-audit
			fi
			;;
		Darwin)
			if dscl . -read /Groups/shimbridge-audit >/dev/null 2>&1; then
				act "group shimbridge-audit" dseditgroup -o delete shimbridge-audit
			fi
			;;
		esac
	fi
fi

if [ "$purge" = 0 ]; then
	for d in "$confdir" "$logdir"; do
		if [ -d "$destdir$d" ]; then
			echo "kept $d (remove with --purge)"
		fi
	done
fi
if [ "$dry" = 1 ]; then
	echo "shimbridge: $removed removal(s) would be made"
else
	echo "shimbridge: uninstalled ($removed removal(s))"
fi
exit 0
