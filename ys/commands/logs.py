"""`ys logs`: what a workflow script printed (stdout and stderr), one file per delivery.

The daemon writes delivery N's output to `<data>/logs/<execution>/N.log` (the folder named by
`ys.paths.log_name`); this command reads those files directly and asks the daemon only whether
the execution exists and when it ends. On a database many boxes share (PostgreSQL), a delivery
that ran on another box has no file here: the end of its log (64 KiB) comes from the database,
with a note saying where the whole log is.
"""

from __future__ import annotations

import codecs
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ys.commands._opts import ExecutionId, Json, add
from ys.commands._output import TERMINAL, client, emit_json, emit_json_line, fail

POLL_SECONDS = 0.25  # how often --follow looks at the file while the history stands still


def attempt_files(folder: Path) -> list[tuple[int, Path]]:
    """The delivery logs in attempt order."""
    try:
        names = [p for p in folder.iterdir() if p.suffix == ".log" and p.stem.isdigit()]
    except FileNotFoundError:
        return []
    return sorted((int(p.stem), p) for p in names)


def _header(attempt: int) -> None:
    from ys.commands import _render

    _render.note(f"── attempt {attempt} ──")


class _Tail:
    """Prints what each attempt's file gained since the last look."""

    def __init__(self, json_: bool) -> None:
        self.json = json_
        self.offsets: dict[int, int] = {}
        self.decoders: dict[int, Any] = {}
        self.current: int | None = None

    def drain(self, attempt: int, path: Path) -> None:
        with open(path, "rb") as f:
            f.seek(self.offsets.get(attempt, 0))
            data = f.read()
        if not data:
            return
        self.offsets[attempt] = self.offsets.get(attempt, 0) + len(data)
        if self.json:
            dec = self.decoders.setdefault(
                attempt, codecs.getincrementaldecoder("utf-8")("replace")
            )
            emit_json_line({"attempt": attempt, "text": dec.decode(data)})
            return
        if attempt != self.current:
            _header(attempt)
            self.current = attempt
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _follow(c: Any, folder: Path, execution_id: str, only: int | None, json_: bool) -> None:
    """Tail the attempts' files until the execution is finished (or attempt `only` ended).

    The record is read before each look at the files, so once it says finished, the look
    that follows sees everything the script wrote."""
    tail = _Tail(json_)
    elsewhere = _Elsewhere(c, execution_id, json_)
    after: int | None = None
    while True:
        wait = 0.0 if after is None else POLL_SECONDS
        state = c.wait_change(execution_id, after=after, timeout=wait)
        changed = after != state["history_length"]
        after = state["history_length"]
        here = set()
        for attempt, path in attempt_files(folder):
            here.add(attempt)
            if only is None or attempt == only:
                tail.drain(attempt, path)
        ended = state["status"] in TERMINAL or (only is not None and state["attempts"] > only)
        wanted = [
            n
            for n in range(1, state["attempts"] + 1)
            if n not in here and (only is None or n == only)
        ]
        if wanted and (changed or ended):
            elsewhere.show(wanted, ended)
        if ended:
            return


class _Elsewhere:
    """`--follow` on a box that did not run some attempts: each one's end, as the database
    keeps it once the attempt is over, printed once (a database many daemons share)."""

    WAIT_AT_END = 3.0  # an attempt's end is kept just after its outcome: wait that long for it

    def __init__(self, c: Any, execution_id: str, json_: bool) -> None:
        self.c, self.execution_id, self.json = c, execution_id, json_
        self.shown: set[int] = set()
        self.shared = True  # until the daemon says its database keeps no log ends

    def show(self, wanted: list[int], ended: bool) -> None:
        import time

        deadline = time.monotonic() + (self.WAIT_AT_END if ended else 0.0)
        while self.shared:
            kept: dict[int, dict[str, Any]] = {}
            for n in wanted:  # each attempt's alone: never every attempt's tail at once
                if n in self.shown:
                    continue
                answer = self.c.log_tails(self.execution_id, attempt=n)
                self.shared = bool(answer.get("shared", True))
                kept.update((t["attempt"], t) for t in answer["logs"])
                if not self.shared:
                    return
            for n in wanted:
                if n in kept and n not in self.shown:
                    self.shown.add(n)
                    self._print(n, kept[n])
            if all(n in self.shown for n in wanted) or time.monotonic() >= deadline:
                return
            time.sleep(0.1)

    def _print(self, attempt: int, kept: dict[str, Any]) -> None:
        if self.json:
            emit_json_line(_json_log(attempt, kept))
            return
        _header(attempt)
        _elsewhere(kept)
        sys.stdout.buffer.write(kept["text"].encode("utf-8", "surrogateescape"))
        sys.stdout.buffer.flush()


