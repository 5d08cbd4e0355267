"""Sharing with others: the Go service's rows and keys, the lock taken by filelock, typer's private names, PostgreSQL's round trips."""
