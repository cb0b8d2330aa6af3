"""Uploads, runs and schedules on a Kubeflow Pipelines API server, through ``kfp.Client``.

The functions take a connected client (:func:`connect`) and speak the v2beta1 API. Where a
``kfp.Client`` convenience method fits, they call it; where it does not, they call the generated
service APIs the client exposes (``client.pipelines``, ``client.pipeline_uploads``,
``client.experiments``, ``client.runs``, ``client.recurring_runs``), for three reasons:

- ``upload_pipeline`` names a new pipeline's first version after the pipeline, not after the
  version we upload (kubeflow/pipelines#5881, #13753), see :func:`upload`;
- ``run_pipeline`` and ``create_recurring_run`` need both a pipeline id and a version id, so they
  cannot create a recurring run that follows the pipeline's latest version (KFP >= 2.5 takes a
  ``pipeline_version_reference`` with the pipeline id alone for that, kubeflow/pipelines#11560);
- the convenience methods print their own "details" links; ``kfstack`` prints its own lines.

Names: a version's display name is the pipeline version (``0.1.0+abc1234``, ``+`` allowed); its
``name``, which a Kubernetes-native KFP store turns into an object name, is
:func:`~kfstack.version.label_safe`.

Errors: inside :func:`connect` (or :func:`api_errors`), an unreachable server, refused
credentials and refused requests become one-line :mod:`kfstack.errors` (exit 2, nothing started);
what was asked for that does not exist (pipeline, version, schedule) is a ``UsageError``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import socket
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import kfp
import kfp_server_api
import urllib3
import yaml

from kfstack.errors import (
    KfpAuthError,
    KfpRequestError,
    KfpServerUnavailableError,
    KfstackError,
    UsageError,
)
from kfstack.version import label_safe

# Connecting, and each read of an answer, give up after this long: a host that drops packets or
# never answers must not hang the command (kfp.Client sets no timeout of its own).
REQUEST_TIMEOUT_S = 30.0
PAGE_SIZE = 100
# A recurring run never overlaps itself: a slow retraining is not started again beside itself.
MAX_CONCURRENCY = 1
SUCCEEDED = "SUCCEEDED"
# Run states after which nothing changes (kfp_server_api.V2beta1RuntimeState).
FINAL_STATES = frozenset({"SUCCEEDED", "SKIPPED", "FAILED", "CANCELED"})
_HOST_HINT = (
    "check --host (or $KF_PIPELINES_ENDPOINT, the kubeconfig context) and that the server is up; "
    "from outside the cluster: kubectl port-forward svc/ml-pipeline-ui 8080:80 -n kubeflow, then "
    "--host http://localhost:8080"
)


class _Client(kfp.Client):
    """``kfp.Client`` whose health check asks once, with a clear error, and whose requests are
    bounded in time.

    ``kfp.Client.__init__`` asks ``/healthz`` (single-user deployments: to learn whether the
    server is multi-user) up to five times, 5 s apart, on *any* API error -- a 401 included -- and
    logs a traceback each time. A command line should say at once what is wrong. The answer is
    kept: :func:`connect` asks it when ``__init__`` did not (a namespace was given), as the probe of
    host and credentials before anything is sent.

    Time: ``kfp_server_api`` sends every request with ``timeout=None`` unless the call passes
    ``_request_timeout``, which ``kfp.Client``'s methods never do, so a host that accepts and
    never answers would hang the command. The first health check (which ``__init__`` reaches
    right after creating the API client) gives the client's REST object a default of
    :data:`REQUEST_TIMEOUT_S` for connecting and for each read.
    """

    kfstack_healthz: Any = None

    def _load_config(self, *args: Any, **kwargs: Any) -> Any:
        config = super()._load_config(*args, **kwargs)
        # urllib3 retries a request three times by default, a timed-out read included: four
        # times REQUEST_TIMEOUT_S before a silent host is reported. One retry of a failed
        # connection (a port-forward restarting), none of a read that timed out.
        config.retries = urllib3.util.Retry(total=3, connect=1, read=0)
        return config

    def _bound_requests(self) -> None:
        rest = self.healthzs.api_client.rest_client  # one REST object behind every service API
        if getattr(rest, "kfstack_bounded", False):
            return
        request = rest.request  # RESTClientObject.GET/POST/... all call self.request

        def bounded(*args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
            timeout = _request_timeout or (REQUEST_TIMEOUT_S, REQUEST_TIMEOUT_S)
            return request(*args, _request_timeout=timeout, **kwargs)

        rest.request = bounded
        rest.kfstack_bounded = True

    def get_kfp_healthz(self, sleep_duration: int = 5) -> Any:
        if self.kfstack_healthz is None:
            self._bound_requests()
            with api_errors(self):
                # Raw, to tell the API's JSON from a login page a proxy answers with (HTTP 200).
                raw = self.healthzs.healthz_service_get_healthz(_preload_content=False)
            try:
                answer = json.loads(raw.data)
            except ValueError:
                answer = None
            if not isinstance(answer, dict):
                raise KfpAuthError(
                    f"{api_host(self)} answered the KFP health check with something else than the "
                    f"KFP API (a login page?); pass --token TOKEN, or --host the API itself"
                )
            self.kfstack_healthz = kfp_server_api.V2beta1GetHealthzResponse(
                multi_user=answer.get("multi_user"), pipeline_store=answer.get("pipeline_store")
            )
        return self.kfstack_healthz


@contextlib.contextmanager
def connect(host: str | None = None, namespace: str | None = None, token: str | None = None) -> Iterator[Any]:
    """A ``kfp.Client`` for the KFP API server, its host and credentials checked.

    Only what is given is passed on: ``kfp.Client`` resolves the rest itself (host:
    ``$KF_PIPELINES_ENDPOINT``, else in-cluster, else the kubeconfig context's API proxy;
    namespace: ``~/.config/kfp/context.json``). Connecting and every read of a request are bounded
    by :data:`REQUEST_TIMEOUT_S`; inside the block, API errors become :mod:`kfstack.errors`
    (:func:`api_errors`).

    Args:
        host: The API's URL (``http://localhost:8080``, ``https://kubeflow.example.com/pipeline``).
        namespace: The user namespace of a multi-user KFP.
        token: A bearer token the server (or its proxy) accepts.

    Raises:
        KfpServerUnavailableError: The server cannot be reached.
        KfpAuthError: It refuses the credentials.
    """
    given: dict[str, str] = {}
    if host:
        given["host"] = host
    if namespace:
        given["namespace"] = namespace
    if token:
        given["existing_token"] = token
    # urllib3 logs a warning per retry of a refused connection; the error says it once.
    pool_log = logging.getLogger("urllib3.connectionpool")
    previous_level = pool_log.level
    pool_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            # Noise for a CLI user: "This client only works with Kubeflow Pipeline v2.0.0-beta.2
            # and later", and the https:// it assumes for a host without a scheme (--help says so).
            warnings.filterwarnings("ignore", message="This client only works", category=FutureWarning)
            warnings.filterwarnings("ignore", message="The host .* does not contain", category=UserWarning)
            # __init__ asks the health endpoint itself when no namespace is known (our override:
            # once, errors translated).
            client = _Client(**given)
        client.get_kfp_healthz()
        with api_errors(client):
            yield client
    finally:
        pool_log.setLevel(previous_level)


def api_host(client: Any) -> str:
    """The API server's URL, as ``kfp.Client`` resolved it."""
    return str(client.pipelines.api_client.configuration.host)


