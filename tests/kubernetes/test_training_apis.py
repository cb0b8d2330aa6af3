"""Which training API a run uses: ``training_api`` auto/v1/trainer-v2 against what the cluster
serves, asked through API discovery of the fake API server (no cluster runs here)."""

import pytest

from kfstack.components.training.distributed_training.stage import STAGE as TRAINING
from kfstack.errors import InvalidParameterError, PlatformNotAvailableError
from kfstack.kubernetes import resources
from kfstack.kubernetes.launcher import Cluster
from kfstack.kubernetes.training_apis import AUTO, TRAINER_V2, V1, candidate_apis
from kfstack.pipelines import rendering
from kfstack.platforms import choose_variant, run_stage
from kfstack.training.settings import PYTORCH, TENSORFLOW
from kfstack_examples.flights.pipelines.steps import TRAINING_CODE
from tests.kubernetes.conftest import RUN_ID, put_flights_runtime
from tests.kubernetes.test_render import arguments, cluster, training_arguments

V1_ONLY = (resources.PYTORCHJOB, resources.TFJOB)
V2_ONLY = (resources.TRAINJOB,)
BOTH = (resources.PYTORCHJOB, resources.TFJOB, resources.TRAINJOB)


def test_candidates_in_order_of_preference():
    assert candidate_apis(AUTO, PYTORCH) == (TRAINER_V2, V1)
    assert candidate_apis(V1, PYTORCH) == (V1,)
    assert candidate_apis(TRAINER_V2, PYTORCH) == (TRAINER_V2,)
    # Only a TFJob runs TensorFlow, only a PyTorchJob runs elastic: auto never offers Trainer v2.
    assert candidate_apis(AUTO, TENSORFLOW) == (V1,)
    assert candidate_apis(AUTO, PYTORCH, elastic=True) == (V1,)


@pytest.mark.parametrize(
    ("framework", "elastic", "message"),
    [(TENSORFLOW, False, "no TensorFlow runtime"), (PYTORCH, True, "elasticPolicy")],
)
def test_trainer_v2_for_what_only_v1_runs_is_refused_with_what_to_use(framework, elastic, message):
    with pytest.raises(InvalidParameterError, match=message) as err:
        candidate_apis(TRAINER_V2, framework, elastic)
    assert "training_api=v1" in str(err.value)


def test_an_unknown_choice_is_refused():
    with pytest.raises(InvalidParameterError, match="training_api='v3'"):
        candidate_apis("v3", PYTORCH)


def chosen_kind(fake_api, tmp_path, served, **parameters) -> str:
    fake_api.serve_only(*served)
    uris = {name: f"s3://b/{name}" for name in ("data", "model", "training_logs")}
    settings = TRAINING.settings({**arguments(tmp_path, uris, (), **parameters), **TRAINING_CODE})
    variant = choose_variant("distributed-training", TRAINING.variants(settings), cluster(fake_api))
    (requires,) = variant.requires
    return requires.kind


@pytest.mark.parametrize(
    ("served", "expected"),
    [(V1_ONLY, "PyTorchJob"), (V2_ONLY, "TrainJob"), (BOTH, "TrainJob")],
    ids=["v1-only", "v2-only", "both"],
)
def test_auto_takes_what_the_cluster_serves_trainer_v2_first(fake_api, tmp_path, served, expected):
    assert chosen_kind(fake_api, tmp_path, served) == expected
    # It asked the API server's discovery, nothing else.
    assert {path for _, path in fake_api.requests} <= {
        "/apis/trainer.kubeflow.org/v1alpha1",
        "/apis/kubeflow.org/v1",
    }


def test_tensorflow_on_auto_takes_the_tfjob(fake_api, tmp_path):
    assert chosen_kind(fake_api, tmp_path, BOTH, framework="tensorflow") == "TFJob"


