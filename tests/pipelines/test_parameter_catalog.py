"""Pipeline parameters written once (kfstack.pipelines.parameters): the declarations, the
signatures and docstrings generated from them, and the copies KFP makes us keep in check.

A lightweight component's signature is embedded as source text in the compiled spec and run in
the task's container without the module around it, so its defaults must be literals there; the
test below holds every such literal to the catalog's value (one home, checked copies)."""

import importlib
import inspect
import pathlib
import pkgutil
import re

import pytest
from kfp import dsl

import kfstack.components
from kfstack.kubernetes.placement import TrainingPlacement
from kfstack.pipelines import load_pipeline
from kfstack.pipelines.parameters import (
    CATALOG,
    GROUPS,
    PER_RUN,
    Parameter,
    ParameterSet,
    declared_parameters,
    from_setting,
    reference_markdown,
)
from kfstack.pipelines.rendering import compiled_spec
from kfstack.tuning.spec import TuningSettings

KFP_TYPES = {bool: "BOOLEAN", int: "NUMBER_INTEGER", float: "NUMBER_DOUBLE", str: "STRING"}


def test_a_settings_field_gives_its_parameter_type_default_and_range():
    pool = from_setting(TrainingPlacement, "node_pool", "The pool.", "cluster")
    assert (pool.name, pool.type, pool.default) == ("gpu_pool", str, "h100")
    trials = from_setting(TuningSettings, "max_trials", "Trials.", "tuning")
    assert (trials.name, trials.type, trials.default, dict(trials.bounds)) == (
        "tuning_max_trials",
        int,
        12,
        {"ge": 1},
    )
    assert trials.range_text() == ">= 1"
    assert (
        from_setting(TuningSettings, "algorithm", "A.", "tuning")
        .range_text()
        .startswith("one of random, tpe")
    )


def test_a_field_without_a_default_cannot_be_a_parameter():
    with pytest.raises(ValueError, match=r"TuningSettings\.objective has no default"):
        from_setting(TuningSettings, "objective", "The metric.", "tuning")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"type": list, "default": []}, TypeError, "bool, int, float or str"),
        ({"type": int, "default": "2"}, TypeError, "default '2' is not int"),
        ({"type": int, "default": 2, "group": "misc"}, ValueError, "group 'misc' is not one of"),
    ],
)
def test_a_malformed_parameter_is_refused(kwargs, error, message):
    declared = {"name": "workers", "description": "Ranks.", "group": PER_RUN, **kwargs}
    with pytest.raises(error, match=message):
        Parameter(**declared)


def test_a_set_refuses_a_name_twice_and_changes_only_what_it_takes():
    with pytest.raises(ValueError, match="workers is declared twice"):
        ParameterSet([CATALOG["workers"], CATALOG["workers"]])
    with pytest.raises(KeyError, match="changes for parameters not taken: gpu_pool"):
        CATALOG.take("workers", gpu_pool={"default": "cpu"})
    with pytest.raises(KeyError, match="no parameter named nope"):
        CATALOG.take("nope")
    (workers,) = CATALOG.take("workers", workers={"default": 8})
    assert workers.default == 8 and CATALOG["workers"].default == 2


def test_per_run_parameters_come_first_then_the_groups_in_form_order():
    parameters = ParameterSet(CATALOG.take("gpu_pool", "tuning_max_trials", "workers", "tune", "deploy"))
    assert [p.name for p in parameters.ordered()] == [
        "workers",
        "tune",
        "deploy",
        "tuning_max_trials",
        "gpu_pool",
    ]
    assert list(parameters.grouped()) == [PER_RUN, "tuning", "cluster"]
    assert all(group in GROUPS for group in parameters.grouped())


def test_the_generated_pipeline_has_the_declared_signature_docstring_and_interface():
    parameters = ParameterSet(
        [
            Parameter("table", str, "", "The table's URI.", PER_RUN),
            *CATALOG.take("workers", "gpu_pool", workers={"default": 4}),
        ]
    )
    seen = {}

    @dsl.pipeline(name="generated")
    @parameters.pipeline("Prints its parameters.")
    def generated(values: dict) -> None:
        seen.update(values)
        dsl.importer(artifact_uri="s3://bucket/x", artifact_class=dsl.Dataset)

    assert declared_parameters(generated) is parameters
    signature = inspect.signature(generated.pipeline_func)
    assert [(p.name, p.annotation, p.default) for p in signature.parameters.values()] == [
        ("table", str, ""),
        ("workers", int, 4),
        ("gpu_pool", str, "h100"),
    ]
    assert generated.pipeline_func.__doc__.startswith(
        "Prints its parameters.\n\nArgs:\n    table: The table's URI."
    )
    inputs = compiled_spec(generated)["root"]["inputDefinitions"]["parameters"]
    assert inputs["workers"] == {
        "defaultValue": 4.0,
        "description": CATALOG["workers"].description,
        "isOptional": True,
        "parameterType": "NUMBER_INTEGER",
    }
    assert inputs["table"]["description"] == "The table's URI."
    # The body got every parameter by name (KFP's channels while compiling).
    assert sorted(seen) == ["gpu_pool", "table", "workers"]


