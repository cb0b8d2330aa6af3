"""Each hyperparameter is declared once: a training function's signature says its name, type,
default (and a ``Literal``'s choices, its docstring's description); the page adds only its range
and its tuning range, by name. Argv code, which has no signature to read, is declared whole on
the page. What contradicts the code, or writes a thing twice, is refused when the page loads.

The code read is tests/pipelines/churn_code.py: read from its source, never imported."""

import warnings

import pytest

from kfstack.api.pipeline import Evaluation, Parameter, SparkApplication, Training, TrainingPipeline, Tuning
from kfstack.errors import InvalidParameterError
from kfstack.pipelines import code_signature
from kfstack.pipelines.declared import Hyperparameter, search_entry

CODE = "tests.pipelines.churn_code"
LOCATIONS = {"data_dir": "$KFSTACK_INPUT_DIR", "model_dir": "$KFSTACK_MODEL_DIR"}


def _page(training: Training, tuning: Tuning | None = None) -> TrainingPipeline:
    return TrainingPipeline(
        name="churn-training",
        description="Churn.",
        data=SparkApplication("churn.prepare"),
        training=training,
        tuning=tuning,
        evaluation=Evaluation(label="churned", task="binary"),
    )


def test_the_signature_declares_name_type_default_choices_and_description():
    read = code_signature.read(f"{CODE}:train")
    assert [(h.name, h.type, h.default, h.choices) for h in read.hyperparameters] == [
        ("epochs", int, 3, ()),
        ("learning_rate", float, 0.01, ()),  # Annotated: its type
        ("activation", str, "relu", ("relu", "tanh")),  # Literal: its choices
        ("shuffle", bool, True, ()),
        ("seed", int, 7, ()),  # not annotated: its default's type
    ]  # layers (a list) and batch_size (computed) keep the code's defaults
    descriptions = {h.name: h.description for h in read.hyperparameters}
    assert descriptions["epochs"] == "Passes over the data, each ending with a checkpoint."
    assert descriptions["learning_rate"] == "Adam's step size."
    assert (read.locations, read.takes_argv) == (("data_dir", "model_dir"), False)
    argv = code_signature.read(f"{CODE}:main")
    assert (argv.hyperparameters, argv.locations, argv.takes_argv) == ((), ("data_dir", "model_dir"), True)


def test_the_page_adds_ranges_and_search_by_name_only():
    training = Training(
        f"{CODE}:train",
        metrics=("val_auc",),
        arguments=LOCATIONS,
        hyperparameters=[
            Parameter("epochs", ge=1, search=(1, 5)),
            Parameter("activation", search=True),
            Parameter(
                "learning_rate",
                description="Its run-form wording.",
                gt=0.0,
                search={"min": 0.001, "max": 0.1, "scale": "log"},
            ),
        ],
    )
    page = _page(training, Tuning(objective="val_auc"))
    parameters = {p.name: p for p in page.parameter_set() if p.name in training.given()}
    assert training.given() == ["epochs", "learning_rate", "activation", "shuffle", "seed"]
    assert (parameters["epochs"].type, parameters["epochs"].default, dict(parameters["epochs"].bounds)) == (
        int,
        3,
        {"ge": 1},
    )
    assert parameters["activation"].bounds == {"choices": ("relu", "tanh")}
    assert parameters["learning_rate"].description == "Its run-form wording."
    assert parameters["shuffle"].description == "Shuffle the rows every epoch."
    assert page.search_space() == {
        "epochs": {"type": "int", "min": 1, "max": 5},
        "learning_rate": {"type": "double", "min": 0.001, "max": 0.1, "scale": "log"},
        "activation": {"type": "categorical", "values": ["relu", "tanh"]},
    }
    assert training.declared_types() == {
        "epochs": "int",
        "learning_rate": "float",
        "activation": "str",
        "shuffle": "bool",
        "seed": "int",
    }
    # A value outside the page's range is refused before a run, as any parameter's.
    assert page.parameter_set().problems({"epochs": 0}) == ["epochs=0 must be >= 1"]


@pytest.mark.parametrize(
    ("hyperparameters", "refused"),
    [
        (
            [Parameter("epochs", int, 3, ge=1)],
            "the signature declares the type and default of epochs; write only",
        ),
        (
            [Parameter("depth", ge=1)],
            r"depth not in its signature \(hyperparameters there: activation, epochs",
        ),
        ([Parameter("epochs"), Parameter("epochs")], "hyperparameters given twice: epochs"),
        ([Parameter("epochs", ge=2, search=(1, 5))], "its search leaves its range: epochs=1 must be >= 2"),
        (
            [Parameter("activation", search=["relu", "gelu"])],
            "epochs|activation='gelu' is not one of relu, tanh",
        ),
        ([Parameter("epochs", search=True)], "search=True needs choices or both ge and le"),
        ([Parameter("epochs", ge=5)], "a default outside its range: epochs=3 must be >= 5"),
    ],
)
def test_a_page_that_contradicts_or_repeats_the_code_is_refused(hyperparameters, refused):
    training = Training(
        f"{CODE}:train", metrics=("val_auc",), arguments=LOCATIONS, hyperparameters=hyperparameters
    )
    with pytest.raises(InvalidParameterError, match=refused):
        _page(training, Tuning(objective="val_auc"))


