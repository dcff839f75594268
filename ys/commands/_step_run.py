"""`ys step run KEY [--timeout DUR] [--retry N] [--retry-interval DUR] -- CMD`: run a command
once in a shell workflow and record its exit status and stdout; on replay print the recorded
stdout, byte for byte, and exit with the recorded status without running it.

The record of a run step is `{"status": N, "stdout": text}`, or `{"status": N, "stdout_base64":
...}` when the output is not UTF-8 text (or would take more room as JSON text than as base64).
Output past OUTPUT_LIMIT bytes reaches the script in full on the first run, but only its first
and last halves of the limit are recorded, with `stdout_bytes` (its whole length) and
`stdout_sha256`: a replay prints those and says on stderr what was left out. A command that
exits non-zero is a failed step (its record also holds `error`: ExitStatus): it replays its
status and output, `ys retry` runs it again, and `--retry` retries it durably as
`step.run(retry=...)` does (docs/design.md, "Workflow options"). Standard library plus the SDK only.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ys.commands._output import emit_json, fail

if TYPE_CHECKING:
    from ys.sdk import Retry, Step

OUTPUT_LIMIT = 1024 * 1024  # recorded output at most (its head and tail halves past it)
_HALF = OUTPUT_LIMIT // 2
_TEXT_ROOM = OUTPUT_LIMIT * 3 // 2  # recorded output as JSON text at most
EXIT_TIMEOUT = 124  # a step past its --timeout, as timeout(1) exits
EXIT_CANNOT_RUN = 126  # the command is there but cannot be run (the shell's convention)
EXIT_NOT_FOUND = 127
OPTIONS = ("--timeout", "--retry", "--retry-interval")  # allowed right after KEY too
USAGE = "ys step run [--json] KEY [--timeout DUR] [--retry N] [--retry-interval DUR] -- CMD..."


@dataclass
class RunOptions:
    timeout: str | None = None
    retry: str | None = None
    retry_interval: str | None = None
    command: list[str] = field(default_factory=list)


def split_options(rest: list[str], before: RunOptions) -> RunOptions:
    """The options right after KEY (only those of OPTIONS), then `--`, then the command.

    Any other option there is a usage error, before anything runs or is recorded: it would
    otherwise be run as the command."""
    opts = RunOptions(before.timeout, before.retry, before.retry_interval)
    i = 0
    while i < len(rest) and rest[i].startswith("-") and rest[i] != "--":
        name, _, inline = rest[i].partition("=")
        if name not in OPTIONS:
            fail(
                "INVALID_ARGUMENT",
                f"ys step run: option {rest[i]!r} after the step key",
                hint=f"options go before KEY (only {', '.join(OPTIONS)} may follow it) and the "
                f"command after --: {USAGE}",
            )
        if inline or "=" in rest[i]:
            value, i = inline, i + 1
        elif i + 1 < len(rest):
            value, i = rest[i + 1], i + 2
        else:
            fail("INVALID_ARGUMENT", f"ys step run: {name} needs a value", hint=USAGE)
        attr = name[2:].replace("-", "_")
        if getattr(opts, attr) is not None:
            fail("INVALID_ARGUMENT", f"ys step run: {name} is given twice", hint=USAGE)
        setattr(opts, attr, value)
    if rest[i : i + 1] == ["--"]:
        i += 1
    opts.command = rest[i:]
    if not opts.command:
        fail("INVALID_ARGUMENT", "ys step run needs a command after the key", hint=USAGE)
    return opts


def policy(opts: RunOptions) -> tuple[float | None, Retry | None]:
    """The attempt's limit and the retry policy (--retry N: at most N more attempts, each
    --retry-interval after the last failure, 1 s by default)."""
    from ys.durations import parse_duration
    from ys.sdk import Retry

    limit = None
    if opts.timeout is not None:
        limit = parse_duration(opts.timeout, "--timeout")
        if limit <= 0:
            fail("INVALID_ARGUMENT", "--timeout must be more than 0", hint="for example 10m")
    if opts.retry is None:
        if opts.retry_interval is not None:
            fail("INVALID_ARGUMENT", "--retry-interval needs --retry N", hint=USAGE)
        return limit, None
    if not opts.retry.isdigit() or not 1 <= int(opts.retry) <= 1000:
        fail(
            "INVALID_ARGUMENT",
            f"--retry must be a whole number of retries from 1 to 1000, not {opts.retry!r}",
            hint="for example --retry 3",
        )
    interval = 1.0
    if opts.retry_interval is not None:
        interval = parse_duration(opts.retry_interval, "--retry-interval")
    return limit, Retry(max_attempts=int(opts.retry) + 1, interval=interval, backoff=1.0)


# -- running the command ---------------------------------------------------------------------


@dataclass
class Output:
    """What a command printed: all of it up to OUTPUT_LIMIT, else its head and tail, with its
    whole length and digest."""

    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0
    sha: Any = field(default_factory=hashlib.sha256)

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.sha.update(chunk)
        room = OUTPUT_LIMIT - len(self.head)
        if room > 0:
            self.head += chunk[:room]
        self.tail += chunk[-_HALF:]
        if len(self.tail) > 2 * _HALF:
            del self.tail[:-_HALF]

    def value(self, status: int) -> dict[str, Any]:
        if self.total <= OUTPUT_LIMIT:
            return encode_output(status, bytes(self.head))
        cut = _boundary(self.head, _HALF, -1)
        tail = bytes(self.tail[-_HALF:])
        start = _boundary(tail, 0, 1)
        out = encode_output(status, bytes(self.head[:cut]) + tail[start:])
        out["stdout_bytes"] = self.total
        out["stdout_sha256"] = self.sha.hexdigest()
        return out


def _boundary(data: bytes | bytearray, at: int, step: int) -> int:
    """`at` moved (at most 3 bytes) off a UTF-8 continuation byte, so text stays text."""
    for _ in range(3):
        if 0 <= at < len(data) and 0x80 <= data[at] < 0xC0:
            at += step
    return at


def encode_output(status: int, data: bytes) -> dict[str, Any]:
    """The record of an output: as text when it is UTF-8 and fits in _TEXT_ROOM as JSON text
    (a control character takes six bytes there), else as base64 (at most 4/3 of
    OUTPUT_LIMIT): either way the record fits in a saved value (codec.MAX_VALUE_BYTES)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        quoted = json.dumps(text, ensure_ascii=False)
        # counted as codec.check_size counts: quotes and backslashes twice
        size = len(quoted.encode("utf-8")) + quoted.count('"') + quoted.count("\\")
        if size <= _TEXT_ROOM:
            return {"status": status, "stdout": text}
    return {"status": status, "stdout_base64": base64.b64encode(data).decode("ascii")}


