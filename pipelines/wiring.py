"""How any kfstack pipeline wires its steps: the frame of a run, a task's inputs from the pipeline's
parameters of the same name, the pod settings of a cluster run.

A step's inputs take the pipeline parameter of the same name (:func:`call`): component arguments
and pipeline parameters share their names on purpose, so a parameter added to a component and to
a pipeline reaches the step without a line of wiring. What is not a parameter (an upstream
output, a placeholder) is given. The examples' pipelines and a team's use these the same way.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from typing import Any

from kfp import dsl, kubernetes

from kfstack import kfp_adapter
from kfstack.components.common.cleanup_run.component import cleanup_run
from kfstack.kubernetes import node_pools
from kfstack.kubernetes.naming import NAMESPACE_ENV, SERVICE_ACCOUNT_ENV, SIDECAR_INJECT_LABEL
from kfstack.kubernetes.pods import OBJECT_STORE_KEYS
from kfstack.pipelines.validate_run import part_output, settings_read, validate_run
from kfstack.platforms import TRACKING_URI_ARGUMENT
from kfstack.settings import SETTINGS_OVERRIDES
from kfstack.tracking.cluster import CREDENTIAL_KEYS

# Before any pipeline is defined with these steps: kfp's resource setters' fixed cost, cut.
kfp_adapter.cut_definition_cost()

RUN_ID = dsl.PIPELINE_JOB_ID_PLACEHOLDER
TASK_NAME = dsl.PIPELINE_TASK_NAME_PLACEHOLDER
# The task pod's own namespace and service account, through the downward API (never a literal:
# docs/architecture.md#no-environment-in-code): where the run runs (the launch namespace unless a
# run names another) and as whom, for the audit labels of what it creates elsewhere and the access
# review's errors. Both are field paths the API server admits for env (kubernetes/kubernetes,
# pkg/apis/core/validation, validEnvDownwardAPIFieldPathExpressions).
NAMESPACE_FIELD = "metadata.namespace"
SERVICE_ACCOUNT_FIELD = "spec.serviceAccountName"
# The pipeline's JSON parameters go to the validate task on their own (see validate_run).
JSON_PARAMETERS = ("tuning_search_space", "tuning_algorithm_settings")
# The pipeline parameters the run's frame reads besides its steps' inputs: the cleanup exit
# handler's (guarded: it also ends the run's MLflow parent) and every task pod's object-store and
# tracking Secrets (on_cluster).
TRACKING_SECRET = "tracking_secret"
FRAME_PARAMETERS = (
    "platform",
    "launch_namespace",
    "object_store_secret",
    TRACKING_URI_ARGUMENT,
    TRACKING_SECRET,
)
# The validate-parameters task of the run whose steps are being wired (within guarded): it hands
# each step its part of the run's overrides.
_CHECKED: contextvars.ContextVar[dsl.PipelineTask | None] = contextvars.ContextVar("checked", default=None)


def call(component: Any, parameters: Mapping[str, Any], **given: Any) -> dsl.PipelineTask:
    """``component`` as a task whose every input is the pipeline parameter of the same name,
    unless ``given`` (upstream outputs, placeholders, constants); the run's
    ``settings_overrides`` among them, in a version's run form: within :func:`guarded`, the part
    of them the component reads (:func:`run_overrides`)."""
    inputs = component.component_spec.inputs or {}
    taken = {name: parameters[name] for name in inputs if name in parameters and name not in given}
    if SETTINGS_OVERRIDES in inputs and SETTINGS_OVERRIDES not in given:
        taken.update(run_overrides(parameters, component))
    return component(**taken, **given)


def run_overrides(parameters: Mapping[str, Any], component: Any = None) -> dict[str, Any]:
    """The run's ``settings_overrides`` as a step's argument, for a step whose inputs are given by
    hand rather than by :func:`call`; empty for a pipeline function without a run form.

    Given the step's ``component``, within :func:`guarded`: the part of the overrides that
    component reads, an output of the run's validate-parameters task
    (:mod:`kfstack.pipelines.validate_run`), so that the step's inputs, and with them its cache
    key, change with its own settings only. Without it, or for a component the task holds no
    part for (a team's own), the whole object.
    """
    if SETTINGS_OVERRIDES not in parameters:
        return {}
    checked = _CHECKED.get()
    output = part_output(component) if component is not None and checked is not None else None
    if output is None:
        return {SETTINGS_OVERRIDES: parameters[SETTINGS_OVERRIDES]}
    assert checked is not None  # (output is only found with it)
    return {SETTINGS_OVERRIDES: checked.outputs[output]}


def on_cluster(task: dsl.PipelineTask, parameters: Mapping[str, Any], name: str) -> dsl.PipelineTask:
    """The task named ``name`` in the UI, with its pod settings for kubernetes runs (kfp.local
    ignores them): the CPU pool, the pod's namespace as KFSTACK_NAMESPACE and its service account
    as KFSTACK_SERVICE_ACCOUNT, the object-store keys (to read the jobs' reports and the models),
    and, for a pipeline that takes ``tracking_secret``, the tracking server's credentials (a task
    without KFP's MLflow plugin makes its own run: kfstack.tracking.cluster)."""
    task.set_display_name(name)
    node_pools.apply_to_task(task, node_pools.get_profile(node_pools.CPU_POOL))
    kubernetes.use_field_path_as_env(task, env_name=NAMESPACE_ENV, field_path=NAMESPACE_FIELD)
    kubernetes.use_field_path_as_env(task, env_name=SERVICE_ACCOUNT_ENV, field_path=SERVICE_ACCOUNT_FIELD)
    kubernetes.use_secret_as_env(
        task,
        secret_name=parameters["object_store_secret"],
        secret_key_to_env={key: key for key in OBJECT_STORE_KEYS},
        optional=True,
    )
    if TRACKING_SECRET in parameters:
        kubernetes.use_secret_as_env(
            task,
            secret_name=parameters[TRACKING_SECRET],
            secret_key_to_env={key: key for key in CREDENTIAL_KEYS},
            optional=True,
        )
    return task


def joins_mesh(task: dsl.PipelineTask) -> dsl.PipelineTask:
    """A task whose pod joins the namespace's Istio mesh where there is one: the deployment task,
    whose canary analysis calls the predictors, which a Kubeflow profile's policies admit only
    from callers with a mesh identity (mutual TLS).

    KFP 2.17 takes every pipeline pod out of the mesh with the annotation
    ``sidecar.istio.io/inject: "false"``; Istio reads the pod label of the same name first, so
    this label wins. Istio's injector also injects a pod so labelled in a namespace outside the
    mesh, where it completes only with native sidecars: a version compiled for an environment
    whose ``istio_mesh`` is false has the label removed
    (:func:`kfstack.pipelines.environments.leave_the_mesh_out`); manifests/README.md ("Istio")
    has the check for native sidecars.
    """
    kubernetes.add_pod_label(task, SIDECAR_INJECT_LABEL, "true")
    return task


def uncached(task: dsl.PipelineTask) -> dsl.PipelineTask:
    """A step whose result changes between runs with the same inputs (what serves, the run's
    time): never answered from KFP's cache."""
    return task.set_caching_options(False)


@contextlib.contextmanager
def guarded(pipeline: str, parameters: Mapping[str, Any]) -> Iterator[dsl.PipelineTask]:
    """The run's frame: an exit handler that cleans up whatever the run left on the cluster
    (unfinished batch jobs, an undecided canary) and ends the run's MLflow parent, around a
    first task that checks every parameter and makes that parent. Yields that task; the body's
    first steps go ``.after`` it, and the steps that :func:`call` (or :func:`run_overrides`)
    makes within it take their part of the run's overrides from it."""
    cleanup = cleanup_run(
        platform=parameters["platform"],
        run_id=RUN_ID,
        launch_namespace=parameters.get("launch_namespace", ""),
        tracking_uri=parameters.get(TRACKING_URI_ARGUMENT, ""),
    )
    on_cluster(uncached(cleanup), parameters, "cleanup")
    # The JSON values travel as inputs of their own (validate_run); the overrides are one too.
    own_inputs = (*JSON_PARAMETERS, SETTINGS_OVERRIDES)
    checked_values = {name: value for name, value in parameters.items() if name not in own_inputs}
    json_values = {name: parameters[name] for name in own_inputs if name in parameters}
    # Which of the pipeline's settings each component reads: the task splits the overrides so.
    parts = {"settings_read": settings_read(parameters)} if SETTINGS_OVERRIDES in parameters else {}
    with dsl.ExitHandler(cleanup, name=f"{pipeline}-run"):
        checked = validate_run(
            pipeline=pipeline, parameters=checked_values, run_id=RUN_ID, **json_values, **parts
        )
        token = _CHECKED.set(checked)
        try:
            yield on_cluster(uncached(checked), parameters, "validate-parameters")
        finally:
            _CHECKED.reset(token)
