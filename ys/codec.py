"""Durable values: validate, encode to one canonical JSON string, decode back.

A durable value is None, a bool, an int, a finite float, a str, a list of durable values, a dict
with str keys and durable values, or an ErrorValue. The canonical text has its keys sorted, no
insignificant white space and non-ASCII characters as they are; -0.0 is written as 0.0. Two values
that are equal within one type therefore encode to the same string, which is what request
comparison (START_REQUEST_MISMATCH, use-existing and friends) relies on; 0 and 0.0 stay apart, as
1 and 1.0 do.

Errors are tagged as {"$error": {...}}. So that user data can never pose as an error, every key
of user data that starts with "$" is written with one more "$" ("$error" -> "$$error") and read
back with one less; any other single-"$" key in canonical text is malformed.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from itertools import islice
from typing import Any, NotRequired, TypedDict

from ys.errors import InvalidArgument, ValueTooLarge

MAX_DEPTH = 64  # containers (lists, dicts, ErrorValues) nested deeper than this are refused
# The most a saved value (a step's or a workflow's result) may take encoded, as params may.
# Checked by the SDK before it sends one and by the store that saves it (see check_size).
MAX_VALUE_BYTES = 2 * 1024 * 1024
# An error's message is cut to this many characters, so that an error (with its causes) always
# fits in a saved value, however long the text its exception carries.
MAX_MESSAGE_CHARS = 16 * 1024

_MAX_CAUSES = 16  # ErrorValue.from_exception follows at most this many __cause__ links
_INT_DIGITS = 4300  # Python's default int<->str limit; longer ints could not be decoded
_INT_LIMIT = 10**_INT_DIGITS
_ERROR_TAG = "$error"
_ERROR_FIELDS = frozenset({"name", "message", "code", "cause"})


@dataclass(frozen=True)
class Encoding:
    """What `encode` returns: `canonical` when status is "encoded", `message` when "invalid"."""

    status: str
    canonical: str | None = None
    message: str | None = None


class ErrorValueJson(TypedDict):
    """An error value as the API shows it (`ErrorValue.to_json`)."""

    name: str
    message: str
    code: NotRequired[str]
    cause: NotRequired[ErrorValueJson]


@dataclass(frozen=True)
class ErrorValue:
    """An error as a durable value; it is tagged in canonical text, so no plain dict decodes as one."""

    name: str
    message: str
    code: str | None = None
    cause: ErrorValue | None = None

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorValue:
        """Follows `__cause__` (not `__context__`) at most 16 links deep; never raises, and the
        result always encodes (lone surrogates in texts are written as \\udcxx escapes) and
        fits in a saved value (each message is cut to MAX_MESSAGE_CHARS)."""
        chain: list[BaseException] = []
        seen: set[int] = set()
        link: BaseException | None = exc
        while link is not None and len(chain) <= _MAX_CAUSES and id(link) not in seen:
            seen.add(id(link))
            chain.append(link)
            link = link.__cause__
        result: ErrorValue | None = None
        for link in reversed(chain):
            result = cls(
                type(link).__name__, _exception_message(link), _exception_code(link), result
            )
        assert result is not None
        return result

    def to_json(self) -> ErrorValueJson:
        """A plain dict for API output (untagged: not for storing, use `encode` for that)."""
        out: ErrorValueJson = {"name": self.name, "message": self.message}
        if self.code is not None:
            out["code"] = self.code
        if self.cause is not None:
            out["cause"] = self.cause.to_json()
        return out


def _exception_message(exc: BaseException) -> str:
    try:
        return clip(_utf8(str(exc)))
    except Exception:
        return f"<unprintable {type(exc).__name__}>"


def clip(message: str, most: int = MAX_MESSAGE_CHARS) -> str:
    """An error message cut to `most` characters, saying how much was left out."""
    if len(message) <= most:
        return message
    cut = len(message) - most
    return f"{message[:most]}... ({cut} more characters not kept)"


def _exception_code(exc: BaseException) -> str | None:
    try:
        code = getattr(exc, "code", None)
    except Exception:
        return None
    return _utf8(str.__str__(code)) if isinstance(code, str) else None


def _utf8(text: str) -> str:
    """`text` with lone surrogates (e.g. from os.fsdecode) spelled as \\udcxx, so it encodes."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


# --- encoding ---------------------------------------------------------------------------------

_ENCODER = json.JSONEncoder(
    ensure_ascii=False,
    check_circular=False,  # _build has already refused cycles
    allow_nan=False,
    sort_keys=True,
    separators=(",", ":"),
)


