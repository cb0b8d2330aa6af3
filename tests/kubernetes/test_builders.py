"""Spec builders: compared as data, round-tripped through the official SDK models, validated
against the upstream CRDs (``../shared/tools/validate_manifests.py``)."""

import dataclasses
import re

import pytest
import yaml
from kubeflow.training import ApiClient as TrainingApiClient

from kfstack.errors import InvalidParameterError
from kfstack.kubernetes import node_pools
from kfstack.kubernetes.spark_application import SparkResources, build_spark_application
from kfstack.kubernetes.training_jobs import ElasticSettings, build_pytorchjob, build_tfjob
from kfstack.training.settings import PARAMETER_SERVER
from kfstack_examples.flights.training.settings import TrainingSettings
from tests.kubernetes.conftest import spark_request, training_request
from tests.upstream_crds import (
    openapi_round_trip,
    round_trip_through_sdk_models,
    run_validator,
    validate_with_crds,
)

PROFILES = sorted(node_pools.load_profiles())


def round_trip(obj: dict, model: str) -> dict:
    """Through the SDK model and back: a field the model does not know would be lost."""
    return openapi_round_trip(TrainingApiClient(), model, obj)


def all_objects() -> list[dict]:
    objects = []
    for profile in PROFILES:
        objects.append(build_pytorchjob(training_request(profile)))
        objects.append(build_tfjob(training_request(profile)))
        objects.append(build_tfjob(training_request(profile, topology=PARAMETER_SERVER, parameter_servers=2)))
    objects.append(
        build_pytorchjob(
            training_request(
                "h100", workers=4, elastic=ElasticSettings(min_replicas=2, max_replicas=8, max_restarts=5)
            )
        )
    )
    objects.append(build_spark_application(spark_request()))
    return objects


def test_every_object_validates_against_the_upstream_crds(tmp_path):
    for obj in all_objects():
        if obj["kind"] == "PyTorchJob":
            assert round_trip(obj, "KubeflowOrgV1PyTorchJob") == obj
        elif obj["kind"] == "TFJob":
            assert round_trip(obj, "KubeflowOrgV1TFJob") == obj
    validate_with_crds(tmp_path, all_objects())


def test_the_validator_would_catch_a_wrong_field(tmp_path):
    """The CRD check can fail: a misspelt field is reported."""
    job = build_pytorchjob(training_request())
    job["spec"]["runPolicy"]["backOffLimit"] = 3
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(job))
    with pytest.raises(AssertionError, match="backOffLimit"):
        run_validator(path, "the check that the validator fails")


@pytest.mark.parametrize(
    "build",
    [
        lambda: build_pytorchjob(training_request()),
        lambda: build_tfjob(training_request()),
        lambda: build_spark_application(spark_request()),
    ],
    ids=["PyTorchJob", "TFJob", "SparkApplication"],
)
def test_the_sdk_round_trip_would_catch_a_wrong_field(build):
    """What a clone without the CRDs checks instead can fail too: a key the model lacks is lost."""
    obj = build()
    assert round_trip_through_sdk_models([obj]) == set()
    obj["spec"]["backOffLimit"] = 3
    with pytest.raises(AssertionError, match=obj["kind"]):
        round_trip_through_sdk_models([obj])


def test_pytorchjob_replicas_policies_and_gpu_pool():
    job = build_pytorchjob(training_request("h100", workers=3))
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert (specs["Master"]["replicas"], specs["Worker"]["replicas"]) == (1, 2)
    assert job["spec"]["runPolicy"] == {
        "backoffLimit": 3,
        "activeDeadlineSeconds": 7200,
        "ttlSecondsAfterFinished": 86400,
        "cleanPodPolicy": "Running",
        "suspend": True,
    }
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kfstack-h100"
    for spec in specs.values():
        assert spec["restartPolicy"] == "OnFailure"
        pod = spec["template"]["spec"]
        (container,) = pod["containers"]
        assert container["name"] == "pytorch"
        assert container["command"][:3] == [
            "python",
            "-m",
            "kfstack.training.entrypoint",
        ]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
        assert pod["priorityClassName"] == "kfstack-training"
        assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]


def test_single_worker_pytorchjob_has_only_a_master():
    job = build_pytorchjob(training_request("cpu", workers=1))
    assert set(job["spec"]["pytorchReplicaSpecs"]) == {"Master"}
    assert "suspend" not in job["spec"]["runPolicy"]  # the cpu pool has no Kueue queue
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert "nvidia.com/gpu" not in pod["containers"][0]["resources"]["limits"]
    assert all(v["name"] != "dshm" for v in pod["volumes"])


def test_mig_profile_requests_the_mig_slice():
    job = build_pytorchjob(training_request("a100-mig"))
    container = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == "1"
    assert "nvidia.com/gpu" not in container["resources"]["limits"]


