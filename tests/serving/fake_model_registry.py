"""A fake Kubeflow Model Registry: the REST endpoints (``/api/model_registry/v1``) that the
``model-registry`` 0.3.18 client calls for ``ModelRegistry(...)``, ``register_model``,
``get_registered_model``, ``get_model_version`` and ``get_model_artifact``, over real HTTP on
127.0.0.1.

No real Model Registry server runs in these tests. This one answers on an ephemeral port
(``ThreadingHTTPServer`` in a thread), keeps its state in memory, and is strict where a test
should fail: a request body is checked against the client's own OpenAPI model of its endpoint
(``mr_openapi``) -- an unknown field, a missing required one or a wrong type is a 400 -- and
every answer is built from, and checked against, the response model the client deserializes.
Every request is recorded (:attr:`FakeModelRegistry.requests`).

The calls, as the 0.3.18 client makes them (``model_registry/_client.py``, ``core.py``):

- ``GET /registered_models?pageSize=1`` -- the constructor's connection check;
- ``GET /registered_model?name=`` (404: none), ``POST /registered_models``;
- ``GET /model_version?name=&parentResourceId=`` (404: none), ``POST /model_versions``;
- ``POST /model_versions/{id}/artifacts`` (a ``ModelArtifact`` with ``artifactType``);
- ``GET /model_artifact?name=&parentResourceId=`` (404: none).

Behaviours of the real server it reproduces: names are unique (a registered model's
everywhere, a version's within its model: 409 on a second); a version needs an existing
registered model (404); with :attr:`FakeModelRegistry.token` set, a request without
``Authorization: Bearer <token>`` is a 401, as kube-rbac-proxy answers. Anything else is a 501,
so that a client call this fake does not know fails the test loudly rather than reading as
"not found". :attr:`FakeModelRegistry.fail_next` answers the next request to a path with a given
status (an interrupted registration).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import mr_openapi
import pydantic
import pytest

from tests import fake_http
from tests.fake_http import LoopbackServer, Request

API = "/api/model_registry/v1"
# Fields the server assigns: a create request carrying one is refused.
_SERVER_FIELDS = {"id", "createTimeSinceEpoch", "lastUpdateTimeSinceEpoch"}


class HttpError(Exception):
    """Answered as ``status`` with the API's ``Error`` body ``{"code", "message"}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def checked_body(body: Any, model: type[pydantic.BaseModel], *, required: tuple[str, ...] = ()) -> dict:
    """``body`` when it is a valid ``model`` (by the client's OpenAPI model: no unknown fields,
    the required ones present, the types right) carrying ``required`` too.

    Raises:
        HttpError: 400 naming every problem.
    """
    if not isinstance(body, dict):
        raise HttpError(400, f"{model.__name__}: expected a JSON object, got {body!r}")
    known = {field.alias or name for name, field in model.model_fields.items()}
    problems = [f"unknown field {key!r}" for key in body if key not in known]
    problems += [f"{key!r} is set by the server" for key in body if key in _SERVER_FIELDS]
    problems += [f"missing {key!r}" for key in required if body.get(key) in (None, "")]
    try:
        model.from_dict(body)  # type: ignore[attr-defined]
    except (pydantic.ValidationError, ValueError, KeyError) as err:
        problems.append(str(err).replace("\n", " "))
    if problems:
        raise HttpError(400, f"invalid {model.__name__}: " + "; ".join(problems))
    return body


def answer(document: dict, model: type[pydantic.BaseModel]) -> dict:
    """``document`` after checking the client can read it as ``model`` (a fake's own bug must
    not read as the code under test's)."""
    model.from_dict(document)  # type: ignore[attr-defined]
    return document


