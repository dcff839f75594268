"""Failure handlers through a real daemon (docs/design.md, "Workflow options"): a failed execution admits exactly one
`<ID>.on-failure` of its handler workflow, in the transaction that records the failure; a
handler's failure admits nothing; the folder-wide default comes from config.toml; a schedule
slot skipped for being late admits its handler; examples/workflows/notify.py posts to a
webhook or runs notify-send."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cron.cron_support import minute_slots, put_schedule
from tests.support import EXAMPLES, DaemonHandle, make_home, wait_until

RECORDER = """
    import json, os
    import ys

    @ys.workflow
    def main(step, params):
        def record():
            with open(os.environ["FX_HANDLED"], "a") as f:
                f.write(json.dumps(params, sort_keys=True) + "\\n")
            return True
        return step.run("record", record)
"""
FAILING = """
    import ys

    @ys.workflow({options})
    def main(step, params):
        step.run("one", lambda: 1)
        raise ValueError("kaput")
"""


def failing(options: str = "") -> str:
    return FAILING.replace("{options}", options)


def handled(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines()]
    except FileNotFoundError:
        return []


def ids(c, workflow: str) -> list[str]:
    return sorted(r["execution_id"] for r in c.list(workflow=workflow, limit=1000)["executions"])


def wait_done(c, execution_id: str) -> dict:
    return c.wait(execution_id, timeout=60)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonHandle, Path]]:
    root = tmp_path_factory.mktemp("onfail")
    out = root / "handled.jsonl"
    with make_home(root, FX_HANDLED=str(out)) as h:
        (h.home / "config.toml").write_text('on_failure = "notify"\n')
        h.write("notify.py", RECORDER)
        h.write("boom.py", failing('on_failure="notify"'))
        h.write("plain.py", failing())
        h.write("fragile.py", failing('on_failure="bad-notify"'))
        h.write("bad-notify.py", failing())
        h.write("shboom", "#!/bin/sh\n# ys: on_failure=notify pin\nexit 3\n", mode=0o700)
        yield h.start(), out


def test_a_failing_workflow_admits_exactly_one_handler_with_the_failure(shared):
    h, out = shared
    with h.client() as c:
        c.trigger("boom", {"n": 1}, execution_id="boom-1")
        assert wait_done(c, "boom-1")["status"] == "failed"
        handler = wait_done(c, "boom-1.on-failure")
        assert handler["workflow"] == "notify" and handler["status"] == "completed"
        assert handler["params"] == {
            "execution_id": "boom-1",
            "workflow": "boom",
            "attempts": 1,
            "tags": {},
            "error": {"name": "ValueError", "message": "kaput"},
        }
        assert [p for p in handled(out) if p.get("execution_id") == "boom-1"] == [handler["params"]]
        assert [i for i in ids(c, "notify") if i.startswith("boom-1")] == ["boom-1.on-failure"]


def test_the_folder_wide_default_from_config_toml_handles_a_workflow_without_one(shared):
    h, out = shared
    with h.client() as c:
        c.trigger("plain", execution_id="plain-1")
        assert wait_done(c, "plain-1")["status"] == "failed"
        handler = wait_done(c, "plain-1.on-failure")
        assert handler["workflow"] == "notify"
        assert handler["params"]["workflow"] == "plain"


def test_a_shell_header_names_the_handler(shared):
    h, out = shared
    with h.client() as c:
        listed = {w["name"]: w for w in c.workflows()["workflows"]}["shboom"]
        assert listed["on_failure"] == "notify" and listed["pin"] is True
        c.trigger("shboom", execution_id="sh-1")
        assert wait_done(c, "sh-1")["status"] == "failed"
        handler = wait_done(c, "sh-1.on-failure")
        assert handler["params"]["error"]["name"] == "ExitStatus"


def test_a_failing_handler_starts_nothing(shared):
    h, out = shared
    with h.client() as c:
        c.trigger("fragile", execution_id="fragile-1")
        assert wait_done(c, "fragile-1")["status"] == "failed"
        assert wait_done(c, "fragile-1.on-failure")["status"] == "failed"
        # the handler's own failure committed with nothing beside it
        everything = [r["execution_id"] for r in c.list(limit=1000)["executions"]]
        assert [i for i in everything if i.startswith("fragile-1")] == [
            "fragile-1.on-failure",
            "fragile-1",
        ]


def test_a_daemon_killed_right_after_the_failure_commits_keeps_its_one_handler(tmp_path):
    out = tmp_path / "handled.jsonl"
    marker = tmp_path / "killed"
    with make_home(
        tmp_path, FX_HANDLED=str(out), YS_CRASH_POINTS=f"outcome.after_commit@{marker}"
    ) as h:
        h.write("notify.py", RECORDER)
        h.write("boom.py", failing('on_failure="notify"'))
        h.start()
        with h.client() as c:
            c.trigger("boom", execution_id="crash-1")
        assert h.proc is not None
        h.proc.wait(timeout=60)
        assert marker.exists() and h.proc.returncode == -9
        del h.env["YS_CRASH_POINTS"]
        h.start()
        with h.client() as c:
            assert wait_done(c, "crash-1")["status"] == "failed"
            assert wait_done(c, "crash-1.on-failure")["status"] == "completed"
            assert ids(c, "notify") == ["crash-1.on-failure"]
        assert [p["execution_id"] for p in handled(out)] == ["crash-1"]


def test_a_schedule_slot_later_than_max_late_admits_its_handler(tmp_path):
    out = tmp_path / "handled.jsonl"
    with make_home(tmp_path, FX_HANDLED=str(out)) as h:
        h.write("notify.py", RECORDER)
        h.write(
            "job.py",
            """
            import ys

            @ys.workflow(on_failure="notify")
            def main(step, params):
                return "ran"
        """,
        )
        [slot, *_] = minute_slots(11, time.time())  # ten minutes ago, at most 60 s late allowed
        put_schedule(h, "nightly", "job", [slot], max_late=60.0)
        h.start()
        with h.client() as c:
            [handler_id] = wait_until(lambda: ids(c, "notify"), message="a handler")
            handler = wait_done(c, handler_id)
            assert handler_id.startswith("nightly@") and handler_id.endswith(".on-failure")
            assert handler["params"] == {
                "schedule": "nightly",
                "reason": "late",
                "slot": handler_id.split("@")[1].split(".")[0],
            }
            assert ids(c, "job") == []  # the slot itself never ran


class _Hook(http.server.BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server interface
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_the_notify_example_posts_to_a_webhook_and_runs_notify_send(tmp_path):
    server = http.server.HTTPServer(("127.0.0.1", 0), _Hook)  # loopback only
    _Hook.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stub = tmp_path / "bin"
    stub.mkdir()
    calls = tmp_path / "notify-send.calls"
    (stub / "notify-send").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {calls}\n')
    (stub / "notify-send").chmod(0o700)
    try:
        url = f"http://127.0.0.1:{server.server_port}/hook"
        with make_home(
            tmp_path, YS_NOTIFY_URL=url, PATH=f"{stub}{os.pathsep}{os.environ['PATH']}"
        ) as h:
            shutil.copy(EXAMPLES / "notify.py", h.workflows / "notify.py")
            (h.workflows / "notify.py").chmod(0o600)
            h.write("boom.py", failing('on_failure="notify"'))
            h.start()
            with h.client() as c:
                c.trigger("boom", execution_id="hooked")
                assert wait_done(c, "hooked")["status"] == "failed"
                sent = wait_done(c, "hooked.on-failure")
                assert sent["outcome"]["result"] == {"sent": "webhook", "status": 204}
            assert [p["execution_id"] for p in _Hook.received] == ["hooked"]
            assert _Hook.received[0]["error"] == {"name": "ValueError", "message": "kaput"}
            # without a URL: the desktop notification (the stub on PATH)
            h.stop()
            del h.env["YS_NOTIFY_URL"]
            h.start()
            with h.client() as c:
                c.trigger("boom", execution_id="desk")
                assert wait_done(c, "desk")["status"] == "failed"
                sent = wait_done(c, "desk.on-failure")
                assert sent["outcome"]["result"] == {"sent": "notify-send"}
            said = calls.read_text()
            assert "boom failed" in said and "desk: ValueError: kaput" in said
    finally:
        server.shutdown()
        server.server_close()
