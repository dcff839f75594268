"""Durable values for property tests: hypothesis strategies (with `$` keys and tagged errors)
and the comparisons a round trip must pass. Shared by the codec's and the effects' tests."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

from ys.codec import ErrorValue

# -- strategies ------------------------------------------------------------------------------

keys = st.one_of(
    st.text(max_size=8),
    st.text(max_size=6).map(lambda s: "$" + s),
    st.sampled_from(["$error", "$$error", "$", "$$", "name", "message", "code", "cause", "status"]),
)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), finite_floats, st.text(max_size=12))
error_values = st.recursive(
    st.builds(
        ErrorValue, st.text(max_size=8), st.text(max_size=12), st.none() | st.text(max_size=8)
    ),
    lambda causes: st.builds(
        ErrorValue,
        st.text(max_size=8),
        st.text(max_size=12),
        st.none() | st.text(max_size=8),
        causes,
    ),
    max_leaves=4,
)
durable_values = st.recursive(
    scalars | error_values,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=5),
    max_leaves=30,
)


def normalized(v: Any) -> Any:
    """What decode should give back for v: the same, except -0.0 becomes 0.0."""
    if type(v) is float and v == 0.0 and math.copysign(1.0, v) < 0:
        return 0.0
    if isinstance(v, list):
        return [normalized(x) for x in v]
    if isinstance(v, dict):
        return {k: normalized(x) for k, x in v.items()}
    return v


def assert_same(actual: Any, expected: Any) -> None:
    """Equality that also insists on types (1 != 1.0, True != 1, ErrorValue != dict)."""
    assert type(actual) is type(expected), (actual, expected)
    if isinstance(expected, dict):
        assert actual.keys() == expected.keys()
        for k in expected:
            assert_same(actual[k], expected[k])
    elif isinstance(expected, list):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_same(a, e)
    elif isinstance(expected, ErrorValue):
        assert (actual.name, actual.message, actual.code) == (
            expected.name,
            expected.message,
            expected.code,
        )
        assert_same(actual.cause, expected.cause)
    else:
        assert actual == expected