def test_spot_pool_retries_preemption_and_requires_a_checkpoint():
    job = build_pytorchjob(training_request("h100-spot"))
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        assert spec["restartPolicy"] == "ExitCode"
        keys = {t["key"] for t in spec["template"]["spec"]["tolerations"]}
        assert {"kfstack.dev/spot", "cloud.google.com/gke-spot", "nvidia.com/gpu"} <= keys
    with pytest.raises(InvalidParameterError, match="checkpoint URI is required"):
        build_pytorchjob(training_request("h100-spot", checkpoint_uri=""))


def test_elastic_pytorchjob_runs_workers_through_torchrun():
    job = build_pytorchjob(
        training_request(
            "h100", workers=4, elastic=ElasticSettings(min_replicas=2, max_replicas=8, max_restarts=5)
        )
    )
    assert set(job["spec"]["pytorchReplicaSpecs"]) == {"Worker"}
    assert job["spec"]["elasticPolicy"] == {
        "minReplicas": 2,
        "maxReplicas": 8,
        "maxRestarts": 5,
        "rdzvBackend": "c10d",
    }
    container = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["command"][:3] == [
        "torchrun",
        "-m",
        "kfstack.training.entrypoint",
    ]
    # Inconsistent elastic bounds are refused by the training settings the request comes from.
    with pytest.raises(InvalidParameterError, match=r"elastic_min_workers \(2\) <= workers \(9\)"):
        TrainingSettings(workers=9, elastic_min_workers=2, elastic_max_workers=8)
    with pytest.raises(InvalidParameterError, match="elastic training is a PyTorch feature"):
        TrainingSettings(framework="tensorflow", elastic_min_workers=2, elastic_max_workers=8)


