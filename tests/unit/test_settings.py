"""Typed settings: validated once, errors name the field (the argument, at the edge),
placeholders stand in for values."""

import json
import re

import pytest

from kfstack.components import argument_names
from kfstack.components.training.distributed_training.stage import STAGE as TRAINING
from kfstack.errors import InvalidParameterError
from kfstack.kubernetes.naming import RunContext
from kfstack.kubernetes.placement import TrainingPlacement, TuningPlacement
from kfstack.kubernetes.spark_application import SparkJobPlacement, SparkResources
from kfstack.monitoring.drift import DriftThresholds
from kfstack.monitoring.gate import GateRule
from kfstack.serving.canary import CanaryThresholds
from kfstack.settings import Placeholder, katib_parameter, named
from kfstack.tuning.spec import TuningSettings
from kfstack_examples.flights.features_job.config import PIPELINE_NAMES, FeatureJobConfig
from kfstack_examples.flights.pipelines.steps import TRAINING_CODE, check_run
from kfstack_examples.flights.pipelines.training import FLIGHTS
from kfstack_examples.flights.training.settings import TRAINER_CODE, TrainingSettings

# The flights pipelines' search space, as their declaration writes it.
SEARCH_SPACE = json.dumps(FLIGHTS.search_space())


def test_every_problem_is_reported_at_once_by_field_name():
    with pytest.raises(InvalidParameterError) as err:
        TrainingSettings(epochs=0, learning_rate=-1.0, framework="jax")
    message = str(err.value)
    assert message.startswith("invalid training settings: ")
    for part in (
        "framework='jax' is not one of pytorch, tensorflow",
        "epochs=0 must be >= 1",
        "learning_rate=-1.0 must be > 0",
    ):
        assert part in message


def test_the_library_names_fields_and_the_edge_names_its_arguments():
    # Built in the library: messages name the field.
    with pytest.raises(InvalidParameterError, match="node_pool='h200' is not a node pool"):
        TrainingPlacement(node_pool="h200")
    # Built at the components' edge: messages name the argument a user set.
    with pytest.raises(InvalidParameterError, match="gpu_pool='h200' is not a node pool"):
        argument_names.from_arguments(TrainingPlacement, {"gpu_pool": "h200"})
    with pytest.raises(InvalidParameterError, match="spark_timeout_seconds=0 must be > 0"):
        argument_names.from_arguments(SparkJobPlacement, {"spark_timeout_seconds": 0})
    with pytest.raises(InvalidParameterError, match="spark_executors=0 must be >= 1"):
        argument_names.from_arguments(SparkResources, {"spark_executors": 0})
    # A class's own check names the argument too, and a subclass takes its base's names.
    with pytest.raises(InvalidParameterError, match="spark_driver_memory='lots'"):
        argument_names.from_arguments(SparkResources, {"spark_driver_memory": "lots"})
    with pytest.raises(InvalidParameterError, match="tuning_timeout_seconds=0 must be > 0"):
        argument_names.from_arguments(TuningPlacement, {"tuning_timeout_seconds": 0})
    # Names given once hold only while those settings are built.
    with named({"node_pool": "gpu_pool"}), pytest.raises(InvalidParameterError, match="gpu_pool="):
        TrainingPlacement(node_pool="h200")
    with pytest.raises(InvalidParameterError, match="node_pool="):
        TrainingPlacement(node_pool="h200")


@pytest.mark.parametrize(
    ("settings", "arguments", "message"),
    [
        (CanaryThresholds, {"canary_max_error_rate": 1.5}, "canary_max_error_rate=1.5 must be <= 1"),
        (DriftThresholds, {"drift_max_psi": 0.0}, "drift_max_psi=0.0 must be > 0"),
        (GateRule, {"gate_metric": "f1"}, "gate_metric='f1' is not one of"),
        (TuningSettings, {"tuning_max_trials": 0}, "tuning_max_trials=0 must be >= 1"),
    ],
)
def test_every_settings_class_a_component_reads_is_named_as_its_arguments(settings, arguments, message):
    overrides = {"code": TRAINER_CODE, "search_space": SEARCH_SPACE, "objective": "val_auc"}
    extra = overrides if settings is TuningSettings else {}
    with pytest.raises(InvalidParameterError, match=re.escape(message)):
        argument_names.from_arguments(settings, arguments, **extra)


