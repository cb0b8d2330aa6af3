"""Deploying any model with canary analysis, on either platform.

The rollout and its decision are :func:`kfstack.serving.rollout.roll_out`'s; what this stage
adds is *any* model:

- **what serves it**: a standard format on KServe's own runtime for it on a cluster (the
  InferenceService's ``predictor.model.modelFormat``; ``runtime`` empty lets KServe pick, and
  ``onnx`` runs on Triton with ``protocolVersion: v2``), or a team's ``kserve.Model`` behind the
  team's ServingRuntime (``serving_runtime``); on the embedded platform kfstack's format server
  (:mod:`kfstack.serving.format_server`: the stand-in, or the team's class) on loopback;
- **what it is served from**: the model directory, or for ``onnx`` Triton's model repository
  laid out from it (``<serving_model>/<serving_name>/1/model.onnx``: Triton serves a model by its
  folder's name, which must be the InferenceService's);
- **what is replayed**: the labelled holdout ``Dataset`` (Parquet), each row's feature columns
  as a request carries them (:mod:`kfstack.serving.scoring`: ``tensor`` or ``records``), in
  the server's protocol (:mod:`kfstack.serving.protocols`: V1, or a V2 tensor for Triton);
- **how it is judged**: the task's quality metric (AUC, accuracy, RMSE) beside error rate, p95
  latency and prediction shift (:mod:`kfstack.serving.canary`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import fsspec

from kfstack import contracts, distributions
from kfstack.components import argument_names
from kfstack.errors import InvalidParameterError
from kfstack.evaluation.task_metrics import check_task
from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes import serving_runtime
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.naming import RunContext
from kfstack.kubernetes.placement import ServingPlacement
from kfstack.kubernetes.resources import INFERENCE_SERVICE
from kfstack.lineage import model_version
from kfstack.monitoring.drift import feature_names
from kfstack.platforms import RUN_DIR_ENV, StageResult, Variant
from kfstack.serving import format_server
from kfstack.serving.canary import CanaryThresholds
from kfstack.serving.kserve_rollout import KServeRollout
from kfstack.serving.local_rollout import embedded_rollout
from kfstack.serving.protocols import ServingProtocol, V1Predict, V2Tensor
from kfstack.serving.registry import REGISTRY_DIR_ENV
from kfstack.serving.rollout import Holdout, Rollout, deployment_result, roll_out, skipped_deployment
from kfstack.serving.scoring import REQUEST_FORMATS, read_labelled
from kfstack.serving.standard_formats import triton_layout
from kfstack.settings import Placeholder
from kfstack.uris import fsspec_uri, join, storage_uri


@dataclasses.dataclass(frozen=True)
class ModelDeploymentSettings:
    """The deployment step.

    Attributes:
        deploy: False: nothing runs.
        request: The rollout on Kubernetes (its checks hold for local runs too).
        placement: Predictor pods' pool and service account; how long a rollout step may take.
        thresholds: The canary decision rule's limits.
        model_format: What serves the model.
        custom_predictor: ``custom``: the team's ``kserve.Model`` (embedded platform).
        task: How the canary's predictions are judged.
        label_column, feature_columns, request_format: How holdout rows become requests.
        canary_records, canary_batch_size: How much of the holdout is replayed, in what batches.
        model_uri: The trained model directory.
        serving_uri: What the servers load (``onnx``: Triton's repository laid out there).
        holdout_uri: The labelled holdout rows.
        server_flags: kfstack's model-server flags for the servers (live drift's ignored
            features), on either platform.
    """

    deploy: bool
    request: isvc.ServingRequest
    placement: ServingPlacement
    thresholds: CanaryThresholds
    model_format: str
    custom_predictor: str
    task: str
    label_column: str
    feature_columns: tuple[str, ...]
    request_format: str
    canary_records: int
    canary_batch_size: int
    model_uri: str
    serving_uri: str
    holdout_uri: str
    run_id: str
    run_dir: str
    registry_dir: str
    server_flags: tuple[str, ...] = ()


class ModelDeploymentStage:
    component = "model-deployment"
    reference_output = "deployment"

    def settings(self, arguments: Mapping[str, Any]) -> ModelDeploymentSettings:
        """Everything checked before anything is deployed (the format, the predictor where it
        can be imported, the task, the request format, the InferenceService's rules).

        Raises:
            InvalidParameterError: Naming the parameter.
        """
        from kfstack.serving.served_models import check_model

        model_format = contracts.check_model_format(arguments.get("model_format", ""))
        custom_predictor = arguments.get("custom_predictor", "")
        runtime = arguments.get("serving_runtime", "")
        serving_format = arguments.get("serving_model_format") or model_format
        if model_format == contracts.CUSTOM:
            if not (runtime and arguments.get("serving_model_format")):
                raise InvalidParameterError(
                    "model_format=custom: name serving_runtime (the team's ServingRuntime, which runs its "
                    "predictor image) and serving_model_format (a format its supportedModelFormats lists)"
                )
            if arguments.get("platform") == "local":
                check_model(model_format, custom_predictor)
        request_format = arguments.get("request_format", "tensor")
        if request_format not in REQUEST_FORMATS:
            raise InvalidParameterError(
                f"request_format={request_format!r} is not one of {', '.join(REQUEST_FORMATS)}"
            )
        if model_format == contracts.ONNX and request_format != "tensor":
            raise InvalidParameterError(
                "model_format=onnx takes request_format=tensor (one input tensor, as Triton)"
            )
        placement = argument_names.from_arguments(ServingPlacement, arguments)
        server_flags = _live_drift_flags(arguments.get("drift_ignore_features", ""))
        run_dir = os.environ.get(RUN_DIR_ENV, "")
        run = model_version(arguments["run_id"], run_dir)
        model_uri = arguments["model"]
        serving_uri = arguments["serving_model"] if model_format == contracts.ONNX else model_uri
        request = argument_names.from_arguments(
            isvc.ServingRequest,
            arguments,
            storage_uri=storage_uri(serving_uri),
            model_version=run,
            profile=placement.profile,
            service_account=placement.service_account,
            model_format=serving_format,
            runtime=runtime,
            protocol_version="v2" if model_format == contracts.ONNX else "",
            # A custom model is a team's kserve.Model on kfstack's model server, which takes
            # kfstack's flags and exports its queue gauge; a standard format's runtime (KServe's,
            # or one a team names, e.g. its own Triton) is not kfstack's, whatever its name.
            kfstack_server=model_format == contracts.CUSTOM,
            server_flags=server_flags,
        )
        thresholds = argument_names.from_arguments(CanaryThresholds, arguments)
        for name in ("canary_records", "canary_batch_size"):
            if arguments[name] < 1:
                raise InvalidParameterError(f"{name}={arguments[name]} must be at least 1")
        return ModelDeploymentSettings(
            deploy=arguments["deploy"],
            request=request,
            placement=placement,
            thresholds=thresholds,
            model_format=model_format,
            custom_predictor=custom_predictor,
            task=check_task(arguments["task"]),
            label_column=arguments["label_column"],
            feature_columns=tuple(arguments.get("feature_columns") or ()),
            request_format=request_format,
            canary_records=arguments["canary_records"],
            canary_batch_size=arguments["canary_batch_size"],
            model_uri=model_uri,
            serving_uri=serving_uri,
            holdout_uri=join(arguments["holdout"], split)
            if (split := arguments.get("holdout_split"))
            else arguments["holdout"],
            run_id=run,
            run_dir=run_dir,
            registry_dir=os.environ.get(REGISTRY_DIR_ENV, ""),
            server_flags=server_flags,
        )

    def variants(self, settings: ModelDeploymentSettings) -> list[Variant[ModelDeploymentSettings]]:
        return [Variant(settings, requires=(INFERENCE_SERVICE,) if settings.deploy else ())]

    def declared_runtime(self, settings: ModelDeploymentSettings) -> serving_runtime.Declared | None:
        """The team's own server this deployment relies on on a cluster (its class, the
        ServingRuntime that runs it, the model format that runtime lists); None for a standard
        format, which KServe's own runtime serves, or a value only the run knows."""
        declared = (settings.custom_predictor, settings.request.runtime, settings.request.model_format)
        if not settings.deploy or settings.model_format != contracts.CUSTOM:
            return None
        if any(isinstance(value, Placeholder) or not value for value in declared):
            return None
        return serving_runtime.Declared(*declared)

    def check_cluster(self, settings: ModelDeploymentSettings, cluster: Cluster) -> None:
        """Before anything is deployed (the run's first task, and this step again): the
        cluster's runtime serves the pipeline's class, format and package
        (:func:`kfstack.kubernetes.serving_runtime.check_cluster`); a mismatch would otherwise
        show only as an InferenceService that never gets Ready, after the training.

        Raises:
            InvalidParameterError: Naming the cluster's value and the pipeline's.
        """
        declared = self.declared_runtime(settings)
        if declared is not None:
            serving_runtime.check_cluster(self.component, cluster, declared)

    def build(self, settings: ModelDeploymentSettings, context: RunContext) -> list[dict]:
        """The InferenceService of a first deployment (a later run turns it into a canary)."""
        if not settings.deploy:
            return []
        # The namespace is the cluster's, known only once the step runs.
        request = settings.request.labelled(context.labels()).in_namespace(Placeholder("<namespace>"))
        return [isvc.first_rollout(request)]

    def preflight(self, settings: ModelDeploymentSettings) -> None:
        """The holdout is there, before anything is deployed."""
        if not settings.deploy:
            return
        fs, holdout = fsspec.core.url_to_fs(fsspec_uri(settings.holdout_uri))
        if not fs.exists(holdout):
            raise InvalidParameterError(f"holdout: no dataset at {settings.holdout_uri}")

    def run_local(self, settings: ModelDeploymentSettings) -> StageResult:
        if not settings.deploy:
            return skipped_deployment()
        model_format, predictor = settings.model_format, settings.custom_predictor
        rollout = embedded_rollout(
            run_dir=settings.run_dir,
            registry_dir=settings.registry_dir,
            name=settings.request.name,
            model_dir=settings.serving_uri,
            version=settings.request.model_version,
            run_id=settings.run_id,
            command=lambda model_dir, name, port: format_server.command(
                model_dir,
                name,
                port,
                model_format,
                predictor,
                "--enable_latency_logging=false",
                *settings.server_flags,
            ),
            protocol=prepare_serving(settings),
        )
        return _deploy(rollout, settings)

    def run_kubernetes(
        self, settings: ModelDeploymentSettings, context: RunContext, cluster: Cluster
    ) -> StageResult:
        if not settings.deploy:
            return skipped_deployment()
        self.check_cluster(settings, cluster)
        rollout = KServeRollout(
            settings.request.labelled(context.labels()),
            cluster,
            settings.placement,
            protocol=prepare_serving(settings),
        )
        return _deploy(rollout, settings)


