"""Checking rendered custom resources against their upstream definitions, with or without them.

The upstream CRDs and their validator (``tools/validate_manifests.py`` beside ``crds/``) are not
part of the repository: they are found in ``../shared`` beside the clone, or wherever
``KFSTACK_SHARED_DIR`` points. With them, every object is validated against its kind's CRD as
``kubectl apply --validate=strict`` would.

kfstack supports a range of releases per controller (:mod:`kfstack.kubernetes.controller_releases`),
so :func:`validate_with_crds` validates every object twice: against the newest CRDs (``crds/``)
and against the oldest supported release's (:data:`OLDEST_SUPPORTED`, from ``crds-older/``).
Against the oldest, a kind with an older form (a TrainJob on Trainer v2.1) is validated in that
form, and an object may fail only on fields that ``controller_releases.FIELDS`` says need a newer
release (the features refused on such a cluster before anything is created); any other failure
fails the test. Katib's and the ScheduledWorkflow's CRDs carry no schema: their SDK models stand
in, at every release.

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


def run_validator(path: pathlib.Path | str, what: str, crds: pathlib.Path | None = None) -> str:
    """The validator's report on the YAML file ``path``, which must pass; without the CRDs the
    test skips, saying that ``what`` (the check that did not run) was left out. ``crds``: a CRD
    directory other than the newest (:func:`oldest_supported_crds`)."""
    proc = _validate(path, what, crds)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _validate(path: pathlib.Path | str, what: str, crds: pathlib.Path | None) -> subprocess.CompletedProcess:
    if not available():
        pytest.skip(f"{ABSENT}: {what} not run")
    where = ["--crds", str(crds)] if crds is not None else []
    return subprocess.run([sys.executable, str(VALIDATOR), *where, str(path)], capture_output=True, text=True)


# The oldest release kfstack supports of each controller whose CRDs carry a schema (Kubeflow
# 1.11's), as folders of the shared CRDs: crds/<component> -> the folder holding that release.
# spark-operator 2.4.0 has the same bytes as the newest (crds-older/SOURCES.md); Katib's and
# KFP's ScheduledWorkflow CRDs carry no schema, so the newest stand for every release.
OLDEST_SUPPORTED = {
    "kserve": "crds-older/kserve/v0.15.2",
    "training-operator": "crds-older/training-operator/v1.9.1",  # v1.9.2's bytes
    "trainer-v2": "crds-older/trainer-v2/v2.1.0",
}


def oldest_supported_crds(tmp_path: pathlib.Path) -> pathlib.Path:
    """A CRD directory of the oldest supported releases: links to the files of
    :data:`OLDEST_SUPPORTED`, and to the newest CRDs of every other component (nothing is
    copied). The validator reads one directory, so the releases are gathered in one."""
    root = tmp_path / "oldest-supported-crds"
    if root.is_dir():
        return root
    for component in sorted(p for p in (SHARED_DIR / "crds").iterdir() if p.is_dir()):
        folder = SHARED_DIR / OLDEST_SUPPORTED.get(component.name, f"crds/{component.name}")
        assert folder.is_dir(), f"{folder}: the release {OLDEST_SUPPORTED[component.name]} is not there"
        target = root / component.name
        target.mkdir(parents=True)
        # Files, not the folder: the validator's recursive glob follows no linked folder.
        for crd in sorted(folder.glob("*.yaml")):
            (target / crd.name).symlink_to(crd)
    return root


def oldest_form(obj: dict) -> dict:
    """``obj`` as the oldest supported release of its controller takes it: its older form where
    kfstack has one (what the launch creates on such a cluster), else as it is."""
    from kfstack.kubernetes import dry_run

    forms = dry_run.OLDER_FORMS.get(kind_of(obj), ())  # newest first: the last is the oldest's
    return forms[-1].convert(obj) if forms else obj


def check_against_oldest(tmp_path: pathlib.Path, objects: list[dict]) -> list[str]:
    """``objects`` (in :func:`oldest_form`) against the oldest supported releases' CRDs; returns
    the fields refused, ``Kind/name: path``. Each must be one that ``controller_releases``
    says needs a newer release than the oldest: anything else fails the test."""
    from kfstack.kubernetes import controller_releases

    path = tmp_path / "objects-oldest.yaml"
    path.write_text(yaml.safe_dump_all([oldest_form(obj) for obj in objects], sort_keys=False))
    proc = _validate(
        path, "the CRD validation against the oldest supported releases", oldest_supported_crds(tmp_path)
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    by_name = {f"{obj['kind']}/{obj['metadata'].get('name')}": obj for obj in objects}
    refused, failed = [], set()
    for line in proc.stdout.splitlines():
        if not line.startswith("FAIL "):
            continue
        ident, _, rest = line.removeprefix("FAIL ").partition(" ")
        document, _, rest = rest.partition(": ")
        field, _, problem = rest.partition(": ")
        failed.add(document)
        obj = by_name[ident]
        group, kind = kind_of(obj)
        entry = controller_releases.field_release(group, kind, field)
        assert problem == "unknown field" and entry is not None, (
            f"{line}: not a field controller_releases.FIELDS says needs a newer release"
        )
        assert entry.release != controller_releases.CONTROLLERS[entry.controller].oldest, line
        refused.append(f"{ident}: {field}")
    assert proc.stdout.count("OK ") + len(failed) == len(objects), proc.stdout
    return refused


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
    """``objects`` (custom resources) against the upstream CRDs of the newest releases, each
    validated, and of the oldest supported ones (:func:`check_against_oldest`); without them,
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
    check_against_oldest(tmp_path, objects)
