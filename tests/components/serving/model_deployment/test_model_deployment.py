"""Generic deployment with canary analysis: any format, any task.

Unit: bad parameters refused before anything is deployed; the InferenceService of a standard
format (KServe's own runtime picks it up) and of an ONNX model on Triton (protocol v2, the
repository laid out), validated against the upstream CRD. Real: a digits classifier deployed on
loopback twice -- first at 100%, then a worse model as a canary that the accuracy check rolls
back -- and an ONNX model's first deployment through the component under kfp.local.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kfstack.components.serving.model_deployment.stage import STAGE
from kfstack.errors import InvalidParameterError
from kfstack.kubernetes.naming import RunContext
from kfstack.platforms import RUN_DIR_ENV
from kfstack.serving import local_services
from kfstack.serving.registry import REGISTRY_DIR_ENV
from tests.kfp_local import run_pipeline
from tests.serving import standard_models
from tests.upstream_crds import validate_with_crds


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    root = tmp_path_factory.mktemp("digits")
    model = standard_models.sklearn_digits(str(root / "good"))
    standard_models.onnx_digits(str(root / "onnx"), model)
    x, y = standard_models.digits()
    rows = standard_models.DIGITS_TEST_ROWS
    pq.write_table(
        pa.table({**{f"p{i}": x[-rows:, i] for i in range(64)}, "digit": y[-rows:]}), root / "holdout.parquet"
    )
    return root


def arguments(digits, tmp_path, **overrides):
    return {
        "platform": "local",
        "model": str(digits / "good"),
        "holdout": str(digits / "holdout.parquet"),
        "serving_model": str(tmp_path / "serving"),
        "model_format": "sklearn",
        "task": "multiclass",
        "label_column": "digit",
        "serving_name": "digits",
        "run_id": "run-1",
        "deploy": True,
        "serving_mode": "serverless",
        "serving_min_replicas": 1,
        "serving_max_replicas": 3,
        "serving_scale_metric": "",
        "serving_scale_target": 0,
        "canary_traffic_percent": 10,
        "canary_records": 200,
        "canary_batch_size": 50,
        "canary_max_error_rate": 0.01,
        "canary_max_latency_ratio": 2.0,
        "canary_latency_slack_ms": 50.0,
        "canary_max_psi": 0.0,
        "canary_max_quality_drop": 0.02,
        **overrides,
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"model_format": "pmml"}, "model_format='pmml' is not one of"),
        ({"model_format": "custom"}, "name serving_runtime"),
        (
            {"model_format": "custom", "serving_runtime": "team-rt", "serving_model_format": "team"},
            "name the team's kserve.Model as custom_predictor",
        ),
        (
            {"model_format": "onnx", "request_format": "records"},
            "model_format=onnx takes request_format=tensor",
        ),
        ({"task": "ranking"}, "task='ranking' is not one of"),
        ({"canary_records": 0}, "canary_records=0 must be at least 1"),
        ({"canary_max_quality_drop": -1.0}, r"canary_max_quality_drop=-1.0 must be >= 0"),
        ({"serving_name": "Digits_1"}, "serving_name='Digits_1'"),
    ],
)
def test_bad_parameters_fail_before_anything_is_deployed(digits, tmp_path, overrides, message):
    with pytest.raises(InvalidParameterError, match=message):
        STAGE.settings(arguments(digits, tmp_path, **overrides))


def test_inference_services_name_the_format_kserves_runtimes_serve(digits, tmp_path):
    context = RunContext("run-1", "model-deployment")
    cluster = {
        "platform": "kubernetes",
        "serving_model": "minio://bucket/run-1/model-deployment/serving_model",
    }
    sklearn = STAGE.build(
        STAGE.settings(arguments(digits, tmp_path, **cluster, model="s3://bucket/m")), context
    )
    onnx = STAGE.build(
        STAGE.settings(arguments(digits, tmp_path, **cluster, model="s3://bucket/m", model_format="onnx")),
        context,
    )
    custom = STAGE.build(
        STAGE.settings(
            arguments(
                digits,
                tmp_path,
                **cluster,
                model="s3://bucket/m",
                model_format="custom",
                serving_runtime="team-predictor",
                serving_model_format="team-lines",
            )
        ),
        context,
    )
    model = sklearn[0]["spec"]["predictor"]["model"]
    assert model["modelFormat"] == {"name": "sklearn"} and "runtime" not in model
    assert model["storageUri"] == "s3://bucket/m"
    triton = onnx[0]["spec"]["predictor"]["model"]
    assert triton["modelFormat"] == {"name": "onnx"} and triton["protocolVersion"] == "v2"
    # Triton serves the repository laid out in the serving_model artifact.
    assert triton["storageUri"] == "s3://bucket/run-1/model-deployment/serving_model"
    team = custom[0]["spec"]["predictor"]["model"]
    assert team["runtime"] == "team-predictor" and team["modelFormat"] == {"name": "team-lines"}
    validate_with_crds(tmp_path, [*sklearn, *onnx, *custom])


def test_the_drift_checks_ignored_features_reach_kfstacks_servers_only(digits, tmp_path):
    """Live drift leaves out what the drift check leaves out: the flag goes to kfstack's model
    server (a custom model; every server embedded), never to KServe's own runtime nor to a team's
    runtime for a standard format whatever its name (neither takes kfstack's flags)."""
    context = RunContext("run-1", "model-deployment")
    cluster = {
        "platform": "kubernetes",
        "model": "s3://bucket/m",
        "serving_model": "minio://bucket/run-1/model-deployment/serving_model",
        "drift_ignore_features": " month, day_of_year ,",
    }
    team = {"model_format": "custom", "serving_runtime": "team-predictor", "serving_model_format": "team"}
    (custom,) = STAGE.build(STAGE.settings(arguments(digits, tmp_path, **cluster, **team)), context)
    (sklearn,) = STAGE.build(STAGE.settings(arguments(digits, tmp_path, **cluster)), context)
    # The team's own sklearn runtime, named like no KServe runtime: still not kfstack's server.
    own = {"serving_runtime": "team-sklearn-1-5"}
    (team_sklearn,) = STAGE.build(STAGE.settings(arguments(digits, tmp_path, **cluster, **own)), context)
    assert custom["spec"]["predictor"]["model"]["args"] == ["--live_drift_ignore_features=month,day_of_year"]
    assert "args" not in sklearn["spec"]["predictor"]["model"]
    assert "args" not in team_sklearn["spec"]["predictor"]["model"]
    validate_with_crds(tmp_path, [custom, sklearn, team_sklearn])
    # Embedded, every server is kfstack's.
    local = STAGE.settings(arguments(digits, tmp_path, drift_ignore_features="pixel_0"))
    assert local.server_flags == ("--live_drift_ignore_features=pixel_0",)
    assert STAGE.settings(arguments(digits, tmp_path)).server_flags == ()


def run_local(args):
    settings = STAGE.settings(args)
    STAGE.preflight(settings)
    return STAGE.run_local(STAGE.variants(settings)[0].settings)


@pytest.mark.slow
def test_a_worse_canary_is_rolled_back_on_accuracy(digits, tmp_path, monkeypatch):
    from sklearn.dummy import DummyClassifier

    # Two embedded runs (a run's directory names its model's version) sharing one registry.
    monkeypatch.setenv(REGISTRY_DIR_ENV, str(tmp_path / "registry"))
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "run-1"))
    try:
        first = run_local(arguments(digits, tmp_path, run_id="run-1"))
        assert first.outputs["decision"] == "first"
        local_services.stop_services(str(tmp_path / "run-1"))  # the first run ends
        monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "run-2"))
        # A model that always answers the most frequent digit: it serves, but badly.
        import joblib

        x, y = standard_models.digits()
        (tmp_path / "bad").mkdir()
        joblib.dump(DummyClassifier(strategy="most_frequent").fit(x, y), tmp_path / "bad" / "model.joblib")
        second = run_local(arguments(digits, tmp_path, run_id="run-2", model=str(tmp_path / "bad")))
    finally:
        for run in ("run-1", "run-2"):
            local_services.stop_services(str(tmp_path / run))
    assert second.outputs["decision"] == "rollback"
    figures = second.metrics["serving_metrics"]
    assert figures["stable_accuracy"] > 0.85 and figures["canary_accuracy"] < 0.2
    summary = json.loads(second.outputs["serving_summary"])
    assert (
        summary["failed_checks"] == ["accuracy"]
        and summary["production_version"] == first.outputs["production_version"]
    )
    assert (
        "| accuracy |" in second.documents["deployment_report"]
        or "accuracy" in second.documents["deployment_report"]
    )


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
@pytest.mark.slow
def test_an_onnx_model_is_deployed_as_triton_would_serve_it(digits, tmp_path, monkeypatch):
    from kfp import dsl

    from kfstack.components.serving.model_deployment.component import model_deployment

    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "run"))
    monkeypatch.setenv(REGISTRY_DIR_ENV, str(tmp_path / "registry"))

    @dsl.pipeline(name="team-deployment")
    def team_deployment():
        model = dsl.importer(artifact_uri=str(digits / "onnx"), artifact_class=dsl.Model)
        holdout = dsl.importer(artifact_uri=str(digits / "holdout.parquet"), artifact_class=dsl.Dataset)
        model_deployment(
            platform="local",
            model=model.output,
            holdout=holdout.output,
            model_format="onnx",
            task="multiclass",
            label_column="digit",
            serving_name="digits",
            run_id="run-1",
            task_name="model-deployment",
            canary_records=100,
        )

    try:
        run = run_pipeline(team_deployment, tmp_path / "root")
    finally:
        local_services.stop_services(str(tmp_path / "run"))
    step = run / "model-deployment"
    assert (step / "serving_model" / "digits" / "1" / "model.onnx").is_file()
    outputs = json.loads((step / "executor_output.json").read_text())
    assert outputs["parameterValues"]["decision"] == "first"