STAGE = ModelDeploymentStage()


def _live_drift_flags(ignored: str) -> tuple[str, ...]:
    """The servers' live-drift flags: the drift check's ignored features, read as it reads them
    (:func:`~kfstack.monitoring.drift.feature_names`), ignored live as well; none given: the
    model's own declared ones (:mod:`kfstack.serving.model_server`)."""
    names = feature_names(ignored)
    return (f"--live_drift_ignore_features={','.join(names)}",) if names else ()


def prepare_serving(settings: ModelDeploymentSettings) -> ServingProtocol:
    """What the servers load and how the analysis asks them: for ``onnx`` the model laid out as
    Triton's repository at the serving URI (``<serving>/<serving_name>/1/model.onnx``) and a V2
    tensor of the graph's one input; other formats serve the model directory as it is, over V1.

    Raises:
        InvalidParameterError: The model directory holds no single ``.onnx`` file, or the graph
            takes more than one input.
    """
    if settings.model_format != contracts.ONNX:
        return V1Predict()
    onnxruntime = distributions.require("onnxruntime", "the canary analysis of an onnx model")

    try:
        laid_out = triton_layout(
            fsspec_uri(settings.model_uri), settings.request.name, fsspec_uri(settings.serving_uri)
        )
    except (FileNotFoundError, ValueError) as err:
        raise InvalidParameterError(f"model {settings.model_uri}: {err}") from err
    with fsspec.open(laid_out, "rb") as f:
        inputs = onnxruntime.InferenceSession(f.read(), providers=["CPUExecutionProvider"]).get_inputs()
    if len(inputs) != 1:
        raise InvalidParameterError(
            f"model {settings.model_uri}: the canary replays one input tensor; the graph takes "
            f"{', '.join(i.name for i in inputs)}"
        )
    datatype = "FP64" if inputs[0].type == "tensor(double)" else "FP32"
    return V2Tensor(inputs[0].name, datatype)


def read_holdout(settings: ModelDeploymentSettings) -> Holdout:
    """The first ``canary_records`` labelled rows, as requests carry them."""
    rows = read_labelled(
        fsspec_uri(settings.holdout_uri),
        settings.label_column,
        settings.feature_columns,
        settings.request_format,
    )
    count = min(settings.canary_records, len(rows))
    features = rows.features[:count]
    records = features.tolist() if hasattr(features, "tolist") else list(features)
    return Holdout(records=records, labels=rows.labels[:count].tolist())


def _deploy(rollout: Rollout, settings: ModelDeploymentSettings) -> StageResult:
    outcome = roll_out(
        rollout,
        settings.request.model_version,
        read_holdout(settings),
        settings.thresholds,
        settings.canary_batch_size,
        settings.task,
    )
    return deployment_result(rollout, outcome)
