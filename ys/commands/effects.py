"""The effect ledger, for operators: `ys effects` lists effect records, `ys effect ID` shows one
with who began it, who waits on it, and its conflict reports."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from ys.commands._opts import Json, add, non_empty
from ys.commands._output import client, emit_json, error
from ys.errors import YsError


class EffectStatus(StrEnum):
    pending = "pending"
    settled = "settled"
    conflict = "conflict"


def _complete_effects(incomplete: str) -> list[str]:
    from ys.commands._opts import _ask

    return [
        i
        for i in _ask(lambda c: (e["effect_id"] for e in c.effects()["effects"]))
        if i.startswith(incomplete)
    ]


EffectId = Annotated[
    str,
    typer.Argument(
        metavar="EFFECT_ID",
        help="The effect's ID (as the workflow gave it to step.effect).",
        autocompletion=_complete_effects,
        callback=non_empty,
        show_default=False,
    ),
]


def effects(
    status: Annotated[
        EffectStatus | None,
        typer.Option(
            "--status",
            help="Only pending or settled effects, or those with a conflict report.",
            show_default=False,
        ),
    ] = None,
    json_: Json = False,
) -> None:
    """List effect records: ID, operation, status, result and conflict reports.

    A pending effect was begun and its outcome is not known yet; a conflict report means the
    effect was settled again with another result (the first result is kept): see `ys effect ID`.
    """
    with client() as c:
        found = c.effects(status.value if status else None)
    if json_:
        emit_json(found)
        return
    from ys.commands import _render as r

    if not found["effects"]:
        r.note(f"no {status.value} effects" if status else "no effects yet")
        return
    t = r.table("EFFECT", "OPERATION", "STATUS", "RESULT", "CONFLICTS")
    for e in found["effects"]:
        r.add_row(
            t,
            str(e["effect_id"]),
            str(e.get("operation", "")),
            r.effect_status(e),
            r.compact(e.get("result"), 60) if e.get("status") == "settled" else r.DASH,
            str(len(e.get("conflicts") or [])),
        )
    r.show(r.fit(t, "EFFECT", "RESULT"))


def effect(effect_id: EffectId, json_: Json = False) -> None:
    """Show one effect: operation, input, status, result, the executions that began it and
    wait on it, and every conflict report with both results."""
    try:
        with client() as c:
            e = c.effect(effect_id)
    except YsError as exc:
        if exc.code != "NOT_FOUND":
            raise
        raise error(
            "NOT_FOUND", exc.message, hint="`ys effects` lists the effects there are"
        ) from None
    if json_:
        emit_json(e)
        return
    _show(e)


def _show(e: dict[str, Any]) -> None:
    from ys.commands import _render as r

    g = r.grid()
    r.add_row(g, "operation", str(e.get("operation", "")))
    r.add_row(g, "status", r.effect_status(e))
    r.add_row(g, "input", r.compact(e.get("input"), 400))
    r.add_row(
        g,
        "result",
        r.compact(e.get("result"), 400) if e.get("status") == "settled" else "not known yet",
    )
    r.add_row(g, "created", r.local_and_relative(e.get("created_at")))
    r.add_row(g, "settled", r.local_and_relative(e.get("settled_at")))
    r.panel(str(e["effect_id"]), g)
    began = None
    if e.get("began_by"):
        began = r.table("EXECUTION", "STEP", "AT")
        for b in e["began_by"]:
            r.add_row(
                began,
                str(b["execution_id"]),
                str(b.get("step_key") or r.DASH),
                r.local(b.get("at")),
            )
        began = r.fit(began, "EXECUTION", "STEP")
    r.section("Began by", began, "no execution recorded")
    if e.get("waiters"):
        waiters = r.table("EXECUTION", "STEP", "WAKE")
        for w in e["waiters"]:
            r.add_row(
                waiters,
                str(w["execution_id"]),
                str(w.get("step_key") or r.DASH),
                r.relative(w.get("wake_at")),
            )
        r.section("Waited on by", r.fit(waiters, "EXECUTION", "STEP"), "")
    if e.get("conflicts"):
        conflicts = r.table("AT", "KEPT", "CONFLICTING")
        for x in e["conflicts"]:
            r.add_row(
                conflicts,
                r.local(x.get("at")),
                r.compact(x.get("result"), 60),
                r.compact(x.get("conflicting_result"), 60),
            )
        r.section(
            "Conflicts (the first result is kept)", r.fit(conflicts, "CONFLICTING", "KEPT"), ""
        )


def register(app: typer.Typer) -> None:
    add(app, "effects", effects)
    add(app, "effect", effect)
