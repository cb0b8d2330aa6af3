"""The public contracts (kfstack.contracts): names, values, reports and model directories are
checked at the edge with a message that says what is wrong."""

import json

import pytest

from kfstack import contracts
from kfstack.errors import InvalidParameterError
from kfstack.settings import katib_parameter

CODE = contracts.TrainingCode(
    entry="my_team.train:fit",
    hyperparameters={"learning_rate": "float", "depth": "int", "optimizer": "str", "shuffle": "bool"},
    metrics=("val_accuracy", "val_loss"),
)


def test_entries_are_a_module_or_a_module_function():
    assert (CODE.module, CODE.function) == ("my_team.train", "fit")
    assert contracts.TrainingCode(entry="my_team.train").function == ""
    for bad in ("", "my team.train", "my_team.train:", "my_team.train:fit:again", "a.b:1x", "-m x"):
        with pytest.raises(InvalidParameterError, match=r"package\.module"):
            contracts.TrainingCode(entry=bad)


def test_declarations_are_checked():
    with pytest.raises(InvalidParameterError, match="hyperparameter name 'learning rate'"):
        contracts.TrainingCode(entry="m", hyperparameters={"learning rate": "float"})
    with pytest.raises(InvalidParameterError, match="depth='long'"):
        contracts.TrainingCode(entry="m", hyperparameters={"depth": "long"})
    with pytest.raises(InvalidParameterError, match="metric name 'val auc'"):
        contracts.TrainingCode(entry="m", metrics=("val auc",))


def test_values_reach_argv_as_their_declared_type():
    argv = CODE.argv({"depth": 64.0, "learning_rate": 0.1, "optimizer": "adam", "shuffle": "True"})
    # The declared order, an int that kfp.local made a float, a float that reads back exactly.
    assert argv == ["--learning_rate=0.1", "--depth=64", "--optimizer=adam", "--shuffle=true"]
    assert CODE.parse_argv(argv) == {"learning_rate": 0.1, "depth": 64, "optimizer": "adam", "shuffle": True}
    assert CODE.argv({"learning_rate": 1e-05}) == ["--learning_rate=1e-05"]


def test_a_katib_trial_parameter_goes_in_as_it_is():
    assert CODE.argv({"depth": katib_parameter("depth")}) == ["--depth=${trialParameters.depth}"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"width": 3}, "width: not declared by the training code \\(declared: learning_rate, depth"),
        ({"depth": 2.5}, "depth=2.5 is not of type int"),
        ({"depth": True}, "depth=True is not of type int"),
        ({"learning_rate": "fast"}, "learning_rate='fast' is not of type float"),
        ({"learning_rate": float("nan")}, "is not of type float"),
        ({"shuffle": "yes"}, "shuffle='yes' is not of type bool"),
        ({"optimizer": "adam; rm -rf /"}, "values may hold only letters, digits"),
        ({"optimizer": "two words"}, "unquoted into a shell command"),
    ],
)
def test_bad_values_are_refused_before_anything_runs(values, message):
    with pytest.raises(InvalidParameterError, match=message):
        CODE.argv(values)


def test_argv_parsing_refuses_what_is_not_name_value():
    with pytest.raises(InvalidParameterError, match="expected --name=value"):
        CODE.parse_argv(["--depth", "3"])
    with pytest.raises(InvalidParameterError, match="not declared"):
        CODE.parse_argv(["--width=3"])


def test_the_dash_style_spells_options_as_argparse_code_names_them():
    """``option_style="dashes"``: ``learning_rate`` is ``--learning-rate=`` on argv (a Katib
    reference keeps its parameter's name), and either spelling reads back to the declared name."""
    dashes = contracts.TrainingCode(
        entry="my_team.train", hyperparameters=CODE.hyperparameters, option_style=contracts.DASHES
    )
    argv = dashes.argv({"learning_rate": 0.1, "depth": katib_parameter("depth")})
    assert argv == ["--learning-rate=0.1", "--depth=${trialParameters.depth}"]
    for spelled in (["--learning-rate=0.1"], ["--learning_rate=0.1"]):
        assert dashes.parse_argv(spelled) == CODE.parse_argv(spelled) == {"learning_rate": 0.1}
    # A module's own arguments follow its hyperparameters in the same spelling.
    assert dashes.arguments_argv({"data_dir": "/data"}) == ["--data-dir=/data"]
    assert CODE.arguments_argv({"data_dir": "/data"}) == ["--data_dir=/data"]


def test_option_styles_are_checked():
    with pytest.raises(InvalidParameterError, match=r"option_style='kebab': expected underscores or dashes"):
        contracts.TrainingCode(entry="m", option_style="kebab")
    # Two names that one option would stand for: the code could not tell them apart.
    with pytest.raises(
        InvalidParameterError, match=r"batch_size and batch-size are both written --batch-size="
    ):
        contracts.TrainingCode(
            entry="m", hyperparameters={"batch_size": "int", "batch-size": "int"}, option_style="dashes"
        )
    with pytest.raises(InvalidParameterError, match=r"data_dir and data-dir are both written --data-dir="):
        contracts.TrainingCode(
            entry="m", hyperparameters={"data_dir": "str"}, arguments={"data-dir": "x"}, option_style="dashes"
        )
    # A function's own arguments are keywords, not options: no clash there.
    contracts.TrainingCode(
        entry="m:f", hyperparameters={"data_dir": "str"}, arguments={"data-dir": "x"}, option_style="dashes"
    )


