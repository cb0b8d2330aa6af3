"""A team's own training code as a distributed job, on either platform.

The code is a module or ``module:function`` (:class:`kfstack.contracts.TrainingCode`) in the
trainer image -- kfstack's for the framework by default, the team's own built on it otherwise. Each
replica runs it through :mod:`kfstack.training.entrypoint` under the operator's env contract:

- ``kubernetes``: a TrainJob (Trainer v2; torchrun sets ``PET_*``), a PyTorchJob (``MASTER_*``,
  ``RANK``; elastic through torchrun) or a TFJob (``TF_CONFIG``, MWMS or parameter servers),
  chosen by what the cluster serves (``training_api``), on the ``gpu_pool`` node pool, with
  spot retries from ``KFSTACK_CHECKPOINT_URI`` and the pool's Kueue queue;
- ``local``: the same replicas as processes with the env their pods would get
  (:mod:`kfstack.training.local_replicas`), restarted from the checkpoints on a failure.

Either way the chief replica leaves a result beside the logs (the last value of every declared
metric, the code's report, its seconds, what the model directory lacks) and the model in the
model artifact; :func:`judge` turns a broken contract into one clear error. Beside the model the
step writes its lineage record (:func:`record_lineage`): the dataset's own lineage when its data
step wrote one (:func:`kfstack.contracts.write_data_lineage`), the hyperparameters and job shape
of this run, and the last value of every declared metric.

The cost: the job's pods at their node pool's price per hour
(:meth:`~kfstack.kubernetes.node_pools.NodePoolProfile.price_per_hour`; on the embedded
platform the ``cpu`` profile's, for the whole machine) over the code's seconds, and per epoch
when the code's report says how long an epoch took (``seconds_per_epoch``, as kfstack's
:func:`kfstack.training.throughput.throughput` reports it).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import fsspec

from kfstack import contracts, images, object_store
from kfstack.components import argument_names
from kfstack.errors import InvalidParameterError
from kfstack.kubernetes import node_pools
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.naming import RunContext
from kfstack.kubernetes.placement import TrainingPlacement
from kfstack.kubernetes.pods import SecretRefs
from kfstack.kubernetes.train_job import build_trainjob
from kfstack.kubernetes.training_apis import AUTO, TRAINER_V2, candidate_apis, job_kind
from kfstack.kubernetes.training_jobs import (
    ElasticSettings,
    TrainingJobRequest,
    build_pytorchjob,
    build_tfjob,
)
from kfstack.lineage import Lineage, model_version
from kfstack.lineage import now as lineage_time
from kfstack.object_store import EmbeddedObjectStore
from kfstack.platforms import LOCAL, RUN_DIR_ENV, StageResult, Variant
from kfstack.settings import Placeholder
from kfstack.training import entrypoint, local_replicas
from kfstack.training.process_group import ReplicaSet, run_process_group
from kfstack.training.settings import (
    CHECKPOINT_DIR,
    PARAMETER_SERVER,
    PYTORCH,
    SECONDS_PER_EPOCH,
    JobTopology,
)
from kfstack.training.tf_config import CHIEF, PS, WORKER
from kfstack.training.throughput import cost_metrics, job_cost
from kfstack.uris import embedded_location, fsspec_uri, join
from kfstack.version import __version__, pipeline_version

NAME_PREFIX = "kfs-train"
IMAGE_ROLES = {PYTORCH: "torch-trainer", "tensorflow": "tf-trainer"}
TRAINING_METRICS = "training_metrics"
MODEL_OUTPUT = "model"


@dataclasses.dataclass(frozen=True)
class DistributedTrainingSettings:
    """The step: whose code, with which hyperparameters, in what job shape, where.

    Attributes:
        code: The team's training code and what it declares.
        hyperparameters: Name -> value, each declared by ``code`` and of its type.
        topology: The job's framework, replicas and restarts.
        model_format: What the model directory must hold (:data:`kfstack.contracts.MODEL_FORMATS`).
        image: The trainer image (the team's, or kfstack's for the framework).
        env_secrets: Secrets whose keys the replicas get as environment (cluster only).
        data_uri: The input dataset (``KFSTACK_INPUT_URI``).
        model_uri: The model artifact: rank 0's model directory is copied there.
        logs_uri: Checkpoints (``<logs_uri>/checkpoints``), the chief's result and, locally, the
            replicas' logs.
        placement: Where the job's replicas run.
        run_id, run_dir: The pipeline run and, on the embedded platform, its directory: they
            name the model's version in its lineage record.
        pipeline: The registered pipeline (the lineage record's).
        trial: A tuning trial's name (Katib's reference in a trial template), told to the
            replicas as ``KFSTACK_TRIAL``; empty in the training step.
        threads_per_worker: Local only: intra-op threads per replica; default: cores split evenly.
        on_group_started: Local only: a test's hook, see ``run_process_group``.
    """

    code: contracts.TrainingCode
    hyperparameters: Mapping[str, Any]
    topology: JobTopology
    model_format: str
    image: str
    env_secrets: tuple[str, ...]
    data_uri: str
    model_uri: str
    logs_uri: str
    placement: TrainingPlacement
    run_id: str = ""
    run_dir: str = ""
    pipeline: str = ""
    trial: str = ""
    threads_per_worker: int | None = None
    on_group_started: Callable[..., None] | None = None

    @property
    def checkpoint_uri(self) -> str:
        return join(self.logs_uri, CHECKPOINT_DIR)

    @property
    def result_uri(self) -> str:
        return join(self.logs_uri, entrypoint.RESULT_FILE)

    @property
    def training_api(self) -> str:
        """The concrete API of a variant's settings (``auto`` is resolved by :meth:`variants`)."""
        if self.placement.training_api == AUTO:
            raise ValueError("training_api=auto: build and run a variant's settings")
        return self.placement.training_api

    def with_training_api(self, api: str) -> DistributedTrainingSettings:
        return dataclasses.replace(self, placement=dataclasses.replace(self.placement, training_api=api))

    def argv(self) -> list[str]:
        return self.code.argv(self.hyperparameters)

    def env(self, remote: bool, store: EmbeddedObjectStore | None = None) -> dict[str, str]:
        """What the replicas' entrypoint and the team's code are told; ``remote``: the URIs as
        a cluster's pods open them; ``store``: embedded, the input and checkpoints held in an
        S3 server on loopback (:mod:`kfstack.object_store`), as a cluster holds them."""
        uri = fsspec_uri if remote else str
        if store is not None:
            locations = contracts.locations_env(
                input_uri=store.upload(self.data_uri), checkpoint_uri=store.writable(self.checkpoint_uri)
            )
            locations.update(store.env)
        else:
            where = fsspec_uri if remote else embedded_location  # what the team's code is told
            locations = contracts.locations_env(
                input_uri=where(self.data_uri), checkpoint_uri=where(self.checkpoint_uri)
            )
        return {
            **locations,
            **entrypoint.step_env(self.code, self.model_format, uri(self.model_uri), uri(self.result_uri)),
            **({contracts.TRIAL_ENV: self.trial} if self.trial else {}),
        }

    def layout(self) -> dict[str, int]:
        """TensorFlow: replica type -> count, in launch order (the chief first when there is one)."""
        topology = self.topology
        if topology.tf_topology == PARAMETER_SERVER:
            return {CHIEF: 1, WORKER: topology.workers, PS: topology.tf_parameter_servers}
        return {WORKER: topology.workers}

    def job_pods(self, world_size: int | None = None) -> int:
        """The job's pods: PyTorch's ranks (those that ran, when known: an elastic job may run
        on fewer than ``workers``), TensorFlow's whole replica layout."""
        if self.topology.framework == PYTORCH:
            return world_size or self.topology.workers
        return sum(self.layout().values())


