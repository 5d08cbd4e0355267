"""An SQL store's pruned record is its row in `ledger_tasks` plus its key in
`ledger_pruned` (docs/design.md §6.4). A row deleted by hand leaves the mark
on no record: the key is then neither kept nor free (`admit` starts it anew
and every listing hides the new record as pruned). `ledger doctor`, a fresh
process, names each such mark (exit 9) as it names a damaged pruned shard of
the JSON store; `doctor --fix` drops the mark, after which the key's record,
if any, is listed again (cli/commands/doctor/prunedmarks.py)."""

from __future__ import annotations

import json

import pytest

from tests.cli_support import ledger_ok, run_ledger
from tests.stores import execute_sql as _execute
from tests.stores import sql_url

url = sql_url  # the fixture, under the name its tests take

KEY = "pay-42"


@pytest.fixture(autouse=True)
def _pruned(url: str) -> None:
    ledger_ok(url, "admit", KEY)
    fence = ledger_ok(url, "claim", KEY, "--owner", "w1", "--lease", "5m").strip()
    ledger_ok(url, "complete", KEY, "--owner", "w1", "--fence", fence)
    assert ledger_ok(url, "prune", "--older-than", "0s").strip() == "pruned 1 record"
    _execute(url, f"DELETE FROM ledger_tasks WHERE key = '{KEY}'")


def _doctor(url: str, *args: str) -> tuple[int, dict[str, list[str]]]:
    res = run_ledger(url, "doctor", "--json", *args)
    return res.returncode, json.loads(res.stdout)


def _listed(url: str) -> list[str]:
    return [r["Key"] for r in json.loads(ledger_ok(url, "list", "--json"))]


def test_a_mark_whose_record_was_deleted_is_named_and_fix_drops_it(url: str) -> None:
    code, found = _doctor(url)
    assert code == 9
    assert found["problems"] == [
        f'ledger_pruned marks key "{KEY}", which has no record: its pruned record was'
        f' deleted, so `admit "{KEY}"` would start it anew and hide it as pruned'
        " (doctor --fix drops the mark)"
    ]
    code, found = _doctor(url, "--fix")
    assert (code, found["problems"]) == (0, [])
    assert len(found["fixed"]) == 1 and found["fixed"][0].endswith(": the mark dropped")
    assert _doctor(url)[0] == 0
    assert ledger_ok(url, "admit", KEY).strip() == "admitted"
    assert _listed(url) == [KEY]


def test_a_key_admitted_again_under_a_stray_mark_is_named_and_listed_after_fix(
    url: str,
) -> None:
    assert ledger_ok(url, "admit", KEY).strip() == "admitted"  # the old sequence is forgotten
    assert _listed(url) == []  # hidden as pruned
    code, found = _doctor(url)
    assert code == 9
    assert found["problems"] == [
        f'ledger_pruned marks key "{KEY}", whose record is pending, not finished: it is'
        " hidden from list and stats as pruned (its pruned record was deleted and the"
        " key admitted again) (doctor --fix drops the mark)"
    ]
    assert run_ledger(url, "doctor", "--fix").returncode == 0
    assert _listed(url) == [KEY]
    assert _doctor(url)[0] == 0
