"""The generic training step: a team's module or function, under the operators' env contracts.

Unit: the entrypoint's metric watching and chief rule, the step's settings refusing bad values
before anything starts, the cluster objects (validated against the upstream CRDs when
``../shared`` is present). Local: real replicas -- two torch processes in DDP over gloo under a
TrainJob's torchrun env, a plain module -- and the component under kfp.local.
"""

import json
import os

import pytest

from kfstack import contracts
from kfstack.components.training.distributed_training.stage import STAGE
from kfstack.errors import InvalidParameterError, TrainingFailedError
from kfstack.kubernetes.naming import RunContext
from kfstack.training import entrypoint
from tests.frameworks import needs_torch
from tests.kfp_local import run_pipeline
from tests.upstream_crds import validate_with_crds

TORCH_TEAM = {
    "training_code": "tiny_torch_team:train",
    "hyperparameter_types": {"learning_rate": "float", "epochs": "int", "optimizer": "str"},
    "hyperparameters": {"learning_rate": 0.5, "epochs": 40.0},
    "metric_names": ["val_loss"],
}
PLAIN_TEAM = {
    "training_code": "plain_team_module",
    "hyperparameter_types": {"depth": "int", "mode": "str"},
    "hyperparameters": {"depth": 7},
    "metric_names": ["score"],
    "model_format": "sklearn",
}


def arguments(tmp_path, dataset, team, **overrides):
    return {
        "platform": "local",
        "data": dataset,
        "model": str(tmp_path / "model"),
        "training_logs": str(tmp_path / "logs"),
        **team,
        "max_restarts": 0,
        **overrides,
    }


def run_locally(args):
    settings = STAGE.settings(args)
    STAGE.preflight(settings)
    return STAGE.run_local(STAGE.variants(settings)[0].settings)


# --- the entrypoint ---------------------------------------------------------------------------


def test_the_watcher_keeps_the_last_value_of_each_declared_metric(capsys):
    import sys

    last: dict[str, float] = {}
    watcher = entrypoint.MetricWatcher(sys.stdout, ["val_loss", "acc"], last)
    watcher.write("epoch=1 val_loss=0.9 acc=0.5\nepoch=2 val_lo")
    watcher.write("ss=0.7 val_loss_smoothed=0.1\n")
    watcher.write("acc=0.75")  # no newline yet: read when the code returns
    assert last == {"val_loss": 0.7, "acc": 0.5}
    watcher.finish()
    assert last == {"val_loss": 0.7, "acc": 0.75}
    assert "epoch=2 val_loss=0.7" in capsys.readouterr().out  # passed on as printed


@pytest.mark.parametrize(
    ("env", "chief"),
    [
        ({}, True),
        ({"RANK": "0", "WORLD_SIZE": "2"}, True),
        ({"RANK": "1", "WORLD_SIZE": "2"}, False),
        (
            {
                "TF_CONFIG": json.dumps(
                    {"cluster": {"worker": ["a", "b"]}, "task": {"type": "worker", "index": 0}}
                )
            },
            True,
        ),
        (
            {
                "TF_CONFIG": json.dumps(
                    {"cluster": {"worker": ["a", "b"]}, "task": {"type": "worker", "index": 1}}
                )
            },
            False,
        ),
        (
            {
                "TF_CONFIG": json.dumps(
                    {"cluster": {"chief": ["c"], "worker": ["a"]}, "task": {"type": "worker", "index": 0}}
                )
            },
            False,
        ),
        (
            {
                "TF_CONFIG": json.dumps(
                    {"cluster": {"chief": ["c"], "ps": ["p"]}, "task": {"type": "chief", "index": 0}}
                )
            },
            True,
        ),
    ],
)
def test_only_the_chief_writes_the_model_and_result(env, chief):
    assert entrypoint.is_chief(env) is chief


