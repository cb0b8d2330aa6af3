"""``kfstack upload``, ``run`` (on a cluster) and ``schedule`` against a KFP API server, and the cron
rules they apply.

No real KFP server runs here. These are tests at the HTTP boundary: ``kfstack.app.cli.main`` drives
the real ``kfp.Client`` 2.17 and ``kfp_server_api`` over real HTTP against
:mod:`tests.app.fake_kfp_server`, a fake speaking the v2beta1 REST API that checks every request
body against the ``kfp_server_api`` models and records what it received. What the real server
does beyond what the fake reproduces (its docstring lists it) is not tested here.
"""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request

import kfp
import kfp_server_api
import pytest

from kfstack.app import cli
from kfstack.app.cli.compile_ import compile_pipelines
from kfstack.app.cron import parse_cron
from kfstack.app.kfp_server import connection, runs
from kfstack.errors import InvalidParameterError
from kfstack.pipelines import pipeline_names
from kfstack.version import VERSION_ENV
from tests.app import fake_kfp_server
from tests.app.fake_kfp_server import FAILING, FakeKfpServer

PIPELINE = "flights-training"
V1, V2 = "1.2.3+abc1234", "1.2.4+def5678"
POLL = ["--poll-seconds", "0.01"]
# The fake server, serving for one test (a fixture of tests/app/fake_kfp_server.py).
fake_kfp = fake_kfp_server.fake_kfp


def main(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str, command: str) -> str:
    """stderr is exactly one line, ``kfstack <command>: ...``, no traceback (notes and warnings
    printed before it aside: the examples' note that kfstack's launcher image cannot import them,
    ``--token``'s); returns it."""
    lines = [
        line for line in err.splitlines() if line.strip() and not line.startswith(("note: ", "warning: "))
    ]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"kfstack {command}: "), lines[0]
    return lines[0]


def host(server: FakeKfpServer) -> list[str]:
    return ["--host", server.url]


# --- cron -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expression"),
    [
        ("0 0 3 * * *", "0 0 3 * * *"),
        ("0   0 3 * * *", "0 0 3 * * *"),
        ("0 0 9 ? * 2-6", "0 0 9 ? * 2-6"),
        ("0 */15 8-18/2 1,15 JAN-mar,Dec MON-FRI", "0 */15 8-18/2 1,15 JAN-mar,Dec MON-FRI"),
        ("59 59 23 31 12 6", "59 59 23 31 12 6"),
        ("0 0 0 1 * ?", "0 0 0 1 * ?"),
    ],
)
def test_cron_six_fields_pass_unchanged(given, expression):
    cron = parse_cron(given)
    assert (cron.expression, cron.converted) == (expression, False)


@pytest.mark.parametrize(
    ("given", "expression"),
    [
        ("0 3 * * *", "0 0 3 * * *"),
        ("*/10 * * * SUN", "0 */10 * * * SUN"),
        ("30 2 1 */3 ?", "0 30 2 1 */3 ?"),
    ],
)
def test_cron_five_fields_get_zero_seconds(given, expression):
    cron = parse_cron(given)
    assert (cron.expression, cron.original, cron.converted) == (expression, given, True)


@pytest.mark.parametrize(
    ("given", "needle"),
    [
        ("0 61 * * * *", "minute field '61': 61 is out of range 0-59"),
        ("60 * * * * *", "second field '60': 60 is out of range 0-59"),
        ("0 0 24 * * *", "hour field '24'"),
        ("0 0 0 0 * *", "day-of-month field '0': 0 is out of range 1-31"),
        ("0 0 0 * 13 *", "month field '13'"),
        ("0 0 0 * * 7", "day-of-week field '7': 7 is out of range 0-6"),
        ("* * *", "3 field(s); expected 6"),
        ("0 0 0 * * * 2025", "7 field(s); expected 6"),
        ("", "0 field(s)"),
        ("0 */0 * * * *", "minute field '*/0': step must be at least 1"),
        ("0 */x * * * *", "minute field '*/x': step 'x' is not a whole number"),
        ("0 5/15 * * * *", "a step needs a range or *"),
        ("0 0 1-5/10 * * *", "step 10 is larger than the range"),
        ("0 0 ? * * *", "hour field '?': '?' is allowed in day-of-month and day-of-week only"),
        ("0 0 10-5 * * *", "range 10-5 runs backwards"),
        ("0 0 0 * FOO *", "month field 'FOO': 'FOO' is not a number or one of JAN-DEC"),
        ("0 0 0 * * MON-XYZ", "'XYZ' is not a number or one of SUN-SAT"),
        ("0 0 0 * * 1,,2", "day-of-week field '1,,2': item '': empty list item"),
        ("0 0 0 L * *", "day-of-month field 'L'"),
        ("@daily", "descriptors such as @daily are not accepted"),
    ],
)
def test_cron_refused_naming_the_field(given, needle):
    with pytest.raises(InvalidParameterError) as caught:
        parse_cron(given)
    assert needle in str(caught.value)


# --- upload -----------------------------------------------------------------------------------


