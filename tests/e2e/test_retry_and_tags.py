"""`ys retry`, tags and list filters through a real daemon: a retried execution
replays the steps copied from the original without running them (counted in a file), a settled
step.effect is not performed again at a fake provider, a live execution cannot be retried
(exit 3), bulk retry retries every match; tags reach children and retries; list filters
combine and page."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.raw_http import send
from tests.support import DaemonHandle, make_home, wait_until
from ys.errors import InvalidArgument

THREE = """
    import os
    import ys

    def note(d, line):
        with open(os.path.join(d, "effects"), "a") as f:
            f.write(line + "\\n")
        return line

    @ys.workflow
    def main(step, params):
        d = params["d"]
        step.run("one", lambda: note(d, "one"))
        step.run("two", lambda: note(d, "two"))
        def three():
            note(d, "three@VERSION@")
            if "@VERSION@" == "":
                raise RuntimeError("step three is broken")
            return "fixed"
        return step.run("three", three)
"""

CHARGE = """
    import json, os
    import ys

    @ys.workflow
    def main(step, params):
        d = params["d"]
        def perform(effect_id):
            with open(os.path.join(d, "provider"), "a") as f:
                f.write(effect_id + "\\n")
            return {"receipt": "r-" + effect_id}
        receipt = step.effect("charge", effect_id="pay-" + params["order"], operation="charge",
                              input={"amount": 5}, perform=perform,
                              lookup=lambda effect_id: ys.NotFound())
        def ship():
            if not os.path.exists(os.path.join(d, "fixed")):
                raise RuntimeError("the shipping service is down")
            return "shipped"
        return {"receipt": receipt, "ship": step.run("ship", ship)}
"""

HOLD = """
    import os, pathlib, time
    import ys

    @ys.workflow
    def main(step, params):
        def hold():
            go = pathlib.Path(params["d"], "go")
            while not go.exists():
                time.sleep(0.02)
            return 1
        return step.run("hold", hold)
"""

FLAKY = """
    import os
    import ys

    @ys.workflow
    def main(step, params):
        def work():
            if not os.path.exists(os.path.join(params["d"], "ok")):
                raise RuntimeError("not yet")
            return params["n"]
        return step.run("work", work)
"""

PARENT = """
    import os
    import ys

    @ys.workflow
    def main(step, params):
        got = step.call("child", "kid", {"n": 1})
        def after():
            if not os.path.exists(os.path.join(params["d"], "ok")):
                raise RuntimeError("after the child")
            return got
        return step.run("after", after)
"""

KID = """
    import ys

    @ys.workflow
    def main(step, params):
        return step.run("only", lambda: params["n"])
"""

TAGGED = """
    import ys

    @ys.workflow
    def main(step, params):
        return params.get("n")
"""


def three(version: str) -> str:
    return THREE.replace("@VERSION@", version)


@pytest.fixture(scope="module")
def daemon15(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    with make_home(tmp_path_factory.mktemp("retry")) as h:
        h.write("charge.py", CHARGE)
        h.write("hold.py", HOLD)
        h.write("flaky.py", FLAKY)
        h.write("bulky.py", FLAKY)  # failures of its own, for the bulk retry's refusal test
        h.write("cronny.py", FLAKY)  # failures retried by status again and again
        h.write("parent.py", PARENT)
        h.write("kid.py", KID)
        h.write("tagged.py", TAGGED)
        h.write("other.py", TAGGED)
        yield h.start()


def effects(d: Path, name: str = "effects") -> list[str]:
    try:
        return (d / name).read_text().splitlines()
    except FileNotFoundError:
        return []


def done(c: Any, execution_id: str) -> dict[str, Any]:
    return c.wait(execution_id, timeout=60)


def fix_script(h: DaemonHandle, c: Any, name: str, source: str) -> None:
    """Rewrite a workflow's script and wait until the daemon runs the new version."""
    path = h.write(f"{name}.py", source)
    import textwrap

    want = hashlib.sha256(path.read_bytes()).hexdigest()
    assert want == hashlib.sha256(textwrap.dedent(source).encode()).hexdigest()

    def seen() -> bool:
        listed = {w["name"]: w for w in c.workflows()["workflows"]}
        return listed.get(name, {}).get("sha256") == want

    wait_until(seen, message=f"the daemon sees the new {name}")


