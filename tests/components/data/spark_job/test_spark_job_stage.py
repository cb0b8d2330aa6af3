"""The generic Spark job's stage: settings refused before anything runs, the SparkApplication it
builds (validated against the upstream CRD), the report read back on both platforms, and one
real local run of a team's application file."""

from __future__ import annotations

import json
import os
import pathlib

import pyarrow.parquet as pq
import pytest
from kubeflow_spark_api.models import SparkV1beta2SparkApplication

from kfstack import images
from kfstack.components.data.spark_job import stage
from kfstack.components.data.spark_job.component import spark_job
from kfstack.contracts import ContractError
from kfstack.errors import InvalidParameterError
from kfstack.kubernetes.naming import RunContext
from kfstack.pipeline_spec import artifact_placeholder
from kfstack.platforms import run_stage
from kfstack.spark.driver import REPORT_UPLOAD_URI_ENV
from tests.upstream_crds import validate_with_crds

SAMPLE_APP = str(pathlib.Path(__file__).with_name("sample_app.py"))
RUN_ID = "3f9c1e2a-5b7d-4c8e-9a0b-1c2d3e4f5a6b"
CSV = "id,amount\n1,10.5\n2,3\n,4\n3,abc\n4,-1\n5,0\n"
REMOTE = "minio://mlpipeline/v2/artifacts/team/run-1/spark-job/7"


def arguments(tmp_path, **overrides) -> dict:
    """The component's arguments as KFP hands them over: its defaults, then ``overrides``;
    artifacts as their locations."""
    values = {name: spec.default for name, spec in spark_job.component_spec.inputs.items() if spec.optional}
    values.update(
        platform="local",
        spark_application=SAMPLE_APP,
        run_id=RUN_ID,
        task_name="spark-job",
        output=str(tmp_path / "output"),
        report=str(tmp_path / "report"),
        spark_job=str(tmp_path / "spark_job"),
    )
    values.update(overrides)
    return values


def remote(tmp_path, **overrides) -> dict:
    values = {
        "platform": "kubernetes",
        "spark_application": "local:///opt/team/jobs/clean.py",
        "output": f"{REMOTE}/output",
        "report": f"{REMOTE}/report",
    }
    return arguments(tmp_path, **{**values, **overrides})


# --- settings ---------------------------------------------------------------------------------


def test_the_defaults_give_valid_settings(tmp_path):
    settings = stage.STAGE.settings(arguments(tmp_path))
    assert settings.code.application == SAMPLE_APP and settings.code.arguments == ()
    assert settings.placement.node_pool == "cpu" and settings.placement.service_account == "kfstack-spark"
    assert settings.image == images.image_for("spark")
    assert stage.STAGE.settings(arguments(tmp_path, spark_image="registry.example/team-spark:1")).image == (
        "registry.example/team-spark:1"
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"spark_application": "/no/such/job.py"}, "no such file: /no/such/job.py"),
        ({"spark_application": "no_such_team_package.jobs"}, "'no_such_team_package.jobs' cannot be found"),
        ({"spark_application": "no_such_team_module"}, "no module named 'no_such_team_module' here"),
        ({"spark_application": "not a module"}, "neither a .py file nor a module name"),
        ({"spark_application": ""}, "name a .py file or a module"),
        ({"spark_arguments": ["--n", 3]}, "every argument must be a string"),
        ({"spark_node_pool": "gpu-galore"}, "spark_node_pool='gpu-galore' is not a node pool"),
        ({"env_secrets": ["Team_Warehouse"]}, "env_secrets: 'Team_Warehouse' is not a Secret name"),
        ({"spark_conf": {"executor.memory": "4g"}}, "executor.memory is not a Spark setting"),
        ({"spark_conf": {"spark.jars.packages": ["a", "b"]}}, "a Spark setting is a string or a number"),
        ({"spark_driver_memory": "2gb"}, "spark_driver_memory='2gb': expected Spark memory"),
        ({"local_cores": -1}, "local_cores=-1 must be >= 0"),
        ({"spark_service_account": ""}, "spark_service_account"),
        ({"spark_timeout_seconds": 0}, "spark_timeout_seconds=0 must be > 0"),
    ],
)
def test_a_bad_value_is_refused_with_its_name(tmp_path, overrides, message):
    with pytest.raises(InvalidParameterError, match="spark-job") as raised:
        stage.STAGE.settings(arguments(tmp_path, **overrides))
    assert message in str(raised.value)


