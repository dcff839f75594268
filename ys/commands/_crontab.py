"""`ys cron import`'s reading of a crontab, as Debian's cron reads a user's (cron(5)), and the
shell workflow it writes for each entry. Pure: no files, no daemon (ys.commands.cron does
those).

What is read: blank lines and `#` comments (skipped, not entries); `NAME = value` lines (the
value's matching outer quotes removed), each in effect for the entries below it, as cron
gives each job the environment as of its line; entries of five fields or an `@hourly`-style
word, then the command, whose first unescaped `%` ends it and starts its stdin (every further
`%` a newline, `\\%` a plain `%`). cronsim checks each expression (ys.cron.validate): no cron
parser here beyond splitting lines and fields.

A line cron itself would refuse (a field out of range, seven fields, an entry with no command)
is `refused`: the import writes nothing, as `crontab` installs nothing from a file with errors.
A line cron takes and ys cannot (@reboot, six fields, a name no shell exports) is `skipped`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

MAIL_HANDLER = "cron-mail"
_ENV = re.compile(r"^\s*([^\s=#@*][^=]*?)\s*=\s*(.*?)\s*$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CRON_FIELD = re.compile(r"^[0-9*?,/LW#-]+$")  # what a sixth (seconds/year) field looks like


@dataclass(frozen=True)
class Entry:
    line: int
    text: str  # the crontab line as written
    schedule: str  # as written: five fields or an @word
    command: str
    stdin: str | None  # after the first `%`, newlines for `%`; None: no `%`
    env: tuple[tuple[str, str], ...]  # NAME=value lines in effect, in order

    @property
    def mailto(self) -> str | None:
        value = dict(self.env).get("MAILTO")
        return value or None  # MAILTO="" turns mail off, as in cron

    @property
    def workflow(self) -> str:
        return f"cron-{self.line}-{slug(self.command)}".rstrip("-")


@dataclass(frozen=True)
class Skipped:
    line: int
    text: str
    reason: str


@dataclass
class Crontab:
    entries: list[Entry] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)  # lines cron takes and ys cannot
    refused: list[Skipped] = field(default_factory=list)  # lines cron itself would refuse


def slug(command: str) -> str:
    """A few words of the command for a workflow name (of a path, its last part)."""
    words = [w.rstrip("/").rsplit("/", 1)[-1] for w in command.split()]
    text = re.sub(r"[^a-z0-9]+", "-", " ".join(words[:3]).lower()).strip("-")
    return text[:40].rstrip("-")


def _env_value(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    return raw


def _split_percent(text: str) -> tuple[str, str | None]:
    """The command and its stdin (None without an unescaped `%`), as cron(5) says."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and text[i + 1 : i + 2] == "%":
            out.append("%")
            i += 2
            continue
        if ch == "%":
            return "".join(out), _stdin(text[i + 1 :])
        out.append(ch)
        i += 1
    return "".join(out), None


def _stdin(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1 : i + 2] == "%":
            out.append("%")
            i += 2
            continue
        out.append("\n" if text[i] == "%" else text[i])
        i += 1
    return "".join(out)


class _Refused(str):
    """Why a line is no cron entry at all (as `crontab` would refuse it), not only one ys
    cannot take."""


def _schedule(text: str) -> tuple[str, str] | str:
    """(schedule, rest) of an entry line, or why it is not one ys can take (a `_Refused`:
    not one cron would take either)."""
    from ys.cron import validate

    if text.startswith("@"):
        word, rest = (text.split(None, 1) + [""])[:2]
        if word.lower() == "@reboot":
            return "@reboot: ys schedules fire at clock times; call `ys trigger` from a boot script"
        try:
            validate(word)
        except ValueError as exc:
            return _Refused(str(exc))
        return word, rest
    parts = text.split(None, 5)
    if len(parts) < 6:
        return _Refused(f"not a cron entry ({len(parts)} fields and no command)")
    rest = parts[5]
    extra = rest.split(None, 2)
    if extra and _CRON_FIELD.match(extra[0]) and any(c.isdigit() or c == "*" for c in extra[0]):
        if len(extra) > 1 and _CRON_FIELD.match(extra[1]):  # seconds and year: no crontab's
            return _Refused("7 fields: a crontab line has five (minute hour day month weekday)")
        return "6 fields: ys takes five (minute hour day month weekday), no seconds or year"
    expr = " ".join(parts[:5])
    try:
        validate(expr)
    except ValueError as exc:
        return _Refused(str(exc))
    return expr, rest