def test_a_failure_at_the_third_step_is_retried_after_the_fix_without_rerunning_two(
    daemon15, tmp_path
):
    h = daemon15
    with h.client() as c:
        h.write("three.py", three(""))
        wait_until(lambda: any(w["name"] == "three" for w in c.workflows()["workflows"]))
        c.trigger("three", {"d": str(tmp_path)}, execution_id="t-1")
        assert done(c, "t-1")["status"] == "failed"
        assert effects(tmp_path) == ["one", "two", "three"]
        fix_script(h, c, "three", three("-fixed"))
        result = h.ys("retry", "t-1", "--json")
        assert result.returncode == 0, result.stderr
        retried = json.loads(result.stdout)
        assert retried == {
            "execution_id": "t-1.r1",
            "retry_of": "t-1",
            "copied_steps": ["one", "two"],
        }
        record = done(c, "t-1.r1")
        assert record["status"] == "completed" and record["outcome"]["result"] == "fixed"
        assert record["retry_of"] == "t-1" and record["params"] == {"d": str(tmp_path)}
        # the first two step bodies did not run again; the original is still failed
        assert effects(tmp_path) == ["one", "two", "three", "three-fixed"]
        original = c.get("t-1")
        assert original["status"] == "failed" and original["retry_of"] is None
        # --from the first step reruns every step
        again = h.ys("retry", "t-1", "--from", "one")
        assert again.returncode == 0, again.stderr
        assert again.stdout == "t-1.r2\n"
        assert done(c, "t-1.r2")["status"] == "completed"
        assert effects(tmp_path)[4:] == ["one", "two", "three-fixed"]
        assert c.describe("t-1.r2")["steps"][0]["key"] == "one"
        # an unknown --from step is a usage error: exit 2, one line, nothing admitted
        bad = h.ys("retry", "t-1", "--from", "nope")
        assert bad.returncode == 2 and bad.stderr.startswith("INVALID_ARGUMENT")
        assert len(bad.stderr.strip().splitlines()) == 1
        assert "t-1.r3" not in {r["execution_id"] for r in c.list(workflow="three")["executions"]}


def test_a_retried_settled_effect_performs_no_more_at_the_provider(daemon15, tmp_path):
    h = daemon15
    with h.client() as c:
        c.trigger("charge", {"d": str(tmp_path), "order": "o-1"}, execution_id="pay-1")
        assert done(c, "pay-1")["status"] == "failed"
        assert effects(tmp_path, "provider") == ["pay-o-1"]
        (tmp_path / "fixed").touch()
        retried = c.retry("pay-1")
        assert retried["copied_steps"] == ["charge"]
        record = done(c, retried["execution_id"])
        assert record["status"] == "completed"
        assert record["outcome"]["result"] == {
            "receipt": {"receipt": "r-pay-o-1"},
            "ship": "shipped",
        }
        # rerunning the effect step itself finds the ledger's settled result
        rerun = c.retry("pay-1", from_step="charge", new_id="pay-1.again")
        assert rerun == {
            "execution_id": "pay-1.again",
            "retry_of": "pay-1",
            "copied_steps": [],
            "started": True,
        }
        assert done(c, "pay-1.again")["status"] == "completed"
        assert effects(tmp_path, "provider") == ["pay-o-1"]  # performed once in all
        began = {b["execution_id"] for b in c.effect("pay-o-1")["began_by"]}
        assert began == {"pay-1", "pay-1.r1", "pay-1.again"}


def test_a_running_execution_cannot_be_retried(daemon15, tmp_path):
    h = daemon15
    with h.client() as c:
        c.trigger("hold", {"d": str(tmp_path)}, execution_id="hold-1")
        wait_until(lambda: c.get("hold-1")["status"] == "running", message="hold-1 runs")
        result = h.ys("retry", "hold-1")
        assert result.returncode == 3
        assert result.stderr.startswith("EXECUTION_NOT_TERMINAL: hold-1 is running")
        assert len(result.stderr.strip().splitlines()) == 1
        assert result.stdout == ""
        (tmp_path / "go").touch()
        assert done(c, "hold-1")["status"] == "completed"
        assert c.get("hold-1")["retry_of"] is None
        assert [r["execution_id"] for r in c.list(workflow="hold")["executions"]] == ["hold-1"]


