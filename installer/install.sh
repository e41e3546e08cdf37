#!/bin/sh
# Install shimbridge from prebuilt binaries. Idempotent: a second run changes nothing
# and says so. Called by `make install` as
#   sh installer/install.sh --prefix "$(PREFIX)" --destdir "$(DESTDIR)" --prebuilt build
#
# Layout (PREFIX defaults to /usr/local):
#   PREFIX/sbin/shimbridged                         the daemon (root, started by systemd/launchd)
#   PREFIX/sbin/shimbridge                          the admin command line (root)
#   PREFIX/libexec/shimbridge/shimbridge-git        git transport helper, run only by the daemon
#   PREFIX/libexec/shimbridge/shimbridge-jail       the init of every per-call jail (docs/JAIL.md)
#   PREFIX/libexec/shimbridge/shims/shimbridge-shim the static shim; gh,
#                                                   git-remote-shimbridge and shimbridge
#                                                   (the sandbox's `shimbridge list`) link to it
#   PREFIX/share/shimbridge/config.example.json     the config skeleton, for reference
#   PREFIX/share/shimbridge/manifest                what this script created (for uninstall.sh)
#   PREFIX/share/doc/shimbridge/                    README and reference documents
#   PREFIX/share/man/man5, man8                     shimbridge.json(5), shimbridged(8),
#                                                   shimbridge(8), shimbridge-git(8)
#   PREFIX/share/bash-completion/completions/shimbridge   bash completion
#   PREFIX/share/zsh/vendor-completions/_shimbridge        zsh completion
#   Linux: /etc/logrotate.d/shimbridge              audit log rotation (SIGUSR1)
#   Linux: sysusers.d/shimbridge.conf, tmpfiles.d/shimbridge.conf in PREFIX/lib
#          (/usr/lib for PREFIX=/usr, /etc for prefixes systemd does not read);
#          applied with systemd-sysusers / systemd-tmpfiles where those exist
#   /etc/shimbridge/ (0700)                         config.json (0600, never overwritten), sessions.d/
#   /var/lib/shimbridge (0755), /var/log/shimbridge (0700)
#   Linux: shimbridge.socket and shimbridge.service in /usr/lib/systemd/system
#          (PREFIX=/usr), PREFIX/lib/systemd/system (PREFIX=/usr/local), else
#          /etc/systemd/system; or --unitdir
#   macOS: /Library/LaunchDaemons/org.shimbridge.shimbridged.plist
#   /var/log/shimbridge is root:shimbridge-audit 0750: members of that group may read
#   the audit log (`shimbridge audit` without root); staged: root 0750
# Users (not when staging into a DESTDIR): group shimbridge (the socket group for
# session users), group shimbridge-audit (may read the audit log) and the runner
# shimbridge-runner (own group, no home, no login).
# `install.sh --uninstall [uninstall.sh options]` runs installer/uninstall.sh.
set -eu

prog=install.sh
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
prefix=/usr/local
destdir=
prebuilt=$top/build
unitdir=
dry=0
users=1
changes=0
new_manifest=

usage() {
	cat <<EOF
usage: sh installer/install.sh [--prefix P] [--destdir D] [--prebuilt DIR] [--unitdir DIR]
                               [--dry-run] [--no-users]
       sh installer/install.sh --uninstall [--prefix P] [--destdir D] [--purge] [--dry-run]
  --prefix P      installation prefix (default /usr/local)
  --destdir D     stage into D (for packaging): no users, no service manager
  --prebuilt DIR  where shimbridged, shimbridge, shimbridge-git, shimbridge-jail and shim were
                  built (default build)
  --unitdir DIR   where the systemd units go (default: chosen from the prefix)
  --dry-run       print what would change, change nothing
  --no-users      do not create the shimbridge groups and the runner user
  --uninstall     stop the daemon and remove what an earlier run installed
                  (installer/uninstall.sh; --purge also removes secrets and audit log)
Exit codes: 0 ok, 1 failure, 64 usage.
EOF
}

die() {
	echo "$prog: $*" >&2
	exit 1
}

