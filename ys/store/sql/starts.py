"""The start client: a child start happens once per (caller execution, step key).

A new start admits the target with its parent link and first wake and records the request in
one transaction; a repeat with the same workflow and canonical params returns the first target;
anything different is START_REQUEST_MISMATCH, also after the target is terminal. Not fenced: a
stale lease holder gets the same target and starts nothing new. The caller's row is locked
first (where rows are locked), so two starts of one step (a stale delivery and its successor,
on two daemons) are taken one after the other: the second finds the first's request.

`cancel_tx` is here because a cancellation follows the parent links a start makes (the
execution client's `cancel` runs it).
"""

from __future__ import annotations

import json
from typing import Any

from ys.contract import check_params_json, check_start
from ys.errors import NotFoundError, WorkflowStartError
from ys.store.base import Parent
from ys.store.eventdata import CancelRequestedData
from ys.store.records import CANCEL_REQUESTED, Event
from ys.store.sql.core import Core
from ys.store.sql.executions import admit_tx, append, load, not_found


def start_tx(
    c: Any,
    caller_id: str,
    step_key: str,
    workflow: str,
    params_json: str,
    detached: bool,
    now: float,
) -> str:
    caller = c.execute(
        "SELECT cancel_requested, tags FROM executions WHERE execution_id=?" + c.dialect.for_update,
        (caller_id,),
    ).fetchone()
    if caller is None:
        raise NotFoundError("EXECUTION_NOT_FOUND", f"caller {caller_id!r} does not exist")
    row = c.execute(
        "SELECT workflow, params, target_id FROM start_requests WHERE caller_id=? AND step_key=?",
        (caller_id, step_key),
    ).fetchone()
    if row is not None:
        if row[0] != workflow or row[1] != params_json:
            other = (
                "the same workflow but other params" if row[0] == workflow else "another workflow"
            )
            raise WorkflowStartError(
                "START_REQUEST_MISMATCH",
                f"step {step_key!r} of {caller_id} already started {row[0]} ({row[2]}) with "
                f"{other}",
                target=row[2],
            )
        return str(row[2])
    parent = Parent(caller_id, step_key, bool(detached))
    admission = admit_tx(
        c,
        workflow,
        "{}" if params_json == "null" else params_json,
        "{}",
        None,
        "fail",
        parent,
        now,
        json.loads(caller[1]) if caller[1] else None,  # a child carries its caller's tags
    )
    c.execute(
        "INSERT INTO start_requests (caller_id, step_key, workflow, params, detached, "
        "target_id, created_at) VALUES (?,?,?,?,?,?,?)",
        (caller_id, step_key, workflow, params_json, bool(detached), admission.execution_id, now),
    )
    if caller[0] and not detached:
        # A caller already being cancelled passes that on to an attached child it starts now.
        cancel_tx(c, admission.execution_id, now, depth=1)
    return admission.execution_id


def cancel_tx(c: Any, execution_id: str, now: float, depth: int = 0) -> bool:
    """Record a cancellation request (the execution becomes due now) and pass it on to every
    attached child that is not terminal. Returns whether anything changed. Rows are locked
    parent first, then children, the order the links run."""
    record = load(c, execution_id, payload=False, lock=True)
    if record is None:
        raise not_found(execution_id)
    if record.terminal or record.cancel_requested:
        return False
    append(
        c, record, [Event(CANCEL_REQUESTED, now, CancelRequestedData("parent" if depth else None))]
    )
    # one waiting for a concurrency slot is looked at again: if it never ran, the next claim
    # ends it cancelled without a slot (ys/store/sql/claims.py `_claim_one`)
    c.execute(
        "UPDATE executions SET slot_wait=NULL WHERE execution_id=? AND slot_wait IS NOT NULL",
        (execution_id,),
    )
    if depth < 64:
        children = c.execute(
            "SELECT execution_id FROM executions WHERE parent_id=? AND parent_detached = false "
            "AND status NOT IN ('completed','failed','cancelled') ORDER BY execution_id",
            (execution_id,),
        ).fetchall()
        for (child,) in children:
            cancel_tx(c, child, now, depth + 1)
    return True


class Starts:
    """The start client of one store."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def start(
        self,
        caller_id: str,
        step_key: str,
        workflow: str,
        params_json: str = "null",
        *,
        detached: bool = False,
        now: float | None = None,
    ) -> str:
        """Start a child once per (caller, step key); returns the target's execution ID.
        `params_json` as the worker encoded them, checked before the transaction."""
        check_start(step_key, workflow)
        params_json = check_params_json(params_json)
        t = self._core.now(now)
        target: str = self._core.write(
            lambda c: start_tx(c, caller_id, step_key, workflow, params_json, detached, t)
        )
        return target
