"""ys.codec: durable values validate, encode to one canonical JSON string, and decode back."""

from __future__ import annotations

import copy
import enum
import json
import math
from collections import Counter, OrderedDict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.durable_values import (
    assert_same,
    durable_values,
    keys,
    normalized,
    scalars,
)
from ys.codec import (
    MAX_DEPTH,
    MAX_MESSAGE_CHARS,
    MAX_VALUE_BYTES,
    Encoding,
    ErrorValue,
    check_size,
    decode,
    dumps,
    encode,
    is_durable,
)
from ys.errors import InvalidArgument, ValueTooLarge


def canonical(v: Any, path: str = "value") -> str:
    result = encode(v, path=path)
    assert result.status == "encoded", result.message
    assert result.canonical is not None and result.message is None
    return result.canonical


def refusal(v: Any, path: str = "params") -> str:
    result = encode(v, path=path)
    assert result.status == "invalid"
    assert result.canonical is None and result.message is not None
    return result.message


def reordered(v: Any) -> Any:
    """v with every dict's insertion order reversed, all the way down."""
    if isinstance(v, list):
        return [reordered(x) for x in v]
    if isinstance(v, dict):
        return {k: reordered(v[k]) for k in reversed(list(v))}
    return v


# --- round trips ------------------------------------------------------------------------------


@settings(max_examples=200)
@given(durable_values)
def test_every_durable_value_round_trips_and_re_encodes_byte_identically(value: Any) -> None:
    text = canonical(value)
    back = decode(text)
    assert_same(back, normalized(value))
    assert canonical(back) == text


@settings(max_examples=200)
@given(durable_values)
def test_canonical_text_has_sorted_keys_and_no_white_space(value: Any) -> None:
    text = canonical(value)
    raw = json.loads(text)
    assert text == json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@settings(max_examples=200)
@given(durable_values)
def test_key_order_does_not_change_the_encoding(value: Any) -> None:
    assert canonical(reordered(value)) == canonical(value)


@given(st.lists(st.tuples(keys, scalars), unique_by=lambda kv: kv[0], max_size=8), st.randoms())
def test_same_items_in_any_insertion_order_encode_identically(items: list, rnd: Any) -> None:
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert canonical(dict(shuffled)) == canonical(dict(items))


@given(durable_values)
def test_encoding_does_not_modify_the_value(value: Any) -> None:
    before = copy.deepcopy(value)
    canonical(value)
    assert_same(value, before)


@given(durable_values)
def test_is_durable_and_dumps_agree_with_encode(value: Any) -> None:
    assert is_durable(value)
    assert dumps(value) == canonical(value)


def test_scalars_encode_as_plain_json() -> None:
    assert canonical(None) == "null"
    assert canonical(True) == "true"
    assert canonical(False) == "false"
    assert canonical(0) == "0"
    assert canonical(-12) == "-12"
    assert canonical(2**100) == str(2**100)
    assert canonical('a"b\n') == '"a\\"b\\n"'


def test_bools_stay_bools_and_ints_stay_ints() -> None:
    assert_same(decode(canonical([True, 1, 1.0, False, 0])), [True, 1, 1.0, False, 0])


def test_floats_encode_as_shortest_round_trip_text() -> None:
    assert canonical(1.0) == "1.0"
    assert canonical(0.1) == "0.1"
    assert canonical(1e100) == "1e+100"
    assert canonical(5e-324) == "5e-324"
    assert canonical(0.0) == "0.0"


def test_negative_zero_encodes_as_zero_point_zero_like_the_float_it_equals() -> None:
    assert canonical(-0.0) == "0.0"
    assert canonical([-0.0, 0.0, 0]) == "[0.0,0.0,0]"
    assert canonical({"a": -0.0}) == canonical({"a": 0.0}) == '{"a":0.0}'
    assert canonical({"a": -0.0}) != canonical({"a": 0})  # 0 and 0.0 stay apart, as 1 and 1.0
    assert_same(decode(canonical(-0.0)), 0.0)


def test_unicode_is_kept_as_is_not_escaped() -> None:
    text = canonical({"name": "Zoë ✓ 🎉", "日本": "語"})
    assert text == '{"name":"Zoë ✓ 🎉","日本":"語"}'
    assert decode(text) == {"name": "Zoë ✓ 🎉", "日本": "語"}


def test_keys_are_sorted_and_white_space_is_left_out() -> None:
    assert canonical({"b": 1, "a": [1, {"d": None, "c": True}]}) == (
        '{"a":[1,{"c":true,"d":null}],"b":1}'
    )


def test_shared_references_that_are_not_cycles_are_fine() -> None:
    shared = [1, {"x": 2}]
    assert decode(canonical({"a": shared, "b": shared})) == {"a": shared, "b": shared}


