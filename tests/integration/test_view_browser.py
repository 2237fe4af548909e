"""``chronicle view`` pages in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by
Selenium with the system chromedriver: nothing is downloaded).

Locally a missing browser skips these tests with a loud reason; under ``CI=true`` it is a failure. The browser
cannot reach anything but the page: DNS answers nothing and every request would go to a dead loopback proxy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import decimal
import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

import chronicle_otel as chronicle
from chronicle_otel.cli import _view
from tests.conftest import Recorder

pytestmark = pytest.mark.integration

HOSTILE = "<img src=x onerror=alert(1)>"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

# Runs before the page's own script (through DevTools): records dialogs and policy violations instead of showing them.
WATCH = """
window.__seen = {dialogs: [], violations: []};
for (const name of ["alert", "confirm", "prompt"]) {
  window[name] = (m) => { window.__seen.dialogs.push(name + ":" + String(m)); };
}
document.addEventListener("securitypolicyviolation", (e) => {
  window.__seen.violations.push(e.violatedDirective + " " + e.blockedURI);
});
"""


def _browser_missing(what: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what} (under CI=true a missing browser is a failure; .ci/run installs it)")
    pytest.skip(f"SKIPPED LOUDLY: {what}; apt-get install chromium chromium-driver && pip install selenium")


# --- the recorded agent -----------------------------------------------------------------------------------------


class Intent(pydantic.BaseModel):
    category: str
    confidence: float


@dataclasses.dataclass
class Refund:
    amount: decimal.Decimal
    when: dt.date
    refunded: bool


FIXED = {"refund": False}


@chronicle.boundary(kind="llm", name="support.classify")
async def classify(text: str) -> Intent:
    return Intent(category="refund", confidence=0.75)


@chronicle.boundary(kind="retrieval", name="support.search_policies")
def search_policies(query: str) -> Iterator[dict[str, Any]]:
    for i in range(3):
        yield {"doc": i, "text": f"policy {i} about {query}"}


@chronicle.boundary(kind="tool", name=HOSTILE)
def hostile(note: str) -> str:
    return HOSTILE


@chronicle.boundary(kind="tool", name="support.issue_refund")
def issue_refund(amount: decimal.Decimal) -> Refund:
    if not FIXED["refund"]:
        raise ValueError("card declined </script><script>alert(2)</script>")
    return Refund(amount, dt.date(2024, 1, 2), True)


@chronicle.boundary(kind="agent", name="support.handle")
async def handle(ticket: str) -> dict[str, Any]:
    intent = await classify(ticket)
    docs = list(search_policies(intent.category))
    hostile(HOSTILE)
    try:
        refund: Refund | None = issue_refund(decimal.Decimal("49.99"))
    except ValueError:
        refund = None
    return {"intent": intent.category, "docs": len(docs), "refunded": refund is not None}


def record(recorder: Recorder) -> chronicle.Trace:
    FIXED["refund"] = False
    with chronicle.session(tenant="acme", user="u-42"):
        asyncio.run(handle("I want my money back"))
    recorder.config.force_flush()
    return chronicle.load_trace(recorder.path, "latest")


# --- the browser ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM or not CHROMEDRIVER:
        _browser_missing("chromium or chromedriver is not installed")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _browser_missing("selenium is not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",  # root in a container
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,900",
        "--force-device-scale-factor=1",
        "--lang=en-US",
        # Nothing leaves the machine: no name resolves, every request goes to a dead loopback proxy.
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=http://127.0.0.1:9",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-domain-reliability",
        "--disable-sync",
        "--no-pings",
        "--no-first-run",
        "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver: Any, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("browser")  # drop what an earlier page logged
    driver.get(page.resolve().as_uri())
    WebDriverWait(driver, 10).until(lambda d: d.execute_script("return document.documentElement.dataset.ready"))


def wait_for(driver: Any, condition: Any, timeout: float = 5.0) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition())


def assert_clean(driver: Any) -> None:
    """No script of the data ran, nothing was blocked or failed, nothing was fetched."""
    seen = driver.execute_script("return window.__seen")
    assert seen == {"dialogs": [], "violations": []}
    assert driver.execute_script("return document.querySelectorAll('img, iframe, object, embed').length") == 0
    assert driver.execute_script("return document.scripts.length") == 2
    assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0
    severe = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert severe == []


def write_page(source: str, trace_id: str, out: Path, *extra: str) -> Path:
    """``chronicle view TRACE_ID --store|--file SOURCE --out OUT …``: the page's path."""
    import argparse

    parser = argparse.ArgumentParser(prog="chronicle")
    _view.add_parser(parser.add_subparsers(dest="command"))
    option = "--file" if source.endswith(".jsonl") else "--store"
    args = parser.parse_args(["view", trace_id, option, source, "--out", str(out), *extra])
    printed = io.StringIO()
    assert _view.run(args, printed) == 0
    return Path(printed.getvalue().strip())


