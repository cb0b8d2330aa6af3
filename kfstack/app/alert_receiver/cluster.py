"""The cluster's retraining: recurring runs and runs on the KFP API.

An alert names an InferenceService: ``inference_service`` in ``namespace``. The runs that
deploy it are those whose ``serving_name`` parameter is its name and whose *launch namespace*
is its namespace: where the run's launchers create their objects, the InferenceService
included -- the ``launch_namespace`` setting (the run's argument or settings override, else
what its pipeline version compiles in, as ``upload --env`` writes an environment's), or, when
that is empty, the run's own namespace. ``serving_name`` is read the same way.

What the receiver serves (``--namespace``, the Component's own by default) depends on the KFP:

- on a multi-user KFP, KFP namespaces: it searches the recurring runs of each served namespace
  S, and the runs of S, for those deploying the alert's InferenceService -- a recurring run of
  S with no launch namespace deploys into S, one with ``launch_namespace`` N into N, wherever
  the receiver runs. So a profile's schedule that launches into another namespace answers the
  alerts of that namespace, and the same ``serving_name`` may be scheduled in two profiles for
  two namespaces;
- on a standalone KFP, which has no namespaces, the namespaces whose alerts it acts on: an
  alert of another namespace is refused before any recurring run is read (it keeps ns-b's
  ``flights`` from starting ns-a's schedule). Its recurring runs are all searched; one with a
  launch namespace deploys into that namespace only, one without into KFP's own namespace,
  which the receiver is not told: it counts for every namespace served, so its ``serving_name``
  must be unique among them.

An alert without a ``namespace`` label, or an empty one, is refused before the KFP API is asked
(on a multi-user KFP, "" would be the client's own namespace). Only enabled recurring runs
count; exactly one must deploy the alert's InferenceService, else the alert is refused (the log
line names what was searched and the candidates).

The run started is one run of the recurring run's pipeline version (the version it pins, else
the pipeline's latest, as the recurring run itself would take), in its experiment, as its
service account (the one its own runs get: a run that named none would get KFP's default, on a
multi-user KFP the profile's ``default-editor``), with its parameters plus ``trigger`` and, when
the pipeline declares it, ``force=true``. The model's runs are the runs of that pipeline (any
version) in the recurring run's namespace (on a standalone KFP: all of them), whatever their
experiment, that deploy the alert's InferenceService by the same rule or that the recurring run
created, read from the KFP API at each decision.

The KFP API's token (``--kfp-token-file``) is read at each decision, as the webhook's is: a
projected service-account token is renewed by the kubelet before it expires.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kfstack.app.alert_receiver.decisions import (
    FORCE_PARAMETER,
    NAMESPACE_LABEL,
    NO_TIME,
    SERVING_NAME_PARAMETER,
    TRIGGER_PARAMETER,
    PastRun,
    Refusal,
)
from kfstack.app.alert_receiver.tokens import read_token
from kfstack.app.kfp_server import connection, pipelines, runs
from kfstack.app.kfp_server.pipelines import PipelineVersionRef
from kfstack.errors import KfstackError, UsageError
from kfstack.pipeline_spec import compiled_setting
from kfstack.settings import SETTINGS_OVERRIDES

# The pipeline parameter naming where a run's launchers create their objects, its
# InferenceService included (kfstack.kubernetes.placement.Placement.launch_namespace, a parameter
# of every kfstack pipeline that deploys); empty: the run's own namespace.
LAUNCH_NAMESPACE_PARAMETER = "launch_namespace"

# V2beta1RecurringRun (kfp-server-api 2.x): ``mode`` is the switch as stored (ENABLE, DISABLE,
# MODE_UNSPECIFIED), ``status`` what the scheduled workflow reports (ENABLED, DISABLED,
# STATUS_UNSPECIFIED); the API server fills mode from the job's Enabled flag and may leave status
# unspecified (kubeflow/pipelines backend/src/apiserver/server/api_converter.go,
# toApiRecurringRun, and its test's expected ``Mode: RecurringRun_ENABLE`` without a status).
_MODE_ENABLE, _MODE_DISABLE = "ENABLE", "DISABLE"
_STATUS_ENABLED, _STATUS_DISABLED = "ENABLED", "DISABLED"


def enabled(recurring: Any) -> bool:
    """The recurring run is on: one of its fields says enabled and neither says disabled (an
    unspecified field says nothing)."""
    status, mode = str(recurring.status or ""), str(recurring.mode or "")
    if status == _STATUS_DISABLED or mode == _MODE_DISABLE:
        return False
    return status == _STATUS_ENABLED or mode == _MODE_ENABLE


def pipeline_filter(pipeline_id: str) -> str:
    """A v2beta1 run list filter: runs of pipeline ``pipeline_id``, any version
    (``pipeline_id`` is a run filter key: kubeflow/pipelines backend/src/apiserver/model/run.go,
    runAPIToModelFieldMap)."""
    predicate = {"operation": "EQUALS", "key": "pipeline_id", "string_value": pipeline_id}
    return json.dumps({"predicates": [predicate]})


def _root_parameters(pipeline_spec: Any) -> Mapping[str, Any]:
    """The parameters a pipeline spec's root declares, by name. The API returns a version
    uploaded with a platform spec as ``{"pipeline_spec": ..., "platform_spec": ...}``."""
    spec = pipeline_spec if isinstance(pipeline_spec, Mapping) else {}
    if "pipeline_spec" in spec:
        spec = spec["pipeline_spec"] or {}
    inputs = (spec.get("root") or {}).get("inputDefinitions") or {}
    return inputs.get("parameters") or {}


def declared_parameters(pipeline_spec: Any) -> set[str]:
    """The parameters a pipeline version's spec declares (its root's inputs)."""
    return set(_root_parameters(pipeline_spec))


def given_setting(parameters: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    """(whether a run with ``parameters`` gives setting ``name`` itself, its value): as an
    argument, else as an entry of its ``settings_overrides``."""
    if name in parameters:
        return True, parameters[name]
    overrides = parameters.get(SETTINGS_OVERRIDES)
    if isinstance(overrides, Mapping) and name in overrides:
        return True, overrides[name]
    return False, None


def run_setting(parameters: Mapping[str, Any], pipeline_spec: Any, name: str) -> Any:
    """The value of setting ``name`` in a run with ``parameters`` of ``pipeline_spec``: what the
    run gives (:func:`given_setting`), else what the version compiles in
    (:func:`kfstack.pipeline_spec.compiled_setting`); None: none of them."""
    given, value = given_setting(parameters, name)
    if given:
        return value
    return compiled_setting(pipeline_spec, name) if isinstance(pipeline_spec, Mapping) else None


def launch_namespace(parameters: Mapping[str, Any], pipeline_spec: Any, own: str | None) -> str | None:
    """Where a run with ``parameters`` of ``pipeline_spec`` creates its objects, its
    InferenceService included: its ``launch_namespace`` (:func:`run_setting`) when not empty;
    else ``own``, the run's own namespace (None on a standalone KFP: KFP's own, which the
    receiver is not told)."""
    value = run_setting(parameters, pipeline_spec, LAUNCH_NAMESPACE_PARAMETER)
    return str(value) if value else own


def deploys_into(launch: str | None, namespace: str) -> bool:
    """A run launching into ``launch`` (None: unknown, see :func:`launch_namespace`) deploys the
    InferenceServices of ``namespace``."""
    return launch is None or launch == namespace


class _Specs:
    """The pipeline specs one decision reads, each version asked for once, each pipeline's
    versions listed once."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._versions: dict[tuple[str, str], Any] = {}
        self._latest: dict[str, str | None] = {}

    def version(self, pipeline_id: str, version_id: str) -> Any:
        key = (pipeline_id, version_id)
        if key not in self._versions:
            self._versions[key] = self.client.get_pipeline_version(pipeline_id, version_id)
        return self._versions[key]

    def version_ids(self, run: Any) -> tuple[str | None, str | None]:
        """The pipeline and version run ``run`` (a run or a recurring run) runs: the version it
        pins, else its pipeline's latest. No pipeline: the run carries its own spec; no version:
        its pipeline has none."""
        reference = run.pipeline_version_reference
        pipeline_id = reference.pipeline_id if reference else None
        if not pipeline_id:
            return None, None
        version_id = (reference.pipeline_version_id if reference else None) or run.pipeline_version_id
        if not version_id:
            if pipeline_id not in self._latest:
                versions = pipelines.pipeline_versions(self.client, pipeline_id)
                self._latest[pipeline_id] = versions[0].pipeline_version_id if versions else None
            version_id = self._latest[pipeline_id]
        return pipeline_id, version_id

    def of_run(self, run: Any) -> Any:
        """The spec run ``run`` runs: its own when the API returns one, else its version's
        (:meth:`version_ids`); None when there is none."""
        if run.pipeline_spec:
            return run.pipeline_spec
        pipeline_id, version_id = self.version_ids(run)
        if not (pipeline_id and version_id):
            return None
        return self.version(pipeline_id, version_id).pipeline_spec

    def launch_namespace(self, run: Any, parameters: Mapping[str, Any], own: str | None) -> str | None:
        """:func:`launch_namespace` of ``run`` with ``parameters``: its spec is read only when
        the parameters set none."""
        return launch_namespace(
            parameters, self._spec_unless_given(run, parameters, LAUNCH_NAMESPACE_PARAMETER), own
        )

    def serving_name(self, run: Any, parameters: Mapping[str, Any]) -> Any:
        """The ``serving_name`` of ``run`` with ``parameters`` (:func:`run_setting`): its spec
        is read only when the parameters set none."""
        spec = self._spec_unless_given(run, parameters, SERVING_NAME_PARAMETER)
        return run_setting(parameters, spec, SERVING_NAME_PARAMETER)

    def _spec_unless_given(self, run: Any, parameters: Mapping[str, Any], name: str) -> Any:
        """``run``'s spec, where its ``parameters`` do not give setting ``name``; else None."""
        return None if given_setting(parameters, name)[0] else self.of_run(run)


