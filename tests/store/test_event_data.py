"""Each event kind's data as a typed value (ys/store/eventdata.py): what a write builds and what
a read gives back are the kind's dataclass, and a stored event's JSON round-trips exactly,
keys of other versions and values of unexpected types included (docs/design.md, "Events")."""

from __future__ import annotations

import json

import pytest

from ys.outcomes import outcome_of
from ys.store.eventdata import event_data_of
from ys.store.protocols import (
    AdmittedData,
    CancelledData,
    CancelRequestedData,
    ClaimedData,
    CompletedData,
    FailedData,
    Parent,
    ReleasedData,
    StepData,
    SuspendedData,
    UnknownData,
    WakeRequestedData,
)
from ys.store.records import fold
from ys.store.sql.rows import event_text
from ys.values import StepWrite

T0 = 1_000_000.0

# stored texts (canonical: sorted keys, no spaces) as this and other versions wrote them
STORED = [
    ("admitted", '{"context":{},"execution_id":"a-1","params":{"n":1},"workflow":"a"}'),
    (
        "admitted",
        '{"context":{"k":"v"},"due_at":1000600.0,"execution_id":"a-1","params":[1,"é"],'
        '"parent":{"detached":true,"execution_id":"p-1","step_key":"s"},"retry_of":"a-0",'
        '"script_sha256":"ab","tags":{"team":"x"},"workflow":"a","zz_future":[1,{"b":2}]}',
    ),
    ("admitted", '{"context":null,"execution_id":"a-1","params":null,"tags":{},"workflow":"a"}'),
    ("wake_requested", '{"due_at":1000001.5,"reason":"value k"}'),
    ("wake_requested", '{"due_at":1000001}'),
    ("claimed", '{"attempt":2,"daemon_id":"d-1","script_sha256":"ab"}'),
    ("claimed", "{}"),
    ("claimed", '{"attempt":"two","extra":null}'),
    ("step", '{"key":"s","kind":"run","status":"completed"}'),
    (
        "step",
        '{"attempts":3,"error":{"$error":1,"message":"m","name":"E"},"key":"s","kind":"run",'
        '"status":"waiting","wake_at":1000010.25}',
    ),
    ("step", '{"copied_from":"a-0","key":"s","kind":"sleep","status":"completed"}'),
    ("step", '{"attempts":1,"key":"s","wake_at":null}'),
    ("released", '{"detail":"exit 1","reason":"worker_failed","retry_at":1000002.0}'),
    ("released", '{"reason":"moved","retry_at":1000002}'),
    ("released", '{"attempt":4}'),
    ("suspended", "{}"),
    ("suspended", '{"warnings":["w1","w2"]}'),
    ("suspended", '{"warnings":["w1",2]}'),
    ("cancel_requested", '{"by":"parent"}'),
    ("cancel_requested", "{}"),
    ("completed", '{"result":null}'),
    ("completed", '{"result":{"b":[1,2],"a":"x"},"warnings":["w"]}'),
    ("failed", '{"error":{"code":"TIMEOUT","message":"m","name":"TimeoutError"}}'),
    ("failed", '{"error":{"cause":{"x":1},"name":"E"},"warnings":[],"zz":1}'),
    ("cancelled", '{"at_once":true}'),
    ("cancelled", '{"at_once":"yes","warnings":["w"]}'),
    ("a_kind_of_later", '{"anything":[1,2]}'),
]


@pytest.mark.parametrize(("kind", "text"), STORED)
def test_a_stored_events_json_round_trips_exactly(kind, text):
    decoded = json.loads(text)
    data = event_data_of(kind, decoded)
    again = data.to_json()
    assert again == decoded
    assert list(again) == list(decoded)  # the stored order: a history shows the same bytes
    if text == json.dumps(decoded, sort_keys=True, separators=(",", ":"), ensure_ascii=False):
        assert event_text(again) == text


def test_each_kind_reads_as_its_own_value_with_its_fields():
    def read(kind, text):
        return event_data_of(kind, json.loads(text))

    assert read(*STORED[1]) == AdmittedData(
        "a-1",
        "a",
        [1, "é"],
        {"k": "v"},
        parent=Parent("p-1", "s", True),
        script_sha256="ab",
        tags={"team": "x"},
        retry_of="a-0",
        due_at=1000600.0,
        extra={"zz_future": [1, {"b": 2}]},
    )
    assert read(*STORED[3]) == WakeRequestedData(1000001.5, "value k")
    assert read(*STORED[5]) == ClaimedData(2, "d-1", "ab")
    assert read(*STORED[7]) == ClaimedData(extra={"attempt": "two", "extra": None})
    step = read(*STORED[9])
    assert step == StepData(
        "s", "run", "waiting", 3, 1000010.25, {"$error": 1, "message": "m", "name": "E"}
    )
    assert step.waiting
    assert read(*STORED[12]) == ReleasedData("worker_failed", 1000002.0, "exit 1")
    assert read(*STORED[16]) == SuspendedData(("w1", "w2"))
    assert read(*STORED[18]) == CancelRequestedData("parent")
    assert read(*STORED[21]) == CompletedData({"b": [1, 2], "a": "x"}, ("w",))
    failed = read(*STORED[22])
    assert isinstance(failed, FailedData)
    assert failed.outcome_error().code == "TIMEOUT"
    assert read(*STORED[24]) == CancelledData(at_once=True)
    assert read(*STORED[26]) == UnknownData("a_kind_of_later", {"anything": [1, 2]})


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("admitted", '{"params":{}}'),
        ("wake_requested", '{"reason":"r"}'),
        ("step", '{"status":"completed"}'),
        ("completed", "{}"),
        ("failed", '{"error":"E"}'),
        ("claimed", "[1]"),
    ],
)
def test_data_its_kind_must_have_is_refused_where_it_is_read(kind, text):
    with pytest.raises(ValueError, match=kind):
        event_data_of(kind, json.loads(text))


