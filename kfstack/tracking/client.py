"""A tracking client that never costs a run: MLflow's, bounded, and off after its first failure.

Every call kfstack makes to a tracking server goes through :class:`Tracker`:

- each request waits at most :data:`REQUEST_TIMEOUT_SECONDS` and is not retried (MLflow's own
  defaults are a 120 s timeout and 7 retries with backoff: minutes against a server that accepts
  and never answers). The bounds are set as MLflow's environment variables, where the process has
  none of its own, so the team's code in the same process (and the processes it starts) waits no
  longer either;
- the first call that fails turns tracking off for the rest of the process and says so once, on
  stderr and in the run's notice file (:data:`NOTICE_FILE_ENV`, embedded: in the run directory),
  naming what was not tracked; every later call is skipped, its kind recorded once;
- a process that finds a notice in that file starts off: on the embedded platform, one failure
  turns tracking off for every task, replica and trial of the run, so a server that never answers
  adds at most one timeout to the run. A cluster's pods share no file: each pod gives it at most
  one timeout.

Nothing else kfstack records (KFP artifacts, lineage, the model registry, the run summary) waits
for or reads a tracking server.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kfstack.tracking.rest import Backend, TrackingError, backend

TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
"""MLflow's own: where runs are tracked. Its presence turns tracking on in a task or replica."""
RUN_ID_ENV = "MLFLOW_RUN_ID"
"""MLflow's own: the run the process logs into (KFP's plugin sets it to the task's run)."""
PARENT_RUN_ENV = "KFSTACK_MLFLOW_PARENT_RUN_ID"
"""The run a tuning trial's own run nests under (the tuning task's), in the trial template."""
NOTICE_FILE_ENV = "KFSTACK_TRACKING_NOTICES"
"""A JSON-lines file the processes of one run share: what each could not track, and why."""
RUN_FILE_ENV = "KFSTACK_MLFLOW_RUN_FILE"
"""Embedded, in place of ``MLFLOW_RUN_ID`` for a task that started while the store's server was
still starting: a file the run fills with the task's run id (empty: none) once it is made
(:func:`join_run`)."""
RUN_FILE_WAIT_SECONDS = 30.0
"""The longest a process waits for its run file: the 30 s a run may lose to tracking in all. The
run fills it once its server answered (or gave up after
:data:`kfstack.tracking.store.START_TIMEOUT_SECONDS`) and the parent's and the task's runs were
made: a few requests, each bounded, the first failure ending them all."""

SWITCH_ENV = "KFSTACK_TRACKING"
"""``off``: the environment's ``--no-tracking`` (a team's CI, a test suite), on both platforms."""

REQUEST_TIMEOUT_SECONDS = 5
"""How long one request to the tracking server may take (MLflow's ``MLFLOW_HTTP_REQUEST_TIMEOUT``)."""
_BOUNDS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": str(REQUEST_TIMEOUT_SECONDS),
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
}

# MLflow's limits on one value (MLflow 2 and 3): longer ones are cut, not refused.
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
_BATCH = 100  # params or tags per log_batch request (MLflow's limit: 100 params, 1000 metrics)

T = TypeVar("T")


def bound_requests(environ: dict[str, str] | None = None) -> dict[str, str]:
    """MLflow's request bounds (:data:`REQUEST_TIMEOUT_SECONDS`, no retries), set in ``environ``
    (default: this process's) where it has none; returns what it set."""
    target = os.environ if environ is None else environ
    added = {name: value for name, value in _BOUNDS.items() if name not in target}
    target.update(added)
    return added