def test_upload_new_pipeline_first_version_named_with_our_version(capsys, fake_kfp):
    code, out, err = main(capsys, ["upload", PIPELINE, "--pipeline-version", V1, *host(fake_kfp)])
    assert code == 0, err
    pipeline = fake_kfp.pipeline_named(PIPELINE)
    (version,) = fake_kfp.versions_of(pipeline["pipeline_id"])
    # The workaround: the pipeline entity alone, then the version -- never /pipelines/upload,
    # whose first version would be named after the pipeline.
    assert fake_kfp.calls("POST", "/pipelines/upload") == []
    (created,) = fake_kfp.calls("POST", "/pipelines")
    assert created.body["name"] == created.body["display_name"] == PIPELINE
    assert created.body["description"].startswith("Flight delay classifier")
    (uploaded,) = fake_kfp.calls("POST", "/pipelines/upload_version")
    assert uploaded.query["pipelineid"] == pipeline["pipeline_id"]
    assert uploaded.body["spec"]["pipelineInfo"]["name"] == PIPELINE
    assert (version["display_name"], version["name"]) == (V1, "1.2.3-abc1234")
    assert version["display_name"] != PIPELINE
    pid, vid = pipeline["pipeline_id"], version["pipeline_version_id"]
    assert f"first version {V1}" in out and pid in out and vid in out
    assert f"{fake_kfp.url}/#/pipelines/details/{pid}/version/{vid}" in out


def test_the_fake_names_an_uploaded_pipelines_first_version_after_the_pipeline(fake_kfp):
    # What kfstack works around, reproduced: kfp.Client.upload_pipeline's first version.
    with kfp_server_connect(fake_kfp) as client:
        pipeline = client.upload_pipeline(_compiled(), pipeline_name="someone-else")
    (version,) = fake_kfp.versions_of(pipeline.pipeline_id)
    assert version["display_name"] == "someone-else"


def kfp_server_connect(server: FakeKfpServer):
    return connection.connect(server.url)


def _compiled() -> str:
    import tempfile

    out_dir = tempfile.mkdtemp(prefix="kfstack-test-")
    (path,) = compile_pipelines([PIPELINE], out_dir, V1)
    return path


def test_upload_same_version_again_is_not_duplicated(capsys, fake_kfp):
    argv = ["upload", PIPELINE, "--pipeline-version", V1, *host(fake_kfp)]
    assert main(capsys, argv)[0] == 0
    fake_kfp.requests.clear()
    code, out, err = main(capsys, argv)
    assert code == 0, err
    assert f"{PIPELINE} version {V1} already uploaded" in out and "nothing uploaded" in out
    assert fake_kfp.writes() == []
    pipeline = fake_kfp.pipeline_named(PIPELINE)
    assert len(fake_kfp.versions_of(pipeline["pipeline_id"])) == 1


def test_upload_new_version_of_existing_pipeline(capsys, fake_kfp):
    pid, (_old,) = fake_kfp.seed(PIPELINE, V1)
    code, out, err = main(capsys, ["upload", PIPELINE, "--pipeline-version", V2, *host(fake_kfp)])
    assert code == 0, err
    assert fake_kfp.calls("POST", "/pipelines") == []
    versions = {v["display_name"]: v for v in fake_kfp.versions_of(pid)}
    assert set(versions) == {V1, V2}
    new = versions[V2]["pipeline_version_id"]
    assert f"uploaded version {V2}" in out
    assert f"/#/pipelines/details/{pid}/version/{new}" in out


def test_upload_adopts_a_pipeline_uploaded_by_kfp_itself(capsys, fake_kfp):
    # A pipeline created through /pipelines/upload (first version named after it) gets our
    # version beside that one.
    with kfp_server_connect(fake_kfp) as client:
        pipeline = client.upload_pipeline(_compiled(), pipeline_name=PIPELINE)
    code, _out, err = main(capsys, ["upload", PIPELINE, "--pipeline-version", V2, *host(fake_kfp)])
    assert code == 0, err
    names = sorted(v["display_name"] for v in fake_kfp.versions_of(pipeline.pipeline_id))
    assert names == sorted([PIPELINE, V2])


def test_upload_all_with_the_default_version(capsys, fake_kfp, monkeypatch):
    monkeypatch.setenv(VERSION_ENV, "7.7.7+cafe")
    code, out, err = main(capsys, ["upload", *host(fake_kfp)])
    assert code == 0, err
    assert sorted(p["display_name"] for p in fake_kfp.pipelines.values()) == pipeline_names()
    assert {v["display_name"] for v in fake_kfp.versions.values()} == {"7.7.7+cafe"}
    assert out.count("created the pipeline with first version 7.7.7+cafe") == len(pipeline_names())


def test_upload_unknown_pipeline_sends_nothing(capsys, fake_kfp):
    code, _out, err = main(capsys, ["upload", "nope", *host(fake_kfp)])
    assert code == 2
    assert "unknown pipeline 'nope'" in one_error_line(err, "upload")
    assert fake_kfp.requests == []


# --- run --------------------------------------------------------------------------------------