def test_deploying_embedded_needs_the_runs_directories(digits, tmp_path, monkeypatch):
    monkeypatch.delenv(RUN_DIR_ENV, raising=False)
    monkeypatch.delenv(REGISTRY_DIR_ENV, raising=False)
    with pytest.raises(InvalidParameterError, match="needs KFSTACK_RUN_DIR and KFSTACK_REGISTRY_DIR"):
        run_local(arguments(digits, tmp_path))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"serving_scale_metric": "queue"},
            r"serving_scale_metric='queue': in serving_mode=serverless \(Knative\)"
            r".*serving_scale_metric=concurrency",
        ),
        (
            {"serving_mode": "standard", "serving_autoscaler": "keda", "serving_scale_metric": "queue"},
            r"serving_scale_metric=queue needs serving_prometheus_address",
        ),
        (
            {
                "serving_mode": "standard",
                "serving_autoscaler": "keda",
                "serving_scale_metric": "queue",
                "serving_prometheus_address": "http://prometheus:9090",
            },
            r"KServe's runtime kserve-sklearnserver exports no queue-length metric.*serving_queue_metric",
        ),
        # A team's runtime for a standard format is not kfstack's server, whatever its name.
        (
            {
                "platform": "kubernetes",
                "model_format": "onnx",
                "serving_runtime": "triton-24-08",
                "serving_mode": "standard",
                "serving_autoscaler": "keda",
                "serving_scale_metric": "queue",
                "serving_prometheus_address": "http://prometheus:9090",
            },
            r"serving_scale_metric=queue: runtime 'triton-24-08' serves model format 'onnx', not a custom "
            r"model on kfstack's model server.*serving_queue_metric",
        ),
        (
            {"serving_keda_authentication": "prometheus-auth"},
            r"serving_keda_authentication='prometheus-auth' needs serving_keda_auth_modes",
        ),
        (
            {
                "serving_mode": "standard",
                "serving_autoscaler": "keda",
                "serving_scale_metric": "gpu",
                "serving_prometheus_address": "http://prometheus:9090",
            },
            r"serving_scale_metric=gpu: node pool 'serving' has no GPU",
        ),
    ],
)
def test_autoscaling_refusals_name_the_components_arguments(digits, tmp_path, overrides, message):
    with pytest.raises(InvalidParameterError, match=message):
        STAGE.settings(arguments(digits, tmp_path, **overrides))


