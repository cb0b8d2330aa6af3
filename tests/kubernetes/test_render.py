"""`kfstack render` from the compiled pipeline, and the stages' Kubernetes path on a fake API.

The stages run through :func:`kfstack.platforms.run_stage` against the fake API server
(tests/kubernetes/fake_api.py); where a real cluster's job would write its outputs, the test's
scripted "controller" writes them to the artifact URI, exactly the files the real job writes
(job report, training metrics).
"""

import json

import pytest
import yaml
from kubeflow_katib_api.models import V1beta1Experiment

from kfstack.app.cli import main
from kfstack.components.training.distributed_training.stage import STAGE as TRAINING
from kfstack.errors import ResourceFailedError
from kfstack.kubernetes.launcher import Cluster
from kfstack.pipelines import rendering
from kfstack.platforms import run_stage
from kfstack_examples.flights.pipelines.steps import TRAINING_CODE
from tests.kubernetes.conftest import NAMESPACE, RUN_ID, master_pod_labels
from tests.training.conftest import make_feature_dir
from tests.upstream_crds import validate_with_crds

SECRET_VALUE = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
# The example rendered here (kfstack-examples, installed beside kfstack).
FLIGHTS = "flights-training"


def checkable(objects: list[dict]) -> list[dict]:
    """What the upstream CRDs can check: every object, an Experiment through its trial spec.

    Katib's own CRD carries no field schema (it would accept anything), so the Experiment is
    checked with the katib-api models here and its trial job against that job's CRD.
    """
    checked = []
    for obj in objects:
        if obj["kind"] == "Experiment":
            V1beta1Experiment.model_validate(obj)
            trial = obj["spec"]["trialTemplate"]["trialSpec"]
            obj = {**trial, "metadata": {**trial.get("metadata", {}), "name": "trial-name"}}
        checked.append(obj)
    return checked