for a in "$@"; do
	if [ "$a" = --uninstall ]; then
		rest=
		for b in "$@"; do
			[ "$b" = --uninstall ] || rest="$rest '$(printf '%s' "$b" | sed "s/'/'\\\\''/g")'"
		done
		eval "set -- $rest"
		exec sh "$here/uninstall.sh" "$@"
	fi
done

while [ $# -gt 0 ]; do
	case $1 in
	--prefix) [ $# -ge 2 ] || { usage >&2; exit 64; }; prefix=$2; shift 2 ;;
	--prefix=*) prefix=${1#*=}; shift ;;
	--destdir) [ $# -ge 2 ] || { usage >&2; exit 64; }; destdir=$2; shift 2 ;;
	--destdir=*) destdir=${1#*=}; shift ;;
	--prebuilt) [ $# -ge 2 ] || { usage >&2; exit 64; }; prebuilt=$2; shift 2 ;;
	--prebuilt=*) prebuilt=${1#*=}; shift ;;
	--unitdir) [ $# -ge 2 ] || { usage >&2; exit 64; }; unitdir=$2; shift 2 ;;
	--unitdir=*) unitdir=${1#*=}; shift ;;
	--dry-run) dry=1; shift ;;
	--no-users) users=0; shift ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 64 ;;
	esac
done

