"""The calls kfstack makes to a tracking server, over MLflow's REST API (``/api/2.0/mlflow``).

Why not MLflow's Python client: importing it takes about 2 s of CPU, paid by every training
replica and every tuning trial that logs a metric line (a run on two cores runs several at once),
where the dozen requests kfstack makes need only ``urllib``. The REST API is MLflow's public,
versioned interface (the one its client speaks), and each request here is bounded by
:data:`~kfstack.tracking.client.REQUEST_TIMEOUT_SECONDS` and never retried.

Artifacts: a server that proxies them (``mlflow server --serve-artifacts``, the default, and the
embedded store's) takes them over the same API (``/api/2.0/mlflow-artifacts``). A server whose
runs store artifacts elsewhere (``s3://``, ``gs://``: the client writes there itself) is handed
to MLflow's client for that call. Other tracking URIs (``databricks``, ``file:``,
``sqlite:``) go to MLflow's client for every call (:class:`MlflowBackend`).

Credentials as MLflow reads them: ``MLFLOW_TRACKING_TOKEN`` (a bearer token), or
``MLFLOW_TRACKING_USERNAME`` and ``MLFLOW_TRACKING_PASSWORD``; ``MLFLOW_TRACKING_SERVER_CERT_PATH``
(a CA bundle) and ``MLFLOW_TRACKING_INSECURE_TLS=true``.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

API = "/api/2.0/mlflow"
ARTIFACTS_API = "/api/2.0/mlflow-artifacts/artifacts"
PROXIED_ARTIFACTS = "mlflow-artifacts:"

Metric = tuple[str, float, int, int]
"""(key, value, timestamp in ms, step)"""


AUTH_PROVIDER_ENV = "MLFLOW_TRACKING_AUTH"
"""MLflow's own: the request auth provider (a plugin of its client) its calls authenticate with."""