class _Invalid(Exception):
    """Raised inside _build; each container adds its path segment on the way out."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.segments: list[str] = []  # innermost first

    def message(self, root: str) -> str:
        return root + "".join(reversed(self.segments)) + ": " + self.reason


def encode(value: object, *, path: str = "value") -> Encoding:
    """Never raises for a bad value: an invalid one gives status "invalid" and a message that
    starts with the offending path under `path` (e.g. "params.items[3]: NaN is ...")."""
    t = type(value)
    if (
        value is None
        or t is bool
        or (t is int and -_INT_LIMIT < value < _INT_LIMIT)
        or (isinstance(value, str) and t is str and value.isascii())
    ):
        return Encoding("encoded", canonical=_ENCODER.encode(value))
    try:
        tree = _build(value, 0, set())
    except _Invalid as exc:
        return Encoding("invalid", message=exc.message(path))
    try:
        canonical = _ENCODER.encode(tree)
    except ValueError as exc:  # only if sys.set_int_max_str_digits was lowered below 4300
        return Encoding("invalid", message=f"{path}: {exc}")
    if not canonical.isascii():
        # A lone surrogate (e.g. from os.fsdecode) has no UTF-8 form, so it could not be stored.
        try:
            canonical.encode("utf-8")
        except UnicodeEncodeError:
            try:
                _find_surrogate(value)
            except _Invalid as exc:
                return Encoding("invalid", message=exc.message(path))
            return Encoding("invalid", message=f"{path}: a lone surrogate is not a durable value")
    return Encoding("encoded", canonical=canonical)


def dumps(value: object, *, path: str = "value") -> str:
    """The canonical text of `value`; raises InvalidArgument (INVALID_ARGUMENT) if it is not durable."""
    result = encode(value, path=path)
    if result.canonical is None:
        raise InvalidArgument("INVALID_ARGUMENT", result.message or f"{path}: not a durable value")
    return result.canonical


def is_durable(value: object) -> bool:
    """Whether `encode` would accept `value` (it costs as much as encoding it)."""
    return encode(value).status == "encoded"


def check_size(canonical: str, what: str) -> str:
    """`canonical` if it fits in MAX_VALUE_BYTES; else ValueTooLarge naming `what` and the
    limit. The size is the text's UTF-8 bytes with each quote and backslash counted twice:
    a step's value travels to the daemon as a JSON string, where they are escaped, so
    whatever passes here also fits in the daemon's request body limit."""
    if len(canonical) * 4 <= MAX_VALUE_BYTES:  # fits whatever its characters (cheap)
        return canonical
    size = len(canonical.encode("utf-8"))
    escaped = size + canonical.count('"') + canonical.count("\\")
    if escaped <= MAX_VALUE_BYTES:
        return canonical
    said = f"{size} bytes encoded" + (
        f" ({escaped} with its quotes escaped)" if size <= MAX_VALUE_BYTES else ""
    )
    raise ValueTooLarge(
        "INVALID_ARGUMENT",
        f"{what} is {said}, over the {MAX_VALUE_BYTES // (1024 * 1024)} MiB limit of a saved "
        "value; keep big data in a file and save its path",
    )


def _build(v: Any, depth: int, active: set[int]) -> Any:
    """`v` made ready for the JSON encoder: keys escaped, -0.0 as 0.0, subclasses made plain,
    errors tagged. Returns `v` itself where nothing needs to change. `depth` counts the
    containers around `v`; `active` holds the ids of those containers (for cycles)."""
    t = type(v)
    if t is str or v is None or t is bool:
        return v
    if t is int:
        return _int(v)
    if t is float:
        return _float(v)
    if t is dict:
        return _dict(v, depth, active)
    if t is list:
        return _list(v, depth, active)
    if isinstance(v, ErrorValue):
        return _error(v, depth, active)
    # Subclasses (enum.StrEnum, enum.IntEnum, OrderedDict, Counter, ...) are read through their
    # base type, so no overridden method runs, and encode as the plain value they hold.
    if isinstance(v, str):
        return str.__str__(v)
    if isinstance(v, int):  # bool cannot be subclassed, so this is never a bool
        return _int(int.__int__(v))
    if isinstance(v, float):
        return _float(float.__float__(v))
    if isinstance(v, dict):
        return _dict(v, depth, active)
    if isinstance(v, list):
        return _list(v, depth, active)
    raise _Invalid(_refusal(v))


def _int(v: int) -> int:
    if -_INT_LIMIT < v < _INT_LIMIT:
        return v
    raise _Invalid(f"an integer of more than {_INT_DIGITS} digits is not a durable value")


