"""api_base.write: small bodies are written from the event loop, big ones through the pool."""

from __future__ import annotations

import asyncio
from typing import Any

from ys.daemon.api_base import SMALL_BODY, write


class Request:
    def __init__(self, size: int) -> None:
        self.body = b"x" * size

    async def read(self) -> bytes:
        return self.body


class Store:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def admit(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append(("admit", args, kwargs))
        return "sync"

    async def admit_async(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append(("admit_async", args, kwargs))
        return "async"


class Hub:
    def __init__(self) -> None:
        self.pooled = 0

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        self.pooled += 1
        return await asyncio.to_thread(fn, *args, **kwargs)


def test_small_bodies_are_awaited_on_the_loop_and_big_ones_go_to_the_pool():
    store, hub = Store(), Hub()

    async def main() -> list[str]:
        return [
            await write(
                hub, Request(0), store.admit_async, store.admit, "wf", {"a": 1}, execution_id="e"
            ),
            await write(hub, Request(SMALL_BODY), store.admit_async, store.admit, "wf", None),
            await write(
                hub,
                Request(SMALL_BODY + 1),
                store.admit_async,
                store.admit,
                "wf",
                {"big": 1},
                if_exists="fail",
            ),
        ]

    assert asyncio.run(main()) == ["async", "async", "sync"]
    assert hub.pooled == 1
    assert store.calls == [
        ("admit_async", ("wf", {"a": 1}), {"execution_id": "e"}),
        ("admit_async", ("wf", None), {}),
        ("admit", ("wf", {"big": 1}), {"if_exists": "fail"}),
    ]
