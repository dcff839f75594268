"""Helpers for the dashboard's tests: an HTTP session over the daemon's socket that signs in
the way a browser does (the one-time token for a cookie), and what the pages must never do."""

from __future__ import annotations

import http.client
import re
import socket
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import quote, urlencode

from tests.support import DaemonHandle, wait_until


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("ys", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    text: str

    def header(self, name: str) -> str:
        return self.headers.get(name) or ""


@dataclass
class UiSession:
    """Requests to the daemon's /ui/ pages over its socket, with the cookies they set."""

    daemon: DaemonHandle
    cookies: dict[str, str] = field(default_factory=dict)

    def request(
        self,
        method: str,
        path: str,
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> Answer:
        conn = _UnixConnection(str(self.daemon.socket), timeout)
        h = {"Host": "127.0.0.1:1", **(headers or {})}
        if self.cookies:
            h["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if form is not None:
            body = urlencode(form).encode()
            h["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=h)
            resp = conn.getresponse()
            text = resp.read().decode("utf-8", "replace")
        finally:
            conn.close()
        for raw in resp.headers.get_all("Set-Cookie") or []:
            jar: SimpleCookie = SimpleCookie()
            jar.load(raw)
            for k, morsel in jar.items():
                self.cookies[k] = morsel.value
        return Answer(resp.status, resp.headers, text)

    def get(self, path: str, **kw: Any) -> Answer:
        return self.request("GET", path, **kw)

    def post(self, path: str, form: dict[str, str], **kw: Any) -> Answer:
        return self.request("POST", path, form=form, **kw)

    def sign_in(self) -> UiSession:
        token = self.daemon.client().ui_token()["token"]
        answer = self.get(f"/ui/?token={token}")
        assert answer.status == 303, answer
        return self

    def csrf(self, path: str = "/ui/") -> str:
        m = re.search(r'name="csrf" value="([^"]+)"', self.get(path).text)
        assert m, f"no CSRF token on {path}"
        return m.group(1)


PAGES = ["/ui/", "/ui/executions", "/ui/schedules", "/ui/effects", "/ui/values", "/ui/workflows"]


def outside_references(html: str) -> list[str]:
    """Every src/href/action that leaves the daemon's origin (absolute or protocol-relative
    URLs), and every inline script or style: the pages must load only their own files."""
    bad = [
        m.group(2)
        for m in re.finditer(r'\b(src|href|action)="([^"]*)"', html)
        if re.match(r"^(?:[a-z][a-z0-9+.-]*:|//)", m.group(2), re.I)
        and not m.group(2).startswith("data:")
    ]  # data: is inline, not from outside
    bad += [m.group(0) for m in re.finditer(r"<script(?![^>]*\bsrc=)[^>]*>", html)]
    bad += [m.group(0) for m in re.finditer(r"<style\b[^>]*>", html)]
    bad += [m.group(0) for m in re.finditer(r'\bstyle="', html)]
    return bad


# -- a store with a row of every kind ------------------------------------------------------------

FAILING = """
import ys

@ys.workflow
def main(step, params):
    print("about to fail", flush=True)
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
    return step.wait_for("approval", "k-approve/" + params["order"])
"""

# One effect per run; with params["fail"] its perform raises, so the effect stays pending and
# the execution waits on it (retry_in is an hour: it stays that way for the test).
PAYING = """
import ys

@ys.workflow
def main(step, params):
    def perform(effect_id):
        if params.get("fail"):
            raise RuntimeError("provider down")
        return {"charge": effect_id}

    return step.effect("charge", effect_id=params["effect"], operation="charge.v1",
                       input={"amount": 5}, perform=perform,
                       lookup=lambda effect_id: ys.Unknown(), retry_in=3600)
"""

DECLARED = """
import ys

@ys.workflow(schedule="0 4 * * *", tz="UTC")
def main(step, params):
    return 1
"""


WORKFLOWS = ("k-fail", "k-nap", "k-waits", "k-pay", "k-declared", "k-tidy")


@dataclass(frozen=True)
class Populated:
    """What `populate` made: the IDs, keys and names each page must show."""

    executions: dict[str, str]  # kind -> execution ID
    effects: dict[str, str]  # status -> effect ID
    values: tuple[str, ...]  # keys holding a value
    waited: tuple[str, ...]  # keys waited for, holding none
    schedules: dict[str, bool]  # name -> paused

    def pages(self) -> list[str]:
        """Every dashboard page that shows one of these rows, list pages first."""

        def q(text: str) -> str:
            return quote(text, safe="")

        return [
            *PAGES,
            *(f"/ui/effects?status={s}" for s in ("pending", "settled", "conflict")),
            *(f"/ui/executions/{q(x)}" for x in self.executions.values()),
            *(f"/ui/effects/{q(e)}" for e in self.effects.values()),
            *(f"/ui/values/{q(k)}" for k in (*self.values, *self.waited)),
        ]


def populate(daemon: DaemonHandle) -> Populated:
    """Fill a running daemon's store with a row of every kind its dashboard shows: executions
    completed, failed, cancelled, suspended (a timer, a store key, an effect) and retried;
    effects settled, pending and in conflict; values and waited keys; schedules added with
    `ys schedule add` and declared by a Python script and a shell script's header, paused and
    not. Returns when each has reached the state it is named for."""
    daemon.write("k-fail.py", FAILING)
    daemon.write("k-nap.py", NAPPING)
    daemon.write("k-waits.py", WAITING)
    daemon.write("k-pay.py", PAYING)
    daemon.write("k-declared.py", DECLARED)
    daemon.write("k-tidy", '#!/bin/sh\n# ys: schedule="*/10 * * * *"\necho tidy\n', mode=0o700)
    c = daemon.client()

    def loaded() -> bool:
        names = {w["name"] for w in c.workflows()["workflows"]}
        return set(WORKFLOWS) <= names

    wait_until(loaded, message="the scripts to load")
    c.trigger("k-pay", {"effect": "pay:settled"}, execution_id="kinds/completed")
    c.trigger("k-pay", {"effect": "pay:pending", "fail": True}, execution_id="kinds/pending-effect")
    c.trigger("k-pay", {"effect": "pay:conflict"}, execution_id="kinds/conflict")
    c.trigger("k-fail", {"order": 7}, execution_id="kinds/failed")
    c.trigger("k-nap", execution_id="kinds/suspended")
    c.trigger("k-nap", execution_id="kinds/cancelled")
    c.trigger("k-waits", {"order": "42"}, execution_id="kinds/waits")
    c.store_put("k-config/mode", {"fast": True})
    c.schedule_add("k-nightly", "k-nap", "0 3 * * *", tz="UTC")
    c.schedule_add("k-weekly", "k-nap", "0 5 * * 1", tz="UTC")
    c.schedule_pause("k-weekly")
    wait_until(
        lambda: {"k-declared", "k-tidy"} <= {s["name"] for s in c.schedules()["schedules"]},
        message="the schedules the scripts declare",
    )
    c.schedule_pause("k-tidy")

    for x in ("kinds/completed", "kinds/conflict"):
        assert c.wait(x, timeout=30)["status"] == "completed"
    assert c.wait("kinds/failed", timeout=30)["status"] == "failed"
    for x in ("kinds/suspended", "kinds/cancelled", "kinds/waits", "kinds/pending-effect"):
        wait_until(lambda x=x: c.get(x)["status"] == "suspended", message=f"{x} suspended")
    c.cancel("kinds/cancelled")
    assert c.wait("kinds/cancelled", timeout=30)["status"] == "cancelled"
    retried = c.retry("kinds/failed")["execution_id"]
    c.wait(retried, timeout=30)
    # another runtime settles the settled effect again with another result: a conflict
    settled = c._call(
        "POST",
        "/v1/effects/pay:conflict/settle",
        {"operation": "charge.v1", "result": '{"charge":"other"}'},
    )
    assert settled["status"] == "conflict"
    return Populated(
        executions={
            "completed": "kinds/completed",
            "conflict": "kinds/conflict",
            "failed": "kinds/failed",
            "cancelled": "kinds/cancelled",
            "suspended": "kinds/suspended",
            "waits": "kinds/waits",
            "pending-effect": "kinds/pending-effect",
            "retried": retried,
        },
        effects={"settled": "pay:settled", "pending": "pay:pending", "conflict": "pay:conflict"},
        values=("k-config/mode",),
        waited=("k-approve/42",),
        schedules={"k-nightly": False, "k-weekly": True, "k-declared": False, "k-tidy": True},
    )