def test_nesting_exactly_max_depth_deep_is_accepted() -> None:
    value: Any = []
    for _ in range(MAX_DEPTH - 1):
        value = [value]
    assert decode(canonical(value)) == value


def test_subclasses_of_plain_types_encode_as_the_plain_value() -> None:
    class Colour(enum.StrEnum):
        RED = "red"

    class Size(enum.IntEnum):
        BIG = 3

    class Tags(list):
        pass

    value = {
        "colour": Colour.RED,
        "size": Size.BIG,
        "ordered": OrderedDict([("b", 1), ("a", 2)]),
        "counts": Counter("aab"),
        "tags": Tags(["x"]),
    }
    text = canonical(value)
    assert (
        text
        == '{"colour":"red","counts":{"a":2,"b":1},"ordered":{"a":2,"b":1},"size":3,"tags":["x"]}'
    )
    assert_same(decode(text)["colour"], "red")
    assert_same(decode(text)["size"], 3)


def test_str_subclass_keys_encode_as_plain_keys() -> None:
    class Key(enum.StrEnum):
        A = "a"

    assert canonical({Key.A: 1, "$b": 2}) == '{"$$b":2,"a":1}'


# --- dollar keys and tagged errors ------------------------------------------------------------


def test_keys_starting_with_dollar_get_one_more_dollar() -> None:
    assert (
        canonical({"$error": 1, "$$x": 2, "$": 3, "a$": 4})
        == '{"$$":3,"$$$x":2,"$$error":1,"a$":4}'
    )
    assert decode('{"$$":3,"$$$x":2,"$$error":1,"a$":4}') == {
        "$error": 1,
        "$$x": 2,
        "$": 3,
        "a$": 4,
    }


def test_a_dict_shaped_like_a_tagged_error_decodes_as_a_plain_dict() -> None:
    for shaped in (
        {"$error": {"name": "E", "message": "m"}},
        {"name": "E", "message": "m"},
        {"$error": {"name": "E", "message": "m", "code": "C"}},
    ):
        back = decode(canonical(shaped))
        assert_same(back, shaped)
        assert not isinstance(back, ErrorValue)


def test_an_error_value_round_trips_with_code_and_cause() -> None:
    err = ErrorValue("ChargeFailed", "card declined", "DECLINED", ErrorValue("HTTPError", "402"))
    text = canonical({"error": err})
    assert text == (
        '{"error":{"$error":{"cause":{"$error":{"message":"402","name":"HTTPError"}},'
        '"code":"DECLINED","message":"card declined","name":"ChargeFailed"}}}'
    )
    back = decode(text)
    assert back == {"error": err}
    assert isinstance(back["error"], ErrorValue)
    assert isinstance(back["error"].cause, ErrorValue)


def test_an_error_value_without_code_or_cause_leaves_them_out() -> None:
    assert canonical(ErrorValue("E", "m")) == '{"$error":{"message":"m","name":"E"}}'
    assert decode('{"$error":{"message":"m","name":"E"}}') == ErrorValue("E", "m")


def test_error_value_from_exception_keeps_name_message_string_code_and_cause() -> None:
    class Declined(Exception):
        code = "DECLINED"

    class WithIntCode(Exception):
        code = 402

    try:
        try:
            raise WithIntCode("payment required")
        except WithIntCode as inner:
            raise Declined("card declined") from inner
    except Declined as exc:
        err = ErrorValue.from_exception(exc)

    assert err == ErrorValue(
        "Declined", "card declined", "DECLINED", ErrorValue("WithIntCode", "payment required")
    )
    assert decode(canonical(err)) == err


def test_error_value_from_exception_ignores_implicit_context() -> None:
    try:
        try:
            raise KeyError("k")
        except KeyError:
            raise RuntimeError("boom")  # noqa: B904
    except RuntimeError as exc:
        assert ErrorValue.from_exception(exc) == ErrorValue("RuntimeError", "boom")


def test_error_value_from_exception_bounds_a_cause_chain_even_a_cyclic_one() -> None:
    a, b = ValueError("a"), ValueError("b")
    a.__cause__, b.__cause__ = b, a
    err = ErrorValue.from_exception(a)
    length = 0
    link: ErrorValue | None = err
    while link is not None:
        length += 1
        link = link.cause
    assert 1 < length <= 17
    assert is_durable(err)

    deep: BaseException = ValueError("0")
    for i in range(1, 100):
        nxt = ValueError(str(i))
        nxt.__cause__ = deep
        deep = nxt
    assert is_durable(ErrorValue.from_exception(deep))


