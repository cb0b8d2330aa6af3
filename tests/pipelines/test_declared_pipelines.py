"""The declarative layer (``TrainingPipeline``): the pipelines declared on it run exactly as they
ran when written by hand (golden/, tests/pipelines/declared_pipelines.py), every parameter it adds
is a catalog setting at its catalog default, and a bad declaration is refused when the module
loads. A pipeline of another shape stays a plain ``@dsl.pipeline`` over the same components.

(No ``from __future__ import annotations``: KFP reads the plain pipeline's annotations as types.)"""

import dataclasses
import json
import sys

import pytest
from kfp import dsl

from kfstack.api.pipeline import (
    RUN_ID,
    TASK_NAME,
    Evaluation,
    Parameter,
    Predictor,
    SparkApplication,
    Training,
    TrainingPipeline,
    call,
    distributed_training,
    guarded,
    model_evaluation,
    on_cluster,
    spark_job,
)
from kfstack.errors import InvalidParameterError
from kfstack.pipelines.parameters import CATALOG
from kfstack.pipelines.run_form import version_function
from kfstack.pipelines.validate_run import settings_read
from tests.pipelines.declared_pipelines import cases, golden_path, resolved
from tests.pipelines.resolved_spec import compile_pipeline, resolved_tasks

CASES = dict(cases())


