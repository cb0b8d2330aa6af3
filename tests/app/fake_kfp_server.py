"""A fake Kubeflow Pipelines API server: the v2beta1 REST endpoints ``kfp.Client`` 2.17 calls for
``kfstack upload``, ``run`` and ``schedule``, over real HTTP on 127.0.0.1.

No real KFP server runs in these tests. This one answers on an ephemeral port
(``ThreadingHTTPServer`` in a thread), keeps its state in memory, and is strict where a test should
fail: every JSON request body is checked against the ``kfp_server_api`` model of its endpoint --
unknown keys, wrong types and enum values are a 400, as are the required fields the real server
insists on -- and then deserialized into that model. Every request is recorded
(:attr:`FakeKfpServer.requests`) so tests can assert on what was sent.

Behaviours of the real server it reproduces (backend/src/apiserver/server/*.go):

- ``POST /apis/v2beta1/pipelines/upload`` creates the pipeline *and* a first version named after
  the pipeline, whatever the file's version (kubeflow/pipelines#5881, #13753);
- ``POST /apis/v2beta1/pipelines`` creates the pipeline entity alone, no version;
- a pipeline version name is unique within its pipeline (409 on a second upload of the name);
- with :attr:`FakeKfpServer.token` set, a request without ``Authorization: Bearer <token>`` is a
  401 (a multi-user deployment's auth proxy), the health check included;
- a request whose ``namespace`` is one of :attr:`FakeKfpServer.denied_namespaces` is a 403
  (grpc PermissionDenied): a multi-user KFP's SubjectAccessReview found no binding for the
  caller there (backend/src/apiserver/resource/resource_manager.go, IsAuthorized);
- ``max_concurrency`` of a recurring run is 1-10;
- ``GET /runs`` lists runs as they are now (a list does not move a run along its script),
  of one experiment with ``experiment_id``, of one pipeline with the filter key ``pipeline_id``
  (backend/src/apiserver/model/run.go runAPIToModelFieldMap); ``/healthz`` says ``multi_user``
  as :attr:`FakeKfpServer.multi_user` says;
- a run or recurring run created without a ``service_account`` answers with the server's
  default in it, ``pipeline-runner`` (``default-editor`` when :attr:`FakeKfpServer.multi_user`,
  as the multi-user install configures it); one that names an account keeps it (2.17.0
  backend/src/apiserver/template/template.go setDefaultServiceAccount, resource_manager.go
  CreateRun and CreateJob, manifests/kustomize/base/installs/multi-user/api-service/params.env).

:attr:`FakeKfpServer.create_run_delay_s` makes ``POST /runs`` wait that long before it creates
the run, without holding the fake's lock: other requests are answered meanwhile, as a slow API
server answers them.

Stricter than the real server, on purpose: a cron expression must have 6 fields (robfig/cron, as
KFP configures it, reads 5 fields as sec-min-hour-dom-month, silently).

Runs follow :attr:`FakeKfpServer.run_script`: each GET of a run moves it one :class:`RunStep`
on (then stays at the last), with the task details of that step.
"""

from __future__ import annotations

import dataclasses
import datetime
import email.parser
import email.policy
import itertools
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import kfp
import kfp_server_api
import pytest
import yaml

from tests import fake_http
from tests.fake_http import LoopbackServer, Request

API = "/apis/v2beta1"
_EPOCH = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
# int64 fields: protojson writes them as JSON strings and reads a string or a number.
_INT64_FIELDS = {("V2beta1RecurringRun", "max_concurrency"), ("V2beta1PeriodicSchedule", "interval_second")}
_FINAL_STATES = {"SUCCEEDED", "SKIPPED", "FAILED", "CANCELED"}
_PAGING = {"total_size", "next_page_token"}


@dataclasses.dataclass(frozen=True)
class RunStep:
    """What a run looks like at one GET: its state, its tasks' states, its error if any."""

    state: str
    tasks: dict[str, str] = dataclasses.field(default_factory=dict)
    error: str | None = None