@contextlib.contextmanager
def api_errors(client: Any) -> Iterator[None]:
    """Turns what ``kfp_server_api`` and urllib3 raise into one-line :mod:`kfstack.errors`.

    Raises:
        KfpServerUnavailableError: No connection, or none that answered (refused, timed out, TLS).
        KfpAuthError: 401 or 403.
        KfpRequestError: Any other error status, with the server's own message.
    """
    try:
        yield
    except kfp_server_api.ApiException as err:
        raise _api_error(err, api_host(client)) from err
    except (urllib3.exceptions.HTTPError, ConnectionError) as err:
        raise KfpServerUnavailableError(
            f"cannot reach the KFP API server at {api_host(client)}: {_network_reason(err)}; {_HOST_HINT}"
        ) from err


def _api_error(err: Any, host: str) -> KfstackError:
    status = err.status or 0
    message = _server_message(err)
    if status == 0:  # kfp_server_api's own wrapping of a TLS failure
        return KfpServerUnavailableError(
            f"cannot reach the KFP API server at {host}: {message}; " + _HOST_HINT
        )
    answer = f"{status} {err.reason or ''}".strip() + (f": {message}" if message else "")
    if status in (401, 403):
        return KfpAuthError(
            f"the KFP API server at {host} refused the credentials ({answer}); pass --token TOKEN "
            f"(a bearer token it accepts) and, on a multi-user KFP, --namespace your namespace"
        )
    return KfpRequestError(f"the KFP API server at {host} answered {answer}")