# digits, flights and one template variant by default; the other variants differ in their framework and
# task only, and compile a generated project each.
@pytest.mark.parametrize(
    "name",
    [
        name
        if name in ("digits-training", "flights-training", "flights-retraining", "template-pytorch-binary")
        else pytest.param(name, marks=pytest.mark.slow)
        for name in sorted(CASES)
    ],
)
def test_a_declared_pipeline_runs_as_it_did_when_written_by_hand(name):
    """Its version as ``kfstack compile`` writes it (the run form, the settings compiled in at
    their defaults) resolves task for task to the values the hand-written pipeline's did. By
    design each step that takes a setting also takes the run's ``settings_overrides`` (empty
    here), or the part of them its component reads, from the run's check; and the evaluation's
    ``threshold`` input is named ``decision_threshold``, as the setting a binary pipeline gives
    it."""
    golden = json.loads(golden_path(name).read_text())
    with CASES[name]() as function:
        now = resolved(version_function(function))
        declared = function.pipeline_func.parameters
    assert sorted(now) == sorted(golden), "the same tasks"
    for task, before in golden.items():
        after = now[task]
        # By design since: every task pod has the tracking server's credentials too (optional).
        tracking = [
            secret
            for secret in after["pod"].get("secretAsEnv", [])
            if secret.get("secretNameParameter") == "kfp-mlflow-credentials"
        ]
        assert len(tracking) == 1 and tracking[0]["optional"], task
        after["pod"]["secretAsEnv"].remove(tracking[0])
        # A step takes its part of the run's overrides from the check (validate-parameters), by
        # design: the one upstream task it gained (its condition's group's, within one).
        part = f"<validate-parameters.{after['component'].replace('-', '_')}_overrides>"
        takes_part = after["inputs"].get("settings_overrides") == part
        gained = sorted({*before["after"], "validate-parameters"})
        assert {k: after[k] for k in ("component", "exit", "pod")} == {
            k: before[k] for k in ("component", "exit", "pod")
        }, task
        assert after["after"] in ((before["after"], gained) if takes_part else (before["after"],)), task
        assert after["when"] == before.get("when", []), task  # the golden views before conditions had none
        inputs = dict(after["inputs"])
        reads_times = task == "data-window"
        # Inputs the components gained since (the run's overrides, the code's own arguments, how
        # its options are spelled, where its jobs are tracked; the run and task a tracked task's
        # MLflow run is found by, what started the run and how it ended), each empty, at its
        # default or KFP's placeholder here.
        for added, unchanged in (
            ("settings_overrides", part if takes_part else {}),
            ("code_arguments", {}),
            ("option_style", "underscores"),
            ("tracking_uri", ""),
            ("tracking_secret", "kfp-mlflow-credentials"),
            ("run_id", dsl.PIPELINE_JOB_ID_PLACEHOLDER),
            ("task_name", dsl.PIPELINE_TASK_NAME_PLACEHOLDER),
            # (the data window reads the run's times; the check gets them from kfstack compile)
            ("scheduled_time", dsl.PIPELINE_JOB_SCHEDULE_TIME_UTC_PLACEHOLDER if reads_times else ""),
            ("created_time", dsl.PIPELINE_JOB_CREATE_TIME_UTC_PLACEHOLDER if reads_times else ""),
            ("status", "<final status>"),
        ):
            if added in inputs:
                assert inputs.pop(added) == unchanged, task
                before["inputs"].pop(added, None)
        if name.startswith("template-") and isinstance(inputs.get("hyperparameters"), dict):
            # By design: the template's train() declares seed in its signature, a run-form field now,
            # at the code's default (the value the code took when the page left it out).
            assert inputs["hyperparameters"].pop("seed") == 7
        if name == "digits-training" and task in ("tuning", "training"):
            # By design: every hyperparameter of the trainer's signature is a run-form field now.
            # The two it did not declare before (learning_rate, seed) and the one it declared but
            # left to the code (batch_size) go in at the code's defaults: the values it took.
            for undeclared in ("learning_rate", "seed"):
                inputs["hyperparameter_types"].pop(undeclared)
            if isinstance(inputs["hyperparameters"], dict):  # the run's values (tuning's start)
                code_defaults = {"learning_rate": 0.003, "seed": 7, "batch_size": 64}
                assert {k: inputs["hyperparameters"].pop(k) for k in code_defaults} == code_defaults
        if "threshold" in before["inputs"]:  # the evaluation's threshold has its setting's name now
            before["inputs"]["decision_threshold"] = before["inputs"].pop("threshold")
        if name == "flights-retraining" and task == "champion-challenger":
            # Fixed by design: the hand-written gate took the trainers' batch_size (1024, a
            # hyperparameter) as its rows per request by a name clash; a step never takes a
            # hyperparameter now, and the gate sends the evaluation's (its default).
            assert (before["inputs"]["batch_size"], inputs["batch_size"]) == (1024.0, 512.0)
            before["inputs"]["batch_size"] = inputs["batch_size"]
        if task != "validate-parameters":
            assert inputs == before["inputs"], task
            continue
        # The run's check sees every parameter: those it saw, with the same values, and the
        # catalog's settings the declaration adds, each at the value the tasks that take it
        # resolve anyway (a tuning objective the hand-written pipeline gave its step), else at
        # the catalog's default.
        checked, was = inputs.pop("parameters"), before["inputs"].pop("parameters")
        # And which of them each step's component reads: the parts of the overrides it hands on.
        assert inputs.pop("settings_read") == settings_read(declared.names)
        assert inputs == before["inputs"]
        assert {k: checked[k] for k in was} == was
        # By design (above): the hyperparameters of the code's signature the page left out.
        signature_only = {"digits-training": {"learning_rate", "seed", "batch_size"}}.get(
            name, {"seed"} if name.startswith("template-") else set()
        )
        for added in set(checked) - set(was):
            if added in signature_only:
                assert checked[added] == declared[added].default  # its run-form field, above
                continue
            assert added in CATALOG, added
            resolved_anyway = {
                json.dumps(t["inputs"][added]) for t in golden.values() if added in t["inputs"]
            } or {json.dumps(CATALOG[added].default)}
            assert resolved_anyway == {json.dumps(checked[added])}, added
            assert checked[added] == declared[added].default, added


def _declaration(**changes) -> TrainingPipeline:
    fields = {
        "name": "churn-training",
        "description": "Churn.",
        "data": SparkApplication("churn.prepare", arguments=["--rows={rows}"]),
        "parameters": [Parameter("rows", int, 100, "Rows kept.", ge=1)],
        "training": Training(
            "churn.train",  # a module run as ``python -m``: the declaration writes its hyperparameters
            metrics=("val_accuracy",),
            hyperparameters=[Parameter("epochs", int, 3, "Epochs.", ge=1)],
        ),
        "evaluation": Evaluation(label="churned", task="binary"),
    }
    return TrainingPipeline(**{**fields, **changes})