def logs(
    execution_id: ExecutionId,
    attempt: Annotated[
        int | None,
        typer.Option(
            "--attempt",
            min=1,
            help="Only this delivery attempt (1 is the first).",
            show_default=False,
        ),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Keep printing as the script prints, through later attempts, "
            "until the execution finishes. With --json: one "
            '{"attempt", "text"} object per line.',
        ),
    ] = False,
    json_: Json = False,
) -> None:
    """Show what the workflow script printed (stdout and stderr), per delivery attempt.

    For people each attempt starts with a header line on stderr, so stdout is exactly what
    the script printed. With --json: {"execution_id", "logs": [{"attempt", "text"}, ...]}.
    Each attempt's log keeps at most YS_LOG_MAX_BYTES (10 MiB): past that, its first and its
    last part, with a line between them saying how many bytes were dropped. On a database
    many boxes share, an attempt that ran on another box shows the last 64 KiB the database
    keeps, and a note on stderr says where its whole log is; one whose daemon stopped before
    it kept that (killed) is named with that daemon ("lost": true in JSON).
    """
    from ys.paths import resolve

    folder = resolve().log_dir(execution_id)
    with client() as c:
        record = c.get(execution_id)
        if follow:
            _follow(c, folder, execution_id, attempt, json_)
            return
    files: list[tuple[int, Path | dict[str, Any]]] = list(attempt_files(folder))
    if record.get("attempts", 0) > len(files):
        # some deliveries ran elsewhere: what the database kept of them (a shared database)
        with client() as c:
            answer = c.log_tails(execution_id, attempt=attempt)
        here = {n for n, _ in files}
        files += [(t["attempt"], t) for t in answer["logs"] if t["attempt"] not in here]
        files.sort(key=lambda f: f[0])
        last = record["attempts"]
        running = record["status"] == "running"
        if answer.get("shared") and running and last not in dict(files):
            from ys.commands import _render

            holder = record.get("lease_holder") or "another box"
            _render.note(
                f"attempt {last} runs on {holder}: its log is there; the database keeps its "
                "end when it ends (ys logs --follow shows it then)"
            )
        if answer.get("shared"):
            ended = last - 1 if running else last
            lost = [n for n in range(1, ended + 1) if n not in dict(files)]
            if attempt is not None:
                lost = [n for n in lost if n == attempt]
            if lost:
                with client() as c:
                    ran_on = _daemons_of(c, execution_id)
                files += [(n, {"lost": True, "daemon_id": ran_on.get(n)}) for n in lost]
                files.sort(key=lambda f: f[0])
    if attempt is not None:
        files = [(n, p) for n, p in files if n == attempt]
        if not files:
            fail(
                "NOT_FOUND",
                f"{execution_id} has no log for attempt {attempt}",
                hint=f"it has had {record['attempts']} attempt(s)",
            )
    if json_:
        emit_json(
            {
                "execution_id": execution_id,
                "logs": [_json_log(n, p) for n, p in files],
            }
        )
        return
    if not files:
        from ys.commands import _render

        if record.get("attempts", 0):
            _render.note(f"{execution_id} has no log on this box, and the database keeps none")
        else:
            _render.note(f"{execution_id} has not been delivered yet; nothing printed")
    for n, p in files:
        if isinstance(p, dict) and _lost(p):
            _say_lost(n, p)
            continue
        _header(n)
        if isinstance(p, dict):
            _elsewhere(p)
            sys.stdout.buffer.write(p["text"].encode("utf-8", "surrogateescape"))
        else:
            sys.stdout.buffer.write(p.read_bytes())
        sys.stdout.buffer.flush()


def _lost(log: Path | dict[str, Any]) -> bool:
    return isinstance(log, dict) and bool(log.get("lost"))


def _say_lost(attempt: int, log: dict[str, Any]) -> None:
    """An attempt that ran on another box whose daemon ended before it kept its log's end
    (killed, say): named, with that daemon, instead of left out."""
    from ys.commands import _render

    where = f"daemon {log['daemon_id']}" if log.get("daemon_id") else "another box"
    _render.note(
        f"attempt {attempt} ran on {where}, which stopped before the attempt ended: no end "
        "of its log was kept; what it printed is only in its log on that box"
    )


def _daemons_of(c: Any, execution_id: str) -> dict[int, str]:
    """Which daemon claimed each attempt, as the history's `claimed` events say."""
    out: dict[int, str] = {}
    token = None
    while True:
        page = c.history(execution_id, limit=1000, page_token=token)
        for e in page["events"]:
            data = e.get("data") or {}
            if e["kind"] == "claimed" and data.get("daemon_id"):
                out[int(data["attempt"])] = str(data["daemon_id"])
        token = page.get("next_page_token")
        if not token:
            return out


def _elsewhere(kept: dict[str, Any]) -> None:
    """Say on stderr that this delivery ran on another box, and where its whole log is."""
    from ys.commands import _render

    part = f"its last {kept['kept']} of {kept['size']} bytes" if kept["truncated"] else "all of it"
    _render.note(
        f"ran on daemon {kept['daemon_id']}: its log is {kept['path']} on that box; "
        f"{part} follows, as the database keeps it"
    )


def _json_log(attempt: int, log: Path | dict[str, Any]) -> dict[str, Any]:
    if isinstance(log, dict) and _lost(log):  # nothing of it was kept: which daemon ran it
        return {
            "attempt": attempt,
            "text": "",
            "daemon_id": log.get("daemon_id"),
            "path": None,
            "truncated": False,
            "lost": True,
        }
    if isinstance(log, dict):
        return {
            "attempt": attempt,
            "text": log["text"],
            "daemon_id": log["daemon_id"],
            "path": log["path"],
            "truncated": log["truncated"],
        }
    return {"attempt": attempt, "text": log.read_bytes().decode("utf-8", "replace")}


def register(app: typer.Typer) -> None:
    add(app, "logs", logs)
