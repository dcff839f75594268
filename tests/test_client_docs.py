"""What an application reads with `help(ys.Client)`: every public method says what it does,
and the class says which errors its methods raise; the effect lookup answers too."""

from __future__ import annotations

import inspect

import ys


def test_every_public_client_method_has_a_docstring():
    missing = [
        name
        for name, fn in inspect.getmembers(ys.Client, inspect.isfunction)
        if not name.startswith("_") and not (fn.__doc__ or "").strip()
    ]
    assert missing == []


def test_the_client_names_the_errors_it_raises():
    doc = inspect.getdoc(ys.Client) or ""
    for name in ("NotFoundError", "InvalidArgument", "DaemonUnavailable", "ExecutionTimeout"):
        assert f"ys.{name}" in doc, name


def test_the_effect_lookup_answers_are_documented():
    for cls in (ys.Settled, ys.NotFound, ys.Unknown):
        assert (cls.__doc__ or "").strip() and "lookup" in cls.__doc__, cls
