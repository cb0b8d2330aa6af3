"""`kfstack render` and the component launchers' Kubernetes path.

The launchers run against the fake API server (tests/kubernetes/fake_api.py); where a real
cluster's job would write its outputs, the test's scripted "controller" writes them to the
artifact URI, exactly the files the real job writes (job report, training metrics).
"""

import dataclasses
import json

import fsspec
import pytest
import yaml

from kfstack.app.cli import main
from kfstack.components.data.flights_features.launcher import kubernetes_options as spark_options
from kfstack.components.data.flights_features.launcher import launch_flights_features
from kfstack.components.training.train_pytorch.launcher import kubernetes_options as torch_options
from kfstack.components.training.train_pytorch.launcher import launch_pytorch_training
from kfstack.errors import ResourceFailedError
from kfstack.features import JOB_REPORT_FILE
from kfstack.kubernetes.naming import RunContext
from kfstack.kubernetes.render import render_objects
from tests.kubernetes.conftest import NAMESPACE, RUN_ID
from tests.kubernetes.test_builders import validate_with_crds
from tests.training.conftest import make_feature_dir

SECRET_VALUE = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


def test_render_writes_every_object_and_they_validate(tmp_path, capsys):
    out = tmp_path / "rendered"
    assert main(["render", "--out", str(out), "--param", "workers=3", "--param", "gpu_pool=a100-mig",
                 "--run-id", RUN_ID]) == 0
    files = sorted(out.iterdir())
    objects = [yaml.safe_load(f.read_text()) for f in files]
    assert [o["kind"] for o in objects] == ["PyTorchJob", "SparkApplication"]
    job = objects[0]
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kfstack-a100-mig"
    assert job["metadata"]["labels"]["kfstack.dev/pipeline-run"] == RUN_ID
    args = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    assert args[args.index("--features-uri") + 1] == (
        f"s3://kfstack/pipeline-root/flights-training/{RUN_ID}/flights-features/features")
    assert "namespace" not in job["metadata"]  # kubectl -n / the launcher's own namespace decides
    validate_with_crds(tmp_path, objects)


def test_render_tensorflow_parameter_server_job(tmp_path):
    out = tmp_path / "rendered"
    assert main(["render", "--out", str(out), "--param", "framework=tensorflow", "--param",
                 "tf_topology=parameter_server", "--param", "tf_parameter_servers=2", "--param", "workers=3"]) == 0
    objects = {o["kind"]: o for o in (yaml.safe_load(f.read_text()) for f in out.iterdir())}
    assert set(objects) == {"TFJob", "SparkApplication"}
    specs = objects["TFJob"]["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Chief": 1, "Worker": 3, "PS": 2}
    command = specs["Chief"]["template"]["spec"]["containers"][0]["command"]
    assert command[:3] == ["python", "-m", "kfstack.components.training.train_tensorflow.trainer"]
    assert specs["Chief"]["template"]["spec"]["containers"][0]["image"].split("/")[-1].startswith("kfstack-tf-trainer:")
    validate_with_crds(tmp_path, list(objects.values()))


def test_render_refuses_bad_parameters(tmp_path, capsys):
    assert main(["render", "--out", str(tmp_path / "o"), "--param", "spark_executor_memory=lots"]) == 2
    assert "spark executor_memory='lots'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_no_credential_value_reaches_compiled_pipelines_or_rendered_objects(tmp_path, monkeypatch):
    """Credentials live in the environment of whoever compiles/renders; none may leak out."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, SECRET_VALUE)
    assert main(["compile", "--out", str(tmp_path / "dist")]) == 0
    assert main(["render", "--out", str(tmp_path / "objects"), "--param", "image_pull_secret=regcred"]) == 0
    written = list((tmp_path / "dist").iterdir()) + list((tmp_path / "objects").iterdir())
    assert written
    for path in written:
        text = path.read_text()
        assert SECRET_VALUE not in text, path
        assert "kfstack-object-store" in text, path  # the Secret is referenced by name only
    for obj in render_objects("flights-training", {}, run_id=RUN_ID, pipeline_root="s3://r"):
        text = json.dumps(obj)
        for env in _all_env(obj):
            if env["name"].startswith("AWS_"):
                assert "value" not in env and env["valueFrom"]["secretKeyRef"]["name"] == "kfstack-object-store"
        assert SECRET_VALUE not in text


def _all_env(obj):
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "env" and isinstance(value, list):
                yield from value
            else:
                yield from _all_env(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from _all_env(item)


def _settings(fake_api, options):
    """The component's options, pointed at the fake API and polling fast."""
    options["settings"] = dataclasses.replace(
        options["settings"], namespace=NAMESPACE, api_client=fake_api.api_client(), poll_interval_seconds=0.01)
    return options


