"""The dashboard in a real browser: headless Chromium (Debian's chromium and chromedriver,
which .ci/run installs; nothing is downloaded here) driven by Selenium against `ys ui` on a
temporary home. Each page's screenshot goes to the folder the test run names at its end."""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cron.cron_support import minute_slots, put_schedule
from tests.support import GATE, DaemonHandle, make_home, wait_until
from tests.ui.conftest import SCREENSHOTS
from tests.ui.ui_support import populate

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
        reason="Debian's chromium and chromium-driver are not installed (.ci/run installs them)",
    ),
]

NAPPING = """
import ys

@ys.workflow
def main(step, params):
    print("napping for an hour", flush=True)
    step.run("prepare", lambda: {"ready": True})
    step.sleep("nap", 3600)
"""

FAILING = """
import ys

@ys.workflow
def main(step, params):
    print("charging order", params.get("order"), flush=True)
    step.run("charge", lambda: 1 / 0)
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    with make_home(tmp_path_factory.mktemp("browser")) as h:
        h.write("gate.py", GATE)
        h.write("nap.py", NAPPING)
        h.write("charge.py", FAILING)
        h.start()
        yield h


@pytest.fixture(scope="module")
def url(home: DaemonHandle) -> Iterator[str]:
    with ui_url(home) as u:
        yield u


@contextlib.contextmanager
def ui_url(home: DaemonHandle) -> Iterator[str]:
    """`ys ui` on `home` for as long as the block runs: its one-time sign-in URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ys", "ui", "--no-open", "--json"],
        env=home.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield json.loads(proc.stdout.readline())["url"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture(scope="module")
def browser(url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in [
        *FLAGS,
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
        "--window-size=1280,900",
    ]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, read below
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        driver.get(url)  # the one-time token becomes the session cookie
        wait_until(
            lambda: driver.find_element("css selector", "h1").text == "Now", message="the Now page"
        )
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module", autouse=True)
def screenshots() -> Path:
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    return SCREENSHOTS


def shoot(driver: Any, name: str, *, dark: bool = False, width: int = 1280) -> Path:
    """A screenshot of the whole page (not only the window), light or dark."""
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]},
    )
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600},
    )
    height = driver.execute_script("return document.documentElement.scrollHeight")
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": min(height, 6000), "scale": 1},
        },
    )
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    path = SCREENSHOTS / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def text_of(driver: Any, css: str) -> str:
    return str(driver.find_element("css selector", css).text)


def section(driver: Any, title: str) -> str:
    """The text of the card titled `title`. Live regions are swapped as their data changes,
    so an element may go stale between finding and reading it: then look again."""
    from selenium.common.exceptions import StaleElementReferenceException

    for _ in range(20):
        try:
            for s in driver.find_elements("css selector", "section.card"):
                h2 = s.find_elements("css selector", "h2")
                if h2 and h2[0].text.startswith(title):
                    return str(s.text)
            return ""
        except StaleElementReferenceException:
            continue
    raise AssertionError(f"the {title} section kept changing")


def test_now_lists_a_running_execution_and_updates_when_it_completes(
    home: DaemonHandle, browser: Any, tmp_path: Path
):
    gate = tmp_path / "gate.go"
    c = home.client()
    c.trigger("gate", {"gate": str(gate)}, execution_id="report/nightly")
    c.trigger("charge", {"order": 41}, execution_id="charge/41")
    c.trigger("nap", execution_id="nap/1")
    c.store_put("approve/7", {"by": "ana"})
    c.schedule_add("nightly", "gate", "0 3 * * *", tz="UTC")
    c.wait("charge/41", timeout=30)
    wait_until(lambda: c.get("nap/1")["status"] == "suspended", message="nap/1 suspended")
    browser.get(browser.current_url.split("/ui/")[0] + "/ui/")
    wait_until(
        lambda: "report/nightly" in section(browser, "Running"),
        message="the running execution on the Now page",
    )
    wait_until(lambda: "left" in section(browser, "Running"), message="relative times")
    assert "charge/41" in section(browser, "Failed in the last 24 hours")
    shoot(browser, "now")
    shoot(browser, "now-dark", dark=True)
    shoot(browser, "now-phone", width=390)
    browser.execute_script("window.ysNotReloaded = true")
    gate.touch()
    wait_until(
        lambda: "Nothing is running." in section(browser, "Running"),
        timeout=30,
        message="the Now page to show the execution ended",
    )
    assert browser.execute_script("return window.ysNotReloaded") is True