def test_run_latest_version_with_params(capsys, fake_kfp):
    pid, (_, latest) = fake_kfp.seed(PIPELINE, V1, V2)
    argv = ["run", PIPELINE, "--param", "sample_fraction=0.25", "--param", "epochs=2", *host(fake_kfp)]
    code, out, err = main(capsys, argv)
    assert code == 0, err
    (request,) = fake_kfp.calls("POST", "/runs")
    body = request.body
    assert body["pipeline_version_reference"] == {"pipeline_id": pid, "pipeline_version_id": latest}
    assert body["runtime_config"]["parameters"] == {"sample_fraction": 0.25, "epochs": 2}
    # No account named: none sent, the server's default runs it.
    assert "service_account" not in body and "service account" not in out
    (experiment,) = fake_kfp.experiments.values()
    assert experiment["display_name"] == PIPELINE and body["experiment_id"] == experiment["experiment_id"]
    (run_id,) = fake_kfp.runs
    assert f"started run {run_id}: {PIPELINE} version {V2}" in out
    assert f"{fake_kfp.url}/#/runs/details/{run_id}" in out
    assert fake_kfp.calls("GET", f"/runs/{run_id}") == []  # no --wait: no polling


def test_run_pinned_version_in_named_experiment(capsys, fake_kfp):
    _pid, (pinned, _) = fake_kfp.seed(PIPELINE, V1, V2)
    argv = ["run", PIPELINE, "--version", V1, "--experiment", "nightly", *host(fake_kfp)]
    for _ in range(2):
        code, _out, err = main(capsys, argv)
        assert code == 0, err
    runs = fake_kfp.calls("POST", "/runs")
    assert [r.body["pipeline_version_reference"]["pipeline_version_id"] for r in runs] == [pinned, pinned]
    assert all(r.body["runtime_config"] == {"parameters": {}} for r in runs)
    # The experiment is created once, then found.
    (created,) = fake_kfp.calls("POST", "/experiments")
    assert created.body["display_name"] == "nightly"


def test_run_pinned_version_by_its_label_safe_name(capsys, fake_kfp):
    _pid, (pinned,) = fake_kfp.seed(PIPELINE, V1)
    code, _out, err = main(capsys, ["run", PIPELINE, "--version", "1.2.3-abc1234", *host(fake_kfp)])
    assert code == 0, err
    (run,) = fake_kfp.calls("POST", "/runs")
    assert run.body["pipeline_version_reference"]["pipeline_version_id"] == pinned


def test_run_pipeline_not_uploaded(capsys, fake_kfp):
    code, _out, err = main(capsys, ["run", PIPELINE, *host(fake_kfp)])
    assert code == 2
    line = one_error_line(err, "run")
    assert f"pipeline '{PIPELINE}' is not on the KFP server" in line and f"kfstack upload {PIPELINE}" in line
    assert fake_kfp.writes() == []


def test_run_unknown_version(capsys, fake_kfp):
    fake_kfp.seed(PIPELINE, V1, V2)
    code, _out, err = main(capsys, ["run", PIPELINE, "--version", "9.9.9", *host(fake_kfp)])
    assert code == 2
    line = one_error_line(err, "run")
    assert "has no version '9.9.9'" in line and V1 in line and V2 in line
    assert fake_kfp.writes() == []


def test_run_unknown_pipeline_sends_nothing(capsys, fake_kfp):
    code, _out, err = main(capsys, ["run", "nope", *host(fake_kfp)])
    assert code == 2
    assert "unknown pipeline 'nope'" in one_error_line(err, "run")
    assert fake_kfp.requests == []


@pytest.mark.parametrize(
    ("param", "needle"),
    [
        ("epochs=two", "expected a whole number"),
        ("nope=1", "unknown parameter"),
        ("sample_fraction=2", "sample_fraction=2.0 must be <= 1.0"),
        ("gpu_pool=nope", "is not a node pool"),
        ("sample_fraction", "expected NAME=VALUE"),
    ],
)
def test_run_bad_param_submits_nothing(capsys, fake_kfp, param, needle):
    fake_kfp.seed(PIPELINE, V1)
    code, _out, err = main(capsys, ["run", PIPELINE, "--param", param, *host(fake_kfp)])
    assert code == 2
    assert needle in one_error_line(err, "run")
    assert fake_kfp.requests == []


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--pipeline-root", "runs"], "--pipeline-root: only with --local"),
        (["--verbose"], "--verbose: only with --local"),
        (["--resume", "runs/x"], "--resume: only with --local"),
        (["--summary-json", "s.json"], "--summary-json on a cluster run needs --wait"),
        (["--wait", "--poll-seconds", "0"], "--poll-seconds 0: must be positive"),
    ],
)
def test_run_on_cluster_refuses_local_flags(capsys, fake_kfp, flags, needle):
    code, _out, err = main(capsys, ["run", PIPELINE, *flags, *host(fake_kfp)])
    assert code == 2
    assert needle in one_error_line(err, "run")
    assert fake_kfp.requests == []