def _server_message(err: Any) -> str:
    """The reason in an error answer's body (grpc-gateway's ``message``, the upload server's
    ``error_message``), else the body's start; one line."""
    body = err.body.decode("utf-8", "replace") if isinstance(err.body, bytes) else str(err.body or "")
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        for key in ("message", "error_message", "error"):
            if isinstance(data.get(key), str) and data[key]:
                body = data[key]
                break
    if not body:
        body = str(err.reason or "")
    return " ".join(body.split())[:300]


def _network_reason(err: BaseException) -> str:
    reason = getattr(err, "reason", None) if isinstance(err, urllib3.exceptions.MaxRetryError) else err
    reason = reason or err
    text = str(reason)
    if isinstance(reason, urllib3.exceptions.NameResolutionError):
        return "host name not found"
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        # (A subclass of ConnectTimeoutError in urllib3 2.x: tested first.)
        return "connection refused" if "refused" in text.lower() else f"no connection ({_last_part(text)})"
    if isinstance(reason, urllib3.exceptions.ConnectTimeoutError | socket.timeout):
        return f"connection timed out ({REQUEST_TIMEOUT_S:g} s)"
    if isinstance(reason, urllib3.exceptions.ReadTimeoutError):
        return f"no answer within {REQUEST_TIMEOUT_S:g} s"
    if isinstance(reason, urllib3.exceptions.SSLError):
        return f"TLS failure ({_last_part(text)})"
    return _last_part(text) or type(reason).__name__


def _last_part(text: str) -> str:
    """The end of a nested urllib3 message (``<object at 0x..>: Failed ...: [Errno 111] ...``)."""
    return " ".join(text.split(">: ")[-1].split())


def ui_base(client: Any) -> str:
    """The KFP UI's URL: what ``kfp.Client`` itself prints links with ($KF_PIPELINES_UI_ENDPOINT,
    else the host)."""
    return str(client._get_url_prefix()).rstrip("/")


def pipeline_url(client: Any, pipeline_id: str, version_id: str) -> str:
    return f"{ui_base(client)}/#/pipelines/details/{pipeline_id}/version/{version_id}"


def run_url(client: Any, run_id: str) -> str:
    return f"{ui_base(client)}/#/runs/details/{run_id}"


def schedule_url(client: Any, recurring_run_id: str) -> str:
    return f"{ui_base(client)}/#/recurringrun/details/{recurring_run_id}"


def _namespace(client: Any) -> str | None:
    """The user namespace ``kfp.Client`` holds (--namespace, or its context file), if any."""
    return client.get_user_namespace() or None


def _name_filter(name: str) -> str:
    """A v2beta1 list filter: display_name equals ``name``."""
    return json.dumps({"predicates": [{"operation": "EQUALS", "key": "display_name", "string_value": name}]})


def _pages(list_page: Callable[[str], Any], items: str) -> Iterator[Any]:
    """Every item of a paged v2beta1 list; ``list_page(token)`` asks one page."""
    token = ""
    while True:
        response = list_page(token)
        yield from getattr(response, items) or []
        token = response.next_page_token
        if not token:
            return