def test_a_keda_queue_target_reaches_the_inference_service(digits, tmp_path):
    args = arguments(
        digits,
        tmp_path,
        platform="kubernetes",
        model="s3://bucket/m",
        serving_model="minio://bucket/run-1/model-deployment/serving_model",
        model_format="custom",
        serving_runtime="team-predictor",
        serving_model_format="team-lines",
        serving_mode="standard",
        serving_autoscaler="keda",
        serving_scale_metric="queue",
        serving_scale_target=6,
        serving_prometheus_address="http://prometheus-operated.monitoring.svc:9090",
        serving_keda_authentication="prometheus-auth",
        serving_keda_auth_modes="bearer",
    )
    (built,) = STAGE.build(STAGE.settings(args), RunContext("run-1", "model-deployment"))
    assert built["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "keda"
    (metric,) = built["spec"]["predictor"]["autoScaling"]["metrics"]
    external = metric["external"]
    assert external["metric"]["query"].startswith(
        'sum(kfstack_predictor_requests_in_flight{namespace="<namespace>"'
    )
    assert external["target"] == {"type": "Value", "value": "6"}
    assert external["authenticationRef"] == {
        "authenticationRef": {"name": "prometheus-auth"},
        "authModes": "bearer",
    }
    validate_with_crds(tmp_path, [built])