def test_every_bad_value_is_named_at_once(tmp_path):
    with pytest.raises(InvalidParameterError) as raised:
        stage.STAGE.settings(
            arguments(tmp_path, spark_application="/no/job.py", env_secrets=["UPPER"], spark_node_pool="x")
        )
    message = str(raised.value)
    assert "no such file" in message and "UPPER" in message and "spark_node_pool" in message


def test_on_kubernetes_a_file_is_one_in_the_image(tmp_path):
    with pytest.raises(InvalidParameterError, match=r"local:///path/in/the/image\.py"):
        stage.STAGE.settings(remote(tmp_path, spark_application="/home/me/job.py"))
    # A module whose package this launcher lacks is the image's to have.
    assert stage.STAGE.settings(remote(tmp_path, spark_application="team_jobs_not_here.clean"))


def test_numbers_in_spark_conf_arrive_as_spark_reads_them(tmp_path):
    conf = {"spark.executor.instances": 2.0, "spark.sql.ansi.enabled": True, "spark.memory.fraction": 0.5}
    settings = stage.STAGE.settings(arguments(tmp_path, spark_conf=conf))
    assert settings.spark_conf == {
        "spark.executor.instances": "2",
        "spark.sql.ansi.enabled": "true",
        "spark.memory.fraction": "0.5",
    }


def test_a_bad_value_fails_the_step_before_spark_starts(tmp_path, monkeypatch):
    def must_not_run(*args, **kwargs):
        raise AssertionError("spark-submit was started")

    monkeypatch.setattr(stage, "run_local_job", must_not_run)
    with pytest.raises(InvalidParameterError, match="env_secrets"):
        run_stage(stage.STAGE, arguments(tmp_path, env_secrets=["no_underscores"]))


# --- Kubernetes -------------------------------------------------------------------------------


def build(tmp_path, **overrides) -> dict:
    settings = stage.STAGE.settings(remote(tmp_path, **overrides))
    (application,) = stage.STAGE.build(settings, RunContext(run_id=RUN_ID, task_name="spark-job"))
    return application


def env_of(role: dict) -> dict[str, str]:
    return {var["name"]: var.get("value") for var in role["env"]}


def test_the_spark_application_runs_the_wrapper_with_the_applications_argv(tmp_path):
    app = build(
        tmp_path,
        spark_arguments=["--day", "2026-11-01"],
        input_uri="s3://team-data/raw/",
        env_secrets=["team-warehouse", "feature-store"],
        spark_conf={"spark.sql.shuffle.partitions": 64},
    )
    spec = app["spec"]
    assert app["metadata"]["name"].startswith("kfs-spark-")
    assert (
        spec["mainApplicationFile"]
        == images.SPARK_DRIVER_FILE
        == "local:///opt/kfstack/jobs/kfstack_driver.py"
    )
    assert spec["arguments"] == ["local:///opt/team/jobs/clean.py", "--day", "2026-11-01"]
    assert spec["image"] == images.image_for("spark")
    assert spec["sparkConf"]["spark.sql.shuffle.partitions"] == "64"
    for role in ("driver", "executor"):
        env = env_of(spec[role])
        assert env["KFSTACK_INPUT_URI"] == "s3a://team-data/raw/"
        assert env["KFSTACK_OUTPUT_URI"] == "s3a://mlpipeline/v2/artifacts/team/run-1/spark-job/7/output"
        assert env[REPORT_UPLOAD_URI_ENV] == "s3://mlpipeline/v2/artifacts/team/run-1/spark-job/7/report"
        assert "KFSTACK_REPORT_PATH" not in env  # the wrapper's own, on the driver's disk
        assert "AWS_ACCESS_KEY_ID" in env  # the object-store Secret, as for every Spark job
        assert spec[role]["envFrom"] == [
            {"secretRef": {"name": "team-warehouse"}},
            {"secretRef": {"name": "feature-store"}},
        ]
    assert spec["driver"]["serviceAccount"] == "kfstack-spark"