def test_every_event_a_course_writes_is_its_kinds_value_and_reads_back_as_stored(
    store, store_factory
):
    store.admit("a", {"n": "é"}, execution_id="a-1", tags={"team": "x"}, now=T0)
    [d] = store.claim_due(now=T0, limit=1, lease_seconds=30)
    store.save_step("a-1", d.token, "s", StepWrite("run", "waiting", None, wake_at=T0 + 5), now=T0)
    store.release("a-1", d.token, reason="worker_failed", detail="exit 1", now=T0 + 1)
    [d] = store.claim_due(now=T0 + 6, limit=1, lease_seconds=30)
    store.acknowledge(
        "a-1", d.token, outcome_of({"status": "suspended", "warnings": ["w"]}), now=T0 + 7
    )
    store.request_wake("a-1", at=T0 + 8, now=T0 + 7)
    store.cancel("a-1", now=T0 + 8, at_once=True)
    events = [h.event for h in store.history("a-1", 100).items]
    assert [type(e.data) for e in events] == [
        AdmittedData,
        ClaimedData,
        StepData,
        ReleasedData,
        ClaimedData,
        SuspendedData,
        WakeRequestedData,
        CancelRequestedData,
        CancelledData,
    ]
    assert all(e.kind == e.data.KIND for e in events)
    assert events[3].data == ReleasedData("worker_failed", T0 + 1, "exit 1")
    assert events[5].data == SuspendedData(("w",))
    assert events[8].data == CancelledData(at_once=True)
    stored = [r for r in store_factory.rows(store, "events") if r["execution_id"] == "a-1"]
    assert [event_text(e.data.to_json()) for e in events] == [r["data"] for r in stored]
    assert fold(events) == store.get("a-1")
    assert store.verify() == []


def test_keys_of_another_version_survive_a_read_a_fold_and_later_writes(store, store_factory):
    store.admit("a", {}, execution_id="a-1", now=T0)
    [d] = store.claim_due(now=T0, limit=1, lease_seconds=30)
    location = store_factory.location_of(store)
    older = '{"attempt":1,"host":"h","zz":{"b":null}}'
    store_factory.adapter.update_rows(
        location, "events", {"execution_id": "a-1", "seq": 2}, data=older
    )
    claimed = store.history("a-1", 100).items[1].event
    assert claimed.data == ClaimedData(1, extra={"host": "h", "zz": {"b": None}})
    assert event_text(claimed.data.to_json()) == older
    assert store.verify() == []
    store.acknowledge("a-1", d.token, outcome_of({"status": "completed", "result": 1}), now=T0)
    stored = [r["data"] for r in store_factory.rows(store, "events") if r["seq"] == 2]
    assert stored == [older]  # later writes keep it as it was


def test_an_event_whose_data_does_not_read_as_its_kind_is_shown_verbatim_and_does_not_fold(
    store, store_factory
):
    """A stored step without its key (a row edited by hand, another version's): a history
    and the event stream still read it, as it is; `verify` says the history does not fold."""
    store.admit("a", {}, execution_id="a-1", now=T0)
    [d] = store.claim_due(now=T0, limit=1, lease_seconds=30)
    store.save_step("a-1", d.token, "s", StepWrite("run", "completed", "1"), now=T0)
    odd = '{"status":"completed"}'
    location = store_factory.location_of(store)
    store_factory.adapter.update_rows(
        location, "events", {"execution_id": "a-1", "seq": 3}, data=odd
    )
    step = store.history("a-1", 100).items[2].event
    assert step.kind == "step" and step.data == UnknownData("step", {"status": "completed"})
    assert event_text(step.data.to_json()) == odd
    streamed, _ = store.event_stream(since=0)
    assert [e.event.data for e in streamed if e.execution_id == "a-1"][2] == step.data
    [problem] = store.verify()
    assert problem.startswith("a-1: history does not fold") and "step" in problem
