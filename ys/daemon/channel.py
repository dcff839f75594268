"""A delivery's channel, the daemon's end: newline-delimited JSON with its worker over the
socket pair the launch handed over (the worker's end: ys/worker/channel.py, which says the format).

The channel knows its delivery (execution and token), so a request names neither; every
fenced request is fenced by that token as over HTTP. The step path is lean: a step's save is
read on the event loop, handed to the store's writer with a callback, and answered by the
writer's own thread right after the commit that made it durable (`save_step_then`), with no
hand-off back to the loop; an outcome goes the same way. The other requests (children,
effects, values, a step's deadline, the lease) are rarer: each is awaited on the loop and
answered from it. Every request is done by the daemon's delivery service
(ys.daemon.delivering), the same functions the worker's HTTP routes call.

Answers keep the order of the requests: a save goes to the writer's queue, which commits in
order, and while a slower request runs, the requests behind it wait for it (so a pipelined
deadline is registered before the step's save that follows it is read).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from ys.crashpoints import crash_point
from ys.daemon import answers, views
from ys.daemon.api_base import SMALL_BODY, Body, invalid
from ys.daemon.api_requests import (
    EffectBegin,
    EffectSettle,
    EffectWait,
    Start,
    StepDeadline,
    ValueWait,
    step_of,
)
from ys.daemon.api_requests import Outcome as OutcomeRequest
from ys.daemon.http import MAX_BODY
from ys.daemon.running import Running
from ys.errors import ErrorJson, YsError
from ys.outcomes import warnings_of
from ys.store.protocols import Outcome

if TYPE_CHECKING:
    from ys.daemon.delivering import Deliveries

log = logging.getLogger("ys.channel")


class ChannelAnswer(TypedDict):
    """One answer line to the worker: the request's `id` echoed, and its answer or error."""

    id: object
    ok: NotRequired[object]  # the operation's answer (ys.daemon.answers)
    error: NotRequired[ErrorJson]


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


