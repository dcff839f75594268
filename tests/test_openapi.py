"""docs/openapi.json describes the API the daemon serves: valid OpenAPI 3.1, exactly the served
routes with their path parameters, the delivery token header exactly where a route needs it,
a request body exactly where a route reads one, and one error shape. (tests/e2e/test_api_fuzz.py
fuzzes it against a real daemon.)"""

from __future__ import annotations

import http.client
import json
import re
import socket
from typing import Any

import pytest
import schemathesis

from tests.conftest import REPO, DaemonHandle
from ys.daemon.api import Api

DOC_PATH = REPO / "docs" / "openapi.json"
DOC: dict[str, Any] = json.loads(DOC_PATH.read_text())
METHODS = ("get", "put", "post", "delete", "patch")


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, item in DOC["paths"].items()
        for method, op in item.items()
        if method in METHODS
    ]


def resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = DOC
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def parameters(op: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in map(resolve, op.get("parameters", [])) if p["in"] == where}


def test_the_document_is_valid_openapi_3_1():
    assert DOC["openapi"].startswith("3.1.")
    schemathesis.openapi.from_path(DOC_PATH).validate()  # raises with the first violation


def test_the_documented_operations_are_the_served_routes():
    assert {(m, p) for m, p, _ in operations()} == {(r.method, r.path) for r in Api(None).routes()}


def test_each_path_parameter_is_declared_once_and_required():
    for method, path, op in operations():
        declared = parameters(op, "path")
        assert set(declared) == set(re.findall(r"\{(\w+)\}", path)), (method, path)
        assert all(p["required"] for p in declared.values()), (method, path)


def test_every_error_answer_is_the_one_error_shape():
    error = DOC["components"]["schemas"]["Error"]
    assert error["required"] == ["code", "message"]
    assert error["additionalProperties"] is False
    for method, path, op in operations():
        for status, response in op["responses"].items():
            content = resolve(response)["content"]
            # GET /v1/metrics answers the Prometheus text format; its errors are JSON
            schema = (content.get("application/json") or content["text/plain"])["schema"]
            assert (schema == {"$ref": "#/components/schemas/Error"}) == (status >= "400"), (
                method,
                path,
                status,
            )


# -- what the served routes read, asked of a real daemon ---------------------------------------


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("ys", timeout=30)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def ask(
    daemon: DaemonHandle, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, dict[str, Any]]:
    conn = _Unix(str(daemon.socket))
    try:
        url = re.sub(r"\{\w+\}", "no-such-thing", path)
        conn.request(method, url, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        if not resp.getheader("Content-Type", "").startswith("application/json"):
            return resp.status, {"message": ""}  # GET /v1/metrics: the Prometheus text format
        return resp.status, json.loads(data)
    finally:
        conn.close()


@pytest.mark.e2e
def test_the_token_header_is_declared_exactly_where_a_route_needs_it(daemon: DaemonHandle):
    for method, path, op in operations():
        if path == "/v1/shutdown":
            continue
        status, body = ask(daemon, method, path, b"{}", {"Content-Type": "application/json"})
        needs = status == 400 and "X-Ys-Token" in body["message"]
        declared = parameters(op, "header").get("X-Ys-Token")
        assert needs == (declared is not None and declared["required"]), (method, path, body)


@pytest.mark.e2e
def test_a_request_body_is_declared_exactly_where_a_route_reads_one(daemon: DaemonHandle):
    for method, path, op in operations():
        if path == "/v1/shutdown":
            continue
        status, body = ask(
            daemon,
            method,
            path,
            b"{not json",
            {"Content-Type": "application/json", "X-Ys-Token": "t"},
        )
        reads = status == 400 and "JSON" in body["message"]
        declared = op.get("requestBody", {}).get("content", {}).get("application/json")
        assert reads == (declared is not None), (method, path, status, body)
