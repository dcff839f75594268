"""What `ys trigger` does, without typer: the typer command and the fast path in `ys.cli`
both call `trigger`, so they print the same bytes and exit with the same code."""

from __future__ import annotations

import re
import sys
from typing import Any

from ys.commands._output import TERMINAL, client, emit_json, error, fail, outcome_exit_code
from ys.commands._params import build_params
from ys.durations import format_duration, relative
from ys.errors import ExecutionTimeout, YsError

IF_EXISTS = ("fail", "use-existing")


def _conflict(exc: YsError, c: Any, execution_id: str) -> YsError:
    """The daemon says `ID already exists (completed)`; say since when, too."""
    try:
        record = c.get(execution_id)
    except YsError:
        return exc
    st = record["status"]
    since = (
        f"{st} {relative(record['updated_at'])}"
        if st in TERMINAL
        else f"{st}, admitted {relative(record['admitted_at'])}"
    )
    exc.message = re.sub(r"\(\w+\)$", f"({since})", exc.message)
    return exc


def _unanswered(exc: YsError, workflow: str, execution_id: str | None) -> YsError:
    """The admission was sent and not answered: say that it may have happened, and how to
    retry without admitting twice."""
    what = exc.message.split(", so ", 1)[0]
    if execution_id is not None:
        return error(
            "DAEMON_UNAVAILABLE",
            f"{what}, so {execution_id} may have been admitted; "
            "retrying the same command with --if-exists use-existing is safe (it "
            f"admits {execution_id} at most once)",
        )
    return error(
        "DAEMON_UNAVAILABLE",
        f"{what}, so an execution of {workflow} may have been "
        f"admitted; `ys list --workflow {workflow}` shows it, and giving --id with "
        "--if-exists use-existing makes a retry safe",
    )


def parse_tags(texts: list[str] | None) -> dict[str, str] | None:
    """`--tag k=v` options as one map; a key given twice is a usage error (exit 2)."""
    if not texts:
        return None
    from ys.contract import parse_tag

    tags: dict[str, str] = {}
    for text in texts:
        key, value = parse_tag(text)
        if key in tags and tags[key] != value:
            fail("INVALID_ARGUMENT", f"--tag {key} is given twice with different values")
        tags[key] = value
    return tags


def trigger(
    workflow: str,
    execution_id: str | None,
    pairs: list[str] | None,
    spec: str | None,
    if_exists: str,
    json_: bool,
    wait: bool = False,
    timeout: float | None = None,
    tags: list[str] | None = None,
    traceparent: str | None = None,
) -> int:
    """Admit, print the ID (or the JSON), and with `wait` wait; returns the exit code."""
    body = build_params(pairs, spec)
    tag_map = parse_tags(tags)
    if traceparent is not None:
        from ys.tracing import check

        traceparent = check(traceparent, "--traceparent")
    with client(timeout=None if wait else 60.0) as c:
        try:
            result = c.trigger(
                workflow,
                body,
                execution_id=execution_id,
                if_exists=if_exists,
                tags=tag_map,
                traceparent=traceparent,
            )
        except YsError as exc:
            if exc.code == "EXECUTION_ID_CONFLICT" and execution_id is not None:
                raise _conflict(exc, c, execution_id) from None
            if exc.context.get("admission_unknown"):
                raise _unanswered(exc, workflow, execution_id) from None
            raise
        new_id = result["execution_id"]
        if json_:
            emit_json(result)
        else:
            sys.stdout.write(new_id + "\n")
        sys.stdout.flush()
        warning = result.get("warning")
        if warning:  # admitted, but its script cannot run yet: say so, and why
            line = " ".join(str(warning).split())
            sys.stderr.write(f"warning: {line}\n")
            sys.stderr.flush()
        if not wait:
            return 0
        try:
            record = c.wait(new_id, timeout=timeout)
        except ExecutionTimeout as exc:
            record = exc.record  # refused below (exit 6)
    if record["status"] not in TERMINAL:
        from shlex import quote

        fail(
            "TIMEOUT",
            f"{new_id} is still {record['status']} after {format_duration(timeout or 0)}",
            hint=f"wait for it with `ys wait {quote(new_id)}`",
        )
    if not json_:
        from ys.commands import _render

        _render.err().print(_render.finished(record))
    return outcome_exit_code(record)


def fast_argv(argv: list[str]) -> dict[str, Any] | None:
    """`trigger WORKFLOW [--id ID] [-p K=V]... [--params P] [--if-exists X] [--json]` as
    keyword arguments for `trigger`, or None for anything else (typer parses that)."""
    if len(argv) < 2 or argv[0] != "trigger" or argv[1].startswith("-"):
        return None
    out: dict[str, Any] = {
        "workflow": argv[1],
        "execution_id": None,
        "pairs": [],
        "spec": None,
        "if_exists": "fail",
        "json_": False,
    }
    given: set[str] = set()
    rest = argv[2:]
    i = 0
    while i < len(rest):
        opt = rest[i]
        if opt == "--json" and opt not in given:
            out["json_"] = True
            given.add(opt)
            i += 1
            continue
        if i + 1 >= len(rest) or rest[i + 1].startswith("-"):
            return None
        value = rest[i + 1]
        if opt in ("-p", "--param"):
            out["pairs"].append(value)
        elif opt in given:
            return None
        elif opt == "--id":
            out["execution_id"] = value
        elif opt == "--params":
            out["spec"] = value
        elif opt == "--if-exists" and value in IF_EXISTS:
            out["if_exists"] = value
        else:
            return None
        given.add(opt)
        i += 2
    out["pairs"] = out["pairs"] or None
    return out