# --- pipelines and versions -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PipelineVersionRef:
    """A pipeline version on the server.

    Attributes:
        pipeline: The pipeline's name (its display name on the server).
        pipeline_id: Its server id.
        version: The version's display name.
        version_id: Its server id.
    """

    pipeline: str
    pipeline_id: str
    version: str
    version_id: str


@dataclasses.dataclass(frozen=True)
class Upload:
    """What :func:`upload` did.

    Attributes:
        ref: The pipeline version, uploaded now or before.
        new_pipeline: The pipeline did not exist; it was created with ``ref`` as its first version.
        new_version: ``ref`` was uploaded now (False: it already was, nothing was uploaded).
    """

    ref: PipelineVersionRef
    new_pipeline: bool
    new_version: bool


def find_pipeline(client: Any, name: str) -> str | None:
    """The id of the pipeline named ``name`` (in the client's namespace), or ``None``.

    Raises:
        UsageError: Several pipelines carry the name.
    """
    response = client.list_pipelines(filter=_name_filter(name), namespace=_namespace(client), page_size=10)
    ids = [p.pipeline_id for p in response.pipelines or [] if p.display_name == name]
    if len(ids) > 1:
        raise UsageError(f"{len(ids)} pipelines on the server are named {name!r} (ids {', '.join(ids)})")
    return ids[0] if ids else None


def pipeline_versions(client: Any, pipeline_id: str) -> list[Any]:
    """Every version of the pipeline, newest first."""
    return list(
        _pages(
            lambda token: client.list_pipeline_versions(
                pipeline_id, page_token=token, page_size=PAGE_SIZE, sort_by="created_at desc"
            ),
            "pipeline_versions",
        )
    )


def _is_version(candidate: Any, version: str) -> bool:
    # Older servers (before KFP 2.5) keep one name per version; newer ones a name and a display
    # name. A version uploaded as 0.1.0+abc is 0.1.0-abc where names must be label-safe.
    return bool({version, label_safe(version)} & {candidate.display_name, candidate.name})


def find_version(client: Any, pipeline_id: str, version: str) -> Any | None:
    """The pipeline's version ``version`` (display name or label-safe name), or ``None``."""
    return next((v for v in pipeline_versions(client, pipeline_id) if _is_version(v, version)), None)


def upload(client: Any, name: str, package_path: str, version: str) -> Upload:
    """Uploads the compiled pipeline ``package_path`` as version ``version`` of pipeline ``name``.

    A pipeline that does not exist is created, with ``version`` as its first version. A version
    that exists already is not uploaded again (``new_version`` False).

    The first version: ``/apis/v2beta1/pipelines/upload`` (``kfp.Client.upload_pipeline``)
    creates the pipeline *and* a first version named after the pipeline, whatever the file's
    version (kubeflow/pipelines#5881, #13753); the usual workaround, uploading again and deleting
    that version, leaves a window with a wrongly named version and a failure mode that keeps it.
    ``CreatePipelineAndVersion`` (``/apis/v2beta1/pipelines/create``) names both, but takes the
    version's package as a URL the server downloads, not a file from this machine. So: create the
    pipeline entity alone (``POST /apis/v2beta1/pipelines``, a ``V2beta1Pipeline`` without
    version: the server creates no version then), then upload the file as its version with our
    name. If the second step fails, the pipeline exists without a version and the next
    ``upload`` adopts it.

    Raises:
        KfpRequestError, KfpAuthError, KfpServerUnavailableError: Within :func:`connect`.
    """
    namespace = _namespace(client)
    pipeline_id = find_pipeline(client, name)
    new_pipeline = pipeline_id is None
    if pipeline_id is not None:
        existing = find_version(client, pipeline_id, version)
        if existing is not None:
            return Upload(_ref(name, existing), new_pipeline=False, new_version=False)
    else:
        try:
            created = client.pipelines.pipeline_service_create_pipeline(
                pipeline=kfp_server_api.V2beta1Pipeline(
                    name=name, display_name=name, description=_description(package_path), namespace=namespace
                )
            )
            pipeline_id = created.pipeline_id
        except kfp_server_api.ApiException as err:
            # Another upload created it between our lookup and now: adopt it.
            pipeline_id = find_pipeline(client, name) if err.status == 409 else None
            if pipeline_id is None:
                raise
    try:
        uploaded = client.pipeline_uploads.upload_pipeline_version(
            package_path,
            name=label_safe(version),
            display_name=version,
            pipelineid=pipeline_id,
            description=f"{name} {version}, uploaded by kfstack",
        )
    except kfp_server_api.ApiException as err:
        existing = find_version(client, pipeline_id, version) if err.status == 409 else None
        if existing is None:
            raise
        return Upload(_ref(name, existing), new_pipeline=new_pipeline, new_version=False)
    return Upload(_ref(name, uploaded), new_pipeline=new_pipeline, new_version=True)