def test_bulk_retry_retries_each_of_five_failures(daemon15, tmp_path):
    h = daemon15
    with h.client() as c:
        for n in range(5):
            c.trigger("flaky", {"d": str(tmp_path), "n": n}, execution_id=f"flaky-{n}")
        for n in range(5):
            assert done(c, f"flaky-{n}")["status"] == "failed"
        (tmp_path / "ok").touch()
        result = h.ys("retry", "--status", "failed", "--workflow", "flaky", "--since", "1h")
        assert result.returncode == 0, result.stderr
        assert sorted(result.stdout.splitlines()) == [f"flaky-{n}.r1" for n in range(5)]
        for n in range(5):
            record = done(c, f"flaky-{n}.r1")
            assert record["status"] == "completed" and record["outcome"]["result"] == n
            assert c.get(f"flaky-{n}")["status"] == "failed"
        # only finished executions can be retried: a live status is a usage error
        live = h.ys("retry", "--status", "running")
        assert live.returncode == 2 and live.stderr.startswith("INVALID_ARGUMENT")
        assert live.stdout == ""


def test_bulk_retry_goes_on_past_a_match_it_cannot_retry_and_names_it(daemon15, tmp_path):
    h = daemon15
    long_id = "x" * 255  # a retry's ID, long-id.r1, would pass the 256-byte limit
    with h.client() as c:
        for execution_id in ("bulk-a", long_id, "bulk-b"):
            c.trigger("bulky", {"d": str(tmp_path), "n": 9}, execution_id=execution_id)
        for execution_id in ("bulk-a", long_id, "bulk-b"):
            assert done(c, execution_id)["status"] == "failed"
        result = h.ys("retry", "--status", "failed", "--workflow", "bulky", "--since", "1h")
        assert result.returncode == 2, result.stderr  # the refused one's exit code
        assert sorted(result.stdout.splitlines()) == ["bulk-a.r1", "bulk-b.r1"]
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"{long_id} was not retried: INVALID_ARGUMENT")
        assert c.get("bulk-a.r1")["retry_of"] == "bulk-a"


def test_bulk_retry_takes_only_failed_or_cancelled_in_the_cli_the_client_and_the_api(
    daemon15, tmp_path
):
    h = daemon15
    with h.client() as c:
        c.trigger("tagged", {"n": 1}, execution_id="fine-1")
        assert done(c, "fine-1")["status"] == "completed"
        result = h.ys("retry", "--status", "completed")
        assert result.returncode == 2 and result.stdout == ""
        (line,) = result.stderr.splitlines()
        assert line.startswith("INVALID_ARGUMENT") and "failed or cancelled" in line, line
        with pytest.raises(InvalidArgument, match="failed or cancelled"):
            c.retry_matching(status="completed")
        status, body = send(
            h,
            "POST",
            "/v1/executions/fine-1/retry",
            json.dumps({"if_status": "completed"}).encode(),
        )
        assert status == 400 and body["code"] == "INVALID_ARGUMENT", body
        assert "failed or cancelled" in body["message"]
        assert c.get("fine-1")["retried_by"] is None
        assert [r["execution_id"] for r in c.list(workflow="tagged")["executions"]] == ["fine-1"]


def test_bulk_retry_skips_what_it_retried_before_unless_again(daemon15, tmp_path):
    h = daemon15
    with h.client() as c:
        c.trigger("cronny", {"d": str(tmp_path), "n": 1}, execution_id="cron-1")
        assert done(c, "cron-1")["status"] == "failed"
        first = h.ys("retry", "--status", "failed", "--workflow", "cronny")
        assert (first.returncode, first.stdout) == (0, "cron-1.r1\n"), first.stderr
        assert done(c, "cron-1.r1")["status"] == "failed"  # still broken: fails again
        assert c.get("cron-1")["retried_by"] == "cron-1.r1"
        # the next run retries only the retry's failure, not the original's again
        second = h.ys("retry", "--status", "failed", "--workflow", "cronny")
        assert (second.returncode, second.stdout) == (0, "cron-1.r1.r1\n"), second.stderr
        assert done(c, "cron-1.r1.r1")["status"] == "failed"
        again = h.ys("retry", "--status", "failed", "--workflow", "cronny", "--again", "--json")
        assert again.returncode == 0, again.stderr
        assert sorted(r["execution_id"] for r in json.loads(again.stdout)) == [
            "cron-1.r1.r1.r1",
            "cron-1.r1.r2",
            "cron-1.r2",
        ]
        described = json.loads(h.ys("describe", "cron-1", "--json").stdout)
        assert described["retried_by"] == "cron-1.r2"
        assert described["retries"] == ["cron-1.r1", "cron-1.r2"]
        # one asked not to repeat a retry answers the retry it has, admitting nothing
        status, body = send(
            h, "POST", "/v1/executions/cron-1/retry", json.dumps({"again": False}).encode()
        )
        assert (status, body["execution_id"], body["started"]) == (200, "cron-1.r2", False)
        listed = [r["execution_id"] for r in c.list(workflow="cronny")["executions"]]
        assert "cron-1.r3" not in listed and len(listed) == 6


