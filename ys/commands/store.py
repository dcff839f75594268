"""`ys store put|get|ls|rm`: durable values that workflows wait for (`step.wait_for`), such as
approvals and signals. A put wakes every execution waiting on the key in the same transaction."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from ys.commands._opts import Json, add, non_empty
from ys.commands._output import client, emit_json, error
from ys.commands._params import param_value, read_params
from ys.errors import YsError

store_app = typer.Typer(
    help="Durable values that workflows wait for: approvals, signals.",
    no_args_is_help=True,
    suggest_commands=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

NO_KEY = "`ys store ls` shows the keys there are"


def _complete_keys(incomplete: str) -> list[str]:
    from ys.commands._opts import _ask

    return list(_ask(lambda c: (e["key"] for e in c.store_list(incomplete)["entries"])))


Key = Annotated[
    str,
    typer.Argument(
        metavar="KEY",
        help="The value's key, for example approve/order-42.",
        autocompletion=_complete_keys,
        callback=non_empty,
        show_default=False,
    ),
]


@contextmanager
def _not_found_hint() -> Iterator[None]:
    """A missing key's error says how to see the keys there are."""
    try:
        yield
    except YsError as exc:
        if exc.code != "NOT_FOUND":
            raise
        raise error("NOT_FOUND", exc.message, hint=NO_KEY) from None


def read_value(text: str) -> Any:
    """VALUE as `store put` takes it: `-` is JSON on stdin, `@FILE` JSON in a file, anything
    else JSON when it parses and the string itself when not (as `-p key=value`)."""
    if text == "-" or text.startswith("@"):
        return read_params(text, "VALUE")
    return param_value(text)


def put(
    key: Key,
    value: Annotated[
        str,
        typer.Argument(
            metavar="VALUE",
            help='JSON when it parses (true, 42, {"a": 1}), else the string '
            "itself; @FILE reads JSON from a file, - reads JSON from stdin.",
            show_default=False,
        ),
    ],
    expect_version: Annotated[
        int | None,
        typer.Option(
            "--expect-version",
            metavar="N",
            min=0,
            help="Write only if the key is at version N "
            "now (0: it must not exist); otherwise exit 3 and change nothing.",
            show_default=False,
        ),
    ] = None,
    json_: Json = False,
) -> None:
    """Store a new version of a value and wake every execution waiting on its key.

    Prints `KEY = version N (woke K waiting executions)`; with --json {"key", "version",
    "updated_at", "woken"}. A VALUE that starts with - needs `--` before it:
    `ys store put k -- -5`.
    """
    parsed = read_value(value)
    with client() as c:
        out = c.store_put(key, parsed, expected_version=expect_version)
    if json_:
        emit_json(out)
        return
    from rich.text import Text

    from ys.commands import _render as r

    woken = int(out.get("woken") or 0)
    r.show(
        Text(
            f"{out['key']} = version {out['version']} "
            f"(woke {woken} waiting execution{'' if woken == 1 else 's'})"
        )
    )


def get(key: Key, json_: Json = False) -> None:
    """Print a stored value on stdout: a string as it is, anything else as JSON.

    So `$(ys store get KEY)` is the value itself. --json prints {"key", "value", "version",
    "updated_at"}. Exits 4 if nothing is stored under KEY.
    """
    with _not_found_hint(), client() as c:
        found = c.store_get(key)
    if json_:
        emit_json(found)
        return
    v = found["value"]
    sys.stdout.write((v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)) + "\n")


def ls(
    prefix: Annotated[
        str,
        typer.Argument(
            metavar="PREFIX", help="Only keys that start with this.", show_default=False
        ),
    ] = "",
    json_: Json = False,
) -> None:
    """List stored keys with their version and when they last changed, by key."""
    with client() as c:
        found = c.store_list(prefix)
    if json_:
        emit_json(found)
        return
    from ys.commands import _render as r

    if not found["entries"]:
        r.note(f"no keys start with {prefix!r}" if prefix else "nothing is stored yet")
        return
    t = r.table("KEY", "VERSION", "UPDATED")
    for e in found["entries"]:
        r.add_row(t, str(e["key"]), str(e["version"]), r.local_and_relative(e.get("updated_at")))
    r.show(r.fit(t, "KEY"))


def rm(key: Key, json_: Json = False) -> None:
    """Delete a stored value (its version still counts up, so a later put is newer).

    Exits 4 if nothing is stored under KEY; --json prints {"key", "deleted": true}.
    """
    with _not_found_hint(), client() as c:
        out = c.store_delete(key)
    if json_:
        emit_json(out)
        return
    from ys.commands import _render as r

    r.note(f"removed {key}")


for _name, _fn in (("put", put), ("get", get), ("ls", ls), ("rm", rm)):
    add(store_app, _name, _fn)


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