def _ref(pipeline: str, version: Any) -> PipelineVersionRef:
    return PipelineVersionRef(
        pipeline=pipeline,
        pipeline_id=version.pipeline_id,
        version=version.display_name or version.name,
        version_id=version.pipeline_version_id,
    )


def _description(package_path: str) -> str | None:
    """The compiled pipeline's description (``pipelineInfo.description``), for the UI."""
    with open(package_path, encoding="utf-8") as f:
        spec: dict[str, Any] = next((d for d in yaml.safe_load_all(f) if d), {})
    description = spec.get("pipelineInfo", {}).get("description")
    return str(description) if description else None


def require_pipeline(client: Any, name: str) -> str:
    """The id of the pipeline named ``name``.

    Raises:
        UsageError: The server has none of that name (in the client's namespace).
    """
    pipeline_id = find_pipeline(client, name)
    if pipeline_id is None:
        where = f" in namespace {_namespace(client)}" if _namespace(client) else ""
        raise UsageError(
            f"pipeline {name!r} is not on the KFP server at {api_host(client)}{where}; "
            f"upload it first: kfstack upload {name}"
        )
    return pipeline_id


def resolve_version(client: Any, pipeline: str, version: str | None = None) -> PipelineVersionRef:
    """Pipeline ``pipeline``'s version ``version`` on the server, or its latest when ``None``.

    Raises:
        UsageError: No such pipeline, no such version, or a pipeline without versions.
    """
    pipeline_id = require_pipeline(client, pipeline)
    versions = pipeline_versions(client, pipeline_id)
    if not versions:
        raise UsageError(f"pipeline {pipeline!r} has no version yet; upload one: kfstack upload {pipeline}")
    if version is None:
        return _ref(pipeline, versions[0])
    found = next((v for v in versions if _is_version(v, version)), None)
    if found is None:
        newest = ", ".join(v.display_name or v.name for v in versions[:5])
        raise UsageError(f"pipeline {pipeline!r} has no version {version!r}; its newest: {newest}")
    return _ref(pipeline, found)


# --- experiments and runs ---------------------------------------------------------------------


def ensure_experiment(client: Any, name: str) -> tuple[str, bool]:
    """The id of experiment ``name`` (in the client's namespace), created if absent; and whether
    it was created now."""
    namespace = _namespace(client)
    response = client.list_experiments(filter=_name_filter(name), namespace=namespace, page_size=10)
    for experiment in response.experiments or []:
        if experiment.display_name == name:
            return str(experiment.experiment_id), False
    created = client.experiments.experiment_service_create_experiment(
        experiment=kfp_server_api.V2beta1Experiment(
            display_name=name, namespace=namespace, description="created by kfstack"
        )
    )
    return str(created.experiment_id), True


def start_run(
    client: Any, ref: PipelineVersionRef, experiment_id: str, arguments: Mapping[str, Any], display_name: str
) -> str:
    """Starts a run of the pipeline version ``ref`` with ``arguments``; returns its id."""
    run = client.runs.run_service_create_run(
        run=kfp_server_api.V2beta1Run(
            experiment_id=experiment_id,
            display_name=display_name,
            pipeline_version_reference=kfp_server_api.V2beta1PipelineVersionReference(
                pipeline_id=ref.pipeline_id, pipeline_version_id=ref.version_id
            ),
            runtime_config=kfp_server_api.V2beta1RuntimeConfig(parameters=dict(arguments)),
        )
    )
    return str(run.run_id)