@pytest.mark.parametrize(
    "flags",
    [
        ["--wait"],
        ["--version", V1],
        ["--experiment", "x"],
        ["--host", "h"],
        ["--service-account", "kfstack-runner"],
        ["--env", "prod"],
    ],
)
def test_run_local_refuses_cluster_flags(capsys, tmp_path, flags):
    code, _out, err = main(
        capsys, ["run", "--local", PIPELINE, "--pipeline-root", str(tmp_path / "runs"), *flags]
    )
    assert code == 2
    assert "for runs on a Kubeflow cluster; drop with --local" in one_error_line(err, "run")
    assert not (tmp_path / "runs").exists()


def _task_lines(out: str) -> list[tuple[str, str]]:
    return re.findall(r"^\d\d:\d\d:\d\d  (\S+)\s+(\S+)$", out, flags=re.MULTILINE)


def test_run_wait_success_exits_0_with_a_line_per_task_change(capsys, fake_kfp, tmp_path):
    fake_kfp.seed(PIPELINE, V1)
    summary = tmp_path / "out" / "run.json"
    argv = ["run", PIPELINE, "--wait", *POLL, "--summary-json", str(summary), *host(fake_kfp)]
    code, out, err = main(capsys, argv)
    assert code == 0, err
    assert _task_lines(out) == [
        ("validate-parameters", "RUNNING"),
        ("validate-parameters", "SUCCEEDED"),
        ("distributed-training", "RUNNING"),
        ("distributed-training", "SUCCEEDED"),
    ]
    (run_id,) = fake_kfp.runs
    assert out.splitlines()[-1] == f"run {run_id} SUCCEEDED: {fake_kfp.url}/#/runs/details/{run_id}"
    record = json.loads(summary.read_text())
    assert record["status"] == "SUCCEEDED" and record["run_id"] == run_id and record["version"] == V1
    assert record["tasks"][-1] == {"name": "distributed-training", "state": "SUCCEEDED"}


def test_run_wait_failure_exits_1(capsys, fake_kfp):
    fake_kfp.seed(PIPELINE, V1)
    fake_kfp.run_script = FAILING
    code, out, err = main(capsys, ["run", PIPELINE, "--wait", *POLL, *host(fake_kfp)])
    assert code == 1
    assert _task_lines(out)[-1] == ("distributed-training", "FAILED")
    (run_id,) = fake_kfp.runs
    assert f"run {run_id} FAILED" in out
    line = one_error_line(err, "run")
    assert f"run {run_id} ended FAILED: task distributed-training failed: loss is NaN" in line


def test_run_wait_ctrl_c_leaves_the_run_running(capsys, fake_kfp, monkeypatch):
    fake_kfp.seed(PIPELINE, V1)

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runs.time, "sleep", interrupted)
    code, _out, err = main(capsys, ["run", PIPELINE, "--wait", *POLL, *host(fake_kfp)])
    assert code == 130
    (run_id,) = fake_kfp.runs
    line = one_error_line(err, "run")
    assert "was not cancelled and keeps running on the cluster" in line
    assert f"{fake_kfp.url}/#/runs/details/{run_id}" in line
    assert [r.path for r in fake_kfp.writes()] == ["/apis/v2beta1/experiments", "/apis/v2beta1/runs"]


# --- schedule ---------------------------------------------------------------------------------


def test_schedule_latest_version(capsys, fake_kfp):
    pid, _ = fake_kfp.seed(PIPELINE, V1, V2)
    argv = ["schedule", PIPELINE, "--cron", "0 0 3 * * *", "--param", "epochs=3", *host(fake_kfp)]
    code, out, err = main(capsys, argv)
    assert code == 0, err
    assert err == ""  # six fields: no conversion note
    (request,) = fake_kfp.calls("POST", "/recurringruns")
    body = request.body
    assert body["display_name"] == PIPELINE
    assert body["max_concurrency"] == "1" and body["no_catchup"] is True and body["mode"] == "ENABLE"
    assert body["trigger"] == {"cron_schedule": {"cron": "0 0 3 * * *"}}
    # Latest: the pipeline id alone, each run takes the newest version.
    assert body["pipeline_version_reference"] == {"pipeline_id": pid}
    assert body["runtime_config"] == {"parameters": {"epochs": 3}}
    (experiment,) = fake_kfp.experiments.values()
    assert body["experiment_id"] == experiment["experiment_id"]
    (recurring_id,) = fake_kfp.recurring_runs
    assert f"scheduled {PIPELINE} ({recurring_id})" in out and f"latest version (now {V2})" in out
    assert f"{fake_kfp.url}/#/recurringrun/details/{recurring_id}" in out


def test_schedule_pinned_version_default_name(capsys, fake_kfp):
    pid, (pinned, _) = fake_kfp.seed(PIPELINE, V1, V2)
    code, _out, err = main(
        capsys, ["schedule", PIPELINE, "--cron", "0 0 3 * * *", "--version", V1, *host(fake_kfp)]
    )
    assert code == 0, err
    (request,) = fake_kfp.calls("POST", "/recurringruns")
    assert request.body["display_name"] == f"{PIPELINE}-1.2.3-abc1234"
    assert request.body["pipeline_version_reference"] == {"pipeline_id": pid, "pipeline_version_id": pinned}


