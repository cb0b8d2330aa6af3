"""Environment files (kfstack.pipelines.environments): what they may say, how a bad one is
refused before anything is written, and the defaults they compile into a pipeline spec."""

from __future__ import annotations

import pathlib

import pytest

from kfstack.errors import InvalidParameterError, UsageError
from kfstack.pipelines import environments, load_pipeline
from kfstack.pipelines.rendering import compiled_spec

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
TYPES = {"gpu_pool": "String", "workers": "Integer", "sample_fraction": "Float", "tune": "Boolean"}


def write(tmp_path, text: str, name: str = "staging.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_shared_and_per_pipeline_defaults_the_pipelines_own_win(tmp_path):
    path = write(
        tmp_path,
        "parameters:\n  gpu_pool: h100\n  workers: 4\n  drift_max_psi: 0.3\n"
        "pipelines:\n  flights-training:\n    workers: 8\n",
    )
    environment = environments.load_environment(path)
    assert environment.name == "staging"
    # drift_max_psi is not this pipeline's: left out, not refused (another pipeline takes it).
    assert environment.defaults_for("flights-training", TYPES) == {"gpu_pool": "h100", "workers": 8}
    assert environment.defaults_for("digits-training", TYPES) == {"gpu_pool": "h100", "workers": 4}


def test_an_overlay_name_finds_the_file_beside_the_overlay(tmp_path):
    overlay = tmp_path / "manifests" / "overlays" / "prod"
    overlay.mkdir(parents=True)
    (overlay / environments.FILE_NAME).write_text("parameters:\n  gpu_pool: h100\n", encoding="utf-8")
    environment = environments.load_environment("prod", root=str(tmp_path))
    assert environment.name == "prod" and environment.shared == {"gpu_pool": "h100"}
    # Named by its path, it is still the overlay's environment.
    assert environments.load_environment(str(overlay / environments.FILE_NAME)).name == "prod"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- gpu_pool\n", "expected a mapping"),
        ("parameter:\n  gpu_pool: h100\n", "unknown key parameter .*'service_account'"),
        ("parameters: [gpu_pool]\n", "'parameters' must map parameter names to values"),
        ("parameters:\n  gpu_pool: [h100]\n", "parameters.gpu_pool must be a number, a boolean or a text"),
        ("pipelines: [a]\n", "'pipelines' must map pipeline names"),
        ("parameters: {gpu_pool: h100\n", "not YAML"),
    ],
)
def test_a_malformed_file_is_refused_naming_what_is_wrong(tmp_path, text, message):
    with pytest.raises(UsageError, match=message):
        environments.load_environment(write(tmp_path, text))


def test_the_service_account_runs_run_as_is_no_parameter(tmp_path):
    environment = environments.load_environment(
        write(tmp_path, "service_account: kfstack-runner\nparameters:\n  gpu_pool: h100\n")
    )
    assert environment.service_account == "kfstack-runner"
    dotted = write(tmp_path, "service_account: team.kfstack-runner\n", "dotted.yaml")
    assert environments.load_environment(dotted).service_account == "team.kfstack-runner"
    assert environment.shared == {"gpu_pool": "h100"}  # not a default of any pipeline's parameter
    assert (
        environments.load_environment(write(tmp_path, "parameters: {}\n", "plain.yaml")).service_account
        is None
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("Team_Runner", r"service_account 'Team_Runner': not a Kubernetes service account name"),
        ("-runner", r"service_account '-runner': not a Kubernetes service account name"),
        # Each part between dots a DNS label: no empty one, none ending in '-'.
        ("team..runner", r"service_account 'team\.\.runner': not a Kubernetes service account name"),
        ("team-.runner", r"service_account 'team-\.runner': not a Kubernetes service account name"),
        ("runner.", r"service_account 'runner\.': not a Kubernetes service account name"),
        ("''", r"service_account '': not a Kubernetes service account name"),
        ("7", r"service_account 7: not a Kubernetes service account name"),
        ("[kfstack-runner]", r"service_account \['kfstack-runner'\]: not a Kubernetes service account"),
    ],
)
def test_a_service_account_kubernetes_would_refuse_is_refused_naming_the_file(tmp_path, value, message):
    with pytest.raises(UsageError, match=r"staging\.yaml: " + message):
        environments.load_environment(write(tmp_path, f"service_account: {value}\n"))


