"""The `ledger` command line (SPEC §4): `app.main` is the entry point."""
