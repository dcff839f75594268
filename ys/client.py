"""ys.Client: trigger and read executions over the daemon's Unix socket.

HTTP/1.1 over AF_UNIX with httptools' parser (ys._http), not http.client: importing that costs
more than the rest of the CLI's fast paths. Refusals
raise the error class of their code (`ys.ExecutionAdmissionError` for a 409 on trigger, ...).
"""

from __future__ import annotations

import builtins
import json
import os
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from ys._http import NoAnswer, UnixHttp
from ys.errors import DaemonUnavailable, ExecutionTimeout, InvalidArgument, YsError, from_code

if TYPE_CHECKING:
    import datetime as _dt  # at run time only a due_at given as a datetime needs it

ExecutionRef = str | dict[str, Any]  # an ID, or the dict `trigger()` returns


def _seg(value: str, what: str = "execution ID") -> str:
    """One URL path segment, encoded (an ID may hold '/'). Empty text would reach a bare route
    (`GET /v1/executions/` answers NOT_FOUND), so it is refused before anything is sent."""
    if not isinstance(value, str):
        raise TypeError(f"the {what} must be a str, not {type(value).__name__}")
    if not value:
        raise InvalidArgument("INVALID_ARGUMENT", f"the {what} must not be empty")
    return quote(value, safe="")


def _ex(ref: ExecutionRef) -> str:
    """The encoded segment of an execution given by ID or by what `trigger()` returned."""
    if isinstance(ref, dict):
        if not isinstance(ref.get("execution_id"), str):
            raise TypeError(
                'a dict naming an execution needs its "execution_id" (as trigger() returns it)'
            )
        ref = ref["execution_id"]
    if not isinstance(ref, str):
        raise TypeError(
            f"an execution is named by its ID (a str) or by the dict trigger() "
            f"returns, not by {type(ref).__name__}"
        )
    return _seg(ref)


def _schedule(name: str, tail: str = "") -> str:
    return f"/v1/schedules/{_seg(name, 'schedule name')}{tail}"


def _json_body(body: Any) -> bytes:
    """UTF-8 JSON, so that a body is as big as its params' canonical encoding (with \\u escapes,
    2 MiB of non-ASCII params would be past the daemon's body limit). Text that has no UTF-8
    form (a lone surrogate) is sent escaped, for the daemon to refuse with its path."""
    try:
        try:
            return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(body, separators=(",", ":")).encode("ascii")
    except (TypeError, ValueError) as exc:  # a set, a datetime, ...: nothing was sent
        raise InvalidArgument("INVALID_ARGUMENT", _not_durable(body) or str(exc)) from None


def _not_durable(body: Any) -> str | None:
    """What the SDK says of the first field of `body` that is not a durable value."""
    from ys import codec

    for name, value in body.items() if isinstance(body, dict) else [("body", body)]:
        enc = codec.encode(value, path=name)
        if enc.status != "encoded":
            return enc.message
    return None


def _timeout(value: float | str | None) -> float | None:
    """Client.wait's timeout: seconds (a number >= 0) or a duration as the CLI takes it."""
    if value is None:
        return None
    if isinstance(value, str):
        from ys.durations import parse_duration

        return parse_duration(value, "timeout")
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e10:
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"timeout must be seconds >= 0 or a duration like '10m', not {value!r}",
        )
    return float(value)


# Why a request got no answer (DaemonUnavailable's `reason`): ABSENT, nothing listens on the
# socket (the request was never sent); NO_ANSWER, it was sent and may have been carried out.
ABSENT = "absent"
NO_ANSWER = "no_answer"


