"""Daemon threads that `ledger run` reuses across the tasks of a drain.

A drained task needs a thread to pump its command's output (capture.py) and,
where the claim could not start the attempt (SQL stores), one to record the
start (attempts.py). `threading.Thread.start` waits until the new thread
runs, which on a busy machine (four drain workers on two cores) costs more
than much of the task's own work; a thread left idle by the last task is
handed the next one instead. `spawn(job)` runs `job` on an idle thread, or a
new one when none is idle (a pump still draining a grandchild's output keeps
its thread), and returns an Event set when the job is over. A forked child
starts with none idle (the threads are not copied by fork).
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable

_idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()


def _forget() -> None:
    """In a forked child: the idle threads were not copied, so forget them."""
    global _idle
    _idle = queue.SimpleQueue()


os.register_at_fork(after_in_child=_forget)


class _Worker:
    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[tuple[Callable[[], object], threading.Event]] = (
            queue.SimpleQueue()
        )
        threading.Thread(target=self._loop, name="ledger-run", daemon=True).start()

    def _loop(self) -> None:
        while True:
            job, done = self.jobs.get()
            try:
                job()
            except BaseException:  # as a thread of its own would report it
                sys.excepthook(*sys.exc_info())
            _idle.put(self)  # before `done`: the next task finds it idle
            done.set()


def spawn(job: Callable[[], object]) -> threading.Event:
    """Run `job` in a daemon thread; the Event is set once it returned."""
    try:
        worker = _idle.get_nowait()
    except queue.Empty:
        worker = _Worker()
    done = threading.Event()
    worker.jobs.put((job, done))
    return done