def recorded_bytes(value: dict[str, Any]) -> bytes:
    if "stdout_base64" in value:
        return base64.b64decode(value["stdout_base64"])
    return str(value.get("stdout", "")).encode("utf-8")


class _Stdout:
    """Our stdout, written as the command prints; a reader that went away stops the copy,
    not the command (the command's record is still made)."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self.open = True

    def write(self, chunk: bytes) -> None:
        view = memoryview(chunk)
        while self.open and view:
            try:
                view = view[os.write(1, view) :]
            except BrokenPipeError:
                self.open = False


def execute(argv: list[str], stream: bool) -> tuple[int, Output]:
    """Run the command; its stderr goes to the log as it comes, its stdout to ours (when
    `stream`) and into the Output. Not found exits 127, not runnable 126, as in a shell."""
    out = Output()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
    except OSError as exc:
        sys.stderr.write(f"ys step run: {argv[0]}: {exc.strerror or exc}\n")
        return (EXIT_NOT_FOUND if exc.errno == errno.ENOENT else EXIT_CANNOT_RUN), out
    assert proc.stdout is not None
    sink = _Stdout() if stream else None
    fd = proc.stdout.fileno()
    while chunk := os.read(fd, 1 << 16):
        out.add(chunk)
        if sink is not None:
            sink.write(chunk)
    proc.stdout.close()
    code = proc.wait()
    return (128 - code if code < 0 else code), out


# -- the step --------------------------------------------------------------------------------


@dataclass
class Ran:
    value: dict[str, Any]
    replayed: bool  # printed from the record (else the command ran and printed as it went)


def take(
    step: Step,
    key: str,
    command: list[str],
    limit: float | None,
    retry: Retry | None,
    stream: bool,
) -> Ran:
    """The step's protocol, as Step.run's, with a shell command's exit status for success:
    replay a finished step; else run one attempt and record it completed, failed, or (with
    --retry) waiting for the next attempt, which suspends the script."""
    from ys import codec
    from ys._steps.times import checked_wake

    saved = step._begin(key)
    attempts = 0
    if saved is not None:
        if saved.kind != "run":
            fail(
                "INVALID_ARGUMENT",
                f"step {key!r} was recorded by another kind of step",
                hint="give each step its own key",
            )
        if saved.status in ("completed", "failed"):
            return Ran(_replayed(key, saved.value), True)
        attempts = saved.attempts  # a retry is waiting
        if saved.wake_at is not None and step._backend.now() < saved.wake_at:
            step._suspend(key, "run", saved.value, attempts, saved.wake_at)
    attempts += 1
    if limit is not None:
        step._announce(key, limit, attempts, retry)
    from ys.tracing import step_context

    with step_context(key, attempts):  # TRACEPARENT names this attempt's span (tracing on)
        status, output = execute(command, stream)
    value = output.value(status)
    if status == 0:
        step._save(key, "run", "completed", codec.dumps(value), attempts)
        return Ran(value, False)
    error = codec.ErrorValue("ExitStatus", f"exit status {status}", "EXIT_STATUS")
    text = codec.dumps(value | {"error": error})
    if retry is not None and attempts < retry.max_attempts:
        delay = retry.delay(attempts)
        wake = checked_wake(f"step {key!r}: the retry interval", step._backend.now(), delay)
        sys.stderr.write(
            f"ys step run: step {key!r} attempt {attempts} of {retry.max_attempts} exited "
            f"{status}; the next one runs in {delay:g} s\n"
        )
        step._suspend(key, "run", text, attempts, wake)
    step._save(key, "run", "failed", text, attempts)
    return Ran(value, False)


def _replayed(key: str, text: str | None) -> dict[str, Any]:
    """A finished step's record as an output value; the daemon's record of an attempt killed
    for its timeout (a StepTimeout error) exits 124, as timeout(1) does."""
    from ys import codec

    saved = codec.decode(text) if text is not None else None
    if isinstance(saved, codec.ErrorValue):
        sys.stderr.write(f"ys step run: {saved.message}\n")
        return {"status": EXIT_TIMEOUT if saved.name == "StepTimeout" else 1, "stdout": ""}
    if not isinstance(saved, dict) or not isinstance(saved.get("status"), int):
        fail(
            "INVALID_ARGUMENT",
            f"step {key!r} was recorded by another kind of step",
            hint="give each step its own key",
        )
    return saved


def show(key: str, ran: Ran, json_: bool) -> int:
    """Print what the script gets (unless the command printed it as it ran); say on stderr
    when the record keeps only part of the output. Exits with the command's own status."""
    value = ran.value
    if json_:
        emit_json({k: v for k, v in value.items() if k != "error"})
    elif ran.replayed:
        sys.stdout.flush()
        _Stdout().write(recorded_bytes(value))
    total = value.get("stdout_bytes")
    if isinstance(total, int):
        kept = len(recorded_bytes(value))
        said = "this replay prints only those" if ran.replayed else "a replay prints only those"
        sys.stderr.write(
            f"ys step run: step {key!r} printed {total} bytes (sha256 "
            f"{value.get('stdout_sha256')}), over the {OUTPUT_LIMIT // 1024} KiB a step records: "
            f"its record keeps its first and last {kept // 2048} KiB and {said}; "
            "write large output to a file inside the command\n"
        )
    return int(value["status"])