def test_the_entrypoint_runs_a_module_and_leaves_the_result(team_code, tmp_path, monkeypatch, capsys):
    for name in (contracts.MODEL_DIR_ENV, contracts.REPORT_PATH_ENV):
        # main() sets them in this process: set first so that monkeypatch records them and
        # removes main()'s values after the test (delenv of an absent name records nothing).
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    code = contracts.TrainingCode("plain_team_module", {"depth": "int", "mode": "str"}, ("score",))
    env = entrypoint.step_env(code, "sklearn", str(tmp_path / "model"), str(tmp_path / "out" / "result.json"))
    entrypoint.main(["--depth=20", "--mode=bad-report"], env)
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["metrics"] == {"score": 0.7}
    assert result["model_problem"] is None
    assert "not so: rows" in result["report_problem"]
    assert (tmp_path / "model" / "model.joblib").read_bytes() == b"weights"
    with pytest.raises(InvalidParameterError, match="depth='deep' is not of type int"):
        entrypoint.main(["--depth=deep"], env)


# --- settings and variants --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"hyperparameters": {"depth": 7, "width": 2}}, "width: not declared"),
        ({"hyperparameters": {"depth": "seven"}}, "depth='seven' is not of type int"),
        ({"hyperparameters": {"depth": 7, "mode": "$(reboot)"}}, "unquoted into a shell command"),
        ({"training_code": "plain_team_module:fit"}, "failed to import"),  # argparse exits
        pytest.param({"training_code": "tiny_torch_team:fit"}, "has no function 'fit'", marks=needs_torch),
        ({"training_code": "json.team_trainer"}, "no module named 'json.team_trainer'"),
        ({"training_code": "no_team_package_installed"}, "no module named 'no_team_package_installed' here"),
        ({"model_format": "pmml"}, "model_format='pmml'"),
        ({"env_secrets": ["db password"]}, "is not a Secret name"),
        ({"gpu_pool": "tpu"}, "gpu_pool='tpu' is not a node pool"),
        ({"workers": 0}, "workers=0 must be >= 1"),
        ({"framework": "tensorflow", "training_api": "trainer-v2"}, "TensorFlow"),
    ],
)
def test_bad_parameters_fail_before_anything_starts(team_code, tmp_path, dataset, overrides, message):
    with pytest.raises(InvalidParameterError, match=message):
        settings = STAGE.settings(arguments(tmp_path, dataset, PLAIN_TEAM, **overrides))
        STAGE.variants(settings)
    assert not (tmp_path / "logs").exists()


def test_a_missing_dataset_fails_the_preflight(team_code, tmp_path):
    settings = STAGE.settings(arguments(tmp_path, str(tmp_path / "nothing"), PLAIN_TEAM))
    with pytest.raises(InvalidParameterError, match="data: no dataset at"):
        STAGE.preflight(settings)


def test_secrets_by_name_keep_a_pytorch_job_on_v1(team_code, tmp_path, dataset):
    settings = STAGE.settings(arguments(tmp_path, dataset, PLAIN_TEAM, env_secrets=["team-db"]))
    assert [v.choice for v in STAGE.variants(settings)] == ["training_api=v1"]
    forced = STAGE.settings(
        arguments(tmp_path, dataset, PLAIN_TEAM, env_secrets=["team-db"], training_api="trainer-v2")
    )
    with pytest.raises(InvalidParameterError, match=r"a TrainJob .* takes no envFrom"):
        STAGE.build(STAGE.variants(forced)[0].settings, RunContext("run-1", "train"))


# --- the cluster objects ----------------------------------------------------------------------


def cluster_arguments(**overrides):
    return {
        "platform": "kubernetes",
        "data": "minio://mlpipeline/v2/artifacts/run-1/spark-job/output",
        "model": "minio://mlpipeline/v2/artifacts/run-1/train/model",
        "training_logs": "minio://mlpipeline/v2/artifacts/run-1/train/training_logs",
        **PLAIN_TEAM,
        "trainer_image": "registry.example.com/team/trainer:1.0",
        **overrides,
    }


