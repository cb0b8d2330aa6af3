"""Checking rendered custom resources against their upstream definitions, with or without them.

The upstream CRDs and their validator (``tools/validate_manifests.py`` beside ``crds/``) are not
part of the repository: they are found in ``../shared`` beside the clone, or wherever
``KFSTACK_SHARED_DIR`` points. With them, every object is validated against its kind's CRD as
``kubectl apply --validate=strict`` would.

A clone without them (a team's, as it is cloned) still checks what it renders: every object whose
kind an installed SDK has a model for goes through that model and back, and must come back equal
(a key the model does not know is lost on the way, a value of the wrong type is refused). The
kinds with no model in any dependency (Istio's, prometheus-operator's, Kueue's) are named in the
skip that says what was not checked. docs/testing.md lists, per kind, which check a clone runs.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable, Iterable
from typing import Any

import pytest
import yaml

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DIR = pathlib.Path(os.environ.get("KFSTACK_SHARED_DIR", REPO_ROOT.parent / "shared"))
VALIDATOR = SHARED_DIR / "tools" / "validate_manifests.py"
ABSENT = (
    f"the upstream CRDs and their validator are not at {SHARED_DIR} (a clone on its own; set "
    f"KFSTACK_SHARED_DIR to where they are)"
)


# `make test-crds` sets it: there a missing validator is a failure, not a skip.
REQUIRED = os.environ.get("KFSTACK_REQUIRE_CRDS") == "1"


def available() -> bool:
    if REQUIRED and not VALIDATOR.is_file():
        pytest.fail(f"{ABSENT}, and KFSTACK_REQUIRE_CRDS=1 asks for them")
    return VALIDATOR.is_file()


def run_validator(path: pathlib.Path | str, what: str) -> str:
    """The validator's report on the YAML file ``path``, which must pass; without the CRDs the
    test skips, saying that ``what`` (the check that did not run) was left out."""
    if not available():
        pytest.skip(f"{ABSENT}: {what} not run")
    proc = subprocess.run([sys.executable, str(VALIDATOR), str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


class _Response:
    """What the OpenAPI-generated clients' ``deserialize`` reads: an HTTP body."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.data = json.dumps(obj)


def openapi_round_trip(api: Any, model: str, obj: dict) -> dict:
    """``obj`` through an OpenAPI-generated client's ``model`` and back (the Kubernetes client,
    kubeflow-training's, kserve's): a key the model does not know is lost on the way."""
    return api.sanitize_for_serialization(api.deserialize(_Response(obj), model))


def _openapi(client: Callable[[], Any], model: str) -> Callable[[dict], dict]:
    return lambda obj: openapi_round_trip(client(), model, obj)


def _pydantic(model: Callable[[], Any]) -> Callable[[dict], dict]:
    def round_trip(obj: dict) -> dict:
        return model().from_dict(json.loads(json.dumps(obj))).to_dict()

    return round_trip


def _training_client() -> Any:
    from kubeflow.training import ApiClient

    return ApiClient()


def kserve_api_client() -> Any:
    """The kserve SDK's client, able to read back whole objects: its models name the Kubernetes
    ones (V1ObjectMeta, V1Toleration...) but its deserializer looks only in ``kserve.models``."""
    from kubernetes.client import models as kubernetes_models

    from kfstack.kubernetes.inference_service import kserve_sdk

    kserve = kserve_sdk()
    for name in dir(kubernetes_models):
        if name.startswith("V1") and not hasattr(kserve.models, name):
            setattr(kserve.models, name, getattr(kubernetes_models, name))
    # Its MetricTarget types value/averageValue as a V1beta1MetricQuantity model the SDK (0.21.0)
    # does not ship: a Kubernetes quantity, written as a string.
    if not hasattr(kserve.models, "V1beta1MetricQuantity"):
        kserve.models.V1beta1MetricQuantity = str
    return kserve.ApiClient()


def _trainjob() -> Any:
    from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob

    return TrainerV1alpha1TrainJob


def _cluster_training_runtime() -> Any:
    from kubeflow_trainer_api.models import TrainerV1alpha1ClusterTrainingRuntime

    return TrainerV1alpha1ClusterTrainingRuntime


def _spark_application() -> Any:
    from kubeflow_spark_api.models import SparkV1beta2SparkApplication

    return SparkV1beta2SparkApplication


def _experiment() -> Any:
    from kubeflow_katib_api.models import V1beta1Experiment

    return V1beta1Experiment


# (API group, kind) -> its SDK model's round trip. Every custom kind kfstack renders that a pinned
# dependency models; the rest are listed in NO_MODEL.
SDK_MODELS: dict[tuple[str, str], Callable[[dict], dict]] = {
    ("kubeflow.org", "PyTorchJob"): _openapi(_training_client, "KubeflowOrgV1PyTorchJob"),
    ("kubeflow.org", "TFJob"): _openapi(_training_client, "KubeflowOrgV1TFJob"),
    ("kubeflow.org", "Experiment"): _pydantic(_experiment),
    ("trainer.kubeflow.org", "TrainJob"): _pydantic(_trainjob),
    ("sparkoperator.k8s.io", "SparkApplication"): _pydantic(_spark_application),
    ("serving.kserve.io", "InferenceService"): _openapi(kserve_api_client, "V1beta1InferenceService"),
    ("serving.kserve.io", "ServingRuntime"): _openapi(kserve_api_client, "V1alpha1ServingRuntime"),
    ("serving.kserve.io", "ClusterServingRuntime"): _openapi(
        kserve_api_client, "V1alpha1ClusterServingRuntime"
    ),
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): _pydantic(_cluster_training_runtime),
}
# Custom kinds kfstack renders or ships that no installed SDK models: only the CRDs check them.
NO_MODEL = {
    ("security.istio.io", "AuthorizationPolicy"),
    ("security.istio.io", "PeerAuthentication"),
    ("networking.istio.io", "Sidecar"),
    ("monitoring.coreos.com", "PodMonitor"),
    ("monitoring.coreos.com", "PrometheusRule"),
    ("kueue.x-k8s.io", "LocalQueue"),
    ("kueue.x-k8s.io", "ClusterQueue"),
    ("kueue.x-k8s.io", "ResourceFlavor"),
}


def kind_of(obj: dict) -> tuple[str, str]:
    return obj["apiVersion"].split("/")[0], obj["kind"]


def round_trip_through_sdk_models(objects: Iterable[dict]) -> set[tuple[str, str]]:
    """Each object whose kind has an SDK model, through it and back (must be equal); returns the
    kinds of the others."""
    unmodelled = set()
    for obj in objects:
        kind = kind_of(obj)
        if kind not in SDK_MODELS:
            assert kind in NO_MODEL, f"{kind}: a custom kind neither modelled nor listed in NO_MODEL"
            unmodelled.add(kind)
            continue
        assert SDK_MODELS[kind](obj) == obj, f"{obj['kind']}/{obj['metadata'].get('name')}"
    return unmodelled


def validate_with_crds(tmp_path: pathlib.Path, objects: list[dict]) -> None:
    """``objects`` (custom resources) against the upstream CRDs, each validated; without them,
    through the SDK models, skipping (saying why) only when a kind has none."""
    if not available():
        unmodelled = round_trip_through_sdk_models(objects)
        if unmodelled:
            names = ", ".join(f"{group} {kind}" for group, kind in sorted(unmodelled))
            pytest.skip(f"{ABSENT}: no SDK model for {names}, so not checked here; the rest round-tripped")
        return
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    report = run_validator(path, "the CRD validation")
    assert report.count("OK ") == len(objects), report