class WorkerChannel:
    """The daemon's end of one delivery's channel; fed on the event loop, answered from the
    loop or the writer's thread (`_send` is safe from both)."""

    def __init__(self, deliveries: Deliveries, r: Running, sock: socket.socket) -> None:
        self.deliveries = deliveries
        self.r = r
        self.workflow = r.delivery.workflow
        self.execution_id = r.delivery.execution_id
        self.token = r.delivery.token
        self.sock = sock
        self.fd = sock.fileno()
        sock.setblocking(False)
        self._loop = asyncio.get_running_loop()
        self._buf = b""
        self._held: deque[bytes] | None = None  # requests waiting behind a slower one
        self._tasks: set[asyncio.Task[None]] = set()
        self._out = bytearray()  # answers the socket had no room for yet
        self._lock = threading.Lock()  # the socket's writes and _out: two threads answer
        self._closed = False
        self._loop.add_reader(self.fd, self._readable)

    # -- reading ----------------------------------------------------------------------------

    def _readable(self) -> None:
        try:
            data = self.sock.recv(262144)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the worker is gone (or closed its end): nothing more to answer
            self.close()
            return
        if b"\n" not in data:
            self._buf += data
            if len(self._buf) > MAX_BODY:
                self._send_error(None, invalid(f"a request is longer than {MAX_BODY} bytes"))
                self.close()
            return
        lines = (self._buf + data).split(b"\n")
        self._buf = lines.pop()
        for line in lines:
            if self._held is not None:
                self._held.append(line)
            else:
                self._take(line)

    def _take(self, line: bytes) -> None:
        rid = None
        try:
            try:
                msg = json.loads(line)
            except (ValueError, RecursionError):
                raise invalid("a worker channel request is not valid JSON") from None
            if not isinstance(msg, dict):
                raise invalid("a worker channel request must be a JSON object")
            rid = msg.get("id")
            op = msg.get("op")
            b = Body(msg)
            if op == "step":
                self._step(rid, b)
                return
            if op == "suspend":
                self._suspend(rid, b)
                return
            if op == "outcome" and len(line) <= SMALL_BODY:
                self._outcome(rid, b)
                return
            slow = _SLOW.get(op) if isinstance(op, str) else None
            if slow is None:
                raise invalid(f"op {op!r} is not one the worker channel knows")
        except YsError as exc:
            self._send_error(rid, exc)
            return
        except Exception as exc:  # answered, so that its worker does not wait for ever
            log.exception("internal error on the worker channel of %s", self.execution_id)
            self._send_error(rid, exc)
            return
        self._held = deque()
        task = self._loop.create_task(self._slow(rid, slow, b))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _slow(
        self, rid: Any, op: Callable[[WorkerChannel, Body], Awaitable[Any]], b: Body
    ) -> None:
        try:
            self._send({"id": rid, "ok": await op(self, b)})
        except YsError as exc:
            self._send_error(rid, exc)
        except Exception as exc:
            log.exception("internal error on the worker channel of %s", self.execution_id)
            self._send_error(rid, exc)
        finally:
            held, self._held = self._held, None
            while held and self._held is None and not self._closed:
                self._take(held.popleft())
            if held and self._held is not None:  # another slow one: the rest wait for it
                self._held.extend(held)

    # -- the lean path: a step's save and the outcome, answered by the writer's thread ------

    def _step(self, rid: Any, b: Body) -> None:
        key = b.required_text("key")
        if not key:
            raise invalid("key must be non-empty text")
        req = step_of(b)
        crash_point("channel.before_save")
        self.deliveries.save_step(
            self.execution_id,
            self.token,
            key,
            req,
            self._answer(rid, answers.step_saved),
            "channel.after_save",
        )

    def _suspend(self, rid: Any, b: Body) -> None:
        """A waiting step (a sleep, a retry's delay, ...) and the `suspended` outcome that
        follows it, pipelined by the worker and committed in one transaction."""
        key = b.required_text("key")
        if not key:
            raise invalid("key must be non-empty text")
        req = step_of(b)
        crash_point("channel.before_suspend")
        self.deliveries.suspend(
            self.execution_id,
            self.token,
            key,
            req,
            warnings_of(b.any("warnings")),
            self._answer(rid, answers.outcome),
            "channel.after_suspend",
        )

    def _outcome(self, rid: Any, b: Body) -> None:
        outcome = self._outcome_of(b)
        answer = self._answer(rid, answers.outcome)
        self.deliveries.acknowledge(self.execution_id, self.token, outcome, self.workflow, answer)

    def _answer(
        self, rid: Any, shape: Callable[[Any], Any] | None = None
    ) -> Callable[[Any, BaseException | None], None]:
        """The answer to a request the writer's thread answers once it committed."""

        def then(result: Any, error: BaseException | None) -> None:  # the writer's thread
            if error is not None:
                self._send_error(rid, error)
            else:
                self._send({"id": rid, "ok": shape(result) if shape else result})

        return then

    def _outcome_of(self, b: Body) -> Outcome:
        return OutcomeRequest.of(b).outcome()

    async def _big_outcome(self, b: Body) -> Any:
        """An outcome too big to encode on the loop: encoded and written in the pool."""
        recorded = await self.deliveries.acknowledge_in_pool(
            self.execution_id, self.token, self._outcome_of(b), self.workflow
        )
        return answers.outcome(recorded)

    # -- the other requests ---------------------------------------------------------------

    async def _deadline(self, b: Body) -> Any:
        key = b.required_text("key")
        await self.deliveries.deadline(self.execution_id, self.token, key, StepDeadline.of(b))
        return answers.deadline_set()

    async def _lease(self, b: Body) -> Any:
        return answers.lease_renewed(await self.deliveries.renew(self.execution_id, self.token))

    async def _start(self, b: Body) -> Any:
        target = await self.deliveries.start(self.execution_id, b.required_text("key"), Start.of(b))
        return answers.started(target)

    async def _get(self, b: Body) -> Any:
        return views.record(await self.deliveries.get(b.required_text("execution_id")))

    def _ours(self, b: Body) -> Body:
        """The request as its route takes it, on behalf of this channel's execution."""
        return Body(b.data | {"execution_id": self.execution_id})

    async def _effect_begin(self, b: Body) -> Any:
        req = EffectBegin.of(self._ours(b))
        return answers.effect_state(
            await self.deliveries.effect_begin(b.required_text("effect_id"), req)
        )

    async def _effect_settle(self, b: Body) -> Any:
        req = EffectSettle.of(b)
        return answers.effect_state(
            await self.deliveries.effect_settle(b.required_text("effect_id"), req)
        )

    async def _effect_wait(self, b: Body) -> Any:
        req = EffectWait.of(self._ours(b))
        return answers.effect_waited(
            await self.deliveries.effect_wait(b.required_text("effect_id"), req)
        )

    async def _value_wait(self, b: Body) -> Any:
        req = ValueWait.of(self._ours(b))
        return answers.value_waited(await self.deliveries.value_wait(b.required_text("key"), req))

    # -- writing ----------------------------------------------------------------------------

    def _send_error(self, rid: Any, error: BaseException) -> None:
        if isinstance(error, YsError):
            err = error.to_json()
        else:
            err = ErrorJson(code="INTERNAL", message=f"internal error: {error}")
        self._send({"id": rid, "error": err})

    def _send(self, answer: ChannelAnswer) -> None:
        """Write an answer (from the loop or the writer's thread); what the socket has no room
        for is written by the loop when it has."""
        data = _dumps(answer).encode() + b"\n"
        with self._lock:
            if self._closed:
                return
            if self._out:
                self._out += data
                return
            try:
                n = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError:
                return  # the worker is gone
            if n == len(data):
                return
            self._out += data[n:]
        self._loop.call_soon_threadsafe(self._want_write)

    def _want_write(self) -> None:
        with self._lock:
            if self._closed or not self._out:
                return
        self._loop.add_writer(self.fd, self._writable)

    def _writable(self) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                n = self.sock.send(self._out)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                n = len(self._out)  # the worker is gone: nobody reads the rest
            del self._out[:n]
            if self._out:
                return
        self._loop.remove_writer(self.fd)

    def close(self) -> None:
        """Stop reading and answering (the delivery ended); on the loop."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._loop.remove_reader(self.fd)
        self._loop.remove_writer(self.fd)
        self.sock.close()
        for task in self._tasks:
            task.cancel()


_SLOW: dict[str, Callable[[WorkerChannel, Body], Awaitable[Any]]] = {
    "outcome": WorkerChannel._big_outcome,
    "deadline": WorkerChannel._deadline,
    "lease": WorkerChannel._lease,
    "start": WorkerChannel._start,
    "get": WorkerChannel._get,
    "effect_begin": WorkerChannel._effect_begin,
    "effect_settle": WorkerChannel._effect_settle,
    "effect_wait": WorkerChannel._effect_wait,
    "value_wait": WorkerChannel._value_wait,
}