def test_every_job_runs_the_team_code_through_the_entrypoint(team_code, tmp_path):
    objects = []
    for overrides in (
        {"training_api": "trainer-v2", "workers": 3},
        {"training_api": "v1", "env_secrets": ["team-db"]},
        {"training_api": "v1", "elastic_min_workers": 1, "elastic_max_workers": 4},
        {"framework": "tensorflow", "tf_topology": "parameter_server", "tf_parameter_servers": 2},
    ):
        settings = STAGE.settings(cluster_arguments(**overrides))
        for variant in STAGE.variants(settings):
            objects += STAGE.build(variant.settings, RunContext("run-1", "distributed-training"))
    assert [o["kind"] for o in objects] == ["TrainJob", "PyTorchJob", "PyTorchJob", "TFJob"]
    trainjob, pytorchjob, elastic, tfjob = objects
    trainer = trainjob["spec"]["trainer"]
    assert trainer["command"] == ["torchrun", "-m", entrypoint.MODULE]
    assert trainer["args"] == ["--depth=7"]
    assert trainer["image"] == "registry.example.com/team/trainer:1.0"
    env = {var["name"]: var.get("value") for var in trainer["env"]}
    # The pods open the artifacts by their S3 URIs; the declaration travels as JSON in the env.
    assert env[contracts.INPUT_URI_ENV] == "s3://mlpipeline/v2/artifacts/run-1/spark-job/output"
    assert env[contracts.CHECKPOINT_URI_ENV].endswith("/train/training_logs/checkpoints")
    assert env[entrypoint.MODEL_URI_ENV] == "s3://mlpipeline/v2/artifacts/run-1/train/model"
    assert json.loads(env[entrypoint.CODE_ENV])["entry"] == "plain_team_module"
    master = pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert master["command"] == ["python", "-m", entrypoint.MODULE, "--depth=7"]
    assert master["envFrom"] == [{"secretRef": {"name": "team-db"}}]
    assert elastic["spec"]["elasticPolicy"]["maxReplicas"] == 4
    assert set(tfjob["spec"]["tfReplicaSpecs"]) == {"Chief", "Worker", "PS"}
    validate_with_crds(tmp_path, objects)


def test_a_tracked_tasks_jobs_tell_every_replica_its_run_and_the_tracking_secret(team_code, tmp_path):
    """The task's MLflow run (here KFP's plugin's) reaches every replica of every training API
    as plain variables, the credentials as optional references to the tracking Secret's keys."""
    from kfstack.tracking.cluster import CREDENTIAL_KEYS, TaskTracking

    tracking = TaskTracking(
        "https://mlflow.example.com", "task-run-7", passed_on={"MLFLOW_TRACKING_AUTH": "kubernetes"}
    )
    context = RunContext("run-1", "distributed-training", tracking=tracking)
    objects = []
    for overrides in ({"training_api": "trainer-v2"}, {"training_api": "v1"}, {"framework": "tensorflow"}):
        settings = STAGE.settings(cluster_arguments(**overrides))
        objects += STAGE.build(STAGE.variants(settings)[0].settings, context)
    trainjob, pytorchjob, tfjob = objects
    containers = [
        trainjob["spec"]["trainer"],
        *(
            spec["template"]["spec"]["containers"][0]
            for spec in pytorchjob["spec"]["pytorchReplicaSpecs"].values()
        ),
        *(spec["template"]["spec"]["containers"][0] for spec in tfjob["spec"]["tfReplicaSpecs"].values()),
    ]
    for container in containers:
        env = {var["name"]: var for var in container["env"]}
        assert env["MLFLOW_TRACKING_URI"]["value"] == "https://mlflow.example.com"
        assert env["MLFLOW_RUN_ID"]["value"] == "task-run-7"
        assert env["MLFLOW_TRACKING_AUTH"]["value"] == "kubernetes"
        for key in CREDENTIAL_KEYS:
            assert env[key]["valueFrom"]["secretKeyRef"] == {
                "name": "kfp-mlflow-credentials",
                "key": key,
                "optional": True,
            }
    validate_with_crds(tmp_path, objects)


# --- local runs -------------------------------------------------------------------------------


@needs_torch
def test_a_torch_function_trains_in_ddp_under_a_trainjob_env(team_code, tmp_path, dataset):
    result = run_locally(arguments(tmp_path, dataset, TORCH_TEAM, workers=2, training_api="trainer-v2"))
    metrics = result.metrics["training_metrics"]
    assert metrics["val_loss"] < 0.05  # y = 2x + 1 learned by two ranks together
    assert metrics["report.rows"] == 64 and metrics["world_size"] == 2 and metrics["restarts"] == 0
    assert metrics["job_cost"] > 0 and metrics["training_seconds"] > 0
    assert result.reference["launcher"] == "torchrun" and result.reference["training_api"] == "trainer-v2"
    # Rank 0's model, and the step's lineage record beside it.
    assert sorted(os.listdir(tmp_path / "model")) == ["lineage.json", "model.pt"]
    logs = (tmp_path / "logs" / "attempt-1" / "rank-1.log").read_text()
    assert "world=2" in logs  # the second node really joined the group


