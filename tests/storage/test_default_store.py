"""The default store's directory: `store` in platformdirs' user data
directory, found on Linux without importing platformdirs (docs/design.md §5.1)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs
import pytest

from ledger_cli.stores import default_store_path, default_store_url

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="platformdirs decides elsewhere")

HOME = "/home/someone"


@pytest.mark.parametrize(
    "env",
    [
        {"HOME": HOME},
        {"HOME": HOME, "XDG_DATA_HOME": "/srv/data"},
        {"HOME": HOME, "XDG_DATA_HOME": "/srv/data/"},
        {"HOME": HOME, "XDG_DATA_HOME": ""},
        {"HOME": HOME, "XDG_DATA_HOME": "relative/data"},  # ignored, as XDG says
        {"HOME": HOME + "/"},
        {"HOME": "relative"},  # not a home: the account's, from the password database
        {},
    ],
    ids=[
        "home",
        "xdg",
        "xdg-slash",
        "xdg-empty",
        "xdg-relative",
        "home-slash",
        "home-relative",
        "none",
    ],
)
def test_the_default_store_is_where_platformdirs_puts_user_data(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    for name in ("HOME", "XDG_DATA_HOME", "ANDROID_DATA"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    expected = platformdirs.user_data_path("ledger_cli") / "store"
    assert Path(default_store_path()) == expected
    assert os.path.isabs(default_store_path())
    assert default_store_url() == f"json:{default_store_path()}"
