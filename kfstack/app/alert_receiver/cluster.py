"""The cluster's retraining: recurring runs and runs on the KFP API.

The receiver serves the namespaces it is given (``--namespace``, the Component's own by
default): an alert whose ``namespace`` label is missing, empty or another namespace is refused
before the KFP API is asked, on a standalone KFP as on a multi-user one. One rule, whichever KFP:
on a multi-user KFP it keeps the alert's namespace from being sent as "" (the client's own
namespace), on a standalone KFP -- which has no namespaces, so the schedule is found by
``serving_name`` alone -- it keeps ns-b's ``flights`` from starting ns-a's schedule.

A recurring run is *recorded for a model* when its ``serving_name`` parameter (the
InferenceService its runs deploy) is the alert's ``inference_service``, and -- on a multi-user
KFP, where each profile namespace has its own recurring runs -- it belongs to the alert's
``namespace``. On a standalone KFP (one namespace, ``multi_user`` false in ``/healthz``) the
name alone decides, so a ``serving_name`` must be unique across it. Only enabled recurring runs
count; exactly one must match, else the alert is refused (the log line names the candidates).

The run started is one run of the recurring run's pipeline version (the version it pins, else
the pipeline's latest, as the recurring run itself would take), in its experiment, as its
service account (the one its own runs get: a run that named none would get KFP's default, on a
multi-user KFP the profile's ``default-editor``), with its parameters plus ``trigger`` and, when
the pipeline declares it, ``force=true``. The model's
runs are the runs of that pipeline (any version) in the namespace (on a standalone KFP: all of
them), whatever their experiment, whose ``serving_name`` is the model's or that the recurring
run created, read from the KFP API at each decision.

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
from kfstack.errors import UsageError

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


def declared_parameters(pipeline_spec: Any) -> set[str]:
    """The parameters a pipeline version's spec declares (its root's inputs). The API returns a
    version uploaded with a platform spec as ``{"pipeline_spec": ..., "platform_spec": ...}``."""
    spec = pipeline_spec if isinstance(pipeline_spec, Mapping) else {}
    if "pipeline_spec" in spec:
        spec = spec["pipeline_spec"] or {}
    inputs = (spec.get("root") or {}).get("inputDefinitions") or {}
    return set(inputs.get("parameters") or {})


@dataclasses.dataclass
class ClusterSchedule:
    """One recurring run recorded for the model, and the client to act on it with."""

    client: Any
    namespace: str | None
    service: str
    recurring: Any
    ref: PipelineVersionRef
    parameters: dict[str, Any]
    declared: set[str]
    force: bool

    @property
    def description(self) -> str:
        return (
            f"recurring run {self.recurring.display_name} ({self.recurring.recurring_run_id}): "
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
            for_model = parameters.get(SERVING_NAME_PARAMETER) == self.service
            if not (for_model or run.recurring_run_id == self.recurring.recurring_run_id):
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


class KfpRetraining:
    """Schedules and runs on a KFP API server (module docstring).

    Args:
        host: The API's URL; None: what ``kfp.Client`` finds (in a pod: the cluster's
            ``ml-pipeline`` service, with the pod's projected service-account token, which
            ``kfp.Client`` reads from its file at each request).
        namespaces: The namespaces whose alerts this receiver acts on.
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
            raise UsageError("--namespace: name the namespace(s) whose alerts this receiver acts on")

    @contextlib.contextmanager
    def schedule_for(self, namespace: str, service: str) -> Iterator[ClusterSchedule]:
        if not namespace:
            raise Refusal(
                f"the alert has no {NAMESPACE_LABEL} label: the receiver acts only on alerts of the "
                f"namespaces it serves ({', '.join(self.namespaces)})"
            )
        if namespace not in self.namespaces:
            raise Refusal(
                f"namespace {namespace} is not one this receiver serves (--namespace "
                f"{', '.join(self.namespaces)}); its alerts go to that namespace's own receiver"
            )
        token = read_token(self.token_file, "--kfp-token-file") if self.token_file else None
        with connection.connect(self.host, token=token) as client:
            multi_user = bool(client.get_kfp_healthz().multi_user)
            kfp_namespace = namespace if multi_user else None
            recurring_runs = list(
                connection.pages(
                    lambda token: client.list_recurring_runs(
                        page_token=token, page_size=connection.PAGE_SIZE, namespace=kfp_namespace
                    ),
                    "recurring_runs",
                )
            )
            candidates = [r for r in recurring_runs if _parameters(r).get(SERVING_NAME_PARAMETER) == service]
            switched_on = [r for r in candidates if enabled(r)]
            where = f" in namespace {namespace}" if multi_user else ""
            if not switched_on:
                disabled = ", ".join(r.display_name for r in candidates)
                raise Refusal(
                    f"no enabled recurring run with {SERVING_NAME_PARAMETER}={service}{where}"
                    + (f" (disabled: {disabled})" if disabled else "")
                    + "; schedule the model's retraining (kfstack schedule ... --param "
                    f"{SERVING_NAME_PARAMETER}={service})"
                )
            if len(switched_on) > 1:
                names = ", ".join(f"{r.display_name} ({r.recurring_run_id})" for r in switched_on)
                raise Refusal(
                    f"{len(switched_on)} enabled recurring runs have "
                    f"{SERVING_NAME_PARAMETER}={service}{where}: {names}; keep one"
                )
            (recurring,) = switched_on
            ref, declared = _version(client, recurring)
            yield ClusterSchedule(
                client=client,
                namespace=kfp_namespace,
                service=service,
                recurring=recurring,
                ref=ref,
                parameters=_parameters(recurring),
                declared=declared,
                force=self.force,
            )


def _parameters(recurring: Any) -> dict[str, Any]:
    config = recurring.runtime_config
    return dict(config.parameters or {}) if config else {}


def _version(client: Any, recurring: Any) -> tuple[PipelineVersionRef, set[str]]:
    """The version the recurring run runs (the one it pins, else its pipeline's latest) and the
    parameters it declares."""
    reference = recurring.pipeline_version_reference
    pipeline_id = reference.pipeline_id if reference else None
    if not pipeline_id:
        raise Refusal(
            f"recurring run {recurring.display_name} carries its own pipeline spec, no uploaded pipeline "
            f"version to start"
        )
    version_id = (reference.pipeline_version_id if reference else None) or recurring.pipeline_version_id
    if not version_id:
        versions = pipelines.pipeline_versions(client, pipeline_id)
        if not versions:
            raise Refusal(f"the pipeline of recurring run {recurring.display_name} has no version")
        version_id = versions[0].pipeline_version_id
    version = client.get_pipeline_version(pipeline_id, version_id)
    ref = PipelineVersionRef(
        pipeline=pipelines.pipeline_name(client, pipeline_id),
        pipeline_id=pipeline_id,
        version=version.display_name or version.name,
        version_id=version_id,
    )
    return ref, declared_parameters(version.pipeline_spec)