def test_an_objective_must_be_a_declared_metric():
    CODE.check_metric("val_loss", "objective_metric")
    with pytest.raises(
        InvalidParameterError, match=r"objective_metric=.auc. .*declared: val_accuracy, val_loss"
    ):
        CODE.check_metric("auc", "objective_metric")


def test_a_module_that_is_not_there_is_named(tmp_path, monkeypatch):
    assert contracts.TrainingCode(entry="json:loads").importable_problem() is None
    assert (
        contracts.TrainingCode(entry="json.no_such_part").importable_problem()
        == "no module named 'json.no_such_part'"
    )
    assert "has no function 'nope'" in contracts.TrainingCode(entry="json:nope").importable_problem()
    # A team package this process does not have: its image will tell, nothing to say here --
    # unless this interpreter is the one to run it (the embedded platform).
    assert contracts.TrainingCode(entry="no_team_package_here.train").importable_problem() is None
    assert (
        contracts.TrainingCode(entry="no_team_package_here").importable_problem(required=True)
        == "no module named 'no_team_package_here' here"
    )
    (tmp_path / "broken_team_module.py").write_text("raise RuntimeError('no GPU library')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    problem = contracts.TrainingCode(entry="broken_team_module:fit").importable_problem()
    assert problem == "module 'broken_team_module' failed to import: RuntimeError: no GPU library"


def test_spark_applications_are_a_file_or_a_module(tmp_path):
    app = tmp_path / "job.py"
    app.write_text("print('hi')\n")
    assert contracts.SparkApplicationCode(str(app)).importable_problem() is None
    assert contracts.SparkApplicationCode("local:///opt/team/job.py").importable_problem() is None
    assert (
        contracts.SparkApplicationCode(str(tmp_path / "gone.py"))
        .importable_problem()
        .startswith("no such file")
    )
    assert (
        contracts.SparkApplicationCode("json.nothing").importable_problem()
        == "no module named 'json.nothing'"
    )
    for bad in ("", "not a module", "jobs/run"):
        with pytest.raises(InvalidParameterError, match="spark_application"):
            contracts.SparkApplicationCode(bad)


def test_reports_are_json_objects_of_numbers(tmp_path):
    path = tmp_path / "report.json"
    assert contracts.read_report(str(path), "job") == {}  # optional
    path.write_text(json.dumps({"rows_read": 10, "share": 0.5}))
    assert contracts.read_report(str(path), "job") == {"rows_read": 10.0, "share": 0.5}
    path.write_text(json.dumps({"rows": "many", "ok": True, "fine": 1}))
    with pytest.raises(contracts.ContractError, match="must be finite numbers; not so: ok, rows"):
        contracts.read_report(str(path), "job")
    path.write_text("[1, 2]")
    with pytest.raises(contracts.ContractError, match="not a JSON object"):
        contracts.read_report(str(path), "job")
    path.write_text("{rows: 1")
    with pytest.raises(contracts.ContractError, match="is not JSON"):
        contracts.read_report(str(path), "job")


def test_model_directories_are_checked_against_their_format(tmp_path):
    assert (
        contracts.model_dir_problem(str(tmp_path), "custom") == "nothing was written to the model directory"
    )
    (tmp_path / "notes.txt").write_text("x")
    assert contracts.model_dir_problem(str(tmp_path), "custom") is None
    assert "exactly one .onnx file at its top" in contracts.model_dir_problem(str(tmp_path), "onnx")
    assert "exactly one .joblib/.pkl/.pickle file" in contracts.model_dir_problem(str(tmp_path), "sklearn")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "model.onnx").write_bytes(b"m")  # KServe looks at the top only
    assert "found none among ['notes.txt', 'sub/model.onnx']" in contracts.model_dir_problem(
        str(tmp_path), "onnx"
    )
    (tmp_path / "model.joblib").write_bytes(b"m")
    assert contracts.model_dir_problem(str(tmp_path), "sklearn") is None
    (tmp_path / "old.pkl").write_bytes(b"m")
    assert "found ['model.joblib', 'old.pkl']" in contracts.model_dir_problem(str(tmp_path), "sklearn")
    with pytest.raises(InvalidParameterError, match="model_format='pmml' is not one of sklearn"):
        contracts.check_model_format("pmml")


def test_a_tuning_trial_may_leave_no_model_but_what_it_leaves_is_checked(tmp_path):
    assert contracts.tuning_trial({}) == ""
    assert contracts.tuning_trial({contracts.TRIAL_ENV: "trial-003"}) == "trial-003"
    assert contracts.model_dir_problem(str(tmp_path), "onnx", trial=True) is None
    (tmp_path / "model.pt").write_bytes(b"m")
    assert "exactly one .onnx file" in contracts.model_dir_problem(str(tmp_path), "onnx", trial=True)


def test_secrets_are_passed_by_name():
    assert contracts.check_secret_names(["team-db", "feature.store"], "env_secrets") == (
        "team-db",
        "feature.store",
    )
    with pytest.raises(InvalidParameterError, match="'password=hunter2' is not a Secret name"):
        contracts.check_secret_names(["password=hunter2"], "env_secrets")


def test_location_variables_leave_the_unset_ones_out():
    assert contracts.locations_env(input_uri="s3://b/in", model_dir="") == {"KFSTACK_INPUT_URI": "s3://b/in"}
