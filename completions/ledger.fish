function __ledger_complete
    set -l reply (env _LEDGER_COMPLETE_WORDS=(commandline -opc | string collect) \
        _LEDGER_COMPLETE_WORD=(commandline -ct | string unescape | string collect) \
        _LEDGER_COMPLETE=complete_fish ledger)
    if test -n "$reply"
        printf '%s\n' $reply
    else
        __fish_complete_path (commandline -ct)
    end
end

complete --command ledger --no-files --arguments '(__ledger_complete)'
