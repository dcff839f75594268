"""`ys step run` in shell workflows run by a real daemon: output byte for byte, output over the
recorded limit, failed commands as failed steps (replayed, retried by `ys retry`), durable
retries, one key per step, options after KEY refused, and the shell's exit statuses."""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import tarfile
from pathlib import Path

from cron_support import shell, wait_status

BINARY = bytes(range(256)) * 3 + b"\xff\xfe\x00\xc3"  # not UTF-8: every byte value, and more


def trigger(daemon, workflow: str, **params) -> str:
    with daemon.client() as c:
        return c.trigger(workflow, params)["execution_id"]


def steps_of(daemon, execution_id: str) -> dict:
    with daemon.client() as c:
        return {s["key"]: s for s in c.describe(execution_id)["steps"]}


def test_binary_output_passes_byte_for_byte_on_the_first_run_and_on_replay(shared, tmp_path):
    source = tmp_path / "blob"
    source.write_bytes(BINARY)
    first, again = tmp_path / "first.bin", tmp_path / "again.bin"
    shell(
        shared,
        "binary",
        f"""
        if [ -e {first} ]; then out={again}; else out={first}; fi
        ys step run blob -- cat {source} > "$out"
        ys step run tgz -- sh -c 'tar -cf - -C {tmp_path} blob | gzip -c' > "$out.tgz"
        ys step sleep nap 0.2
    """,
    )
    record = wait_status(shared, trigger(shared, "binary"), "completed", "failed")
    assert record["status"] == "completed", record
    assert first.read_bytes() == BINARY
    assert again.read_bytes() == BINARY  # the replay writes the same bytes
    assert (tmp_path / "again.bin.tgz").read_bytes() == (tmp_path / "first.bin.tgz").read_bytes()
    archive = gzip.decompress((tmp_path / "again.bin.tgz").read_bytes())
    with tarfile.open(fileobj=io.BytesIO(archive)) as t:
        member = t.extractfile("blob")
        assert member is not None and member.read() == BINARY