def _float(v: float) -> float:
    if v - v == 0.0:  # finite: inf - inf and nan - nan are nan
        if v == 0.0 and math.copysign(1.0, v) < 0.0:
            # -0.0 == 0.0, so they must encode alike (docs/design.md, "Wire formats"); it stays a float, as the
            # spec's "-0 as 0" does in a language with one number type.
            return 0.0
        return v
    if v != v:
        raise _Invalid("NaN is not a durable value")
    raise _Invalid(("Infinity" if v > 0 else "-Infinity") + " is not a durable value")


def _enter(v: object, depth: int, active: set[int]) -> int:
    key = id(v)
    if key in active:
        raise _Invalid("a reference cycle is not a durable value")
    if depth >= MAX_DEPTH:
        raise _Invalid(f"nesting deeper than {MAX_DEPTH} levels is not a durable value")
    active.add(key)
    return key


def _nested(x: Any, tx: type, depth: int, active: set[int]) -> Any:
    """A container's element that is not a plain leaf (the common leaves are checked inline)."""
    if tx is dict:
        return _dict(x, depth, active)
    if tx is list:
        return _list(x, depth, active)
    return _build(x, depth, active)


def _list(v: list[Any], depth: int, active: set[int]) -> list[Any]:
    key = _enter(v, depth, active)
    out: list[Any] | None = None if type(v) is list else []
    i = 0
    for x in list.__iter__(v):
        tx = type(x)
        if (
            tx is str
            or x is None
            or tx is bool
            or (tx is int and -_INT_LIMIT < x < _INT_LIMIT)
            or (tx is float and x - x == 0.0 and x != 0.0)
        ):
            y = x
        else:
            try:
                y = _nested(x, tx, depth + 1, active)
            except _Invalid as exc:
                exc.segments.append(f"[{i}]")
                raise
            if out is None and y is not x:
                out = v[:i]
        if out is not None:
            out.append(y)
        i += 1
    active.discard(key)
    return v if out is None else out


def _dict(v: dict[Any, Any], depth: int, active: set[int]) -> dict[str, Any]:
    key = _enter(v, depth, active)
    out: dict[str, Any] | None = None if type(v) is dict else {}
    n = 0
    for k0, x in dict.items(v):
        k = k0
        if type(k) is not str:
            if not isinstance(k, str):
                raise _Invalid(f"key {_show(k)} is not a string")
            k = str.__str__(k)
        ek = "$" + k if k[:1] == "$" else k
        tx = type(x)
        if (
            tx is str
            or x is None
            or tx is bool
            or (tx is int and -_INT_LIMIT < x < _INT_LIMIT)
            or (tx is float and x - x == 0.0 and x != 0.0)
        ):
            y = x
        else:
            try:
                y = _nested(x, tx, depth + 1, active)
            except _Invalid as exc:
                exc.segments.append(_key_segment(k))
                raise
        if out is None and (y is not x or ek is not k0):
            out = dict(islice(dict.items(v), n))  # the items before this one are unchanged
        if out is not None:
            out[ek] = y
        n += 1
    active.discard(key)
    return v if out is None else out


def _error(v: ErrorValue, depth: int, active: set[int]) -> dict[str, Any]:
    key = _enter(v, depth, active)
    payload: dict[str, Any] = {}
    for field in ("name", "message", "code"):
        x = getattr(v, field)
        if x is None and field == "code":
            continue
        if not isinstance(x, str):
            exc = _Invalid(f"an ErrorValue's {field} must be a str, not {_a(x)}")
            exc.segments.append("." + field)
            raise exc
        payload[field] = str.__str__(x)
    cause = v.cause
    if cause is not None:
        try:
            if not isinstance(cause, ErrorValue):
                raise _Invalid(
                    f"an ErrorValue's cause must be an ErrorValue or None, not {_a(cause)}"
                )
            payload["cause"] = _error(cause, depth + 1, active)
        except _Invalid as exc:
            exc.segments.append(".cause")
            raise
    active.discard(key)
    return {_ERROR_TAG: payload}


def _find_surrogate(v: Any) -> None:
    """Raises _Invalid at the first str holding a lone surrogate; `v` has passed _build."""
    if isinstance(v, str):
        _check_str(v, "a str")
    elif isinstance(v, dict):
        for k, x in dict.items(v):
            _check_str(k, f"key {_show(k)}")
            try:
                _find_surrogate(x)
            except _Invalid as exc:
                exc.segments.append(_key_segment(k))
                raise
    elif isinstance(v, list):
        for i, x in enumerate(list.__iter__(v)):
            try:
                _find_surrogate(x)
            except _Invalid as exc:
                exc.segments.append(f"[{i}]")
                raise
    elif isinstance(v, ErrorValue):
        for field in ("name", "message", "code", "cause"):
            try:
                _find_surrogate(getattr(v, field))
            except _Invalid as exc:
                exc.segments.append("." + field)
                raise


