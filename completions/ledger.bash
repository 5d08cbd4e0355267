_ledger_completion() {
    local IFS=$'\n' line
    COMPREPLY=()
    while IFS= read -r line; do  # one candidate a line, as bash must insert it
        [[ $line ]] && COMPREPLY+=("$line")
    done < <(env COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD="$COMP_CWORD" \
        COMP_LINE="$COMP_LINE" _LEDGER_COMPLETE=complete_bash "$1")
    return 0  # no candidate: bash completes file names (-o default)
}

complete -o default -F _ledger_completion ledger
