"""A team's ServingRuntime against what its pipeline declares of its server
(:mod:`kfstack.kubernetes.serving_runtime`): the rules on one object, and the run's first task
reading the cluster's runtime from the fake API server (no cluster runs here)."""

import copy
import logging

import pytest

from kfstack.errors import InvalidParameterError
from kfstack.images import image_for
from kfstack.kubernetes import launcher, naming
from kfstack.kubernetes.serving_runtime import Declared, problems
from kfstack.pipelines import rendering
from kfstack_examples.flights import predictor
from tests.kubernetes.conftest import NAMESPACE, RUN_ID, put_flights_runtime

FLIGHTS = Declared(predictor.MODEL_CLASS, predictor.RUNTIME, predictor.MODEL_FORMAT)
CHURN = Declared("churn.predictor:ChurnModel", "churn-predictor", "churn")


def runtime(command: list[str], image: str = "registry.example.com/team/churn-predictor:1.0", **spec) -> dict:
    return {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": {"name": "churn-predictor"},
        "spec": {
            "supportedModelFormats": [{"name": "churn", "version": "1"}],
            "protocolVersions": ["v1"],
            "containers": [{"name": "kserve-container", "image": image, "command": command}],
            **spec,
        },
    }


SERVE = ["kfstack", "serve", "--model=/mnt/models", "--format=custom", "--name={{.Name}}"]


def test_a_runtime_that_serves_the_declared_class_passes():
    found = problems(runtime([*SERVE, "--predictor=churn.predictor:ChurnModel"]), CHURN, "runtime.yaml")
    assert found.refused == [] and found.warnings == []
    # The flag's other spelling, too.
    found = problems(runtime([*SERVE, "--predictor", "churn.predictor:ChurnModel"]), CHURN, "runtime.yaml")
    assert found.refused == []


def test_another_class_format_or_protocol_is_refused_naming_both_values():
    (refused,) = problems(runtime([*SERVE, "--predictor=churn.predictor:Model"]), CHURN, "f.yaml").refused
    assert refused == (
        "f.yaml (ServingRuntime churn-predictor) serves predictor churn.predictor:Model, but the "
        "pipeline's Predictor is churn.predictor:ChurnModel"
    )
    other_format = runtime([*SERVE, "--predictor=churn.predictor:ChurnModel"])
    other_format["spec"]["supportedModelFormats"] = [{"name": "churn-v0"}]
    other_format["spec"]["protocolVersions"] = ["v2"]
    formats, protocol = problems(other_format, CHURN, "f.yaml").refused
    assert (
        "supports model format churn-v0, but the pipeline's Predictor declares runtime_model_format='churn'"
        in (formats)
    )
    assert "speaks v2" in protocol and "add v1 to its protocolVersions" in protocol


def test_the_internal_format_server_is_read_and_warned_about():
    internal = ["python", "-m", "kfstack.serving.format_server", "--custom_predictor=churn.predictor:Model"]
    found = problems(runtime(internal), CHURN, "f.yaml")
    assert found.refused == [
        "f.yaml (ServingRuntime churn-predictor) serves predictor churn.predictor:Model, but the "
        "pipeline's Predictor is churn.predictor:ChurnModel"
    ]
    (warning,) = found.warnings
    assert "runs the internal module kfstack.serving.format_server" in warning
    assert (
        "kfstack serve --model /mnt/models --format custom --predictor churn.predictor:ChurnModel" in warning
    )


def test_a_teams_own_server_module_must_be_of_the_predictors_package():
    assert problems(runtime(["python", "-m", "churn.serve"]), CHURN, "f.yaml").refused == []
    (refused,) = problems(runtime(["python", "-m", "diabetes.serve"]), CHURN, "f.yaml").refused
    assert (
        "runs python -m diabetes.serve, which is not of churn, the package of the pipeline's Predictor"
        in refused
    )


def test_kfstacks_own_image_is_refused_and_the_templates_placeholder_warned_about():
    command = [*SERVE, "--predictor=churn.predictor:ChurnModel"]
    (refused,) = problems(runtime(command, image=image_for("predictor")), CHURN, "f.yaml").refused
    assert (
        f"runs image {image_for('predictor')}, kfstack's own predictor image, which holds no churn" in refused
    )
    (warning,) = problems(
        runtime(command, image="ghcr.io/your-team/churn-predictor:0.1.0"), CHURN, "f"
    ).warnings
    assert "the template's placeholder" in warning


