"""Every name that ends up in a Kubernetes object, given a hostile value, is refused where it
enters -- a run's parameters, or its ``settings_overrides`` in the run's first task -- naming
the parameter, before anything is rendered or started; none reaches a rendered object."""

from __future__ import annotations

import json

import pytest

from kfstack.errors import InvalidParameterError
from kfstack.pipelines import check_in_fresh_interpreter, rendering

PIPELINE = "digits-training"
NAME_PARAMETERS = (
    "object_store_secret",
    "image_pull_secret",
    "spark_service_account",
    "serving_service_account",
    "trainer_runtime",
    "launch_namespace",
    "gpu_pool",
    "serving_pool",
    "spark_image",
    "trainer_image",
)
HOSTILE = (
    "team`store",
    "team store",
    "$(touch /tmp/x)",
    "Team-Store",
    "../secret",
    "a;b",
    "x" * 300,
    "secret\nname",
)


def _reaching(values: tuple[str, ...]) -> list[tuple[str, str]]:
    reached = []
    for parameter in NAME_PARAMETERS:
        for value in values:
            if parameter.endswith("_image") and value == "Team-Store":
                continue  # an image's registry host may be upper case; its path may not (below)
            try:
                rendering.render(PIPELINE, {parameter: value}, run_id="r-1")
            except InvalidParameterError as err:
                assert parameter in str(err), (parameter, value, str(err))
            else:
                reached.append((parameter, value))
    return reached


def test_no_hostile_name_reaches_a_rendered_object_subset():
    assert _reaching(HOSTILE[:2]) == []


@pytest.mark.slow
def test_no_hostile_name_reaches_a_rendered_object():
    assert _reaching(HOSTILE) == []


@pytest.mark.slow  # a fresh interpreter; tests/pipelines/test_run_form.py checks overrides there by default
def test_a_hostile_name_among_the_runs_overrides_fails_the_runs_check():
    """The run's validate task applies its ``settings_overrides`` and renders: the same checks."""
    with pytest.raises(InvalidParameterError, match="image_pull_secret='team`store' is not a Secret's name"):
        check_in_fresh_interpreter(PIPELINE, {}, "r-1", {"image_pull_secret": "team`store"})


@pytest.mark.parametrize(
    "image",
    ["registry.example.com:5000/team/spark:1.2.3", "ghcr.io/team/trainer@sha256:" + "a" * 64, "spark"],
)
def test_an_image_reference_is_taken(image):
    (spark, *_) = rendering.render(PIPELINE, {"spark_image": image}, run_id="r-1")
    assert image in json.dumps(spark.objects)


def test_an_image_path_in_upper_case_is_refused():
    with pytest.raises(
        InvalidParameterError, match=r"spark_image='ghcr\.io/Team/spark:1' is not an image reference"
    ):
        rendering.render(PIPELINE, {"spark_image": "ghcr.io/Team/spark:1"}, run_id="r-1")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"hidden_units": -5}, "hidden_units=-5 must be >= 1"),
        ({"dropout": 1.5}, "dropout=1.5 must be < 1.0"),
        ({"activation": "sigmoid"}, "activation='sigmoid' is not one of relu, tanh"),
    ],
)
def test_a_hyperparameter_out_of_its_declared_range_is_refused_before_the_data_step(value, message):
    with pytest.raises(InvalidParameterError, match=message):
        rendering.render(PIPELINE, value, run_id="r-1")