case $prefix in /*) ;; *) die "--prefix must be an absolute path" ;; esac
case $prebuilt in /*) ;; *) prebuilt=$(pwd)/$prebuilt ;; esac
prefix=${prefix%/}
[ -n "$prefix" ] || prefix=/
destdir=${destdir%/}
os=$(uname -s)
staging=0
[ -n "$destdir" ] && staging=1
[ "$staging" = 1 ] && users=0
uid=$(id -u)

# No jail on macOS (docs/JAIL.md, "macOS"): its init is built for Linux only.
bins="shimbridged shimbridge shimbridge-git shim"
[ "$os" = Darwin ] || bins="$bins shimbridge-jail"
for b in $bins; do
	if [ ! -f "$prebuilt/$b" ] || [ ! -x "$prebuilt/$b" ]; then
		die "$prebuilt/$b is missing: run make first"
	fi
done
if [ "$staging" = 0 ] && [ "$uid" != 0 ] && [ "$dry" = 0 ]; then
	die "installing into the system needs root (or stage with --destdir)"
fi

sbindir=$prefix/sbin
libexecdir=$prefix/libexec/shimbridge
shimdir=$libexecdir/shims
sharedir=$prefix/share/shimbridge
docdir=$prefix/share/doc/shimbridge
mandir=$prefix/share/man
confdir=/etc/shimbridge
statedir=/var/lib/shimbridge
logdir=/var/log/shimbridge
if [ -z "$unitdir" ]; then
	case $prefix in
	/usr) unitdir=/usr/lib/systemd/system ;;
	/usr/local) unitdir=/usr/local/lib/systemd/system ;;
	*) unitdir=/etc/systemd/system ;;
	esac
fi
case $prefix in
/usr|/usr/local) sdlibdir=$prefix/lib ;;
*) sdlibdir=/etc ;;
esac
sysusersconf=$sdlibdir/sysusers.d/shimbridge.conf
tmpfilesconf=$sdlibdir/tmpfiles.d/shimbridge.conf
# The declarative files are used to make accounts and directories where systemd's
# tools exist (not when staging: the package manager applies them on the target).
sdtools=0
if [ "$os" = Linux ] && [ "$staging" = 0 ] && command -v systemd-sysusers >/dev/null 2>&1 &&
	command -v systemd-tmpfiles >/dev/null 2>&1; then
	sdtools=1
fi
plistdir=/Library/LaunchDaemons
manifest=$sharedir/manifest

# Record a change and say what it was.
changed() {
	changes=$((changes + 1))
	if [ "$dry" = 1 ]; then
		echo "would $*"
	else
		echo "$*"
	fi
}

# Remember a path or account for uninstall.sh.
remember() {
	new_manifest="$new_manifest$1
"
}

# Permission bits of a path (Linux and BSD stat).
mode_of() {
	stat -c %a "$1" 2>/dev/null || stat -f %Lp "$1"
}

# Owner uid of a path.
owner_of() {
	stat -c %u "$1" 2>/dev/null || stat -f %u "$1"
}

# Owner root when installing as root; staging as a user keeps the user's files.
fix_owner() {
	if [ "$uid" = 0 ] && [ "$(owner_of "$1")" != 0 ]; then
		chown 0:0 "$1"
		return 0
	fi
	return 1
}

# A directory with a mode (created if missing). Usage: put_dir DIR MODE [remember]
put_dir() {
	d=$destdir$1
	if [ ! -d "$d" ]; then
		changed "create directory $1 (mode $2)"
		[ "$dry" = 1 ] || { mkdir -p "$d"; chmod "$2" "$d"; [ "$uid" != 0 ] || chown 0:0 "$d"; }
		[ "${3:-}" = remember ] && remember "dir $1"
		return 0
	fi
	if [ "$(mode_of "$d")" != "${2#0}" ]; then
		changed "set mode $2 on $1"
		[ "$dry" = 1 ] || chmod "$2" "$d"
	fi
	if [ "$dry" = 0 ] && fix_owner "$d"; then
		changed "set owner root on $1"
	fi
}

# Parents of a path that do not exist yet, outermost first (so uninstall can prune them).
put_parents() {
	p=$1
	list=
	while [ "$p" != / ] && [ ! -d "$destdir$p" ]; do
		list="$p $list"
		p=$(dirname "$p")
	done
	for p in $list; do
		put_dir "$p" 0755 remember
	done
}

# Install SRC as DST (a target path) with MODE unless it is already identical.
put_file() {
	src=$1
	dst=$destdir$2
	remember "file $2"
	if [ -f "$dst" ] && [ ! -L "$dst" ] && cmp -s "$src" "$dst"; then
		if [ "$(mode_of "$dst")" != "${3#0}" ]; then
			changed "set mode $3 on $2"
			[ "$dry" = 1 ] || chmod "$3" "$dst"
		fi
		if [ "$dry" = 0 ] && fix_owner "$dst"; then
			changed "set owner root on $2"
		fi
		return 0
	fi
	if [ -e "$dst" ] || [ -L "$dst" ]; then
		changed "update $2"
	else
		changed "install $2"
	fi
	[ "$dry" = 1 ] && return 0
	tmp=$(dirname "$dst")/.$(basename "$dst").new.$$
	cp "$src" "$tmp"
	chmod "$3" "$tmp"
	[ "$uid" != 0 ] || chown 0:0 "$tmp"
	mv -f "$tmp" "$dst"
}

# A symbolic link NAME -> TARGET (relative), replaced when it points elsewhere.
put_link() {
	remember "link $2"
	if [ -L "$destdir$2" ] && [ "$(readlink "$destdir$2")" = "$1" ]; then
		return 0
	fi
	changed "link $2 -> $1"
	[ "$dry" = 1 ] || ln -sfn "$1" "$destdir$2"
}

# Rewrite the default /usr/local paths of a source file for this prefix.
for_prefix() {
	sed -e "s|/usr/local/sbin/|$sbindir/|g" \
	    -e "s|/usr/local/libexec/shimbridge/|$libexecdir/|g" \
	    -e "s|/usr/local/share/doc/shimbridge/|$docdir/|g" "$1"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/shimbridge-install.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# Previous manifest: accounts created by an earlier run are still ours to remove.
if [ -f "$destdir$manifest" ]; then
	new_manifest=$(cat "$destdir$manifest")
	new_manifest="$new_manifest
"
fi

# --- Accounts --------------------------------------------------------------------
if [ "$os" = Linux ]; then
	put_parents "$(dirname "$sysusersconf")"
	put_file "$top/systemd/shimbridge.sysusers" "$sysusersconf" 0644
	put_parents "$(dirname "$tmpfilesconf")"
	put_file "$top/systemd/shimbridge.tmpfiles" "$tmpfilesconf" 0644
fi
if [ "$users" = 1 ] && [ "$os" = Linux ] && [ "$sdtools" = 1 ]; then
	for g in shimbridge shimbridge-audit; do
		if ! getent group "$g" >/dev/null 2>&1; then
			changed "create group $g (systemd-sysusers)"
			remember "group $g"
		fi
	done
	if ! id shimbridge-runner >/dev/null 2>&1; then
		changed "create user shimbridge-runner (systemd-sysusers)"
		remember "user shimbridge-runner"
	fi
	[ "$dry" = 1 ] || systemd-sysusers "$sysusersconf"
elif [ "$users" = 1 ]; then
	case $os in
	Linux)
		if ! getent group shimbridge >/dev/null 2>&1; then
			changed "create group shimbridge"
			[ "$dry" = 1 ] || groupadd --system shimbridge
			remember "group shimbridge"
		fi
		if ! getent group shimbridge-audit >/dev/null 2>&1; then
			changed "create group shimbridge-audit"
			[ "$dry" = 1 ] || groupadd --system shimbridge-audit
			remember "group shimbridge-audit"
		fi
		if ! id shimbridge-runner >/dev/null 2>&1; then
			changed "create user shimbridge-runner"
			nologin=/usr/sbin/nologin
			[ -x "$nologin" ] || nologin=/sbin/nologin
			[ "$dry" = 1 ] || useradd --system --user-group --no-create-home \
				--home-dir /nonexistent --shell "$nologin" \
				--comment "shimbridge runner" shimbridge-runner
			remember "user shimbridge-runner"
		fi
		;;
	Darwin)
		# Hidden system accounts below uid 500, created with dscl.
		if ! dscl . -read /Groups/shimbridge >/dev/null 2>&1; then
			changed "create group shimbridge"
			if [ "$dry" = 0 ]; then
				gid=$(dscl . -list /Groups PrimaryGroupID | awk '{print $2}' | sort -n |
					awk 'BEGIN{g=300} $1==g{g++} END{print g}')
				dseditgroup -o create -i "$gid" -r "shimbridge sockets" shimbridge
			fi
			remember "group shimbridge"
		fi
		if ! dscl . -read /Groups/shimbridge-audit >/dev/null 2>&1; then
			changed "create group shimbridge-audit"
			if [ "$dry" = 0 ]; then
				gid=$(dscl . -list /Groups PrimaryGroupID | awk '{print $2}' | sort -n |
					awk 'BEGIN{g=300} $1==g{g++} END{print g}')
				dseditgroup -o create -i "$gid" -r "shimbridge audit readers" shimbridge-audit
			fi
			remember "group shimbridge-audit"
		fi
		if ! id shimbridge-runner >/dev/null 2>&1; then
			changed "create user shimbridge-runner"
			if [ "$dry" = 0 ]; then
				ruid=$(dscl . -list /Users UniqueID | awk '{print $2}' | sort -n |
					awk 'BEGIN{u=301} $1==u{u++} END{print u}')
				dscl . -create /Users/shimbridge-runner
				dscl . -create /Users/shimbridge-runner UniqueID "$ruid"
				dscl . -create /Users/shimbridge-runner PrimaryGroupID "$ruid"
				dscl . -create /Users/shimbridge-runner UserShell /usr/bin/false
				dscl . -create /Users/shimbridge-runner NFSHomeDirectory /var/empty
				dscl . -create /Users/shimbridge-runner RealName "shimbridge runner"
				dscl . -create /Users/shimbridge-runner IsHidden 1
				dseditgroup -o create -i "$ruid" shimbridge-runner
			fi
			remember "user shimbridge-runner"
		fi
		;;
	*) die "unsupported system $os" ;;
	esac
fi

# --- Programs --------------------------------------------------------------------
put_parents "$sbindir"
put_parents "$libexecdir"
put_dir "$libexecdir" 0755 remember
put_dir "$shimdir" 0755 remember
put_parents "$sharedir"
put_dir "$sharedir" 0755 remember
put_file "$prebuilt/shimbridged" "$sbindir/shimbridged" 0755
put_file "$prebuilt/shimbridge" "$sbindir/shimbridge" 0755
put_file "$prebuilt/shimbridge-git" "$libexecdir/shimbridge-git" 0755
# The daemon finds it at ../libexec/shimbridge/ from its own directory (spawn_jail_find).
[ "$os" = Darwin ] || put_file "$prebuilt/shimbridge-jail" "$libexecdir/shimbridge-jail" 0755
put_file "$prebuilt/shim" "$shimdir/shimbridge-shim" 0755
put_link shimbridge-shim "$shimdir/gh"
put_link shimbridge-shim "$shimdir/git-remote-shimbridge"
put_link shimbridge-shim "$shimdir/shimbridge"	# the sandbox's `shimbridge list`

for_prefix "$here/config.example.json" > "$work/config.json"
if [ "$os" = Darwin ]; then
	# launchd's socket lives under /var/run (the plist says so).
	sed 's|"/run/shimbridge/|"/var/run/shimbridge/|' "$work/config.json" > "$work/config.darwin"
	mv "$work/config.darwin" "$work/config.json"
fi
put_file "$work/config.json" "$sharedir/config.example.json" 0644
if [ -f "$top/README.md" ] || [ -d "$top/docs" ]; then
	put_parents "$docdir"
	put_dir "$docdir" 0755 remember
	for f in "$top/README.md" "$top"/docs/*.md; do
		[ -f "$f" ] && put_file "$f" "$docdir/$(basename "$f")" 0644
	done
fi

for f in "$top"/man/*.[1-8]; do
	sec=${f##*.}
	put_parents "$mandir/man$sec"
	for_prefix "$f" | sed -e "s|PREFIX/|$prefix/|g" > "$work/$(basename "$f")"
	put_file "$work/$(basename "$f")" "$mandir/man$sec/$(basename "$f")" 0644
done
put_parents "$prefix/share/bash-completion/completions"
put_file "$top/completion/shimbridge.bash" "$prefix/share/bash-completion/completions/shimbridge" 0644
put_parents "$prefix/share/zsh/vendor-completions"
put_file "$top/completion/_shimbridge" "$prefix/share/zsh/vendor-completions/_shimbridge" 0644
if [ "$os" = Linux ]; then
	put_parents /etc/logrotate.d
	put_file "$top/systemd/shimbridge.logrotate" /etc/logrotate.d/shimbridge 0644
fi

# --- Configuration and state -----------------------------------------------------
put_parents "$(dirname "$confdir")"
put_dir "$confdir" 0700 remember
put_dir "$confdir/sessions.d" 0700 remember
if [ -e "$destdir$confdir/config.json" ]; then
	: # never overwrite an administrator's config
else
	changed "install $confdir/config.json (from config.example.json)"
	if [ "$dry" = 0 ]; then
		cp "$work/config.json" "$destdir$confdir/config.json"
		chmod 0600 "$destdir$confdir/config.json"
		[ "$uid" != 0 ] || chown 0:0 "$destdir$confdir/config.json"
	fi
fi
remember "keep $confdir/config.json"
put_parents "$(dirname "$statedir")"
put_dir "$statedir" 0755 remember
put_parents "$(dirname "$logdir")"
put_dir "$logdir" 0750 remember
# The audit group may read the log (the daemon gives the file the directory's group).
if [ "$staging" = 0 ] && [ "$dry" = 0 ] && [ "$uid" = 0 ] &&
	audit_gid=$(getent group shimbridge-audit 2>/dev/null | cut -d: -f3) && [ -n "$audit_gid" ] &&
	[ "$(stat -c %g "$logdir" 2>/dev/null || stat -f %g "$logdir")" != "$audit_gid" ]; then
	changed "set group shimbridge-audit on $logdir"
	chgrp shimbridge-audit "$logdir"
	[ ! -f "$logdir/audit.log" ] || { chgrp shimbridge-audit "$logdir/audit.log"; chmod 0640 "$logdir/audit.log"; }
fi

# Same directories, declared: systemd-tmpfiles recreates /run/shimbridge at boot.
if [ "$sdtools" = 1 ] && [ "$dry" = 0 ]; then
	systemd-tmpfiles --create "$tmpfilesconf" ||
		echo "$prog: warning: systemd-tmpfiles --create $tmpfilesconf failed" >&2
fi

# --- Service manager -------------------------------------------------------------
enable_note=
case $os in
Linux)
	put_parents "$unitdir"
	for u in shimbridge.socket shimbridge.service; do
		for_prefix "$top/systemd/$u" > "$work/$u"
		put_file "$work/$u" "$unitdir/$u" 0644
	done
	if [ "$staging" = 1 ]; then
		enable_note="staged into $destdir: enable with systemctl enable --now shimbridge.socket on the target"
	elif [ -d /run/systemd/system ]; then
		if [ "$dry" = 0 ]; then
			systemctl daemon-reload
		fi
		if ! systemctl is-enabled --quiet shimbridge.socket 2>/dev/null; then
			changed "enable shimbridge.socket"
			[ "$dry" = 1 ] || systemctl enable --now shimbridge.socket
		fi
		remember "unit shimbridge.socket"
	else
		enable_note="systemd is not running here (PID 1 is $(ps -p 1 -o comm= 2>/dev/null || echo unknown)): units installed, not enabled. Start shimbridged by hand: $sbindir/shimbridged -c $confdir/config.json"
	fi
	;;
Darwin)
	put_parents "$plistdir"
	for_prefix "$top/launchd/org.shimbridge.shimbridged.plist" > "$work/plist"
	# launchd takes the socket's group as a number: that of the shimbridge group here.
	sgid=$(dscl . -read /Groups/shimbridge PrimaryGroupID 2>/dev/null | awk '{print $2}')
	if [ -n "$sgid" ]; then
		/usr/libexec/PlistBuddy -c "Add :Sockets:Listeners:SockPathGroup integer $sgid" "$work/plist"
	else
		echo "$prog: warning: no shimbridge group yet; the socket stays root:wheel" >&2
	fi
	put_file "$work/plist" "$plistdir/org.shimbridge.shimbridged.plist" 0644
	if [ "$staging" = 1 ]; then
		enable_note="staged into $destdir: load with launchctl bootstrap system $plistdir/org.shimbridge.shimbridged.plist"
	elif ! launchctl print system/org.shimbridge.shimbridged >/dev/null 2>&1; then
		changed "load org.shimbridge.shimbridged"
		[ "$dry" = 1 ] || launchctl bootstrap system "$plistdir/org.shimbridge.shimbridged.plist"
		remember "launchd org.shimbridge.shimbridged"
	fi
	;;
esac

# --- Manifest --------------------------------------------------------------------
printf '%s' "$new_manifest" | sed '/^$/d' | sort -u > "$work/manifest"
if ! cmp -s "$work/manifest" "$destdir$manifest" 2>/dev/null; then
	[ "$changes" -gt 0 ] || changed "update $manifest"
	if [ "$dry" = 0 ]; then
		cp "$work/manifest" "$destdir$manifest"
		chmod 0644 "$destdir$manifest"
	fi
fi

if [ "$changes" = 0 ]; then
	echo "shimbridge: no changes (already installed in ${destdir}${prefix})"
elif [ "$dry" = 1 ]; then
	echo "shimbridge: $changes change(s) would be made"
else
	echo "shimbridge: $changes change(s) made"
fi
[ -z "$enable_note" ] || echo "shimbridge: $enable_note"
if [ "$dry" = 0 ] && [ "$staging" = 0 ] && [ "$changes" -gt 0 ]; then
	echo "shimbridge: next: edit $confdir/config.json, then"
	echo "  $sbindir/shimbridge secret init && printf %s \"\$TOKEN\" | $sbindir/shimbridge secret set github"
	echo "  $sbindir/shimbridge check && $sbindir/shimbridge session add NAME --tools gh,git --repo OWNER/NAME"
fi
exit 0
