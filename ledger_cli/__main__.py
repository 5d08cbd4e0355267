"""`python -m ledger_cli`: the same app as the `ledger` command."""

from ledger_cli.cli import main

if __name__ == "__main__":
    main()