def test_locations_in_the_arguments_are_expanded_by_the_driver_from_its_pods_env(tmp_path, monkeypatch):
    """``--input=$KFSTACK_INPUT_URI --output=$KFSTACK_OUTPUT_URI``: the SparkApplication carries
    them as written (the operator and spark-submit pass arguments on, no shell expands them) and
    the driver's env their values; the wrapper, run with that env, gives the application the
    s3a URIs. Expanded in the driver, not at render: a rendered run's artifact locations are
    placeholders only the backend fills in."""
    from kfstack.contracts import SparkApplicationCode
    from kfstack.spark import driver

    app = build(
        tmp_path,
        spark_arguments=["--input=$KFSTACK_INPUT_URI", "--output=$KFSTACK_OUTPUT_URI"],
        input_uri="s3://team-data/raw/",
    )
    spec = app["spec"]
    assert spec["arguments"][1:] == ["--input=$KFSTACK_INPUT_URI", "--output=$KFSTACK_OUTPUT_URI"]
    recorder = tmp_path / "recorder.py"
    seen = tmp_path / "seen.json"
    recorder.write_text(f"import json, sys\njson.dump(sys.argv[1:], open({str(seen)!r}, 'w'))\n")
    for name, value in env_of(spec["driver"]).items():
        if name.startswith("KFSTACK_") and value is not None:
            monkeypatch.setenv(name, value)
    driver.run(SparkApplicationCode(str(recorder), tuple(spec["arguments"][1:])))
    assert json.loads(seen.read_text()) == [
        "--input=s3a://team-data/raw/",
        "--output=s3a://mlpipeline/v2/artifacts/team/run-1/spark-job/7/output",
    ]


def test_without_input_or_secrets_the_pods_get_neither(tmp_path):
    spec = build(tmp_path)["spec"]
    for role in ("driver", "executor"):
        assert "KFSTACK_INPUT_URI" not in env_of(spec[role])
        assert "envFrom" not in spec[role]


def test_the_models_keep_every_field_the_stage_sets(tmp_path):
    app = build(tmp_path, env_secrets=["team-warehouse"], input_uri="s3://team-data/raw/")
    assert SparkV1beta2SparkApplication.from_dict(app).to_dict() == app


def test_a_rendered_run_writes_the_artifacts_as_placeholders(tmp_path):
    """``kfstack render`` hands the artifacts over as placeholders the backend fills in."""
    output = artifact_placeholder("spark-job", "output")
    app = build(tmp_path, output=output, report=artifact_placeholder("spark-job", "report"))
    assert env_of(app["spec"]["driver"])["KFSTACK_OUTPUT_URI"] == output


def test_the_spark_applications_validate_against_the_upstream_crd(tmp_path):
    objects = [
        build(tmp_path),
        build(
            tmp_path,
            spark_application="team_jobs.clean",
            spark_arguments=["--fast"],
            input_uri="minio://team/raw",
            env_secrets=["team-warehouse"],
            spark_conf={"spark.executor.cores": 1},
            image_pull_secret="regcred",
        ),
    ]
    validate_with_crds(tmp_path, objects)


class FakeArtifact:
    """A KFP artifact as a task's body sees it: a remote ``uri``, a local ``path``, metadata, its
    type's schema."""

    def __init__(self, uri: str, path: str, schema_title: str = "system.Artifact") -> None:
        self.uri, self.path, self.metadata, self.schema_title = uri, path, {}, schema_title

    def log_metric(self, name: str, value: float) -> None:
        self.metadata[name] = value


def run_on_a_fake_cluster(tmp_path, **overrides):
    """The step's whole run on Kubernetes, through a fake API server whose SparkApplication runs,
    completes, and whose driver uploads its report; returns the created object, the step's
    result and its artifacts."""
    import fsspec

    from kfstack.kubernetes.launcher import Cluster
    from tests.kubernetes.fake_api import FakeKubernetesApi

    outputs = {
        name: FakeArtifact(f"memory://kfstack-test/spark-run/{name}", str(tmp_path / name), schema)
        for name, schema in (
            ("output", "system.Dataset"),
            ("report", "system.Metrics"),
            ("spark_job", "system.Artifact"),
        )
    }
    args = {**remote(tmp_path, spark_arguments=["--day", "1"], **overrides), **outputs}
    name = RunContext(RUN_ID, "spark-job").name(stage.NAME_PREFIX)
    with FakeKubernetesApi() as api:

        def driver_uploads(read_name: str) -> None:
            created = api.objects.get(("sparkapplications", "team-ml", read_name))
            if created is None:  # the lookup for an earlier attempt's object, before the create
                return
            upload = env_of(created["spec"]["driver"])[REPORT_UPLOAD_URI_ENV]
            with fsspec.open(upload, "w") as f:
                json.dump({"rows_read": 12, "rows_written": 11}, f)

        api.on_read = driver_uploads
        api.statuses[name] = [
            {"applicationState": {"state": "RUNNING"}},
            {"applicationState": {"state": "COMPLETED"}},
        ]
        result = run_stage(
            stage.STAGE, args, cluster=Cluster(api.api_client(), "team-ml", sleep=lambda s: None)
        )
        created = api.objects[("sparkapplications", "team-ml", name)]
    return created, result, outputs