def test_error_value_from_exception_survives_an_unprintable_exception() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    err = ErrorValue.from_exception(Unprintable())
    assert err.name == "Unprintable" and "Unprintable" in err.message


def test_error_value_from_exception_always_encodes_even_with_a_lone_surrogate() -> None:
    err = ErrorValue.from_exception(FileNotFoundError("no such file: /tmp/b\udcff"))
    assert err.message == "no such file: /tmp/b\\udcff"
    assert decode(dumps(err)) == err


def test_error_value_to_json_is_a_plain_untagged_dict() -> None:
    err = ErrorValue("E", "m", "C", ErrorValue("F", "n"))
    assert err.to_json() == {
        "name": "E",
        "message": "m",
        "code": "C",
        "cause": {"name": "F", "message": "n"},
    }
    assert ErrorValue("E", "m").to_json() == {"name": "E", "message": "m"}


def test_error_value_from_exception_cuts_a_huge_message_so_the_error_can_be_saved() -> None:
    error = ErrorValue.from_exception(ValueError("x" * 10_000_000))
    assert error.message.startswith("x" * MAX_MESSAGE_CHARS + "... (")
    assert f"({10_000_000 - MAX_MESSAGE_CHARS} more characters not kept)" in error.message
    check_size(canonical(error), "error")  # fits in a saved value


def test_check_size_passes_a_value_at_the_limit_and_names_the_limit_past_it() -> None:
    at_limit = canonical("z" * (MAX_VALUE_BYTES - 4))  # two quotes, each counted twice
    assert check_size(at_limit, "result") == at_limit
    with pytest.raises(ValueTooLarge) as over:
        check_size(canonical("z" * (MAX_VALUE_BYTES - 3)), "step 'big' result")
    assert over.value.code == "INVALID_ARGUMENT"  # exit code 2, HTTP 400
    assert over.value.message.startswith(
        f"step 'big' result is {MAX_VALUE_BYTES - 1} bytes encoded ("
    )
    assert "over the 2 MiB limit" in over.value.message


def test_check_size_counts_escaped_quotes_as_the_value_travels_in_a_json_string() -> None:
    # 2 bytes of UTF-8 per "é" or per quote (escaped as \" when the value is sent as text)
    assert check_size(canonical(["é"] * 100_000), "v")
    with pytest.raises(ValueTooLarge):
        check_size(canonical([""] * (MAX_VALUE_BYTES // 4)), "v")  # 3 bytes, 5 as sent


def test_an_error_value_with_non_string_fields_is_refused() -> None:
    assert refusal(ErrorValue(1, "m"), "result") == (  # type: ignore[arg-type]
        "result.name: an ErrorValue's name must be a str, not an int object"
    )
    assert refusal({"e": ErrorValue("E", "m", cause="x")}, "result").startswith(  # type: ignore[arg-type]
        "result.e.cause: an ErrorValue's cause must be an ErrorValue or None"
    )


# --- refusals ---------------------------------------------------------------------------------


class Foo:
    pass


@dataclass
class Point:
    x: int


def make_list_cycle() -> list[Any]:
    a: list[Any] = [1]
    a.append({"back": a})
    return {"items": a}  # type: ignore[return-value]


def make_dict_cycle() -> dict[str, Any]:
    d: dict[str, Any] = {"a": {}}
    d["a"]["self"] = d
    return d


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"items": [1, 2, 3, math.nan]}, "params.items[3]: NaN is not a durable value"),
        ({"x": math.inf}, "params.x: Infinity is not a durable value"),
        ({"x": -math.inf}, "params.x: -Infinity is not a durable value"),
        ({"a": {"b": (1, 2)}}, "params.a.b: a tuple is not a durable value (use a list)"),
        ({"x": {1}}, "params.x: a set is not a durable value"),
        ({"x": frozenset()}, "params.x: a frozenset is not a durable value"),
        ({"x": b"raw"}, "params.x: a bytes object is not a durable value (decode it to a str)"),
        ({"x": object()}, "params.x: a bare object() is not a durable value"),
        ({"x": [Foo()]}, "params.x[0]: a Foo object is not a durable value"),
        (
            {"p": Point(1)},
            "params.p: a Point object is not a durable value (convert it with dataclasses.asdict)",
        ),
        (
            {"when": datetime(2024, 1, 1)},
            "params.when: a datetime object is not a durable value (use an ISO 8601 str)",
        ),
        (
            {"n": Decimal("1.5")},
            "params.n: a Decimal object is not a durable value (use a str or a float)",
        ),
        ({1: "a"}, "params: key 1 is not a string"),
        ({"a": {(1, 2): "a"}}, "params.a: key (1, 2) is not a string"),
        ({"a": {None: 1}}, "params.a: key None is not a string"),
        (make_list_cycle(), "params.items[1].back: a reference cycle is not a durable value"),
        (make_dict_cycle(), "params.a.self: a reference cycle is not a durable value"),
        ({"x y": math.nan}, 'params["x y"]: NaN is not a durable value'),
        ({"$error": [math.nan]}, 'params["$error"][0]: NaN is not a durable value'),
        ({"é": {"ok": math.nan}}, "params.é.ok: NaN is not a durable value"),
        (
            {"big": 10**4300},
            "params.big: an integer of more than 4300 digits is not a durable value",
        ),
        (
            {"s": ["ok", "bad\udcff"]},
            "params.s[1]: a str with a lone surrogate (U+DCFF) is not a durable value",
        ),
        (len, "params: a builtin_function_or_method object is not a durable value"),
        (None.__class__, "params: a type object is not a durable value"),
    ],
)
def test_a_value_that_is_not_durable_is_refused_with_its_path(value: Any, message: str) -> None:
    assert refusal(value) == message
    assert not is_durable(value)