def test_filter_executions_by_status(home: DaemonHandle, browser: Any):
    c = home.client()
    c.trigger("charge", {"order": 42}, execution_id="charge/42")
    c.wait("charge/42", timeout=30)
    base = browser.current_url.split("/ui/")[0]
    browser.get(base + "/ui/executions")
    shoot(browser, "executions")
    browser.find_element("css selector", "input[name=status][value=failed]").click()
    browser.find_element("css selector", "form.filters button[type=submit]").click()
    wait_until(lambda: "status=failed" in browser.current_url, message="the filtered URL")
    statuses = {e.text for e in browser.find_elements("css selector", "table.list .st")}
    ids = {e.text for e in browser.find_elements("css selector", "table.list a.id")}
    assert statuses == {"failed"} and {"charge/41", "charge/42"} <= ids
    shoot(browser, "executions-failed")


def test_an_execution_shows_its_steps_and_logs(home: DaemonHandle, browser: Any):
    base = browser.current_url.split("/ui/")[0]
    browser.get(base + "/ui/executions/charge%2F41")
    steps = section(browser, "Steps")
    assert "charge" in steps and "ZeroDivisionError" in steps
    assert "charging order 41" in section(browser, "Logs")
    shoot(browser, "execution-failed")
    browser.get(base + "/ui/executions/nap%2F1")
    assert "prepare" in section(browser, "Steps") and "nap" in section(browser, "Steps")
    assert "a timer" in section(browser, "Waits on")
    shoot(browser, "execution-suspended")
    shoot(browser, "execution-suspended-dark", dark=True)


def test_cancel_from_the_page(home: DaemonHandle, browser: Any):
    c = home.client()
    c.trigger("nap", execution_id="nap/cancel-me")
    wait_until(lambda: c.get("nap/cancel-me")["status"] == "suspended", message="suspended")
    base = browser.current_url.split("/ui/")[0]
    browser.get(base + "/ui/executions/nap%2Fcancel-me")
    browser.find_element("css selector", ".actions button.danger").click()
    alert = browser.switch_to.alert
    assert "Cancel nap/cancel-me?" in alert.text
    alert.accept()
    wait_until(lambda: "Cancellation requested" in browser.page_source, message="the notice")
    assert c.wait("nap/cancel-me", timeout=30)["status"] == "cancelled"
    wait_until(
        lambda: text_of(browser, "#status") == "cancelled",
        timeout=30,
        message="the page to show it cancelled",
    )
    shoot(browser, "execution-cancelled")


def test_a_screenshot_of_every_page(home: DaemonHandle, browser: Any):
    base = browser.current_url.split("/ui/")[0]
    for name, path in [
        ("schedules", "/ui/schedules"),
        ("effects", "/ui/effects"),
        ("values", "/ui/values"),
        ("workflows", "/ui/workflows"),
        ("value", "/ui/values/approve%2F7"),
    ]:
        browser.get(base + path)
        wait_until(
            lambda: browser.find_element("css selector", "h1").text, message=f"the {name} page"
        )
        shoot(browser, name)
    browser.get(base + "/ui/schedules")
    # a loaded machine may hand back the document before it is parsed: wait for it
    wait_until(lambda: "nightly" in browser.page_source, message="the schedules page")
    shoot(browser, "schedules-dark", dark=True)
    expected = {
        "now",
        "executions",
        "execution-failed",
        "schedules",
        "effects",
        "values",
        "workflows",
    }
    assert expected <= {p.stem for p in SCREENSHOTS.glob("*.png")}


