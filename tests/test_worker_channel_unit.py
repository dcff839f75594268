"""The daemon's end of a worker channel (ys/daemon/channel.py) against a real socket pair and
a stand-in daemon (behind the real delivery service, ys/daemon/delivering.py): answers come in the order of the requests, a save is answered from the
writer's thread once its callback runs, a slower request holds back the ones behind it, and a
malformed or unknown request gets an error without ending the channel."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from ys.daemon.channel import WorkerChannel
from ys.daemon.delivering import Deliveries
from ys.daemon.running import Running
from ys.errors import LeaseLost
from ys.store.protocols import Delivery, Outcome
from ys.values import StepWrite


class FakeStore:
    """Writes are answered on a thread of their own, as the group writer does."""

    def __init__(self) -> None:
        self.saved: list[str] = []
        self.refuse: set[str] = set()

    def _answer(self, then: Any, result: Any, error: BaseException | None) -> None:
        threading.Thread(target=then, args=(result, error)).start()

    def save_step_then(self, then: Any, eid: str, token: str, key: str, step: StepWrite) -> None:
        self.saved.append(key)
        if key in self.refuse:
            self._answer(then, None, LeaseLost("LEASE_LOST", "gone"))
        else:
            self._answer(then, False, None)

    def acknowledge_then(
        self, then: Any, eid: str, token: str, outcome: Outcome, **kw: Any
    ) -> None:
        self._answer(then, Outcome(outcome.status), None)


class FakeDispatcher:
    def __init__(self) -> None:
        self.acked: list[str] = []

    def step_ending(self, *a: Any) -> None: ...
    def step_recorded(self, *a: Any) -> None: ...
    def flush_output(self, *a: Any) -> None: ...
    def poke(self) -> None: ...

    def delivering(self, *a: Any) -> bool:
        return True

    def acknowledged(self, eid: str, token: str, status: str) -> bool:
        self.acked.append(status)
        return True


class FakeApi(Deliveries):
    """The daemon's delivery service over a stand-in daemon, with a deadline that waits."""

    def __init__(self) -> None:
        super().__init__(
            SimpleNamespace(  # type: ignore[arg-type]
                store=FakeStore(),
                dispatcher=FakeDispatcher(),
                hub=SimpleNamespace(watched=lambda eid: False, notify=lambda *a, **k: None),
                handler_for=lambda wf: None,
                metrics=None,
            )
        )
        self.release = asyncio.Event()
        self.deadlines: list[str] = []

    async def deadline(self, eid: str, token: str, key: str, req: Any) -> None:
        await self.release.wait()
        self.deadlines.append(key)


class Worker:
    """The worker's end: writes lines, reads answers."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def send(self, *lines: Any) -> None:
        data = b"".join(
            (x if isinstance(x, bytes) else json.dumps(x).encode()) + b"\n" for x in lines
        )
        self.sock.sendall(data)

    async def answers(self, n: int) -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        out: list[dict[str, Any]] = []
        while len(out) < n:
            while b"\n" not in self.buf:
                chunk = await asyncio.wait_for(loop.sock_recv(self.sock, 65536), 10)
                assert chunk, "the channel closed"
                self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
            out.append(json.loads(line))
        return out


async def until(predicate: Any, timeout: float = 10.0) -> None:
    """Let the loop run until `predicate()` holds; fail after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "timed out waiting for a condition"
        await asyncio.sleep(0.005)


def run(test: Any) -> None:
    async def main() -> None:
        ours, theirs = socket.socketpair()
        theirs.setblocking(False)
        api = FakeApi()
        delivery = Delivery("ex-1", "tok", 1, 0.0, "wf")
        channel = WorkerChannel(api, Running(delivery), ours)
        try:
            await test(api, Worker(theirs), channel)
        finally:
            channel.close()
            theirs.close()

    asyncio.run(main())


def step(i: int, key: str) -> dict[str, Any]:
    return {"id": i, "op": "step", "key": key, "kind": "run", "status": "completed", "value": "1"}


def test_steps_are_answered_in_order_once_their_writes_are_answered() -> None:
    async def test(api: FakeApi, w: Worker, channel: WorkerChannel) -> None:
        w.send(step(1, "a"), step(2, "b"))
        got = await w.answers(2)
        assert [a["id"] for a in got] == [1, 2]
        assert got[0]["ok"] == {"cancel_requested": False}
        assert api.d.store.saved == ["a", "b"]

    run(test)


def test_a_refused_save_is_answered_with_its_code() -> None:
    async def test(api: FakeApi, w: Worker, channel: WorkerChannel) -> None:
        api.d.store.refuse.add("late")
        w.send(step(7, "late"))
        (got,) = await w.answers(1)
        assert got["id"] == 7 and got["error"]["code"] == "LEASE_LOST"

    run(test)


@pytest.mark.parametrize(
    "line, rid, code",
    [
        (b"{not json", None, "INVALID_ARGUMENT"),
        (b"[1, 2]", None, "INVALID_ARGUMENT"),
        ({"id": 3, "op": "teleport"}, 3, "INVALID_ARGUMENT"),
        ({"id": 4, "op": "step", "key": ""}, 4, "INVALID_ARGUMENT"),
        ({"id": 5, "op": "step", "key": "k", "status": "done"}, 5, "INVALID_ARGUMENT"),
        ({"id": 6, "op": "outcome"}, 6, "INVALID_ARGUMENT"),
        # an outcome's shape is read at the channel, before the store is asked
        ({"id": 7, "op": "outcome", "outcome": {"status": "done"}}, 7, "INVALID_ARGUMENT"),
        ({"id": 8, "op": "outcome", "outcome": {"status": "failed"}}, 8, "INVALID_ARGUMENT"),
        (
            {"id": 10, "op": "suspend", "key": "k", "status": "waiting", "warnings": "one"},
            10,
            "INVALID_ARGUMENT",
        ),
    ],
)
def test_a_malformed_request_gets_an_error_and_the_channel_goes_on(
    line: Any, rid: Any, code: str
) -> None:
    async def test(api: FakeApi, w: Worker, channel: WorkerChannel) -> None:
        w.send(line, step(9, "after"))
        bad, good = await w.answers(2)
        assert bad["id"] == rid and bad["error"]["code"] == code, bad
        assert good == {"id": 9, "ok": {"cancel_requested": False}}
        assert api.d.dispatcher.acked == []  # no outcome reached the store

    run(test)


def test_a_slower_request_holds_back_the_requests_behind_it() -> None:
    async def test(api: FakeApi, w: Worker, channel: WorkerChannel) -> None:
        deadline = {"id": 1, "op": "deadline", "key": "slow", "timeout": 5, "attempts": 1}
        w.send(
            deadline,
            step(2, "slow"),
            {"id": 3, "op": "outcome", "outcome": {"status": "completed", "result": 1}},
        )
        await until(lambda: channel._held is not None and len(channel._held) == 2)
        assert api.d.store.saved == []  # read, and waiting behind the deadline
        api.release.set()
        got = await w.answers(3)
        assert [a["id"] for a in got] == [1, 2, 3]
        assert api.deadlines == ["slow"] and api.d.store.saved == ["slow"]
        await until(lambda: api.d.dispatcher.acked)  # told on the loop
        assert api.d.dispatcher.acked == ["completed"]

    run(test)


def test_the_channel_closes_when_the_worker_goes() -> None:
    async def test(api: FakeApi, w: Worker, channel: WorkerChannel) -> None:
        w.sock.close()
        await until(lambda: channel._closed)

    run(test)