def wait_for_run(
    client: Any,
    run_id: str,
    on_task: Callable[[str, str], None],
    poll_interval_seconds: float = 10.0,
    max_poll_errors: int = 5,
    sleep: Callable[[float], None] | None = None,
) -> Any:
    """Polls run ``run_id`` until it ends; returns its last ``V2beta1Run``.

    Never cancels the run: stopping the wait (Ctrl-C) leaves it running on the cluster.

    Args:
        on_task: Called with (task display name, state) whenever a task's state changes.
        poll_interval_seconds: Seconds between two requests.
        max_poll_errors: Connection errors and 5xx answers in a row tolerated (a restarting API
            server) before the last one is raised.
        sleep: Waits between polls (default: ``time.sleep``, looked up at each call).
    """
    pause = sleep or (lambda seconds: time.sleep(seconds))
    states: dict[str, str] = {}
    errors = 0
    while True:
        try:
            run = client.get_run(run_id)
            errors = 0
        except (urllib3.exceptions.HTTPError, ConnectionError, kfp_server_api.ApiException) as err:
            transient = not isinstance(err, kfp_server_api.ApiException) or (err.status or 0) >= 500
            errors += 1
            if not transient or errors >= max_poll_errors:
                raise
            pause(poll_interval_seconds)
            continue
        details = run.run_details.task_details if run.run_details else None
        for task in details or []:
            if not task.display_name:
                continue
            state = task.state or "PENDING"
            key = task.task_id or task.display_name
            if states.get(key) != state:
                states[key] = state
                on_task(task.display_name, state)
        if run.state in FINAL_STATES:
            return run
        pause(poll_interval_seconds)


def run_record(run: Any, url: str, ref: PipelineVersionRef, experiment: str) -> dict[str, Any]:
    """A finished cluster run as JSON data (``kfstack run --wait --summary-json``)."""
    details = run.run_details.task_details if run.run_details else None
    return {
        "run_id": run.run_id,
        "url": url,
        "status": run.state,
        "error": run.error.message if run.error else None,
        "pipeline": ref.pipeline,
        "pipeline_id": ref.pipeline_id,
        "version": ref.version,
        "version_id": ref.version_id,
        "experiment": experiment,
        "parameters": dict(run.runtime_config.parameters or {}) if run.runtime_config else {},
        "created_at": _iso(run.created_at),
        "finished_at": _iso(run.finished_at),
        "tasks": [{"name": t.display_name, "state": t.state} for t in details or [] if t.display_name],
    }


def _iso(moment: datetime.datetime | None) -> str | None:
    return moment.isoformat() if moment else None


# --- recurring runs ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A recurring run as ``kfstack schedule --list`` shows it.

    Attributes:
        name: Its display name.
        id: Its recurring run id.
        cron: Its cron expression (or ``every <n>s`` for a periodic one).
        status: ``ENABLED`` or ``DISABLED``.
        pipeline_id: The pipeline it runs.
        version_id: The version it is pinned to; ``None``: the latest at each run.
    """

    name: str
    id: str
    cron: str
    status: str
    pipeline_id: str | None
    version_id: str | None


def schedules(client: Any, pipeline_id: str | None = None) -> list[Schedule]:
    """The recurring runs in the client's namespace (of one pipeline when ``pipeline_id``)."""
    namespace = _namespace(client)
    found = []
    for run in _pages(
        lambda token: client.list_recurring_runs(page_token=token, page_size=PAGE_SIZE, namespace=namespace),
        "recurring_runs",
    ):
        reference = run.pipeline_version_reference
        schedule = Schedule(
            name=run.display_name,
            id=run.recurring_run_id,
            cron=_trigger_text(run.trigger),
            status=str(run.status or run.mode or "?"),
            pipeline_id=reference.pipeline_id if reference else None,
            version_id=(reference.pipeline_version_id or None) if reference else run.pipeline_version_id,
        )
        if pipeline_id is None or schedule.pipeline_id == pipeline_id:
            found.append(schedule)
    return found


