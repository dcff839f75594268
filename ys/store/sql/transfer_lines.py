"""The export file: JSON lines around the records of ys/store/sql/transfer.py.

The first line is the header (`{"kind": "header", "format": "ys-export", "version": N}`), the
last one the end (`{"kind": "end", "counts": {kind: n}}`), and every line carries the check
of its own text (`"check"`: the first 32 hex digits of the SHA-256 of the line without it, as
its last member). So a line cut short, a line edited, a file cut at a line's end and a file of
a newer format are each told apart, and refused before anything is written: an import reads
the whole input once to check it (spooling standard input to a temporary file, so memory
does not grow with it: every line's check, the header, the end line's counts), then again to
write it (each record's members checked as it is read).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterator, Mapping
from typing import IO, Any, cast

from ys.errors import InvalidArgument
from ys.store.base import ExportLine
from ys.store.sql.transfer import COLUMNS, FORMAT_VERSION, ORDER

FORMAT = "ys-export"
_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_TAIL = len(',"check":"') + 32 + len('"}')


# A line as read, before its shape is checked (the header, the end, or a record).
Decoded = dict[str, object]


def encode(obj: Mapping[str, object]) -> str:
    """One line (with its newline) of the export."""
    return line_of(_DUMPS(obj))


def line_of(text: str) -> str:
    """The line of a record already in JSON text (compact, no "check" member), its check
    added."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
    return f'{text[:-1]},"check":"{digest}"}}\n'


def header() -> str:
    return encode({"kind": "header", "format": FORMAT, "version": FORMAT_VERSION})


def end(counts: dict[str, int]) -> str:
    return encode({"kind": "end", "counts": counts})


def _bad(name: str, n: int, why: str) -> InvalidArgument:
    return InvalidArgument(
        "INVALID_ARGUMENT",
        f"{name}, line {n}: {why}; nothing was imported: export it again with `ys export`",
    )


def decode(line: str, name: str, n: int) -> Decoded:
    """A line's object, once its check holds."""
    _checked_kind(line, name, n)
    text = line.rstrip("\n")
    body = text[:-_TAIL] + "}"
    try:
        obj = json.loads(body)
    except ValueError:
        raise _bad(name, n, "the line is not JSON") from None
    if not isinstance(obj, dict):
        raise _bad(name, n, "the line is not a JSON object")
    return cast(Decoded, obj)


_WANT = {
    kind: (
        frozenset(cols) | (frozenset() if kind == "execution" else frozenset({"kind", *parts})),
        frozenset({"kind", "execution", *parts}) if kind == "execution" else None,
        [(part, frozenset(pcols)) for part, pcols in parts.items()],
    )
    for kind, (cols, parts) in COLUMNS.items()
}


def _shape(obj: Decoded, name: str, n: int) -> None:
    """The record has the format's members, each part a list of rows with their columns."""
    kind = obj.get("kind")
    want = _WANT.get(kind) if isinstance(kind, str) else None
    if want is None:
        raise _bad(name, n, f"unknown kind {kind!r}")
    members, outer, parts = want
    row = obj.get("execution") if outer is not None else obj
    ok = isinstance(row, dict) and row.keys() == members
    if outer is not None:
        ok = ok and obj.keys() == outer
    for part, pcols in parts:
        rows = obj.get(part)
        ok = (
            ok
            and isinstance(rows, list)
            and all(isinstance(r, dict) and r.keys() == pcols for r in rows)
        )
    if not ok:
        raise _bad(
            name, n, f"the {kind} record does not have the members of format {FORMAT_VERSION}"
        )


def check(src: IO[str], name: str) -> tuple[IO[str], dict[str, int]]:
    """Read the whole export once and check every line; returns it ready to read again (a
    spooled copy where `src` cannot seek, standard input) and the count per kind.
    INVALID_ARGUMENT naming the line otherwise."""
    seekable = src.seekable()
    copy: IO[str] = src if seekable else tempfile.TemporaryFile("w+", encoding="utf-8")
    counts = dict.fromkeys(ORDER, 0)
    ended: Decoded | None = None
    n = 0
    try:
        for n, line in enumerate(src, 1):  # noqa: B007 - n is the count of lines after
            if not seekable:
                copy.write(line)
            if ended is not None:
                raise _bad(name, n, "a line after the end line")
            if n == 1:
                _header(decode(line, name, n), name)
                continue
            kind = _checked_kind(line, name, n)
            if kind == "end":
                ended = decode(line, name, n)
                continue
            if kind == "header":
                raise _bad(name, n, "a second header line")
            counts[kind] += 1
        if n == 0:
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"{name} is empty; give a file `ys export` wrote"
            )
        if ended is None:
            raise _bad(name, n, "the export ends before its end line (it was cut short)")
        if ended.get("counts") != counts:
            raise _bad(
                name, n, f"the end line counts {ended.get('counts')}, the file holds {counts}"
            )
        copy.seek(0)
    except BaseException:
        if not seekable:
            copy.close()
        raise
    return copy, counts


_KIND = '{"kind":"'


def _checked_kind(line: str, name: str, n: int) -> str:
    """A line's kind, once its check holds (its JSON is read on the second pass, `records`:
    a line whose check holds is as `ys export` wrote it)."""
    text = line.rstrip("\n")
    if len(text) <= _TAIL or not text.endswith('"}') or text[-_TAIL:-34] != ',"check":"':
        raise _bad(name, n, "the line is cut short or is not a line of a ys export")
    body = text[:-_TAIL] + "}"
    if hashlib.sha256(body.encode("utf-8")).hexdigest()[:32] != text[-34:-2]:
        raise _bad(name, n, "the line was changed after it was exported (its check differs)")
    kind = text[len(_KIND) : text.find('"', len(_KIND))] if text.startswith(_KIND) else ""
    if kind not in ORDER and kind not in ("header", "end"):
        raise _bad(name, n, f"unknown kind {kind!r}")
    return kind


def _header(obj: Decoded, name: str) -> None:
    if obj.get("kind") != "header" or obj.get("format") != FORMAT:
        raise _bad(name, 1, "not the header of a ys export")
    version = obj.get("version")
    if not isinstance(version, int) or version < 1:
        raise _bad(name, 1, f"unknown format version {version!r}")
    if version > FORMAT_VERSION:
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"{name} was written by a newer ys (export format {version}; this ys reads up to "
            f"{FORMAT_VERSION}); upgrade ys to import it",
        )


def records(src: IO[str], name: str) -> Iterator[ExportLine]:
    """The records of a checked export (`check`), header and end left out, each line checked
    again as it is read."""
    for n, line in enumerate(src, 1):
        if n == 1:
            continue
        obj = decode(line, name, n)
        if obj.get("kind") != "end":
            _shape(obj, name, n)
            yield cast(ExportLine, obj)  # its members are the format's (`_shape`)


def write(store: Any, out: IO[str], **filters: Any) -> dict[str, int]:
    """The export of `store` (its `export_records`) as lines on `out`; the count per kind."""
    out.write(header())
    counts: dict[str, int] = store.export_records(lambda r: out.write(encode(r)), **filters)
    out.write(end(counts))
    return counts