def test_the_parameters_follow_from_the_declaration():
    declaration = _declaration(defaults={"workers": 3}, descriptions={"workers": "Ranks."})
    parameters = declaration.parameter_set()
    # Per run, the data first (its input, the pipeline's own), then the hyperparameters, typed as
    # the code declares them.
    assert [p.name for p in parameters.ordered()][:3] == ["input_uri", "rows", "epochs"]
    assert parameters["epochs"].type is int and parameters["epochs"].bounds == {"ge": 1}
    assert parameters["workers"].default == 3 and parameters["workers"].description == "Ranks."
    # Without tuning there is no tuning setting, nor ``tune``; what the declaration fixes
    # (framework, model format, the code) is no parameter either.
    assert not [name for name in parameters.names if name.startswith("tuning") or name == "tune"]
    assert {"framework", "training_code", "spark_application"}.isdisjoint(parameters.names)
    assert {"platform", "object_store_secret", "launch_namespace", "gpu_pool", "deploy"} <= set(
        parameters.names
    )


def test_without_tuning_or_deployment_the_steps_follow_the_declaration():
    tasks = resolved_tasks(*compile_pipeline(_declaration(deploy=False).pipeline()))
    assert sorted(tasks) == ["cleanup", "evaluation", "spark-job", "training", "validate-parameters"]
    # Training takes the run's values, and the data step its argument from the parameter.
    assert tasks["training"]["inputs"]["hyperparameters"] == {"epochs": 3}
    assert tasks["spark-job"]["inputs"]["spark_arguments"] == ["--rows=100"]
    arguments = {"epochs": 5, "rows": 7, "workers": 4}
    changed = resolved_tasks(*compile_pipeline(_declaration(deploy=False).pipeline(), arguments))
    assert changed["training"]["inputs"]["hyperparameters"] == {"epochs": 5}
    assert changed["training"]["inputs"]["workers"] == 4
    assert changed["spark-job"]["inputs"]["spark_arguments"] == ["--rows=7"]


@pytest.mark.parametrize(
    ("changes", "refused"),
    [
        (
            {
                "training": Training(
                    "churn.train",
                    metrics=("val_accuracy",),
                    hyperparameters=[Parameter("depth", ge=1)],
                )
            },
            "churn.train takes its hyperparameters on argv.*give depth a type and a default",
        ),
        ({"defaults": {"tuning_max_trials": 4}}, "settings this pipeline has not: tuning_max_trials"),
        ({"descriptions": {"no_such_setting": "x"}}, "settings this pipeline has not: no_such_setting"),
        (
            {"data": SparkApplication("churn.prepare", arguments=["--since={since}"])},
            "name no parameter.*: since",
        ),
        (
            {"predictor": Predictor("churn.serve:Model")},
            "a Predictor serves training model_format custom, not onnx",
        ),
    ],
)
def test_a_bad_declaration_is_refused_naming_what_is_wrong(changes, refused):
    with pytest.raises(InvalidParameterError, match=refused):
        _declaration(**changes)


def test_a_tuning_objective_must_be_one_of_the_metrics():
    from kfstack.api.pipeline import Tuning

    training = Training(
        "churn.train",
        metrics=("val_accuracy",),
        hyperparameters=[Parameter("epochs", int, 3, "Epochs.", ge=1, search=(1, 4))],
    )
    tuning = Tuning(objective="val_loss")
    with pytest.raises(InvalidParameterError, match="tuning objective val_loss is not one of the metrics"):
        _declaration(training=training, tuning=tuning)
    # The metric the code prints is accepted.
    accepted = _declaration(training=training, tuning=dataclasses.replace(tuning, objective="val_accuracy"))
    assert accepted.tuning.objective == ("val_accuracy")