def _list(arguments: Mapping[str, Any], name: str) -> list[Any]:
    value = arguments.get(name) or []
    if not isinstance(value, list):
        raise InvalidParameterError(f"{name} must be a list, got {value!r}")
    return value


def _dict(arguments: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = arguments.get(name) or {}
    if not isinstance(value, dict):
        raise InvalidParameterError(f"{name} must be a dict, got {value!r}")
    return value


def code_from_arguments(arguments: Mapping[str, Any]) -> contracts.TrainingCode:
    """The declared training code of a component's (or pipeline's) arguments.

    Raises:
        InvalidParameterError: A malformed declaration.
    """
    return contracts.TrainingCode(
        entry=arguments.get("training_code", ""),
        hyperparameters=_dict(arguments, "hyperparameter_types"),
        metrics=tuple(_list(arguments, "metric_names")),
        arguments=_dict(arguments, "code_arguments"),
        option_style=arguments.get("option_style", contracts.UNDERSCORES),
    )


class DistributedTrainingStage:
    component = "distributed-training"
    reference_output = "training_job"

    def settings(self, arguments: Mapping[str, Any]) -> DistributedTrainingSettings:
        """The step's settings; the code's module (and function) must exist wherever this
        process can import the team's package.

        Raises:
            InvalidParameterError: Whatever is wrong, before anything starts.
        """
        code = code_from_arguments(arguments)
        # The embedded platform's replicas run with this interpreter: the package must be here.
        problem = code.importable_problem(required=arguments.get("platform") == LOCAL)
        if problem:
            raise InvalidParameterError(f"training_code={code.entry!r}: {problem}")
        value = arguments.get("hyperparameters")
        if isinstance(value, Placeholder):
            # Rendering a run before it happens: an upstream step's dict (tuning's best values),
            # each declared hyperparameter a placeholder of its own.
            hyperparameters: dict[str, Any] = {
                name: Placeholder(f"{value}.{name}") for name in code.hyperparameters
            }
        else:
            hyperparameters = _dict(arguments, "hyperparameters")
        # Declared, of their types, safe in a shell command; each value converted to its type,
        # as the lineage and metadata record them.
        hyperparameters = code.typed(hyperparameters)
        topology = JobTopology.from_arguments(arguments)
        return DistributedTrainingSettings(
            code=code,
            hyperparameters=hyperparameters,
            topology=topology,
            model_format=contracts.check_model_format(arguments.get("model_format", contracts.CUSTOM)),
            image=images.check_image(arguments.get("trainer_image") or "", "trainer_image")
            or images.image_for(IMAGE_ROLES[topology.framework]),
            env_secrets=contracts.check_secret_names(_list(arguments, "env_secrets"), "env_secrets"),
            data_uri=arguments["data"],
            model_uri=arguments[MODEL_OUTPUT],
            logs_uri=arguments["training_logs"],
            placement=argument_names.from_arguments(TrainingPlacement, arguments),
            run_id=arguments.get("run_id", ""),
            run_dir=os.environ.get(RUN_DIR_ENV, ""),
            pipeline=arguments.get("pipeline", ""),
        )

    def variants(self, settings: DistributedTrainingSettings) -> list[Variant[DistributedTrainingSettings]]:
        """The framework's v1 job and, for PyTorch, a TrainJob, as ``training_api`` allows. A
        TrainJob takes no whole Secrets as environment, so ``env_secrets`` leaves it out of
        ``auto`` (and :func:`~kfstack.kubernetes.train_job.build_trainjob` refuses it)."""
        topology = settings.topology
        apis = candidate_apis(settings.placement.training_api, topology.framework, topology.elastic)
        if settings.env_secrets and settings.placement.training_api == AUTO:
            apis = tuple(api for api in apis if api != TRAINER_V2)
        return [
            Variant(
                settings.with_training_api(api), (job_kind(api, topology.framework),), f"training_api={api}"
            )
            for api in apis
        ]

    def preflight(self, settings: DistributedTrainingSettings) -> None:
        """The input dataset exists.

        Raises:
            InvalidParameterError: It does not.
        """
        fs, path = fsspec.core.url_to_fs(fsspec_uri(settings.data_uri))
        if not fs.exists(path):
            raise InvalidParameterError(f"data: no dataset at {settings.data_uri}")

    def build(self, settings: DistributedTrainingSettings, context: RunContext) -> list[dict]:
        """The TrainJob, PyTorchJob or TFJob of this run, running the entrypoint in ``image``."""
        topology, placement = settings.topology, settings.placement
        request = TrainingJobRequest(
            name=context.name(NAME_PREFIX),
            labels=context.labels(),
            image=settings.image,
            module=entrypoint.MODULE,
            args=settings.argv(),
            workers=topology.workers,
            profile=placement.profile,
            secrets=SecretRefs(
                object_store=placement.object_store_secret,
                image_pull=placement.image_pull_secret,
                env_from=settings.env_secrets,
                tracking=context.tracking_secret(),
            ),
            checkpoint_uri=fsspec_uri(settings.checkpoint_uri),
            max_restarts=topology.max_restarts,
            active_deadline_seconds=placement.timeout_seconds,
            # In Katib's trial template, each trial makes its own run under the tuning task's.
            env={**settings.env(remote=True), **context.tracking_env(trial=bool(settings.trial))},
            istio_mesh=placement.istio_mesh,
        )
        if settings.training_api == TRAINER_V2:
            return [build_trainjob(request, runtime=placement.trainer_runtime)]
        if topology.framework == PYTORCH:
            elastic = None
            if topology.elastic:
                elastic = ElasticSettings(
                    topology.elastic_min_workers, topology.elastic_max_workers, topology.max_restarts
                )
            return [build_pytorchjob(request.with_elastic(elastic))]
        return [build_tfjob(request.with_topology(topology.tf_topology, topology.tf_parameter_servers))]

    def replicas(
        self, settings: DistributedTrainingSettings, store: EmbeddedObjectStore | None = None
    ) -> ReplicaSet:
        """The job's replicas as local processes under the chosen API's env contract."""
        command = [entrypoint.MODULE, *settings.argv()]
        env = settings.env(remote=False, store=store)
        workers = settings.topology.workers
        if settings.topology.framework != PYTORCH:
            return local_replicas.tfjob_replicas(settings.layout(), command, env)
        if settings.training_api == TRAINER_V2:
            return local_replicas.trainjob_nodes(workers, command, env)
        return local_replicas.pytorchjob_replicas(workers, command, env)

    def run_local(self, settings: DistributedTrainingSettings) -> StageResult:
        """The replicas as local processes; the cost is the ``cpu`` profile's for this machine."""
        os.makedirs(settings.logs_uri, exist_ok=True)
        with object_store.for_step() as store:
            replicas = self.replicas(settings, store)
            group = run_process_group(
                replicas.build,
                logs_dir=settings.logs_uri,
                max_restarts=settings.topology.max_restarts,
                done_when_exits=replicas.done_when_exits,
                on_group_started=settings.on_group_started,
                threads_per_process=settings.threads_per_worker,
            )
        result = read_result(settings.result_uri)
        metrics = judge(settings, result, local_price_per_hour())
        metrics["restarts"] = float(group.restarts)
        record_lineage(settings, settings.model_uri, settings.data_uri, result)
        reference = {
            "kind": "LocalProcessGroup",
            "framework": settings.topology.framework,
            "training_api": settings.training_api,
            **({} if settings.topology.framework == PYTORCH else {"topology": settings.topology.tf_topology}),
            **replicas.details,
            "attempts": group.attempts,
        }
        return StageResult({TRAINING_METRICS: metrics}, reference, artifact_metadata=model_metadata(settings))

    def collect(
        self, settings: DistributedTrainingSettings, finished: list[dict], cluster: Cluster
    ) -> StageResult:
        result = read_result(fsspec_uri(settings.result_uri))
        price = settings.placement.profile.price_per_hour(settings.job_pods(result.get("world_size")))
        metrics = judge(settings, result, price)
        record_lineage(settings, fsspec_uri(settings.model_uri), fsspec_uri(settings.data_uri), result)
        return StageResult(
            {TRAINING_METRICS: metrics},
            {"framework": settings.topology.framework, "training_api": settings.training_api},
            artifact_metadata=model_metadata(settings),
        )


STAGE = DistributedTrainingStage()


def local_price_per_hour() -> float | None:
    """The embedded platform's price per hour: this machine as one node of the ``cpu`` profile,
    whatever the replica count (the replicas share it).

    A nominal figure from the profile file, so that local runs and benchmarks can compare
    layouts by cost; it is not what this machine costs. None (no cost reported) when that
    profile has no price.
    """
    return node_pools.get_profile(node_pools.CPU_POOL).price_per_node_hour


def read_result(uri: str) -> dict[str, Any]:
    """The chief replica's result.

    Raises:
        ContractError: There is none: the job ended without its chief finishing the code.
    """
    try:
        with fsspec.open(uri, "r") as f:
            return json.load(f)
    except FileNotFoundError as err:
        raise contracts.ContractError(
            f"training finished but its chief replica left no result at {uri}: the replicas must "
            f"run the code through python -m {entrypoint.MODULE} (the step's job does so)"
        ) from err


def judge(
    settings: DistributedTrainingSettings, result: Mapping[str, Any], price: float | None
) -> dict[str, float]:
    """The step's metrics from the chief's result, once it kept the contract.

    Raises:
        ContractError: The model directory lacks the declared format's files, the report is not
            numbers, or a declared metric was never printed.
    """
    entry = settings.code.entry
    problems = []
    if result.get("model_problem"):
        problems.append(
            f"training finished but rank 0 left a model directory ({contracts.MODEL_DIR_ENV}) that "
            f"does not hold a {settings.model_format} model: {result['model_problem']}"
        )
    if result.get("report_problem"):
        problems.append(str(result["report_problem"]))
    printed = result.get("metrics", {})
    missing = [metric for metric in settings.code.metrics if metric not in printed]
    if missing:
        problems.append(
            f"training finished but rank 0 never printed {', '.join(f'{m}=<value>' for m in missing)} "
            f"(the code declares these metrics; print them as Katib metric lines)"
        )
    if problems:
        raise contracts.ContractError(f"training code {entry}: " + "; ".join(problems))
    seconds = float(result["training_seconds"])
    report = result.get("report", {})
    per_epoch = report.get(SECONDS_PER_EPOCH)
    return {
        **{name: float(value) for name, value in printed.items()},
        **{f"report.{name}": float(value) for name, value in report.items()},
        "training_seconds": seconds,
        "world_size": float(result.get("world_size") or settings.topology.workers),
        **job_cost(seconds, price),
        **(cost_metrics(float(per_epoch), price) if per_epoch is not None else {}),
    }


def record_lineage(
    settings: DistributedTrainingSettings, model_uri: str, data_uri: str, result: Mapping[str, Any]
) -> Lineage:
    """Writes the model's lineage record (:mod:`kfstack.lineage`) beside it: the dataset's own
    lineage (what its data step recorded, and its URI), the parameters that decide the model --
    the data step's, then this run's hyperparameters (as tuning chose them) and job shape, by
    pipeline parameter name -- and the last value of every declared metric."""
    dataset = contracts.read_data_lineage(data_uri)
    printed = result.get("metrics", {})
    lineage = Lineage(
        model_version=model_version(settings.run_id, settings.run_dir),
        pipeline_version=pipeline_version(),
        kfstack_version=__version__,
        run_id=settings.run_id,
        created=lineage_time(),
        data={"input_uri": data_uri, **dataset["data"]},
        parameters={
            **dataset["parameters"],
            **settings.hyperparameters,
            **settings.topology.arguments(),
            "training_api": settings.training_api,
        },
        metrics={name: float(printed[name]) for name in settings.code.metrics},
        pipeline=settings.pipeline,
    )
    lineage.save(model_uri)
    return lineage


def model_metadata(settings: DistributedTrainingSettings) -> dict[str, dict[str, Any]]:
    """What the model artifact records of where it comes from (shown in the KFP UI)."""
    return {
        MODEL_OUTPUT: {
            "model_format": settings.model_format,
            "training_code": settings.code.entry,
            "framework": settings.topology.framework,
            "training_api": settings.training_api,
            "hyperparameters": dict(settings.hyperparameters),
            "kfstack_version": __version__,
            "pipeline_version": pipeline_version(),
        }
    }


def train_locally(
    code: contracts.TrainingCode,
    hyperparameters: Mapping[str, Any],
    *,
    data_uri: str,
    model_uri: str,
    logs_uri: str,
    topology: JobTopology | None = None,
    model_format: str = contracts.CUSTOM,
    training_api: str = AUTO,
    threads_per_worker: int | None = None,
    on_group_started: Callable[..., None] | None = None,
) -> tuple[dict[str, float], dict]:
    """Trains ``code`` on this machine as the embedded platform's training step does; returns
    the step's metrics and reference.

    For callers outside a pipeline (benchmarks, tests): the same checks, preflight and local
    run as the ``distributed-training`` task, under the contract of ``training_api`` (``auto``:
    the preferred one).
    """
    settings = DistributedTrainingSettings(
        code=code,
        hyperparameters=code.typed(hyperparameters),  # declared, typed, safe in a shell command
        topology=topology or JobTopology(),
        model_format=contracts.check_model_format(model_format),
        image="",
        env_secrets=(),
        data_uri=data_uri,
        model_uri=model_uri,
        logs_uri=logs_uri,
        placement=TrainingPlacement(training_api=training_api),
        threads_per_worker=threads_per_worker,
        on_group_started=on_group_started,
    )
    STAGE.preflight(settings)
    result = STAGE.run_local(STAGE.variants(settings)[0].settings)
    return dict(result.metrics[TRAINING_METRICS]), dict(result.reference)