def _check_str(s: str, what: str) -> None:
    for c in s:
        if "\ud800" <= c <= "\udfff":
            raise _Invalid(f"{what} with a lone surrogate (U+{ord(c):04X}) is not a durable value")


def _key_segment(key: str) -> str:
    return "." + key if key.isidentifier() else "[" + json.dumps(key, ensure_ascii=False) + "]"


def _show(x: object) -> str:
    try:
        text = repr(x)
    except Exception:
        return _a(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _a(x: object) -> str:
    if type(x) is object:
        return "a bare object()"
    name = type(x).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    return f"{article} {name} object"


_HINTS = {
    "tuple": "a tuple is not a durable value (use a list)",
    "set": "a set is not a durable value",
    "frozenset": "a frozenset is not a durable value",
    "bytes": "a bytes object is not a durable value (decode it to a str)",
    "bytearray": "a bytearray object is not a durable value (decode it to a str)",
    "datetime": "a datetime object is not a durable value (use an ISO 8601 str)",
    "date": "a date object is not a durable value (use an ISO 8601 str)",
    "Decimal": "a Decimal object is not a durable value (use a str or a float)",
}


def _refusal(v: object) -> str:
    t = type(v)
    if t.__module__ in ("builtins", "datetime", "decimal") and t.__name__ in _HINTS:
        return _HINTS[t.__name__]
    if dataclasses.is_dataclass(v):
        return f"{_a(v)} is not a durable value (convert it with dataclasses.asdict)"
    return f"{_a(v)} is not a durable value"


# --- decoding ---------------------------------------------------------------------------------


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"malformed durable value: {name} is not a durable value")


def _finite_float(text: str) -> float:
    value = float(text)
    if value - value != 0.0:
        raise ValueError(f"malformed durable value: {text} is not a finite float")
    return value


def _unescape(d: dict[str, Any]) -> Any:
    for k in d:
        if k[:1] == "$":
            break
    else:
        return d
    if _ERROR_TAG in d:
        if len(d) != 1:
            raise ValueError('malformed durable value: "$error" has sibling keys')
        return _error_from(d[_ERROR_TAG])
    out: dict[str, Any] = {}
    for k, x in d.items():
        if k[:1] == "$":
            if k[:2] != "$$":
                raise ValueError(f"malformed durable value: unknown tag key {json.dumps(k)}")
            k = k[1:]
        out[k] = x
    return out


def _error_from(payload: Any) -> ErrorValue:
    if type(payload) is not dict or not payload.keys() <= _ERROR_FIELDS:
        raise ValueError('malformed durable value: "$error" must hold name, message, code, cause')
    name, message = payload.get("name"), payload.get("message")
    code, cause = payload.get("code"), payload.get("cause")
    if type(name) is not str or type(message) is not str:
        raise ValueError('malformed durable value: "$error" needs a str name and message')
    if "code" in payload and type(code) is not str:
        raise ValueError('malformed durable value: an "$error" code must be a str')
    if "cause" in payload and type(cause) is not ErrorValue:
        raise ValueError('malformed durable value: an "$error" cause must be an "$error"')
    return ErrorValue(name, message, code, cause)


# Duplicate keys are not checked (the last one wins, as in json.loads): encode never writes them,
# and checking would cost a hook call per object on every read.
_PLAIN = json.JSONDecoder(parse_float=_finite_float, parse_constant=_refuse_constant)
_TAGGED = json.JSONDecoder(
    parse_float=_finite_float, parse_constant=_refuse_constant, object_hook=_unescape
)


def decode(canonical: str) -> Any:
    """The value back from canonical text: plain Python values, ErrorValue for tagged errors.
    Raises ValueError on malformed text (not JSON, NaN/Infinity, a float that overflows, an
    unknown single-"$" key, a malformed "$error"). Key order, white space and duplicate keys are
    not checked."""
    if not isinstance(canonical, str):
        raise TypeError(f"decode takes a str, not {_a(canonical)}")
    # Text without "$" (written plainly or as \u0024) has no tags and no escaped keys.
    decoder = _PLAIN if "$" not in canonical and "\\u0024" not in canonical else _TAGGED
    try:
        return decoder.decode(canonical)
    except RecursionError:
        raise ValueError("malformed durable value: nested too deeply") from None


def plain(value: Any) -> Any:
    """A decoded durable value as plain JSON (tagged errors become their dict form)."""
    if isinstance(value, ErrorValue):
        return value.to_json()
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value
