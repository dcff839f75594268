"""List filters: tags, admission time, parent, workflow and status combine, and pages
of every combination read the same records as one long page, in list order. Per adapter; time
is injected."""

from __future__ import annotations

from typing import Any

import pytest

from tests.store.test_execution_client import T0, claim, claim_one, refused
from ys.outcomes import outcome_of

FAILED = {"status": "failed", "error": {"name": "Boom", "message": "no"}}


def populate(store: Any) -> list[dict[str, Any]]:
    """36 executions over 2 workflows, 3 teams, 2 envs, 2 parents and 3 statuses (some
    admitted at the same time, so ties order by ID); what each one is."""
    made = []
    for p in ("p-1", "p-2"):
        store.admit("parent", execution_id=p, now=T0 - 100)
        made.append({"id": p, "workflow": "parent", "tags": {}, "at": T0 - 100, "parent": None})
    for i in range(36):
        workflow = ("build", "deploy")[i % 2]
        tags = {"team": ("a", "b", "c")[i % 3], "env": ("prod", "dev")[(i // 3) % 2]}
        if i % 5 == 0:
            tags["extra"] = "yes"
        at = T0 + (i // 2)  # two per second: ties
        parent = ("p-1", "p-2")[i % 4 // 2] if i % 3 == 0 else None
        if parent:
            child = store.start(parent, f"s{i}", workflow, "{}", now=at)
            made.append({"id": child, "workflow": workflow, "tags": {}, "at": at, "parent": parent})
            continue
        eid = f"e-{i:02d}"
        store.admit(workflow, {"i": i}, execution_id=eid, now=at, tags=tags)
        made.append({"id": eid, "workflow": workflow, "tags": tags, "at": at, "parent": None})
    failing = {m["id"] for m in made[::4]}  # some fail, the rest suspend
    for d in claim(store, T0 + 100):
        outcome = FAILED if d.execution_id in failing else {"status": "suspended"}
        store.acknowledge(d.execution_id, d.token, outcome_of(outcome), now=T0 + 101)
    for m in made:
        m["status"] = store.get(m["id"]).status
    return made


def expected(made, *, tags=None, since=None, until=None, parent=None, workflow=None, status=None):
    out = [
        m
        for m in made
        if all(m["tags"].get(k) == v for k, v in (tags or {}).items())
        and (since is None or m["at"] >= since)
        and (until is None or m["at"] < until)
        and (parent is None or m["parent"] == parent)
        and (workflow is None or m["workflow"] == workflow)
        and (status is None or m["status"] == status)
    ]
    return [m["id"] for m in sorted(out, key=lambda m: (-m["at"], m["id"]))]


def paged(store: Any, limit: int, **filters: Any) -> list[str]:
    ids: list[str] = []
    token = None
    while True:
        page = store.list(limit=limit, page_token=token, **filters)
        assert len(page.items) <= limit
        ids += [r.execution_id for r in page.items]
        token = page.next_page_token
        if token is None:
            return ids


FILTERS = [
    {"tags": {"team": "a"}},
    {"tags": {"team": "b", "env": "dev"}},
    {"tags": {"extra": "yes", "team": "a"}},
    {"tags": {"team": "c"}, "workflow": "deploy"},
    {"tags": {"team": "a"}, "status": "failed"},
    {"tags": {"env": "prod"}, "since": T0 + 4, "until": T0 + 14},
    {"since": T0 + 3},
    {"until": T0 + 5, "workflow": "build"},
    {"parent": "p-1"},
    {"parent": "p-2", "since": T0 + 6, "workflow": "build"},
    {"workflow": "build", "status": "admitted", "since": T0 + 2, "until": T0 + 16},
    {"tags": {"team": "nobody"}},
    {},
]


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: ",".join(sorted(f)) or "none")
def test_filters_combine_and_page_like_one_long_page(store, filters):
    made = populate(store)
    status = filters.get("status")
    query = {k: v for k, v in filters.items() if k != "status"}
    if status:
        query["statuses"] = [status]
    want = expected(made, **filters)
    assert [r.execution_id for r in store.list(limit=1000, **query).items] == want
    for limit in (1, 4, 7):
        assert paged(store, limit, **query) == want


def test_a_record_carries_its_tags_and_an_untagged_one_none(store):
    store.admit("build", execution_id="t-1", tags={"team": "a", "k": "v w"}, now=T0)
    store.admit("build", execution_id="t-2", now=T0)
    assert store.get("t-1").tags == {"team": "a", "k": "v w"}
    assert store.get("t-2").tags == {}
    assert store.history("t-1", 10).items[0].event.data.tags == {"team": "a", "k": "v w"}
    assert store.verify() == []


def test_a_child_carries_its_callers_tags(store):
    store.admit("parent", execution_id="p", tags={"team": "a"}, now=T0)
    child = store.start("p", "s", "child", "{}", now=T0 + 1)
    assert store.get(child).tags == {"team": "a"}
    assert [r.execution_id for r in store.list(tags={"team": "a"}).items] == [child, "p"]


def test_a_failure_handler_gets_the_failed_executions_tags(store):
    store.admit("build", execution_id="f", tags={"team": "a"}, now=T0)
    d = claim_one(store, "f", T0)
    store.acknowledge("f", d.token, outcome_of(FAILED), now=T0 + 1, on_failure="notify")
    import json

    assert json.loads(store.get("f.on-failure").params_json)["tags"] == {"team": "a"}


@pytest.mark.parametrize(
    "tags",
    [
        {"": "x"},
        {"a b": "x"},
        {"k" * 65: "x"},
        {"k": "v" * 257},
        {"k": "a\nb"},
        {"k": 3},
        {f"k{i}": "v" for i in range(33)},
        ["k", "v"],
    ],
)
def test_bad_tags_are_invalid_and_admit_nothing(store, tags):
    with refused("INVALID_ARGUMENT"):
        store.admit("build", execution_id="bad", tags=tags, now=T0)
    assert store.get("bad") is None
    with refused("INVALID_ARGUMENT"):
        store.list(tags=tags)


def test_use_existing_with_other_tags_is_a_conflict(store):
    store.admit("build", execution_id="u", tags={"team": "a"}, now=T0)
    again = store.admit(
        "build", execution_id="u", tags={"team": "a"}, if_exists="use-existing", now=T0 + 1
    )
    assert again.started is False
    with refused("EXECUTION_ID_CONFLICT"):
        store.admit(
            "build", execution_id="u", tags={"team": "b"}, if_exists="use-existing", now=T0 + 1
        )


def test_gc_removes_a_pruned_executions_tags(store_factory):
    store = store_factory()
    store.admit("build", execution_id="g", tags={"team": "a"}, now=T0)
    d = claim_one(store, "g", T0)
    store.acknowledge("g", d.token, outcome_of(FAILED), now=T0 + 1)
    assert store.gc(10, now=T0 + 1000) == ["g"]
    assert store_factory.rows(store, "execution_tags") == []
    assert store.list(tags={"team": "a"}).items == []


def test_bad_times_are_invalid(store):
    for bad in (float("nan"), -5.0, 1e20):
        with refused("INVALID_ARGUMENT"):
            store.list(since=bad)


def test_a_status_given_twice_lists_each_record_once(store):
    store.admit("w", execution_id="a", now=T0)
    store.admit("w", execution_id="b", now=T0 + 1)
    assert [r.execution_id for r in store.list(statuses=["admitted", "admitted"]).items] == [
        "b",
        "a",
    ]
    both = store.list(statuses=["admitted", "running", "admitted"], limit=1)
    rest = store.list(statuses=["admitted", "running"], limit=5, page_token=both.next_page_token)
    assert [r.execution_id for r in both.items + rest.items] == ["b", "a"]


@pytest.mark.parametrize("bad_id", ["\ud800", "a\x00b"])
def test_a_page_token_naming_an_impossible_id_is_invalid(store, bad_id):
    from ys.store.paging import list_token

    store.admit("w", execution_id="a", now=T0)
    for kw in ({}, {"statuses": ["admitted", "running"]}):
        with refused("INVALID_ARGUMENT"):
            store.list(page_token=list_token(T0 + 1, bad_id), **kw)


@pytest.mark.parametrize(
    "kw",
    [{"workflow": "w\n"}, {"workflow": "a\x00b"}, {"parent": "a\x00b"}, {"tags": {"env\n": "x"}}],
    ids=["workflow-newline", "workflow-nul", "parent-nul", "tag-key-newline"],
)
def test_a_filter_no_record_can_match_is_refused_not_a_server_error(store, kw):
    store.admit("w", execution_id="a", now=T0)
    with refused("INVALID_ARGUMENT"):
        store.list(**kw)