SUCCEEDING = [
    RunStep("RUNNING", {"validate-parameters": "RUNNING"}),
    RunStep("RUNNING", {"validate-parameters": "SUCCEEDED", "distributed-training": "RUNNING"}),
    RunStep("SUCCEEDED", {"validate-parameters": "SUCCEEDED", "distributed-training": "SUCCEEDED"}),
]
FAILING = [
    RunStep("RUNNING", {"validate-parameters": "RUNNING"}),
    RunStep("RUNNING", {"validate-parameters": "SUCCEEDED", "distributed-training": "RUNNING"}),
    RunStep(
        "FAILED",
        {"validate-parameters": "SUCCEEDED", "distributed-training": "FAILED"},
        error="task distributed-training failed: loss is NaN",
    ),
]


class HttpError(Exception):
    """Answered as ``status`` with a grpc-gateway style body ``{"code", "message"}``."""

    def __init__(self, status: int, message: str, grpc_code: int = 3) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.grpc_code = grpc_code


# --- model checks -----------------------------------------------------------------------------

_API_CLIENT = kfp_server_api.ApiClient()


def model_problems(data: Any, type_name: str, where: str = "body") -> list[str]:
    """What in ``data`` does not fit the ``kfp_server_api`` type ``type_name``: unknown keys,
    wrong JSON types, enum values outside the model's allowed values."""
    if data is None:
        return []
    if type_name.startswith("list["):
        if not isinstance(data, list):
            return [f"{where}: expected a list, got {type(data).__name__}"]
        inner = type_name[5:-1]
        return [p for i, item in enumerate(data) for p in model_problems(item, inner, f"{where}[{i}]")]
    if type_name.startswith("dict("):
        if not isinstance(data, dict):
            return [f"{where}: expected an object, got {type(data).__name__}"]
        inner = re.match(r"dict\(([^,]*), (.*)\)", type_name).group(2)  # type: ignore[union-attr]
        return [p for key, value in data.items() for p in model_problems(value, inner, f"{where}.{key}")]
    expected: dict[str, Callable[[Any], bool]] = {
        "str": lambda v: isinstance(v, str),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "object": lambda v: True,
        "datetime": lambda v: isinstance(v, str),
        "date": lambda v: isinstance(v, str),
    }
    if type_name in expected:
        return [] if expected[type_name](data) else [f"{where}: expected {type_name}, got {data!r}"]
    klass = getattr(kfp_server_api.models, type_name)
    allowed = getattr(klass, "allowable_values", None)
    if allowed is not None:
        return [] if data in allowed else [f"{where}: {data!r} is not one of {', '.join(allowed)}"]
    if not isinstance(data, dict):
        return [f"{where}: expected a {type_name} object, got {data!r}"]
    known = {json_key: attr for attr, json_key in klass.attribute_map.items()}
    problems = [f"{where}.{key}: unknown field of {type_name}" for key in data if key not in known]
    for key, value in data.items():
        if key not in known:
            continue
        field_type = klass.openapi_types[known[key]]
        if (type_name, known[key]) in _INT64_FIELDS:
            if not (isinstance(value, int) and not isinstance(value, bool)) and not (
                isinstance(value, str) and re.fullmatch(r"-?\d+", value)
            ):
                problems.append(f"{where}.{key}: expected an int64 (number or decimal string), got {value!r}")
            continue
        problems.extend(model_problems(value, field_type, f"{where}.{key}"))
    return problems


def parse_model(data: Any, type_name: str) -> Any:
    """``data`` as a ``kfp_server_api`` model, after :func:`model_problems` found nothing.

    Raises:
        HttpError: 400 naming every problem.
    """
    problems = model_problems(data, type_name)
    if problems:
        raise HttpError(400, f"invalid {type_name}: " + "; ".join(problems))
    try:
        return _API_CLIENT._ApiClient__deserialize(data, type_name)
    except (ValueError, TypeError) as err:
        raise HttpError(400, f"invalid {type_name}: {err}") from err