@needs_torch
@pytest.mark.parametrize(
    ("mode", "message"),
    [
        (
            "no-model",
            r"rank 0 left a model directory \(KFSTACK_MODEL_DIR\) that does not hold a sklearn model",
        ),
        ("bad-report", "whose values must be finite numbers; not so: rows"),
    ],
)
def test_a_broken_contract_fails_the_step_saying_what_is_missing(team_code, tmp_path, dataset, mode, message):
    team = {**PLAIN_TEAM, "hyperparameters": {"depth": 3, "mode": mode}}
    with pytest.raises(contracts.ContractError, match=message):
        run_locally(arguments(tmp_path, dataset, team, workers=1))


@needs_torch
def test_a_metric_never_printed_is_named(team_code, tmp_path, dataset):
    team = {**PLAIN_TEAM, "metric_names": ["score", "val_auc"]}
    with pytest.raises(contracts.ContractError, match=r"never printed val_auc=<value>"):
        run_locally(arguments(tmp_path, dataset, team, workers=1))


def test_a_crash_fails_with_the_replicas_log_tail(team_code, tmp_path, dataset):
    team = {**PLAIN_TEAM, "hyperparameters": {"depth": 3, "mode": "crash"}}
    with pytest.raises(
        TrainingFailedError, match=r"(?s)rank 0 \(master-0\) failed \(exit code 3\).*depth=3 score=0.53"
    ):
        run_locally(arguments(tmp_path, dataset, team, workers=1, training_api="v1"))


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_the_component_runs_under_kfp_local(team_code, tmp_path, dataset):
    from kfp import dsl

    from kfstack.components.training.distributed_training.component import distributed_training

    @dsl.pipeline(name="team-training")
    def team_training():
        data = dsl.importer(artifact_uri=dataset, artifact_class=dsl.Dataset)
        distributed_training(
            platform="local", data=data.output, workers=2, training_api="v1", max_restarts=0, **PLAIN_TEAM
        )

    run = run_pipeline(team_training, tmp_path / "root")
    step = run / "distributed-training"
    assert (step / "model" / "model.joblib").read_bytes() == b"weights"
    outputs = json.loads((step / "executor_output.json").read_text())["artifacts"]
    logged = outputs["training_metrics"]["artifacts"][0]["metadata"]
    assert logged["score"] == pytest.approx(0.57) and logged["world_size"] == 2
    # kfp.local handed the dict's int over as 7.0; the code got --depth=7 (it printed depth=7),
    # and the model records it as the int it is declared to be.
    assert outputs["model"]["artifacts"][0]["metadata"]["hyperparameters"] == {"depth": 7}


# A team's train(data_dir, model_dir) function, given its locations as its own arguments.
EXISTING_TEAM = {
    "training_code": "existing_train:train",
    "hyperparameter_types": {"epochs": "int"},
    "hyperparameters": {"epochs": 3},
    "metric_names": ["loss"],
    "code_arguments": {"data_dir": "$KFSTACK_INPUT_DIR", "model_dir": "$KFSTACK_MODEL_DIR"},
}


