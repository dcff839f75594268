"""`ys cron import`: a real crontab (comments, blank lines, environment lines, quoting, `%`,
ranges and steps, and lines ys must skip) becomes scheduled shell workflows that a real
daemon loads and runs with their environment and `%` stdin; MAILTO mails failures. A line
cron itself would refuse (seven fields, a bad minute, no command) makes it write nothing
(exit 2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cron.cron_support import DaemonHandle, make_home
from tests.support import wait_until

CRONTAB = """\
# m h  dom mon dow   command
SHELL=/bin/sh

GREETING = "hello   world"
HOME={out}
MAILTO=ops@example.com
*/15 9-17 * * 1-5 printf '\\%s|' "$GREETING" > greeting.txt
@daily cat > stdin.txt%first line%second line \\% kept
  0 3 * * 0   pwd > where.txt
30 2 1,15 * * echo failing; exit 3
@reboot /usr/bin/startup
0 0 0 * * * /six/fields
5 4 * * sun echo taken > taken.txt
FOO-BAR=1
"""

SKIPPED = {  # lines cron takes and ys cannot: the others are imported, exit 1
    11: "@reboot",
    12: "6 fields",
    13: "a name taken: cron-13-echo-taken.py",
    14: "'FOO-BAR' is not a name a shell can export",
}

REFUSED = {  # lines cron itself refuses, after the lines above: nothing is imported, exit 2
    15: ("0 0 0 1 1 * 2030 /seven/fields", "line 15: 7 fields: a crontab line has five"),
    16: ("61 * * * * /bad/minute", "line 16: bad cron expression '61 * * * *': Bad minute"),
    17: ("@weekly", "line 17: no command"),
    18: ("* * * *", "line 18: not a cron entry (4 fields and no command)"),
}


@pytest.fixture
def box(tmp_path: Path):
    """A daemon whose PATH has a sendmail that keeps what it is given in out/mail.txt."""
    out = tmp_path / "out"
    fakebin = tmp_path / "bin"
    for d in (out, fakebin):
        d.mkdir()
    sendmail = fakebin / "sendmail"
    sendmail.write_text(f'#!/bin/sh\necho "$@" > {out}/mail-args.txt\ncat > {out}/mail.txt\n')
    sendmail.chmod(0o755)
    h = make_home(tmp_path, PATH=f"{fakebin}{os.pathsep}{os.environ['PATH']}")
    h.write(
        "cron-13-echo-taken.py", "import ys\n\n@ys.workflow\ndef main(step, params):\n    pass\n"
    )
    try:
        yield h.start(), out
    finally:
        h.stop()


def _crontab(tmp_path: Path, out: Path) -> Path:
    path = tmp_path / "crontab"
    path.write_text(CRONTAB.format(out=out))
    return path


def _workflows(h: DaemonHandle) -> dict[str, dict]:
    listing = json.loads(h.ys("workflows", "--json").stdout)["workflows"]
    return {w["name"]: w for w in listing}


def _finished(h: DaemonHandle, name: str) -> dict:
    with h.client() as c:
        execution_id = c.trigger(name)["execution_id"]
        return c.wait(execution_id, timeout=60)


def test_a_crontab_becomes_workflows_that_load_and_run(box, tmp_path):
    h, out = box
    crontab = _crontab(tmp_path, out)
    before = sorted(os.listdir(h.workflows))
    dry = h.ys("cron", "import", str(crontab), "--dry-run", "--json")
    assert dry.returncode == 1, dry.stderr
    assert sorted(os.listdir(h.workflows)) == before  # a dry run writes nothing

    result = h.ys("cron", "import", str(crontab), "--json")
    assert result.returncode == 1, result.stderr  # some lines were skipped
    report = json.loads(result.stdout)
    assert report["dry_run"] is False and json.loads(dry.stdout)["dry_run"] is True
    assert json.loads(dry.stdout)["entries"] == report["entries"]
    by_line = {e["line"]: e for e in report["entries"]}
    assert sorted(by_line) == [7, 8, 9, 10, *SKIPPED]
    for line, why in SKIPPED.items():
        assert why in by_line[line]["skipped"], by_line[line]
    names = {line: by_line[line]["workflow"] for line in (7, 8, 9, 10)}
    assert names == {
        7: "cron-7-printf-s-greeting",
        8: "cron-8-cat-stdin-txt",
        9: "cron-9-pwd-where-txt",
        10: "cron-10-echo-failing-exit",
    }
    assert by_line[7]["schedule"] == "*/15 9-17 * * 1-5" and by_line[8]["schedule"] == "@daily"
    assert report["mail_handler"] == str(h.workflows / "cron-mail.sh")

    # loaded by the daemon with their schedules, no error
    def loaded() -> bool:
        listed = _workflows(h)
        return all(n in listed for n in [*names.values(), "cron-mail"])

    wait_until(loaded, message="the imported workflows listed")
    listed = _workflows(h)
    for line, name in names.items():
        assert listed[name]["error"] is None, listed[name]
        assert listed[name]["schedule"]["schedule"] == by_line[line]["schedule"]
        assert listed[name]["on_failure"] == "cron-mail"
    assert listed["cron-mail"]["error"] is None
    schedules = json.loads(h.ys("schedule", "list", "--json").stdout)["schedules"]
    assert {s["name"]: s["cron"] for s in schedules}[names[9]] == "0 3 * * 0"

    # run by name: their environment lines, HOME as the working folder, `%` as stdin
    for line in (7, 8, 9):
        assert _finished(h, names[line])["status"] == "completed"
    assert (out / "greeting.txt").read_text() == "hello   world|"
    assert (out / "stdin.txt").read_text() == "first line\nsecond line % kept"
    assert (out / "where.txt").read_text() == f"{out}\n"

    # a failure is mailed to MAILTO by cron-mail
    failed = _finished(h, names[10])
    assert failed["status"] == "failed"
    with h.client() as c:
        handler = c.wait(f"{failed['execution_id']}.on-failure", timeout=60)
    assert handler["status"] == "completed", h.ys("logs", handler["execution_id"]).stdout
    mail = (out / "mail.txt").read_text()
    assert "To: ops@example.com\n" in mail
    assert f"Subject: ys: {names[10]} failed ({failed['execution_id']})" in mail
    assert (out / "mail-args.txt").read_text() == "-t\n"


def test_import_never_overwrites_and_says_which_names_are_taken(box, tmp_path):
    h, out = box
    crontab = _crontab(tmp_path, out)
    assert h.ys("cron", "import", str(crontab)).returncode == 1
    written = {p.name: p.read_bytes() for p in h.workflows.iterdir()}
    again = h.ys("cron", "import", str(crontab))
    assert again.returncode == 1
    for line, name in ((7, "cron-7-printf-s-greeting"), (10, "cron-10-echo-failing-exit")):
        assert f"line {line}: skipped: a name taken: {name}.sh is in the workflows folder" in (
            again.stdout
        )
    assert {p.name: p.read_bytes() for p in h.workflows.iterdir()} == written
    assert "cron-mail.sh is there already and is kept" not in again.stderr  # no entry written


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_crontab_with_lines_cron_refuses_exits_2_and_writes_nothing(box, tmp_path, dry_run):
    h, out = box
    crontab = _crontab(tmp_path, out)
    with crontab.open("a") as f:
        f.writelines(f"{line}\n" for line, _ in REFUSED.values())
    before = {p.name: p.read_bytes() for p in h.workflows.iterdir()}
    result = h.ys("cron", "import", str(crontab), *(["--dry-run"] if dry_run else []))
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"INVALID_ARGUMENT: {crontab} is not a crontab cron would take (")
    for _, says in REFUSED.values():
        assert says in line
    assert "nothing was written: fix or comment out those lines" in line
    for skipped in SKIPPED:  # what cron takes is not named as refused
        assert f"line {skipped}:" not in line
    assert {p.name: p.read_bytes() for p in h.workflows.iterdir()} == before


def test_a_crontab_from_stdin_with_nothing_to_skip_exits_0(box):
    h, out = box
    result = h.ys("cron", "import", "-", input=f"# nightly\n@hourly date > {out}/date.txt\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "line 2: cron-2-date-date-txt (@hourly)\n"
    script = (h.workflows / "cron-2-date-date-txt.sh").read_text()
    assert "on_failure" not in script  # no MAILTO: no failure mail


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: p / "missing", "cannot read"),
        (lambda p: (p / "latin1").write_bytes(b"@daily echo caf\xe9\n") and p / "latin1", "UTF-8"),
    ],
)
def test_import_of_a_file_it_cannot_read_exits_2_and_writes_nothing(box, tmp_path, make, says):
    h, _ = box
    before = sorted(os.listdir(h.workflows))
    result = h.ys("cron", "import", str(make(tmp_path)))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("INVALID_ARGUMENT: ") and says in result.stderr
    assert sorted(os.listdir(h.workflows)) == before