class TrackingError(RuntimeError):
    """A request the server refused (its ``error_code`` kept) or could not answer."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class Backend(Protocol):
    """What :class:`~kfstack.tracking.client.Tracker` asks of a tracking server."""

    def experiment_id(self, name: str) -> str | None: ...

    def create_experiment(self, name: str) -> str: ...

    def create_run(self, experiment_id: str, name: str, tags: Mapping[str, str]) -> str: ...

    def get_run(self, run_id: str) -> tuple[str, dict[str, str]]:
        """The run's experiment id and its tags."""
        ...

    def find_run(self, experiment_id: str, filter_string: str) -> str | None:
        """The earliest run the filter matches (processes that raced to make one agree on it)."""
        ...

    def log_batch(
        self,
        run_id: str,
        metrics: Sequence[Metric] = (),
        params: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None: ...

    def set_terminated(self, run_id: str, status: str) -> None: ...

    def log_artifacts(self, run_id: str, local_path: str, artifact_path: str) -> None: ...


class RestBackend:
    """An ``http(s)://`` tracking server, spoken to with ``urllib`` (module docstring)."""

    def __init__(self, uri: str, timeout: float, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.base = uri.rstrip("/")
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json", **_credentials(environ)}
        self.context = _tls(environ)
        self._fallback: Any = None

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        content: bytes | None = None,
    ) -> Any:
        """One request: ``body`` as JSON, or ``content`` as bytes (an artifact's file); its
        answer's JSON ({} for none)."""
        url = self.base + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        headers = self.headers
        if content is not None:
            data: bytes | None = content
            headers = {**headers, "Content-Type": "application/octet-stream"}
        else:
            data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as answer:
                text = answer.read()
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")
            try:
                code = json.loads(detail).get("error_code", "")
            except ValueError:
                code = ""
            raise TrackingError(f"{method} {path}: HTTP {err.code}: {detail[:300]}", code) from err
        return json.loads(text) if text else {}

    def experiment_id(self, name: str) -> str | None:
        try:
            answer = self._request("GET", f"{API}/experiments/get-by-name", query={"experiment_name": name})
        except TrackingError as err:
            if err.code == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise
        return str(answer["experiment"]["experiment_id"])

    def create_experiment(self, name: str) -> str:
        return str(self._request("POST", f"{API}/experiments/create", {"name": name})["experiment_id"])

    def create_run(self, experiment_id: str, name: str, tags: Mapping[str, str]) -> str:
        body = {
            "experiment_id": experiment_id,
            "run_name": name,
            "start_time": _now_ms(),
            "tags": [{"key": key, "value": value} for key, value in tags.items()],
        }
        return str(self._request("POST", f"{API}/runs/create", body)["run"]["info"]["run_id"])

    def get_run(self, run_id: str) -> tuple[str, dict[str, str]]:
        run = self._request("GET", f"{API}/runs/get", query={"run_id": run_id})["run"]
        tags = {tag["key"]: tag.get("value", "") for tag in run.get("data", {}).get("tags", [])}
        return str(run["info"]["experiment_id"]), tags

    def find_run(self, experiment_id: str, filter_string: str) -> str | None:
        body = {
            "experiment_ids": [experiment_id],
            "filter": filter_string,
            "max_results": 1,
            "order_by": ["attributes.start_time ASC"],
        }
        found = self._request("POST", f"{API}/runs/search", body).get("runs", [])
        return str(found[0]["info"]["run_id"]) if found else None

    def log_batch(
        self,
        run_id: str,
        metrics: Sequence[Metric] = (),
        params: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        body = {
            "run_id": run_id,
            "metrics": [{"key": k, "value": v, "timestamp": t, "step": s} for k, v, t, s in metrics],
            "params": [{"key": k, "value": v} for k, v in (params or {}).items()],
            "tags": [{"key": k, "value": v} for k, v in (tags or {}).items()],
        }
        self._request("POST", f"{API}/runs/log-batch", body)

    def set_terminated(self, run_id: str, status: str) -> None:
        self._request(
            "POST", f"{API}/runs/update", {"run_id": run_id, "status": status, "end_time": _now_ms()}
        )

    def log_artifacts(self, run_id: str, local_path: str, artifact_path: str) -> None:
        """Each file under ``local_path`` (a file or a folder) to the run's ``artifact_path``."""
        run = self._request("GET", f"{API}/runs/get", query={"run_id": run_id})["run"]
        root = str(run["info"].get("artifact_uri", ""))
        if not root.startswith(PROXIED_ARTIFACTS):
            # The artifacts live where the client writes them itself: MLflow's client knows how.
            if self._fallback is None:
                self._fallback = MlflowBackend(self.base)
            self._fallback.log_artifacts(run_id, local_path, artifact_path)
            return
        # mlflow-artifacts:/<experiment>/<run>/artifacts, or mlflow-artifacts://host/... (another
        # server than this one is not supported: that is the client's job).
        prefix = urllib.parse.urlparse(root).path.lstrip("/")
        for file, relative in _files(local_path, artifact_path):
            target = "/".join(part for part in (prefix, relative) if part)
            with open(file, "rb") as f:
                self._request("PUT", f"{ARTIFACTS_API}/{urllib.parse.quote(target)}", content=f.read())


class MlflowBackend:
    """Any other tracking URI, through MLflow's own client (imported on first use)."""

    def __init__(self, uri: str) -> None:
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)

    def experiment_id(self, name: str) -> str | None:
        found = self.client.get_experiment_by_name(name)
        return None if found is None else str(found.experiment_id)

    def create_experiment(self, name: str) -> str:
        try:
            return str(self.client.create_experiment(name))
        except Exception as err:
            raise TrackingError(str(err), getattr(err, "error_code", "")) from err

    def create_run(self, experiment_id: str, name: str, tags: Mapping[str, str]) -> str:
        return str(self.client.create_run(experiment_id, tags=dict(tags), run_name=name).info.run_id)

    def get_run(self, run_id: str) -> tuple[str, dict[str, str]]:
        run = self.client.get_run(run_id)
        return str(run.info.experiment_id), dict(run.data.tags)

    def find_run(self, experiment_id: str, filter_string: str) -> str | None:
        found = self.client.search_runs(
            [experiment_id],
            filter_string=filter_string,
            max_results=1,
            order_by=["attributes.start_time ASC"],
        )
        return str(found[0].info.run_id) if found else None

    def log_batch(
        self,
        run_id: str,
        metrics: Sequence[Metric] = (),
        params: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        from mlflow import entities

        self.client.log_batch(
            run_id,
            metrics=[entities.Metric(k, v, t, s) for k, v, t, s in metrics],
            params=[entities.Param(k, v) for k, v in (params or {}).items()],
            tags=[entities.RunTag(k, v) for k, v in (tags or {}).items()],
        )

    def set_terminated(self, run_id: str, status: str) -> None:
        self.client.set_terminated(run_id, status)

    def log_artifacts(self, run_id: str, local_path: str, artifact_path: str) -> None:
        if os.path.isdir(local_path):
            self.client.log_artifacts(run_id, local_path, artifact_path)
        else:
            self.client.log_artifact(run_id, local_path, artifact_path)


def backend(uri: str, timeout: float, environ: Mapping[str, str] | None = None) -> Backend:
    """kfstack's own REST client for an ``http(s)://`` server it can authenticate to (a token,
    a user and password, or none); MLflow's client otherwise: another scheme, or an auth
    provider named by ``MLFLOW_TRACKING_AUTH`` (KFP's plugin sets ``kubernetes``, which a plugin
    of MLflow's client implements)."""
    environ = os.environ if environ is None else environ
    if uri.startswith(("http://", "https://")) and not environ.get(AUTH_PROVIDER_ENV):
        return RestBackend(uri, timeout)
    return MlflowBackend(uri)


def _files(local_path: str, artifact_path: str) -> list[tuple[str, str]]:
    """(file, its path under the run's artifacts) for a file or every file of a folder."""
    if os.path.isfile(local_path):
        return [(local_path, "/".join(p for p in (artifact_path, os.path.basename(local_path)) if p))]
    found = []
    for folder, _, names in os.walk(local_path):
        for name in sorted(names):
            file = os.path.join(folder, name)
            relative = os.path.relpath(file, local_path).replace(os.sep, "/")
            found.append((file, "/".join(p for p in (artifact_path, relative) if p)))
    return found


def _credentials(environ: Mapping[str, str]) -> dict[str, str]:
    token = environ.get("MLFLOW_TRACKING_TOKEN")
    if token:
        return {"Authorization": f"Bearer {token}"}
    user, password = environ.get("MLFLOW_TRACKING_USERNAME"), environ.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    return {}


def _tls(environ: Mapping[str, str]) -> ssl.SSLContext | None:
    if environ.get("MLFLOW_TRACKING_INSECURE_TLS", "").lower() == "true":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    bundle = environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH")
    return ssl.create_default_context(cafile=bundle) if bundle else None


def _now_ms() -> int:
    return int(time.time() * 1000)
