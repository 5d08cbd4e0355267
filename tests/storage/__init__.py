"""The stores (ledger_cli/stores): the conformance suites on every store, each
store's own format and indexes, durability counts, processes and deadlocks.
(Not `tests/stores/`: `tests/stores.py` is the store kinds every suite shares.)"""
