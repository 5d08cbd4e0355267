"""The daemon threads `ledger run` reuses across a drain's tasks
(cli/commands/run/threads.py): a job runs, a thread is reused, and a forked
child (which has none of the parent's threads) starts its own."""

from __future__ import annotations

import os

import pytest

from ledger_cli.cli.commands.run import threads

BOUND = 60.0  # against a hung test, never a timing assertion


def test_a_job_runs_and_its_thread_is_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert threads.spawn(lambda: None).wait(BOUND)  # an idle thread now, at least
    made: list[object] = []
    real = threads._Worker

    def counted() -> object:
        made.append(None)
        return real()

    monkeypatch.setattr(threads, "_Worker", counted)
    ran: list[int] = []
    for i in range(3):
        assert threads.spawn(lambda i=i: ran.append(i)).wait(BOUND)
    assert ran == [0, 1, 2] and made == []  # each job on a thread left idle


def test_a_forked_child_runs_jobs_on_threads_of_its_own() -> None:
    assert threads.spawn(lambda: None).wait(BOUND)  # an idle thread in this process
    pid = os.fork()
    if pid == 0:  # the child: a job handed to the parent's idle thread would never run
        os._exit(0 if threads.spawn(lambda: None).wait(BOUND) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