class Transport:
    """One keep-alive HTTP connection to the socket; reconnects once on a dropped connection."""

    def __init__(
        self, socket_path: str, timeout: float | None = 60.0, token: str | None = None
    ) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self.token = token
        self.reached = False  # a connection was made once: a daemon was there
        self._conn: UnixHttp | None = None

    def close(self) -> None:
        """Close the connection (a later request opens another)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _drop(self, conn: UnixHttp) -> None:
        """Close `conn`; forget the kept connection only if it is that one (a request with
        its own timeout uses a connection of its own and leaves the kept one as it was)."""
        conn.close()
        if self._conn is conn:
            self._conn = None

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        timeout: float | None = None,
        raw: bool = False,
    ) -> Any:
        """The answer's JSON (None for no body); with `raw`, its text as it came."""
        payload = None if body is None else _json_body(body)
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        if self.token:
            headers["X-Ys-Token"] = self.token
        for attempt in (1, 2):
            conn = self._conn
            if conn is not None and conn.dropped():
                conn.close()
                conn = self._conn = None
            if conn is None or timeout is not None:
                conn = UnixHttp(self.socket_path, timeout or self.timeout)
            try:
                if conn.sock is None:
                    conn.connect()
                    self.reached = True
                resp = conn.exchange(method, path, payload, headers)
                data = resp.body
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                self._drop(conn)
                raise DaemonUnavailable(
                    "DAEMON_UNAVAILABLE",
                    f"no daemon answers on {self.socket_path}; start it with `ys daemon start`",
                    reason=ABSENT,
                ) from exc
            except TimeoutError as exc:
                # Sent (or being sent) and not answered: a busy daemon may still do it, so it
                # is never retried here, and never a reason to start another daemon.
                self._drop(conn)
                waited = conn.timeout if conn.timeout is not None else 0.0
                raise DaemonUnavailable(
                    "DAEMON_UNAVAILABLE",
                    f"the daemon did not answer within {waited:g} s (it may be busy)",
                    reason=NO_ANSWER,
                ) from exc
            except (ConnectionResetError, BrokenPipeError, NoAnswer) as exc:
                self._drop(conn)
                if attempt == 2 or method not in ("GET",):
                    raise DaemonUnavailable(
                        "DAEMON_UNAVAILABLE",
                        f"the daemon closed the connection ({exc})",
                        reason=NO_ANSWER,
                    ) from exc
                continue
            if timeout is None and resp.keep_alive:
                self._conn = conn
            else:
                self._drop(conn)
            break
        if resp.status >= 400:
            try:
                err = json.loads(data)
                raise from_code(err["code"], err.get("message", ""), status=resp.status)
            except (ValueError, KeyError, TypeError):
                raise YsError("INTERNAL", f"HTTP {resp.status}: {data[:200]!r}") from None
        if raw:
            return data.decode("utf-8", "replace")
        if resp.status == 204 or not data:
            return None
        return json.loads(data)


def default_socket() -> str:
    from ys.paths import resolve

    return str(resolve().socket)


def _due(due_in: float | None, due_at: float | _dt.datetime | None) -> dict[str, float]:
    """`trigger`'s due time as the request's `due_in` or `due_at` (epoch seconds)."""
    if due_in is not None and due_at is not None:
        raise InvalidArgument("INVALID_ARGUMENT", "give due_in or due_at, not both")
    if due_in is not None:
        if isinstance(due_in, bool) or not isinstance(due_in, int | float) or not due_in > 0:
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"due_in must be a number of seconds above 0, not {due_in!r}"
            )
        return {"due_in": float(due_in)}
    if due_at is not None and hasattr(due_at, "timestamp"):  # a datetime: naive is local time
        return {"due_at": due_at.timestamp()}
    if due_at is not None:
        from ys.contract import check_time

        return {"due_at": check_time(due_at, "due_at")}
    return {}


