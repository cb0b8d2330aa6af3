"""Shared builders for the Kubernetes tests: small, valid requests for every kind."""

from pathlib import Path

import pytest
import yaml

from kfstack.kubernetes import naming, node_pools, pods
from kfstack.kubernetes.spark_application import SparkApplicationRequest, build_spark_application
from kfstack.kubernetes.training_jobs import TrainingJobRequest, build_pytorchjob

RUN_ID = "3f9c1e2a-5b7d-4c8e-9a0b-1c2d3e4f5a6b"
NAMESPACE = "team-ml"
# The flights example's ClusterServingRuntime, as its install guide applies it to a cluster.
FLIGHTS_RUNTIME = (
    Path(__file__).parents[2] / "examples" / "manifests" / "flights-predictor" / "serving-runtime.yaml"
)


def put_flights_runtime(api) -> dict:
    """On a fake API: the flights example's ClusterServingRuntime, cluster-wide, as a cluster
    that runs flights-training has it; returns it."""
    (runtime,) = [doc for doc in yaml.safe_load_all(FLIGHTS_RUNTIME.read_text()) if doc]
    api.put_cluster_scoped("clusterservingruntimes", runtime)
    return runtime


def training_request(profile: str = "h100", workers: int = 3, **overrides) -> TrainingJobRequest:
    fields = {
        "name": naming.resource_name("kfs-train", RUN_ID, "train-pytorch"),
        "labels": naming.run_labels(RUN_ID, "train-pytorch"),
        "image": "registry.example/kfstack-torch-trainer:0.0.0",
        "module": "kfstack.training.entrypoint",
        "args": ["--framework=pytorch", "--epochs=4"],
        "workers": workers,
        "profile": node_pools.get_profile(profile),
        "secrets": pods.SecretRefs(object_store="kfstack-object-store", image_pull="regcred"),
        "checkpoint_uri": "s3://bucket/ckpt",
        "max_restarts": 3,
        "active_deadline_seconds": 7200,
    }
    fields.update(overrides)
    return TrainingJobRequest(**fields)


def spark_request(**overrides) -> SparkApplicationRequest:
    fields = {
        "name": naming.resource_name("kfs-features", RUN_ID, "flights-features"),
        "labels": naming.run_labels(RUN_ID, "flights-features"),
        "image": "registry.example/kfstack-spark:0.0.0",
        "main_file": "local:///opt/kfstack/jobs/flights_features.py",
        "arguments": ["--output-uri", "s3://bucket/features", "--quarantine-uri", "s3://bucket/q"],
        "profile": node_pools.get_profile("cpu"),
        "secrets": pods.SecretRefs(object_store="kfstack-object-store"),
        "service_account": "kfstack-spark",
    }
    fields.update(overrides)
    return SparkApplicationRequest(**fields)


def master_pod_labels(job_name: str) -> dict[str, str]:
    """The labels training-operator v1 gives a job's master pod (replica 0): what the launcher's
    primary-pod selector looks for (kfstack.kubernetes.resources)."""
    return {
        "training.kubeflow.org/job-name": job_name,
        "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0",
    }


@pytest.fixture
def fake_api():
    from tests.kubernetes.fake_api import FakeKubernetesApi

    with FakeKubernetesApi() as api:
        yield api


def put_a_runs_objects(api) -> tuple[dict, dict]:
    """On a fake API: the run's PyTorchJob still running, its SparkApplication finished, and
    another run's PyTorchJob running; returns the run's two (a cleanup deletes the first only)."""
    running = build_pytorchjob(training_request())
    finished = build_spark_application(spark_request())
    other_run = build_pytorchjob(
        training_request(
            name="kfs-train-other",
            labels={**running["metadata"]["labels"], "kfstack.dev/pipeline-run": "another-run"},
        )
    )
    job_running = {"conditions": [{"type": "Running", "status": "True", "reason": "", "message": ""}]}
    api.put("pytorchjobs", NAMESPACE, {**running, "status": job_running})
    completed = {"applicationState": {"state": "COMPLETED"}}
    api.put("sparkapplications", NAMESPACE, {**finished, "status": completed})
    api.put("pytorchjobs", NAMESPACE, {**other_run, "status": job_running})
    return running, finished