class FakeModelRegistry(LoopbackServer):
    """The fake server; a context manager that serves while inside. Its :attr:`requests` record
    the path below :data:`API` (``/registered_model``) and the JSON body.

    Args:
        token: When set, every request needs ``Authorization: Bearer <token>`` (else 401).
    """

    def __init__(self, token: str | None = None) -> None:
        self.token = token
        self.requests: list[Request] = []
        self.registered_models: dict[str, dict[str, Any]] = {}
        self.versions: dict[str, dict[str, Any]] = {}
        self.artifacts: dict[str, dict[str, Any]] = {}
        # (method, path below API) -> status answered to the next such request, once.
        self.fail_next: dict[tuple[str, str], int] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    # --- what tests look at ---------------------------------------------------------------

    def calls(self, method: str | None = None) -> list[str]:
        """``"GET /registered_model"``-style lines of the requests received (of ``method``)."""
        return [f"{r.method} {r.path}" for r in self.requests if method is None or r.method == method]

    def versions_of(self, model_name: str) -> list[dict[str, Any]]:
        model = next(m for m in self.registered_models.values() if m["name"] == model_name)
        return [v for v in self.versions.values() if v["registeredModelId"] == model["id"]]

    def artifacts_of(self, version_id: str) -> list[dict[str, Any]]:
        return [a for a in self.artifacts.values() if a["_parent"] == version_id]

    # --- HTTP -----------------------------------------------------------------------------

    thread_name = "fake-model-registry"

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        method = handler.command
        parsed = urllib.parse.urlsplit(handler.path)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        raw = fake_http.body(handler)
        status, document = 200, None
        try:
            try:
                body = json.loads(raw) if raw else None
            except ValueError as err:
                raise HttpError(400, f"body is not JSON: {err}") from None
            path = parsed.path[len(API) :] if parsed.path.startswith(API + "/") else parsed.path
            with self._lock:
                self.requests.append(Request(method, path, query, body, handler.headers.get("Authorization")))
                if self.token is not None and handler.headers.get("Authorization") != f"Bearer {self.token}":
                    raise HttpError(401, "Unauthorized")
                failure = self.fail_next.pop((method, path), None)
                if failure:
                    raise HttpError(failure, f"injected failure {failure}")
                if not parsed.path.startswith(API + "/"):
                    raise HttpError(501, f"not a Model Registry v1 path: {parsed.path}")
                status, document = self._route(method, path, query, body)
        except HttpError as err:
            status = err.status
            document = {"code": str(err.status), "message": err.message}
        fake_http.send(handler, status, json.dumps(document).encode())

    def _route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, dict]:
        routes = {
            ("GET", "/registered_models"): self._list_registered_models,
            ("GET", "/registered_model"): self._find_registered_model,
            ("POST", "/registered_models"): self._create_registered_model,
            ("GET", "/model_version"): self._find_model_version,
            ("POST", "/model_versions"): self._create_model_version,
            ("GET", "/model_artifact"): self._find_model_artifact,
        }
        if (method, path) in routes:
            return routes[(method, path)](query, body)
        parts = path.strip("/").split("/")
        if method == "POST" and len(parts) == 3 and parts[0] == "model_versions" and parts[2] == "artifacts":
            return self._create_version_artifact(parts[1], body)
        raise HttpError(501, f"the fake does not implement {method} {API}{path}")

    # --- endpoints ------------------------------------------------------------------------

    def _stamp(self) -> dict[str, str]:
        now = str(int(time.time() * 1000))
        return {"id": str(next(self._ids)), "createTimeSinceEpoch": now, "lastUpdateTimeSinceEpoch": now}

    def _list_registered_models(self, query: dict[str, str], body: Any) -> tuple[int, dict]:
        size = int(query.get("pageSize") or 100)
        items = list(self.registered_models.values())[:size]
        document = {"items": items, "nextPageToken": "", "pageSize": size, "size": len(items)}
        return 200, answer(document, mr_openapi.RegisteredModelList)

    def _find_registered_model(self, query: dict[str, str], body: Any) -> tuple[int, dict]:
        if not query.get("name") and not query.get("externalId"):
            raise HttpError(400, "find needs name or externalId")
        for model in self.registered_models.values():
            if model["name"] == query.get("name") or (
                query.get("externalId") and model.get("externalId") == query["externalId"]
            ):
                return 200, answer(model, mr_openapi.RegisteredModel)
        raise HttpError(404, f"no registered model found for name={query.get('name')!r}")

    def _create_registered_model(self, query: dict[str, str], body: Any) -> tuple[int, dict]:
        body = checked_body(body, mr_openapi.RegisteredModelCreate, required=("name",))
        if any(m["name"] == body["name"] for m in self.registered_models.values()):
            raise HttpError(409, f"registered model {body['name']!r} already exists")
        model = {"state": "LIVE", **body, **self._stamp()}
        self.registered_models[model["id"]] = model
        return 201, answer(model, mr_openapi.RegisteredModel)

    def _find_model_version(self, query: dict[str, str], body: Any) -> tuple[int, dict]:
        if query.get("name") and not query.get("parentResourceId"):
            raise HttpError(400, "a version name needs parentResourceId")
        for version in self.versions.values():
            if version["name"] == query.get("name") and version["registeredModelId"] == query.get(
                "parentResourceId"
            ):
                return 200, answer(version, mr_openapi.ModelVersion)
        raise HttpError(404, f"no model version found for name={query.get('name')!r}")

    def _create_model_version(self, query: dict[str, str], body: Any) -> tuple[int, dict]:
        body = checked_body(body, mr_openapi.ModelVersionCreate, required=("name", "registeredModelId"))
        parent = body["registeredModelId"]
        if parent not in self.registered_models:
            raise HttpError(404, f"no registered model with id {parent}")
        if any(
            v["name"] == body["name"] and v["registeredModelId"] == parent for v in self.versions.values()
        ):
            raise HttpError(409, f"version {body['name']!r} of registered model {parent} already exists")
        version = {"state": "LIVE", **body, **self._stamp()}
        self.versions[version["id"]] = version
        return 201, answer(version, mr_openapi.ModelVersion)

    def _create_version_artifact(self, version_id: str, body: Any) -> tuple[int, dict]:
        if version_id not in self.versions:
            raise HttpError(404, f"no model version with id {version_id}")
        if not isinstance(body, dict) or body.get("artifactType") != "model-artifact":
            raise HttpError(400, f"this fake stores model artifacts only, got {body!r}")
        body = checked_body(body, mr_openapi.ModelArtifact, required=("name", "uri"))
        mr_openapi.Artifact.from_dict(body)  # the oneOf the endpoint takes resolves to one type
        if any(a["name"] == body["name"] for a in self.artifacts_of(version_id)):
            raise HttpError(409, f"artifact {body['name']!r} of version {version_id} already exists")
        artifact = {**body, **self._stamp(), "_parent": version_id}
        self.artifacts[artifact["id"]] = artifact
        return 201, answer(self._public(artifact), mr_openapi.ModelArtifact)

    def _find_model_artifact(self, query: dict[str, str], body: Any) -> tuple[int, dict]:
        for artifact in self.artifacts.values():
            if artifact["name"] == query.get("name") and artifact["_parent"] == query.get("parentResourceId"):
                return 200, answer(self._public(artifact), mr_openapi.ModelArtifact)
        raise HttpError(404, f"no model artifact found for name={query.get('name')!r}")

    @staticmethod
    def _public(artifact: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in artifact.items() if not k.startswith("_")}


@pytest.fixture
def fake_registry() -> Iterator[FakeModelRegistry]:
    """A fake Model Registry without authentication."""
    with FakeModelRegistry() as fake:
        yield fake
