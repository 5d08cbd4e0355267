"""Fixtures shared by several test files."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """Where the fault runs put their stores: /dev/shm when there is one (a tmpfs:
    hundreds of store copies and syncfs calls cost little there), else tmp_path."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        base = shm / f"ledger-faults-{uuid.uuid4().hex[:12]}"
        base.mkdir(mode=0o700)
        try:
            yield base
        finally:
            shutil.rmtree(base, ignore_errors=True)
    else:
        yield tmp_path