def switched_off(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment turns tracking off (:data:`SWITCH_ENV`)."""
    environ = os.environ if environ is None else environ
    return environ.get(SWITCH_ENV, "").strip().lower() == "off"


def request_bounds(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """MLflow's request bounds as ``environ`` (default: this process's) sets them, kfstack's
    (:data:`REQUEST_TIMEOUT_SECONDS`, no retries) where it sets none: what a pod kfstack launches
    is told."""
    environ = os.environ if environ is None else environ
    return {name: environ.get(name, value) for name, value in _BOUNDS.items()}


def client_installed() -> bool:
    """Whether an MLflow client (``mlflow-skinny`` or ``mlflow``) can be imported here."""
    import importlib.util

    return importlib.util.find_spec("mlflow") is not None


def reachable(uri: str) -> bool:
    """Whether kfstack can track to ``uri`` here: an ``http(s)://`` server it speaks to itself
    (:mod:`kfstack.tracking.rest`), any other URI through an installed MLflow client."""
    return uri.startswith(("http://", "https://")) or client_installed()


INSTALL_HINT = (
    "pip install 'kfstack[tracking]' (the client) or 'kfstack[mlflow]' (with the embedded store and UI)"
)


class Tracker:
    """Calls to one tracking server, each bounded and none of them raising (module docstring).

    Args:
        uri: The tracking URI (``http://...``, ``databricks``, ``sqlite:///...``).
        notices: The run's notice file (:data:`NOTICE_FILE_ENV`), or None (this process only).
        origin: Who is tracking, for the notice (a task's name, ``trial-3``, ``run``).
    """

    def __init__(self, uri: str, notices: str | None = None, origin: str = "") -> None:
        self.uri, self.notices, self.origin = uri, notices, origin
        self.error = ""  # why tracking is off in this process; empty while it is on
        self._skipped: set[str] = set()
        self._lock = threading.Lock()
        self._client: Backend | None = None

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None, origin: str = "") -> Tracker | None:
        """The tracker a task or replica's environment asks for, or None where it names no
        tracking URI, or one only MLflow's client reaches and none is installed (then nothing is
        tracked, and nothing said here: the run said it when it started)."""
        env = os.environ if env is None else env
        uri = env.get(TRACKING_URI_ENV, "")
        if not uri or not reachable(uri):
            return None
        return cls(uri, env.get(NOTICE_FILE_ENV) or None, origin)

    @property
    def active(self) -> bool:
        """Whether calls still reach the server: no failure here, nor one noted by the run."""
        if self.error:
            return False
        earlier = read_notices(self.notices) if self.notices else []
        if earlier:
            self.error = (
                f"off since {earlier[0].get('origin') or 'another process'} failed: {earlier[0]['error']}"
            )
            return False
        return True

    def call(self, what: str, function: Callable[[Backend], T]) -> T | None:
        """``function(client)`` where tracking is on; None where it is off or the call fails
        (then it is off from here, said once). ``what`` names what the call tracks."""
        with self._lock:
            if not self.active:
                self._skip(what)
                return None
            try:
                return function(self._mlflow())
            except Exception as err:  # any failure of a server or client: never the run's
                self._fail(what, err)
                return None

    def give_up(self, what: str, err: Exception) -> None:
        """Tracking off from here, said once, for a failure outside a call (a server that never
        started)."""
        with self._lock:
            self._fail(what, err)

    def _mlflow(self) -> Backend:
        if self._client is None:
            bound_requests()  # MLflow's own client, where it is used, waits no longer
            self._client = backend(self.uri, REQUEST_TIMEOUT_SECONDS)
        return self._client

    def _fail(self, what: str, err: Exception) -> None:
        reason = " ".join(f"{type(err).__name__}: {err}".split())[:300]
        self.error = reason
        who = f"{self.origin}: " if self.origin else ""
        print(
            f"kfstack: {who}tracking off: {self.uri} failed ({reason}); {what} and what follows are "
            "not tracked; the run goes on",
            file=sys.stderr,
            flush=True,
        )
        self._note({"origin": self.origin, "error": reason, "not_tracked": what})
        self._skipped.add(what)

    def _skip(self, what: str) -> None:
        if what not in self._skipped:
            self._skipped.add(what)
            self._note({"origin": self.origin, "not_tracked": what})

    def _note(self, entry: dict[str, str]) -> None:
        if not self.notices:
            return
        with contextlib.suppress(OSError), open(self.notices, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")  # one short line: appends of this size do not interleave

    # What kfstack tracks, each a bounded call.

    def experiment_id(self, name: str) -> str | None:
        """The experiment of that name, made where there is none (two processes may race)."""

        def find_or_make(client: Backend) -> str:
            found = client.experiment_id(name)
            if found is not None:
                return found
            try:
                return client.create_experiment(name)
            except TrackingError:
                found = client.experiment_id(name)  # another process made it meanwhile
                if found is None:
                    raise
                return found

        return self.call(f"experiment {name}", find_or_make)

    def start_run(
        self, experiment: str, name: str, tags: Mapping[str, Any], parent: str | None = None
    ) -> str | None:
        """A new run (nested under ``parent`` when given); its id, or None."""
        experiment_id = self.experiment_id(experiment)
        if experiment_id is None:
            return None
        all_tags = {**_strings(tags, MAX_TAG_VALUE), **({"mlflow.parentRunId": parent} if parent else {})}
        return self.call(f"the run {name}", lambda client: client.create_run(experiment_id, name, all_tags))

    def find_or_start_run(
        self,
        experiment: str,
        name: str,
        tags: Mapping[str, Any],
        found_by: Mapping[str, str],
        parent: str | None = None,
    ) -> str | None:
        """The run of ``experiment`` (nested under ``parent`` when given) that carries the tags
        ``found_by``, made with ``tags`` where there is none; its id, or None. Where processes
        race to make it, each takes the earliest made (the others' stay empty)."""
        experiment_id = self.experiment_id(experiment)
        if experiment_id is None:
            return None
        nested = {"mlflow.parentRunId": parent} if parent else {}
        query = tag_filter({**found_by, **nested})
        all_tags = {**_strings({**tags, **found_by}, MAX_TAG_VALUE), **nested}

        def find_or_create(client: Backend) -> str | None:
            found = client.find_run(experiment_id, query)
            if found is None:
                made = client.create_run(experiment_id, name, all_tags)
                found = client.find_run(experiment_id, query)
                if found != made:  # another process made one first: this one stays empty
                    client.set_terminated(made, "KILLED")
            return found

        return self.call(f"the run {name}", find_or_create)

    def find_run(self, experiment: str, found_by: Mapping[str, str]) -> str | None:
        """The earliest run of ``experiment`` carrying the tags ``found_by``, or None (nothing
        is made: neither the experiment nor the run)."""

        def find(client: Backend) -> str | None:
            experiment_id = client.experiment_id(experiment)
            return None if experiment_id is None else client.find_run(experiment_id, tag_filter(found_by))

        return self.call(f"the run of {experiment}", find)

    def run_of(self, run_id: str, what: str) -> tuple[str, dict[str, str]] | None:
        """A run's experiment id and tags, or None."""
        return self.call(what, lambda client: client.get_run(run_id))

    def log_params(self, run_id: str, params: Mapping[str, Any], what: str = "parameters") -> None:
        self._in_batches(run_id, "params", _strings(params, MAX_PARAM_VALUE), what)

    def set_tags(self, run_id: str, tags: Mapping[str, Any], what: str = "tags") -> None:
        self._in_batches(run_id, "tags", _strings(tags, MAX_TAG_VALUE), what)

    def _in_batches(self, run_id: str, kind: str, values: dict[str, str], what: str) -> None:
        """``values`` as the run's ``params`` or ``tags``, :data:`_BATCH` to a request."""
        items = list(values.items())
        for start in range(0, len(items), _BATCH):
            chunk = dict(items[start : start + _BATCH])
            params, tags = (chunk, None) if kind == "params" else (None, chunk)
            self.call(what, functools.partial(_log_batch, run_id=run_id, params=params, tags=tags))

    def log_metrics(
        self, run_id: str, metrics: Mapping[str, float], step: int = 0, what: str = "metrics"
    ) -> None:
        """Finite numbers only (a metric MLflow cannot hold, None or a string, is left out)."""
        now = int(time.time() * 1000)
        items = [
            (name, float(value), now, step)
            for name, value in metrics.items()
            if isinstance(value, int | float) and not isinstance(value, bool) and value == value
        ]
        if items:
            self.call(what, lambda client: client.log_batch(run_id, metrics=items))

    def log_artifact(self, run_id: str, path: str, artifact_path: str | None = None, what: str = "") -> None:
        """A file, or a directory's files, under ``artifact_path`` of the run's artifacts."""
        if os.path.exists(path):
            self.call(what or path, lambda client: client.log_artifacts(run_id, path, artifact_path or ""))

    def end_run(self, run_id: str, status: str) -> None:
        """``status``: MLflow's FINISHED, FAILED or KILLED."""
        self.call("the run's end", lambda client: client.set_terminated(run_id, status))

    def not_tracked(self) -> list[str]:
        """What this process could not track, by name."""
        return sorted(self._skipped)


def read_notices(path: str | None) -> list[dict[str, str]]:
    """The entries of a run's notice file whose ``error`` says why tracking stopped, first
    first, then what was skipped; [] when there is no file."""
    if not path:
        return []
    entries = []
    with contextlib.suppress(OSError), open(path, encoding="utf-8") as f:
        for line in f:
            with contextlib.suppress(ValueError):
                entries.append(json.loads(line))
    return [e for e in entries if e.get("error")] + [e for e in entries if not e.get("error")]


def process_environment(uri: str, run_id: str | None, notices: str | None) -> dict[str, str]:
    """The variables that put a process's MLflow calls (kfstack's and the team's) in ``run_id``,
    bounded as kfstack's are where this process's environment sets no bounds of its own."""
    values = {TRACKING_URI_ENV: uri, **request_bounds()}
    if run_id:
        values[RUN_ID_ENV] = run_id
    if notices:
        values[NOTICE_FILE_ENV] = notices
    return values


def join_run(env: Mapping[str, str] | None = None, wait: float = RUN_FILE_WAIT_SECONDS) -> Mapping[str, str]:
    """``env`` (default: this process's) with ``MLFLOW_RUN_ID`` set from its run file
    (:data:`RUN_FILE_ENV`), waiting for the file at most ``wait`` seconds; the id is set in this
    process's environment too, so the team's code (and what it starts) logs into the run. ``env``
    unchanged where it names no run file, already names a run, or the run has none.

    kfstack's wrappers of a team's code (the training entrypoint, the Spark driver) call it before
    the code starts."""
    env = os.environ if env is None else env
    path = env.get(RUN_FILE_ENV, "")
    if not path or env.get(RUN_ID_ENV):
        return env
    deadline = time.monotonic() + wait
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not os.path.exists(path):
        print(
            f"kfstack: tracking: this task's run was not made in {wait:.0f} s; what this process "
            "logs is not tracked",
            file=sys.stderr,
            flush=True,
        )
        return env
    run_id = ""
    with contextlib.suppress(OSError), open(path, encoding="utf-8") as f:
        run_id = f.read().strip()
    if not run_id:
        return env
    os.environ[RUN_ID_ENV] = run_id
    return {**env, RUN_ID_ENV: run_id}


def write_run_file(path: str, run_id: str | None) -> None:
    """Fills a run file (:data:`RUN_FILE_ENV`) whole at once: a reader sees no file or the id."""
    partial = f"{path}.partial"
    with contextlib.suppress(OSError):
        with open(partial, "w", encoding="utf-8") as f:
            f.write(run_id or "")
        os.replace(partial, path)


def _log_batch(
    client: Backend, run_id: str, params: dict[str, str] | None = None, tags: dict[str, str] | None = None
) -> None:
    client.log_batch(run_id, params=params, tags=tags)


def tag_filter(tags: Mapping[str, str]) -> str:
    """MLflow's search filter for runs carrying every tag given."""
    return " and ".join(f"tags.`{key}` = '{_quoted(value)}'" for key, value in tags.items())


def _strings(values: Mapping[str, Any], limit: int) -> dict[str, str]:
    """Each value as MLflow holds it: a string, JSON for a structure, cut at ``limit``."""
    out = {}
    for key, value in values.items():
        if value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        out[str(key)[:250]] = text[:limit]
    return out


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")
