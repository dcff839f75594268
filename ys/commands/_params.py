"""Workflow params from the command line: `-p key=value`... and `--params JSON|@FILE|-`.

Checked before anything is sent, so bad params admit nothing (INVALID_ARGUMENT, exit 2).
Standard library only (`ys schedule add -p` and `ys step start -p` use the same rules).
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

from ys.commands._output import fail


def _no_constants(name: str) -> Any:
    # NaN and Infinity are not JSON; json.loads would accept them.
    raise ValueError(name)


def _depth(value: Any) -> int:
    """How deeply containers nest in a parsed value (iterative: any depth is measured)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, dict | list):
            deepest = max(deepest, d)
            todo.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


# Values nested no deeper than this are within ys.codec.MAX_DEPTH (which is larger) without
# importing the codec: the fast paths load it only for a value that may be too deep.
_SURELY_SHALLOW = 32


def _strict(text: str, what: str) -> Any:
    """The one parser of JSON a user gives on the command line: NaN and Infinity are not
    JSON, and a value nested deeper than a durable value may be is refused as the daemon
    refuses it (INVALID_ARGUMENT), however deep (json itself would raise RecursionError)."""
    try:
        value = json.loads(text, parse_constant=_no_constants)
    except RecursionError:
        _too_deep(what)
    if _depth(value) > _SURELY_SHALLOW:
        from ys.codec import MAX_DEPTH

        if _depth(value) > MAX_DEPTH:
            _too_deep(what)
    return value


def _too_deep(what: str) -> NoReturn:
    from ys.codec import MAX_DEPTH

    fail(
        "INVALID_ARGUMENT",
        f"{what} nests too deeply (durable values nest at most {MAX_DEPTH} levels); flatten it",
    )


def param_value(text: str, what: str = "-p") -> Any:
    """`42` is the number 42, `true` true, `{"a":1}` an object; anything else is the string
    (but JSON nested too deeply is refused)."""
    try:
        return _strict(text, what)
    except ValueError:
        return text


def parse_pairs(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            fail(
                "INVALID_ARGUMENT",
                f"-p {pair!r} is not key=value",
                hint="write -p key=value, for example -p order=42",
            )
        if key in out:
            fail("INVALID_ARGUMENT", f"-p {key} is given twice", hint="give each key once")
        out[key] = param_value(value, f"-p {key}")
    return out


def read_params(spec: str, what: str = "--params") -> Any:
    """`--params`: JSON text, `@FILE` (JSON in a file) or `-` (JSON on stdin). `what` names
    the option or argument in errors (`ys store put KEY @FILE` reads its VALUE this way)."""
    if spec == "-":
        text, where = sys.stdin.read(), "stdin"
    elif spec.startswith("@"):
        try:
            with open(spec[1:], encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            fail(
                "INVALID_ARGUMENT",
                f"{what}: cannot read {spec[1:]!r} ({getattr(exc, 'strerror', None) or exc})",
                hint="check the path",
            )
        where = spec[1:]
    else:
        text, where = spec, what
    try:
        return _strict(text, f"{what} from {where}")
    except ValueError as exc:
        detail = (
            f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else f"{exc} is not JSON"
        )
        fail(
            "INVALID_ARGUMENT",
            f"{what} from {where} is not valid JSON ({detail})",
            hint="give a JSON value, @FILE or - for stdin",
        )


def build_params(pairs: list[str] | None, spec: str | None) -> Any:
    """The params to send, or None when neither -p nor --params is given."""
    base = read_params(spec) if spec is not None else None
    if not pairs:
        return base
    extra = parse_pairs(pairs)
    if base is None:
        return extra
    if not isinstance(base, dict):
        fail(
            "INVALID_ARGUMENT",
            "--params must be a JSON object to combine it with -p",
            hint="put every key in --params, or use only -p",
        )
    both = sorted(set(base) & set(extra))
    if both:
        fail(
            "INVALID_ARGUMENT",
            f"{both[0]} is given by both --params and -p",
            hint="give each key once",
        )
    return {**base, **extra}
