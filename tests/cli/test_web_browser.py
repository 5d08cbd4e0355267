"""`ledger serve` in a real browser: headless Chromium from Debian's packages,
driven by selenium through Debian's chromedriver (never Selenium Manager's
download). The tests assert what a person sees: the colours, the text, the
output appearing while the task runs, the filters, the hostile keys shown
as text. Skipped without chromium/chromedriver, failed instead when CI is set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli_support import ledger_cmd, subprocess_env
from tests.sql_support import in_ci
from tests.web_support import admit, served, wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
HOSTILE_KEYS = (
    "<img src=x onerror=alert(1)>",
    '"><script>alert(2)</script>',
    "javascript:alert(3)",
    "</pre><svg onload=alert(4)>",
)
HOSTILE_OUTPUT = "<script>alert(5)</script><img src=x onerror=alert(6)>"
RED = "rgba(207, 34, 46, 1)"  # #cf222e, .status-failed in ledger_cli/web/static/style.css


def _problem() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install --group test)"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = _problem()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI is set and {reason}", pytrace=False)
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="ledger-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,900",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def q(key: str) -> str:
    return urllib.parse.quote(key, safe="")


def no_alert(driver: Any) -> None:
    """No dialog opened: switching to one must fail."""
    from selenium.common.exceptions import NoAlertPresentException

    try:
        text = driver.switch_to.alert.text
    except NoAlertPresentException:
        return
    raise AssertionError(f"a dialog opened: {text!r}")


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def test_a_failed_task_is_red_and_filters_narrow_the_table(browser: Any, tmp_path: Path) -> None:
    store = tmp_path / "store"
    admit(store, "extract")
    admit(store, "report", "--needs", "extract")
    admit(store, "other")
    done = subprocess.run(
        [
            *ledger_cmd(),
            "--store",
            str(store),
            "run",
            "extract",
            "--owner",
            "w",
            "--lease",
            "1m",
            "--",
            "false",
        ],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    with served(store) as web:
        browser.get(web.url + "tasks")
        rows = {r.get_attribute("data-status"): r for r in css(browser, "#tasks tbody tr")}
        assert set(rows) == {"failed", "blocked", "pending"}
        cell = css(browser, "#tasks tbody tr[data-status=failed] td.status-failed")[0]
        assert cell.text == "failed"
        assert cell.value_of_css_property("color") == RED
        # The counts come after the table, fetched by app.js.
        failed_count = css(browser, "b[data-count=failed]")[0]
        wait_for(lambda: failed_count.text == "1", "the failed count")
        assert css(browser, "b[data-count=blocked]")[0].text == "1"
        # The filters: tick "failed", submit; then a key prefix.
        css(browser, "input[name=status][value=failed]")[0].click()
        css(browser, "form.filters button")[0].click()
        wait_for(lambda: "status=failed" in browser.current_url, "the filtered URL")
        keys = [a.text for a in css(browser, "#tasks tbody td:first-child a")]
        assert keys == ["extract"]
        browser.get(web.url + "tasks")
        box = css(browser, "input[name=prefix]")[0]
        box.send_keys("rep")
        css(browser, "form.filters button")[0].click()
        wait_for(lambda: "prefix=rep" in browser.current_url, "the prefix URL")
        assert [a.text for a in css(browser, "#tasks tbody td:first-child a")] == ["report"]
        # The front page's counts, fetched by app.js, the failure in red.
        browser.get(web.url)
        failed_count = css(browser, "b[data-count=failed]")[0]
        wait_for(lambda: failed_count.text == "1", "the failed count on /")
        assert css(browser, "#counts .status-failed")[0].value_of_css_property("color") == RED
        # The task page of the failure: its status is red too.
        browser.get(web.url + "tasks/extract")
        status = css(browser, "#status")[0]
        assert status.text == "failed"
        assert status.value_of_css_property("color") == RED


def test_running_output_appears_as_it_is_written(browser: Any, tmp_path: Path) -> None:
    store = tmp_path / "store"
    go = tmp_path / "go"
    admit(store, "slow")
    # The second line is hostile too: the live path (app.js) must add it as text.
    script = 'echo first-part; while [ ! -e "$1" ]; do sleep 0.05; done; echo "second-part $2"'
    runner = subprocess.Popen(
        [
            *ledger_cmd(),
            "--store",
            str(store),
            "run",
            "slow",
            "--owner",
            "w",
            "--lease",
            "1m",
            "--",
            "sh",
            "-c",
            script,
            "sh",
            str(go),
            HOSTILE_OUTPUT,
        ],
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        with served(store) as web:

            def first_part_kept() -> bool:
                reply = web.get("/api/tasks/slow/output")
                return reply.status == 200 and "first-part" in reply.json()["output"]

            wait_for(first_part_kept, "the first line in the kept output")
            browser.get(web.url + "tasks/slow")
            pre = css(browser, "#output")[0]
            assert "first-part" in pre.text
            assert "second-part" not in pre.text
            assert css(browser, "#status")[0].text == "claimed"
            go.touch()  # the command prints its second line now
            wait_for(lambda: "second-part" in pre.text, "the second line on the page")
            wait_for(lambda: css(browser, "#status")[0].text == "completed", "completed")
            assert pre.text.count("first-part") == 1
            assert f"second-part {HOSTILE_OUTPUT}" in pre.text
            assert css(browser, "#output *") == []  # text only, no element injected
            no_alert(browser)
            assert css(browser, "#attempt-state")[0].text == "ended"
    finally:
        go.touch()
        runner.wait(timeout=60)


def test_the_graph_is_drawn(browser: Any, tmp_path: Path) -> None:
    store = tmp_path / "store"
    admit(store, "fetch")
    admit(store, "load", "--needs", "fetch")
    with served(store) as web:
        reply = web.get("/api/graph")
        assert reply.status == 200
        assert reply.json()["edges"] == [{"from": "fetch", "to": "load", "blocking": False}]
        browser.get(web.url)
        nodes = css(browser, "#graph svg .node")
        assert {n.get_attribute("data-key") for n in nodes} == {"fetch", "load"}
        assert all(n.is_displayed() for n in nodes)


def test_hostile_keys_payloads_and_output_show_as_text(browser: Any, tmp_path: Path) -> None:
    store = tmp_path / "store"
    for key in HOSTILE_KEYS:
        admit(store, key, "--task", json.dumps({"html": HOSTILE_OUTPUT}))
    hostile = HOSTILE_KEYS[0]
    done = subprocess.run(
        [
            *ledger_cmd(),
            "--store",
            str(store),
            "run",
            hostile,
            "--owner",
            "<b>w</b>",
            "--lease",
            "1m",
            "--",
            "sh",
            "-c",
            'printf "%s\\n" "$1"',
            "sh",
            HOSTILE_OUTPUT,
        ],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with served(store) as web:
        browser.get(web.url + "tasks")
        no_alert(browser)
        shown = sorted(a.text for a in css(browser, "#tasks tbody td:first-child a"))
        assert shown == sorted(HOSTILE_KEYS)
        assert css(browser, "img, svg, iframe, body script:not([src='/static/app.js'])") == []
        for key in HOSTILE_KEYS:
            browser.get(web.url + "tasks/" + q(key))
            no_alert(browser)
            wait_for(lambda: css(browser, "#key"), "the task page")  # a loaded machine
            assert css(browser, "#key")[0].text == key
            assert HOSTILE_OUTPUT in css(browser, "#payload")[0].text
            assert css(browser, "main img, main svg, main iframe, main script") == []
        browser.get(web.url + "tasks/" + q(hostile))
        wait_for(lambda: css(browser, "#attempt-state"), "the output section")
        assert css(browser, "#output")[0].text.strip() == HOSTILE_OUTPUT
        assert "<b>w</b>" in css(browser, "#attempts")[0].text
        for box in ("#key", "#output", "#payload"):  # a bidi override stays inside its box
            assert css(browser, box)[0].value_of_css_property("unicode-bidi") == "isolate", box
        no_alert(browser)
        scripts = [s.get_attribute("src") for s in css(browser, "script")]
        assert scripts == [web.url + "static/app.js"]


def test_live_output_shows_controls_as_escapes(browser: Any, tmp_path: Path) -> None:
    """The script that follows a running attempt (for a key `..`, which goes
    in the query: `data-query`) shows an ESC or a CR in the new output as
    `\\x1b`, `\\r`, as the server-drawn part and the terminal do."""
    store = tmp_path / "store"
    admit(store, "..")
    go = tmp_path / "go"
    script = 'printf "first\\033[1m\\n"; while [ ! -e "$1" ]; do sleep 0.05; done; '
    script += 'printf "second\\033[2m\\r\\n"'
    run = ["run", "..", "--owner", "w", "--lease", "1m", "--", "sh", "-c", script, "sh", str(go)]
    runner = subprocess.Popen(
        [*ledger_cmd(), "--store", str(store), *run],
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with served(store) as web:
            wait_for(lambda: web.get("/api/task/output?key=..").status == 200, "the attempt")
            browser.get(web.url + "task?key=..")
            pre = css(browser, "#output")[0]
            wait_for(lambda: "first\\x1b[1m" in pre.text, "the first line")
            go.touch()
            wait_for(lambda: "second\\x1b[2m\\r" in pre.text, "the second line, live")
            assert "\x1b" not in pre.text and "\r" not in pre.text
    finally:
        go.touch()
        runner.wait(timeout=60)
