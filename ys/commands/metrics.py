"""`ys metrics`: the daemon's Prometheus metrics, as `GET /v1/metrics` serves them."""

from __future__ import annotations

import sys
from typing import Any

import typer

from ys.commands._opts import Json, add
from ys.commands._output import client, emit_json


def metrics(json_: Json = False) -> None:
    """Print the daemon's metrics in the Prometheus text format.

    Executions by workflow and status, admissions, deliveries and their durations, lease
    expiries, redeliveries, store commits, due executions, schedule slots, effects, and the
    daemon's process figures. `--json` gives the same families parsed:
    {"metrics": [{"name", "type", "help", "samples": [{"name", "labels", "value"}]}]}.
    """
    with client() as c:
        text = c.metrics()
    if json_:
        emit_json({"metrics": parse(text)})
        return
    sys.stdout.write(text)


def parse(text: str) -> list[dict[str, Any]]:
    """The families of a text exposition, with prometheus_client's own parser."""
    from prometheus_client.parser import text_string_to_metric_families

    return [
        {
            "name": f.name,
            "type": f.type,
            "help": f.documentation,
            "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples],
        }
        for f in text_string_to_metric_families(text)
    ]


def register(app: typer.Typer) -> None:
    add(app, "metrics", metrics)