def test_the_flights_examples_shipped_runtime_passes():
    from kfstack.kubernetes.serving_runtime import check_shipped

    # The examples' own project (examples/), whose manifests ship the flights runtime.
    project = rendering.project_root(predictor.MODEL_CLASS.partition(":")[0])
    assert project is not None and project.endswith("examples")
    assert check_shipped(project, FLIGHTS) == []
    renamed = Declared(predictor.MODEL_CLASS, "flights-predictor-v2", predictor.MODEL_FORMAT)
    with pytest.raises(InvalidParameterError) as err:
        check_shipped(project, renamed)
    assert (
        "names runtime 'flights-predictor-v2' (serving_runtime), but the project ships "
        "kfstack-flights-predictor" in str(err.value)
    )


# -- the run's first task, against the cluster's runtime -----------------------------------------


@pytest.fixture
def validate_pod(fake_api, monkeypatch):
    """This process as the run's validate-parameters pod, its in-cluster client the fake API
    server's, launching flights-training into a namespace with its LocalQueues."""
    monkeypatch.setenv(naming.NAMESPACE_ENV, "kubeflow")
    monkeypatch.setenv(naming.SERVICE_ACCOUNT_ENV, "pipeline-runner")
    monkeypatch.setattr(launcher, "default_api_client", fake_api.api_client)
    fake_api.put_local_queues(NAMESPACE)
    return fake_api


RUN = {"platform": "kubernetes", "launch_namespace": NAMESPACE}


def test_the_runs_first_task_checks_the_runtime_the_cluster_has(validate_pod):
    fake_api = validate_pod
    shipped = put_flights_runtime(fake_api)
    rendering.check_run_parameters("flights-training", RUN, RUN_ID)
    # The namespace's ServingRuntime of that name shadows the cluster's (KServe looks there
    # first): one of another format, serving another class, fails the run before its first step.
    shadow = copy.deepcopy(shipped)
    shadow["kind"] = "ServingRuntime"
    shadow["spec"]["supportedModelFormats"] = [{"name": "kfstack-flights-v0", "version": "1"}]
    old_class = "kfstack_examples.flights.predictor.server:OldModel"
    shadow["spec"]["containers"][0]["command"] = [
        "kfstack",
        "serve",
        "--format=custom",
        f"--predictor={old_class}",
    ]
    fake_api.put("servingruntimes", NAMESPACE, shadow)
    with pytest.raises(InvalidParameterError) as err:
        rendering.check_run_parameters("flights-training", RUN, RUN_ID)
    message = str(err.value)
    assert message.startswith(f"model-deployment: the cluster's runtime in {NAMESPACE} (ServingRuntime ")
    assert "supports model format kfstack-flights-v0, but the pipeline's Predictor declares " in message
    assert (
        f"serves predictor {old_class}, but the pipeline's Predictor is {predictor.MODEL_CLASS}"
    ) in message
    assert fake_api.created() == []


def test_a_runtime_the_cluster_lacks_fails_the_run_and_one_it_may_not_read_is_left_to_kserve(
    validate_pod, caplog
):
    fake_api = validate_pod
    with pytest.raises(InvalidParameterError) as err:
        rendering.check_run_parameters("flights-training", RUN, RUN_ID)
    assert (
        f"serving_runtime='{predictor.RUNTIME}': the cluster has no ServingRuntime of that name in namespace "
        f"{NAMESPACE} and no ClusterServingRuntime"
    ) in str(err.value)
    # A Role without `get` on runtimes: the check says so in the log and the run goes on.
    fake_api.forbidden = {"servingruntimes", "clusterservingruntimes"}
    with caplog.at_level(logging.WARNING, logger="kfstack.kubernetes.serving_runtime"):
        rendering.check_run_parameters("flights-training", RUN, RUN_ID)
    assert any("could not be read" in record.getMessage() for record in caplog.records)
    # Without deploying, no runtime is needed.
    fake_api.forbidden = set()
    rendering.check_run_parameters("flights-training", {**RUN, "deploy": False}, RUN_ID)
