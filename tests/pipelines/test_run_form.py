"""The run form: a version compiles its settings in and shows what changes per run, and a run
changes any other setting through ``settings_overrides``, checked before anything starts and
applied by the steps themselves (kfstack/pipelines/run_form.py).

(No ``from __future__ import annotations``: KFP reads the test pipelines' annotations as types.)"""

import pytest
import yaml

from kfstack.app.alert_receiver.cluster import run_setting
from kfstack.app.cli.compile_ import compile_pipelines
from kfstack.errors import InvalidParameterError, UsageError
from kfstack.pipeline_spec import compiled_setting
from kfstack.pipelines import environments, load_pipeline, run_form
from kfstack.pipelines.parameters import CATALOG, declared_parameters
from kfstack.pipelines.rendering import compiled_spec, parameter_types
from kfstack.pipelines.signatures import component_sources
from kfstack.settings import SETTINGS_OVERRIDES, with_overrides
from tests.kfp_local import run_pipeline, task_outputs


def _root_inputs(spec: dict) -> dict:
    return spec["root"]["inputDefinitions"]["parameters"]


# -- the form ---------------------------------------------------------------------------------


# flights-retraining has the most settings; the other two compile the same way.
@pytest.mark.parametrize(
    "name",
    [
        pytest.param("digits-training", marks=pytest.mark.slow),
        pytest.param("flights-training", marks=pytest.mark.slow),
        "flights-retraining",
    ],
)
def test_a_version_for_an_environment_shows_the_per_run_parameters_and_the_overrides(name, tmp_path):
    environment = environments.load_environment("prod")
    (path,) = compile_pipelines([name], str(tmp_path), environment=environment)
    with open(path) as f:
        spec = next(d for d in yaml.safe_load_all(f) if d)
    declared = declared_parameters(load_pipeline(name))
    per_run = {p.name for p in declared if p.per_run}
    assert set(_root_inputs(spec)) == per_run | {SETTINGS_OVERRIDES}
    assert len(_root_inputs(spec)) < 20
    # The environment's settings are in the version, where its steps read them.
    prod = environment.defaults_for(name, parameter_types(load_pipeline(name)))
    assert prod, "the prod environment sets some of this pipeline's settings"
    for setting, value in prod.items():
        if setting in per_run:
            continue
        if setting in run_form.fixed_settings(load_pipeline(name)) - set(run_form.NOT_OVERRIDABLE):
            continue  # composed into another value (a Spark argument), checked below
        assert compiled_setting(spec, setting) == value, setting


def test_the_recorded_forms_have_these_many_fields():
    counts = {
        name: len(_root_inputs(compiled_spec(run_form.version_function(load_pipeline(name)))))
        for name in ("digits-training", "flights-training", "flights-retraining")
    }
    # Against 72, 80 and 89 parameters in one form before. digits' has every hyperparameter of its
    # trainer's signature (batch_size, learning_rate and seed besides the page's four before).
    assert counts == {"digits-training": 13, "flights-training": 14, "flights-retraining": 17}


def test_every_step_that_takes_a_setting_takes_the_overrides():
    settings = {p.name for p in CATALOG if not p.per_run} - set(run_form.NOT_OVERRIDABLE)
    found = [source.component for source in component_sources()]
    assert len(found) == 11
    for component in found:
        inputs = set(component.component_spec.inputs or {})
        if inputs & settings:
            assert SETTINGS_OVERRIDES in inputs, component.name


@pytest.mark.parametrize("name", ["digits-training", "flights-training", "flights-retraining"])
def test_every_overridable_setting_reaches_a_step_by_its_name(name):
    """What fixed_settings finds by compiling with distinct values, checked here from the other
    side: each overridable text or number setting is some step's input of the same name."""
    pipeline_func = load_pipeline(name)
    declared = declared_parameters(pipeline_func)
    fixed = run_form.fixed_settings(pipeline_func)
    distinct = {
        p.name: (f"x-{p.name}" if p.type is str else p.type(800001 + i))
        for i, p in enumerate(run_form.overridable(declared, fixed))
        if p.type in (str, int, float)
    }
    spec = compiled_spec(run_form.version_function(pipeline_func, distinct))
    for setting, value in distinct.items():
        assert compiled_setting(spec, setting) == value, setting


def test_a_setting_composed_into_a_spark_argument_is_fixed():
    # flights writes its shard count into the feature job's argv when the version is compiled.
    fixed = run_form.fixed_settings(load_pipeline("flights-training"))
    assert fixed == {*run_form.NOT_OVERRIDABLE, "num_shards", "max_quarantine_fraction"}
    assert run_form.fixed_settings(load_pipeline("digits-training")) == set(run_form.NOT_OVERRIDABLE)


# -- the check ----------------------------------------------------------------------------------


def test_overrides_are_checked_by_name_and_type_then_applied():
    declared = declared_parameters(load_pipeline("flights-training"))
    values = {"gpu_pool": "h100", "workers": 2}
    merged = run_form.merged(declared, values, {"gpu_pool": "a100", "training_timeout_seconds": 60.0})
    assert merged == {"gpu_pool": "a100", "workers": 2, "training_timeout_seconds": 60}
    assert type(merged["training_timeout_seconds"]) is int  # a JSON double, an int setting
    with pytest.raises(InvalidParameterError) as refused:
        run_form.merged(
            declared,
            values,
            {
                "gpu_pol": "a100",
                "workers": 3,
                "object_store_secret": "other",
                "tuning_max_trials": 2.5,
                "istio_mesh": "yes",
            },
        )
    message = str(refused.value)
    assert message.startswith("settings_overrides: ")
    assert "gpu_pol: no setting of this pipeline" in message
    assert "workers is a per-run parameter" in message
    assert "object_store_secret is compiled into the version" in message
    assert "tuning_max_trials=2.5 must be int" in message
    assert "istio_mesh='yes' must be bool" in message
    with pytest.raises(InvalidParameterError, match="must be a JSON object"):
        run_form.merged(declared, values, ["gpu_pool"])  # type: ignore[arg-type]