def test_a_location_the_arguments_do_not_give_is_refused_naming_it():
    training = Training(f"{CODE}:train", metrics=("val_auc",), arguments={"data_dir": "$KFSTACK_INPUT_DIR"})
    with pytest.raises(
        InvalidParameterError, match=r"needs model_dir, which Training\(arguments=...\) does not give"
    ):
        _page(training)


def test_tuning_needs_a_search():
    training = Training(f"{CODE}:train", metrics=("val_auc",), arguments=LOCATIONS)
    with pytest.raises(InvalidParameterError, match="tuning searches no hyperparameter"):
        _page(training, Tuning(objective="val_auc"))


def test_argv_code_is_declared_whole_on_the_page():
    whole = Parameter("learning_rate", float, 0.01, "Adam's step size.", gt=0.0, search=(0.001, 0.1))
    training = Training(
        f"{CODE}:main",
        metrics=("val_auc",),
        arguments=LOCATIONS,
        option_style="dashes",
        hyperparameters=[Parameter("epochs", int, 3, "Epochs.", ge=1), whole],
    )
    page = _page(training, Tuning(objective="val_auc"))
    assert training.declared_types() == {"epochs": "int", "learning_rate": "float"}
    assert page.training_arguments()["option_style"] == "dashes"
    assert page.search_space() == {"learning_rate": {"type": "double", "min": 0.001, "max": 0.1}}
    # Without a signature to read, a hyperparameter without its type and default is refused.
    partial = Training(
        f"{CODE}:main", metrics=("val_auc",), arguments=LOCATIONS, hyperparameters=[Parameter("epochs")]
    )
    with pytest.raises(InvalidParameterError, match=r"takes its hyperparameters on argv.*give epochs a type"):
        _page(partial)


def test_code_that_takes_argv_and_keyword_hyperparameters_is_refused():
    with pytest.raises(InvalidParameterError, match="takes argv and keyword hyperparameters"):
        _page(Training(f"{CODE}:mixed", metrics=("val_auc",)))


def test_a_missing_function_or_module_is_named():
    with pytest.raises(InvalidParameterError, match="defines no function nowhere"):
        _page(Training(f"{CODE}:nowhere", metrics=("val_auc",)))
    with pytest.raises(
        InvalidParameterError, match=r"module no_such_package\.train not found|no Python source"
    ):
        _page(Training("no_such_package.train:train", metrics=("val_auc",)))


def test_search_forms_become_the_tuning_search_space():
    count = Parameter("layers", int, 2, "Layers.", ge=1, le=4)
    assert search_entry(count.but(search=True)) == {"type": "int", "min": 1, "max": 4}
    assert search_entry(count.but(search=[1, 2])) == {"type": "discrete", "values": [1, 2]}
    assert search_entry(Parameter("shuffle", bool, True, "Shuffle.", search=True)) == {
        "type": "categorical",
        "values": [True, False],
    }
    with pytest.raises(InvalidParameterError, match="is not \\(low, high\\)"):
        search_entry(count.but(search="wide"))


def test_the_earlier_forms_still_work_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning) as caught:
        training = Training(
            "churn.train:train",
            declared={"epochs": "int", "seed": "int"},
            metrics=("val_auc",),
            hyperparameters=[Hyperparameter("epochs", 3, "Epochs.", {"ge": 1})],
        )
        page = _page(
            training,
            Tuning(search_space={"epochs": {"type": "int", "min": 1, "max": 4}}, objective="val_auc"),
        )
    assert {"Hyperparameter", "declared", "search_space"} <= {
        word
        for warning in caught
        for word in ("Hyperparameter", "declared", "search_space")
        if word in str(warning.message)
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert training.declared_types() == {"epochs": "int", "seed": "int"}
        assert page.search_space() == {"epochs": {"type": "int", "min": 1, "max": 4}}
        assert [p.name for p in training.parameters()] == ["epochs"]


def test_kfp_writes_no_choices_into_a_spec_yet():
    """A hyperparameter's choices would be a dropdown in the Kubeflow UI's run form where KFP writes
    ``literals`` into a spec's input (the field exists in its proto). kfp 2.17 takes no ``Literal``
    annotation on a pipeline input at all: the choices stay checked by the run's first task. When
    this fails, a kfp release in range offers them: declare the pipeline's choice inputs so."""
    from typing import Literal

    from kfp import compiler, dsl
    from kfp.pipeline_spec import pipeline_spec_pb2

    assert "literals" in pipeline_spec_pb2.ComponentInputsSpec.ParameterSpec.DESCRIPTOR.fields_by_name
    with pytest.raises(TypeError, match="schema_title"):

        @dsl.pipeline(name="choices")
        def choices(activation: Literal["relu", "tanh"] = "relu"):
            pass

        compiler.Compiler().compile(choices, "unused.yaml")