def as_json(model: Any) -> Any:
    return _API_CLIENT.sanitize_for_serialization(model)


# --- the server -------------------------------------------------------------------------------


class FakeKfpServer(LoopbackServer):
    """The fake server; a context manager that serves while inside. Its :attr:`requests` record
    the full URL path; a multipart upload's body is ``{"filename": ..., "spec": <first YAML
    document>}``, any other the JSON body.

    Args:
        token: When set, every request needs ``Authorization: Bearer <token>`` (else 401).
        login_page: Answer every request with an HTML login page and 200, as an auth proxy that
            redirects an unauthenticated client to its login does (urllib3 follows the redirect).
    """

    def __init__(self, token: str | None = None, login_page: bool = False) -> None:
        self.token = token
        self.login_page = login_page
        self.multi_user = False
        self.denied_namespaces: set[str] = set()
        self.create_run_delay_s = 0.0
        self.requests: list[Request] = []
        self.pipelines: dict[str, dict[str, Any]] = {}
        self.versions: dict[str, dict[str, Any]] = {}
        self.experiments: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, dict[str, Any]] = {}
        self.recurring_runs: dict[str, dict[str, Any]] = {}
        self.run_script: list[RunStep] = SUCCEEDING
        self._run_progress: dict[str, tuple[list[RunStep], int]] = {}
        self._ids = itertools.count(1)
        self._clock = itertools.count(1)
        self._lock = threading.Lock()
        self._routes: list[tuple[str, re.Pattern[str], Callable[..., Any]]] = [
            ("GET", re.compile(rf"{API}/healthz"), self._healthz),
            ("GET", re.compile(rf"{API}/pipelines"), self._list_pipelines),
            ("POST", re.compile(rf"{API}/pipelines"), self._create_pipeline),
            ("POST", re.compile(rf"{API}/pipelines/upload"), self._upload_pipeline),
            ("POST", re.compile(rf"{API}/pipelines/upload_version"), self._upload_version),
            ("GET", re.compile(rf"{API}/pipelines/(?P<pipeline_id>[^/]+)"), self._get_pipeline),
            ("GET", re.compile(rf"{API}/pipelines/(?P<pipeline_id>[^/]+)/versions"), self._list_versions),
            (
                "GET",
                re.compile(rf"{API}/pipelines/(?P<pipeline_id>[^/]+)/versions/(?P<version_id>[^/]+)"),
                self._get_version,
            ),
            ("GET", re.compile(rf"{API}/experiments"), self._list_experiments),
            ("POST", re.compile(rf"{API}/experiments"), self._create_experiment),
            ("GET", re.compile(rf"{API}/experiments/(?P<experiment_id>[^/:]+)"), self._get_experiment),
            ("GET", re.compile(rf"{API}/runs"), self._list_runs),
            ("POST", re.compile(rf"{API}/runs"), self._create_run),
            ("GET", re.compile(rf"{API}/runs/(?P<run_id>[^/:]+)"), self._get_run),
            ("POST", re.compile(rf"{API}/runs/(?P<run_id>[^/:]+):terminate"), self._terminate_run),
            ("GET", re.compile(rf"{API}/recurringruns"), self._list_recurring_runs),
            ("POST", re.compile(rf"{API}/recurringruns"), self._create_recurring_run),
            (
                "GET",
                re.compile(rf"{API}/recurringruns/(?P<recurring_run_id>[^/:]+)"),
                self._get_recurring_run,
            ),
            (
                "DELETE",
                re.compile(rf"{API}/recurringruns/(?P<recurring_run_id>[^/:]+)"),
                self._delete_recurring_run,
            ),
        ]

    @property
    def default_service_account(self) -> str:
        """The account a run that names none runs as (module docstring)."""
        return "default-editor" if self.multi_user else "pipeline-runner"

    # what tests look at

    def calls(self, method: str, path: str) -> list[Request]:
        """The recorded requests of ``method`` to exactly ``path`` (``/apis/v2beta1`` omitted)."""
        return [r for r in self.requests if r.method == method and r.path == API + path]

    def writes(self) -> list[Request]:
        """Every recorded request that could change state (not a GET)."""
        return [r for r in self.requests if r.method != "GET"]

    def versions_of(self, pipeline_id: str) -> list[dict[str, Any]]:
        return [v for v in self.versions.values() if v["pipeline_id"] == pipeline_id]

    def pipeline_named(self, name: str) -> dict[str, Any]:
        (pipeline,) = (p for p in self.pipelines.values() if p["display_name"] == name)
        return pipeline

    def seed(self, pipeline: str, *versions: str, namespace: str = "") -> tuple[str, list[str]]:
        """Puts pipeline ``pipeline`` with ``versions`` (oldest first; display names, label-safe
        names) on the server without a request, as an earlier upload would have; returns the
        pipeline id and the version ids."""
        with self._lock:
            created = self._add_pipeline(pipeline, pipeline, None, namespace)
            ids = [
                self._add_version(
                    created["pipeline_id"], v.replace("+", "-"), v, None, {"pipelineInfo": {"name": pipeline}}
                )["pipeline_version_id"]
                for v in versions
            ]
        return created["pipeline_id"], ids

    # plumbing

    thread_name = "fake-kfp"

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        url = urllib.parse.urlsplit(handler.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        raw = fake_http.body(handler)
        authorization = handler.headers.get("Authorization")
        status, answer = 200, None
        if self.login_page:
            self.requests.append(Request(handler.command, url.path, query, None, authorization))
            page = b"<!DOCTYPE html><html><body>Log in to your account</body></html>"
            fake_http.send(handler, 200, page, "text/html")
            return
        try:
            body = self._body(handler.headers.get("Content-Type", ""), raw)
            if handler.command == "POST" and url.path == f"{API}/runs" and self.create_run_delay_s:
                time.sleep(self.create_run_delay_s)
            with self._lock:
                self.requests.append(Request(handler.command, url.path, query, body, authorization))
                if self.token is not None and authorization != f"Bearer {self.token}":
                    raise HttpError(401, "Unauthenticated: a valid bearer token is required", grpc_code=16)
                if query.get("namespace") in self.denied_namespaces:
                    raise HttpError(
                        403, f"User is not authorized in namespace {query['namespace']}", grpc_code=7
                    )
                answer = self._route(handler.command, url.path, query, body)
        except HttpError as err:
            status, answer = err.status, {"code": err.grpc_code, "message": err.message, "details": []}
        fake_http.send(handler, status, json.dumps(answer if answer is not None else {}).encode())

    def _body(self, content_type: str, raw: bytes) -> Any:
        if content_type.startswith("multipart/form-data"):
            return self._multipart(content_type, raw)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as err:
            raise HttpError(400, f"body is not JSON: {err}") from err

    @staticmethod
    def _multipart(content_type: str, raw: bytes) -> dict[str, Any]:
        """The ``uploadfile`` part of a pipeline upload: its file name and first YAML document."""
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw
        )
        for part in message.iter_parts():
            if part.get_param("name", header="content-disposition") == "uploadfile":
                filename = part.get_filename()
                content = part.get_payload(decode=True)
                if not isinstance(content, bytes):
                    raise HttpError(400, "Failed to read pipeline from file: uploadfile is not a file")
                if not filename or not filename.endswith((".yaml", ".yml", ".json")):
                    raise HttpError(400, f"Failed to read a pipeline spec file: not a spec: {filename!r}")
                try:
                    documents = [d for d in yaml.safe_load_all(content) if d]
                except yaml.YAMLError as err:
                    raise HttpError(400, f"Failed to read a pipeline spec file: {err}") from err
                if not documents or "pipelineInfo" not in documents[0]:
                    raise HttpError(400, "Failed to read a pipeline spec file: no pipelineInfo")
                return {"filename": filename, "spec": documents[0]}
        raise HttpError(400, "Failed to read pipeline from file: no uploadfile part")

    def _route(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        for route_method, pattern, handle in self._routes:
            match = pattern.fullmatch(path)
            if match and route_method == method:
                return handle(query, body, **match.groupdict())
        raise HttpError(404, f"the fake KFP server has no {method} {path}", grpc_code=5)

    def _id(self, kind: str) -> str:
        return f"{kind}-{next(self._ids):04d}"

    def _now(self) -> str:
        return (_EPOCH + datetime.timedelta(seconds=next(self._clock))).isoformat().replace("+00:00", "Z")

    @staticmethod
    def _json_body(body: Any) -> Any:
        if body is None or not isinstance(body, dict):
            raise HttpError(400, "a JSON object body is required")
        return body

    @staticmethod
    def _list(
        items: list[dict[str, Any]], query: dict[str, str], response_type: str, namespaced: bool = True
    ) -> dict[str, Any]:
        """A v2beta1 list answer (``response_type``, e.g. ``V2beta1ListRunsResponse``): namespace,
        filter (EQUALS), sort_by, page_size, page_token."""
        if namespaced and query.get("namespace"):
            items = [i for i in items if i.get("namespace") == query["namespace"]]
        if query.get("filter"):
            try:
                predicates = json.loads(query["filter"]).get("predicates", [])
            except (ValueError, AttributeError) as err:
                raise HttpError(400, f"invalid filter: {err}") from err
            for predicate in predicates:
                if predicate.get("operation") not in ("EQUALS", 1):
                    raise HttpError(400, f"the fake supports EQUALS filters only: {predicate}")
                value = predicate.get("string_value", predicate.get("stringValue"))
                items = [i for i in items if i.get(predicate["key"]) == value]
        sort_by = query.get("sort_by", "")
        if sort_by not in ("", "created_at", "created_at desc"):
            raise HttpError(400, f"the fake sorts by created_at only, not {sort_by!r}")
        items = sorted(items, key=lambda i: i["created_at"], reverse=sort_by.endswith("desc"))
        start = int(query.get("page_token") or 0)
        size = int(query.get("page_size") or 20)
        # The items' key as the model spells it: the proto of recurring runs names the field
        # recurringRuns, so that one is camelCase on the wire.
        attribute_map = getattr(kfp_server_api.models, response_type).attribute_map
        key = next(json_key for attr, json_key in attribute_map.items() if attr not in _PAGING)
        answer: dict[str, Any] = {key: items[start : start + size], "total_size": len(items)}
        if start + size < len(items):
            answer["next_page_token"] = str(start + size)
        return answer

    # pipelines

    def _healthz(self, query: dict[str, str], body: Any) -> Any:
        return {"multi_user": self.multi_user, "pipeline_store": "database"}

    def _list_pipelines(self, query: dict[str, str], body: Any) -> Any:
        return self._list(list(self.pipelines.values()), query, "V2beta1ListPipelinesResponse")

    def _get_pipeline(self, query: dict[str, str], body: Any, pipeline_id: str) -> Any:
        if pipeline_id not in self.pipelines:
            raise HttpError(404, f"Pipeline {pipeline_id} not found", grpc_code=5)
        return self.pipelines[pipeline_id]

    def _add_pipeline(self, name: str, display_name: str, description: str | None, namespace: str) -> Any:
        if any(p["name"] == name and p.get("namespace", "") == namespace for p in self.pipelines.values()):
            raise HttpError(409, f"Pipeline with name {name} already exists", grpc_code=6)
        pipeline = {
            "pipeline_id": self._id("pipeline"),
            "name": name,
            "display_name": display_name,
            "created_at": self._now(),
            "namespace": namespace,
        }
        if description:
            pipeline["description"] = description
        self.pipelines[pipeline["pipeline_id"]] = pipeline
        return pipeline

    def _add_version(
        self, pipeline_id: str, name: str, display_name: str, description: str | None, spec: Any
    ) -> Any:
        if any(v["name"] == name for v in self.versions_of(pipeline_id)):
            raise HttpError(409, f"Failed to create a pipeline version: {name} already exists", grpc_code=6)
        version = {
            "pipeline_id": pipeline_id,
            "pipeline_version_id": self._id("version"),
            "name": name,
            "display_name": display_name,
            "created_at": self._now(),
            "pipeline_spec": spec,
        }
        if description:
            version["description"] = description
        self.versions[version["pipeline_version_id"]] = version
        return version

    def _create_pipeline(self, query: dict[str, str], body: Any) -> Any:
        pipeline = parse_model(self._json_body(body), "V2beta1Pipeline")
        if pipeline.pipeline_id or pipeline.created_at:
            raise HttpError(400, "pipeline_id and created_at are output fields")
        name = pipeline.name or pipeline.display_name
        if not name:
            raise HttpError(400, "Pipeline name is required")
        return self._add_pipeline(
            name, pipeline.display_name or name, pipeline.description, pipeline.namespace or ""
        )

    def _upload_pipeline(self, query: dict[str, str], body: Any) -> Any:
        # What the real server does: the first version carries the pipeline's own name.
        name = query.get("name") or query.get("display_name") or body["filename"].rsplit(".", 1)[0]
        display_name = query.get("display_name") or name
        description = query.get("description")
        pipeline = self._add_pipeline(name, display_name, description, query.get("namespace", ""))
        self._add_version(pipeline["pipeline_id"], name, display_name, description, body["spec"])
        return pipeline

    def _upload_version(self, query: dict[str, str], body: Any) -> Any:
        pipeline_id = query.get("pipelineid")
        if not pipeline_id or pipeline_id not in self.pipelines:
            raise HttpError(400, f"Failed to create a pipeline version: no pipeline {pipeline_id!r}")
        name = query.get("name") or query.get("display_name") or body["filename"].rsplit(".", 1)[0]
        return self._add_version(
            pipeline_id, name, query.get("display_name") or name, query.get("description"), body["spec"]
        )

    def _list_versions(self, query: dict[str, str], body: Any, pipeline_id: str) -> Any:
        self._get_pipeline(query, body, pipeline_id)
        return self._list(
            self.versions_of(pipeline_id), query, "V2beta1ListPipelineVersionsResponse", namespaced=False
        )

    def _get_version(self, query: dict[str, str], body: Any, pipeline_id: str, version_id: str) -> Any:
        version = self.versions.get(version_id)
        if version is None or version["pipeline_id"] != pipeline_id:
            raise HttpError(404, f"PipelineVersion {version_id} not found", grpc_code=5)
        return version

    # experiments

    def _list_experiments(self, query: dict[str, str], body: Any) -> Any:
        return self._list(list(self.experiments.values()), query, "V2beta1ListExperimentsResponse")

    def _create_experiment(self, query: dict[str, str], body: Any) -> Any:
        experiment = parse_model(self._json_body(body), "V2beta1Experiment")
        if not experiment.display_name:
            raise HttpError(400, "Experiment display_name is required")
        if any(
            e["display_name"] == experiment.display_name and e["namespace"] == (experiment.namespace or "")
            for e in self.experiments.values()
        ):
            raise HttpError(409, f"Experiment {experiment.display_name} already exists", grpc_code=6)
        created = {
            "experiment_id": self._id("experiment"),
            "display_name": experiment.display_name,
            "namespace": experiment.namespace or "",
            "created_at": self._now(),
            "storage_state": "AVAILABLE",
        }
        self.experiments[created["experiment_id"]] = created
        return created

    def _get_experiment(self, query: dict[str, str], body: Any, experiment_id: str) -> Any:
        if experiment_id not in self.experiments:
            raise HttpError(404, f"Experiment {experiment_id} not found", grpc_code=5)
        return self.experiments[experiment_id]

    # runs

    def _check_reference(self, reference: Any, version_required: bool) -> None:
        if reference is None or not reference.pipeline_id:
            raise HttpError(400, "a pipeline_version_reference with a pipeline_id is required")
        if reference.pipeline_id not in self.pipelines:
            raise HttpError(404, f"Pipeline {reference.pipeline_id} not found", grpc_code=5)
        if reference.pipeline_version_id:
            version = self.versions.get(reference.pipeline_version_id)
            if version is None or version["pipeline_id"] != reference.pipeline_id:
                missing = reference.pipeline_version_id
                raise HttpError(404, f"PipelineVersion {missing} not found", grpc_code=5)
        elif version_required:
            raise HttpError(400, "a run needs a pipeline version")

    def _check_experiment(self, experiment_id: str | None) -> str:
        if experiment_id and experiment_id not in self.experiments:
            raise HttpError(404, f"Experiment {experiment_id} not found", grpc_code=5)
        return self.experiments[experiment_id]["namespace"] if experiment_id else ""

    def _create_run(self, query: dict[str, str], body: Any) -> Any:
        run = parse_model(self._json_body(body), "V2beta1Run")
        if run.run_id or run.state or run.created_at:
            raise HttpError(400, "run_id, state and created_at are output fields")
        if not run.display_name:
            raise HttpError(400, "Run display_name is required")
        if run.pipeline_spec is None:
            # The real server resolves a pipeline id alone to the latest version; kfstack pins.
            self._check_reference(run.pipeline_version_reference, version_required=False)
        self._check_experiment(run.experiment_id)
        created = {
            **as_json(run),
            "service_account": run.service_account or self.default_service_account,
            "run_id": self._id("run"),
            "state": "PENDING",
            "created_at": self._now(),
        }
        self.runs[created["run_id"]] = created
        self._run_progress[created["run_id"]] = (list(self.run_script), 0)
        return created

    def _list_runs(self, query: dict[str, str], body: Any) -> Any:
        items = list(self.runs.values())
        if query.get("experiment_id"):
            items = [r for r in items if r.get("experiment_id") == query["experiment_id"]]
        if query.get("namespace"):  # a run is in its experiment's namespace
            items = [r for r in items if self._check_experiment(r.get("experiment_id")) == query["namespace"]]
        if query.get("filter"):
            # pipeline_id is a column of the run, not a key of its JSON (which nests it in
            # pipeline_version_reference): filtered here, the other predicates by _list.
            try:
                predicates = json.loads(query["filter"]).get("predicates", [])
            except (ValueError, AttributeError) as err:
                raise HttpError(400, f"invalid filter: {err}") from err
            for predicate in [p for p in predicates if p.get("key") == "pipeline_id"]:
                value = predicate.get("string_value", predicate.get("stringValue"))
                items = [r for r in items if _pipeline_of(r) == value]
            rest = [p for p in predicates if p.get("key") != "pipeline_id"]
            query = {**query, "filter": json.dumps({"predicates": rest}) if rest else ""}
        return self._list(items, query, "V2beta1ListRunsResponse", namespaced=False)

    def _get_run(self, query: dict[str, str], body: Any, run_id: str) -> Any:
        if run_id not in self.runs:
            raise HttpError(404, f"Run {run_id} not found", grpc_code=5)
        run = self.runs[run_id]
        script, position = self._run_progress[run_id]
        if script:
            step = script[min(position, len(script) - 1)]
            self._run_progress[run_id] = (script, position + 1)
            run["state"] = step.state
            run["run_details"] = {
                "task_details": [
                    {"run_id": run_id, "task_id": f"{run_id}-{task}", "display_name": task, "state": state}
                    for task, state in step.tasks.items()
                ]
            }
            if step.error:
                run["error"] = {"code": 2, "message": step.error}
            if step.state in _FINAL_STATES and "finished_at" not in run:
                run["finished_at"] = self._now()
        return run

    def _terminate_run(self, query: dict[str, str], body: Any, run_id: str) -> Any:
        raise HttpError(400, "kfstack never terminates a run; the fake refuses to")

    # recurring runs

    def _create_recurring_run(self, query: dict[str, str], body: Any) -> Any:
        recurring = parse_model(self._json_body(body), "V2beta1RecurringRun")
        if recurring.recurring_run_id or recurring.status or recurring.created_at:
            raise HttpError(400, "recurring_run_id, status and created_at are output fields")
        if not recurring.display_name:
            raise HttpError(400, "RecurringRun display_name is required")
        if recurring.pipeline_spec is None:
            self._check_reference(recurring.pipeline_version_reference, version_required=False)
        namespace = self._check_experiment(recurring.experiment_id)
        concurrency = int(recurring.max_concurrency or 0)
        if not 1 <= concurrency <= 10:
            raise HttpError(400, f"max_concurrency must be 1-10, got {recurring.max_concurrency!r}")
        trigger = recurring.trigger
        cron = trigger.cron_schedule.cron if trigger and trigger.cron_schedule else None
        periodic = trigger.periodic_schedule if trigger else None
        if not cron and not (periodic and periodic.interval_second):
            raise HttpError(400, "a trigger (cron_schedule or periodic_schedule) is required")
        if cron and len(cron.split()) != 6:
            raise HttpError(400, f"cron {cron!r}: the fake wants 6 fields, seconds first")
        created = {
            **as_json(recurring),
            "service_account": recurring.service_account or self.default_service_account,
            "recurring_run_id": self._id("recurring"),
            "status": "DISABLED" if recurring.mode == "DISABLE" else "ENABLED",
            "created_at": self._now(),
            "namespace": namespace,
        }
        self.recurring_runs[created["recurring_run_id"]] = created
        return created

    def _list_recurring_runs(self, query: dict[str, str], body: Any) -> Any:
        items = list(self.recurring_runs.values())
        if query.get("experiment_id"):
            items = [r for r in items if r.get("experiment_id") == query["experiment_id"]]
        return self._list(items, query, "V2beta1ListRecurringRunsResponse")

    def _get_recurring_run(self, query: dict[str, str], body: Any, recurring_run_id: str) -> Any:
        if recurring_run_id not in self.recurring_runs:
            raise HttpError(404, f"RecurringRun {recurring_run_id} not found", grpc_code=5)
        return self.recurring_runs[recurring_run_id]

    def _delete_recurring_run(self, query: dict[str, str], body: Any, recurring_run_id: str) -> Any:
        self._get_recurring_run(query, body, recurring_run_id)
        del self.recurring_runs[recurring_run_id]
        return {}


def _pipeline_of(run: dict[str, Any]) -> str | None:
    return (run.get("pipeline_version_reference") or {}).get("pipeline_id")


@pytest.fixture
def fake_kfp(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[FakeKfpServer]:
    """A running :class:`FakeKfpServer`; kfp.Client sees no endpoint or context of this machine."""
    for variable in ("KF_PIPELINES_ENDPOINT", "KF_PIPELINES_UI_ENDPOINT"):
        monkeypatch.delenv(variable, raising=False)
    # kfp.Client reads (and set_user_namespace writes) ~/.config/kfp/context.json.
    monkeypatch.setattr(kfp.Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "kfp-context.json"))
    with FakeKfpServer() as server:
        yield server