def test_a_hand_written_pipeline_declares_no_set():
    @dsl.pipeline(name="plain")
    def plain(workers: int = 2) -> None:
        dsl.importer(artifact_uri="s3://bucket/x", artifact_class=dsl.Dataset)

    assert declared_parameters(plain) is None


@pytest.mark.parametrize("pipeline", ["flights-training", "flights-retraining", "digits-training"])
def test_every_built_in_pipeline_is_declared_and_compiles_its_declarations(pipeline):
    function = load_pipeline(pipeline)
    declared = declared_parameters(function)
    assert declared is not None
    inputs = compiled_spec(function)["root"]["inputDefinitions"]["parameters"]
    assert sorted(inputs) == sorted(declared.names)
    for parameter in declared:
        compiled = inputs[parameter.name]
        assert compiled["parameterType"] == KFP_TYPES[parameter.type], parameter.name
        assert compiled["defaultValue"] == parameter.default, parameter.name
        assert " ".join(compiled["description"].split()) == parameter.description, parameter.name


def components() -> dict[str, object]:
    """Every KFP component of kfstack's components package, by ``module:function``."""
    found = {}
    for module_info in pkgutil.walk_packages(kfstack.components.__path__, "kfstack.components."):
        if not module_info.name.endswith(".component"):
            continue
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if hasattr(value, "component_spec") and getattr(value, "python_func", None) is not None:
                found[f"{module_info.name}:{name}"] = value
    return found


def component_inputs() -> list[tuple[str, str, object]]:
    """(component, input, its spec) of every optional component input the catalog declares."""
    return [
        (key, name, spec)
        for key, component in components().items()
        for name, spec in component.component_spec.inputs.items()  # type: ignore[attr-defined]
        if name in CATALOG and spec.optional  # a required input has no default to drift
    ]


@pytest.mark.parametrize(("component", "name", "spec"), component_inputs())
def test_a_components_literal_default_is_the_catalogs(component, name, spec):
    parameter = CATALOG[name]
    assert spec.default == parameter.default, (
        f"{component}: {name} defaults to {spec.default!r}, the catalog to {parameter.default!r}"
    )
    assert spec.type == {bool: "Boolean", int: "Integer", float: "Float", str: "String"}[parameter.type]


def test_the_guard_sees_every_component_that_takes_a_catalog_parameter():
    taking = {component for component, _, _ in component_inputs()}
    assert len(components()) >= 11
    short = {key.rsplit(":", 1)[1] for key in taking}
    assert {
        "spark_job",
        "distributed_training",
        "hyperparameter_tuning",
        "model_deployment",
        "gate_model",
    } <= short


def test_the_catalogs_reference_page_is_written_from_the_catalog():
    page = pathlib.Path(__file__).resolve().parents[2] / "docs" / "parameters.md"
    expected = reference_markdown(CATALOG, "Pipeline parameters: kfstack's catalog")
    assert page.read_text(encoding="utf-8") == expected, (
        "docs/parameters.md is out of date: python -m kfstack.pipelines.parameters > docs/parameters.md"
    )
    # Every catalog parameter has its row, with its default.
    for parameter in CATALOG:
        assert f"| `{parameter.name}` | {parameter.type.__name__} | `{parameter.default!r}` |" in expected


def test_the_declaration_example_in_the_docs_compiles():
    page = pathlib.Path(__file__).resolve().parents[2] / "docs" / "pipelines.md"
    section = page.read_text(encoding="utf-8").split("### A pipeline of another shape", 1)[1]
    (example,) = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    namespace: dict = {}
    exec(example, namespace)  # the page's own code, as a reader would paste it
    spec = compiled_spec(namespace["churn_prepare"])
    inputs = spec["root"]["inputDefinitions"]["parameters"]
    assert sorted(inputs) == ["object_store_secret", "platform", "table"]
    assert inputs["table"]["description"] == "The churn table's URI."
