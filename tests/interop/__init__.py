"""Sharing with others: the Go service's rows and keys, filelock's lock,
typer's private names, PostgreSQL's round trips."""