def test_tfjob_topologies():
    mwms = build_tfjob(training_request("h100", workers=2))
    assert set(mwms["spec"]["tfReplicaSpecs"]) == {"Worker"}
    assert mwms["spec"]["successPolicy"] == "AllWorkers"
    assert (
        mwms["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] == "tensorflow"
    )
    ps = build_tfjob(training_request("h100", workers=2, topology=PARAMETER_SERVER, parameter_servers=2))
    specs = ps["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Chief": 1, "Worker": 2, "PS": 2}
    ps_limits = specs["PS"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert "nvidia.com/gpu" not in ps_limits  # parameter servers hold variables, not kernels
    with pytest.raises(
        InvalidParameterError, match="tf_topology='ring' is not one of mwms, parameter_server"
    ):
        TrainingSettings(framework="tensorflow", tf_topology="ring")


def test_pods_are_restricted_and_get_credentials_only_as_secret_refs():
    job = build_pytorchjob(training_request())
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["readOnlyRootFilesystem"] is True
    assert {"name": "scratch", "mountPath": "/tmp"} in container["volumeMounts"]
    env = {e["name"]: e for e in container["env"]}
    assert env["AWS_SECRET_ACCESS_KEY"] == {
        "name": "AWS_SECRET_ACCESS_KEY",
        "valueFrom": {
            "secretKeyRef": {"name": "kfstack-object-store", "key": "AWS_SECRET_ACCESS_KEY", "optional": True}
        },
    }
    assert all("value" not in e for e in container["env"] if e["name"].startswith("AWS_"))


def test_spark_application_fields():
    app = build_spark_application(
        spark_request(resources=SparkResources(executor_instances=3, executor_memory="6g"))
    )
    spec = app["spec"]
    assert (spec["type"], spec["mode"], spec["mainApplicationFile"]) == (
        "Python",
        "cluster",
        "local:///opt/kfstack/jobs/flights_features.py",
    )
    assert spec["arguments"][:2] == ["--output-uri", "s3://bucket/features"]
    assert spec["executor"]["instances"] == 3 and spec["executor"]["memory"] == "6g"
    assert spec["driver"]["serviceAccount"] == "kfstack-spark"
    assert spec["driver"]["nodeSelector"] == {"kfstack.dev/pool": "cpu"}
    assert spec["restartPolicy"] == {"type": "Never"}
    assert spec["driver"]["securityContext"]["allowPrivilegeEscalation"] is False
    assert spec["sparkConf"]["spark.local.dir"] == "/tmp"
    for bad in ({"main_file": "/opt/x.py"}, {"service_account": ""}):
        with pytest.raises(InvalidParameterError):
            build_spark_application(spark_request(**bad))
    with pytest.raises(InvalidParameterError, match="executor_memory='6GB': expected Spark memory"):
        SparkResources(executor_memory="6GB")
    with pytest.raises(InvalidParameterError, match="driver_cores=0 must be >= 1"):
        SparkResources(driver_cores=0)


def test_node_pool_file_errors_are_clear(tmp_path):
    path = tmp_path / "pools.yaml"
    path.write_text(
        "profiles:\n  gpu:\n    node_selector: {a: b}\n    cpu: '1'\n    memory: 1Gi\n"
        "    accelerator: {resource: nvidia.com/gpu}\n"
    )
    with pytest.raises(InvalidParameterError, match="'gpu': accelerator needs resource and count"):
        node_pools.load_profiles(str(path))
    with pytest.raises(InvalidParameterError, match="unknown node pool 'h200'; the profile file defines: "):
        node_pools.get_profile("h200")


def test_profiles_file_can_be_replaced_through_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "pools.yaml"
    path.write_text(
        "profiles:\n  l4:\n    node_selector: {pool: l4}\n    cpu: '8'\n    memory: 32Gi\n"
        "    accelerator: {resource: nvidia.com/gpu, count: 2}\n"
    )
    monkeypatch.setenv(node_pools.PROFILES_ENV, str(path))
    profile = node_pools.get_profile("l4")
    assert profile.resources()["limits"] == {"memory": "32Gi", "nvidia.com/gpu": "2"}


def test_a_pod_pays_its_accelerators_share_of_a_node_and_a_cpu_pod_a_whole_node():
    profiles = node_pools.load_profiles(node_pools.PROFILES_FILE)
    h100, mig, cpu = profiles["h100"], profiles["a100-mig"], profiles["cpu"]
    assert (h100.price_per_node_hour, h100.gpus_per_node, h100.accelerator.count) == (80.0, 8, 1)
    assert h100.price_per_hour(pods=2) == pytest.approx(2 * 80.0 / 8)
    assert mig.price_per_hour(pods=1) == pytest.approx(40.0 / 56)  # one 1g.10gb slice of 8 x 7
    assert cpu.price_per_hour(pods=2) == pytest.approx(2 * 0.19)
    # Unknown price: no cost, not a free pool.
    assert profiles["serving"].price_per_node_hour is None and profiles["serving"].price_per_hour(3) is None
    two_gpus = dataclasses.replace(h100, accelerator=node_pools.Accelerator("nvidia.com/gpu", 2))
    assert two_gpus.price_per_hour(pods=2) == pytest.approx(2 * 80.0 * 2 / 8)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ("price_per_node_hour: -1", "'p': price_per_node_hour=-1 must be a number >= 0 or null"),
        ("price_per_node_hour: cheap", "'p': price_per_node_hour='cheap' must be a number >= 0"),
        ("price_per_node_hour: true", "'p': price_per_node_hour=True must be a number >= 0"),
        ("gpus_per_node: 2.5", "'p': gpus_per_node=2.5 must be a whole number >= 1"),
        ("gpus_per_node: 0", "'p': gpus_per_node=0 must be a whole number >= 1"),
        ("gpus_per_node: '8'", "'p': gpus_per_node='8' must be a whole number >= 1"),
    ],
)
def test_node_pool_price_and_gpu_count_errors_name_the_profile_and_field(tmp_path, fields, message):
    path = tmp_path / "pools.yaml"
    path.write_text(
        "profiles:\n  p:\n    node_selector: {a: b}\n    cpu: '1'\n    memory: 1Gi\n"
        f"    accelerator: {{resource: nvidia.com/gpu, count: 1}}\n    {fields}\n"
    )
    with pytest.raises(InvalidParameterError, match=re.escape(f"node-pool profile {message}")):
        node_pools.load_profiles(str(path))


def test_a_node_pool_price_must_be_splittable_per_pod(tmp_path):
    def load(accelerator: str, fields: str):
        path = tmp_path / "pools.yaml"
        path.write_text(
            "profiles:\n  p:\n    node_selector: {a: b}\n    cpu: '1'\n    memory: 1Gi\n"
            f"    accelerator: {accelerator}\n    {fields}\n"
        )
        return node_pools.load_profiles(str(path))["p"]

    gpu = "{resource: nvidia.com/gpu, count: 2}"
    with pytest.raises(InvalidParameterError, match="'p': price_per_node_hour needs gpus_per_node"):
        load(gpu, "price_per_node_hour: 10")
    with pytest.raises(InvalidParameterError, match="'p': gpus_per_node=1 is less than the accelerator"):
        load(gpu, "gpus_per_node: 1")
    with pytest.raises(InvalidParameterError, match="'p': gpus_per_node=8 without an accelerator"):
        load("null", "gpus_per_node: 8")
    # Both absent: a pool without a price, as before prices existed.
    assert load(gpu, "spot: false").price_per_hour(pods=4) is None
    # An integer price is a price; a free pool (0) costs 0, unlike an unknown one.
    priced = load(gpu, "price_per_node_hour: 8\n    gpus_per_node: 4")
    assert priced.price_per_hour(pods=3) == pytest.approx(3 * 8 * 2 / 4)
    assert load("null", "price_per_node_hour: 0").price_per_hour(pods=5) == 0.0
