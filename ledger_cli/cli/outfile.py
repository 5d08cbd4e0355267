"""`-o FILE` (`snapshot`, `stats`): the file written the way a reader of it
and its owner expect (docs/design.md §4.1)."""

from __future__ import annotations

import contextlib
import os
import stat

from ledger_cli.cli.inputs import InputError


def write_atomically(path: str, data: bytes) -> None:
    """Write `-o FILE` the way a reader of FILE and its owner expect.

    A regular file (or a new one) is replaced: temp file beside it, fsync,
    rename over it, fsync the directory, so a reader never sees half a file
    and the file survives a crash once this returns. A symlink is followed,
    as shell redirection and `cp` follow it: the file it points to is
    replaced (created when the link dangles) and the link stays. A FIFO or a
    device is written in place: it cannot be renamed over. What `snapshot -o`
    and `stats -o` write; a new file is readable by others (0644 less the
    umask): node_exporter runs as its own user.
    """
    target = os.path.realpath(path)
    try:
        try:
            mode = os.stat(target).st_mode
        except FileNotFoundError:
            mode = 0
        if mode and not stat.S_ISREG(mode):
            _write_in_place(target, data)
        else:
            _replace(target, data)
    except OSError as exc:
        raise InputError(
            f"ledger: cannot write {path}: {exc.strerror or exc}", "bad_file"
        ) from None


def _write_in_place(target: str, data: bytes) -> None:
    """A FIFO or a device: opened (a FIFO waits for its reader) and written."""
    fd = os.open(target, os.O_WRONLY)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _replace(target: str, data: bytes) -> None:
    directory = os.path.dirname(target)
    tmp = os.path.join(directory, f".{os.path.basename(target)}.tmp-{os.getpid()}")
    umask = os.umask(0)
    os.umask(umask)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644 & ~umask)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        os.fsync(dir_fd)  # the rename, durable too
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    finally:
        os.close(dir_fd)
