"""The command line (ledger_cli/cli): parsing, help, output, exit codes, the fast path, and each command's behaviour through the installed `ledger`."""