class Client:
    """Trigger and read executions. Records are the JSON shapes of docs/API.md; the reads
    (get, wait, describe, history, wake, cancel) take an execution's ID or the dict trigger()
    returns.

    Errors (each a ys.YsError with a stable `.code`; catch them as `ys.<name>`):
    ys.DaemonUnavailable (nothing answers on the socket), ys.NotFoundError (an unknown
    execution, workflow, effect, store key or schedule: EXECUTION_NOT_FOUND,
    WORKFLOW_NOT_FOUND, NOT_FOUND), ys.InvalidArgument (a request the daemon or the client
    refuses, unsent: a value that is not durable, a bad timeout), ys.ExecutionAdmissionError
    (trigger: the ID is in use), ys.ExecutionNotTerminal (retry of a live execution),
    ys.VersionConflict (store_put with a stale expected_version), ys.ExecutionTimeout (wait:
    the timeout passed first), ys.ResourceExhausted (the daemon's storage is full). Not
    ys.NotFound: that is an effect lookup's answer, not an exception."""

    def __init__(
        self,
        socket_path: str | None = None,
        *,
        timeout: float | None = 60.0,
        autostart: bool = False,
    ) -> None:
        self.socket_path = socket_path or os.environ.get("YS_SOCKET") or default_socket()
        self.transport = Transport(self.socket_path, timeout=timeout)
        self.autostart = autostart

    def close(self) -> None:
        """Close the connection to the daemon (leaving the `with` block does it)."""
        self.transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        timeout: float | None = None,
        raw: bool = False,
    ) -> Any:
        """One request. With `autostart`, a daemon is started when nothing listens, but only
        if no daemon was reached before: a command that follows or waits must not start again
        a daemon that `ys daemon stop` just stopped, and a request that was sent is never sent
        twice."""
        try:
            return self.transport.request(method, path, body, timeout=timeout, raw=raw)
        except DaemonUnavailable as exc:
            if exc.context.get("reason") != ABSENT:
                raise
            if self.transport.reached:
                raise DaemonUnavailable(
                    "DAEMON_UNAVAILABLE",
                    f"the daemon stopped answering on {self.socket_path} (it was stopped, or "
                    "it exited); start it with `ys daemon start` and run the command again",
                    reason=ABSENT,
                ) from exc
            if not self.autostart:
                raise
        from ys.autostart import ensure_daemon

        ensure_daemon()
        self.autostart = False
        return self.transport.request(method, path, body, timeout=timeout, raw=raw)

    # -- executions -------------------------------------------------------------------------

    def trigger(
        self,
        workflow: str,
        params: Any = None,
        execution_id: str | None = None,
        if_exists: str = "fail",
        context: dict[str, Any] | None = None,
        tags: dict[str, str] | None = None,
        traceparent: str | None = None,
        due_in: float | None = None,
        due_at: float | _dt.datetime | None = None,
    ) -> dict[str, Any]:
        """Admit an execution; returns {"execution_id", "started"} once admission commits.
        `due_in` (seconds, more than 0) or `due_at` (epoch seconds, or a datetime: without
        a zone it is local time) admits it now and makes it due later (`ys trigger --in` /
        `--at`); a `due_at` in the past is due now. At most one of the two.
        `traceparent` (W3C trace context) continues the caller's trace: it is kept in the
        execution's context, ys's spans of it hang under the caller's span.
        `get`, `wait` and the other reads take that dict or its "execution_id" alike.
        Params and context are objects (dicts): anything else is InvalidArgument, unsent.

        A request the daemon did not answer (it timed out, or the connection closed) raises
        DaemonUnavailable although the execution may have been admitted: retry with the same
        `execution_id` and `if_exists="use-existing"`, which admits it at most once."""
        for name, value in (("params", params), ("context", context)):
            if value is not None and not isinstance(value, dict):
                raise InvalidArgument(
                    "INVALID_ARGUMENT",
                    f"{name} must be an object (a dict of names to values), not "
                    f"{type(value).__name__}",
                )
        body: dict[str, Any] = {"workflow": workflow, "if_exists": if_exists}
        body.update(_due(due_in, due_at))
        if params is not None:
            body["params"] = params
        if execution_id is not None:
            body["execution_id"] = execution_id
        if traceparent is not None:
            from ys.tracing import check

            context = {**(context or {}), "traceparent": check(traceparent)}
        if context is not None:
            body["context"] = context
        if tags:
            from ys.contract import check_tags

            body["tags"] = check_tags(tags)
        try:
            result: dict[str, Any] = self._call("POST", "/v1/executions", body)
        except DaemonUnavailable as exc:
            if exc.context.get("reason") != NO_ANSWER:
                raise
            raise DaemonUnavailable(
                "DAEMON_UNAVAILABLE",
                f"{exc.message}, so the execution may have been admitted; a retry with the "
                "same execution ID and if_exists use-existing is safe",
                reason=NO_ANSWER,
                admission_unknown=True,
            ) from exc
        return result

    def get(self, execution_id: ExecutionRef) -> dict[str, Any]:
        """The record; `execution_id` is an ID or the dict `trigger()` returned."""
        result: dict[str, Any] = self._call("GET", f"/v1/executions/{_ex(execution_id)}")
        return result

    def describe(self, execution_id: ExecutionRef) -> dict[str, Any]:
        """The record with its steps, deliveries, waits and children (`ys describe`);
        NotFoundError for an unknown ID."""
        path = f"/v1/executions/{_ex(execution_id)}/describe"
        result: dict[str, Any] = self._call("GET", path)
        return result

    def timeline(self, execution_id: ExecutionRef) -> dict[str, Any]:
        """Where the execution spent its time: rows of bars on a time axis."""
        result: dict[str, Any] = self._call("GET", f"/v1/executions/{_ex(execution_id)}/timeline")
        return result

    def wait(
        self, execution_id: ExecutionRef, timeout: float | str | None = None
    ) -> dict[str, Any]:
        """Block until the execution is terminal and return its record. `execution_id` is an
        ID or the dict `trigger()` returned; `timeout` is seconds or a duration like "10m"
        (None: no limit).

        Raises ExecutionTimeout (code TIMEOUT, `.record` the record then) when the timeout
        passes first, NotFoundError for an unknown ID, InvalidArgument for a bad timeout,
        DaemonUnavailable when no daemon answers."""
        seg = _ex(execution_id)
        seconds = _timeout(timeout)
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            chunk = 30.0 if deadline is None else max(0.0, min(30.0, deadline - time.monotonic()))
            path = f"/v1/executions/{seg}/wait?timeout={chunk:.3f}"
            record: dict[str, Any] = self._call("GET", path, timeout=chunk + 30)
            if record["status"] in ("completed", "failed", "cancelled"):
                return record
            if deadline is not None and time.monotonic() >= deadline:
                raise ExecutionTimeout(
                    f"{record['execution_id']} is still {record['status']} after {timeout} s"
                    if not isinstance(timeout, str)
                    else f"{record['execution_id']} is still {record['status']} after {timeout}",
                    record=record,
                )

    def wait_change(
        self, execution_id: ExecutionRef, after: int | None, timeout: float
    ) -> dict[str, Any]:
        """One long poll: the record (with `history_length`) once the history is longer than
        `after` events, the execution is terminal, or `timeout` seconds pass."""
        q = f"timeout={max(0.0, timeout):.3f}" + ("" if after is None else f"&after={after}")
        path = f"/v1/executions/{_ex(execution_id)}/wait?{q}"
        result: dict[str, Any] = self._call("GET", path, timeout=timeout + 30)
        return result

    def list(
        self,
        *,
        status: list[str] | str | None = None,
        workflow: str | None = None,
        parent: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
        tags: dict[str, str] | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> dict[str, Any]:
        """One page of records, newest admitted first; the filters combine: `tags` (every one
        must match), `since`/`until` (admitted at most / more than that many seconds ago)."""
        q: list[tuple[str, str]] = []
        for s in [status] if isinstance(status, str) else status or []:
            q.append(("status", s))
        if tags:
            from ys.contract import check_tags

            for key, value in check_tags(tags, "tag filter").items():
                q.append(("tag", f"{key}={value}"))
        for k, v in (
            ("workflow", workflow),
            ("parent", parent),
            ("since", since),
            ("until", until),
            ("limit", limit),
            ("page_token", page_token),
        ):
            if v is not None:
                q.append((k, str(v)))
        path = "/v1/executions" + (f"?{urlencode(q)}" if q else "")
        result: dict[str, Any] = self._call("GET", path)
        return result

    def retry(
        self,
        execution_id: ExecutionRef,
        *,
        new_id: str | None = None,
        from_step: str | None = None,
        params: dict[str, Any] | None = None,
        again: bool = True,
        if_status: str | None = None,
    ) -> dict[str, Any]:
        """A new execution of a terminal one (default ID `<ID>.r1`, `.r2`, ...), its history
        starting with copies of the steps recorded before `from_step` (default: before the
        first that did not complete), which replay without running; returns
        {"execution_id", "retry_of", "copied_steps", "started"}. A live execution is
        EXECUTION_NOT_TERMINAL. With `again=False` one that has a retry already is not
        retried again (`started` false, `execution_id` its newest retry); `if_status` (failed
        or cancelled) retries it only if it has that status."""
        body: dict[str, Any] = {}
        if not again:
            body["again"] = False
        if if_status is not None:
            body["if_status"] = if_status
        if new_id is not None:
            body["execution_id"] = new_id
        if from_step is not None:
            body["from"] = from_step
        if params is not None:
            if not isinstance(params, dict):
                raise InvalidArgument("INVALID_ARGUMENT", "params must be an object (a dict)")
            body["params"] = params
        result: dict[str, Any] = self._call(
            "POST", f"/v1/executions/{_ex(execution_id)}/retry", body
        )
        return result

    def retry_matching(
        self,
        *,
        status: builtins.list[str] | str = "failed",
        workflow: str | None = None,
        since: float | None = None,
        tags: dict[str, str] | None = None,
        again: bool = False,
        errors: builtins.list[tuple[str, YsError]] | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Retry every execution that matches (newest first), each in its own transaction;
        returns what each retry returned. Only failed or cancelled executions are retried by
        status (INVALID_ARGUMENT before anything else), and one that has a retry already is
        skipped unless `again` (docs/design.md, "Retries and bulk commands"). The matches are listed page by page before
        each page is retried: the retries, newer than every match, are not among them. With
        `errors`, a retry that is refused (a match gc removed meanwhile, an ID too long to
        take `.rN`) is added there as (ID, error) and the others go on; without, it raises."""
        from ys.contract import check_retry_status

        for s in [status] if isinstance(status, str) else status:
            check_retry_status(s)
        out: builtins.list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self.list(
                status=status,
                workflow=workflow,
                since=since,
                tags=tags,
                limit=1000,
                page_token=token,
            )
            for r in page["executions"]:
                if r.get("retried_by") is not None and not again:
                    continue
                try:
                    result = self.retry(r["execution_id"], again=again, if_status=r["status"])
                    if result.get("started", True):
                        out.append(result)
                except YsError as exc:
                    if errors is None or isinstance(exc, DaemonUnavailable):
                        raise
                    errors.append((r["execution_id"], exc))
            token = page.get("next_page_token")
            if not token:
                return out

    def ps(self, *, limit: int = 100, page_token: str | None = None) -> dict[str, Any]:
        """The executions that are not finished (admitted, running, suspended), newest
        admitted first, a page at a time (`next_page_token` continues)."""
        return self.list(
            status=["admitted", "running", "suspended"], limit=limit, page_token=page_token
        )

    def history(
        self, execution_id: ExecutionRef, limit: int | None = None, page_token: str | None = None
    ) -> dict[str, Any]:
        """One page of the execution's events, oldest first: {"events", "next_page_token"}
        (pass it back as `page_token` for the next page); NotFoundError for an unknown ID."""
        q = {k: str(v) for k, v in (("limit", limit), ("page_token", page_token)) if v is not None}
        path = f"/v1/executions/{_ex(execution_id)}/history" + (f"?{urlencode(q)}" if q else "")
        result: dict[str, Any] = self._call("GET", path)
        return result

    def log_tails(self, execution_id: ExecutionRef, attempt: int | None = None) -> dict[str, Any]:
        """The ends of its delivery logs (of one `attempt`) kept in a shared database (the
        last 64 KiB of each, with the daemon that ran it and where its whole log is on that
        box): {"execution_id", "daemon_id", "shared", "logs": [{"attempt", "daemon_id",
        "path", "size", "kept", "truncated", "text"}]}. Empty on SQLite, where the one box
        has whole logs."""
        path = f"/v1/executions/{_ex(execution_id)}/logs"
        if attempt is not None:
            path += f"?attempt={int(attempt)}"
        result: dict[str, Any] = self._call("GET", path)
        return result

    def events(
        self,
        cursor: str | None = None,
        *,
        since: float | None = None,
        limit: int | None = None,
        wait: float = 0.0,
    ) -> dict[str, Any]:
        """Every execution's events after `cursor`, in commit order: {"events": [...],
        "cursor"}; without a cursor from `since` seconds ago, else from now. With `wait`,
        a long poll: it answers once there is an event, or after `wait` seconds."""
        q = {
            k: str(v)
            for k, v in (
                ("cursor", cursor),
                ("since", since),
                ("limit", limit),
                ("wait", wait or None),
            )
            if v is not None
        }
        path = "/v1/events" + (f"?{urlencode(q)}" if q else "")
        result: dict[str, Any] = self._call("GET", path, timeout=wait + 30 if wait else None)
        return result

    def wake(self, execution_id: ExecutionRef) -> dict[str, Any]:
        """Make a suspended execution due now (`ys wake`); a terminal one is left as it is."""
        result: dict[str, Any] = self._call("POST", f"/v1/executions/{_ex(execution_id)}/wake", {})
        return result

    def cancel(self, execution_id: ExecutionRef, *, now: bool = False) -> dict[str, Any]:
        """Request cancellation; `now`: end it cancelled at once, its worker killed."""
        path = f"/v1/executions/{_ex(execution_id)}/cancel" + ("?now=true" if now else "")
        result: dict[str, Any] = self._call("POST", path, {})
        return result

    def cancel_matching(
        self,
        *,
        status: builtins.list[str] | str | None = None,
        workflow: str | None = None,
        since: float | None = None,
        tags: dict[str, str] | None = None,
        now: bool = False,
        errors: builtins.list[tuple[str, YsError]] | None = None,
    ) -> builtins.list[str]:
        """Cancel every not-finished execution that matches (`ys cancel --status ...`);
        returns the IDs whose cancellation this call made (a match that finished meanwhile,
        or whose cancellation was already requested, is not among them). At least one filter;
        statuses admitted, running or suspended only (INVALID_ARGUMENT before anything else).

        Each match is cancelled through the daemon's one cancel route, in its own transaction,
        as `cancel(ID)` is: a cancellation is per execution and idempotent, so nothing needs
        the set cancelled all at once. Pages are keyset pages (admission time, ID), which a
        cancellation does not move, so no match is skipped or seen twice; an execution
        admitted after the first page is read is not a match. With `errors`, a refused cancel
        (a match gc removed meanwhile) is added there as (ID, error) and the others go on."""
        from ys.contract import CANCEL_STATUSES, check_cancel_status

        statuses = [status] if isinstance(status, str) else builtins.list(status or [])
        for s in statuses:
            check_cancel_status(s)
        if not statuses and workflow is None and since is None and not tags:
            raise InvalidArgument(
                "INVALID_ARGUMENT",
                "cancelling by filter needs at least one of status, workflow, since or tags",
            )
        out: builtins.list[str] = []
        token: str | None = None
        while True:
            page = self.list(
                status=statuses or builtins.list(CANCEL_STATUSES),
                workflow=workflow,
                since=since,
                tags=tags,
                limit=1000,
                page_token=token,
            )
            for r in page["executions"]:
                try:
                    result = self.cancel(r["execution_id"], now=now)
                except YsError as exc:
                    if errors is None or isinstance(exc, DaemonUnavailable):
                        raise
                    errors.append((r["execution_id"], exc))
                    continue
                if result.get("changed", True):
                    out.append(r["execution_id"])
            token = page.get("next_page_token")
            if not token:
                return out

    # -- effects, durable values, schedules, housekeeping -------------------------------------

    def effects(self, status: str | None = None, execution_id: str | None = None) -> dict[str, Any]:
        """The effect ledger, filtered by `status` (pending, settled) and by the
        execution that began each effect."""
        q = {k: v for k, v in (("status", status), ("execution", execution_id)) if v}
        result: dict[str, Any] = self._call(
            "GET", "/v1/effects" + (f"?{urlencode(q)}" if q else "")
        )
        return result

    def effect(self, effect_id: str) -> dict[str, Any]:
        """One effect's ledger record; NotFoundError for an unknown effect ID."""
        result: dict[str, Any] = self._call("GET", f"/v1/effects/{_seg(effect_id, 'effect ID')}")
        return result

    def store_put(
        self, key: str, value: Any, expected_version: int | None = None
    ) -> dict[str, Any]:
        """Commit a new version of `key`; every execution waiting on it is woken."""
        body: dict[str, Any] = {"value": value}
        if expected_version is not None:
            body["expected_version"] = expected_version
        result: dict[str, Any] = self._call("PUT", f"/v1/store/{_seg(key, 'store key')}", body)
        return result

    def store_get(self, key: str) -> dict[str, Any]:
        """A durable value: {"key", "value", "version", ...}; NotFoundError for no such key."""
        result: dict[str, Any] = self._call("GET", f"/v1/store/{_seg(key, 'store key')}")
        return result

    def store_list(self, prefix: str = "") -> dict[str, Any]:
        """The store's keys (with their versions) that start with `prefix`."""
        path = "/v1/store" + (f"?{urlencode({'prefix': prefix})}" if prefix else "")
        result: dict[str, Any] = self._call("GET", path)
        return result

    def store_delete(self, key: str) -> dict[str, Any]:
        """Delete a key; NotFoundError for no such key."""
        result: dict[str, Any] = self._call("DELETE", f"/v1/store/{_seg(key, 'store key')}")
        return result

    def schedules(self) -> dict[str, Any]:
        """Every cron schedule, with its next fire time (`ys schedule list`)."""
        result: dict[str, Any] = self._call("GET", "/v1/schedules")
        return result

    def schedule_add(
        self,
        name: str,
        workflow: str,
        cron: str | None = None,
        *,
        every: float | None = None,
        tz: str = "local",
        params: Any = None,
        catch_up: str = "once",
        overlap: str = "skip",
        max_late: float | None = None,
        jitter: float = 0.0,
    ) -> dict[str, Any]:
        """Add a schedule firing `workflow` at the times `cron` names or `every` seconds from
        now (`ys schedule add`; exactly one of them); InvalidArgument for a bad cron,
        interval, zone or policy, NotFoundError for an unknown workflow."""
        body = {
            "name": name,
            "workflow": workflow,
            "cron": cron,
            "every": every,
            "tz": tz,
            "params": params,
            "catch_up": catch_up,
            "overlap": overlap,
            "max_late": max_late,
            "jitter": jitter,
        }
        result: dict[str, Any] = self._call("POST", "/v1/schedules", body)
        return result

    def schedule(self, name: str) -> dict[str, Any]:
        """One schedule; NotFoundError for an unknown name."""
        result: dict[str, Any] = self._call("GET", _schedule(name))
        return result

    def schedule_remove(self, name: str) -> dict[str, Any]:
        """Remove a schedule (its past executions stay); NotFoundError for an unknown name."""
        result: dict[str, Any] = self._call("DELETE", _schedule(name))
        return result

    def schedule_set(self, name: str, **changes: Any) -> dict[str, Any]:
        """Change a schedule in place (`ys schedule set`): cron or every, tz, params,
        catch_up, overlap, max_late, jitter; FailedPrecondition for one a script declares."""
        result: dict[str, Any] = self._call("PATCH", _schedule(name, ""), changes)
        return result

    def schedule_run(self, name: str) -> dict[str, Any]:
        """Fire the schedule now, once, outside its slots: {"execution_id", "started"}."""
        result: dict[str, Any] = self._call("POST", _schedule(name, "/run"), {})
        return result

    def schedule_pause(self, name: str, paused: bool = True) -> dict[str, Any]:
        """Pause a schedule (or resume it, `paused=False`): a paused one fires nothing."""
        verb = "pause" if paused else "resume"
        result: dict[str, Any] = self._call("POST", _schedule(name, f"/{verb}"), {})
        return result

    def schedule_next(self, name: str, n: int = 5) -> dict[str, Any]:
        """The next `n` times the schedule fires."""
        result: dict[str, Any] = self._call("GET", _schedule(name, f"/next?n={n}"))
        return result

    def gc(self, older_than: float | None = None, dry_run: bool = False) -> dict[str, Any]:
        """Prune terminal executions (and their logs) older than `older_than` seconds."""
        result: dict[str, Any] = self._call(
            "POST", "/v1/gc", {"older_than": older_than, "dry_run": dry_run}
        )
        return result

    def backup(self, path: str) -> dict[str, Any]:
        """A consistent, checked copy of the daemon's SQLite database at `path` (a new file;
        absolute), taken while it runs (`ys backup`). PostgreSQL: InvalidArgument (pg_dump)."""
        result: dict[str, Any] = self._call("POST", "/v1/backup", {"path": path})
        return result

    def workflows(self) -> dict[str, Any]:
        """The workflow scripts the daemon knows, with their versions and options (`ys
        workflows`); a script that cannot load says why."""
        result: dict[str, Any] = self._call("GET", "/v1/workflows")
        return result

    def workflow_pause(self, name: str, paused: bool = True) -> dict[str, Any]:
        """Pause a workflow (or resume it, `paused=False`): no new delivery of it starts on any
        daemon while paused; {"workflow", "paused", "changed"}."""
        verb = "pause" if paused else "resume"
        path = f"/v1/workflows/{_seg(name, 'workflow name')}/{verb}"
        result: dict[str, Any] = self._call("POST", path, {})
        return result

    def version(self) -> dict[str, Any]:
        """The daemon's version, its API version and its store (`ys version`)."""
        result: dict[str, Any] = self._call("GET", "/v1/version")
        return result

    def metrics(self) -> str:
        """The daemon's Prometheus metrics, in the text exposition format."""
        text: str = self._call("GET", "/v1/metrics", raw=True)
        return text

    def shutdown(self) -> dict[str, Any]:
        """Ask the daemon to stop (`ys daemon stop`): running deliveries are redelivered later."""
        result: dict[str, Any] = self._call("POST", "/v1/shutdown", {})
        return result

    # -- the dashboard ----------------------------------------------------------------------

    def overview(self) -> dict[str, Any]:
        """What runs, is due, waits and failed lately; the daemon's health (`ys top`)."""
        result: dict[str, Any] = self._call("GET", "/v1/overview")
        return result

    def ui_token(self) -> dict[str, Any]:
        """A one-time token for the dashboard's URL (`ys ui`)."""
        result: dict[str, Any] = self._call("POST", "/v1/ui/tokens", {})
        return result