def test_every_page_renders_a_row_of_every_kind(home: DaemonHandle, browser: Any):
    populated = populate(home)
    base = browser.current_url.split("/ui/")[0]
    browser.get_log("browser")  # what the pages before this one logged
    for path in populated.pages():
        browser.get(base + path)
        heading = wait_until(
            lambda: browser.find_element("css selector", "h1").text, message=f"the page {path}"
        )
        assert heading != "Not here", path  # the error page's heading
        assert browser.find_elements("css selector", "#live"), path  # its live region rendered
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], (path, errors)
    browser.get(base + "/ui/effects")
    wait_until(lambda: "pay:pending" in browser.page_source, message="the effects")
    shoot(browser, "effects-every-kind")
    browser.get(base + "/ui/schedules")
    wait_until(lambda: "k-declared" in browser.page_source, message="the schedules")
    shoot(browser, "schedules-every-kind")


PICTURED = """
import os
import ys

@ys.workflow
def main(step, params):
    def flaky():
        n = int(open(params["f"]).read()) if os.path.exists(params["f"]) else 0
        with open(params["f"], "w") as f:
            f.write(str(n + 1))
        if n < 1:
            raise RuntimeError("flaky attempt %d" % n)
        return n

    step.run("load", flaky, retry=ys.Retry(max_attempts=3, interval=0.2))
    step.call("kid", "charge", {"order": 99})
"""


def test_pictures_timeline_day_and_slots(home: DaemonHandle, browser: Any, tmp_path: Path):
    home.write("pictured.py", PICTURED)
    c = home.client()
    wait_until(lambda: "pictured" in {w["name"] for w in c.workflows()["workflows"]})
    c.trigger("pictured", {"f": str(tmp_path / "n")}, execution_id="pic/1")
    assert c.wait("pic/1", timeout=30)["status"] == "failed"  # its child failed
    kid = next(ch["execution_id"] for ch in c.describe("pic/1")["children"])
    base = browser.current_url.split("/ui/")[0]
    browser.get(base + "/ui/executions/pic%2F1")
    wait_until(lambda: browser.find_elements("css selector", "svg.tl"), message="the timeline")
    svg = browser.find_element("css selector", "svg.tl")
    labels = [t.text for t in svg.find_elements("css selector", "text.label")]
    assert {"delivery 1", "load #1", "load #2", "kid", kid} <= set(labels), labels
    assert int(svg.get_attribute("data-rows")) == len(labels)
    assert svg.find_elements("css selector", "g.bar.k-run.o-failed")  # the failed attempt
    assert svg.find_elements("css selector", "g.bar.k-backoff")  # its backoff, hatched
    assert svg.find_elements("css selector", "g.bar.k-wait")  # the child's call
    link = svg.find_element("css selector", "a")
    assert link.get_dom_attribute("href") == "/ui/executions/" + kid
    # a bar's fill comes from the theme: red for a failure
    failed = svg.find_element("css selector", "g.bar.k-run.o-failed rect")
    assert (
        browser.execute_script("return getComputedStyle(arguments[0]).fill", failed)
        == "rgb(207, 34, 46)"
    )
    browser.execute_script("arguments[0].parentNode.focus()", failed)  # the tip says why
    tip = text_of(browser, "#timeline .tip")
    assert "load #1" in tip and "RuntimeError: flaky attempt 0" in tip
    assert "The timeline as a table" in section(browser, "Timeline")
    shoot(browser, "picture-timeline")
    shoot(browser, "picture-timeline-dark", dark=True)
    shoot(browser, "picture-timeline-phone", width=390)

    browser.get(base + "/ui/")
    wait_until(lambda: browser.find_elements("css selector", "svg.day"), message="the day")
    day = browser.find_element("css selector", "svg.day")
    assert day.get_attribute("data-buckets") == "144"
    assert day.find_elements("css selector", "g.bucket.has-failed")  # a day with failures
    assert "A day of activity" in section(browser, "A day of activity")
    took = browser.find_element("css selector", "svg.durations")
    assert took.get_attribute("data-hours") == "24"
    hours = took.find_elements("css selector", "g.hour")
    assert hours and all(h.find_elements("css selector", "rect.p50") for h in hours)
    p50 = hours[-1].find_element("css selector", "rect.p50")
    accent = browser.execute_script("return getComputedStyle(arguments[0]).fill", p50)
    assert accent == "rgb(9, 105, 218)", accent
    assert "deliveries, p50 " in hours[-1].get_attribute("data-tip")
    durations = section(browser, "How long deliveries took")
    assert "The durations as a table" in durations
    shoot(browser, "picture-day")
    shoot(browser, "picture-day-dark", dark=True)
    shoot(browser, "picture-day-phone", width=390)

    browser.get(base + "/ui/workflows")
    wait_until(lambda: browser.find_elements("css selector", "svg.spark"), message="sparklines")
    assert "1 failed" in browser.find_element("xpath", "//tr[td/a[text()='pictured']]").text

    c.schedule_add("pic-often", "nap", "* * * * *", tz="UTC")
    browser.get(base + "/ui/schedules")
    wait_until(lambda: browser.find_elements("css selector", "svg.slots"), message="the slots")
    assert len(browser.find_elements("css selector", "svg.slots")) == len(
        c.schedules()["schedules"]
    )
    shoot(browser, "picture-slots")
    shoot(browser, "picture-slots-dark", dark=True)
    shoot(browser, "picture-slots-phone", width=390)