def test_a_missing_environment_says_where_it_looked(tmp_path):
    with pytest.raises(
        UsageError, match=r"no environment 'qa': neither a file nor .*overlays/qa/pipeline-parameters\.yaml"
    ):
        environments.load_environment("qa", root=str(tmp_path))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ("workers: two", r"workers='two': expected Integer"),
        ("workers: true", r"workers=True: expected Integer"),
        ("tune: 1", r"tune=1: expected Boolean"),
        ("gpu_pool: 100", r"gpu_pool=100: expected String \(quote a text"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused(tmp_path, values, message):
    environment = environments.load_environment(write(tmp_path, f"parameters:\n  {values}\n"))
    with pytest.raises(UsageError, match=message):
        environment.defaults_for("flights-training", TYPES)


def test_a_whole_number_is_a_float_parameters_value(tmp_path):
    environment = environments.load_environment(write(tmp_path, "parameters:\n  sample_fraction: 1\n"))
    assert environment.defaults_for("p", TYPES) == {"sample_fraction": 1}


def test_a_parameter_no_pipeline_takes_is_refused_as_a_likely_typo(tmp_path):
    environment = environments.load_environment(write(tmp_path, "parameters:\n  gpu_pol: h100\n"))
    with pytest.raises(UsageError, match="no pipeline takes the parameter gpu_pol"):
        environments.pipeline_defaults(environment, ["flights-training"])
    # A pipeline section naming a parameter its pipeline does not take, likewise.
    environment = environments.load_environment(
        write(tmp_path, "pipelines:\n  flights-training:\n    drift_max_psi: 0.3\n", "other.yaml")
    )
    with pytest.raises(UsageError, match=r"pipelines\.flights-training: no parameter drift_max_psi"):
        environments.pipeline_defaults(environment, ["flights-training"])


def test_a_parameter_another_installed_pipeline_takes_is_not_a_typo(tmp_path):
    # num_shards is the flights pipelines' (not the catalog's): compiling digits alone keeps it.
    environment = environments.load_environment(write(tmp_path, "parameters:\n  num_shards: 8\n"))
    assert (
        "num_shards"
        not in environments.pipeline_defaults(environment, ["digits-training"])["digits-training"]
    )
    assert (
        environments.pipeline_defaults(environment, ["flights-training"])["flights-training"]["num_shards"]
        == 8
    )


def test_a_section_for_a_pipeline_that_is_not_installed_is_refused(tmp_path):
    environment = environments.load_environment(
        write(tmp_path, "pipelines:\n  flights-retrainng:\n    gate_margin: 0.01\n")
    )
    with pytest.raises(UsageError, match="no pipeline named flights-retrainng is installed"):
        environments.pipeline_defaults(environment, ["flights-training"])


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
def test_a_number_that_is_not_finite_is_refused(tmp_path, value):
    with pytest.raises(UsageError, match=r"gate_margin=.*: expected a finite number"):
        environments.load_environment(write(tmp_path, f"parameters:\n  gate_margin: {value}\n"))


def test_a_range_only_the_pipeline_declares_is_checked_too(tmp_path):
    # decision_threshold belongs to no settings class: the pipeline's own declaration checks it.
    environment = environments.load_environment(write(tmp_path, "parameters:\n  decision_threshold: 1.5\n"))
    with pytest.raises(InvalidParameterError, match=r"decision_threshold=1\.5 must be <= 1\.0"):
        environments.pipeline_defaults(environment, ["flights-training"])


def test_a_value_a_run_would_refuse_is_refused_when_compiling(tmp_path):
    environment = environments.load_environment(write(tmp_path, "parameters:\n  gpu_pool: nope\n"))
    with pytest.raises(
        InvalidParameterError, match=r"staging\.yaml: flights-training: .*gpu_pool='nope' is not a node pool"
    ):
        environments.pipeline_defaults(environment, ["flights-training"])


def test_the_shipped_environments_are_valid_for_every_built_in_pipeline():
    for overlay in ("dev", "prod"):
        environment = environments.load_environment(overlay, root=str(REPO_ROOT))
        found = environments.pipeline_defaults(
            environment, ["flights-training", "flights-retraining", "digits-training"]
        )
        assert found["flights-training"], overlay
        assert found["digits-training"]["gpu_pool"] == environment.shared["gpu_pool"]


def test_defaults_are_written_as_kfps_compiler_writes_them():
    spec = compiled_spec(load_pipeline("flights-training"))
    environments.with_defaults(spec, {"workers": 4, "gpu_pool": "h100-spot", "tune": False})
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    assert parameters["workers"]["defaultValue"] == 4.0 and isinstance(
        parameters["workers"]["defaultValue"], float
    )
    assert parameters["gpu_pool"]["defaultValue"] == "h100-spot"
    assert parameters["tune"]["defaultValue"] is False
    assert all(parameters[name]["isOptional"] for name in ("workers", "gpu_pool", "tune"))


def test_an_environments_version_is_named_after_it(tmp_path):
    environment = environments.load_environment(write(tmp_path, "parameters: {}\n", "prod.yaml"))
    assert environments.versioned("0.1.0+abc1234", environment) == "0.1.0+abc1234.prod"
    assert environments.versioned("0.1.0+abc1234", None) == "0.1.0+abc1234"
    bad = environments.load_environment(write(tmp_path, "parameters: {}\n", "no good.yaml"))
    with pytest.raises(UsageError, match="environment 'no good'"):
        environments.versioned("0.1.0", bad)
