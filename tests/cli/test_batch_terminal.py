"""`admit --batch` on a terminal: a refused line's error, printed above the
progress bar, stays one line however narrow the terminal (docs/design.md
§4.5: an error is one line), so a copy of the screen still finds it whole.
A fresh `ledger` process whose stderr is a 60-column pseudo-terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
from pathlib import Path

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env


def test_a_refused_line_is_one_line_on_a_narrow_terminal(tmp_path: Path) -> None:
    store = tmp_path / "store"
    batch = tmp_path / "batch.jsonl"
    batch.write_text('{"key": "b"}\n{"key": "b", "task": {"x": 1}}\n')
    main, other = pty.openpty()
    fcntl.ioctl(other, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))
    try:
        done = subprocess.run(
            [*ledger_cmd(), "--store", str(store), "admit", "--batch", str(batch)],
            stdout=subprocess.PIPE,
            stderr=other,
            env=subprocess_env(COLUMNS="60"),
            timeout=60,
            check=False,
        )
        os.close(other)
        other = -1
        seen = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the terminal's other side is closed
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if other >= 0:
            os.close(other)
        os.close(main)
    assert done.returncode == 8
    message = b"ledger: line 2: b is already admitted at sequence 1 with a different task"
    assert message in seen, seen.decode(errors="replace")
    assert run_ledger(store, "list", "--jsonl").stdout.count('"Key"') == 1