def tree_rows(driver: Any) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, "#tree .row"))


def row_named(driver: Any, name: str) -> Any:
    from selenium.webdriver.common.by import By

    for row in tree_rows(driver):
        if row.find_element(By.CSS_SELECTOR, ".name").text.startswith(name + " ["):
            return row
    raise AssertionError(f"no tree row {name!r}")


def details_text(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.ID, "details").text)


# --- the tests --------------------------------------------------------------------------------------------------


def test_the_page_shows_tree_timeline_payloads_search_and_errors_as_text(
    browser: Any, recorder: Recorder, tmp_path: Path, record_property: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    trace = record(recorder)
    page = write_page(str(recorder.path), trace.trace_id[:8], tmp_path / "view.html")
    open_page(browser, page)
    names = [b.name for b in trace.boundaries]
    assert len(names) == 5

    # The tree: every boundary, nested under the root, the hostile name as text.
    rows = tree_rows(browser)
    assert len(rows) == len(names)
    shown = [r.find_element(By.CSS_SELECTOR, ".name").text for r in rows]
    assert shown == [f"{name} [0]" for name in names]
    assert row_named(browser, HOSTILE).get_attribute("style") == "padding-left: 18px;"  # one level down
    assert "tenant = acme" in browser.find_element(By.ID, "head").text.replace("\n", " ")

    # The timeline: one bar per boundary, placed by start time, children inside the root's bar.
    bars = browser.execute_script(
        """return Array.from(document.querySelectorAll('#timeline .tl-row')).map(r => {
             const box = r.querySelector('.bar').getBoundingClientRect();
             return {i: Number(r.dataset.i), start: Number(r.querySelector('.bar').dataset.start),
                     left: box.left, right: box.right, label: r.querySelector('.tl-label').textContent};
           });"""
    )
    assert len(bars) == len(names) and sorted(b["i"] for b in bars) == list(range(len(names)))
    by_start = sorted(trace.boundaries, key=lambda b: b.start_ns)
    assert [b["label"] for b in bars] == [b.name for b in by_start]
    assert [b["start"] for b in bars] == sorted(b["start"] for b in bars)
    assert [b["left"] for b in bars] == sorted(b["left"] for b in bars)
    root = bars[0]
    assert root["label"] == "support.handle" and root["right"] - root["left"] > 500
    assert all(root["left"] - 1 <= b["left"] and b["right"] <= root["right"] + 1 for b in bars)

    # Clicking a boundary shows its payloads, typed values readable, JSON on request.
    row_named(browser, "support.classify").click()
    wait_for(browser, lambda: "support.classify" in details_text(browser))
    text = details_text(browser)
    assert "classify(text='I want my money back')" in text
    assert "Intent(category='refund', confidence=0.75)" in text
    browser.find_element(By.XPATH, "//section[@data-part='output']//button[text()='JSON']").click()
    wait_for(browser, lambda: '"$type": "pydantic"' in details_text(browser))
    browser.find_element(By.XPATH, "//section[@data-part='output']//button[text()='Readable']").click()
    row_named(browser, "support.search_policies").click()
    wait_for(browser, lambda: "Output (stream items)" in details_text(browser))
    assert "policy 2 about refund" in details_text(browser)

    # The hostile name and value are text: shown as recorded, nothing ran.
    row_named(browser, HOSTILE).click()
    wait_for(browser, lambda: f"'{HOSTILE}'" in details_text(browser))
    assert f"hostile(note='{HOSTILE}')" in details_text(browser)

    # The error is highlighted in the tree, the timeline and the payload viewer.
    error_row, ok_row = row_named(browser, "support.issue_refund"), row_named(browser, "support.classify")
    assert "error" in (error_row.get_attribute("class") or "").split()
    assert error_row.value_of_css_property("border-left-color") != ok_row.value_of_css_property("border-left-color")
    assert browser.execute_script("return document.querySelectorAll('#timeline .bar.error').length") == 1
    browser.find_element(By.CSS_SELECTOR, "#head .chip.err").click()  # "1 error" selects it
    wait_for(browser, lambda: "support.issue_refund" in details_text(browser))
    error = browser.find_element(By.CSS_SELECTOR, "#details .payload.error")
    assert "ValueError('card declined </script><script>alert(2)</script>')" in error.text
    assert error.value_of_css_property("border-top-color") == error_row.value_of_css_property("border-left-color")

    # The search filters boundaries by payload text and marks the hits.
    search = browser.find_element(By.ID, "search")
    search.send_keys("POLICY 1 about")
    wait_for(browser, lambda: browser.find_element(By.ID, "matches").text == "1 of 5")
    visible = [r for r in tree_rows(browser) if r.is_displayed()]
    assert [r.find_element(By.CSS_SELECTOR, ".name").text for r in visible] == [
        "support.handle [0]",  # kept, dimmed: the match is below it
        "support.search_policies [0]",
    ]
    assert "nomatch" in (visible[0].get_attribute("class") or "")
    timeline_rows = browser.find_elements(By.CSS_SELECTOR, "#timeline .tl-row")
    assert [r.text.split("\n")[0] for r in timeline_rows if r.is_displayed()] == ["support.search_policies"]
    marks = browser.find_elements(By.CSS_SELECTOR, "#details mark")
    assert [m.text for m in marks] == ["policy 1 about"]
    assert browser.switch_to.active_element == search  # typing goes on in the search box
    search.send_keys(Keys.ESCAPE)
    wait_for(browser, lambda: all(r.is_displayed() for r in tree_rows(browser)))

    # The keyboard moves through the tree.
    row_named(browser, "support.handle").click()
    browser.switch_to.active_element.send_keys(Keys.ARROW_DOWN)
    wait_for(browser, lambda: "support.classify" in browser.find_element(By.CSS_SELECTOR, ".d-head").text)
    assert "selected" in (row_named(browser, "support.classify").get_attribute("class") or "").split()

    # Collapsing the root hides its children.
    row_named(browser, "support.handle").find_element(By.CSS_SELECTOR, ".toggle").click()
    assert [r.is_displayed() for r in tree_rows(browser)] == [True, False, False, False, False]
    row_named(browser, "support.handle").find_element(By.CSS_SELECTOR, ".toggle").click()

    row_named(browser, "support.issue_refund").click()
    screenshot = tmp_path / "chronicle-view.png"
    assert browser.save_screenshot(str(screenshot))
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record_property("screenshot", str(screenshot))
    print(f"screenshot: {screenshot}")
    assert_clean(browser)


def test_the_replay_report_is_shown_beside_its_boundaries(
    browser: Any, recorder: Recorder, tmp_path: Path, record_property: Any
) -> None:
    from selenium.webdriver.common.by import By

    trace = record(recorder)
    FIXED["refund"] = True  # the fix: the refund goes through now
    try:
        with chronicle.replay(trace, stub={"kind:llm", "kind:retrieval"}) as run:
            run.rerun()
    finally:
        FIXED["refund"] = False
    report_file = tmp_path / "report.json"
    report_file.write_text(json.dumps({**dataclasses.asdict(run.report), "trace_id": trace.trace_id}))
    page = write_page(str(recorder.path), trace.trace_id, tmp_path / "replay.html", "--report", str(report_file))
    open_page(browser, page)

    panel = browser.find_element(By.ID, "report")
    assert panel.text.startswith("replay ok: 2 stubbed")
    assert "CHANGES (2)" in panel.text.upper()
    change = panel.find_element(
        By.XPATH, ".//div[contains(concat(' ', @class, ' '), ' finding ') and contains(., 'support.issue_refund[0]:')]"
    )
    assert change.text.startswith("[output-changed] support.handle[0] > support.issue_refund[0]: now returns")
    change.click()
    wait_for(browser, lambda: "support.issue_refund" in browser.find_element(By.CSS_SELECTOR, ".d-head").text)
    text = details_text(browser)
    assert "REPLAY REPORT" in text.upper() and "[output-changed] now returns; recorded error" in text
    badges = row_named(browser, "support.classify").find_elements(By.CSS_SELECTOR, ".badge")
    assert "stubbed" in [b.text for b in badges]
    screenshot = tmp_path / "chronicle-view-replay.png"
    assert browser.save_screenshot(str(screenshot))
    record_property("screenshot", str(screenshot))
    assert_clean(browser)


def test_a_large_trace_renders_and_searches(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from chronicle_otel import semconv as sc
    from chronicle_otel.replaying import SpanRecord, build_trace

    tid = "cd" * 16
    spans = [
        SpanRecord(
            tid,
            f"{i + 1:016x}",
            None if i == 0 else f"{(i + 9) // 10:016x}",  # ten children a node
            f"step{i}",
            1,
            i * 1000,
            i * 1000 + 50_000,
            {
                sc.BOUNDARY_NAME: f"step{i}",
                sc.BOUNDARY_KIND: "tool",
                sc.CODEC: "chronicle-json/1",
                sc.CALL_INDEX: 0,
                sc.INPUT: json.dumps({"n": i, "text": f"needle-{i}" if i % 500 == 7 else "hay"}),
                sc.OUTPUT: json.dumps(i),
            },
        )
        for i in range(2000)
    ]
    file = chronicle.write_trace(build_trace(tid, spans), tmp_path / "large.jsonl")
    page = write_page(str(file), tid, tmp_path / "large.html")
    open_page(browser, page)
    assert browser.execute_script("return document.querySelectorAll('#tree .row').length") == 2000
    assert browser.execute_script("return document.querySelectorAll('#timeline .bar').length") == 2000
    browser.find_element(By.ID, "search").send_keys("needle-")
    wait_for(browser, lambda: browser.find_element(By.ID, "matches").text == "4 of 2000")
    assert_clean(browser)