def test_output_over_the_limit_is_cut_in_the_record_not_failed(shared, tmp_path):
    size = 3 * 1024 * 1024
    first, again = tmp_path / "first.out", tmp_path / "again.out"
    err = tmp_path / "err"
    shell(
        shared,
        "big-output",
        f"""
        if [ -e {first} ]; then out={again}; else out={first}; fi
        ys step run big -- sh -c 'head -c {size} /dev/zero | tr "\\0" "a"; echo; exit 5' > "$out" 2>> {err} || echo "status $?" >> {err}
        ys step sleep nap 0.2
    """,
    )
    execution_id = trigger(shared, "big-output")
    record = wait_status(shared, execution_id, "completed", "failed")
    assert record["status"] == "completed", record
    whole = b"a" * size + b"\n"
    assert first.read_bytes() == whole  # the first run prints all of it
    kept = again.read_bytes()  # the replay prints what the record kept: its head and tail
    assert kept == whole[: len(kept) // 2] + whole[-(len(kept) - len(kept) // 2) :]
    assert 0 < len(kept) <= 1024 * 1024
    said = err.read_text()
    assert said.count("status 5") == 2, said  # the command's own status, both times
    assert str(size + 1) in said and hashlib.sha256(whole).hexdigest() in said
    value = steps_of(shared, execution_id)["big"]["value"]
    assert value["status"] == 5 and value["stdout_bytes"] == size + 1
    assert value["stdout_sha256"] == hashlib.sha256(whole).hexdigest()


def test_a_failed_command_is_a_failed_step_replayed_and_rerun_by_ys_retry(shared, tmp_path):
    count, ok = tmp_path / "count", tmp_path / "ok"
    seen = tmp_path / "seen"
    shell(
        shared,
        "flaky-once",
        f"""
        s=0
        out=$(ys step run check -- sh -c 'echo run >> {count}; echo "partial"; test -e {ok}') || s=$?
        echo "$s $out" >> {seen}
        ys step sleep nap 0.2
        exit $s
    """,
    )
    execution_id = trigger(shared, "flaky-once")
    record = wait_status(shared, execution_id, "completed", "failed")
    assert record["status"] == "failed" and record["attempts"] == 2
    assert count.read_text() == "run\n"  # replayed in the second delivery, not run again
    assert seen.read_text() == "1 partial\n1 partial\n"
    check = steps_of(shared, execution_id)["check"]
    assert check["status"] == "failed"
    assert check["value"]["status"] == 1 and check["value"]["stdout"] == "partial\n"
    ok.touch()
    retried = shared.ys("retry", execution_id, "--json")
    assert retried.returncode == 0, retried.stderr
    record = wait_status(shared, f"{execution_id}.r1", "completed", "failed")
    assert record["status"] == "completed", record
    assert count.read_text() == "run\nrun\n"  # the retry ran the failed step again
    assert steps_of(shared, f"{execution_id}.r1")["check"]["value"]["status"] == 0


def test_a_step_key_used_twice_fails_the_execution_as_in_python(shared, tmp_path):
    out = tmp_path / "out"
    shell(
        shared,
        "twice-a",
        f"""
        ys step run a -- echo a >> {out}
        ys step run a -- echo b >> {out} || true
        echo "went on" >> {out}
    """,
    )
    execution_id = trigger(shared, "twice-a")
    record = wait_status(shared, execution_id, "completed", "failed")
    assert record["status"] == "failed", record
    assert record["outcome"]["error"]["code"] == "DUPLICATE_STEP_KEY"
    assert out.read_text() == "a\n"  # neither ran nor replayed, and the script ended


def test_retry_reruns_a_failing_command_durably_until_it_succeeds(shared, tmp_path):
    count = tmp_path / "count"
    shell(
        shared,
        "retrying",
        f"""
        ys step run flaky --retry 3 --retry-interval 0.2 -- sh -c 'echo x >> {count}; echo "try $(wc -l < {count})"; test $(wc -l < {count}) -ge 3'
    """,
    )
    shell(
        shared,
        "giving-up",
        """
        ys step run never --retry 1 --retry-interval 0.1 -- sh -c 'echo nope >&2; exit 4'
    """,
    )
    execution_id = trigger(shared, "retrying")
    hopeless = trigger(shared, "giving-up")
    record = wait_status(shared, execution_id, "completed", "failed")
    assert record["status"] == "completed", record
    assert count.read_text() == "x\nx\nx\n"
    flaky = steps_of(shared, execution_id)["flaky"]
    assert (flaky["status"], flaky["attempts"]) == ("completed", 3)
    assert flaky["value"] == {"stdout": "try 3\n", "status": 0}
    assert [a["attempt"] for a in flaky["failed_attempts"]] == [1, 2]
    record = wait_status(shared, hopeless, "completed", "failed")
    assert record["outcome"]["error"]["message"].startswith("exit status 4")
    never = steps_of(shared, hopeless)["never"]
    assert (never["status"], never["attempts"]) == ("failed", 2)


def test_options_after_the_key_are_a_usage_error_and_nothing_is_recorded(shared, tmp_path):
    err = tmp_path / "err"
    shell(
        shared,
        "late-option",
        f"""
        s=0; ys step run big --json -- echo hi 2> {err} || s=$?
        t=0; YS_NO_FAST_PATH=1 ys step run big --json -- echo hi 2>> {err} || t=$?
        echo "$s $t"
    """,
    )
    execution_id = trigger(shared, "late-option")
    record = wait_status(shared, execution_id, "completed", "failed")
    assert record["outcome"]["result"]["last_line"] == "2 2"
    first, second = err.read_text().splitlines()
    assert first == second and first.startswith("INVALID_ARGUMENT:") and "--json" in first
    assert steps_of(shared, execution_id) == {}


def test_a_command_not_executable_exits_126_and_one_not_found_127(shared, tmp_path):
    plain = tmp_path / "plain.sh"
    plain.write_text("echo hi\n")
    plain.chmod(0o644)
    shell(
        shared,
        "not-exec",
        f"""
        a=0; ys step run a -- {plain} || a=$?
        b=0; ys step run b -- {tmp_path}/missing || b=$?
        echo "$a $b"
    """,
    )
    execution_id = trigger(shared, "not-exec")
    record = wait_status(shared, execution_id, "completed", "failed")
    assert record["outcome"]["result"]["last_line"] == "126 127"


def test_the_readme_and_the_man_page_say_what_a_failed_step_returns():
    """docs/design.md, "Workflow options": the README's shell example uses set -e and says what a failed or
    timed-out step returns; `ys step run --help` (its man page) says the exit statuses."""
    repo = Path(__file__).resolve().parents[2]
    readme = (repo / "README.md").read_text()
    blocks = re.findall(r"```sh\n(#!/bin/sh\n.*?)```", readme, re.S)
    assert blocks and all("\nset -e" in b and "ys step run" in b for b in blocks)
    section = readme[readme.index("## A workflow in sh") :]
    man = (repo / "man" / "ys-step-run.1").read_text().replace("\\-", "-")
    for text in (section, man):
        assert all(f"{n}" in text for n in ("124", "126", "127", "1 MiB", "--retry"))
        assert "ys retry" in text