@needs_torch
def test_a_function_that_takes_its_locations_as_arguments_runs_as_it_is(team_code, tmp_path):
    """``train(data_dir, model_dir)`` with plain file calls: the step gives it the input as a
    folder on the replica's disk and its model directory, a space in a path kept whole."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "the data"
    data.mkdir()
    pq.write_table(pa.table({"x": [1.0, 2.0]}), data / "part-0.parquet")
    result = run_locally(arguments(tmp_path, str(data), EXISTING_TEAM, workers=1))
    assert result.metrics["training_metrics"]["loss"] == 0.25
    model = json.loads((tmp_path / "model" / "model.json").read_text())
    assert model["files"] == 1 and model["data_dir"] == str(data)


def test_an_object_store_input_is_staged_to_a_folder_for_the_code(team_code, tmp_path, monkeypatch):
    """On a cluster the input is an object store's URI: ``$KFSTACK_INPUT_DIR`` is a copy of it
    on the replica's disk (fsspec's in-memory store stands for the bucket here)."""
    import fsspec
    import pyarrow as pa
    import pyarrow.parquet as pq

    store = fsspec.filesystem("memory")
    with store.open("/bucket/data/part-0.parquet", "wb") as f:
        pq.write_table(pa.table({"x": [1.0]}), f)
    code = STAGE.settings(arguments(tmp_path, "memory://bucket/data", EXISTING_TEAM)).code
    env = {
        **entrypoint.step_env(code, "custom", "memory://bucket/model", ""),
        "KFSTACK_INPUT_URI": "memory://bucket/data",
    }
    entrypoint.main(["--epochs=1"], env=env)
    with store.open("/bucket/model/model.json") as f:
        model = json.load(f)
    assert model["files"] == 1 and os.path.isabs(model["data_dir"]) and "://" not in model["data_dir"]
    store.rm("/bucket", recursive=True)


def test_code_arguments_are_checked_before_anything_starts(team_code, tmp_path, dataset):
    bad = {**EXISTING_TEAM, "code_arguments": {"epochs": "3", "data_dir": "$KFSTACK_DATA_DIR"}}
    with pytest.raises(InvalidParameterError) as refused:
        STAGE.settings(arguments(tmp_path, dataset, bad))
    assert "$KFSTACK_DATA_DIR is not a location" in str(refused.value)


@pytest.mark.slow  # the positive path (two ranks through the S3 server) runs by default
def test_with_uri_locations_code_that_opens_its_input_as_a_path_fails_here_as_on_a_cluster(
    team_code, tmp_path, dataset, monkeypatch
):
    """Under ``KFSTACK_URI_LOCATIONS=1`` the embedded step holds the input and checkpoints in an
    S3 server on loopback and tells the code ``s3://`` URIs, as a cluster does: ``open()`` of
    one fails here already. The staged folder (``$KFSTACK_INPUT_DIR``) is a path either way."""
    from kfstack.uris import URI_LOCATIONS_ENV

    monkeypatch.setenv(URI_LOCATIONS_ENV, "1")
    as_path = {
        **EXISTING_TEAM,
        "code_arguments": {"data_dir": "$KFSTACK_INPUT_URI", "model_dir": "$KFSTACK_MODEL_DIR"},
    }
    with pytest.raises(TrainingFailedError, match=f"no Parquet files in s3://kfstack-embedded{dataset}"):
        run_locally(arguments(tmp_path, dataset, as_path, workers=1))
    result = run_locally(arguments(tmp_path, dataset, EXISTING_TEAM, workers=1))
    assert result.metrics["training_metrics"]["loss"] == 0.25
    model = json.loads((tmp_path / "model" / "model.json").read_text())
    # the replica's staged copy of the served input, as on a cluster
    assert model["data_dir"] != dataset and model["data_dir"].endswith("/input")


@needs_torch
def test_with_uri_locations_code_written_for_an_object_store_runs_and_its_checkpoints_come_back(
    team_code, tmp_path, dataset, monkeypatch
):
    """Code that opens its locations through fsspec reads the input from the loopback S3 server
    on two ranks; what it checkpointed there is in the run's checkpoint folder afterwards."""
    from kfstack.uris import URI_LOCATIONS_ENV

    monkeypatch.setenv(URI_LOCATIONS_ENV, "1")
    team = {**EXISTING_TEAM, "training_code": "object_store_team:train", "code_arguments": {}}
    result = run_locally(arguments(tmp_path, dataset, team, workers=2))
    assert result.metrics["training_metrics"]["loss"] == 0.25
    assert json.loads((tmp_path / "model" / "model.json").read_text()) == {"rows": 64}
    checkpoint = json.loads((tmp_path / "logs" / "checkpoints" / "epoch-3.json").read_text())
    assert checkpoint["rows"] == 64 and checkpoint["input"] == f"s3://kfstack-embedded{dataset}"