def test_feature_job_on_kubernetes_creates_the_spark_application_and_reads_its_report(fake_api):
    features_uri = "memory://kfstack-test/run/features"
    options = _settings(fake_api, spark_options(
        platform="kubernetes", run_id=RUN_ID, task_name="flights-features", executors=3,
        executor_cores=2, executor_memory="4g", driver_memory="2g", service_account="kfstack-spark",
        object_store_secret="kfstack-object-store", image_pull_secret="", timeout_seconds=600,
        poll_interval_seconds=1))
    report = {"rows_read": 100, "rows_written": 97, "rows_quarantined": 3,
              "quarantined_by_reason": {"duplicate": 3}, "rows_per_split": {"train": 80, "validation": 9, "test": 8}}

    def controller(name):
        # The driver writes its report on success, as the real job does.
        with fsspec.open(f"{features_uri}/{JOB_REPORT_FILE}", "w") as f:
            json.dump(report, f)

    fake_api.on_read = controller
    name = RunContext(RUN_ID, "flights-features").name("kfs-features")
    fake_api.statuses[name] = [{"applicationState": {"state": "RUNNING"}},
                               {"applicationState": {"state": "COMPLETED"}}]
    counts, reference = launch_flights_features(
        platform="kubernetes", data_uri="", features_uri=features_uri,
        quarantine_uri="memory://kfstack-test/run/quarantine", num_shards=4,
        max_quarantine_fraction=0.05, sample_fraction=1.0, seed=42, kubernetes=options)
    assert fake_api.count("POST") == 1
    assert counts["rows_quarantined"] == 3 and counts["quarantined.duplicate"] == 3
    assert reference["kind"] == "SparkApplication" and reference["namespace"] == NAMESPACE
    created = fake_api.objects[("sparkapplications", NAMESPACE, name)]
    assert created["spec"]["executor"]["instances"] == 3
    assert created["spec"]["arguments"][:2] == ["--output-uri", features_uri]


def test_training_on_kubernetes_failure_carries_the_master_log(fake_api, tmp_path):
    features = make_feature_dir(tmp_path / "features", rows=400, shards=2, seed=3)
    options = _settings(fake_api, torch_options(
        platform="kubernetes", run_id=RUN_ID, task_name="train-pytorch", gpu_pool="h100",
        elastic_min_workers=0, elastic_max_workers=0, max_restarts=2,
        object_store_secret="kfstack-object-store", image_pull_secret="", timeout_seconds=600,
        poll_interval_seconds=1))

    def controller(name):
        fake_api.statuses[name] = [{"conditions": [{"type": "Failed", "status": "True",
                                                    "reason": "BackoffLimitExceeded", "message": "backoff"}]}]
        if not fake_api.pods:
            fake_api.add_pod(f"{name}-master-0", NAMESPACE, {
                "training.kubeflow.org/job-name": name, "training.kubeflow.org/replica-type": "master",
                "training.kubeflow.org/replica-index": "0"}, log="torch.OutOfMemoryError: CUDA out of memory")

    fake_api.on_read = controller
    with pytest.raises(ResourceFailedError) as err:
        launch_pytorch_training(
            platform="kubernetes", features_uri=features, model_uri="memory://kfstack-test/model",
            logs_uri="memory://kfstack-test/logs", epochs=1, workers=2, batch_size=64,
            learning_rate=0.01, max_restarts=2, kubernetes=options)
    assert "BackoffLimitExceeded" in str(err.value) and "CUDA out of memory" in str(err.value)
    ((_, _, name),) = [k for k in fake_api.objects if k[0] == "pytorchjobs"]
    job = fake_api.objects[("pytorchjobs", NAMESPACE, name)]
    assert job["spec"]["runPolicy"]["backoffLimit"] == 2
    command = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--checkpoint-uri") + 1] == "memory://kfstack-test/logs/checkpoints"