def test_schedule_five_fields_converted_with_a_note(capsys, fake_kfp):
    fake_kfp.seed(PIPELINE, V1)
    code, _out, err = main(capsys, ["schedule", PIPELINE, "--cron", "0 3 * * *", *host(fake_kfp)])
    assert code == 0, err
    assert "5-field cron '0 3 * * *' converted" in err and "'0 0 3 * * *'" in err
    (request,) = fake_kfp.calls("POST", "/recurringruns")
    assert request.body["trigger"]["cron_schedule"]["cron"] == "0 0 3 * * *"


@pytest.mark.parametrize(
    ("cron", "needle"),
    [
        ("0 61 * * * *", "minute field '61': 61 is out of range 0-59"),
        ("* * *", "3 field(s)"),
        ("0 0 */0 * * *", "hour field '*/0': step must be at least 1"),
        ("0 0 3 * * * *", "7 field(s)"),
        ("0 0 3 32 * *", "day-of-month field '32'"),
    ],
)
def test_schedule_invalid_cron_sends_nothing(capsys, fake_kfp, cron, needle):
    code, _out, err = main(capsys, ["schedule", PIPELINE, "--cron", cron, *host(fake_kfp)])
    assert code == 2
    assert needle in one_error_line(err, "schedule")
    assert fake_kfp.requests == []


def test_schedule_same_name_replaces(capsys, fake_kfp):
    fake_kfp.seed(PIPELINE, V1)
    assert main(capsys, ["schedule", PIPELINE, "--cron", "0 0 3 * * *", *host(fake_kfp)])[0] == 0
    (old,) = fake_kfp.recurring_runs
    code, out, err = main(capsys, ["schedule", PIPELINE, "--cron", "0 30 4 * * *", *host(fake_kfp)])
    assert code == 0, err
    (new,) = fake_kfp.recurring_runs
    assert new != old and fake_kfp.recurring_runs[new]["trigger"]["cron_schedule"]["cron"] == "0 30 4 * * *"
    assert f"replaced the earlier schedule {PIPELINE} ({old})" in out
    # Created first, then the old one deleted: never unscheduled.
    writes = [(r.method, r.path) for r in fake_kfp.writes()]
    assert writes[-2:] == [
        ("POST", "/apis/v2beta1/recurringruns"),
        ("DELETE", f"/apis/v2beta1/recurringruns/{old}"),
    ]


def put_schedule(fake_kfp, run_id: str, name: str, pipeline_id: str, version_id: str, status: str) -> None:
    """A recurring run of another pipeline on the server, as someone else made it (daily 01:00)."""
    fake_kfp.recurring_runs[run_id] = {
        "recurring_run_id": run_id,
        "display_name": name,
        "pipeline_version_reference": {"pipeline_id": pipeline_id, "pipeline_version_id": version_id},
        "trigger": {"cron_schedule": {"cron": "0 0 1 * * *"}},
        "max_concurrency": "1",
        "status": status,
        "experiment_id": next(iter(fake_kfp.experiments)),
        "created_at": "2030-01-01T00:00:00Z",
    }


def test_schedule_does_not_take_the_name_of_another_pipelines_schedule(capsys, fake_kfp):
    fake_kfp.seed(PIPELINE, V1)
    other_pid, (other_version,) = fake_kfp.seed("other-pipeline", "0.9")
    assert main(capsys, ["schedule", PIPELINE, "--cron", "0 0 3 * * *", *host(fake_kfp)])[0] == 0
    fake_kfp.recurring_runs.clear()
    put_schedule(fake_kfp, "theirs", "nightly", other_pid, other_version, "ENABLED")
    code, _out, err = main(
        capsys, ["schedule", PIPELINE, "--cron", "0 0 4 * * *", "--name", "nightly", *host(fake_kfp)]
    )
    assert code == 2
    assert "schedule 'nightly' runs another pipeline" in one_error_line(err, "schedule")
    assert list(fake_kfp.recurring_runs) == ["theirs"]  # nothing created, nothing deleted


def test_schedule_list_and_delete(capsys, fake_kfp):
    fake_kfp.seed(PIPELINE, V1)
    other_pid, (other_version,) = fake_kfp.seed("other-pipeline", "0.9")
    for argv in (
        ["--cron", "0 0 3 * * *"],
        ["--cron", "0 0 5 * * MON", "--version", V1, "--service-account", "kfstack-runner"],
    ):
        assert main(capsys, ["schedule", PIPELINE, *argv, *host(fake_kfp)])[0] == 0
    put_schedule(fake_kfp, "recurring-other", "other", other_pid, other_version, "DISABLED")
    code, out, err = main(capsys, ["schedule", "--list", *host(fake_kfp)])
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["NAME", "ID", "CRON", "STATUS", "PIPELINE", "VERSION", "SERVICE-ACCOUNT"]
    by_name = {row[0]: row for row in rows[1:]}
    assert set(by_name) == {PIPELINE, f"{PIPELINE}-1.2.3-abc1234", "other"}
    # The account as the server reports it: its default where none was named; "-" where the
    # server reports none (an older one).
    assert " ".join(by_name[PIPELINE][2:]) == f"0 0 3 * * * ENABLED {PIPELINE} latest pipeline-runner"
    assert by_name[f"{PIPELINE}-1.2.3-abc1234"][-2:] == [V1, "kfstack-runner"]
    assert by_name["other"][-4:] == ["DISABLED", "other-pipeline", "0.9", "-"]

    code, out, err = main(capsys, ["schedule", "--list", PIPELINE, *host(fake_kfp)])
    assert code == 0, err
    assert "other" not in {line.split()[0] for line in out.splitlines()}

    (doomed,) = (i for i, r in fake_kfp.recurring_runs.items() if r["display_name"] == PIPELINE)
    code, out, err = main(capsys, ["schedule", "--delete", PIPELINE, *host(fake_kfp)])
    assert code == 0, err
    assert f"deleted schedule {PIPELINE} ({doomed})" in out
    assert doomed not in fake_kfp.recurring_runs and len(fake_kfp.recurring_runs) == 2