def test_without_the_switch_no_object_store_is_started(monkeypatch):
    from kfstack import object_store
    from kfstack.uris import URI_LOCATIONS_ENV

    monkeypatch.delenv(URI_LOCATIONS_ENV, raising=False)
    with object_store.for_step() as store:
        assert store is None


# --- a team's main(argv=None, *, data_dir, model_dir), as written around argparse --------------

ARGV_TEAM = {
    "training_code": "argv_tunable:main",
    "hyperparameter_types": {"learning_rate": "float", "depth": "int", "epochs": "int"},
    "hyperparameters": {"learning_rate": 0.5, "depth": 4},
    "metric_names": ["score"],
    "code_arguments": {"data_dir": "$KFSTACK_INPUT_DIR", "model_dir": "$KFSTACK_MODEL_DIR"},
    "option_style": "dashes",
}


def test_a_function_takes_argv_when_its_first_parameter_is_named_so():
    def main(argv=None, *, data_dir, model_dir): ...
    def positional_only(argv, /, data_dir): ...
    def fit(learning_rate, argv=None): ...
    def keyword_only(*, argv): ...

    assert entrypoint.takes_argv(main) and entrypoint.takes_argv(positional_only)
    assert not any(entrypoint.takes_argv(f) for f in (fit, keyword_only, lambda: None))


def test_an_argv_function_gets_its_options_in_its_own_spelling(team_code, tmp_path, dataset):
    """Whichever spelling reaches the entrypoint, the code gets the declared one on its argv,
    and its locations as keyword arguments."""
    code = STAGE.settings(arguments(tmp_path, dataset, ARGV_TEAM)).code
    env = {contracts.INPUT_DIR_ENV: dataset, contracts.MODEL_DIR_ENV: str(tmp_path)}
    entrypoint.run_code(code, ["--learning_rate=0.25", "--depth=6"], env)
    model = json.loads((tmp_path / "model.json").read_text())
    assert model == {"argv": ["--learning-rate=0.25", "--depth=6"], "learning_rate": 0.25, "depth": 6}


def test_an_argv_function_its_signature_refuses_is_named_before_it_runs(team_code, dataset):
    code = contracts.TrainingCode(
        "argv_tunable:main",
        ARGV_TEAM["hyperparameter_types"],
        ("score",),
        arguments={"data_dir": dataset},
        option_style="dashes",
    )
    with pytest.raises(
        InvalidParameterError,
        match=r"argv_tunable:main: called as main\(\[--learning-rate=0.5\], data_dir=\.\.\.\), which its "
        r"signature refuses: missing a required argument: 'model_dir'",
    ):
        entrypoint.run_code(code, ["--learning-rate=0.5"], {})


def test_a_bad_option_style_fails_before_anything_starts(team_code, tmp_path, dataset):
    with pytest.raises(InvalidParameterError, match=r"option_style='camel': expected underscores or dashes"):
        STAGE.settings(arguments(tmp_path, dataset, {**ARGV_TEAM, "option_style": "camel"}))


def test_a_job_writes_the_options_in_the_codes_spelling(team_code, tmp_path):
    settings = STAGE.settings(cluster_arguments(**ARGV_TEAM, training_api="v1"))
    (job,) = STAGE.build(STAGE.variants(settings)[0].settings, RunContext("run-1", "distributed-training"))
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert master["command"] == ["python", "-m", entrypoint.MODULE, "--learning-rate=0.5", "--depth=4"]
    env = {var["name"]: var.get("value") for var in master["env"]}
    assert json.loads(env[entrypoint.CODE_ENV])["option_style"] == "dashes"
    validate_with_crds(tmp_path, [job])


def test_an_argv_function_trains_through_the_step(team_code, tmp_path, dataset):
    result = run_locally(arguments(tmp_path, dataset, ARGV_TEAM, workers=1))
    assert result.metrics["training_metrics"]["score"] == pytest.approx(0.8)
    model = json.loads((tmp_path / "model" / "model.json").read_text())
    assert model == {"argv": ["--learning-rate=0.5", "--depth=4"], "learning_rate": 0.5, "depth": 4}
