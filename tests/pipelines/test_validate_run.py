"""The validate_run component (pipelines/validate_run.py), on a team's own pipeline written from
scratch: its plain check (``kfstack.pipelines.rendering.check_run_parameters``) accepts what
every launching stage accepts and refuses a bad value, an unknown platform and a cluster run
without a cluster; in a fresh interpreter (the task's way) the check's own error comes back; and
the component under kfp.local.

It lives with the pipelines, so its tests do too. A refused value failing the task, and so the
run, before any stage starts is tested with the flights pipelines (test_flights_training_local.py,
test_platform_guard.py).
"""

from __future__ import annotations

import textwrap

import pytest

from kfstack.errors import InvalidParameterError, PlatformNotAvailableError
from kfstack.pipelines import check_in_fresh_interpreter
from kfstack.pipelines.rendering import check_run_parameters
from tests.kfp_local import run_pipeline, task_outputs

PIPELINE = "team_data:team_data"  # named as module:function, as on the command line

TEAM_PIPELINE = """
from kfp import dsl

from kfstack.components.data.spark_job.component import spark_job
from kfstack.pipelines import wiring


@dsl.pipeline(name="team-data")
def team_data(
    platform: str = "local",
    spark_application: str = "team_job",
    spark_driver_memory: str = "2g",
    object_store_secret: str = "kfstack-object-store",
):
    parameters = dict(locals())
    with wiring.guarded({pipeline!r}, parameters) as checked:
        job = wiring.call(spark_job, parameters, run_id=wiring.RUN_ID, task_name=wiring.TASK_NAME)
        job.after(checked)
"""


@pytest.fixture
def team_pipeline(tmp_path, monkeypatch) -> str:
    """A team's pipeline module on the path of this process and of every one it starts."""
    code = tmp_path / "team_code"
    code.mkdir()
    (code / "team_data.py").write_text(textwrap.dedent(TEAM_PIPELINE.format(pipeline=PIPELINE)))
    # Its Spark application, a module: run as python -m runs it, here and in the Spark image.
    (code / "team_job.py").write_text("print('rows_written=0')\n")
    monkeypatch.syspath_prepend(str(code))
    monkeypatch.setenv("PYTHONPATH", str(code))
    return PIPELINE


def test_what_every_stage_accepts_passes(team_pipeline):
    check_run_parameters(team_pipeline, {"platform": "local"}, "run-1")
    check_run_parameters(team_pipeline, {"platform": "local", "spark_driver_memory": "512m"}, "")


def test_a_bad_value_is_refused_naming_it(team_pipeline):
    with pytest.raises(InvalidParameterError, match=r"spark_driver_memory='2gb': expected Spark memory"):
        check_run_parameters(team_pipeline, {"platform": "local", "spark_driver_memory": "2gb"}, "run-1")


def test_an_unknown_platform_is_refused(team_pipeline):
    with pytest.raises(InvalidParameterError, match=r"platform='cloud'"):
        check_run_parameters(team_pipeline, {"platform": "cloud"}, "run-1")


def test_a_cluster_run_without_a_cluster_fails_before_anything_is_submitted(
    team_pipeline, tmp_path, monkeypatch
):
    # No in-cluster service account here; make sure no kubeconfig is found either.
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KFSTACK_NAMESPACE", raising=False)
    with pytest.raises(PlatformNotAvailableError, match=r"needs a Kubernetes API.*Nothing was submitted"):
        check_run_parameters(
            team_pipeline,
            {"platform": "kubernetes", "spark_application": "local:///opt/team/job.py"},
            "run-1",
        )


@pytest.mark.slow  # test_run_form.py's fresh-interpreter check runs the same round trip by default
def test_in_a_fresh_interpreter_the_checks_own_error_comes_back(team_pipeline):
    with pytest.raises(InvalidParameterError, match=r"spark_driver_memory='2gb': expected Spark memory"):
        check_in_fresh_interpreter(
            team_pipeline, {"platform": "local", "spark_driver_memory": "2gb"}, "run-1"
        )


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_the_component_runs_under_kfp_local(team_pipeline, tmp_path):
    from kfp import dsl

    from kfstack.pipelines.validate_run import validate_run

    @dsl.pipeline(name="team-validate")
    def team_validate():
        validate_run(pipeline=team_pipeline, parameters={"platform": "local"}, run_id="run-1")

    # The task checks in a fresh interpreter (its own runs kfp's executor only) and succeeds;
    # a run without overrides hands every step an empty part of them.
    run = run_pipeline(team_validate, tmp_path / "root")
    parts = task_outputs(run, "validate-run")["parameterValues"]
    assert parts == {output: {} for output in validate_run.component_spec.outputs}
    assert len(parts) == 10