def put_old_schedule(fake_kfp, run_id: str, name: str, pipeline_id: str, arguments: dict, version_id=None):
    """A schedule of PIPELINE made before the run form: its settings among its parameters."""
    put_schedule(fake_kfp, run_id, name, pipeline_id, version_id, "ENABLED")
    fake_kfp.recurring_runs[run_id]["runtime_config"] = {"parameters": arguments}
    fake_kfp.recurring_runs[run_id]["service_account"] = "kfstack-runner"
    if version_id is None:
        del fake_kfp.recurring_runs[run_id]["pipeline_version_reference"]["pipeline_version_id"]


def test_upload_moves_a_schedule_following_latest_into_the_run_form(capsys, fake_kfp):
    """A schedule that follows the latest version and passes settings (and a parameter's earlier
    name) as parameters would fail once a run-form version is uploaded: upload creates it again
    with them in settings_overrides, says so as deprecated, and leaves pinned ones alone."""
    pid, (v1,) = fake_kfp.seed(PIPELINE, V1)
    fake_kfp.experiments["exp"] = {"experiment_id": "exp", "display_name": "Default", "namespace": ""}
    old = {"epochs": 3, "gpu_pool": "a100", "canary_max_auc_drop": 0.01}
    put_old_schedule(fake_kfp, "nightly-id", "nightly", pid, old)
    put_old_schedule(fake_kfp, "pinned-id", "pinned", pid, old, version_id=v1)
    code, _out, err = main(capsys, ["upload", PIPELINE, "--pipeline-version", V2, *host(fake_kfp)])
    assert code == 0, err
    assert "nightly-id" not in fake_kfp.recurring_runs  # replaced (created first, then deleted)
    (moved,) = (r for r in fake_kfp.recurring_runs.values() if r["display_name"] == "nightly")
    assert moved["runtime_config"]["parameters"] == {
        "epochs": 3,
        "settings_overrides": {"gpu_pool": "a100", "canary_max_quality_drop": 0.01},
    }
    assert moved["pipeline_version_reference"] == {"pipeline_id": pid}  # still follows latest
    assert moved["trigger"] == {"cron_schedule": {"cron": "0 0 1 * * *"}}
    assert moved["service_account"] == "kfstack-runner" and moved["experiment_id"] == "exp"
    assert "kfstack upload: deprecated: schedule 'nightly'" in err
    assert "canary_max_auc_drop, gpu_pool" in err
    # Pinned: it runs V1, whose parameters those are.
    assert fake_kfp.recurring_runs["pinned-id"]["runtime_config"]["parameters"] == old
    assert "'pinned'" not in err


def test_upload_names_a_schedule_it_cannot_move_and_leaves_it(capsys, fake_kfp):
    pid, _ = fake_kfp.seed(PIPELINE, V1)
    fake_kfp.experiments["exp"] = {"experiment_id": "exp", "display_name": "Default", "namespace": ""}
    # object_store_secret is compiled in and not overridable per run: no run form takes it.
    put_old_schedule(fake_kfp, "nightly-id", "nightly", pid, {"object_store_secret": "team-store"})
    code, _out, err = main(capsys, ["upload", PIPELINE, "--pipeline-version", V2, *host(fake_kfp)])
    assert code == 0, err
    assert fake_kfp.recurring_runs["nightly-id"]["runtime_config"]["parameters"] == {
        "object_store_secret": "team-store"
    }
    assert "kfstack upload: warning: schedule 'nightly'" in err and "its runs will fail" in err
    assert "object_store_secret='team-store': compiled into the pipeline version" in err
    assert f"kfstack schedule {PIPELINE} --name nightly --version VERSION" in err


def test_schedule_delete_unknown(capsys, fake_kfp):
    code, _out, err = main(capsys, ["schedule", "--delete", "nope", *host(fake_kfp)])
    assert code == 2
    assert "no schedule named 'nope'; schedules: none" in one_error_line(err, "schedule")
    assert fake_kfp.writes() == []