@dataclasses.dataclass
class ClusterSchedule:
    """One recurring run recorded for the model, and the client to act on it with.

    Attributes:
        namespace: The recurring run's KFP namespace, where its runs are (None on a standalone
            KFP).
        target: The alert's namespace, the InferenceService's.
    """

    client: Any
    namespace: str | None
    target: str
    service: str
    recurring: Any
    ref: PipelineVersionRef
    parameters: dict[str, Any]
    declared: set[str]
    force: bool
    specs: _Specs

    @property
    def description(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return (
            f"recurring run {self.recurring.display_name} ({self.recurring.recurring_run_id}){where}: "
            f"{self.ref.pipeline} {self.ref.version}"
        )

    def history(self) -> list[PastRun]:
        found = []
        for run in connection.pages(
            lambda token: self.client.list_runs(
                page_token=token,
                page_size=connection.PAGE_SIZE,
                sort_by="created_at desc",
                namespace=self.namespace,
                filter=pipeline_filter(self.ref.pipeline_id),
            ),
            "runs",
        ):
            reference = run.pipeline_version_reference
            if not reference or reference.pipeline_id != self.ref.pipeline_id:
                continue
            parameters = dict(run.runtime_config.parameters or {}) if run.runtime_config else {}
            by_schedule = run.recurring_run_id == self.recurring.recurring_run_id
            if not (by_schedule or self._for_model(run, parameters)):
                continue
            found.append(
                PastRun(
                    id=str(run.run_id),
                    created_at=_aware(run.created_at),
                    running=run.state not in runs.FINAL_STATES,
                    trigger=str(parameters.get(TRIGGER_PARAMETER) or ""),
                )
            )
        return found

    def _for_model(self, run: Any, parameters: Mapping[str, Any]) -> bool:
        """The run deploys the alert's InferenceService: its name, launched into its namespace
        (a run of another namespace's model with the same name does not block this one)."""
        if self.specs.serving_name(run, parameters) != self.service:
            return False
        return deploys_into(self.specs.launch_namespace(run, parameters, self.namespace), self.target)

    def start(self, trigger: str) -> str:
        if TRIGGER_PARAMETER not in self.declared:
            raise Refusal(
                f"{self.ref.pipeline} {self.ref.version} declares no {TRIGGER_PARAMETER!r} parameter: "
                f"upload a version that does, or retrain by hand"
            )
        arguments = {**self.parameters, TRIGGER_PARAMETER: trigger}
        if self.force and FORCE_PARAMETER in self.declared:
            arguments[FORCE_PARAMETER] = True
        started = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
        display_name = f"{self.recurring.display_name} drift alert {self.service} {started}"
        run_id = runs.start_run(
            self.client,
            self.ref,
            self.recurring.experiment_id,
            arguments,
            display_name,
            service_account=self.recurring.service_account,
        )
        return f"{run_id} {runs.run_url(self.client, run_id)}"


def _aware(moment: Any) -> datetime.datetime:
    if not isinstance(moment, datetime.datetime):
        return NO_TIME
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


@dataclasses.dataclass(frozen=True)
class _Candidate:
    """A recurring run whose ``serving_name`` is the alert's, and where its runs deploy."""

    recurring: Any
    namespace: str | None
    launch: str | None

    @property
    def named(self) -> str:
        where = f", namespace {self.namespace}" if self.namespace else ""
        return f"{self.recurring.display_name} ({self.recurring.recurring_run_id}{where})"


class KfpRetraining:
    """Schedules and runs on a KFP API server (module docstring).

    Args:
        host: The API's URL; None: what ``kfp.Client`` finds (in a pod: the cluster's
            ``ml-pipeline`` service, with the pod's projected service-account token, which
            ``kfp.Client`` reads from its file at each request).
        namespaces: What this receiver serves: on a multi-user KFP the KFP namespaces whose
            recurring runs it searches, on a standalone KFP the namespaces whose alerts it acts
            on.
        token_file: A file holding a bearer token the API accepts, read at each decision; None:
            ``kfp.Client``'s own (the projected token).
        force: Start the run with ``force=true`` when its pipeline has the parameter, so the
            batch drift check of a lagged window does not veto what live traffic showed.
    """

    def __init__(
        self,
        host: str | None = None,
        *,
        namespaces: Iterable[str],
        token_file: str | None = None,
        force: bool = True,
    ) -> None:
        self.host, self.token_file, self.force = host, token_file, force
        self.namespaces = tuple(dict.fromkeys(namespaces))
        if not self.namespaces or not all(self.namespaces):
            raise UsageError(
                "--namespace: name the namespace(s) this receiver serves (on a multi-user KFP, those "
                "whose recurring runs retrain the models; on a standalone KFP, those whose alerts it "
                "acts on)"
            )

    @contextlib.contextmanager
    def schedule_for(self, namespace: str, service: str) -> Iterator[ClusterSchedule]:
        if not namespace:
            raise Refusal(
                f"the alert has no {NAMESPACE_LABEL} label: the receiver knows a model by its "
                f"InferenceService's name and namespace"
            )
        token = read_token(self.token_file, "--kfp-token-file") if self.token_file else None
        with connection.connect(self.host, token=token) as client:
            multi_user = bool(client.get_kfp_healthz().multi_user)
            if not multi_user and namespace not in self.namespaces:
                raise Refusal(
                    f"namespace {namespace} is not one this receiver serves (--namespace "
                    f"{', '.join(self.namespaces)}); its alerts go to that namespace's own receiver"
                )
            specs = _Specs(client)
            searched: tuple[str | None, ...] = self.namespaces if multi_user else (None,)
            named = []
            for kfp_namespace in searched:
                for recurring in _recurring_runs(client, kfp_namespace):
                    parameters = _parameters(recurring)
                    if specs.serving_name(recurring, parameters) != service:
                        continue
                    launch = specs.launch_namespace(recurring, parameters, kfp_namespace)
                    named.append(_Candidate(recurring, kfp_namespace, launch))
            deploying = [c for c in named if deploys_into(c.launch, namespace)]
            switched_on = [c for c in deploying if enabled(c.recurring)]
            what = f"{SERVING_NAME_PARAMETER}={service} for the InferenceService in namespace {namespace}"
            if multi_user:
                searched_text = (
                    f"searched the recurring runs of namespace(s) {', '.join(self.namespaces)}, each "
                    f"deploying into its {LAUNCH_NAMESPACE_PARAMETER}, else into its own namespace"
                )
            else:
                searched_text = (
                    f"searched every recurring run of this standalone KFP, each deploying into its "
                    f"{LAUNCH_NAMESPACE_PARAMETER}, else into any namespace this receiver serves"
                )
            if not switched_on:
                disabled = ", ".join(c.recurring.display_name for c in deploying)
                elsewhere = ", ".join(
                    f"{c.named} into {c.launch}" for c in named if not deploys_into(c.launch, namespace)
                )
                raise Refusal(
                    f"no enabled recurring run with {what}"
                    + (f" (disabled: {disabled})" if disabled else "")
                    + f"; {searched_text}"
                    + (f"; deploying elsewhere: {elsewhere}" if elsewhere else "")
                    + "; schedule the model's retraining (kfstack schedule ... --param "
                    f"{SERVING_NAME_PARAMETER}={service})"
                )
            if len(switched_on) > 1:
                names = ", ".join(c.named for c in switched_on)
                raise Refusal(
                    f"{len(switched_on)} enabled recurring runs have {what}: {names}; keep one "
                    f"({searched_text})"
                )
            (chosen,) = switched_on
            ref, declared = _version(specs, chosen.recurring)
            yield ClusterSchedule(
                client=client,
                namespace=chosen.namespace,
                target=namespace,
                service=service,
                recurring=chosen.recurring,
                ref=ref,
                parameters=_parameters(chosen.recurring),
                declared=declared,
                force=self.force,
                specs=specs,
            )


def _recurring_runs(client: Any, kfp_namespace: str | None) -> list[Any]:
    """The recurring runs of ``kfp_namespace`` (None: all, on a standalone KFP); a refusal to
    list them names the namespace, the one whose binding is missing."""
    try:
        with connection.api_errors(client):
            return list(
                connection.pages(
                    lambda token: client.list_recurring_runs(
                        page_token=token, page_size=connection.PAGE_SIZE, namespace=kfp_namespace
                    ),
                    "recurring_runs",
                )
            )
    except KfstackError as err:
        if kfp_namespace is None:
            raise
        raise type(err)(f"listing the recurring runs of namespace {kfp_namespace}: {err}") from err


def _parameters(recurring: Any) -> dict[str, Any]:
    config = recurring.runtime_config
    return dict(config.parameters or {}) if config else {}


def _version(specs: _Specs, recurring: Any) -> tuple[PipelineVersionRef, set[str]]:
    """The version the recurring run runs (the one it pins, else its pipeline's latest) and the
    parameters it declares."""
    pipeline_id, version_id = specs.version_ids(recurring)
    if not pipeline_id:
        raise Refusal(
            f"recurring run {recurring.display_name} carries its own pipeline spec, no uploaded pipeline "
            f"version to start"
        )
    if not version_id:
        raise Refusal(f"the pipeline of recurring run {recurring.display_name} has no version")
    version = specs.version(pipeline_id, version_id)
    ref = PipelineVersionRef(
        pipeline=pipelines.pipeline_name(specs.client, pipeline_id),
        pipeline_id=pipeline_id,
        version=version.display_name or version.name,
        version_id=version_id,
    )
    return ref, declared_parameters(version.pipeline_spec)
