"""The group writer's batches: prepared admissions inserted together, the async path the daemon
uses, and generated IDs that sort by admission time. Per adapter, like the rest of the suite."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import pytest

from tests.store.test_service_course import CONCURRENT, T0, history, refused
from tests.support import Threads
from ys.errors import YsError
from ys.outcomes import outcome_of
from ys.values import Outcome, StepWrite

GENERATED_ID = re.compile(r"^echo-[0-9a-f]{19}$")


def test_new_admissions_in_one_batch_are_each_admitted_once(store_factory):
    store = store_factory(group_commit=True)
    n = 24
    with store_factory.adapter.hold_writes(store, waiting=n) as batches:
        admitting = Threads(n, lambda i: store.admit("echo", {"n": i}, now=T0 + i))
    results = admitting.results()
    assert n in batches  # one commit for all of them

    ids = [r.execution_id for r in results]
    assert all(r.started for r in results) and len(set(ids)) == n
    for i, execution_id in enumerate(ids):
        record = store.get(execution_id)
        assert (record.workflow, record.params_json, record.status) == (
            "echo",
            f'{{"n":{i}}}',
            "admitted",
        )
        assert record.admitted_at == record.due_at == T0 + i
        assert [e.event.kind for e in history(store, execution_id)] == ["admitted"]
    assert store.verify() == []


def test_a_failing_write_in_a_batch_of_admissions_fails_alone(store_factory):
    store = store_factory(group_commit=True)
    store.admit("echo", {}, execution_id="taken", now=T0)
    n = 12

    def write(i: int) -> Any:
        if i % 3 == 1:  # not an admission: a wake for an execution that does not exist
            return store.request_wake(f"missing-{i}", now=T0 + 1)
        if i % 3 == 2:  # an admission whose prepared insert fails: the ID is taken
            return store.admit("echo", {"n": i}, execution_id="taken", now=T0 + 1)
        return store.admit("echo", {"n": i}, now=T0 + 1)

    with store_factory.adapter.hold_writes(store, waiting=n) as batches:
        writing = Threads(n, write)
    results = writing.results()
    assert n in batches

    admitted = []
    for i, result in enumerate(results):
        if i % 3 == 1:
            assert isinstance(result, YsError) and result.code == "EXECUTION_NOT_FOUND"
        elif i % 3 == 2:
            assert isinstance(result, YsError) and result.code == "EXECUTION_ID_CONFLICT"
        else:
            assert result.started and GENERATED_ID.match(result.execution_id), result
            admitted.append(result.execution_id)
    assert {r.execution_id for r in store.list().items} == {"taken", *admitted}
    assert [e.event.kind for e in history(store, "taken")] == ["admitted"]
    assert store.verify() == []


@pytest.mark.parametrize("group_commit", [True, False], ids=["group-commit", "direct"])
def test_a_prepared_admission_of_a_taken_id_is_decided_by_its_transaction(
    store_factory, group_commit
):
    store = store_factory(group_commit=group_commit)
    first = store.admit("echo", {"n": 1}, execution_id="order-42", now=T0)
    same = store.admit(
        "echo", {"n": 1}, execution_id="order-42", if_exists="use-existing", now=T0 + 1
    )
    assert (first.started, same.started, same.execution_id) == (True, False, "order-42")
    with refused("EXECUTION_ID_CONFLICT"):
        store.admit("echo", {"n": 2}, execution_id="order-42", if_exists="use-existing", now=T0 + 2)
    with refused("EXECUTION_ID_CONFLICT"):
        store.admit("echo", {"n": 1}, execution_id="order-42", now=T0 + 3)
    assert store.get("order-42").admitted_at == T0
    assert len(history(store, "order-42")) == 1


def test_a_generated_id_draws_again_when_its_prepared_insert_collides(store_factory, monkeypatch):
    store = store_factory(group_commit=True)
    stamp = f"{int(T0 * 1000):011x}"
    store.admit("echo", {}, execution_id=f"echo-{stamp}00000000", now=T0)
    # prepared, then twice in the transaction body
    store_factory.adapter.force_id_bits(monkeypatch, [0, 0, 0x11111111])
    got = store.admit("echo", {"n": 1}, now=T0)
    assert got == type(got)(f"echo-{stamp}11111111", True)
    assert store.get(f"echo-{stamp}00000000").params_json == "{}"  # the first is untouched
    assert store.verify() == []


def test_generated_ids_sort_in_admission_order(store):
    ids = [store.admit("echo", {"n": i}, now=T0 + i * 0.001).execution_id for i in range(50)]
    ids += [store.admit("echo", {}, now=T0 + 86_400 * 365 * 100).execution_id]
    assert all(GENERATED_ID.match(i) for i in ids), ids
    assert sorted(ids) == ids
    assert ids[0][5:16] == f"{int(T0 * 1000):011x}"


# -- admit_async: the daemon's path --------------------------------------------------------------


@pytest.mark.parametrize("group_commit", [True, False], ids=["group-commit", "direct"])
def test_admit_async_from_many_coroutines_gives_one_execution_per_id(store_factory, group_commit):
    store = store_factory(group_commit=group_commit)

    async def main() -> list[Any]:
        same = [
            store.admit_async(
                "echo", {"k": 1}, execution_id="once", if_exists="use-existing", now=T0
            )
            for _ in range(CONCURRENT)
        ]
        fresh = [store.admit_async("echo", {"n": i}, now=T0 + i) for i in range(CONCURRENT)]
        return await asyncio.gather(*same, *fresh, return_exceptions=True)

    results = asyncio.run(main())
    assert not [r for r in results if isinstance(r, BaseException)], results
    same, fresh = results[:CONCURRENT], results[CONCURRENT:]
    assert [r.execution_id for r in same] == ["once"] * CONCURRENT
    assert sum(r.started for r in same) == 1
    assert all(r.started for r in fresh) and len({r.execution_id for r in fresh}) == CONCURRENT
    assert len(store.list(limit=1000).items) == CONCURRENT + 1
    assert len(history(store, "once")) == 1
    assert store.verify() == []


def test_admit_async_refuses_like_admit_and_writes_nothing(store_factory):
    store = store_factory(group_commit=True)
    store.admit("echo", {"n": 1}, execution_id="taken", now=T0)

    async def attempt(**kwargs: Any) -> str:
        try:
            await store.admit_async(**kwargs)
        except YsError as exc:
            return exc.code
        return "admitted"

    async def main() -> list[str]:
        return list(
            await asyncio.gather(
                attempt(workflow="echo", params={"n": 2}, execution_id="taken", now=T0),
                attempt(workflow="echo", params={"x": float("nan")}, execution_id="nan", now=T0),
                attempt(workflow="../evil", params={}, execution_id="evil", now=T0),
                attempt(workflow="echo", params={}, execution_id="x" * 300, now=T0),
                attempt(workflow="echo", params={}, execution_id="ok", now=T0),
            )
        )

    assert asyncio.run(main()) == [
        "EXECUTION_ID_CONFLICT",
        "INVALID_EXECUTION_EVENT",
        "INVALID_ARGUMENT",
        "INVALID_ARGUMENT",
        "admitted",
    ]
    assert {r.execution_id for r in store.list().items} == {"taken", "ok"}
    assert store.verify() == []


def test_admissions_from_a_loop_and_from_threads_share_batches(store_factory):
    store = store_factory(group_commit=True)
    n = 8

    async def main() -> list[Any]:
        tasks = [
            asyncio.ensure_future(store.admit_async("echo", {"a": i}, now=T0)) for i in range(n)
        ]
        await asyncio.sleep(0)  # each task has queued its write by now
        return list(await asyncio.gather(*tasks))

    out: dict[str, Any] = {}
    with store_factory.adapter.hold_writes(store, waiting=2 * n) as batches:
        threads = [
            threading.Thread(
                target=lambda i=i: out.__setitem__(f"t{i}", store.admit("echo", {"t": i}, now=T0))
            )
            for i in range(n)
        ]
        for t in threads:
            t.start()
        loop_results: list[Any] = []
        runner = threading.Thread(target=lambda: loop_results.extend(asyncio.run(main())))
        runner.start()
    runner.join(60)
    for t in threads:
        t.join(60)
    assert 2 * n in batches
    assert len(loop_results) == n and len(out) == n
    assert all(r.started for r in [*loop_results, *out.values()])
    assert len(store.list(limit=100).items) == 2 * n


def test_a_cancelled_admit_async_still_commits_and_the_writer_goes_on(store_factory):
    store = store_factory(group_commit=True)

    async def main() -> Any:
        with store_factory.adapter.hold_writes(store, waiting=1):
            task = asyncio.ensure_future(
                store.admit_async("echo", {}, execution_id="cancelled", now=T0)
            )
            await asyncio.sleep(0)
            task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await store.admit_async("echo", {}, execution_id="after", now=T0)

    assert asyncio.run(main()).started
    # the cancelled caller stopped waiting; its write was already queued and is committed
    assert store.get("cancelled") is not None and store.get("after") is not None


def test_writes_after_close_are_refused_not_left_waiting(store_factory):
    store = store_factory(group_commit=True)
    assert store.admit("echo", {}, execution_id="before", now=T0).started
    store.close()
    with refused("DAEMON_UNAVAILABLE"):
        store.admit("echo", {}, execution_id="after", now=T0)

    async def late() -> None:
        await store.admit_async("echo", {}, execution_id="after", now=T0)

    with refused("DAEMON_UNAVAILABLE"):
        asyncio.run(late())
    again = store_factory()
    assert again.get("before") is not None and again.get("after") is None


def test_full_storage_mid_batch_fails_only_what_did_not_fit(store_factory):
    store = store_factory(group_commit=True)
    store.admit("echo", {}, execution_id="first", now=T0)
    store_factory.adapter.limit_space(store, 100 * 1024)
    n = 12
    blob = "x" * 30_000

    async def main() -> list[Any]:
        with store_factory.adapter.hold_writes(store, waiting=n) as batches:
            tasks = [
                asyncio.ensure_future(
                    store.admit_async("echo", {"blob": blob}, execution_id=f"big-{i}", now=T0)
                )
                for i in range(n)
            ]
            await asyncio.sleep(0)
        out = await asyncio.gather(*tasks, return_exceptions=True)
        assert n in batches
        return out

    results = asyncio.run(main())
    stored = {r.execution_id for r in store.list(limit=100).items}
    codes = [r.code if isinstance(r, YsError) else "admitted" for r in results]
    assert "RESOURCE_EXHAUSTED" in codes and "admitted" in codes, codes
    for i, code in enumerate(codes):
        assert code in ("admitted", "RESOURCE_EXHAUSTED"), results[i]
        assert (f"big-{i}" in stored) == (code == "admitted")
    assert store.verify() == []
    store_factory.adapter.limit_space(store, None)
    assert store.admit("echo", {"blob": blob}, execution_id="big-later", now=T0).started


# -- the worker's writes, awaited (the daemon's step, outcome and lease routes) -------------------


@pytest.mark.parametrize("group_commit", [True, False], ids=["group-commit", "direct"])
def test_async_worker_writes_are_fenced_like_the_sync_ones(store_factory, group_commit):
    store = store_factory(group_commit=group_commit, lease_seconds=30)
    store.admit("echo", {}, execution_id="e", now=T0)
    (d,) = store.claim_due(now=T0, limit=1)

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["renewed"] = await store.renew_async("e", d.token, now=T0 + 10)
        out["saved"] = await asyncio.gather(
            *(
                store.save_step_async(
                    "e", d.token, f"s{i}", StepWrite("run", "completed", str(i)), now=T0 + 11
                )
                for i in range(5)
            )
        )
        for name, call in (
            (
                "stale_step",
                store.save_step_async(
                    "e", "stale", "x", StepWrite("run", "completed", "1"), now=T0 + 12
                ),
            ),
            ("stale_renew", store.renew_async("e", "stale", now=T0 + 12)),
            (
                "stale_ack",
                store.acknowledge_async(
                    "e", "stale", outcome_of({"status": "completed"}), now=T0 + 12
                ),
            ),
            (
                "bad_wake",
                store.save_step_async(
                    "e",
                    d.token,
                    "w",
                    StepWrite("sleep", "waiting", None, wake_at=float("nan")),
                    now=T0 + 12,
                ),
            ),
        ):
            try:
                await call
                out[name] = "written"
            except YsError as exc:
                out[name] = exc.code
        out["ack"] = await store.acknowledge_async(
            "e", d.token, outcome_of({"status": "completed", "result": 7}), now=T0 + 13
        )
        out["again"] = await store.acknowledge_async(
            "e",
            d.token,
            outcome_of({"status": "failed", "error": {"name": "E", "message": "m"}}),
            now=T0 + 14,
        )
        return out

    out = asyncio.run(main())
    assert out["renewed"] == T0 + 40
    assert out["saved"] == [False] * 5
    assert (out["stale_step"], out["stale_renew"], out["stale_ack"]) == ("LEASE_LOST",) * 3
    assert out["bad_wake"] == "INVALID_ARGUMENT"
    assert out["ack"] == out["again"] == Outcome("completed", 7)
    # (direct mode runs each awaited write in its own thread: they commit in any order)
    assert sorted((s.key, s.value) for s in store.steps("e")) == [
        (f"s{i}", str(i)) for i in range(5)
    ]
    assert store.get("e").status == "completed"
    assert store.verify() == []


def test_save_step_async_reports_a_requested_cancellation(store_factory):
    store = store_factory(group_commit=True)
    store.admit("echo", {}, execution_id="e", now=T0)
    (d,) = store.claim_due(now=T0, limit=1)

    async def save(key: str) -> bool:
        return await store.save_step_async(
            "e", d.token, key, StepWrite("run", "completed", "1"), now=T0 + 1
        )

    assert asyncio.run(save("before")) is False
    assert store.cancel("e", now=T0 + 2)
    assert asyncio.run(save("after")) is True
