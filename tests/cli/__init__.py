"""The command line (ledger_cli/cli): parsing, help, rendering, exit codes, the
fast path, and each command end to end through the installed `ledger`."""
