"""The engine: a faithful port of the Go `ledger` package. No I/O but through a Store."""
