"""The generic tuning step: any declared hyperparameters and metric, Katib's semantics locally.

Unit: the spec checked against the code's declaration before anything runs, the Experiment
whose trial is the training step's job. Local: real trials of a team's function through the
training step's replicas, and the component under kfp.local handing typed values to training.
"""

import json

import pytest

from kfstack.components.tuning.hyperparameter_tuning.stage import BEST, STAGE
from kfstack.errors import InvalidParameterError, TuningFailedError
from kfstack.kubernetes.naming import RunContext
from tests.frameworks import needs_torch
from tests.kfp_local import logged as logged_metrics
from tests.kfp_local import run_pipeline, task_outputs
from tests.upstream_crds import validate_with_crds

TEAM = {
    "training_code": "plain_tunable:fit",
    "hyperparameter_types": {"depth": "int", "learning_rate": "float", "optimizer": "str", "epochs": "int"},
    "hyperparameters": {"depth": 2, "learning_rate": 0.1},
    "metric_names": ["score", "loss"],
}
SPACE = {
    "depth": {"type": "int", "min": 5, "max": 6},
    "optimizer": {"type": "categorical", "values": ["sgd", "adam"]},
}


def arguments(tmp_path, dataset, **overrides):
    return {
        "platform": "local",
        "data": dataset,
        "tuning_trials": str(tmp_path / "trials"),
        **TEAM,
        "tuning_search_space": json.dumps(SPACE),
        "tuning_objective": "score",
        "tuning_direction": "maximize",
        "tuning_algorithm": "grid",
        "tuning_max_trials": 4,
        "tuning_parallel_trials": 1,
        "tuning_trial_epochs": 3,
        "tuning_early_stopping": "none",
        "workers": 1,
        "max_restarts": 0,
        **overrides,
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"tuning_objective": "auc"}, r"tuning_objective='auc' is not a metric the training code declares"),
        (
            {"tuning_search_space": json.dumps({"width": {"type": "int", "min": 1, "max": 3}})},
            r"declares no hyperparameter 'width'; declared: depth, learning_rate, optimizer, epochs",
        ),
        (
            {"tuning_search_space": json.dumps({"depth": {"type": "double", "min": 1, "max": 3}})},
            r"depth is declared int, searched as int or discrete",
        ),
        (
            {"tuning_search_space": json.dumps({"depth": {"type": "discrete", "values": [2, 2.5]}})},
            r"depth is declared int, so its values are whole numbers",
        ),
        (
            {"tuning_search_space": json.dumps({"optimizer": {"type": "categorical", "values": ["a b"]}})},
            r"unquoted into a shell command",
        ),
        ({"tuning_goal": float("inf")}, r"tuning_goal=inf must be a finite number"),
        ({"hyperparameters": {"depth": "two"}}, r"depth='two' is not of type int"),
    ],
)
def test_a_spec_the_code_cannot_run_is_refused_before_anything_starts(
    team_code, tmp_path, dataset, overrides, message
):
    with pytest.raises(InvalidParameterError, match=message):
        STAGE.settings(arguments(tmp_path, dataset, **overrides))


def experiment_on_kubernetes(tmp_path, context=None, **overrides) -> dict:
    """The Experiment the step builds for a cluster run (input and trials in the object store)."""
    settings = STAGE.settings(
        arguments(
            tmp_path,
            "minio://bucket/data",
            platform="kubernetes",
            tuning_trials="minio://bucket/run/tune/tuning_trials",
            training_api="v1",
            **overrides,
        )
    )
    [variant] = STAGE.variants(settings)
    [experiment] = STAGE.build(variant.settings, context or RunContext("run-1", "hyperparameter-tuning"))
    return experiment


def test_the_experiments_trial_is_the_training_steps_job(team_code, tmp_path):
    experiment = experiment_on_kubernetes(
        tmp_path, tuning_algorithm="tpe", tuning_early_stopping="medianstop"
    )
    spec = experiment["spec"]
    assert spec["objective"]["objectiveMetricName"] == "score"
    assert spec["objective"]["additionalMetricNames"] == ["loss"]
    assert {p["name"] for p in spec["parameters"]} == {"depth", "optimizer"}
    job = spec["trialTemplate"]["trialSpec"]
    assert job["kind"] == "PyTorchJob"
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    # Tuned values are Katib references; the rest are the run's; epochs is the trial's.
    assert (
        master["args"]
        if "args" in master
        else master["command"][-4:]
        == [
            "--depth=${trialParameters.depth}",
            "--learning_rate=0.1",
            "--optimizer=${trialParameters.optimizer}",
            "--epochs=3",
        ]
    )
    env = {var["name"]: var.get("value") for var in master["env"]}
    assert (
        env["KFSTACK_MODEL_URI"] == "s3://bucket/run/tune/tuning_trials/${trialParameters.trial_name}/model"
    )
    # The replicas know they train a trial, by the name Katib substitutes (its model is not kept).
    assert env["KFSTACK_TRIAL"] == "${trialParameters.trial_name}"
    # Katib names the trial's job (the trial's name); its CRD wants one.
    validate_with_crds(
        tmp_path, [{**job, "metadata": {**job["metadata"], "name": "kfs-tune-trial-abcdefgh"}}]
    )


