"""The TrainJob builder (Kubeflow Trainer v2.3), compared as data and validated against the
upstream CRD and the ``kubeflow-trainer-api`` models."""

import copy

import pytest
from kubeflow_trainer_api import models

from kfstack.errors import InvalidParameterError
from kfstack.kubernetes import naming, node_pools, pods
from kfstack.kubernetes.train_job import PATCH_MANAGER, build_trainjob
from kfstack.kubernetes.training_apis import DEFAULT_TRAINER_RUNTIME
from kfstack.settings import katib_parameter
from tests.kubernetes.conftest import RUN_ID, training_request
from tests.upstream_crds import validate_with_crds

TRAINER = "kfstack.training.entrypoint"
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "runAsGroup": 1000,
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def node_patch(job: dict) -> dict:
    (patch,) = job["spec"]["runtimePatches"]
    assert patch["manager"] == PATCH_MANAGER
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert node["name"] == "node"
    return node["template"]["spec"]["template"]


def test_a_gpu_trainjob_as_data():
    job = build_trainjob(training_request("h100", workers=3))
    labels = naming.run_labels(RUN_ID, "train-pytorch")
    assert job["apiVersion"] == "trainer.kubeflow.org/v1alpha1" and job["kind"] == "TrainJob"
    assert job["metadata"] == {
        "name": naming.resource_name("kfs-train", RUN_ID, "train-pytorch"),
        "labels": {**labels, "kueue.x-k8s.io/queue-name": "kfstack-h100"},
    }
    spec = job["spec"]
    assert spec["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": DEFAULT_TRAINER_RUNTIME,
    }
    assert spec["suspend"] is True  # Kueue admits it
    assert spec["activeDeadlineSeconds"] == 7200
    trainer = spec["trainer"]
    # torchrun derives RANK/WORLD_SIZE from the runtime's PET_* variables.
    assert trainer["command"] == ["torchrun", "-m", TRAINER]
    assert trainer["args"] == ["--framework=pytorch", "--epochs=4"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (3, 1)
    assert trainer["resourcesPerNode"] == {
        "requests": {"cpu": "12", "memory": "96Gi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "96Gi", "nvidia.com/gpu": "1"},
    }
    env = {var["name"]: var for var in trainer["env"]}
    assert env["HOME"] == {"name": "HOME", "value": "/tmp"}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "kfstack-object-store",
        "key": "AWS_SECRET_ACCESS_KEY",
        "optional": True,
    }
    # The runtime sets these; the Trainer webhook refuses a TrainJob that sets them itself.
    assert not any(name.startswith("PET_") or name in ("WORLD_SIZE", "RANK") for name in env)
    pod = node_patch(job)
    # The pods carry the batch labels (mesh mode by default); the TrainJob only the run's.
    assert pod["metadata"] == {"labels": {**labels, **naming.batch_pod_labels(istio_mesh=True)}}
    assert pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert pod["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["terminationGracePeriodSeconds"] == 30
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["scratch", "dshm"]
    assert pod["spec"]["containers"] == [
        {
            "name": "node",
            "securityContext": RESTRICTED_CONTAINER,
            "volumeMounts": [
                {"mountPath": "/tmp", "name": "scratch"},
                {"mountPath": "/dev/shm", "name": "dshm"},
            ],
        }
    ]


def test_a_cpu_trainjob_is_neither_queued_nor_suspended_and_names_its_runtime():
    job = build_trainjob(
        training_request("cpu", workers=1, secrets=pods.SecretRefs()),
        runtime="kfstack-torch-distributed",
    )
    assert "suspend" not in job["spec"]
    assert "kueue.x-k8s.io/queue-name" not in job["metadata"]["labels"]
    assert job["spec"]["runtimeRef"]["name"] == "kfstack-torch-distributed"
    pod = node_patch(job)["spec"]
    assert "imagePullSecrets" not in pod  # no pull secret given
    assert [v["name"] for v in pod["volumes"]] == ["scratch"]  # no /dev/shm without a GPU
    assert [var["name"] for var in job["spec"]["trainer"]["env"]] == [
        "HOME",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
    ]


@pytest.mark.parametrize("pool", sorted(node_pools.load_profiles()))
def test_every_pool_reaches_the_trainjob_whole_and_validates(tmp_path, pool):
    """The pod settings the v1 jobs get (Kubernetes client models) pass through the Trainer API
    models without losing a field -- those models drop keys they do not know -- and the whole
    TrainJob validates against the v2.3.0 CRD (unknown fields are errors there)."""
    request = training_request(pool, checkpoint_uri="s3://bucket/ckpt")
    job = build_trainjob(request)
    pod = node_patch(job)["spec"]
    (container,) = pod["containers"]
    volumes, mounts = pods.scratch_volumes(request.profile)
    assert pod["volumes"] == pods.to_dict(volumes)
    assert container["volumeMounts"] == pods.to_dict(mounts)
    assert pod["securityContext"] == pods.to_dict(pods.pod_security_context())
    assert container["securityContext"] == pods.to_dict(pods.container_security_context())
    assert pod.get("tolerations", []) == request.profile.pod_settings()["tolerations"]
    assert pod["nodeSelector"] == request.profile.node_selector
    assert job["spec"]["trainer"]["env"] == pods.to_dict(pods.base_env(request.secrets))
    assert job["spec"]["trainer"]["resourcesPerNode"] == request.profile.resources()
    # What the API server would hand back reads as the same TrainJob through the models.
    assert models.TrainerV1alpha1TrainJob.from_dict(copy.deepcopy(job)).to_dict() == job
    validate_with_crds(tmp_path, [job])


def test_katib_placeholders_pass_into_the_trainer_args():
    request = training_request(
        args=[
            "--learning-rate",
            katib_parameter("learningRate"),
            "--batch-size",
            katib_parameter("batchSize"),
        ]
    )
    args = build_trainjob(request)["spec"]["trainer"]["args"]
    assert args == [
        "--learning-rate",
        "${trialParameters.learningRate}",
        "--batch-size",
        "${trialParameters.batchSize}",
    ]


def test_spot_without_a_checkpoint_is_refused_before_anything_is_built():
    with pytest.raises(InvalidParameterError, match="checkpoint URI is required"):
        build_trainjob(training_request("h100-spot", checkpoint_uri=""))


def test_the_number_of_nodes_cannot_be_a_trial_parameter():
    with pytest.raises(InvalidParameterError, match="numNodes must be an integer"):
        build_trainjob(training_request(workers=katib_parameter("workers")))
