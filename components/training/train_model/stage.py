"""Training as a platform stage: one step for both frameworks, either platform.

The framework is a setting: its backend (:mod:`.pytorch.backend`, :mod:`.tensorflow.backend`)
supplies the job builder, the local replicas and the trainer module; everything else -- the
checks before anything starts, the trainer's argv, where checkpoints go, the metrics read back
from ``training_metrics.json`` and the run's cost -- is the same for both, here.

The cost: the trainers report seconds per epoch (:mod:`kfstack.training.throughput`); this stage
prices them at what the job's pods cost per hour on their node pool
(:meth:`~kfstack.kubernetes.node_pools.NodePoolProfile.price_per_hour`, the rule is documented
in ``node_pools.yaml``), or on the embedded platform at :func:`local_price_per_hour`. A pool
without a price gives a report without cost.

The training API is a setting too (``training_api``, :mod:`kfstack.kubernetes.training_apis`):
its variants are the v1 job of the framework and, for PyTorch, a Trainer v2 TrainJob. The
embedded platform replays the chosen API's contract: a PyTorchJob's env, or a TrainJob's
``PET_*`` env with the trainer started through torchrun.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import fsspec

from kfstack import images
from kfstack.components.training.train_model.pytorch import backend as pytorch_backend
from kfstack.components.training.train_model.tensorflow import backend as tensorflow_backend
from kfstack.flights.feature_spec import FEATURE_SPEC_FILE, JOB_REPORT_FILE
from kfstack.kubernetes import node_pools
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.naming import RunContext
from kfstack.kubernetes.placement import TrainingPlacement
from kfstack.kubernetes.train_job import build_trainjob
from kfstack.kubernetes.training_apis import AUTO, TRAINER_V2, candidate_apis, job_kind
from kfstack.kubernetes.training_jobs import TrainingJobRequest
from kfstack.lineage import Lineage, document_hash, model_version
from kfstack.lineage import now as lineage_time
from kfstack.platforms import RUN_DIR_ENV, StageResult, Variant
from kfstack.training import shards
from kfstack.training.process_group import run_process_group
from kfstack.training.settings import (
    CHECKPOINT_DIR,
    METRICS_FILE,
    PYTORCH,
    REPORTED_METRICS,
    SECONDS_PER_EPOCH,
    TENSORFLOW,
    VALIDATION_METRICS,
    TrainingSettings,
)
from kfstack.training.throughput import cost_metrics
from kfstack.uris import fsspec_uri, join
from kfstack.version import VERSION_ENV, __version__, pipeline_version

BACKENDS: dict[str, ModuleType] = {PYTORCH: pytorch_backend, TENSORFLOW: tensorflow_backend}
TRAINING_METRICS = "training_metrics"


@dataclasses.dataclass(frozen=True)
class TrainModelSettings:
    """The training step: hyperparameters, data and model locations, placement.

    Attributes:
        training: What to train and how.
        features_uri: The feature job's output (shards and feature spec).
        model_uri: Receives ``model.onnx``, ``feature_spec.json``, ``training_metrics.json``.
        logs_uri: Per-replica logs (local) and the checkpoints (``<logs_uri>/checkpoints``).
        placement: Where the job's replicas run.
        threads_per_worker: Local only: intra-op threads per replica; default: cores split evenly.
        on_group_started: Local only: test hook, see ``run_process_group``.
        run_id, run_dir: The pipeline run and, on the embedded platform, its directory: they
            name the model's version in its lineage record.
    """

    training: TrainingSettings
    features_uri: str
    model_uri: str
    logs_uri: str
    placement: TrainingPlacement = dataclasses.field(default_factory=TrainingPlacement)
    threads_per_worker: int | None = None
    on_group_started: Callable[..., None] | None = None
    run_id: str = ""
    run_dir: str = ""

    @property
    def checkpoint_uri(self) -> str:
        return join(self.logs_uri, CHECKPOINT_DIR)

    @property
    def training_api(self) -> str:
        """The concrete API (``v1`` or ``trainer-v2``) of a variant's settings.

        Raises:
            ValueError: Still ``auto``: only :meth:`TrainModelStage.variants` resolves it.
        """
        if self.placement.training_api == AUTO:
            raise ValueError(
                "training_api=auto: build and run a variant's settings (TrainModelStage.variants)"
            )
        return self.placement.training_api

    def with_training_api(self, api: str) -> TrainModelSettings:
        return dataclasses.replace(self, placement=dataclasses.replace(self.placement, training_api=api))

    def trainer_argv(self, remote: bool) -> list[str]:
        """The trainer's arguments; ``remote``: the URIs as the job's pods open them."""
        uri = fsspec_uri if remote else str
        return self.training.trainer_argv(
            features_uri=uri(self.features_uri),
            model_uri=uri(self.model_uri),
            checkpoint_uri=uri(self.checkpoint_uri),
        )


class TrainModelStage:
    component = "train-model"
    reference_output = "training_job"

    def settings(self, arguments: Mapping[str, Any]) -> TrainModelSettings:
        return TrainModelSettings(
            training=TrainingSettings.from_arguments(arguments),
            features_uri=arguments["features"],
            model_uri=arguments["model"],
            logs_uri=arguments["training_logs"],
            placement=TrainingPlacement.from_arguments(arguments),
            run_id=arguments.get("run_id", ""),
            run_dir=os.environ.get(RUN_DIR_ENV, ""),
        )

    def variants(self, settings: TrainModelSettings) -> list[Variant[TrainModelSettings]]:
        """The framework's v1 job and, for PyTorch, a TrainJob, as ``training_api`` allows.

        Raises:
            InvalidParameterError: ``trainer-v2`` for TensorFlow or elastic PyTorch.
        """
        training = settings.training
        apis = candidate_apis(settings.placement.training_api, training.framework, training.elastic)
        return [
            Variant(
                settings.with_training_api(api),
                (job_kind(api, training.framework),),
                choice=f"training_api={api}",
            )
            for api in apis
        ]

    def build(self, settings: TrainModelSettings, context: RunContext) -> list[dict]:
        """The PyTorchJob, TFJob or TrainJob of this run."""
        training = settings.training
        backend = BACKENDS[training.framework]
        placement = settings.placement
        request = TrainingJobRequest(
            name=context.name(backend.NAME_PREFIX),
            labels=context.labels(),
            image=images.image_for(backend.IMAGE_ROLE),
            module=backend.TRAINER_MODULE,
            args=settings.trainer_argv(remote=True),
            workers=training.workers,
            profile=placement.profile,
            secrets=placement.secrets,
            checkpoint_uri=fsspec_uri(settings.checkpoint_uri),
            max_restarts=training.max_restarts,
            active_deadline_seconds=placement.timeout_seconds,
        )
        if settings.training_api == TRAINER_V2:
            return [build_trainjob(request, runtime=placement.trainer_runtime)]
        return [backend.build_job(training, request)]

    def preflight(self, settings: TrainModelSettings) -> None:
        """Every rank gets a shard of the train and validation splits (reads the listing)."""
        for split in ("train", "validation"):
            split_uri = join(fsspec_uri(settings.features_uri), split)
            shards.shards_for_rank(shards.list_shards(split_uri), 0, settings.training.workers)

    def run_local(self, settings: TrainModelSettings) -> StageResult:
        """The job's replicas as local processes; restarts come from the latest checkpoint.

        The cost is at :func:`local_price_per_hour`, whatever ``placement`` names.
        """
        training = settings.training
        os.makedirs(settings.logs_uri, exist_ok=True)
        replicas = BACKENDS[training.framework].local_replicas(
            training, settings.trainer_argv(remote=False), settings.training_api
        )
        result = run_process_group(
            replicas.build,
            logs_dir=settings.logs_uri,
            max_restarts=training.max_restarts,
            on_group_started=settings.on_group_started,
            threads_per_process=settings.threads_per_worker,
            done_when_exits=replicas.done_when_exits,
        )
        trained = read_metrics(settings.model_uri)
        metrics = {
            **trained,
            **cost_metrics(trained[SECONDS_PER_EPOCH], local_price_per_hour()),
            "restarts": float(result.restarts),
        }
        record_lineage(settings, settings.model_uri, settings.features_uri, metrics)
        reference = {
            "kind": "LocalProcessGroup",
            "framework": training.framework,
            "training_api": settings.training_api,
            **replicas.details,
            "attempts": result.attempts,
        }
        return StageResult({TRAINING_METRICS: metrics}, reference, artifact_metadata=model_metadata(settings))

    def collect(self, settings: TrainModelSettings, finished: list[dict], cluster: Cluster) -> StageResult:
        trained = read_metrics(fsspec_uri(settings.model_uri))
        price = job_price_per_hour(settings, world_size=int(trained["world_size"]))
        metrics = {**trained, **cost_metrics(trained[SECONDS_PER_EPOCH], price)}
        record_lineage(settings, fsspec_uri(settings.model_uri), fsspec_uri(settings.features_uri), metrics)
        return StageResult(
            {TRAINING_METRICS: metrics},
            {"framework": settings.training.framework, "training_api": settings.training_api},
            artifact_metadata=model_metadata(settings),
        )


STAGE = TrainModelStage()
MODEL_OUTPUT = "model"


def model_metadata(settings: TrainModelSettings) -> dict[str, dict[str, Any]]:
    """What the model artifact records of where it comes from: the project and pipeline versions
    (the pipeline's as compiled, :data:`~kfstack.version.VERSION_ENV`), the framework and the
    training API."""
    return {
        MODEL_OUTPUT: {
            "kfstack_version": __version__,
            "pipeline_version": os.environ.get(VERSION_ENV) or pipeline_version(),
            "framework": settings.training.framework,
            "training_api": settings.training_api,
        }
    }


def record_lineage(
    settings: TrainModelSettings, model_uri: str, features_uri: str, metrics: Mapping[str, float]
) -> Lineage:
    """Writes the model's lineage record (:mod:`kfstack.lineage`) beside it: the data the
    feature job read (its report and spec), the parameters of that job and of this training
    (with the hyperparameters as tuning chose them), and the validation metrics."""
    with fsspec.open(join(features_uri, JOB_REPORT_FILE)) as f:
        report = json.load(f)
    with fsspec.open(join(features_uri, FEATURE_SPEC_FILE)) as f:
        spec = json.load(f)
    lineage = Lineage(
        model_version=model_version(settings.run_id, settings.run_dir),
        pipeline_version=os.environ.get(VERSION_ENV) or pipeline_version(),
        kfstack_version=__version__,
        run_id=settings.run_id,
        created=lineage_time(),
        data={
            "window": report.get("window", {}),
            "content_hash": report.get("content_hash", ""),
            "rows_read": report["rows_read"],
            "feature_spec_hash": document_hash(spec),
        },
        parameters={
            **report.get("job", {}),
            **settings.training.arguments(),
            "training_api": settings.training_api,
        },
        metrics={name: metrics[name] for name in VALIDATION_METRICS},
    )
    lineage.save(model_uri)
    return lineage


def job_price_per_hour(settings: TrainModelSettings, world_size: int) -> float | None:
    """What the job's pods cost per hour on the ``placement`` pool; None when it has no price.

    The pods are the framework's count (its backend's ``job_pods``): a PyTorch rank each, a
    TFJob's whole replica layout.
    """
    pods = BACKENDS[settings.training.framework].job_pods(settings.training, world_size)
    return settings.placement.profile.price_per_hour(pods)


def local_price_per_hour() -> float | None:
    """The embedded platform's price per hour: this machine as one node of the ``cpu`` profile,
    whatever the replica count (the replicas share it).

    A nominal figure from the profile file, so that local runs and benchmarks can compare
    layouts by cost; it is not what this machine costs. None (no cost reported) when that
    profile has no price.
    """
    return node_pools.get_profile(node_pools.CPU_POOL).price_per_node_hour


def read_metrics(model_uri: str) -> dict[str, float]:
    """The flat metrics of the ``training_metrics.json`` a trainer wrote beside its model."""
    with fsspec.open(join(model_uri, METRICS_FILE)) as f:
        trained = json.load(f)
    return {name: float(trained[name]) for name in REPORTED_METRICS}


def train_locally(
    training: TrainingSettings,
    *,
    features_uri: str,
    model_uri: str,
    logs_uri: str,
    threads_per_worker: int | None = None,
    on_group_started: Callable[..., None] | None = None,
    training_api: str = AUTO,
) -> tuple[dict[str, float], dict]:
    """Trains on this machine as the local platform does; returns the metrics and reference.

    For callers outside a pipeline (benchmarks, tests): the same preflight and local run as the
    ``train-model`` task, with the contract of ``training_api`` (``auto``: the preferred one).
    """
    settings = TrainModelSettings(
        training=training,
        features_uri=features_uri,
        model_uri=model_uri,
        logs_uri=logs_uri,
        placement=TrainingPlacement(training_api=training_api),
        threads_per_worker=threads_per_worker,
        on_group_started=on_group_started,
    )
    STAGE.preflight(settings)
    result = STAGE.run_local(STAGE.variants(settings)[0].settings)
    return dict(result.metrics[TRAINING_METRICS]), dict(result.reference)
