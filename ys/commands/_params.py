"""Workflow params from the command line: `-p key=value`... and `--params JSON|@FILE|-`.

Checked before anything is sent, so bad params admit nothing (INVALID_ARGUMENT, exit 2).
Standard library only (`ys schedule add -p` and `ys step start -p` use the same rules).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ys.commands._output import fail


def _no_constants(name: str) -> Any:
    # NaN and Infinity are not JSON; json.loads would accept them.
    raise ValueError(name)


def _strict(text: str) -> Any:
    return json.loads(text, parse_constant=_no_constants)


def param_value(text: str) -> Any:
    """`42` is the number 42, `true` true, `{"a":1}` an object; anything else is the string."""
    try:
        return _strict(text)
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
        out[key] = param_value(value)
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
        return _strict(text)
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