def test_schedule_list_unknown_pipeline(capsys, fake_kfp):
    code, _out, err = main(capsys, ["schedule", "--list", PIPELINE, *host(fake_kfp)])
    assert code == 2
    assert f"pipeline '{PIPELINE}' is not on the KFP server" in one_error_line(err, "schedule")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--cron", "0 0 3 * * *"], "--cron needs the PIPELINE"),
        (["--list", "--name", "x"], "--list takes no --name"),
        (["--list", "--service-account", "kfstack-runner"], "--list takes no --service-account"),
        (["--delete", "x", "--env", "prod"], "--delete NAME takes no --env"),
        ([PIPELINE, "--delete", "x"], "--delete NAME takes no PIPELINE"),
    ],
)
def test_schedule_usage(capsys, fake_kfp, argv, needle):
    code, _out, err = main(capsys, ["schedule", *argv, *host(fake_kfp)])
    assert code == 2
    assert needle in one_error_line(err, "schedule")
    assert fake_kfp.requests == []


# --- the service account runs run as -----------------------------------------------------------

ACCOUNT = "kfstack-runner"
# A command that creates a run or a recurring run, and the path it posts it to.
CREATES = {
    "run": (["run", PIPELINE], "/runs"),
    "schedule": (["schedule", PIPELINE, "--cron", "0 0 3 * * *"], "/recurringruns"),
}


def environment_file(tmp_path, account: str | None) -> str:
    path = tmp_path / "staging.yaml"
    text = "parameters:\n  gpu_pool: h100\n"
    path.write_text(text + (f"service_account: {account}\n" if account else ""), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("command", CREATES)
def test_the_service_account_goes_with_what_is_created(capsys, fake_kfp, command):
    fake_kfp.seed(PIPELINE, V1)
    argv, path = CREATES[command]
    code, out, err = main(capsys, [*argv, "--service-account", ACCOUNT, *host(fake_kfp)])
    assert code == 0, err
    (request,) = fake_kfp.calls("POST", path)
    assert request.body["service_account"] == ACCOUNT
    (created,) = (fake_kfp.runs if command == "run" else fake_kfp.recurring_runs).values()
    assert created["service_account"] == ACCOUNT
    assert f"service account {ACCOUNT}" in out


@pytest.mark.parametrize("command", CREATES)
def test_the_environments_service_account_is_the_default_and_the_flag_wins(
    capsys, fake_kfp, tmp_path, command
):
    fake_kfp.seed(PIPELINE, V1)
    argv, path = CREATES[command]
    env = environment_file(tmp_path, "staging-runner")
    for extra in ([], ["--service-account", ACCOUNT]):
        code, _out, err = main(capsys, [*argv, "--env", env, *extra, *host(fake_kfp)])
        assert code == 0, err
    assert [r.body["service_account"] for r in fake_kfp.calls("POST", path)] == ["staging-runner", ACCOUNT]


def test_an_environment_without_a_service_account_leaves_it_to_kfp(capsys, fake_kfp, tmp_path):
    fake_kfp.seed(PIPELINE, V1)
    code, _out, err = main(
        capsys, ["run", PIPELINE, "--env", environment_file(tmp_path, None), *host(fake_kfp)]
    )
    assert code == 0, err
    (request,) = fake_kfp.calls("POST", "/runs")
    assert "service_account" not in request.body
    (run,) = fake_kfp.runs.values()
    assert run["service_account"] == fake_kfp.default_service_account == "pipeline-runner"


@pytest.mark.parametrize("command", CREATES)
@pytest.mark.parametrize(
    ("option", "needle"),
    [
        (["--service-account", "Team_Runner"], "--service-account 'Team_Runner': not a Kubernetes service"),
        (["--service-account", "runner-"], "--service-account 'runner-': not a Kubernetes service"),
        (["--service-account", ""], "--service-account '': not a Kubernetes service account name"),
        ("an environment's", "staging.yaml: service_account 'Team_Runner': not a Kubernetes service"),
        (["--env", "qa"], "no environment 'qa'"),
    ],
)
def test_a_bad_service_account_is_refused_before_any_request(
    capsys, fake_kfp, tmp_path, command, option, needle
):
    fake_kfp.seed(PIPELINE, V1)
    if option == "an environment's":
        option = ["--env", environment_file(tmp_path, "Team_Runner")]
    argv, _path = CREATES[command]
    code, _out, err = main(capsys, [*argv, *option, *host(fake_kfp)])
    assert code == 2
    assert needle in one_error_line(err, command)
    assert fake_kfp.requests == []


# --- connection -------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "argv",
    [["upload", PIPELINE, "--pipeline-version", V1], ["run", PIPELINE], ["schedule", "--list"]],
)
def test_unreachable_host_is_one_line(capsys, argv, monkeypatch, tmp_path):
    monkeypatch.setattr(kfp.Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "context.json"))
    url = f"http://127.0.0.1:{_closed_port()}"
    code, _out, err = main(capsys, [*argv, "--host", url])
    assert code == 2
    line = one_error_line(err, argv[0])
    assert f"cannot reach the KFP API server at {url}: connection refused" in line


def test_host_that_never_answers_times_out_in_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(kfp.Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "context.json"))
    monkeypatch.setattr(connection, "REQUEST_TIMEOUT_S", 0.3)
    with socket.socket() as silent:  # accepts connections (the kernel does), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        code, _, err = main(capsys, ["schedule", "--list", "--host", url])
    assert code == 2
    assert f"cannot reach the KFP API server at {url}: no answer within 0.3 s" in one_error_line(
        err, "schedule"
    )


