"""A JSON store attempt file belongs to its key's directory and holds the
output its header counts (docs/design.md §7.1): one moved or copied from
another key's directory, or with bytes appended after its output, is damage
that every reader names (exit 9, the file's path), never another task's
output shown as this one's. Each command is a fresh `ledger` process.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import ledger_ok, run_sane


def _attempt(store: Path, key: str) -> Path:
    digest = key_digest(key)
    assert digest is not None
    return store / "attempts" / digest[:2] / digest / "1.att"


def _two_runs(tmp_path: Path) -> Path:
    store = tmp_path / "s"
    for key, said in (("secret", "TOP-SECRET"), ("public", "public-output")):
        ledger_ok(store, "admit", key)
        ledger_ok(store, "run", key, "--owner", "w", "--lease", "1m", "--", "echo", said)
    return store


def _damage_named(store: Path, key: str, path: Path, why: str) -> None:
    for args in (("output", key), ("state", key), ("--json", "state", key), ("doctor",)):
        res = run_sane(store, *args)
        assert res.returncode == 9, (args, res.stdout, res.stderr)
        assert str(path) in res.stdout + res.stderr, (args, res.stdout, res.stderr)
        assert why in res.stdout + res.stderr, (args, res.stdout, res.stderr)
        assert "TOP-SECRET" not in res.stdout, (args, res.stdout)


def test_swapped_attempt_files_are_damage_not_the_other_keys_output(tmp_path: Path) -> None:
    """Two keys' attempt files swapped: `output`, `state` and `doctor` exit 9
    naming the file that holds another key, not printing its output."""
    store = _two_runs(tmp_path)
    secret, public = _attempt(store, "secret"), _attempt(store, "public")
    held = secret.read_bytes()
    shutil.copyfile(public, secret)
    public.write_bytes(held)
    _damage_named(store, "public", public, "holds key 'secret', which belongs elsewhere")


def test_bytes_after_a_finished_attempts_output_are_damage(tmp_path: Path) -> None:
    """Bytes appended after the output its header counts: readers exit 9
    naming the file, where they printed the extra bytes as output."""
    store = _two_runs(tmp_path)
    public = _attempt(store, "public")
    with public.open("ab") as f:
        f.write(b"appended!!")
    _damage_named(store, "public", public, "24 bytes of output where its header counts 14")


def test_the_untouched_attempts_still_read(tmp_path: Path) -> None:
    """The check refuses nothing the store wrote: each key's output as run."""
    store = _two_runs(tmp_path)
    assert ledger_ok(store, "output", "secret") == "TOP-SECRET\n"
    assert ledger_ok(store, "output", "public") == "public-output\n"
    assert "no problems found" in ledger_ok(store, "doctor")