def test_a_tracked_tuning_tasks_trials_each_make_their_run_under_its_run(team_code, tmp_path):
    """Katib builds every trial's pods from one template: it names the tuning task's run as the
    parent, and each trial's chief makes its own run under it (no MLFLOW_RUN_ID to share)."""
    from kfstack.tracking.cluster import TaskTracking

    tracking = TaskTracking("http://mlflow.mlflow:5000", "tuning-run-3", made_here=True, secret="mlflow-keys")
    experiment = experiment_on_kubernetes(
        tmp_path, RunContext("run-1", "hyperparameter-tuning", tracking=tracking), tuning_algorithm="tpe"
    )
    job = experiment["spec"]["trialTemplate"]["trialSpec"]
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    env = {var["name"]: var for var in master["env"]}
    assert env["KFSTACK_MLFLOW_PARENT_RUN_ID"]["value"] == "tuning-run-3" and "MLFLOW_RUN_ID" not in env
    assert env["MLFLOW_TRACKING_URI"]["value"] == "http://mlflow.mlflow:5000"
    assert env["KFSTACK_TRIAL"]["value"] == "${trialParameters.trial_name}"  # the trial's run's name
    assert env["MLFLOW_TRACKING_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "mlflow-keys"
    validate_with_crds(
        tmp_path, [{**job, "metadata": {**job["metadata"], "name": "kfs-tune-trial-abcdefgh"}}]
    )


def test_the_codes_own_arguments_ride_in_its_declaration_never_on_the_trials_shell_line(team_code, tmp_path):
    """Katib joins a trial's arguments unquoted into ``sh -c``; the code's own arguments (its
    locations, which may hold a space) travel in the declaration's environment variable and are
    expanded in the replica, so no shell ever sees them."""
    experiment = experiment_on_kubernetes(tmp_path, code_arguments={"data_dir": "$KFSTACK_INPUT_DIR"})
    job = experiment["spec"]["trialTemplate"]["trialSpec"]
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    line = " ".join([*master.get("command", []), *master.get("args", [])])
    assert "--depth=${trialParameters.depth}" in line
    assert "data_dir" not in line and "KFSTACK_INPUT_DIR" not in line
    env = {var["name"]: var.get("value") for var in master["env"]}
    assert json.loads(env["KFSTACK_TRAINING_CODE"])["arguments"] == {"data_dir": "$KFSTACK_INPUT_DIR"}


# A team's main(argv=None, *, data_dir, model_dir) around argparse, options spelled with dashes.
ARGV_TEAM = {
    "training_code": "argv_tunable:main",
    "hyperparameter_types": {"learning_rate": "float", "depth": "int", "epochs": "int"},
    "hyperparameters": {"learning_rate": 0.1, "depth": 2},
    "metric_names": ["score"],
    "code_arguments": {"data_dir": "$KFSTACK_INPUT_DIR", "model_dir": "$KFSTACK_MODEL_DIR"},
    "option_style": "dashes",
}


def test_the_trial_template_spells_the_options_as_the_code_does(team_code, tmp_path):
    """Katib substitutes each trial's value into an option spelled as the code's argparse names
    it; the reference keeps the parameter's own name."""
    space = json.dumps({"depth": SPACE["depth"]})
    experiment = experiment_on_kubernetes(
        tmp_path, **ARGV_TEAM, tuning_search_space=space, tuning_algorithm="tpe"
    )
    job = experiment["spec"]["trialTemplate"]["trialSpec"]
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert master["command"][-3:] == ["--learning-rate=0.1", "--depth=${trialParameters.depth}", "--epochs=3"]
    env = {var["name"]: var.get("value") for var in master["env"]}
    assert json.loads(env["KFSTACK_TRAINING_CODE"])["option_style"] == "dashes"


def test_embedded_trials_call_an_argv_function_as_it_is(team_code, tmp_path, dataset):
    """Each trial runs ``main([--learning-rate=0.1, --depth=N, --epochs=3], data_dir=...,
    model_dir=...)`` through the training step's replicas: no adapter of the team's."""
    settings = STAGE.settings(
        arguments(
            tmp_path,
            dataset,
            **ARGV_TEAM,
            tuning_search_space=json.dumps({"depth": SPACE["depth"]}),
            tuning_max_trials=2,
        )
    )
    result = STAGE.run_local(STAGE.variants(settings)[0].settings)
    assert result.outputs[BEST] == {"depth": 6, "learning_rate": 0.1}
    assert result.metrics["tuning_metrics"]["trials_succeeded"] == 2
    models = sorted((tmp_path / "trials").glob("*/model/model.json"))
    assert sorted(json.loads(path.read_text())["argv"] for path in models) == [
        ["--learning-rate=0.1", f"--depth={depth}", "--epochs=3"] for depth in (5, 6)
    ]


@pytest.mark.slow
def test_grid_tuning_of_a_team_function_finds_its_best(team_code, tmp_path, dataset):
    settings = STAGE.settings(arguments(tmp_path, dataset))
    result = STAGE.run_local(STAGE.variants(settings)[0].settings)
    # The grid visits all 4 combinations; the score peaks at depth 6 with adam.
    assert result.outputs[BEST] == {"depth": 6, "learning_rate": 0.1, "optimizer": "adam"}
    assert isinstance(result.outputs[BEST]["depth"], int)
    metrics = result.metrics["tuning_metrics"]
    assert metrics["trials_run"] == 4 and metrics["trials_succeeded"] == 4
    assert metrics["best_score"] == pytest.approx(1.0)
    assert "depth" in result.documents["tuning_report"]


@pytest.mark.slow  # the training step's S3 test runs in the default suite
def test_with_uri_locations_every_trial_reads_and_checkpoints_through_the_object_store(
    team_code, tmp_path, dataset, monkeypatch
):
    """Under ``KFSTACK_URI_LOCATIONS=1`` one S3 server on loopback serves the step: each trial's
    code is told ``s3://`` URIs, and each trial's checkpoints come back to its own folder."""
    from kfstack.uris import URI_LOCATIONS_ENV

    monkeypatch.setenv(URI_LOCATIONS_ENV, "1")
    team = {
        "training_code": "object_store_team:train",
        "hyperparameter_types": {"epochs": "int", "scale": "float"},
        "hyperparameters": {"scale": 1.0},
        "metric_names": ["loss"],
    }
    space = {"scale": {"type": "discrete", "values": [2.0, 1.0]}}
    overrides = {**team, "tuning_search_space": json.dumps(space), "tuning_objective": "loss"}
    overrides.update(tuning_direction="minimize", tuning_max_trials=2, tuning_trial_epochs=1)
    settings = STAGE.settings(arguments(tmp_path, dataset, **overrides))
    result = STAGE.run_local(STAGE.variants(settings)[0].settings)
    assert result.outputs[BEST]["scale"] == 1.0
    checkpoints = sorted((tmp_path / "trials").glob("*/logs/checkpoints/epoch-1.json"))
    assert len(checkpoints) == 2
    for path in checkpoints:
        assert json.loads(path.read_text())["input"] == f"s3://kfstack-embedded{dataset}"


@needs_torch  # its trials run under torchrun (framework pytorch)
def test_a_trial_that_never_prints_the_objective_is_named(team_code, tmp_path, dataset):
    team = {**TEAM, "metric_names": ["score", "val_auc"]}
    settings = STAGE.settings(
        arguments(
            tmp_path,
            dataset,
            **team,
            tuning_objective="val_auc",
            tuning_max_trials=2,
            tuning_max_failed_trials=1,
        )
    )
    with pytest.raises(TuningFailedError) as failed:
        STAGE.run_local(STAGE.variants(settings)[0].settings)
    [trial, *_] = failed.value.result.trials
    assert trial.status == "MetricsUnavailable" and "never printed val_auc=<value>" in trial.message


def test_tuning_off_hands_the_runs_values_on_typed(team_code, tmp_path, dataset):
    settings = STAGE.settings(
        arguments(tmp_path, dataset, tune=False, hyperparameters={"depth": 4.0, "learning_rate": 1})
    )
    result = STAGE.run_local(STAGE.variants(settings)[0].settings)
    assert result.outputs[BEST] == {"depth": 4, "learning_rate": 1.0}
    assert not (tmp_path / "trials").exists()


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@needs_torch  # its trials run under torchrun (framework pytorch)
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_the_component_runs_under_kfp_local(team_code, tmp_path, dataset):
    from kfp import dsl

    from kfstack.components.tuning.hyperparameter_tuning.component import hyperparameter_tuning

    given = {
        name: value
        for name, value in arguments(tmp_path, dataset).items()
        if name not in ("data", "tuning_trials", "tuning_search_space", "tuning_max_trials")
    }

    @dsl.pipeline(name="team-tuning")
    def team_tuning():
        data = dsl.importer(artifact_uri=dataset, artifact_class=dsl.Dataset)
        hyperparameter_tuning(
            data=data.output,
            tuning_search_space=json.dumps({"depth": SPACE["depth"]}),
            tuning_max_trials=2,
            **given,
        )

    run = run_pipeline(team_tuning, tmp_path / "root")
    outputs = task_outputs(run, "hyperparameter-tuning")
    # The grid's two trials (depth 5 and 6); the best handed on with the run's other values.
    assert outputs["parameterValues"]["best_hyperparameters"] == {"depth": 6, "learning_rate": 0.1}
    logged = logged_metrics(run, "hyperparameter-tuning", "tuning_metrics")
    assert logged["trials_run"] == 2 and logged["trials_succeeded"] == 2
    assert "depth" in (run / "hyperparameter-tuning" / "tuning_report").read_text()
