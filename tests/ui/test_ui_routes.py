"""Every dashboard page and action through the daemon's socket: what each shows, who may see
it (the cookie), which POSTs it accepts (CSRF, confirmation), and what no page may do (be
framed by another origin, load anything from outside)."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support import DaemonHandle, wait_until
from tests.ui.ui_support import (
    PAGES,
    WORKFLOWS,
    Answer,
    Populated,
    UiSession,
    outside_references,
)

pytestmark = pytest.mark.e2e

FAILING = """
import ys

@ys.workflow
def main(step, params):
    step.run("boom", lambda: 1 / 0)
"""

NAPPING = """
import ys

@ys.workflow
def main(step, params):
    step.run("first", lambda: "ok")
    step.sleep("nap", 3600)
    return "woke"
"""

WAITING = """
import ys

@ys.workflow
def main(step, params):
    return step.wait_for("approval", "approve/" + params["order"])
"""


def _live_etag(answer: Answer) -> str:
    m = re.search(r'id="live" hx-get="[^"]*[?&]live=([0-9a-f]+)', answer.text)
    assert m, "the page has no live region"
    return m.group(1)


def test_every_page_answers_with_its_content(daemon: DaemonHandle, ui: UiSession, gated: Any):
    daemon.write("fail.py", FAILING)
    daemon.write("nap.py", NAPPING)
    daemon.write("waits.py", WAITING)
    c = daemon.client()
    gated("run/1")
    c.trigger("fail", execution_id="bad/1")
    c.trigger("nap", execution_id="nap/1")
    c.trigger("waits", {"order": "42"}, execution_id="waits/1")
    c.store_put("config/mode", {"fast": True})
    c.schedule_add("nightly", "nap", "0 3 * * *", tz="UTC")
    c.wait("bad/1", timeout=30)
    wait_until(lambda: c.get("nap/1")["status"] == "suspended", message="nap/1 suspended")
    wait_until(lambda: c.get("waits/1")["status"] == "suspended", message="waits/1 suspended")
    wait_until(lambda: c.get("run/1")["status"] == "running", message="run/1 running")

    now = ui.get("/ui/")
    assert now.status == 200 and "text/html" in now.header("Content-Type")
    running = now.text.split("<h2>Running")[1].split("</section>")[0]
    assert "run/1" in running
    failed = now.text.split("Failed in the last 24 hours")[1].split("</section>")[0]
    assert "bad/1" in failed and "ZeroDivisionError" in failed
    waiting = now.text.split("<h2>Waiting")[1].split("</section>")[0]
    assert "waits/1" in waiting and "approve/42" in waiting

    listed = ui.get("/ui/executions")
    assert listed.status == 200
    for execution_id in ("run/1", "bad/1", "nap/1", "waits/1"):
        assert f'href="/ui/executions/{execution_id.replace("/", "%2F")}"' in listed.text

    nap = ui.get("/ui/executions/nap%2F1")
    assert nap.status == 200
    assert "first" in nap.text and "nap" in nap.text and "a timer" in nap.text
    waits = ui.get("/ui/executions/waits%2F1")
    assert "store key" in waits.text and "approve/42" in waits.text

    schedules = ui.get("/ui/schedules")
    assert schedules.status == 200 and "nightly" in schedules.text and "0 3 * * *" in schedules.text
    assert "UTC" in schedules.text and "Pause" in schedules.text

    assert "No effects" in ui.get("/ui/effects").text
    values = ui.get("/ui/values")
    assert "config/mode" in values.text and "approve/42" in values.text  # a value, a waited key
    value = ui.get("/ui/values/config%2Fmode")
    assert value.status == 200 and "&#34;fast&#34;: true" in value.text

    workflows = ui.get("/ui/workflows")
    assert workflows.status == 200
    for name in ("gate", "fail", "nap", "waits"):
        assert f">{name}</a>" in workflows.text
    import hashlib

    digest = hashlib.sha256((daemon.workflows / "nap.py").read_bytes()).hexdigest()
    assert digest in workflows.text

    missing = ui.get("/ui/executions/nope")
    assert missing.status == 404 and "EXECUTION_NOT_FOUND" in missing.text


def test_every_page_renders_a_row_of_every_kind(ui: UiSession, populated: Populated):
    p = populated

    def page(path: str) -> str:
        answer = ui.get(path)
        assert answer.status == 200, (path, answer.text[-2000:])
        assert "text/html" in answer.header("Content-Type"), path
        return answer.text

    for path in p.pages():
        page(path)
    x = {k: v.replace("/", "%2F") for k, v in p.executions.items()}

    now = page("/ui/")
    failed = now.split("Failed in the last 24 hours")[1].split("</section>")[0]
    assert p.executions["failed"] in failed and p.executions["retried"] in failed
    waiting = now.split("<h2>Waiting")[1].split("</section>")[0]
    assert p.executions["waits"] in waiting and "k-approve/42" in waiting

    listed = page("/ui/executions")
    for execution_id in x.values():
        assert f'href="/ui/executions/{execution_id}"' in listed
    for status in ("completed", "failed", "cancelled", "suspended"):
        assert f'<span class="st st-{status}">{status}</span>' in listed
    retried = page(f"/ui/executions/{x['retried']}")
    assert "Retry of" in retried and f'href="/ui/executions/{x["failed"]}"' in retried
    assert "cancelled" in page(f"/ui/executions/{x['cancelled']}")
    assert "pay:pending" in page(f"/ui/executions/{x['pending-effect']}")

    schedules = page("/ui/schedules")
    for name, paused in p.schedules.items():
        card = schedules.split(f'id="s-{name}"')[1].split("</section>")[0]
        assert ('<span class="st st-paused">paused</span>' in card) is paused, name
        assert ("/resume" if paused else "/pause") in card, name
    declared = schedules.split('id="s-k-declared"')[1].split("</section>")[0]
    assert "0 4 * * *" in declared and "script" in declared
    assert "*/10 * * * *" in schedules.split('id="s-k-tidy"')[1].split("</section>")[0]

    effects = page("/ui/effects")
    for effect_id in p.effects.values():
        assert f"<code>{effect_id}</code>" in effects
    for status, effect_id in p.effects.items():
        assert f"<code>{effect_id}</code>" in page(f"/ui/effects?status={status}"), status
    assert "pay:pending" not in page("/ui/effects?status=settled")
    conflict = page("/ui/effects/pay%3Aconflict")
    assert "<h2>Conflicts" in conflict and "&#34;other&#34;" in conflict

    values = page("/ui/values")
    for key in (*p.values, *p.waited):
        assert key in values
    assert "&#34;fast&#34;: true" in page("/ui/values/k-config%2Fmode")
    assert p.executions["waits"] in page("/ui/values/k-approve%2F42")

    workflows = page("/ui/workflows")
    for name in WORKFLOWS:
        assert f">{name}</a>" in workflows


def test_an_execution_page_shows_steps_failures_logs_params_and_outcome(
    daemon: DaemonHandle, ui: UiSession
):
    daemon.write(
        "fail.py",
        FAILING.replace(
            'step.run("boom"', 'print("about to fail", flush=True)\n    step.run("boom"'
        ),
    )
    daemon.client().trigger("fail", {"order": 7}, execution_id="bad/2")
    daemon.client().wait("bad/2", timeout=30)
    page = ui.get("/ui/executions/bad%2F2").text
    steps = page.split("<h2>Steps")[1].split("</section>")[0]
    assert "boom" in steps and "ZeroDivisionError" in steps
    logs = page.split("<h2>Logs")[1].split("</section>")[0]
    assert "Attempt 1" in logs and "about to fail" in logs
    assert "&#34;order&#34;: 7" in page  # the params, pretty-printed
    raw = ui.get("/ui/executions/bad%2F2/logs/1")
    assert raw.status == 200 and raw.text.startswith("about to fail\n")
    assert "text/plain" in raw.header("Content-Type")
    assert ui.get("/ui/executions/bad%2F2/logs/9").status == 404


def test_an_execution_page_shows_a_failed_shell_steps_exit_status(
    daemon: DaemonHandle, ui: UiSession
):
    daemon.write("failsh", "#!/bin/sh\nset -e\nys step run boom -- sh -c 'exit 3'\n", mode=0o700)
    daemon.client().trigger("failsh", execution_id="bad-sh")
    daemon.client().wait("bad-sh", timeout=30)
    page = ui.get("/ui/executions/bad-sh").text
    steps = page.split("<h2>Steps")[1].split("</section>")[0]
    assert "ExitStatus: exit status 3" in steps


def test_executions_filter_by_status_workflow_prefix_and_since(daemon: DaemonHandle, ui: UiSession):
    daemon.write("fail.py", FAILING)
    daemon.write("nap.py", NAPPING)
    c = daemon.client()
    for i in range(3):
        c.trigger("fail", execution_id=f"order/{i}")
    c.trigger("nap", execution_id="other/1")
    for i in range(3):
        c.wait(f"order/{i}", timeout=30)

    def ids(path: str) -> list[str]:
        return re.findall(r'<a class="id" href="/ui/executions/([^"]+)"', ui.get(path).text)

    assert sorted(ids("/ui/executions?status=failed")) == ["order%2F0", "order%2F1", "order%2F2"]
    assert ids("/ui/executions?workflow=nap") == ["other%2F1"]
    assert ids("/ui/executions?prefix=order%2F1") == ["order%2F1"]
    assert len(ids("/ui/executions?since=1h")) == 4
    bad = ui.get("/ui/executions?since=soon")
    assert bad.status == 200 and "is not a duration" in bad.text


def test_executions_page_through_with_older_and_newest_links(daemon: DaemonHandle, ui: UiSession):
    daemon.write("fail.py", FAILING)
    c = daemon.client()
    for i in range(55):
        c.trigger("fail", execution_id=f"p/{i:02d}")
    first = ui.get("/ui/executions?prefix=p%2F")
    older = re.search(r'href="\?([^"]*page_token=[^"]+)">Older', first.text)
    assert older, "no link to the next page"
    second = ui.get("/ui/executions?" + older.group(1).replace("&amp;", "&"))
    shown = re.findall(r'<a class="id" href="/ui/executions/(p%2F\d+)"', second.text)
    assert len(shown) == 5 and "Newest" in second.text


def test_without_the_cookie_every_page_and_file_is_refused(daemon: DaemonHandle):
    stranger = UiSession(daemon)
    for path in [*PAGES, "/ui/executions/x", "/ui/static/ys.css", "/ui/static/htmx.min.js"]:
        answer = stranger.get(path)
        assert answer.status == 403, path
        assert "ys ui" in answer.text
    assert stranger.post("/ui/executions/x/cancel", {"confirm": "1"}).status == 403
    forged = UiSession(daemon, cookies={"ys_0000000000": "4102444800.abc.def"})
    assert forged.get("/ui/").status == 403


def test_a_token_signs_in_once(daemon: DaemonHandle):
    token = daemon.client().ui_token()["token"]
    first = UiSession(daemon)
    answer = first.get(f"/ui/executions?status=failed&token={token}")
    assert answer.status == 303
    assert answer.header("Location") == "/ui/executions?status=failed"  # the token is dropped
    cookie = answer.header("Set-Cookie")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui/" in cookie
    assert first.get("/ui/").status == 200
    second = UiSession(daemon)
    again = second.get(f"/ui/?token={token}")
    assert again.status == 403 and "used already" in again.text
    assert second.get("/ui/").status == 403


def test_a_session_survives_a_daemon_restart(daemon: DaemonHandle, ui: UiSession):
    daemon.stop()
    daemon.start()
    assert ui.get("/ui/").status == 200


def test_an_action_needs_the_csrf_token_and_this_origin(daemon: DaemonHandle, ui: UiSession):
    daemon.write("nap.py", NAPPING)
    c = daemon.client()
    c.trigger("nap", execution_id="n/1")
    wait_until(lambda: c.get("n/1")["status"] == "suspended", message="n/1 suspended")
    csrf = ui.csrf("/ui/executions/n%2F1")
    assert ui.post("/ui/executions/n%2F1/cancel", {"confirm": "1"}).status == 403
    assert ui.post("/ui/executions/n%2F1/cancel", {"confirm": "1", "csrf": "x" * 32}).status == 403
    other = ui.post(
        "/ui/executions/n%2F1/cancel",
        {"confirm": "1", "csrf": csrf},
        headers={"Origin": "http://evil.example"},
    )
    assert other.status == 403
    cross = ui.post(
        "/ui/executions/n%2F1/cancel",
        {"confirm": "1", "csrf": csrf},
        headers={"Sec-Fetch-Site": "cross-site"},
    )
    assert cross.status == 403
    assert c.get("n/1")["cancel_requested"] is False


def test_cancel_asks_first_then_cancels(daemon: DaemonHandle, ui: UiSession):
    daemon.write("nap.py", NAPPING)
    c = daemon.client()
    c.trigger("nap", execution_id="n/2")
    wait_until(lambda: c.get("n/2")["status"] == "suspended", message="n/2 suspended")
    csrf = ui.csrf("/ui/executions/n%2F2")
    asked = ui.post("/ui/executions/n%2F2/cancel", {"csrf": csrf, "confirm": "0"})
    assert asked.status == 200 and "Yes, cancel" in asked.text
    assert c.get("n/2")["cancel_requested"] is False
    done = ui.post(
        "/ui/executions/n%2F2/cancel",
        {"csrf": csrf, "confirm": "1"},
        headers={"Origin": "http://127.0.0.1:1"},
    )
    assert done.status == 303
    assert done.header("Location") == "/ui/executions/n%2F2?done=cancel-requested"
    assert c.wait("n/2", timeout=30)["status"] == "cancelled"
    assert "Cancellation requested" in ui.get(done.header("Location")).text


def test_wake_makes_a_sleeper_due_now(daemon: DaemonHandle, ui: UiSession):
    daemon.write("nap.py", NAPPING)
    c = daemon.client()
    c.trigger("nap", execution_id="n/3")
    wait_until(lambda: c.get("n/3")["status"] == "suspended", message="n/3 suspended")
    csrf = ui.csrf("/ui/executions/n%2F3")
    done = ui.post("/ui/executions/n%2F3/wake", {"csrf": csrf, "confirm": "1"})
    assert done.status == 303 and done.header("Location").endswith("?done=woken")
    # delivered again at once (its timer has an hour to go, so it goes back to sleep)
    wait_until(
        lambda: c.get("n/3")["attempts"] == 2 and c.get("n/3")["status"] == "suspended",
        message="a second delivery of n/3",
    )
    unknown = ui.post("/ui/executions/n%2F3/explode", {"csrf": csrf, "confirm": "1"})
    assert unknown.status == 400


def _admissions(daemon: DaemonHandle, source: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = daemon.client().metrics()
    return sum(
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "ys_admissions_total" and s.labels.get("source") == source
    )


def test_retry_from_the_page_admits_and_counts_as_the_api_does(daemon: DaemonHandle, ui: UiSession):
    daemon.write("fail.py", FAILING)
    c = daemon.client()
    for execution_id in ("rt/ui", "rt/api"):
        c.trigger("fail", execution_id=execution_id)
        c.wait(execution_id, timeout=30)
    before = _admissions(daemon, "retry")
    csrf = ui.csrf("/ui/executions/rt%2Fui")
    done = ui.post("/ui/executions/rt%2Fui/retry", {"csrf": csrf, "confirm": "1"})
    assert done.status == 303 and done.header("Location").endswith("?done=retried")
    assert c.get("rt/ui.r1")["retry_of"] == "rt/ui"
    assert _admissions(daemon, "retry") == before + 1
    c.retry("rt/api")
    assert _admissions(daemon, "retry") == before + 2


def test_retry_from_the_page_of_a_workflow_gone_is_refused_as_the_api_refuses(
    daemon: DaemonHandle, ui: UiSession
):
    from ys.errors import YsError

    script = daemon.write("fail.py", FAILING)
    c = daemon.client()
    c.trigger("fail", execution_id="gone/1")
    c.wait("gone/1", timeout=30)
    csrf = ui.csrf("/ui/executions/gone%2F1")
    script.unlink()
    wait_until(
        lambda: "fail" not in {w["name"] for w in c.workflows()["workflows"]},
        message="the registry to drop fail",
    )
    with pytest.raises(YsError) as api:
        c.retry("gone/1")
    assert api.value.code == "WORKFLOW_NOT_FOUND"
    page = ui.post("/ui/executions/gone%2F1/retry", {"csrf": csrf, "confirm": "1"})
    assert page.status == 404 and "WORKFLOW_NOT_FOUND" in page.text
    assert [r["execution_id"] for r in c.list()["executions"]] == ["gone/1"]


def test_pause_and_resume_a_schedule(daemon: DaemonHandle, ui: UiSession):
    daemon.write("nap.py", NAPPING)
    c = daemon.client()
    c.schedule_add("hourly", "nap", "0 * * * *")
    csrf = ui.csrf("/ui/schedules")
    paused = ui.post("/ui/schedules/hourly/pause", {"csrf": csrf, "confirm": "1"})
    assert paused.status == 303 and c.schedule("hourly")["paused"] is True
    assert "paused" in ui.get("/ui/schedules").text
    ui.post("/ui/schedules/hourly/resume", {"csrf": csrf, "confirm": "1"})
    assert c.schedule("hourly")["paused"] is False
    missing = ui.post("/ui/schedules/nope/pause", {"csrf": csrf, "confirm": "1"})
    assert missing.status == 404


def test_no_page_can_be_framed_or_load_anything_from_outside(
    daemon: DaemonHandle, ui: UiSession, gated: Any
):
    gated("frame/1")
    daemon.client().store_put("k", 1)
    for path in [*PAGES, "/ui/executions/frame%2F1", "/ui/values/k", "/ui/nope"]:
        answer = ui.get(path)
        csp = answer.header("Content-Security-Policy")
        assert "frame-ancestors 'none'" in csp, path
        assert "default-src 'none'" in csp and "script-src 'self'" in csp, path
        assert answer.header("X-Frame-Options") == "DENY", path
        assert outside_references(answer.text) == [], path
    for path in ["/ui/", "/ui/static/ys.css"]:
        assert "frame-ancestors 'none'" in UiSession(daemon).get(path).header(
            "Content-Security-Policy"
        )


def test_a_live_region_answers_when_the_page_changes(
    daemon: DaemonHandle, ui: UiSession, gated: Any
):
    gate = gated("live/1")
    c = daemon.client()
    wait_until(lambda: c.get("live/1")["status"] == "running", message="live/1 running")
    wait_until(lambda: c.overview()["running"][0]["pid"], message="live/1's pid")
    etag = _live_etag(ui.get("/ui/"))
    answers: list[Answer] = []
    poll = threading.Thread(target=lambda: answers.append(ui.get(f"/ui/?live={etag}")))
    poll.start()
    Path(gate).touch()
    poll.join(timeout=40)
    assert not poll.is_alive()
    region = answers[0]
    while "Nothing is running." not in region.text:  # each answer is a change, up to the end
        assert _live_etag(region) != etag
        etag = _live_etag(region)
        region = ui.get(f"/ui/?live={etag}")
    assert region.text.lstrip().startswith('<div id="live"') and "<html" not in region.text
    assert c.get("live/1")["status"] == "completed"


def test_the_overview_route(daemon: DaemonHandle, gated: Any):
    gated("o/1")
    c = daemon.client()
    wait_until(lambda: c.overview()["running"][0]["pid"], message="a running execution's pid")
    o = c.overview()
    (r,) = o["running"]
    assert r["execution_id"] == "o/1" and r["attempts"] == 1 and r["pid"] > 0
    assert r["claimed_at"].endswith("Z") and r["lease_expires_at"].endswith("Z")
    assert o["counts"]["running"] == 1
    assert o["daemon"]["database"]["schema_version"] >= 7
    assert set(o) >= {"now", "daemon", "counts", "running", "due", "waiting", "failures", "slots"}


def test_now_and_top_say_which_executions_wait_for_their_script(
    daemon: DaemonHandle, ui: UiSession
):
    from rich.console import Console

    from ys.commands.top import view

    daemon.write("fragile.py", "import ys\n\n@ys.workflow\ndef main(step, params)\n    pass\n")
    c = daemon.client()
    wait_until(
        lambda: any(w["error"] for w in c.workflows()["workflows"]), message="fragile broken"
    )
    c.trigger("fragile", execution_id="w/1")
    wait_until(lambda: c.history("w/1")["events"][-1]["kind"] == "released", message="w/1 waits")
    (due,) = c.overview()["due"]
    assert due["waiting_for"].startswith("script broken (SyntaxError")
    console = Console(record=True, width=200, color_system=None, force_terminal=False)
    console.print(view(c.overview()))
    assert "waiting: script broken (SyntaxError" in console.export_text()
    now = ui.get("/ui/")
    assert "waiting: script broken (SyntaxError" in now.text
