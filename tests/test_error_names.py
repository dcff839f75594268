"""`ys.NotFound` (an effect lookup's answer) and `ys.errors.NotFoundError` (a 404) are two names
that cannot be confused: inside ys the 404 is only ever NotFoundError."""

from __future__ import annotations

import ast
from pathlib import Path

import ys
import ys.errors
import ys.sdk

PACKAGE = Path(ys.__file__).resolve().parent


def test_the_lookup_result_and_the_404_are_different_classes():
    assert ys.NotFound is ys.sdk.NotFound
    assert not issubclass(ys.NotFound, BaseException)
    assert issubclass(ys.errors.NotFoundError, ys.errors.YsError)
    err = ys.errors.from_code("EXECUTION_NOT_FOUND", "no such execution")
    assert type(err) is ys.errors.NotFoundError and err.exit_code == 4


def test_no_module_of_ys_imports_the_404_by_its_old_name():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "ys.errors":
                found += [
                    f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                    for alias in node.names
                    if alias.name == "NotFound"
                ]
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "NotFound"
                and isinstance(node.value, ast.Name)
                and node.value.id == "errors"
            ):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == [], found


def test_every_error_a_client_can_see_is_exported_from_ys():
    """`except ys.NotFoundError:` around `Client.get`, and so for every class of ys.errors."""
    classes = {
        name
        for name, value in vars(ys.errors).items()
        if isinstance(value, type)
        and issubclass(value, ys.errors.YsError)
        and name != "NotFound"  # the 404's old name: `ys.NotFound` is the lookup answer
    }
    missing = sorted(
        name for name in classes if getattr(ys, name, None) is not vars(ys.errors)[name]
    )
    assert missing == []
    assert classes <= set(ys.__all__)
    assert ys.NotFoundError is ys.errors.NotFoundError


def test_a_missing_execution_can_be_caught_as_ys_not_found_error(daemon):
    with ys.Client(socket_path=str(daemon.socket)) as c:
        try:
            c.get("no-such-execution")
        except ys.NotFoundError as exc:
            assert exc.code == "EXECUTION_NOT_FOUND"
        else:
            raise AssertionError("get of a missing execution returned")
