"""Every ``kfstack`` command on a pipeline from an installed project package -- a team's, which
kfstack has never heard of -- exactly as on the examples.

The package is written into a site folder on the path with the ``*.dist-info`` metadata pip
would leave (what ``importlib.metadata`` reads for a wheel installed into a venv). Its pipeline
runs kfstack's own Spark step and a component of the team's. The KFP API is
:mod:`tests.app.fake_kfp_server` over real HTTP; the local run is a real ``kfp.local`` run.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
import yaml

from kfstack.app import cli
from kfstack.images import COMPONENT_IMAGE
from tests.app import fake_kfp_server
from tests.installed import install_metadata

PIPELINE = "team-churn"
V1 = "2.0.0+abc1234"
TEAM_IMAGE = "registry.example.com/team/churn-launcher:2.0.0"
fake_kfp = fake_kfp_server.fake_kfp

PIPELINE_MODULE = """
    from kfp import dsl

    from kfstack.components.data.spark_job.component import spark_job
    from kfstack.pipelines import PipelineEntry

    RUN_ID = dsl.PIPELINE_JOB_ID_PLACEHOLDER
    TASK = dsl.PIPELINE_TASK_NAME_PLACEHOLDER


    @dsl.component(base_image="python:3.11")
    def summarize(greeting: str) -> str:
        return f"{greeting}: done"


    @dsl.pipeline(name="team-churn", description="A team's churn pipeline.")
    def team_churn(platform: str = "kubernetes", prepare: bool = True, greeting: str = "churn"):
        with dsl.If(prepare == True, name="prepare"):  # noqa: E712 (a KFP condition, not Python's)
            spark_job(
                platform=platform,
                spark_application="team_churn.prepare",
                spark_arguments=["--rows", "100"],
                run_id=RUN_ID,
                task_name=TASK,
            )
        summarize(greeting=greeting)


    def check(parameters):
        if parameters.get("greeting") == "":
            raise ValueError("greeting: say something")


    REGISTRATION = PipelineEntry(
        function="team_churn.pipeline:team_churn",
        check="team_churn.pipeline:check",
        task_image="registry.example.com/team/churn-launcher:2.0.0",
    )
"""


@pytest.fixture
def team_project(tmp_path, monkeypatch):
    """The team's package, installed: its module and its ``kfstack.pipelines`` entry point."""
    site = tmp_path / "site"
    (site / "team_churn").mkdir(parents=True)
    (site / "team_churn" / "__init__.py").write_text("")
    (site / "team_churn" / "pipeline.py").write_text(textwrap.dedent(PIPELINE_MODULE))
    # Its PySpark application (never run here: render and the checks only import-check it).
    (site / "team_churn" / "prepare.py").write_text("import sys\n\nprint('rows', sys.argv[1:])\n")
    install_metadata(
        site,
        "team-churn",
        {"kfstack.pipelines": {PIPELINE: "team_churn.pipeline:REGISTRATION"}},
        version="2.0.0",
    )
    monkeypatch.syspath_prepend(str(site))
    # The processes a run starts see the package too, as they would in the team's venv.
    monkeypatch.setenv("PYTHONPATH", str(site))
    return site


def _document(path):
    with open(path, encoding="utf-8") as f:
        return next(yaml.safe_load_all(f))


def main(capsys, argv):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_list_describe_compile_and_render_a_teams_pipeline(team_project, tmp_path, capsys):
    assert PIPELINE in main(capsys, ["list"]).split()
    described = main(capsys, ["describe", PIPELINE])
    assert described.startswith("team-churn\nA team's churn pipeline.") and "greeting" in described
    (path,) = main(capsys, ["compile", PIPELINE, "--out", str(tmp_path / "dist")]).split()
    spec = _document(path)
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    # kfstack's task runs in the team's image (its package installed); the team's own keeps its own.
    assert images == {TEAM_IMAGE, "python:3.11"} and COMPONENT_IMAGE not in images
    written = main(capsys, ["render", PIPELINE, "--out", str(tmp_path / "objects")]).splitlines()
    (application,) = [_document(p) for p in written if p.endswith(".yaml")]
    assert application["kind"] == "SparkApplication"
    assert application["spec"]["arguments"][:3] == ["team_churn.prepare", "--rows", "100"]
    # The pipeline's own rule, before anything is rendered.
    assert cli.main(["render", PIPELINE, "--out", str(tmp_path / "no"), "--param", "greeting="]) == 2
    assert "greeting: say something" in capsys.readouterr().err


