#!/usr/bin/env bats
# bash completion for shimbridge (issue 12 item 6): the real completion file,
# sourced with bash-completion, driven through COMP_WORDS/COMP_CWORD; session
# names come from sessions.d next to the config, secret names from the real
# `shimbridge secret list` against a real store.

bats_require_minimum_version 1.5.0
load lib

BC=/usr/share/bash-completion/bash_completion

setup_file() {
	[ -f "$BC" ] || skip "bash-completion is missing (tests/deps.sh installs it)"
	CT=$(mktemp -d "/tmp/$SB_LANE-compl.XXXXXX")
	export CT
	mkdir -p "$CT/etc/sessions.d"
	chmod 700 "$CT/etc"
	echo '{}' >"$CT/etc/config.json"
	echo '{"name": "alice"}' >"$CT/etc/sessions.d/alice.json"
	echo '{"name": "bob"}' >"$CT/etc/sessions.d/bob.json"
	echo 'not a session' >"$CT/etc/sessions.d/README"
	local b=$SB_ROOT/build/shimbridge
	"$b" --store "$CT/s.store" --key "$CT/s.key" secret init >/dev/null
	printf x | "$b" --no-reload --store "$CT/s.store" --key "$CT/s.key" secret set github >/dev/null
	printf y | "$b" --no-reload --store "$CT/s.store" --key "$CT/s.key" secret set gitlab-ci >/dev/null
}

teardown_file() {
	[ -z "${CT:-}" ] || rm -rf "$CT"
	sb_reap_suite
}

teardown() {
	sb_reap
}

# complete WORD...: the last word is the one being completed; prints COMPREPLY sorted.
complete_line() {
	bash --norc --noprofile -c '
		source "$1"; source "$2"; shift 2
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
		_shimbridge shimbridge "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
		printf "%s\n" "${COMPREPLY[@]}" | sort' _ "$BC" "$SB_ROOT/completion/shimbridge.bash" "$@"
}

@test "commands" {
	run complete_line "$SB_ROOT/build/shimbridge" ""
	[ "$output" = "$(printf '%s\n' approve audit check deny explain mirror pending reload secret session status | sort)" ]
	run complete_line "$SB_ROOT/build/shimbridge" se
	[ "$output" = "$(printf 'secret\nsession')" ]
}

@test "subcommands" {
	run complete_line shimbridge secret ""
	[ "$output" = "$(printf '%s\n' init list rm set)" ]
	run complete_line shimbridge -c /x/config.json session r
	[ "$output" = remove ]
	run complete_line shimbridge mirror p
	[ "$output" = prune ]
}

@test "session names from sessions.d next to the config" {
	run complete_line shimbridge -c "$CT/etc/config.json" session remove ""
	[ "$output" = "$(printf 'alice\nbob')" ]
	run complete_line shimbridge --config="$CT/etc/config.json" session exec a
	[ "$output" = alice ]
	run complete_line shimbridge -c "$CT/etc/config.json" audit --session b
	[ "$output" = bob ]
}

@test "secret names from the real store (shimbridge secret list)" {
	run complete_line "$SB_ROOT/build/shimbridge" --store "$CT/s.store" --key "$CT/s.key" secret rm ""
	[ "$output" = "$(printf 'github\ngitlab-ci')" ]
	run complete_line "$SB_ROOT/build/shimbridge" --store "$CT/s.store" --key "$CT/s.key" secret set gitl
	[ "$output" = gitlab-ci ]
}

@test "options of a command" {
	run complete_line shimbridge check --o
	[ "$output" = --offline ]
	run complete_line shimbridge session add --w
	[ "$output" = --workspace ]
}

@test "every command of shimbridge --help is completed" {
	local c
	for c in $("$SB_ROOT/build/shimbridge" --help | sed -n '/^Commands:/,/^[^ ]/p' |
		grep -E '^  [a-z]' | awk '{print $1}' | sort -u); do
		run complete_line shimbridge "$c"
		[[ $output == *"$c"* ]] || { echo "not completed: $c" >&2; return 1; }
	done
}

# zsh: the completion file run as compsys would (words, CURRENT, PREFIX set), with
# compadd/_files stubbed to print their words.
zsh_complete() {
	zsh -f -c '
		compadd() {
			local arr=0 a
			for a in "$@"; do
				case $a in
				-a) arr=1 ;;
				--) ;;
				-*) [[ $a == --* ]] && print -r -- $a ;;
				*) if ((arr)); then print -rl -- ${(P)a}; else print -r -- $a; fi ;;
				esac
			done
		}
		_files() { print _files }
		f=$1; shift
		words=("$@"); CURRENT=$#; PREFIX=${words[CURRENT]}
		source "$f"	# an autoloaded completion file ends by calling its function' _ "$SB_ROOT/completion/_shimbridge" "$@" | sort
}

@test "zsh: commands, sessions and secrets" {
	command -v zsh >/dev/null || skip "zsh is missing"
	run zsh_complete shimbridge ""
	[ "$output" = "$(printf '%s\n' approve audit check deny explain mirror pending reload secret session status | sort)" ]
	run zsh_complete shimbridge session ""
	[ "$output" = "$(printf '%s\n' add exec list remove)" ]
	run zsh_complete shimbridge -c "$CT/etc/config.json" session exec ""
	[ "$output" = "$(printf 'alice\nbob')" ]
	run zsh_complete "$SB_ROOT/build/shimbridge" --store "$CT/s.store" --key "$CT/s.key" secret rm ""
	[ "$output" = "$(printf 'github\ngitlab-ci')" ]
}
