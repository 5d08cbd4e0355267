"""A real terminal for the tests that need one (tmux: send-keys and
capture-pane): `ledger watch`, and shell completion typed as a user types it.

Every wait is for a state of the screen (a line appearing), bounded only to
fail a hung test.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.cli_support import subprocess_env

BOUND = 60.0


class Tmux:
    def __init__(self, socket: str, session: str) -> None:
        self.base = ["tmux", "-L", socket]
        self.session = session
        # The server's environment is the panes': no inherited COLUMNS/LINES.
        self.env = {k: v for k, v in subprocess_env().items() if k not in ("COLUMNS", "LINES")}

    def __call__(self, *args: str) -> str:
        res = subprocess.run(
            [*self.base, *args],
            capture_output=True,
            text=True,
            timeout=BOUND,
            check=True,
            env=self.env,
        )
        return res.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", self.session)

    def wait_for(self, text: str) -> str:
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never appeared on the screen:\n{self.screen()}")

    def wait_line(self, start: str) -> str:
        """The first line of the screen that starts with `start`, once there is one."""
        screen = self.wait_for("\n" + start)
        return next(line for line in screen.splitlines() if line.startswith(start))

    def type(self, text: str) -> None:
        """Keys typed as they are (no key names)."""
        self("send-keys", "-t", self.session, "-l", text)

    def keys(self, *names: str) -> None:
        self("send-keys", "-t", self.session, *names)


def tmux_server() -> Iterator[Tmux]:
    """A tmux server of the test's own (the body of a fixture)."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (.ci/run installs it)")
    t = Tmux(f"ledger-test-{uuid.uuid4().hex[:8]}", "w")
    yield t
    subprocess.run([*t.base, "kill-server"], capture_output=True, timeout=BOUND, check=False)
