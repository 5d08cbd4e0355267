"""What freeing a small file costs on this machine's disk: the unlink of a
file whose bytes are still dirty in the page cache against one whose bytes
were written back (fdatasync), the case of a JSON store's old record file
replaced by a claim (stores/jsonfile/swap.py unlinks the old file under the
store lock).

    .venv/bin/python benchmarks/bench_unlink.py [--dir DIR] [--files N] [--rounds R]

Each round writes N files of 600 bytes (a record's size) in a fresh
directory under DIR (default: the temporary directory), unsynced or each
fdatasynced, and times their unlinks; the two kinds alternate for R rounds
(default 3). Printed: the mount options of DIR's file system, the median
microseconds an unlink took of each kind, and their ratio. On an ext4
without a journal mounted with `discard`, freeing a written-back block
issues its discard synchronously inside unlink(2) (docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

RECORD = b"x" * 600


def mount_of(path: Path) -> str:
    """`DEVICE on MOUNTPOINT type FS (OPTIONS)` of the mount holding `path`."""
    best = ("", "", "", "")
    for line in Path("/proc/mounts").read_text().splitlines():
        dev, point, fs, opts = line.split()[:4]
        if str(path.resolve()).startswith(point.rstrip("/") + "/") and len(point) > len(best[1]):
            best = (dev, point, fs, opts)
    return f"{best[0]} on {best[1]} type {best[2]} ({best[3]})" if best[0] else "unknown"


def one_round(root: Path, files: int, synced: bool) -> float:
    """Microseconds an unlink took, on average, over `files` files."""
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        names = [os.path.join(tmp, f"f{i}") for i in range(files)]
        for name in names:
            fd = os.open(name, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            try:
                os.write(fd, RECORD)
                if synced:
                    os.fdatasync(fd)
            finally:
                os.close(fd)
        start = time.perf_counter()
        for name in names:
            os.unlink(name)
        return (time.perf_counter() - start) / files * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    got: dict[str, list[float]] = {"dirty": [], "written back": []}
    for r in range(opts.rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        for synced in order:
            got["written back" if synced else "dirty"].append(
                one_round(opts.dir, opts.files, synced)
            )
    print(f"bench_unlink: {opts.files} files of {len(RECORD)} bytes, {opts.rounds} rounds")
    print(f"  {mount_of(opts.dir)}")
    dirty = statistics.median(got["dirty"])
    back = statistics.median(got["written back"])
    print(f"  unlink of a dirty file:        {dirty:9.1f} us")
    print(f"  unlink of a written-back file: {back:9.1f} us")
    print(f"  written back / dirty: {back / dirty:.1f}x")


if __name__ == "__main__":
    main()