def test_arguments_are_read_by_their_names_and_defaults_live_in_the_class():
    placement = argument_names.from_arguments(
        TrainingPlacement, {"gpu_pool": "a100-mig", "training_timeout_seconds": 60, "unrelated": "ignored"}
    )
    assert (placement.node_pool, placement.timeout_seconds) == ("a100-mig", 60)
    assert placement.poll_interval_seconds == TrainingPlacement.poll_interval_seconds
    assert placement.arguments(argument_names.names_of(TrainingPlacement))["gpu_pool"] == "a100-mig"
    assert TrainingPlacement().node_pool == "h100"
    job = FeatureJobConfig.from_arguments(
        {"features": "/f", "quarantine": "/q", "data_uri": ""}, PIPELINE_NAMES
    )
    assert job.input_uri is None  # empty data_uri: the shipped tables


def test_types_are_checked_not_coerced():
    with pytest.raises(InvalidParameterError, match="workers='2' must be int"):
        TrainingSettings(workers="2")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="epochs=True must be int"):
        TrainingSettings(epochs=True)
    assert TrainingSettings(learning_rate=1).learning_rate == 1  # an int is a valid float


def test_a_missing_required_argument_is_a_parameter_error():
    with pytest.raises(InvalidParameterError, match="feature job settings"):
        FeatureJobConfig.from_arguments({"features": "/f"}, PIPELINE_NAMES)


def test_cross_stage_rule_of_the_flights_run():
    check_run({"num_shards": 4, "workers": 4})
    with pytest.raises(InvalidParameterError, match="num_shards=1 < workers=2"):
        check_run({"num_shards": 1, "workers": 2})
    check_run({"num_shards": 1, "workers": katib_parameter("workers")})  # templated: the stage checks
    # A canary batch is one request to the flights predictor, which takes at most 10,000 records.
    with pytest.raises(InvalidParameterError, match="canary_batch_size"):
        check_run({"num_shards": 4, "workers": 4, "canary_batch_size": 20_000})
    # The framework is the job's kind: never a tuned hyperparameter.
    space = '{"framework": {"type": "categorical", "values": ["pytorch", "tensorflow"]}}'
    with pytest.raises(InvalidParameterError, match="framework is not tuned"):
        check_run(
            {"num_shards": 4, "workers": 4, "tuning_search_space": space, "tuning_objective": "val_auc"}
        )
    # A goal beyond the objective's declared range (an AUC above 1) is never reached.
    with pytest.raises(InvalidParameterError, match=r"tuning_goal=1.5: maximize val_auc never reaches it"):
        check_run(
            {
                "num_shards": 4,
                "workers": 4,
                "tuning_search_space": SEARCH_SPACE,
                "tuning_objective": "val_auc",
                "tuning_goal": 1.5,
            }
        )
    # The trainers' own rule, which the generic training step cannot know.
    with pytest.raises(InvalidParameterError, match="batch_size=2 must be >= workers=4"):
        check_run({"num_shards": 4, "workers": 4, "batch_size": 2})


def test_katib_placeholders_stand_where_typed_values_would():
    """A trial template: the tuned values are Katib references, written into the job as they are."""
    training = TrainingSettings(
        learning_rate=katib_parameter("learningRate"), batch_size=katib_parameter("batchSize"), workers=2
    )
    assert isinstance(training.learning_rate, Placeholder)
    arguments = {
        "platform": "kubernetes",
        "data": "s3://b/features",
        "model": "s3://b/model",
        "training_logs": "s3://b/logs",
        **TRAINING_CODE,
        "hyperparameters": {name: getattr(training, name) for name in TRAINER_CODE.hyperparameters},
        "workers": 2,
    }
    settings = TRAINING.settings(arguments)
    # Both training APIs a trial template can use: a PyTorchJob and a TrainJob.
    pytorchjob, trainjob = (
        TRAINING.build(variant.settings, RunContext("run-1", "train-model"))[0]
        for variant in reversed(TRAINING.variants(settings))
    )
    command = pytorchjob["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0][
        "command"
    ]
    trainer_args = trainjob["spec"]["trainer"]["args"]
    for argv in (command, trainer_args):
        assert "--learning_rate=${trialParameters.learningRate}" in argv
        assert "--batch_size=${trialParameters.batchSize}" in argv
        assert "--framework=pytorch" in argv
    # Range checks still hold for the concrete values beside them.
    with pytest.raises(InvalidParameterError, match="workers=0"):
        TrainingSettings(learning_rate=katib_parameter("learningRate"), workers=0)