def test_the_task_image_can_be_given_when_compiling(team_project, tmp_path, capsys):
    image = "registry.example.com/team/churn-launcher:2.0.1"
    (path,) = main(capsys, ["compile", PIPELINE, "--out", str(tmp_path), "--task-image", image]).split()
    spec = _document(path)
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert images == {image, "python:3.11"}  # neither the registration's nor kfstack's launcher
    assert cli.main(["compile", PIPELINE, "--out", str(tmp_path), "--task-image", "a b"]) == 2
    assert "--task-image 'a b': an image reference" in capsys.readouterr().err
    # An image is one pipeline's: compiling every installed pipeline into it is refused.
    assert cli.main(["compile", "--out", str(tmp_path), "--task-image", image]) == 2
    assert "name the pipelines it is for" in capsys.readouterr().err


def test_a_pipeline_outside_kfstack_without_a_task_image_is_noted(
    team_project, tmp_path, capsys, monkeypatch
):
    from kfstack.pipelines import PipelineEntry

    bare = PipelineEntry(function="team_churn.pipeline:team_churn")
    monkeypatch.setattr("team_churn.pipeline.REGISTRATION", bare, raising=False)
    import team_churn.pipeline

    monkeypatch.setattr(team_churn.pipeline, "REGISTRATION", bare)
    assert cli.main(["compile", PIPELINE, "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert f"note: {PIPELINE}: kfstack's tasks run in {COMPONENT_IMAGE}" in err and "--task-image" in err


def test_upload_run_and_schedule_a_teams_pipeline_on_a_kfp_server(team_project, fake_kfp, capsys):
    host = ["--host", fake_kfp.url]
    main(capsys, ["upload", PIPELINE, "--pipeline-version", V1, *host])
    (uploaded,) = fake_kfp.calls("POST", "/pipelines/upload_version")
    executors = uploaded.body["spec"]["deploymentSpec"]["executors"].values()
    assert TEAM_IMAGE in {e["container"]["image"] for e in executors}
    main(capsys, ["run", PIPELINE, "--param", "greeting=hello", *host])
    (run,) = fake_kfp.calls("POST", "/runs")
    assert run.body["runtime_config"]["parameters"] == {"greeting": "hello"}
    main(capsys, ["schedule", PIPELINE, "--cron", "0 0 3 * * *", *host])
    (recurring,) = fake_kfp.calls("POST", "/recurringruns")
    assert recurring.body["display_name"] == PIPELINE
    # The pipeline's rule holds before the server hears of a run.
    assert cli.main(["run", PIPELINE, "--param", "greeting=", *host]) == 2
    assert len(fake_kfp.calls("POST", "/runs")) == 1


def test_run_a_teams_pipeline_embedded(team_project, tmp_path, capsys):
    summary = tmp_path / "summary.json"
    argv = [
        "run",
        "--local",
        PIPELINE,
        "--pipeline-root",
        str(tmp_path / "runs"),
        "--summary-json",
        str(summary),
    ]
    main(capsys, [*argv, "--param", "prepare=false", "--param", "greeting=hi"])
    with open(summary, encoding="utf-8") as f:
        result = json.load(f)
    assert result["status"] == "SUCCEEDED" and result["pipeline"] == PIPELINE
    assert "summarize" in result["stages"] and "spark-job" not in result["stages"]


def test_a_data_step_that_writes_no_report_is_said_so_in_the_summary(team_project, tmp_path, capsys):
    """The team's Spark application (a plain script) writes nothing to KFSTACK_REPORT_PATH: the
    run succeeds, as a report is optional, and its summary says there are no row counts."""
    summary = tmp_path / "summary.json"
    argv = [
        "run",
        "--local",
        PIPELINE,
        "--pipeline-root",
        str(tmp_path / "runs"),
        "--summary-json",
        str(summary),
    ]
    out = main(capsys, argv)
    with open(summary, encoding="utf-8") as f:
        result = json.load(f)
    assert result["status"] == "SUCCEEDED" and "spark-job" in result["stages"]
    assert result["data"] == {}
    assert result["data_unreported"].startswith(
        "no row counts: the data step's application wrote no report to $KFSTACK_REPORT_PATH"
    )
    assert f"data       {result['data_unreported']}" in out.splitlines()


# A default computed from __file__ is a path of the machine that renders: a cluster's pods have
# no such file.
LOCAL_DEFAULT_MODULE = """
    from pathlib import Path

    from kfp import dsl

    from kfstack.components.data.spark_job.component import spark_job

    HERE = Path(__file__).parent
    SAMPLE = str(HERE / "sample.csv")


    @dsl.pipeline(name="team-local-default")
    def with_a_local_default(platform: str = "kubernetes", input_uri: str = SAMPLE):
        spark_job(
            platform=platform,
            spark_application="team_churn.prepare",
            input_uri=input_uri,
            run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            task_name=dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
        )


    @dsl.pipeline(name="team-local-argument")
    def with_a_local_argument(platform: str = "kubernetes"):
        spark_job(
            platform=platform,
            spark_application="team_churn.prepare",
            spark_arguments=["--lookup=" + str(HERE / "lookup.csv"), "--rows=100"],
            run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            task_name=dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
        )
"""


def test_a_path_of_the_machine_that_renders_is_refused_naming_the_parameter(
    team_project, tmp_path, capsys, monkeypatch
):
    # The package as this test's site has it, not as an earlier test imported it from its own.
    for module in [name for name in sys.modules if name.partition(".")[0] == "team_churn"]:
        monkeypatch.delitem(sys.modules, module)
    (team_project / "team_churn" / "local_default.py").write_text(textwrap.dedent(LOCAL_DEFAULT_MODULE))
    for name in ("sample.csv", "lookup.csv"):
        (team_project / "team_churn" / name).write_text("x\n1\n")
    sample = str(team_project / "team_churn" / "sample.csv")
    pipeline = "team_churn.local_default:with_a_local_default"
    out = tmp_path / "objects"
    assert cli.main(["render", pipeline, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"a path of this machine would reach the cluster, where no pod has it: input_uri={sample!r}" in err
    assert "--param NAME=VALUE" in err and not out.exists()  # nothing written
    # A location the cluster reads renders; so does a path this machine has not (an image's).
    for location in ("s3://team-data/churn/sample.csv", "/opt/data/sample.csv"):
        assert cli.main(["render", pipeline, "--out", str(out), "--param", f"input_uri={location}"]) == 0
        capsys.readouterr()
    # Given with --param it is refused the same way.
    lookup = str(team_project / "team_churn" / "lookup.csv")
    assert cli.main(["render", pipeline, "--out", str(out), "--param", f"input_uri=file://{lookup}"]) == 2
    assert f"input_uri={lookup!r}" in capsys.readouterr().err
    # A path the pipeline writes into a step's arguments itself is named as that step's.
    argument = "team_churn.local_default:with_a_local_argument"
    assert cli.main(["render", argument, "--out", str(tmp_path / "other")]) == 2
    assert f"spark-job's spark_arguments={lookup!r}" in capsys.readouterr().err
    # An embedded run's checks take the same path: this machine has it.
    from kfstack.pipelines import rendering

    assert rendering.render(pipeline, {"platform": "local"}, run_id="local-check")