def test_wrong_token_is_one_line_401(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(kfp.Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "context.json"))
    with FakeKfpServer(token="s3cret") as server:
        server.seed(PIPELINE, V1)
        for token in ([], ["--token", "wrong"]):
            code, _, err = main(capsys, ["run", PIPELINE, *token, *host(server)])
            assert code == 2
            line = one_error_line(err, "run")
            assert "refused the credentials (401" in line and "--token-file FILE" in line
        assert server.runs == {}
        # The token from a file, from the environment, and (warned of) on the command line.
        token_file = tmp_path / "token"
        token_file.write_text("s3cret\n")
        monkeypatch.setenv("KFSTACK_KFP_TOKEN", "s3cret")
        for token in (["--token-file", str(token_file)], [], ["--token", "s3cret"]):
            code, _out, err = main(capsys, ["run", PIPELINE, *token, *host(server)])
            assert code == 0, err
            assert {r.authorization for r in server.requests[-3:]} == {"Bearer s3cret"}
            assert ("warning: --token shows the token in the process list" in err) == (
                token[:1] == ["--token"]
            )
        assert len(server.runs) == 3


def test_a_token_file_that_cannot_be_read_is_named_before_any_request(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(kfp.Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "context.json"))
    (tmp_path / "empty").write_text("  \n")
    with FakeKfpServer(token="s3cret") as server:
        for path, needle in (
            (tmp_path / "absent", "No such file"),
            (tmp_path / "empty", "the file is empty"),
        ):
            code, _, err = main(capsys, ["run", PIPELINE, "--token-file", str(path), *host(server)])
            assert code == 2
            assert f"--token-file {path}: {needle}" in one_error_line(err, "run")
        code, _, err = main(
            capsys, ["run", PIPELINE, "--token", "a", "--token-file", str(path), *host(server)]
        )
        assert code == 2 and "--token and --token-file: give one" in one_error_line(err, "run")
        assert server.requests == []


def test_login_page_instead_of_the_api_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(kfp.Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "context.json"))
    with FakeKfpServer(login_page=True) as server:
        code, _, err = main(capsys, ["run", PIPELINE, "--namespace", "team-a", *host(server)])
    assert code == 2
    line = one_error_line(err, "run")
    assert "something else than the KFP API (a login page?)" in line and "--token" in line
    assert [r.path for r in server.requests] == ["/apis/v2beta1/healthz"]


def test_wait_rides_out_a_restarting_server_but_not_a_refusal():
    failures = [kfp_server_api.ApiException(status=503), kfp_server_api.ApiException(status=503)]
    done = kfp_server_api.V2beta1Run(run_id="r", state="SUCCEEDED")

    class Client:
        calls = 0

        def get_run(self, run_id):
            self.calls += 1
            if failures:
                raise failures.pop(0)
            return done

    client = Client()
    run = runs.wait_for_run(client, "r", on_task=print, sleep=lambda s: None, max_poll_errors=3)
    assert run is done and client.calls == 3
    failures[:] = [kfp_server_api.ApiException(status=404)]
    with pytest.raises(kfp_server_api.ApiException):
        runs.wait_for_run(client, "r", on_task=print, sleep=lambda s: None)


def test_namespace_goes_to_pipeline_and_experiment(capsys, fake_kfp):
    argv = ["--namespace", "team-a", *host(fake_kfp)]
    assert main(capsys, ["upload", PIPELINE, "--pipeline-version", V1, *argv])[0] == 0
    code, _, err = main(capsys, ["run", PIPELINE, *argv])
    assert code == 0, err
    assert fake_kfp.pipeline_named(PIPELINE)["namespace"] == "team-a"
    (experiment,) = fake_kfp.experiments.values()
    assert experiment["namespace"] == "team-a"
    # A pipeline in another namespace is not this one.
    code, _out, err = main(capsys, ["run", PIPELINE, "--namespace", "team-b", *host(fake_kfp)])
    assert code == 2
    assert "not on the KFP server" in one_error_line(err, "run") and "in namespace team-b" in err


@pytest.mark.parametrize(
    ("path", "body", "needle"),
    [
        (
            "/experiments",
            {"display_name": "x", "colour": "blue"},
            "body.colour: unknown field of V2beta1Experiment",
        ),
        ("/experiments", {"description": "no name"}, "display_name is required"),
        ("/runs", {"display_name": "r", "runtime_config": {"parameters": []}}, "expected an object"),
        ("/recurringruns", {"display_name": "s", "mode": "ON"}, "'ON' is not one of"),
        ("/pipelines", {"name": "p", "created_at": "2025-01-01T00:00:00Z"}, "output fields"),
    ],
)
def test_the_fake_refuses_a_malformed_body(fake_kfp, path, body, needle):
    # The fake's own checks, which make a malformed body from kfstack fail its tests.
    request = urllib.request.Request(
        fake_kfp.url + "/apis/v2beta1" + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 400
    assert needle in json.loads(caught.value.read())["message"]
    assert (fake_kfp.experiments, fake_kfp.runs, fake_kfp.recurring_runs) == ({}, {}, {})