def test_nesting_deeper_than_max_depth_is_refused_at_the_first_level_too_deep() -> None:
    message = refusal(nested(MAX_DEPTH + 1))
    assert (
        message
        == "params"
        + "[0]" * MAX_DEPTH
        + f": nesting deeper than {MAX_DEPTH} levels is not a durable value"
    )
    assert is_durable(nested(MAX_DEPTH))


def test_a_self_containing_list_is_refused_not_recursed_into() -> None:
    a: list[Any] = []
    a.append(a)
    assert refusal(a, "result") == "result[0]: a reference cycle is not a durable value"


def test_the_root_name_defaults_to_value() -> None:
    assert refusal((1,), "value") == encode((1,)).message
    assert encode((1,)) == Encoding(
        "invalid", message="value: a tuple is not a durable value (use a list)"
    )


def test_dumps_raises_invalid_argument_with_the_message() -> None:
    with pytest.raises(InvalidArgument) as caught:
        dumps({"x": math.nan}, path="params")
    assert caught.value.code == "INVALID_ARGUMENT"
    assert caught.value.message == "params.x: NaN is not a durable value"


bad_leaves = st.sampled_from(
    [
        (math.nan, "NaN is not a durable value"),
        (math.inf, "Infinity is not a durable value"),
        ((), "a tuple is not a durable value (use a list)"),
        (set(), "a set is not a durable value"),
        (b"", "a bytes object is not a durable value (decode it to a str)"),
    ]
)
steps = st.lists(st.integers(min_value=0, max_value=3) | st.text(max_size=5), max_size=8)


def expected_segment(step: int | str) -> str:
    if isinstance(step, int):
        return f"[{step}]"
    return "." + step if step.isidentifier() else "[" + json.dumps(step, ensure_ascii=False) + "]"


@given(steps, bad_leaves, durable_values)
def test_a_bad_value_anywhere_is_refused_naming_exactly_its_path(
    path: list[int | str], bad: tuple[Any, str], filler: Any
) -> None:
    leaf, reason = bad
    value: Any = leaf
    for step in reversed(path):
        # Valid siblings come before the bad value, so they are checked first and must pass.
        value = [filler] * step + [value] if isinstance(step, int) else {step: value}
    expected = "params" + "".join(expected_segment(s) for s in path) + ": " + reason
    assert refusal(value) == expected


# --- decoding ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "NaN",
        "[NaN]",
        "Infinity",
        '{"x":-Infinity}',
        "1e400",
        "{",
        "",
        "[1,]",
        "{'a':1}",
        "1 2",
        '{"$foo":1}',
        '{"a":{"$":1}}',
        '{"\\u0024foo":1}',
        '{"$error":{"name":"E"}}',
        '{"$error":{"name":"E","message":"m","extra":1}}',
        '{"$error":{"name":"E","message":"m"},"x":1}',
        '{"$error":{"name":"E","message":"m","code":null}}',
        '{"$error":{"name":"E","message":"m","cause":{"name":"F","message":"n"}}}',
        '{"$error":"E"}',
        '{"$error":{"$error":{"name":"E","message":"m"}}}',
        "[" * 100_000,
    ],
)
def test_decode_refuses_malformed_text(text: str) -> None:
    with pytest.raises(ValueError):
        decode(text)


def test_decode_takes_only_str() -> None:
    with pytest.raises(TypeError):
        decode(b"1")  # type: ignore[arg-type]


def test_a_dollar_inside_a_string_value_is_just_text() -> None:
    assert decode('{"price":"$5","$$k":"$error"}') == {"price": "$5", "$k": "$error"}