def test_a_forced_choice_is_not_overridden_by_what_is_served(fake_api, tmp_path):
    assert chosen_kind(fake_api, tmp_path, BOTH, training_api="v1") == "PyTorchJob"
    with pytest.raises(
        PlatformNotAvailableError, match=r"training_api=trainer-v2 needs trainer\.kubeflow\.org"
    ):
        chosen_kind(fake_api, tmp_path, V1_ONLY, training_api="trainer-v2")


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_a_cluster_with_neither_api_fails_before_anything_is_created(fake_api, tmp_path, framework):
    args = training_arguments(tmp_path, framework=framework)
    fake_api.serve_only(resources.SPARK_APPLICATION)
    with pytest.raises(PlatformNotAvailableError) as err:
        run_stage(TRAINING, args, cluster=cluster(fake_api))
    message = str(err.value)
    assert "kubeflow.org/v1" in message and "training-operator v1.9" in message
    if framework == "pytorch":
        assert "Kubeflow Trainer v2.3" in message  # both ways are named, each with its installer
    assert "Nothing was submitted" in message
    assert fake_api.count("POST") == 0


def test_on_a_trainer_v2_cluster_the_step_creates_a_trainjob(fake_api, tmp_path):
    args = training_arguments(tmp_path, workers=2)
    fake_api.serve_only(*V2_ONLY)

    def controller(name):  # Trainer v2 reports a failure at once: enough to see what was created
        fake_api.statuses[name] = [
            {
                "conditions": [
                    {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "node 1"}
                ]
            }
        ]

    fake_api.on_read = controller
    with pytest.raises(Exception, match=r"TrainJob team-ml/kfs-train-\w+ failed"):
        run_stage(TRAINING, args, cluster=cluster(fake_api))
    ((plural, _, _),) = [key for key in fake_api.objects if key[0] != "localqueues"]
    assert plural == "trainjobs"
    assert fake_api.count("POST", "/apis/trainer.kubeflow.org/v1alpha1/") == 1


def test_the_parameter_check_finds_an_unserved_api_before_the_first_step(fake_api, monkeypatch):
    """validate-parameters, on the cluster: a forced trainer-v2 on a v1 cluster fails there,
    before the Spark job, and so does a cluster without the spark-operator."""
    monkeypatch.setattr(
        Cluster, "from_environment", classmethod(lambda cls, stage, launch_namespace="": cluster(fake_api))
    )
    fake_api.serve_only(
        *V1_ONLY, resources.SPARK_APPLICATION, resources.EXPERIMENT, resources.INFERENCE_SERVICE
    )
    put_flights_runtime(fake_api)  # the deployment's ServingRuntime, as the cluster has it
    rendering.check_run_parameters("flights-training", {"platform": "kubernetes"}, RUN_ID)
    # The tuning step's trials are training jobs too: it is the first to need the API.
    with pytest.raises(
        PlatformNotAvailableError, match=r"hyperparameter-tuning: .* choose another training_api"
    ):
        rendering.check_run_parameters(
            "flights-training", {"platform": "kubernetes", "training_api": "trainer-v2"}, RUN_ID
        )
    # Without Katib, tuning must be off; then the training step alone decides.
    fake_api.serve_only(*V1_ONLY, resources.SPARK_APPLICATION, resources.INFERENCE_SERVICE)
    with pytest.raises(
        PlatformNotAvailableError, match=r"hyperparameter-tuning: .*Experiment \(Katib v0\.19\)"
    ):
        rendering.check_run_parameters("flights-training", {"platform": "kubernetes"}, RUN_ID)
    rendering.check_run_parameters("flights-training", {"platform": "kubernetes", "tune": False}, RUN_ID)
    with pytest.raises(
        PlatformNotAvailableError, match=r"distributed-training: .* choose another training_api"
    ):
        rendering.check_run_parameters(
            "flights-training",
            {"platform": "kubernetes", "training_api": "trainer-v2", "tune": False},
            RUN_ID,
        )
    fake_api.serve_only(*V2_ONLY)
    with pytest.raises(PlatformNotAvailableError, match=r"spark-job: .*SparkApplication"):
        rendering.check_run_parameters("flights-training", {"platform": "kubernetes"}, RUN_ID)
    # Without KServe the run cannot deploy: refused up front, unless deploy is off.
    fake_api.serve_only(*V1_ONLY, resources.SPARK_APPLICATION, resources.EXPERIMENT)
    refused = r"model-deployment: .*InferenceService \(KServe 0\.20"
    with pytest.raises(PlatformNotAvailableError, match=refused):
        rendering.check_run_parameters("flights-training", {"platform": "kubernetes"}, RUN_ID)
    rendering.check_run_parameters("flights-training", {"platform": "kubernetes", "deploy": False}, RUN_ID)
    assert fake_api.created() == []