def _trigger_text(trigger: Any) -> str:
    if trigger and trigger.cron_schedule and trigger.cron_schedule.cron:
        return str(trigger.cron_schedule.cron)
    if trigger and trigger.periodic_schedule and trigger.periodic_schedule.interval_second:
        return f"every {trigger.periodic_schedule.interval_second}s"
    return "?"


def create_schedule(
    client: Any,
    name: str,
    ref: PipelineVersionRef,
    pinned: bool,
    experiment_id: str,
    cron: str,
    arguments: Mapping[str, Any],
) -> tuple[str, list[str]]:
    """Creates recurring run ``name`` and removes any earlier one of that name.

    KFP has no update of a recurring run. The new one is created *before* the old ones are
    deleted, so a refused request never leaves the pipeline unscheduled.

    Args:
        ref: The pipeline, and the version to pin when ``pinned``.
        pinned: Run ``ref``'s version; else whatever version is the pipeline's latest at each
            run (the reference carries the pipeline id only; KFP >= 2.5).
        cron: Six fields, seconds first (:func:`kfstack.app.cron.parse_cron`).
        arguments: Pipeline parameters (the rest take the compiled defaults).

    Returns:
        The new recurring run's id, and the ids of the ones it replaced.

    Raises:
        UsageError: A schedule of that name runs another pipeline (nothing is created or
            deleted: a name is not taken from another pipeline's schedule).
    """
    same_name = [s for s in schedules(client) if s.name == name]
    others = [s for s in same_name if s.pipeline_id and s.pipeline_id != ref.pipeline_id]
    if others:
        raise UsageError(
            f"schedule {name!r} runs another pipeline (id {others[0].pipeline_id}); choose another "
            f"--name, or delete that schedule first (kfstack schedule --delete {name})"
        )
    previous = [s.id for s in same_name]
    created = client.recurring_runs.recurring_run_service_create_recurring_run(
        recurring_run=kfp_server_api.V2beta1RecurringRun(
            display_name=name,
            description=f"{ref.pipeline} {ref.version if pinned else 'latest version'}, scheduled by kfstack",
            experiment_id=experiment_id,
            pipeline_version_reference=kfp_server_api.V2beta1PipelineVersionReference(
                pipeline_id=ref.pipeline_id, pipeline_version_id=ref.version_id if pinned else None
            ),
            runtime_config=kfp_server_api.V2beta1RuntimeConfig(parameters=dict(arguments)),
            trigger=kfp_server_api.V2beta1Trigger(
                cron_schedule=kfp_server_api.V2beta1CronSchedule(cron=cron)
            ),
            # int64 in the API: a JSON string, as protojson writes it.
            max_concurrency=str(MAX_CONCURRENCY),
            # Missed runs (a paused schedule, a controller down) are not replayed one by one:
            # the next run retrains on the data as it is then.
            no_catchup=True,
            mode=kfp_server_api.RecurringRunMode.ENABLE,
        )
    )
    for old in previous:
        client.delete_recurring_run(old)
    return str(created.recurring_run_id), previous


def delete_schedules(client: Any, name: str) -> list[str]:
    """Deletes the recurring run(s) named ``name``; returns their ids.

    Raises:
        UsageError: None has that name (the message lists the names there are).
    """
    found = schedules(client)
    ids = [s.id for s in found if s.name == name]
    if not ids:
        known = ", ".join(sorted({s.name for s in found})) or "none"
        raise UsageError(f"no schedule named {name!r}; schedules: {known}")
    for recurring_run_id in ids:
        client.delete_recurring_run(recurring_run_id)
    return ids


def pipeline_name(client: Any, pipeline_id: str) -> str:
    """The display name of pipeline ``pipeline_id`` (its id when it cannot be read)."""
    try:
        return str(client.get_pipeline(pipeline_id).display_name or pipeline_id)
    except kfp_server_api.ApiException:
        return pipeline_id


def version_name(client: Any, pipeline_id: str, version_id: str) -> str:
    """The display name of a pipeline version (its id when it cannot be read: deleted)."""
    try:
        version = client.get_pipeline_version(pipeline_id, version_id)
    except kfp_server_api.ApiException:
        return version_id
    return str(version.display_name or version.name or version_id)