def test_the_validate_task_refuses_a_bad_override_in_a_fresh_interpreter():
    from kfstack.pipelines import check_in_fresh_interpreter
    from kfstack.pipelines.rendering import run_parameters

    values = {**run_parameters("digits-training", {}), "platform": "local"}
    json_values = {
        k: v for k, v in values.items() if k not in ("tuning_search_space", "tuning_algorithm_settings")
    }
    # A well-formed override is applied, then checked as the setting is: an unknown node pool.
    with pytest.raises(InvalidParameterError, match="gpu_pool='no-such-pool'"):
        check_in_fresh_interpreter("digits-training", json_values, "run-1", {"gpu_pool": "no-such-pool"})


# -- who starts runs by name ----------------------------------------------------------------------


def test_arguments_by_name_become_the_run_forms():
    pipeline_func = load_pipeline("digits-training")
    given = {
        "epochs": 3,
        "gpu_pool": "a100",
        "platform": "kubernetes",
        SETTINGS_OVERRIDES: {"tuning_max_trials": 4},
    }
    assert run_form.run_arguments(pipeline_func, given) == {
        "epochs": 3,
        SETTINGS_OVERRIDES: {"tuning_max_trials": 4, "gpu_pool": "a100"},
    }
    assert run_form.run_arguments(pipeline_func, {"epochs": 3}) == {"epochs": 3}
    # A fixed setting is the version's: the same value is no change, another is refused.
    assert run_form.run_arguments(pipeline_func, {"platform": "local"}, compiled={"platform": "local"}) == {}
    with pytest.raises(UsageError, match="launch_namespace='other': compiled into the pipeline version"):
        run_form.run_arguments(pipeline_func, {"launch_namespace": "other"})


def test_a_pipeline_written_by_hand_takes_its_arguments_as_they_are():
    from kfp import dsl

    from kfstack.components.data.data_window.component import data_window

    @dsl.pipeline(name="by-hand")
    def by_hand(gpu_pool: str = "h100"):
        data_window(
            window_start="",
            window_end="",
            window_days=0,
            window_lag_days=0,
            scheduled_time="",
            created_time="",
        )

    assert run_form.version_function(by_hand) is by_hand
    assert run_form.run_arguments(by_hand, {"gpu_pool": "a100"}) == {"gpu_pool": "a100"}
    assert run_form.fixed_settings(by_hand) == set(run_form.NOT_OVERRIDABLE)


def test_a_renamed_parameter_is_taken_with_a_warning():
    pipeline_func = load_pipeline("flights-training")
    with pytest.warns(FutureWarning, match="canary_max_auc_drop is now canary_max_quality_drop"):
        current = run_form.current_names(pipeline_func, {"canary_max_auc_drop": 0.05, "epochs": 2})
    assert current == {"canary_max_quality_drop": 0.05, "epochs": 2}


def test_the_alert_receiver_reads_a_setting_from_the_run_then_its_overrides_then_the_version():
    spec = compiled_spec(run_form.version_function(load_pipeline("flights-retraining")))
    assert run_setting({}, spec, "serving_name") == "flights-delay"
    assert run_setting({SETTINGS_OVERRIDES: {"serving_name": "other"}}, spec, "serving_name") == "other"
    assert run_setting({"serving_name": "given"}, spec, "serving_name") == "given"
    assert run_setting({}, spec, "launch_namespace") == ""
    assert run_setting({}, None, "serving_name") is None


# -- the steps apply them ---------------------------------------------------------------------------


def test_a_step_takes_the_overrides_of_its_own_arguments():
    arguments = {
        "workers": 2,
        "gpu_pool": "h100",
        "ratio": 1.0,
        SETTINGS_OVERRIDES: {"workers": 3.0, "ratio": 2, "x": 1},
    }
    assert with_overrides(arguments) == {"workers": 3, "gpu_pool": "h100", "ratio": 2.0}
    assert type(with_overrides(arguments)["workers"]) is int
    assert with_overrides({"workers": 2}) == {"workers": 2}


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_a_component_applies_an_override_under_kfp_local(tmp_path):
    from kfp import dsl

    from kfstack.components.data.data_window.component import data_window

    @dsl.pipeline(name="overridden-window")
    def overridden_window(settings_overrides: dict = {"window_lag_days": 2}):  # noqa: B006
        data_window(
            window_start="",
            window_end="",
            window_days=7,
            window_lag_days=0,
            scheduled_time="",
            created_time="2026-11-24T03:00:00Z",
            settings_overrides=settings_overrides,
        )

    run = run_pipeline(overridden_window, tmp_path / "root")
    # Seven days ending the day before the run, less the overridden two days' lag.
    assert task_outputs(run, "data-window")["parameterValues"] == {"start": "2026-11-15", "end": "2026-11-21"}