def test_tags_are_copied_to_a_child_and_to_a_retry(daemon15, tmp_path):
    h = daemon15
    with h.client() as c:
        result = h.ys(
            "trigger", "parent", "--id", "par-1", "-p", f"d={tmp_path}",
            "--tag", "team=pay", "--tag", "env=prod",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert done(c, "par-1")["status"] == "failed"
        tags = {"team": "pay", "env": "prod"}
        assert c.get("par-1")["tags"] == tags
        (kid,) = c.list(parent="par-1")["executions"]
        assert kid["tags"] == tags
        (tmp_path / "ok").touch()
        retried = c.retry("par-1")
        assert retried["copied_steps"] == ["child"]
        record = done(c, "par-1.r1")
        assert record["status"] == "completed" and record["tags"] == tags
        assert record["outcome"]["result"] == 1
        # the copied call replayed: no second child
        assert [r["execution_id"] for r in c.list(workflow="kid")["executions"]] == [
            kid["execution_id"]
        ]
        listed = [r["execution_id"] for r in c.list(tags={"team": "pay"})["executions"]]
        assert listed == ["par-1.r1", kid["execution_id"], "par-1"]
        shown = h.ys("get", "par-1.r1", env={"COLUMNS": "200"})
        assert shown.returncode == 0, shown.stderr
        assert "retry of" in shown.stdout and "par-1" in shown.stdout
        assert "env=prod team=pay" in shown.stdout


def test_bad_tags_are_usage_errors_and_admit_nothing(daemon15):
    h = daemon15
    for bad in ("novalue", "=v", "a b=c"):
        result = h.ys("trigger", "tagged", "--id", "bad-tag", "--tag", bad)
        assert result.returncode == 2, (bad, result.stderr)
        assert result.stderr.startswith("INVALID_ARGUMENT")
        assert len(result.stderr.strip().splitlines()) == 1
    with h.client() as c:
        assert c.list(workflow="tagged", tags={"x": "y"})["executions"] == []
        from ys.errors import NotFoundError

        with pytest.raises(NotFoundError):
            c.get("bad-tag")


def test_list_filters_combine_and_page(daemon15):
    h = daemon15
    with h.client() as c:
        for i in range(6):
            tags = ["--tag", f"team={'ab'[i % 2]}", "--tag", f"batch={i // 3}"]
            wf = "tagged" if i < 5 else "other"
            result = h.ys("trigger", wf, "--id", f"tg-{i}", "-p", f"n={i}", *tags)
            assert result.returncode == 0, result.stderr
        for i in range(6):
            done(c, f"tg-{i}")

        def listed(*args: str) -> list[str]:
            result = h.ys("list", "--json", *args)
            assert result.returncode == 0, result.stderr
            return [r["execution_id"] for r in json.loads(result.stdout)["executions"]]

        assert listed("--tag", "team=a") == ["tg-4", "tg-2", "tg-0"]
        assert listed("--tag", "team=a", "--tag", "batch=1") == ["tg-4"]
        assert listed("--tag", "team=b", "--workflow", "tagged") == ["tg-3", "tg-1"]
        assert listed("--tag", "team=b", "--status", "completed", "--since", "1h") == [
            "tg-5",
            "tg-3",
            "tg-1",
        ]
        assert listed("--tag", "team=b", "--until", "1h") == []
        assert listed("--tag", "team=b", "--status", "failed") == []
        # pages of one, by token, read the same list
        seen, token = [], None
        while True:
            args = ["--tag", "batch=0", "--limit", "1"] + (["--page-token", token] if token else [])
            page = json.loads(h.ys("list", "--json", *args).stdout)
            seen += [r["execution_id"] for r in page["executions"]]
            token = page["next_page_token"]
            if not token:
                break
        assert seen == ["tg-2", "tg-1", "tg-0"]
        # the wide table shows tags and parent
        wide = h.ys("list", "--wide", "--tag", "batch=1", env={"COLUMNS": "200"})
        assert wide.returncode == 0, wide.stderr
        assert "batch=1 team=b" in wide.stdout and "TAGS" in wide.stdout
        assert "PARENT" in wide.stdout
        ps = h.ys("ps", "--wide")
        assert ps.returncode == 0, ps.stderr
