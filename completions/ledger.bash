_ledger_completion() {
    local IFS=$'\n'
    mapfile -t COMPREPLY < <(env COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD="$COMP_CWORD" \
        COMP_LINE="$COMP_LINE" _LEDGER_COMPLETE=complete_bash "$1")
    [[ ${COMPREPLY[0]} ]] || COMPREPLY=()  # no candidate: bash completes file names
    return 0
}

complete -o default -F _ledger_completion ledger
