# bash completion for shimbridge(8)                          -*- shell-script -*-
# Completes commands, subcommands, options, session names (the drop-ins in
# sessions.d next to the config), secret names (`shimbridge secret list`) and the
# ids of requests waiting for approval (`shimbridge pending --json`).

# The global options already on the line (-c, --store, --key), to pass them on.
_shimbridge_globals()
{
    local i
    for ((i = 1; i < ${#COMP_WORDS[@]} - 1; i++)); do
        case ${COMP_WORDS[i]} in
        -c | --config | --store | --key)
            printf '%s\n%s\n' "${COMP_WORDS[i]}" "${COMP_WORDS[i + 1]}"
            ;;
        --config=* | --store=* | --key=*)
            printf '%s\n' "${COMP_WORDS[i]}"
            ;;
        esac
    done
}

# Session names: sessions.d/*.json next to the config.
_shimbridge_sessions()
{
    local conf=/etc/shimbridge/config.json i f
    for ((i = 1; i < ${#COMP_WORDS[@]} - 1; i++)); do
        case ${COMP_WORDS[i]} in
        -c | --config) conf=${COMP_WORDS[i + 1]} ;;
        --config=*) conf=${COMP_WORDS[i]#*=} ;;
        esac
    done
    for f in "${conf%/*}"/sessions.d/*.json; do
        [[ -f $f ]] || continue
        f=${f##*/}
        printf '%s\n' "${f%.json}"
    done
}

# Secret names, from the store (never values).
_shimbridge_secrets()
{
    local -a g
    mapfile -t g < <(_shimbridge_globals)
    "${COMP_WORDS[0]}" "${g[@]}" secret list 2>/dev/null
}

# Ids of the requests waiting for approval.
_shimbridge_pending()
{
    local -a g
    mapfile -t g < <(_shimbridge_globals)
    "${COMP_WORDS[0]}" "${g[@]}" pending --json 2>/dev/null |
        grep -o '"id":[0-9]*' | cut -d: -f2
}

_shimbridge()
{
    local cur prev words cword
    _init_completion || return

    local globals="-c --config --store --key --shim-dir --no-reload --help --version"
    case $prev in
    -c | --config | --store | --key | --file)
        _filedir
        return
        ;;
    --shim-dir | --workspace)
        _filedir -d
        return
        ;;
    --session)
        COMPREPLY=($(compgen -W "$(_shimbridge_sessions)" -- "$cur"))
        return
        ;;
    --user)
        COMPREPLY=($(compgen -u -- "$cur"))
        return
        ;;
    --tools | --repo | --older-than | --for | --why | --remote-url | --branch)
        return
        ;;
    --cwd)
        _filedir -d
        return
        ;;
    esac

    # The command words so far, skipping global options and their arguments.
    local -a cmd=()
    local i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        -c | --config | --store | --key | --shim-dir) ((i++)) ;;
        -*) ;;
        *) cmd+=("${words[i]}") ;;
        esac
    done

    if [[ $cur == -* ]]; then
        local opts=$globals
        case "${cmd[0]-} ${cmd[1]-}" in
        "status "* | "secret list" | "session list") opts+=" --json" ;;
        "check "*) opts+=" --no-secrets --offline" ;;
        "audit verify") opts+=" --pubkey" ;;
        "audit pubkey" | "audit keygen") ;;
        "audit "*) opts+=" --session --follow --file --json" ;;
        "session add") opts+=" --user --workspace --tools --repo" ;;
        "session remove") opts+=" --keep-workspace --keep-mirrors" ;;
        "mirror list") opts+=" --session --json" ;;
        "mirror prune") opts+=" --session --older-than" ;;
        "pending "*) opts+=" --json" ;;
        "approve "*) opts+=" --for" ;;
        "deny "*) opts+=" --why" ;;
        "explain "*) opts+=" --session --cwd --remote-url --branch --json" ;;
        esac
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return
    fi

    case ${#cmd[@]} in
    0)
        COMPREPLY=($(compgen -W "status check reload audit secret session mirror pending approve deny explain" -- "$cur"))
        ;;
    1)
        case ${cmd[0]} in
        secret) COMPREPLY=($(compgen -W "init set list rm" -- "$cur")) ;;
        session) COMPREPLY=($(compgen -W "add list remove exec" -- "$cur")) ;;
        mirror) COMPREPLY=($(compgen -W "list prune" -- "$cur")) ;;
        approve | deny) COMPREPLY=($(compgen -W "$(_shimbridge_pending)" -- "$cur")) ;;
        audit) COMPREPLY=($(compgen -W "verify pubkey keygen" -- "$cur")) ;;
        esac
        ;;
    2)
        case "${cmd[0]} ${cmd[1]}" in
        "secret set" | "secret rm")
            COMPREPLY=($(compgen -W "$(_shimbridge_secrets)" -- "$cur"))
            ;;
        "session remove" | "session exec")
            COMPREPLY=($(compgen -W "$(_shimbridge_sessions)" -- "$cur"))
            ;;
        esac
        ;;
    *)
        # session exec NAME CMD...: complete the command
        if [[ ${cmd[0]-} == session && ${cmd[1]-} == exec ]]; then
            COMPREPLY=($(compgen -c -- "$cur"))
        fi
        ;;
    esac
} &&
    complete -F _shimbridge shimbridge

# ex: filetype=sh