def test_a_schedule_with_late_and_skipped_slots(browser: Any, tmp_path: Path):
    """A daemon that was down for five minutely slots: at its start those past max-late are
    missed, the next fires late, and those after it are skipped behind it."""
    back = browser.current_url.split("/ui/")[0]
    with make_home(tmp_path) as h:
        h.write("hello.py", "import ys\n\n@ys.workflow\ndef main(step, params):\n    return 1\n")
        slots = minute_slots(5, time.time())
        put_schedule(h, "pic-late", "hello", slots, catch_up="all", overlap="skip", max_late=150)
        h.start()
        try:
            with ui_url(h) as u:
                browser.get(u)  # signs in to this home's `ys ui`

                def drawn() -> Any:
                    browser.get(u.split("/ui/")[0] + "/ui/schedules")
                    svg = browser.find_elements("css selector", "svg.slots")
                    return (
                        svg[0]
                        if svg and svg[0].find_elements("css selector", ".m-skipped")
                        else None
                    )

                svg = wait_until(drawn, message="the schedule's slots")
                marks = [
                    g.get_attribute("class") for g in svg.find_elements("css selector", "g.slot")
                ]
                # as many skipped as slots came due before the late fire was admitted
                assert marks[:2] == ["slot m-missed", "slot m-late"], marks
                assert set(marks[2:]) == {"slot m-skipped"}, marks
                assert svg.get_attribute("data-slots") == str(len(marks))
                late = svg.find_element("css selector", "g.m-late rect")
                colour = browser.execute_script("return getComputedStyle(arguments[0]).fill", late)
                assert colour == "rgb(154, 103, 0)", colour  # the theme's warning
                browser.execute_script("arguments[0].parentNode.focus()", late)
                tip = text_of(browser, "#s-pic-late .tip")
                assert ": late, fired " in tip and "after its time" in tip, tip
                table = section(browser, "pic-late")
                assert "These slots as a table" in table
                shoot(browser, "picture-slots-late")
                shoot(browser, "picture-slots-late-dark", dark=True)
                shoot(browser, "picture-slots-late-phone", width=390)
        finally:
            browser.get(back + "/ui/")  # the module's daemon again (its session cookie)