def test_on_kubernetes_the_step_creates_the_application_and_reads_the_uploaded_report(tmp_path):
    """Through a fake API server: the SparkApplication is created in the task's namespace, and
    once it COMPLETED the report its driver uploaded becomes the Metrics."""
    created, result, outputs = run_on_a_fake_cluster(tmp_path)
    name = RunContext(RUN_ID, "spark-job").name(stage.NAME_PREFIX)
    assert created["spec"]["arguments"] == ["local:///opt/team/jobs/clean.py", "--day", "1"]
    assert (
        env_of(created["spec"]["executor"])["KFSTACK_OUTPUT_URI"] == "memory://kfstack-test/spark-run/output"
    )
    assert outputs["report"].metadata == {"rows_read": 12.0, "rows_written": 11.0}
    assert result.reference["kind"] == "SparkApplication" and result.reference["name"] == name
    assert json.loads((tmp_path / "spark_job").read_text())["namespace"] == "team-ml"
    # Not tracked (no tracking server named, nor KFP's MLflow plugin): no MLflow variable at all.
    assert not [var for var in created["spec"]["driver"]["env"] if var["name"].startswith("MLFLOW_")]


def test_collect_reads_the_report_the_driver_uploaded(tmp_path):
    settings = stage.STAGE.settings(arguments(tmp_path, report=f"file://{tmp_path}/uploaded/report"))
    assert stage.read_remote_report(settings) == {}  # the application wrote none
    (tmp_path / "uploaded").mkdir()
    (tmp_path / "uploaded" / "report").write_text(json.dumps({"rows_read": 6, "rows_written": 3}))
    result = stage.STAGE.collect(settings, [], cluster=None)  # type: ignore[arg-type]
    assert result.metrics == {"report": {"rows_read": 6.0, "rows_written": 3.0}}


def test_a_bad_uploaded_report_fails_with_its_location(tmp_path):
    (tmp_path / "report").write_text('{"rows_read": NaN}')
    settings = stage.STAGE.settings(arguments(tmp_path, report=f"file://{tmp_path}/report"))
    with pytest.raises(ContractError, match=r"report uploaded to file://.*rows_read"):
        stage.read_remote_report(settings)


# --- a real local run -------------------------------------------------------------------------


@pytest.mark.slow
def test_a_teams_application_file_runs_locally_end_to_end(tmp_path):
    """spark-submit of the sample application: CSV in, Parquet out, its report as Metrics."""
    (tmp_path / "raw.csv").write_text(CSV)
    quarantine = tmp_path / "quarantine"
    settings = stage.STAGE.settings(
        arguments(
            tmp_path,
            input_uri=str(tmp_path / "raw.csv"),
            spark_arguments=["--label", "local", "--quarantine-uri", str(quarantine)],
            local_cores=1,
        )
    )
    (tmp_path / "report").write_text('{"stale": 1}')  # what a failed earlier attempt left

    result = stage.STAGE.run_local(settings)

    rows = pq.read_table(tmp_path / "output").to_pylist()
    assert sorted((row["id"], row["amount"], row["label"]) for row in rows) == [
        ("1", 10.5, "local"),
        ("2", 3.0, "local"),
        ("5", 0.0, "local"),
    ]
    assert sorted(pq.read_table(quarantine).column("reason").to_pylist()) == [
        "missing_id",
        "negative_amount",
        "unparseable_amount",
    ]
    assert result.metrics["report"] == {
        "rows_read": 6.0,
        "rows_valid": 3.0,
        "rows_quarantined": 3.0,
        "quarantined_fraction": 0.5,
        "quarantined.missing_id": 1.0,
        "quarantined.negative_amount": 1.0,
        "quarantined.unparseable_amount": 1.0,
        "rows_written": 3.0,
        "argv_length": 5.0,  # the application's name and its four arguments
    }
    assert result.reference["kind"] == "spark-submit" and result.reference["master"] == "local[1]"


def test_with_uri_locations_the_application_is_told_file_uris(tmp_path, monkeypatch):
    """Spark reads and writes ``file://`` itself; code that takes the location for a path does
    not, as on a cluster with ``s3a://``."""
    from kfstack.uris import URI_LOCATIONS_ENV

    raw = tmp_path / "raw.csv"
    raw.write_text("id\n1\n")
    settings = stage.STAGE.settings(arguments(tmp_path, input_uri=str(raw)))
    assert stage.STAGE.local_job(settings).env["KFSTACK_INPUT_URI"] == str(raw)
    monkeypatch.setenv(URI_LOCATIONS_ENV, "1")
    env = stage.STAGE.local_job(settings).env
    assert env["KFSTACK_INPUT_URI"] == f"file://{raw}"
    assert env["KFSTACK_OUTPUT_URI"] == f"file://{os.path.abspath(settings.output_uri)}"