def test_render_writes_every_object_and_they_validate(tmp_path, capsys):
    out = tmp_path / "rendered"
    assert (
        main(
            [
                "render",
                FLIGHTS,
                "--out",
                str(out),
                "--param",
                "workers=3",
                "--param",
                "gpu_pool=a100-mig",
                "--param",
                "training_api=v1",
                "--run-id",
                RUN_ID,
            ]
        )
        == 0
    )
    files = sorted(out.glob("*.yaml"))
    objects = [yaml.safe_load(f.read_text()) for f in files]
    assert [o["kind"] for o in objects] == [
        "Experiment",
        "InferenceService",
        "PyTorchJob",
        "SparkApplication",
    ]
    experiment, job = objects[0], objects[2]
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    # The final training takes the tuning step's best values (known when the run gets there).
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    command = container["command"]
    assert command[:3] == ["python", "-m", "kfstack.training.entrypoint"]
    best = "{{output:hyperparameter-tuning/best_hyperparameters}}"
    assert f"--learning_rate={best}.learning_rate" in command
    # The trials are the same job, with Katib's references where the tuned values go.
    trial = experiment["spec"]["trialTemplate"]["trialSpec"]
    assert trial["kind"] == "PyTorchJob" and trial["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    trial_container = trial["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert "--learning_rate=${trialParameters.learning_rate}" in trial_container["command"]
    assert "--epochs=6" in trial_container["command"]  # tuning_trial_epochs
    trial_env = {e["name"]: e.get("value") for e in trial_container["env"]}
    assert "${trialParameters.trial_name}" in trial_env["KFSTACK_MODEL_URI"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kfstack-a100-mig"
    assert job["metadata"]["labels"]["kfstack.dev/pipeline-run"] == RUN_ID
    env = {e["name"]: e.get("value") for e in container["env"]}
    # The artifact URI only the KFP backend knows stays a marked placeholder.
    assert env["KFSTACK_INPUT_URI"] == "{{artifact:spark-job/output}}"
    assert env["KFSTACK_CHECKPOINT_URI"] == "{{artifact:distributed-training/training_logs}}/checkpoints"
    assert "namespace" not in job["metadata"]  # kubectl -n / the launcher's own namespace decides
    validate_with_crds(tmp_path, checkable(objects))


def test_render_of_the_retraining_pipeline_follows_its_branches(tmp_path):
    """Every object of flights-retraining validates; what the drift check and the gate decide at
    run time is the condition each branch's objects carry; the new window is profiled on the
    production model's edges, which only the run knows."""
    rendered = rendering.render("flights-retraining", {"training_api": "v1"}, run_id=RUN_ID)
    by_kind = {obj["kind"]: task for task in rendered for obj in task.objects}
    assert set(by_kind) == {"SparkApplication", "Experiment", "PyTorchJob", "InferenceService"}
    assert by_kind["SparkApplication"].when == ()
    drifted = "inputs.parameter_values['pipelinechannel--data-drift-Output'] == true"
    assert by_kind["PyTorchJob"].when == (drifted,)
    assert by_kind["InferenceService"].when == (
        drifted,
        "inputs.parameter_values['pipelinechannel--gate-model-Output'] == 'challenger'",
    )
    spark = next(obj for task in rendered for obj in task.objects if obj["kind"] == "SparkApplication")
    # The feature job runs through the Spark step's driver wrapper; its argv is the pipeline's
    # values, the upstream outputs marked where only the run knows them.
    arguments = spark["spec"]["arguments"]
    assert arguments[0] == "kfstack_examples.flights.features_job"
    assert "--reference-profile-uri={{output:production-model/profile_uri}}" in arguments
    assert "--window-start={{output:data-window/start}}" in arguments
    assert "--num-shards=4" in arguments
    # The driver and executors compile the validation rules to machine code (see JAVA_OPTIONS).
    conf = spark["spec"]["sparkConf"]
    assert conf["spark.driver.extraJavaOptions"] == conf["spark.executor.extraJavaOptions"]
    assert "-XX:-DontCompileHugeMethods" in conf["spark.driver.extraJavaOptions"]
    assert conf["spark.sql.files.maxPartitionBytes"] == "32m"
    validate_with_crds(tmp_path, checkable([obj for task in rendered for obj in task.objects]))


def test_render_tensorflow_parameter_server_job(tmp_path):
    out = tmp_path / "rendered"
    assert (
        main(
            [
                "render",
                FLIGHTS,
                "--out",
                str(out),
                "--param",
                "framework=tensorflow",
                "--param",
                "tf_topology=parameter_server",
                "--param",
                "tf_parameter_servers=2",
                "--param",
                "workers=3",
            ]
        )
        == 0
    )
    objects = {o["kind"]: o for o in (yaml.safe_load(f.read_text()) for f in out.glob("*.yaml"))}
    assert set(objects) == {"Experiment", "TFJob", "SparkApplication", "InferenceService"}
    assert objects["Experiment"]["spec"]["trialTemplate"]["trialSpec"]["kind"] == "TFJob"
    specs = objects["TFJob"]["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Chief": 1, "Worker": 3, "PS": 2}
    command = specs["Chief"]["template"]["spec"]["containers"][0]["command"]
    assert command[:3] == ["python", "-m", "kfstack.training.entrypoint"]
    # The flights code starts its TensorFlow trainer by the framework hyperparameter.
    trial = objects["Experiment"]["spec"]["trialTemplate"]["trialSpec"]["spec"]["tfReplicaSpecs"]
    assert "--framework=tensorflow" in trial["Chief"]["template"]["spec"]["containers"][0]["command"]
    assert (
        specs["Chief"]["template"]["spec"]["containers"][0]["image"]
        .split("/")[-1]
        .startswith("kfstack-tf-trainer:")
    )
    validate_with_crds(tmp_path, checkable(list(objects.values())))


def test_render_with_auto_writes_each_training_api_with_its_condition(tmp_path):
    """training_api=auto decides on the cluster: both jobs are rendered, each saying when."""
    out = tmp_path / "rendered"
    assert main(["render", FLIGHTS, "--out", str(out), "--run-id", RUN_ID]) == 0
    texts = {path.name.split("-")[0]: path.read_text() for path in out.glob("*.yaml")}
    assert set(texts) == {"experiment", "pytorchjob", "trainjob", "sparkapplication", "inferenceservice"}
    # Two Experiments too (their trials are TrainJobs or PyTorchJobs), each in its own file.
    experiments = sorted(out.glob("experiment-*.yaml"))
    assert len(experiments) == 2
    kinds = {yaml.safe_load(p.read_text())["spec"]["trialTemplate"]["trialSpec"]["kind"] for p in experiments}
    assert kinds == {"TrainJob", "PyTorchJob"}
    assert all(p.read_text().startswith("# only when: training_api=") for p in experiments)
    assert texts["trainjob"].startswith(
        "# only when: training_api=trainer-v2: the cluster serves trainer.kubeflow.org/v1alpha1 TrainJob"
    )
    first_line = texts["pytorchjob"].splitlines()[0]
    assert "the cluster serves kubeflow.org/v1 PyTorchJob" in first_line
    assert first_line.endswith("and not trainer.kubeflow.org/v1alpha1 TrainJob (Kubeflow Trainer v2.3)")
    assert not texts["sparkapplication"].startswith("#")  # created whatever the cluster serves
    assert not texts["inferenceservice"].startswith("#")
    validate_with_crds(tmp_path, checkable([yaml.safe_load(p.read_text()) for p in out.glob("*.yaml")]))


def test_render_an_explicit_trainer_v2_choice(tmp_path):
    out = tmp_path / "rendered"
    arguments = ["--param", "training_api=trainer-v2", "--param", "trainer_runtime=kfstack-torch-distributed"]
    assert main(["render", FLIGHTS, "--out", str(out), "--param", "workers=4", *arguments]) == 0
    objects = {o["kind"]: o for o in (yaml.safe_load(f.read_text()) for f in out.glob("*.yaml"))}
    assert set(objects) == {"Experiment", "TrainJob", "SparkApplication", "InferenceService"}
    spec = objects["TrainJob"]["spec"]
    assert spec["runtimeRef"]["name"] == "kfstack-torch-distributed"
    assert spec["trainer"]["numNodes"] == 4
    env = {e["name"]: e.get("value") for e in spec["trainer"]["env"]}
    assert env["KFSTACK_INPUT_URI"] == "{{artifact:spark-job/output}}"
    validate_with_crds(tmp_path, checkable(list(objects.values())))


@pytest.mark.parametrize(
    ("mode", "annotations"),
    [
        (
            "serverless",
            {
                "serving.kserve.io/deploymentMode": "Serverless",
                "serving.kserve.io/enable-tag-routing": "true",
            },
        ),
        ("standard", {"serving.kserve.io/deploymentMode": "Standard"}),
    ],
)
def test_render_writes_the_first_deployment_in_either_serving_mode(tmp_path, mode, annotations):
    out = tmp_path / "rendered"
    parameters = [
        "--param",
        f"serving_mode={mode}",
        "--param",
        "serving_pool=h100",
        "--param",
        "serving_max_replicas=5",
    ]
    assert (
        main(
            [
                "render",
                FLIGHTS,
                "--out",
                str(out),
                "--param",
                "training_api=v1",
                "--run-id",
                RUN_ID,
                *parameters,
            ]
        )
        == 0
    )
    (path,) = out.glob("inferenceservice-*.yaml")
    service = yaml.safe_load(path.read_text())
    assert service["metadata"]["name"] == "flights-delay"
    assert service["metadata"]["annotations"] == {
        **annotations,
        "kfstack.dev/new-model-version": RUN_ID,
        "kfstack.dev/new-model-uri": "{{artifact:distributed-training/model}}",
    }
    assert service["metadata"]["labels"]["kfstack.dev/pipeline-run"] == RUN_ID
    predictor = service["spec"]["predictor"]
    assert predictor["model"]["storageUri"] == "{{artifact:distributed-training/model}}"
    assert predictor["model"]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert predictor["maxReplicas"] == 5
    assert "canary" not in service["spec"] and "canaryTrafficPercent" not in predictor
    validate_with_crds(tmp_path, [service])


def test_render_without_deploy_has_no_inference_service(tmp_path):
    out = tmp_path / "rendered"
    assert main(["render", FLIGHTS, "--out", str(out), "--param", "deploy=false"]) == 0
    assert not list(out.glob("inferenceservice-*.yaml"))


def test_render_places_every_object_in_the_launch_namespace(tmp_path):
    out = tmp_path / "rendered"
    args = ["render", FLIGHTS, "--out", str(out), "--param", "training_api=v1", "--param", "tune=true"]
    assert main([*args, "--param", "launch_namespace=team-train"]) == 0
    objects = [yaml.safe_load(path.read_text()) for path in out.glob("*.yaml")]
    assert {obj["kind"] for obj in objects} >= {
        "SparkApplication",
        "Experiment",
        "PyTorchJob",
        "InferenceService",
    }
    assert {obj["metadata"].get("namespace") for obj in objects} == {"team-train"}
    # Without one, the namespace is the run's (its task pod's): left to kubectl's -n.
    again = tmp_path / "default"
    assert main(["render", FLIGHTS, "--out", str(again), "--param", "training_api=v1"]) == 0
    assert all("namespace" not in yaml.safe_load(p.read_text())["metadata"] for p in again.glob("*.yaml"))


def test_render_refuses_a_bad_launch_namespace(tmp_path, capsys):
    out = tmp_path / "rendered"
    assert main(["render", FLIGHTS, "--out", str(out), "--param", "launch_namespace=Team_ML"]) != 0
    assert "launch_namespace='Team_ML' is not a namespace name" in capsys.readouterr().err
    assert not out.exists() or not list(out.glob("*.yaml"))


def test_render_refuses_bad_serving_parameters(tmp_path, capsys):
    out = tmp_path / "o"
    bad = [
        "--param",
        "serving_mode=standard",
        "--param",
        "serving_min_replicas=0",
        "--param",
        "serving_name=Flights",
    ]
    assert main(["render", FLIGHTS, "--out", str(out), *bad]) == 2
    assert "serving_name='Flights'" in capsys.readouterr().err
    assert (
        main(
            [
                "render",
                FLIGHTS,
                "--out",
                str(out),
                "--param",
                "serving_mode=standard",
                "--param",
                "serving_min_replicas=0",
            ]
        )
        == 2
    )
    assert "needs serving_mode=serverless" in capsys.readouterr().err
    assert main(["render", FLIGHTS, "--out", str(out), "--param", "canary_max_psi=-1"]) == 2
    assert "canary_max_psi=-1" in capsys.readouterr().err
    assert not out.exists()


def test_render_refuses_tensorflow_on_trainer_v2(tmp_path, capsys):
    out = tmp_path / "o"
    assert (
        main(
            [
                "render",
                FLIGHTS,
                "--out",
                str(out),
                "--param",
                "framework=tensorflow",
                "--param",
                "training_api=trainer-v2",
            ]
        )
        == 2
    )
    assert "no TensorFlow runtime" in capsys.readouterr().err
    assert not out.exists()


def test_render_refuses_bad_parameters(tmp_path, capsys):
    assert (
        main(["render", FLIGHTS, "--out", str(tmp_path / "o"), "--param", "spark_executor_memory=lots"]) == 2
    )
    assert "spark_executor_memory='lots'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    # A Model Registry URL that cannot be one fails before the run, not after its rollout.
    for pipeline in ("flights-training", "flights-retraining"):
        argv = [
            "render",
            pipeline,
            "--out",
            str(tmp_path / "o"),
            "--param",
            "model_registry_url=ftp://registry",
        ]
        assert main(argv) == 2
        assert "ftp://registry" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_deployment_serves_a_kfp_artifact_from_its_s3_uri():
    """KFP's default artifact store is MinIO (minio://...); KServe's storage initializer reads it
    as S3."""
    from kfstack.components.serving.model_deployment.component import model_deployment
    from kfstack.components.serving.model_deployment.stage import STAGE as DEPLOY

    defaults = {name: spec.default for name, spec in model_deployment.component_spec.inputs.items()}
    settings = DEPLOY.settings(
        {
            **defaults,
            "platform": "kubernetes",
            "model": "minio://mlpipeline/v2/artifacts/run/distributed-training/model",
            "holdout": "minio://f",
            "model_format": "sklearn",
            "task": "binary",
            "label_column": "label",
            "serving_name": "m",
            "run_id": RUN_ID,
        }
    )
    assert settings.request.storage_uri == "s3://mlpipeline/v2/artifacts/run/distributed-training/model"


def test_no_credential_value_reaches_compiled_pipelines_or_rendered_objects(tmp_path, monkeypatch):
    """Credentials live in the environment of whoever compiles/renders; none may leak out."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, SECRET_VALUE)
    assert main(["compile", "--out", str(tmp_path / "dist")]) == 0
    assert (
        main(["render", FLIGHTS, "--out", str(tmp_path / "objects"), "--param", "image_pull_secret=regcred"])
        == 0
    )
    written = list((tmp_path / "dist").iterdir()) + list((tmp_path / "objects").glob("*.yaml"))
    assert written
    for path in written:
        text = path.read_text()
        assert SECRET_VALUE not in text, path
        # The Secret is referenced by name only. A predictor gets no such env at all: KServe's
        # storage initializer reads the model with its service account's Secrets.
        if not path.name.startswith("inferenceservice-"):
            assert "kfstack-object-store" in text, path
    for obj in (o for task in rendering.render("flights-training", {}, RUN_ID) for o in task.objects):
        text = json.dumps(obj)
        for env in _all_env(obj):
            if env["name"].startswith("AWS_"):
                assert (
                    "value" not in env and env["valueFrom"]["secretKeyRef"]["name"] == "kfstack-object-store"
                )
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


class FakeArtifact:
    """A KFP artifact as a task's body sees it: a remote ``uri``, a local ``path``, metadata."""

    def __init__(self, uri: str, path: str) -> None:
        self.uri, self.path, self.metadata = uri, path, {}

    def log_metric(self, name: str, value: float) -> None:
        self.metadata[name] = value


def arguments(tmp_path, inputs: dict, outputs: tuple[str, ...], **parameters) -> dict:
    """A launching component's arguments on platform=kubernetes: its parameters (the pipeline's
    defaults, then ``parameters``) and artifacts with memory:// URIs."""
    values = rendering.run_parameters("flights-training", parameters)
    artifacts = {
        name: FakeArtifact(f"memory://kfstack-test/run/{name}", str(tmp_path / name)) for name in outputs
    }
    return {**values, "platform": "kubernetes", "run_id": RUN_ID, "task_name": "task", **inputs, **artifacts}


TRAINING_OUTPUTS = ("model", "training_metrics", "training_logs", "training_job")


def training_arguments(tmp_path, **parameters) -> dict:
    """The training step's arguments, the flights code's, over a small real feature directory
    (2 shards a split)."""
    features = make_feature_dir(tmp_path / "features", rows=400, shards=2, seed=3)
    values = arguments(tmp_path, {"data": FakeArtifact(features, features)}, TRAINING_OUTPUTS, **parameters)
    hyperparameters = {name: values[name] for name in TRAINING_CODE["hyperparameter_types"]}
    return {**values, **TRAINING_CODE, "hyperparameters": hyperparameters}


def cluster(fake_api) -> Cluster:
    """The fake API's cluster, its namespace set up as the manifests set one up (the shipped
    LocalQueues, which the access review reads before a queued pool's job is created)."""
    fake_api.put_local_queues(NAMESPACE)
    return Cluster(fake_api.api_client(), NAMESPACE, sleep=lambda seconds: None)


def test_training_stage_on_kubernetes_failure_carries_the_master_log(fake_api, tmp_path):
    args = training_arguments(
        tmp_path,
        workers=2,
        max_restarts=2,
        gpu_pool="h100",
        training_api="v1",
    )

    def controller(name):
        fake_api.statuses[name] = [
            {
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "BackoffLimitExceeded",
                        "message": "backoff",
                    }
                ]
            }
        ]
        if not fake_api.pods:
            fake_api.add_pod(
                f"{name}-master-0",
                NAMESPACE,
                master_pod_labels(name),
                log="torch.OutOfMemoryError: CUDA out of memory",
            )

    fake_api.on_read = controller
    with pytest.raises(ResourceFailedError) as err:
        run_stage(TRAINING, args, cluster=cluster(fake_api))
    assert "BackoffLimitExceeded" in str(err.value) and "CUDA out of memory" in str(err.value)
    ((_, _, name),) = [k for k in fake_api.objects if k[0] == "pytorchjobs"]
    job = fake_api.objects[("pytorchjobs", NAMESPACE, name)]
    assert job["spec"]["runPolicy"]["backoffLimit"] == 2
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["KFSTACK_CHECKPOINT_URI"] == "memory://kfstack-test/run/training_logs/checkpoints"


def test_training_stage_refuses_a_missing_dataset_before_creating_anything(fake_api, tmp_path):
    args = training_arguments(tmp_path, workers=2)
    args["data"] = FakeArtifact("memory://kfstack-test/nowhere", str(tmp_path / "nowhere"))
    with pytest.raises(Exception, match="data: no dataset at memory://kfstack-test/nowhere"):
        run_stage(TRAINING, args, cluster=cluster(fake_api))
    assert fake_api.requests == []
