"""Deployment as a platform stage: the trained model rolled out, canaried and judged.

The decision is :func:`kfstack.serving.rollout.roll_out`'s, the same on both platforms; this
module gives it the platform's hands -- a KServe InferenceService on Kubernetes
(:class:`~kfstack.serving.kserve_rollout.KServeRollout`), model servers on loopback and the
local registry on this machine (:class:`~kfstack.serving.local_rollout.LocalRollout`) -- and
the labelled records to replay: the feature job's holdout requests.

A deployment reads what serves before it acts (a canary patches the live InferenceService), so
it is a :class:`~kfstack.platforms.ServiceStage`: :meth:`build` is what a first run creates
(``kfstack render``), :meth:`run_kubernetes` the rollout itself. With ``deploy=false`` nothing
runs and the outputs say ``skipped``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import fsspec

from kfstack.components.serving.predictor import command
from kfstack.errors import InvalidParameterError
from kfstack.features import HOLDOUT_FILE
from kfstack.flights.scoring import MODEL_DIR_FILES
from kfstack.flights.settings import CanaryReplay
from kfstack.kubernetes import inference_service as isvc
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.naming import RunContext
from kfstack.kubernetes.placement import ServingPlacement
from kfstack.kubernetes.resources import INFERENCE_SERVICE
from kfstack.lineage import model_version
from kfstack.platforms import RUN_DIR_ENV, StageResult, Variant
from kfstack.serving.canary import CanaryThresholds
from kfstack.serving.kserve_rollout import KServeRollout
from kfstack.serving.local_rollout import embedded_rollout
from kfstack.serving.registry import REGISTRY_DIR_ENV
from kfstack.serving.rollout import Holdout, Rollout, deployment_result, roll_out, skipped_deployment
from kfstack.uris import fsspec_uri, join, storage_uri


@dataclasses.dataclass(frozen=True)
class DeployModelSettings:
    """The deployment step.

    Attributes:
        deploy: False: nothing runs.
        request: The rollout on Kubernetes (its checks hold for local runs too).
        placement: Predictor pods' pool and service account; how long a rollout step may take.
        thresholds: The canary decision rule's limits.
        replay: How much of the holdout is replayed, in what batches.
        model_uri: The model directory (a local path on this machine).
        holdout_uri: The feature job's labelled holdout requests.
        run_dir: Local: the run whose services the model servers are.
        registry_dir: Local: the model registry's root.
    """

    deploy: bool
    request: isvc.ServingRequest
    placement: ServingPlacement
    thresholds: CanaryThresholds
    replay: CanaryReplay
    model_uri: str
    holdout_uri: str
    run_id: str
    run_dir: str
    registry_dir: str


class DeployModelStage:
    component = "deploy-model"
    reference_output = "deployment"

    def settings(self, arguments: Mapping[str, Any]) -> DeployModelSettings:
        placement = ServingPlacement.from_arguments(arguments)
        run_dir = os.environ.get(RUN_DIR_ENV, "")
        run = model_version(arguments["run_id"], run_dir)
        model_uri = arguments["model"]
        # KServe reads a model from a URI: a KFP artifact URI in KServe's scheme (KFP's MinIO
        # store, minio://, is S3 to KServe); a local path (only the embedded platform has one, and
        # it never hands the URI to KServe) written as one, so the request's checks hold.
        serving_uri = storage_uri(model_uri)
        request = isvc.ServingRequest(
            name=arguments["serving_name"],
            mode=arguments["serving_mode"],
            storage_uri=serving_uri,
            # A model is versioned by the run that trained and deployed it.
            model_version=run,
            profile=placement.profile,
            service_account=placement.service_account,
            min_replicas=arguments["serving_min_replicas"],
            max_replicas=arguments["serving_max_replicas"],
            scale_metric=arguments["serving_scale_metric"],
            scale_target=arguments["serving_scale_target"],
            canary_traffic_percent=arguments["canary_traffic_percent"],
        )
        thresholds = CanaryThresholds(
            max_error_rate=arguments["canary_max_error_rate"],
            max_latency_ratio=arguments["canary_max_latency_ratio"],
            latency_slack_ms=arguments["canary_latency_slack_ms"],
            max_psi=arguments["canary_max_psi"],
            max_quality_drop=arguments["canary_max_auc_drop"],
        )
        return DeployModelSettings(
            deploy=arguments["deploy"],
            request=request,
            placement=placement,
            thresholds=thresholds,
            replay=CanaryReplay.from_arguments(arguments),
            model_uri=model_uri,
            holdout_uri=join(arguments["features"], HOLDOUT_FILE),
            run_id=run,
            run_dir=run_dir,
            registry_dir=os.environ.get(REGISTRY_DIR_ENV, ""),
        )

    def variants(self, settings: DeployModelSettings) -> list[Variant[DeployModelSettings]]:
        return [Variant(settings, requires=(INFERENCE_SERVICE,) if settings.deploy else ())]

    def build(self, settings: DeployModelSettings, context: RunContext) -> list[dict]:
        """The InferenceService of a first deployment (a later run turns it into a canary)."""
        if not settings.deploy:
            return []
        return [isvc.first_rollout(settings.request.labelled(context.labels()))]

    def preflight(self, settings: DeployModelSettings) -> None:
        """The model directory is complete and the holdout is there, before anything is deployed."""
        if not settings.deploy:
            return
        fs, model_dir = fsspec.core.url_to_fs(fsspec_uri(settings.model_uri))
        missing = [name for name in MODEL_DIR_FILES if not fs.exists(f"{model_dir.rstrip('/')}/{name}")]
        if missing:
            raise InvalidParameterError(
                f"model {settings.model_uri} is not servable: no {', '.join(missing)}"
            )
        fs, holdout = fsspec.core.url_to_fs(fsspec_uri(settings.holdout_uri))
        if not fs.exists(holdout):
            raise InvalidParameterError(
                f"no holdout requests at {settings.holdout_uri}: features from an older feature job? "
                f"Run it again, or deploy=false"
            )

    def run_local(self, settings: DeployModelSettings) -> StageResult:
        if not settings.deploy:
            return skipped_deployment()
        rollout = embedded_rollout(
            run_dir=settings.run_dir,
            registry_dir=settings.registry_dir,
            name=settings.request.name,
            model_dir=settings.model_uri,
            version=settings.request.model_version,
            run_id=settings.run_id,
            command=lambda model_dir, name, port: command(model_dir, name, port),
        )
        return _deploy(rollout, settings)

    def run_kubernetes(
        self, settings: DeployModelSettings, context: RunContext, cluster: Cluster
    ) -> StageResult:
        if not settings.deploy:
            return skipped_deployment()
        request = settings.request.labelled(context.labels())
        return _deploy(KServeRollout(request, cluster, settings.placement), settings)


STAGE = DeployModelStage()


def _deploy(rollout: Rollout, settings: DeployModelSettings) -> StageResult:
    holdout = Holdout.read(settings.holdout_uri, settings.replay.records)
    outcome = roll_out(
        rollout, settings.request.model_version, holdout, settings.thresholds, settings.replay.batch_size
    )
    return deployment_result(rollout, outcome)
