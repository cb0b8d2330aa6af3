"""A step that runs on this machine imports no Kubernetes SDK model package: they load when a
cluster object is first built (:mod:`kfstack.kubernetes.sdk`)."""

from __future__ import annotations

import json
import subprocess
import sys

from kfstack.kubernetes.sdk import lazy_module

SDK_PACKAGES = (
    "kubeflow_spark_api.models",
    "kubeflow_katib_api.models",
    "kubeflow_trainer_api.models",
    "kubeflow.training",
    "kubernetes.client",
)
STAGES = (
    "kfstack.components.data.spark_job.stage",
    "kfstack.components.tuning.hyperparameter_tuning.stage",
    "kfstack.components.training.distributed_training.stage",
)


def _loaded_after(statement: str) -> list[str]:
    """The SDK packages a fresh interpreter holds after ``statement``."""
    report = f"print(json.dumps(sorted(set(sys.modules) & set({list(SDK_PACKAGES)!r}))))"
    script = f"import sys, json\n{statement}\n{report}"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_importing_the_local_steps_loads_no_sdk_models():
    assert _loaded_after("\n".join(f"import {stage}" for stage in STAGES)) == []


def test_building_a_cluster_object_loads_its_sdk():
    loaded = _loaded_after("from kfstack.kubernetes import pods\npods.to_dict(pods.pod_security_context())")
    assert loaded == ["kubernetes.client"]


def test_a_lazy_module_is_the_module_once_used():
    lazy = lazy_module("json")
    assert lazy.dumps({"a": 1}) == json.dumps({"a": 1})
    assert "imported on first use" in repr(lazy)