def parse(text: str) -> Crontab:
    out = Crontab()
    env: list[tuple[str, str]] = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _ENV.match(line)
        if m and not line[0].isdigit():
            name, value = m.group(1), _env_value(m.group(2))
            if not _NAME.match(name):
                out.skipped.append(Skipped(n, raw, f"{name!r} is not a name a shell can export"))
                continue
            env = [(k, v) for k, v in env if k != name] + [(name, value)]
            continue
        found = _schedule(line)
        if isinstance(found, str):
            (out.refused if isinstance(found, _Refused) else out.skipped).append(
                Skipped(n, raw, found)
            )
            continue
        expr, rest = found
        command, stdin = _split_percent(rest)
        if not command.strip():
            out.refused.append(Skipped(n, raw, "no command"))
            continue
        out.entries.append(Entry(n, raw, expr, command.strip(), stdin, tuple(env)))
    return out


def script(entry: Entry, source: str) -> str:
    """The shell workflow for one entry: its schedule in the `# ys:` header, the environment
    lines exported, the command as one `ys step run` step (run by $SHELL, /bin/sh unless the
    crontab sets it, in $HOME, as cron runs it), its `%` text on stdin."""
    env = dict(entry.env)
    header = f"# ys: schedule={shlex.quote(entry.schedule)}"
    if entry.mailto:
        header += f" on_failure={MAIL_HANDLER}"
    shell = env.get("SHELL", "/bin/sh")
    stdin = f"printf '%s' {shlex.quote(entry.stdin)} | " if entry.stdin is not None else ""
    tail = "" if entry.stdin is not None else " </dev/null"
    lines = [
        "#!/bin/sh",
        header,
        f"# Imported by `ys cron import` from line {entry.line} of {source}:",
        f"#   {' '.join(entry.text.split())}",
        "set -e",
        "ys=$(command -v ys)  # found before the crontab's own PATH is exported",
        *(f"export {k}={shlex.quote(v)}" for k, v in entry.env),
        'cd "${HOME:-/}"',
        f'{stdin}"$ys" step run cron -- {shlex.quote(shell)} -c {shlex.quote(entry.command)}{tail}',
    ]
    return "\n".join(lines) + "\n"


MAIL_SCRIPT = """\
#!/bin/sh
# Written by `ys cron import`: the failure handler (on_failure=cron-mail) of the workflows it
# imported from a crontab with MAILTO. It mails the failure to the failed workflow's MAILTO
# (its `export MAILTO=` line) with `sendmail -t`, or prints the mail to this log when there
# is no sendmail.
set -e
workflow=$(ys step params workflow)
execution=$(ys step params execution_id)
error=$(ys step params error)
to=
# the workflows folder: YS_WORKFLOW_FILE names this script there ($0 may be a kept copy)
script="$(dirname "${YS_WORKFLOW_FILE:-$0}")/$workflow.sh"
if [ -f "$script" ]; then
    line=$(sed -n 's/^export MAILTO=//p' "$script" | head -n 1)
    if [ -n "$line" ]; then eval "to=$line"; fi
fi
if [ -z "$to" ]; then
    echo "$execution ($workflow) failed: $error; no MAILTO to mail it to"
    exit 0
fi
mail=$(printf 'To: %s\\nSubject: ys: %s failed (%s)\\n\\n%s failed.\\n\\nerror: %s\\n\\nys logs %s\\n' \\
    "$to" "$workflow" "$execution" "$execution" "$error" "$execution")
sendmail=
for candidate in sendmail /usr/sbin/sendmail /usr/lib/sendmail; do
    if command -v "$candidate" >/dev/null 2>&1; then sendmail=$candidate; break; fi
done
if [ -n "$sendmail" ]; then
    printf '%s\\n' "$mail" | ys step run mail -- "$sendmail" -t
    echo "mailed $to: $execution ($workflow) failed"
else
    echo "no sendmail here; the mail to $to:"
    printf '%s\\n' "$mail"
fi
"""