def test_a_pipeline_of_another_shape_is_a_plain_dsl_pipeline_with_the_same_frame():
    """docs/pipelines.md's example: no tuning, no deployment, two evaluations. ``guarded`` and
    ``on_cluster`` give it the run's check, the cleanup exit handler and the task pods' settings
    (the object-store Secret, the CPU pool) without the declarative layer."""
    parameters = CATALOG.take("platform", "workers", "object_store_secret", "launch_namespace")

    @dsl.pipeline(name="two-evaluations")
    def two_evaluations(
        platform: str = "kubernetes",
        workers: int = 2,
        object_store_secret: str = "kfstack-object-store",
        launch_namespace: str = "",
    ):
        values = {
            p.name: value
            for p, value in zip(
                parameters, (platform, workers, object_store_secret, launch_namespace), strict=True
            )
        }
        job = {"run_id": RUN_ID, "task_name": TASK_NAME}
        with guarded("two-evaluations", values) as checked:
            data = on_cluster(
                call(spark_job, values, **job, spark_application="team.prepare").after(checked),
                values,
                "data",
            )
            training = call(
                distributed_training,
                values,
                **job,
                data=data.outputs["output"],
                training_code="team.train:train",
                hyperparameter_types={"epochs": "int"},
                metric_names=["val_accuracy"],
                model_format="onnx",
            )
            model = on_cluster(training, values, "training").outputs["model"]
            for split in ("validation", "test"):
                evaluation = model_evaluation(
                    model=model,
                    dataset=data.outputs["output"],
                    dataset_split=split,
                    label_column="y",
                    task="binary",
                )
                on_cluster(evaluation, values, f"evaluation-{split}")

    tasks = resolved_tasks(*compile_pipeline(two_evaluations))
    assert sorted(tasks) == [
        "cleanup",
        "data",
        "evaluation-test",
        "evaluation-validation",
        "training",
        "validate-parameters",
    ]
    assert tasks["cleanup"]["exit"] and tasks["data"]["after"] == ["validate-parameters"]
    assert tasks["validate-parameters"]["inputs"]["parameters"]["workers"] == 2
    for name in ("data", "training", "evaluation-test"):
        (secret,) = tasks[name]["pod"]["secretAsEnv"]
        assert secret["secretNameParameter"] == "kfstack-object-store", name
        assert tasks[name]["pod"]["nodeSelector"] == {"nodeSelectorJson": {"kfstack.dev/pool": "cpu"}}, name


def test_the_declaration_in_docs_pipelines_md_compiles(tmp_path, monkeypatch, request):
    """What a team copies from the docs works as written, over training code of the signature
    its comment shows."""
    import re

    from kfp import compiler

    from tests.conftest import REPO_ROOT

    page = (REPO_ROOT / "docs" / "pipelines.md").read_text()
    block = re.search(r"## A training pipeline, declared.*?```python\n(.*?)```", page, re.S)
    assert block, "the declared example in docs/pipelines.md"
    signature = re.search(r"# (def train\(.*?\) -> None)", block.group(1))
    assert signature, "the example shows the training function's signature"
    (tmp_path / "churn").mkdir()
    (tmp_path / "churn" / "__init__.py").write_text("")
    (tmp_path / "churn" / "train.py").write_text(f"{signature.group(1)}:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    # Reading the signature imports the package (not the module): gone again after the test.
    request.addfinalizer(
        lambda: [sys.modules.pop(name) for name in list(sys.modules) if name.split(".")[0] == "churn"]
    )
    namespace: dict = {}
    exec(compile(block.group(1), "docs/pipelines.md", "exec"), namespace)
    compiler.Compiler().compile(namespace["churn_training"], str(tmp_path / "churn.yaml"))
    tasks = resolved_tasks(*compile_pipeline(namespace["churn_training"]))
    assert tasks["spark-job"]["inputs"]["spark_arguments"] == ["--since=2026-01-01"]
    assert tasks["training"]["inputs"]["workers"] == 4
    assert json.loads(tasks["tuning"]["inputs"]["tuning_search_space"]) == {
        "learning_rate": {"type": "double", "min": 1e-4, "max": 0.1}
    }


@pytest.mark.parametrize(
    ("task", "words"),
    [
        ("binary", "canary's AUC is lower than the stable's"),
        ("multiclass", "canary's accuracy is lower than the stable's"),
        ("regression", "canary's RMSE is higher than the stable's by more than this share of it"),
    ],
)
def test_the_canarys_quality_setting_is_worded_for_the_task(task, words):
    """describe and the run form say which metric decides and which way (an RMSE is worse when
    higher), unless the declaration words it itself."""
    parameters = _declaration(evaluation=Evaluation(label="y", task=task)).parameter_set()
    assert words in parameters["canary_max_quality_drop"].description
    own = _declaration(descriptions={"canary_max_quality_drop": "Ours."}).parameter_set()
    assert own["canary_max_quality_drop"].description == "Ours."
