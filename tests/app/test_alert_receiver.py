"""kfstack alert-receiver: a firing KfstackLiveDrift alert starts one retraining run, against the
fake KFP API (tests/app/fake_kfp_server.py) and as an embedded run directory; every rule that
starts nothing (running, cooldown, duplicate, resolved, no or two schedules, no or a wrong token,
a malformed body) starts nothing."""

from __future__ import annotations

import datetime
import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from kfstack.app import cli, run_directory
from kfstack.app.alert_receiver.cluster import KfpRetraining, declared_parameters, launch_namespace
from kfstack.app.alert_receiver.decisions import (
    REFUSED,
    SKIPPED,
    STARTED,
    Receiver,
    blocking_reason,
    stale_runs_note,
    trigger_text,
)
from kfstack.app.alert_receiver.embedded import LocalRetraining, RetrainingRecord
from kfstack.app.alert_receiver.notification import MalformedNotification, parse_notification
from kfstack.app.alert_receiver.server import AlertReceiverServer
from kfstack.app.cli.alert_receiver import parse_duration
from kfstack.app.cli.run import local_arguments
from kfstack.app.kfp_server import connection, recurring_runs, runs
from kfstack.app.kfp_server.pipelines import PipelineVersionRef
from kfstack.app.run_directory import list_runs
from kfstack.errors import KfpAuthError, UsageError
from tests.app import fake_kfp_server
from tests.app.fake_kfp_server import FakeKfpServer
from tests.conftest import REPO_ROOT

fake_kfp = fake_kfp_server.fake_kfp

PIPELINE = "flights-retraining"
SERVICE = "flights-delay"
NAMESPACE = "ml-prod"
TOKEN = "s3cret-token"
# The fake KFP server's clock: its first object is created one second after this.
EPOCH = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
DECLARED = ("serving_name", "epochs", "force", "trigger")
TEAM_PIPELINE = "tests.app.alert_retraining_pipeline:team_retraining"


def drift_alert(
    starts_at: str = "2025-01-01T00:00:00Z",
    fingerprint: str = "4a1b2c3d4e5f6071",
    status: str = "firing",
    service: str = SERVICE,
    namespace: str = NAMESPACE,
    alertname: str = "KfstackLiveDrift",
) -> dict[str, Any]:
    """One alert as Alertmanager 0.25's webhook writes it (template/template.go Alert)."""
    return {
        "status": status,
        "labels": {
            "alertname": alertname,
            "namespace": namespace,
            "inference_service": service,
            "severity": "warning",
        },
        "annotations": {"summary": "live drift", "max_psi": "0.31"},
        "startsAt": starts_at,
        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2025-01-01T02:00:00Z",
        "generatorURL": "http://prometheus.example/graph",
        "fingerprint": fingerprint,
    }


def notification(*alerts: dict[str, Any]) -> dict[str, Any]:
    """Alertmanager 0.25's webhook message (notify/webhook/webhook.go Message)."""
    firing = any(alert["status"] == "firing" for alert in alerts)
    return {
        "version": "4",
        "groupKey": '{}:{alertname="KfstackLiveDrift"}',
        "truncatedAlerts": 0,
        "receiver": "kfstack-retraining",
        "status": "firing" if firing else "resolved",
        "alerts": list(alerts),
        "groupLabels": {"alertname": "KfstackLiveDrift"},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.example",
    }


def parsed(*alerts: dict[str, Any]) -> Any:
    return parse_notification(json.dumps(notification(*alerts)).encode())


def spec(declared: tuple[str, ...] = DECLARED, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """A compiled pipeline's spec declaring ``declared``; ``defaults`` as ``upload --env`` compiles
    an environment's in (``defaultValue``, as kfp 2.x writes it)."""
    types = {"epochs": "NUMBER_INTEGER", "force": "BOOLEAN"}
    parameters: dict[str, Any] = {n: {"parameterType": types.get(n, "STRING")} for n in declared}
    for name, value in (defaults or {}).items():
        parameters[name] = {"parameterType": "STRING", "defaultValue": value, "isOptional": True}
    return {"pipelineInfo": {"name": PIPELINE}, "root": {"inputDefinitions": {"parameters": parameters}}}


def add_schedule(
    fake: FakeKfpServer,
    name: str,
    serving_name: str = SERVICE,
    pipeline: str = PIPELINE,
    declared: tuple[str, ...] = DECLARED,
    namespace: str | None = None,
    service_account: str | None = None,
    launch_namespace: str | None = None,
    defaults: dict[str, Any] | None = None,
) -> tuple[str, PipelineVersionRef]:
    """A recurring run made as ``kfstack schedule`` makes it; returns its id and its version.
    ``launch_namespace``: the recurring run's argument (None: it sets none); ``defaults``: the
    spec's compiled-in defaults, for a pipeline not created yet."""
    existing = [p for p in fake.pipelines.values() if p["display_name"] == pipeline]
    if existing:
        pipeline_id = existing[0]["pipeline_id"]
        version_id = fake.versions_of(pipeline_id)[0]["pipeline_version_id"]
    else:
        pipeline_id, (version_id,) = fake.seed(pipeline, "1.0.0", namespace=namespace or "")
        fake.versions[version_id]["pipeline_spec"] = spec(declared, defaults)
    parameters: dict[str, Any] = {"serving_name": serving_name, "epochs": 3}
    if launch_namespace is not None:
        parameters["launch_namespace"] = launch_namespace
    ref = PipelineVersionRef(pipeline, pipeline_id, "1.0.0", version_id)
    with connection.connect(fake.url, namespace=namespace) as client:
        experiment_id, _ = runs.ensure_experiment(client, pipeline)
        recurring_id, _ = recurring_runs.create_schedule(
            client,
            name,
            ref,
            True,
            experiment_id,
            "0 0 3 * * *",
            parameters,
            service_account,
        )
    return recurring_id, ref


class Clock:
    def __init__(self) -> None:
        self.now = EPOCH + datetime.timedelta(minutes=1)

    def __call__(self) -> datetime.datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def receiver(fake_kfp: FakeKfpServer, clock: Clock) -> Receiver:
    return Receiver(KfpRetraining(fake_kfp.url, namespaces=[NAMESPACE]), datetime.timedelta(hours=6), clock)


def started_runs(fake: FakeKfpServer) -> list[dict[str, Any]]:
    return [r for r in fake.runs.values() if r["runtime_config"]["parameters"].get("trigger")]


# --- the notification -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"{not json", "not JSON"),
        (b"[]", "not a JSON object"),
        (json.dumps({**notification(drift_alert()), "version": "3"}).encode(), "version: expected '4'"),
        (json.dumps({**notification(drift_alert()), "alerts": {}}).encode(), "alerts: expected a list"),
        (json.dumps({**notification(drift_alert()), "status": "ok"}).encode(), "status: expected firing"),
        (
            json.dumps(notification({**drift_alert(), "labels": {"alertname": 1}})).encode(),
            "alerts[0].labels: expected an object of strings",
        ),
        (
            json.dumps(notification({k: v for k, v in drift_alert().items() if k != "startsAt"})).encode(),
            "alerts[0].startsAt: expected a string",
        ),
    ],
)
def test_a_malformed_notification_names_what_is_wrong(body, needle):
    with pytest.raises(MalformedNotification) as error:
        parse_notification(body)
    assert needle in str(error.value)


def test_the_trigger_says_why_and_ends_with_the_firings_key():
    (alert,) = parsed(drift_alert()).alerts
    assert trigger_text(alert) == (
        "alert KfstackLiveDrift on ml-prod/flights-delay firing since 2025-01-01T00:00:00Z, max PSI 0.31 "
        "[4a1b2c3d4e5f6071@2025-01-01T00:00:00Z]"
    )


# --- the cluster: decisions against the fake KFP API ------------------------------------------


def test_a_firing_drift_alert_starts_one_run_of_the_schedules_version(fake_kfp, receiver, caplog):
    recurring_id, ref = add_schedule(fake_kfp, "flights-delay-nightly")
    add_schedule(fake_kfp, "other-model-nightly", serving_name="other-model")
    caplog.set_level(logging.INFO, logger="kfstack.app.alert_receiver")

    (decision,) = receiver.handle(parsed(drift_alert()))

    assert decision.outcome == STARTED, decision.reason
    (run,) = fake_kfp.runs.values()
    assert decision.run.split()[0] == run["run_id"]
    assert run["pipeline_version_reference"] == {
        "pipeline_id": ref.pipeline_id,
        "pipeline_version_id": ref.version_id,
    }
    assert run["experiment_id"] == fake_kfp.recurring_runs[recurring_id]["experiment_id"]
    # The schedule's parameters, the trigger, and force: the lagged batch check does not veto.
    assert run["runtime_config"]["parameters"] == {
        "serving_name": SERVICE,
        "epochs": 3,
        "trigger": trigger_text(parsed(drift_alert()).alerts[0]),
        "force": True,
    }
    (line,) = [json.loads(r.getMessage()) for r in caplog.records]
    assert line["decision"] == "started" and line["inference_service"] == SERVICE
    assert line["run"].startswith(run["run_id"]) and "flights-delay-nightly" in line["schedule"]


def test_without_force_the_pipelines_own_drift_check_decides(fake_kfp, clock):
    add_schedule(fake_kfp, "flights-delay-nightly")
    receiver = Receiver(KfpRetraining(fake_kfp.url, namespaces=[NAMESPACE], force=False), clock=clock)
    assert receiver.handle(parsed(drift_alert()))[0].outcome == STARTED
    (run,) = fake_kfp.runs.values()
    assert "force" not in run["runtime_config"]["parameters"]


def test_a_running_run_of_the_model_blocks_even_one_the_schedule_started(fake_kfp, receiver, clock):
    add_schedule(fake_kfp, "flights-delay-nightly")
    (first,) = receiver.handle(parsed(drift_alert()))
    assert first.outcome == STARTED
    # Another firing (the alert resolved and fired again) while that run is running.
    (second,) = receiver.handle(parsed(drift_alert(starts_at="2025-01-01T00:00:30Z")))
    assert second.outcome == SKIPPED and "still running" in second.reason
    assert len(fake_kfp.runs) == 1
    # A run the schedule (or a person) started, running, blocks too: two retrainings would race
    # for the model's canary.
    (run,) = fake_kfp.runs.values()
    run["state"] = "SUCCEEDED"
    run["runtime_config"]["parameters"]["trigger"] = ""  # as if the schedule had started it
    clock.now += datetime.timedelta(hours=7)
    with connection.connect(fake_kfp.url) as client:
        ref = PipelineVersionRef(
            PIPELINE,
            run["pipeline_version_reference"]["pipeline_id"],
            "1.0.0",
            run["pipeline_version_reference"]["pipeline_version_id"],
        )
        scheduled = runs.start_run(client, ref, run["experiment_id"], {"serving_name": SERVICE}, "nightly")
    (third,) = receiver.handle(parsed(drift_alert(starts_at="2025-01-01T06:00:00Z")))
    assert third.outcome == SKIPPED and f"run {scheduled} of this model is still running" in third.reason


def test_the_cooldown_blocks_until_it_has_passed(fake_kfp, receiver, clock):
    add_schedule(fake_kfp, "flights-delay-nightly")
    assert receiver.handle(parsed(drift_alert()))[0].outcome == STARTED
    (run,) = fake_kfp.runs.values()
    run["state"] = "SUCCEEDED"
    created = datetime.datetime.fromisoformat(run["created_at"])
    clock.now = created + datetime.timedelta(hours=5, minutes=59)
    (early,) = receiver.handle(parsed(drift_alert(starts_at="2025-01-01T00:50:00Z")))
    assert early.outcome == SKIPPED and "cooldown" in early.reason and "(cooldown 6h00m)" in early.reason
    clock.now = created + datetime.timedelta(hours=6)
    (late,) = receiver.handle(parsed(drift_alert(starts_at="2025-01-01T06:00:00Z")))
    assert late.outcome == STARTED, late.reason
    assert len(started_runs(fake_kfp)) == 2


def test_a_restarted_receiver_reads_the_same_state_from_the_kfp_api(fake_kfp, clock):
    add_schedule(fake_kfp, "flights-delay-nightly")
    assert (
        Receiver(KfpRetraining(fake_kfp.url, namespaces=[NAMESPACE]), clock=clock)
        .handle(parsed(drift_alert()))[0]
        .outcome
        == STARTED
    )
    fresh = Receiver(KfpRetraining(fake_kfp.url, namespaces=[NAMESPACE]), clock=clock)  # nothing in memory
    (decision,) = fresh.handle(parsed(drift_alert(starts_at="2025-01-01T00:00:40Z")))
    assert decision.outcome == SKIPPED and "still running" in decision.reason


def test_a_duplicate_notification_starts_nothing_however_late(fake_kfp, receiver, clock):
    add_schedule(fake_kfp, "flights-delay-nightly")
    assert receiver.handle(parsed(drift_alert()))[0].outcome == STARTED
    (run,) = fake_kfp.runs.values()
    run["state"] = "FAILED"
    clock.now += datetime.timedelta(days=2)  # past the cooldown: Alertmanager's repeat_interval
    (again,) = receiver.handle(parsed(drift_alert()))
    assert again.outcome == SKIPPED and again.reason.startswith(f"duplicate: run {run['run_id']}")
    assert len(fake_kfp.runs) == 1


def test_two_alerts_of_one_notification_for_one_model_start_one_run(fake_kfp, receiver):
    add_schedule(fake_kfp, "flights-delay-nightly")
    decisions = receiver.handle(parsed(drift_alert(), drift_alert(fingerprint="ffff000011112222")))
    assert [d.outcome for d in decisions] == [STARTED, SKIPPED]
    assert len(fake_kfp.runs) == 1


@pytest.mark.parametrize(
    ("alert", "needle"),
    [
        (drift_alert(status="resolved"), "resolved"),
        (drift_alert(alertname="KfstackHighErrorRate"), "not a KfstackLiveDrift alert"),
    ],
)
def test_resolved_and_other_alerts_are_skipped(fake_kfp, receiver, alert, needle):
    add_schedule(fake_kfp, "flights-delay-nightly")
    (decision,) = receiver.handle(parsed(alert))
    assert decision.outcome == SKIPPED and needle in decision.reason
    assert fake_kfp.runs == {}


def test_no_schedule_for_the_model_is_refused(fake_kfp, receiver):
    add_schedule(fake_kfp, "other-model-nightly", serving_name="other-model")
    (decision,) = receiver.handle(parsed(drift_alert()))
    assert decision.outcome == REFUSED
    assert f"no enabled recurring run with serving_name={SERVICE}" in decision.reason
    assert fake_kfp.runs == {}


def test_two_schedules_for_the_model_are_refused_naming_both(fake_kfp, receiver):
    first, _ = add_schedule(fake_kfp, "flights-delay-nightly")
    second, _ = add_schedule(fake_kfp, "flights-delay-weekly")
    (decision,) = receiver.handle(parsed(drift_alert()))
    assert decision.outcome == REFUSED and "2 enabled recurring runs" in decision.reason
    assert first in decision.reason and second in decision.reason
    assert fake_kfp.runs == {}


def test_a_disabled_schedule_is_not_the_models_retraining(fake_kfp, receiver):
    recurring_id, _ = add_schedule(fake_kfp, "flights-delay-nightly")
    fake_kfp.recurring_runs[recurring_id]["status"] = "DISABLED"
    (decision,) = receiver.handle(parsed(drift_alert()))
    assert decision.outcome == REFUSED and "(disabled: flights-delay-nightly)" in decision.reason


def test_a_version_without_a_trigger_parameter_is_refused(fake_kfp, receiver):
    add_schedule(fake_kfp, "flights-delay-nightly", declared=("serving_name", "epochs"))
    (decision,) = receiver.handle(parsed(drift_alert()))
    assert decision.outcome == REFUSED and "declares no 'trigger' parameter" in decision.reason
    assert fake_kfp.runs == {}


def test_on_a_multi_user_kfp_the_alerts_namespace_chooses_the_schedule(fake_kfp, clock):
    receiver = Receiver(KfpRetraining(fake_kfp.url, namespaces=["ml-dev", NAMESPACE]), clock=clock)
    fake_kfp.multi_user = True
    add_schedule(fake_kfp, "flights-delay-nightly", namespace=NAMESPACE)
    (elsewhere,) = receiver.handle(parsed(drift_alert(namespace="ml-dev")))
    assert elsewhere.outcome == REFUSED and "in namespace ml-dev" in elsewhere.reason
    (here,) = receiver.handle(parsed(drift_alert()))
    assert here.outcome == STARTED, here.reason
    (run,) = fake_kfp.runs.values()
    assert fake_kfp.experiments[run["experiment_id"]]["namespace"] == NAMESPACE


def test_the_run_keeps_the_schedules_service_account(fake_kfp, receiver):
    add_schedule(fake_kfp, "flights-delay-nightly", service_account="kfstack-runner")
    (decision,) = receiver.handle(parsed(drift_alert()))
    assert decision.outcome == STARTED, decision.reason
    (request,) = fake_kfp.calls("POST", "/runs")
    assert request.body["service_account"] == "kfstack-runner"


def test_a_schedule_that_named_no_account_keeps_the_one_kfp_gave_it(fake_kfp, clock):
    """A multi-user KFP records the profile's default-editor on a recurring run that named none:
    the alert's run gets what the schedule's own runs get."""
    fake_kfp.multi_user = True
    add_schedule(fake_kfp, "flights-delay-nightly", namespace=NAMESPACE)
    receiver = Receiver(KfpRetraining(fake_kfp.url, namespaces=[NAMESPACE]), clock=clock)
    assert receiver.handle(parsed(drift_alert()))[0].outcome == STARTED
    (request,) = fake_kfp.calls("POST", "/runs")
    assert request.body["service_account"] == "default-editor"


def test_a_version_uploaded_with_a_platform_spec_declares_its_parameters():
    assert declared_parameters({"pipeline_spec": spec(), "platform_spec": {}}) == set(DECLARED)
    assert declared_parameters(None) == set()


# --- HTTP: the token, the body, the answers ----------------------------------------------------


@pytest.fixture
def endpoint(tmp_path, receiver) -> Iterator[str]:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    server = AlertReceiverServer(receiver, str(token_file), "127.0.0.1", 0)
    thread = server.serve_in_thread()
    yield f"http://127.0.0.1:{server.port}"
    server.shutdown()
    server.server_close()
    thread.join()


def post(url: str, body: bytes, token: str | None = TOKEN) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_endpoint_starts_a_run_and_answers_its_decisions(fake_kfp, endpoint):
    add_schedule(fake_kfp, "flights-delay-nightly")
    status, answer = post(f"{endpoint}/alerts", json.dumps(notification(drift_alert())).encode())
    assert status == 200
    (decision,) = answer["decisions"]
    assert decision["decision"] == "started" and len(fake_kfp.runs) == 1
    with urllib.request.urlopen(f"{endpoint}/healthz", timeout=10) as health:
        assert health.status == 200


@pytest.mark.parametrize(
    ("token", "body", "status", "needle"),
    [
        (None, json.dumps(notification(drift_alert())).encode(), 401, "no valid bearer token"),
        ("wrong", json.dumps(notification(drift_alert())).encode(), 401, "no valid bearer token"),
        (TOKEN, b"{not json", 400, "the body is not JSON"),
        (TOKEN, json.dumps({"alerts": []}).encode(), 400, "version: expected '4'"),
    ],
)
def test_no_token_a_wrong_one_or_a_malformed_body_start_nothing(
    fake_kfp, endpoint, caplog, token, body, status, needle
):
    add_schedule(fake_kfp, "flights-delay-nightly")
    caplog.set_level(logging.INFO, logger="kfstack.app.alert_receiver")
    before = len(fake_kfp.requests)
    code, answer = post(f"{endpoint}/alerts", body, token=token)
    assert code == status and needle in answer["error"]
    assert fake_kfp.requests[before:] == []  # the KFP API was not even asked
    (line,) = [json.loads(r.getMessage()) for r in caplog.records]
    assert line["decision"] == "rejected" and line["http_status"] == status


def test_an_unreachable_kfp_api_is_a_503_for_alertmanager_to_retry(tmp_path, clock, caplog):
    with FakeKfpServer() as gone:
        url = gone.url
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    server = AlertReceiverServer(
        Receiver(KfpRetraining(url, namespaces=[NAMESPACE]), clock=clock), str(token_file), "127.0.0.1", 0
    )
    thread = server.serve_in_thread()
    try:
        status, answer = post(
            f"http://127.0.0.1:{server.port}/alerts", json.dumps(notification(drift_alert())).encode()
        )
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert status == 503 and "cannot reach the KFP API server" in answer["error"]
    assert any("left to Alertmanager's retry" in r.getMessage() for r in caplog.records)


def test_a_missing_token_file_stops_the_start(tmp_path, receiver):
    with pytest.raises(UsageError, match="--token-file"):
        AlertReceiverServer(receiver, str(tmp_path / "absent"), "127.0.0.1", 0)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(UsageError, match="the file is empty"):
        AlertReceiverServer(receiver, str(tmp_path / "empty"), "127.0.0.1", 0)


# --- the command line ---------------------------------------------------------------------------


def test_durations():
    assert parse_duration("6h", "--cooldown") == datetime.timedelta(hours=6)
    assert parse_duration("90", "--cooldown") == datetime.timedelta(seconds=90)
    assert parse_duration("30m", "--cooldown") == datetime.timedelta(minutes=30)
    with pytest.raises(UsageError, match="--cooldown '6 hours'"):
        parse_duration("6 hours", "--cooldown")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--local"], "--retrain SERVICE=PIPELINE"),
        (["--local", "--retrain", "flights-delay"], "expected SERVICE=PIPELINE"),
        (["--local", "--retrain", f"m={TEAM_PIPELINE}", "--param", "nope=1"], "nope"),
        (["--retrain", f"m={TEAM_PIPELINE}"], "only with --local"),
        (["--cooldown", "soon"], "--cooldown 'soon'"),
    ],
)
def test_bad_flags_are_refused_before_anything_listens(tmp_path, capsys, argv, needle):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    code = cli.main(["alert-receiver", "--token-file", str(token_file), "--port", "0", *argv])
    assert code == 2
    assert needle in capsys.readouterr().err


# --- the trigger in the drift report ----------------------------------------------------------


def test_the_drift_report_says_why_the_run_was_started(tmp_path):
    from kfstack.components.monitoring.data_drift.core import DriftData, check_and_publish
    from kfstack.serving.production import RECORD_FILE, FoundModel

    class Artifact:
        def __init__(self, path: str) -> None:
            self.path, self.metadata, self.logged = path, {}, {}

        def log_metric(self, name: str, value: Any) -> None:
            self.logged[name] = value

    reference = tmp_path / "champion"
    reference.mkdir()
    (reference / RECORD_FILE).write_text(json.dumps(FoundModel(found=False).__dict__))
    report = Artifact(str(tmp_path / "report.md"))
    trigger = trigger_text(parsed(drift_alert()).alerts[0])
    retrain = check_and_publish(
        DriftData(str(reference), str(tmp_path / "current")),
        max_psi=0.2,
        max_label_rate_shift=0.05,
        ignored="",
        force=True,
        trigger=trigger,
        metrics=Artifact(""),
        report=report,
        profile_dir=str(tmp_path / "profile"),
    )
    assert retrain is True
    assert report.metadata["trigger"] == trigger
    assert f"Started by: {trigger}" in (tmp_path / "report.md").read_text()


# --- embedded: a notification starts a local run directory -------------------------------------


def wait_for(path: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} did not appear within {seconds:g} s"
        time.sleep(0.2)


def test_embedded_a_notification_starts_a_local_run_directory(tmp_path, monkeypatch, clock):
    monkeypatch.chdir(REPO_ROOT)  # the run's process imports the team pipeline from tests/
    root = tmp_path / "runs"
    retraining = LocalRetraining(
        {"hello-model": RetrainingRecord(TEAM_PIPELINE, {"force": False})}, str(root), local_arguments
    )
    receiver = Receiver(retraining, clock=lambda: datetime.datetime.now(datetime.UTC))
    alert = drift_alert(service="hello-model", namespace="")
    (decision,) = receiver.handle(parsed(alert))
    assert decision.outcome == STARTED, decision.reason
    run_dir = decision.run
    assert os.path.dirname(run_dir) == str(root)
    marker = json.loads((root / os.path.basename(run_dir) / ".kfstack-run").read_text())
    expected_trigger = trigger_text(parsed(alert).alerts[0])
    assert marker["arguments"] == {
        "force": True,
        "serving_name": "hello-model",
        "trigger": expected_trigger,
        "platform": "local",
    }
    # While it runs, another firing starts nothing; the same firing is a duplicate.
    (running,) = receiver.handle(parsed(drift_alert(service="hello-model", starts_at="2025-01-01T00:05:00Z")))
    assert running.outcome == SKIPPED and "still running" in running.reason
    (unknown,) = receiver.handle(parsed(drift_alert(service="other-model")))
    assert unknown.outcome == REFUSED and "no --retrain other-model=PIPELINE" in unknown.reason
    # The receiver handed the run's lock to the run's process: a clean meanwhile leaves the run.
    removed, skipped = run_directory.clean_runs(str(root))
    assert removed == [] and [(left.path, left.reason[:7]) for left in skipped] == [(run_dir, "running")]

    summary_path = os.path.join(run_dir, "summary.json")
    wait_for(summary_path, 120)
    with open(summary_path, encoding="utf-8") as f:
        summary = json.load(f)
    with open(os.path.join(run_dir, "logs", "kfstack-run-console.log"), encoding="utf-8") as f:
        assert summary["status"] == "SUCCEEDED", f.read()
    assert summary["arguments"]["trigger"] == expected_trigger
    # Ended, and within the cooldown: skipped; the same firing: a duplicate.
    (cooling,) = receiver.handle(parsed(drift_alert(service="hello-model", starts_at="2025-01-01T00:06:00Z")))
    assert cooling.outcome == SKIPPED and "cooldown" in cooling.reason
    (again,) = receiver.handle(parsed(alert))
    assert again.outcome == SKIPPED and again.reason.startswith("duplicate")
    assert [run.path for run in list_runs(str(root))] == [run_dir]
    # Cleaned away once it ended: the alert's record outlives it, and the firing is still known.
    deadline = time.monotonic() + 30
    while run_directory.RunDirectory(run_dir).in_use():  # its process writes the summary, then exits
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert run_directory.clean_runs(str(root)) == ([run_directory.RunDirectory(run_dir)], [])
    (after_clean,) = receiver.handle(parsed(alert))
    assert after_clean.outcome == SKIPPED and after_clean.reason.startswith("duplicate"), after_clean.reason


@pytest.mark.slow
def test_embedded_an_alert_retrains_the_flights_model(tmp_path, monkeypatch):
    """The whole way on the flights example: the alert starts flights-retraining, which records
    the trigger in its drift report and, forced, trains (nothing is in production yet)."""
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "runs"
    arguments = {
        "sample_fraction": 0.2,
        "tune": False,
        "epochs": 2,
        "num_shards": 2,
        "canary_records": 1000,
        "window_start": "2013-01-01",
        "window_end": "2013-06-30",
    }
    retraining = LocalRetraining({SERVICE: RetrainingRecord(PIPELINE, arguments)}, str(root), local_arguments)
    receiver = Receiver(retraining, clock=lambda: datetime.datetime.now(datetime.UTC))
    (decision,) = receiver.handle(parsed(drift_alert()))
    assert decision.outcome == STARTED, decision.reason
    summary_path = os.path.join(decision.run, "summary.json")
    wait_for(summary_path, 1200)
    with open(summary_path, encoding="utf-8") as f:
        summary = json.load(f)
    assert summary["status"] == "SUCCEEDED", summary.get("error")
    trigger = trigger_text(parsed(drift_alert()).alerts[0])
    assert summary["arguments"]["trigger"] == trigger and summary["arguments"]["force"] is True
    assert summary["drift"]["trigger"] == trigger
    assert summary["drift"]["decision"] == "retrain"


# --- the scope of the rules: namespaces, experiments, stuck runs, enabled, the KFP token ------


def start_by_hand(
    fake: FakeKfpServer,
    experiment: str,
    parameters: dict[str, Any],
    pipeline: str = PIPELINE,
    namespace: str | None = None,
) -> str:
    """A run started as a person would, in ``experiment`` (created if absent; in ``namespace`` on
    a multi-user KFP)."""
    pipeline_id = fake.pipeline_named(pipeline)["pipeline_id"]
    version_id = fake.versions_of(pipeline_id)[0]["pipeline_version_id"]
    with connection.connect(fake.url, namespace=namespace) as client:
        experiment_id, _ = runs.ensure_experiment(client, experiment)
        ref = PipelineVersionRef(pipeline, pipeline_id, "1.0.0", version_id)
        return runs.start_run(client, ref, experiment_id, parameters, "by hand")


def test_a_running_run_in_another_experiment_blocks_and_the_reason_gives_its_age(fake_kfp, receiver, clock):
    add_schedule(fake_kfp, "flights-delay-nightly")
    by_hand = start_by_hand(fake_kfp, "someones-experiment", {"serving_name": SERVICE})
    created = datetime.datetime.fromisoformat(fake_kfp.runs[by_hand]["created_at"])
    clock.now = created + datetime.timedelta(hours=2, minutes=5)
    (decision,) = receiver.handle(parsed(drift_alert()))
    assert decision.outcome == SKIPPED, decision.reason
    assert f"run {by_hand} of this model is still running, started 2h05m ago" in decision.reason
    assert "--stale-after" in decision.reason
    assert started_runs(fake_kfp) == []


def test_a_run_of_another_pipeline_or_another_model_does_not_block(fake_kfp, receiver):
    add_schedule(fake_kfp, "flights-delay-nightly")
    add_schedule(fake_kfp, "other-nightly", pipeline="other-pipeline", serving_name="other-model")
    start_by_hand(fake_kfp, "other", {"serving_name": SERVICE}, pipeline="other-pipeline")
    start_by_hand(fake_kfp, PIPELINE, {"serving_name": "other-model"})
    (decision,) = receiver.handle(parsed(drift_alert()))
    assert decision.outcome == STARTED, decision.reason
    (listed,) = fake_kfp.calls("GET", "/runs")
    assert "experiment_id" not in listed.query and "pipeline_id" in listed.query["filter"]


def test_a_run_stuck_past_stale_after_no_longer_blocks_and_the_decision_says_so(fake_kfp, clock):
    add_schedule(fake_kfp, "flights-delay-nightly")
    receiver = Receiver(
        KfpRetraining(fake_kfp.url, namespaces=[NAMESPACE]),
        clock=clock,
        stale_after=datetime.timedelta(hours=24),
    )
    stuck = start_by_hand(fake_kfp, PIPELINE, {"serving_name": SERVICE})
    fake_kfp.runs[stuck]["state"] = "RUNTIME_STATE_UNSPECIFIED"  # a state KFP does not know
    created = datetime.datetime.fromisoformat(fake_kfp.runs[stuck]["created_at"])
    clock.now = created + datetime.timedelta(hours=23, minutes=59)
    (early,) = receiver.handle(parsed(drift_alert()))
    assert early.outcome == SKIPPED and f"run {stuck} of this model is still running" in early.reason
    clock.now = created + datetime.timedelta(hours=25)
    (late,) = receiver.handle(parsed(drift_alert(starts_at="2025-01-02T01:00:00Z")))
    assert late.outcome == STARTED, late.reason
    assert f"run {stuck} not ended 25h00m after its start, past --stale-after 24h00m: no longer blocks" in (
        late.reason
    )


def test_embedded_a_run_directory_without_a_summary_blocks_until_stale_after(tmp_path):
    root = tmp_path / "runs"
    retraining = LocalRetraining(
        {"hello-model": RetrainingRecord(TEAM_PIPELINE, {})}, str(root), local_arguments
    )
    killed = run_directory.RunDirectory.create(
        str(root), TEAM_PIPELINE, arguments={"serving_name": "hello-model"}
    )
    (alert,) = parsed(drift_alert(service="hello-model")).alerts
    with retraining.schedule_for("", "hello-model") as schedule:
        (run,) = schedule.history()
    assert run.id == killed.path and run.running
    hour = datetime.timedelta(hours=1)
    day = datetime.timedelta(hours=24)
    reason = blocking_reason(alert, [run], run.created_at + hour, datetime.timedelta(hours=6), day)
    assert reason is not None and "still running, started 1h00m ago" in reason
    assert blocking_reason(alert, [run], run.created_at + 25 * hour, datetime.timedelta(hours=6), day) is None
    assert "no longer blocks" in stale_runs_note([run], run.created_at + 25 * hour, day)


@pytest.mark.parametrize(
    ("status", "mode", "is_enabled"),
    [
        ("STATUS_UNSPECIFIED", "ENABLE", True),  # the API server may leave status unspecified
        (None, "ENABLE", True),
        ("ENABLED", "MODE_UNSPECIFIED", True),
        ("ENABLED", "DISABLE", False),  # switched off, the scheduled workflow not updated yet
        ("DISABLED", "ENABLE", False),
        ("STATUS_UNSPECIFIED", "MODE_UNSPECIFIED", False),
    ],
)
def test_a_recurring_run_is_enabled_only_when_a_field_says_so_and_none_says_disabled(
    fake_kfp, receiver, status, mode, is_enabled
):
    recurring_id, _ = add_schedule(fake_kfp, "flights-delay-nightly")
    recurring = fake_kfp.recurring_runs[recurring_id]
    recurring.pop("status", None)
    if status:
        recurring["status"] = status
    recurring["mode"] = mode
    (decision,) = receiver.handle(parsed(drift_alert()))
    assert (decision.outcome == STARTED) is is_enabled, decision.reason
    if not is_enabled:
        assert "(disabled: flights-delay-nightly)" in decision.reason


@pytest.mark.parametrize("multi_user", [True, False])
def test_an_alert_without_a_namespace_is_refused_before_the_kfp_api_is_asked(fake_kfp, receiver, multi_user):
    fake_kfp.multi_user = multi_user
    add_schedule(fake_kfp, "flights-delay-nightly", namespace=NAMESPACE if multi_user else None)
    before = len(fake_kfp.requests)
    alert = drift_alert()
    del alert["labels"]["namespace"]
    (missing,) = receiver.handle(parsed(alert))
    (empty,) = receiver.handle(parsed(drift_alert(namespace="")))
    for decision in (missing, empty):
        assert decision.outcome == REFUSED and "the alert has no namespace label" in decision.reason
    assert fake_kfp.requests[before:] == [] and fake_kfp.runs == {}


def test_on_a_standalone_kfp_another_namespaces_alert_is_refused(fake_kfp, receiver, caplog):
    """ml-dev/flights-delay and ml-prod/flights-delay share the name; a standalone KFP has one
    namespace, so only the receiver of ml-prod acts on ml-prod's alert."""
    add_schedule(fake_kfp, "flights-delay-nightly")
    caplog.set_level(logging.INFO, logger="kfstack.app.alert_receiver")
    (elsewhere,) = receiver.handle(parsed(drift_alert(namespace="ml-dev")))
    assert elsewhere.outcome == REFUSED
    assert "namespace ml-dev is not one this receiver serves (--namespace ml-prod)" in elsewhere.reason
    assert json.loads(caplog.records[-1].getMessage())["decision"] == "refused"
    assert fake_kfp.runs == {}
    (here,) = receiver.handle(parsed(drift_alert()))
    assert here.outcome == STARTED, here.reason


def test_the_receiver_needs_the_namespaces_it_serves():
    with pytest.raises(UsageError, match="--namespace"):
        KfpRetraining("http://127.0.0.1:1", namespaces=[])


def test_the_kfp_token_file_is_read_at_each_decision(fake_kfp, clock, tmp_path):
    """A projected token rotates (expirationSeconds 7200): the receiver must send the file's
    token of now, not the one it read at startup."""
    add_schedule(fake_kfp, "flights-delay-nightly")
    token_file = tmp_path / "kfp-token"
    token_file.write_text("first-token\n")
    fake_kfp.token = "first-token"
    receiver = Receiver(
        KfpRetraining(fake_kfp.url, namespaces=[NAMESPACE], token_file=str(token_file)), clock=clock
    )
    assert receiver.handle(parsed(drift_alert()))[0].outcome == STARTED
    (run,) = fake_kfp.runs.values()
    run["state"] = "SUCCEEDED"
    clock.now += datetime.timedelta(hours=7)
    # The kubelet renewed the token; the API server accepts only the new one.
    token_file.write_text("second-token\n")
    fake_kfp.token = "second-token"
    (again,) = receiver.handle(parsed(drift_alert(starts_at="2025-01-01T06:00:00Z")))
    assert again.outcome == STARTED, again.reason
    assert fake_kfp.requests[-1].authorization == "Bearer second-token"


def test_the_command_line_needs_a_namespace_on_a_cluster(tmp_path, capsys):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    code = cli.main(["alert-receiver", "--token-file", str(token_file), "--port", "0"])
    assert code == 2 and "--namespace" in capsys.readouterr().err


# --- a launch namespace: the runs in one namespace, the InferenceService in another -------------

TEAM_A, TEAM_B = "team-a", "team-b"


def multi_user_receiver(fake: FakeKfpServer, clock: Clock, *namespaces: str) -> Receiver:
    fake.multi_user = True
    return Receiver(KfpRetraining(fake.url, namespaces=namespaces), clock=clock)


def test_a_profiles_schedule_launching_into_another_namespace_answers_its_alerts(fake_kfp, clock):
    """Team A's runs deploy flights-delay into team-b: team-b's alert starts one run in team-a,
    from a receiver serving team-a alone, and the run it started blocks the next firing."""
    receiver = multi_user_receiver(fake_kfp, clock, TEAM_A)
    recurring_id, _ = add_schedule(
        fake_kfp, "flights-delay-nightly", namespace=TEAM_A, launch_namespace=TEAM_B
    )
    (decision,) = receiver.handle(parsed(drift_alert(namespace=TEAM_B)))
    assert decision.outcome == STARTED, decision.reason
    assert f"({recurring_id}) in namespace {TEAM_A}" in decision.schedule
    (run,) = fake_kfp.runs.values()
    assert fake_kfp.experiments[run["experiment_id"]]["namespace"] == TEAM_A
    assert run["runtime_config"]["parameters"]["launch_namespace"] == TEAM_B
    # Everything was read in team-a, the namespace served; team-b was never asked for.
    listed = [r for r in fake_kfp.requests if r.path.endswith(("/runs", "/recurringruns"))]
    asked = {r.query.get("namespace") for r in listed}
    assert asked == {TEAM_A, None}  # None: the POST of the run, whose experiment is team-a's
    (again,) = receiver.handle(parsed(drift_alert(namespace=TEAM_B, starts_at="2025-01-01T00:00:30Z")))
    assert again.outcome == SKIPPED and f"run {run['run_id']} of this model is still running" in again.reason


def test_an_alert_of_the_schedules_own_namespace_does_not_match_a_schedule_launching_elsewhere(
    fake_kfp, clock
):
    receiver = multi_user_receiver(fake_kfp, clock, TEAM_A)
    recurring_id, _ = add_schedule(
        fake_kfp, "flights-delay-nightly", namespace=TEAM_A, launch_namespace=TEAM_B
    )
    (decision,) = receiver.handle(parsed(drift_alert(namespace=TEAM_A)))
    assert decision.outcome == REFUSED
    what = f"serving_name={SERVICE} for the InferenceService in namespace {TEAM_A}"
    assert f"no enabled recurring run with {what}" in decision.reason
    assert f"searched the recurring runs of namespace(s) {TEAM_A}" in decision.reason
    elsewhere = f"flights-delay-nightly ({recurring_id}, namespace {TEAM_A}) into {TEAM_B}"
    assert f"deploying elsewhere: {elsewhere}" in decision.reason
    assert fake_kfp.runs == {}


def test_two_schedules_deploying_one_inference_service_are_refused_naming_both(fake_kfp, clock):
    """team-a's schedule launches into team-b, and team-b schedules its own: both deploy
    team-b/flights-delay, and the receiver serving both namespaces does not choose."""
    receiver = multi_user_receiver(fake_kfp, clock, TEAM_A, TEAM_B)
    from_a, _ = add_schedule(fake_kfp, "flights-delay-from-a", namespace=TEAM_A, launch_namespace=TEAM_B)
    own, _ = add_schedule(fake_kfp, "flights-delay-own", namespace=TEAM_B)
    (decision,) = receiver.handle(parsed(drift_alert(namespace=TEAM_B)))
    assert decision.outcome == REFUSED and "2 enabled recurring runs have" in decision.reason
    assert f"{from_a}, namespace {TEAM_A}" in decision.reason
    assert f"{own}, namespace {TEAM_B}" in decision.reason
    assert f"searched the recurring runs of namespace(s) {TEAM_A}, {TEAM_B}" in decision.reason
    assert fake_kfp.runs == {}
    # team-a's own InferenceService of that name has no schedule: neither deploys into team-a.
    (team_a,) = receiver.handle(parsed(drift_alert(namespace=TEAM_A)))
    assert team_a.outcome == REFUSED and "no enabled recurring run" in team_a.reason


def test_the_launch_namespace_compiled_into_the_version_counts(fake_kfp, clock):
    """``upload --env`` compiles the environment's launch_namespace in as the parameter's default:
    a recurring run that sets none launches there, and so do the runs the alert starts."""
    receiver = multi_user_receiver(fake_kfp, clock, TEAM_A)
    declared = (*DECLARED, "launch_namespace")
    add_schedule(
        fake_kfp,
        "flights-delay-nightly",
        namespace=TEAM_A,
        declared=declared,
        defaults={"launch_namespace": TEAM_B},
    )
    (own,) = receiver.handle(parsed(drift_alert(namespace=TEAM_A)))
    assert own.outcome == REFUSED and f"into {TEAM_B}" in own.reason
    (decision,) = receiver.handle(parsed(drift_alert(namespace=TEAM_B)))
    assert decision.outcome == STARTED, decision.reason
    (run,) = fake_kfp.runs.values()
    assert "launch_namespace" not in run["runtime_config"]["parameters"]  # the default applies
    # The run started carries no launch_namespace either: it is the model's by its version's default.
    (again,) = receiver.handle(parsed(drift_alert(namespace=TEAM_B, starts_at="2025-01-01T00:00:30Z")))
    assert again.outcome == SKIPPED and "still running" in again.reason


def test_a_run_blocks_only_when_it_deploys_the_alerts_inference_service(fake_kfp, clock):
    """In team-a, a run of the same pipeline and serving_name that deploys team-a's own
    flights-delay is another model's: it does not block team-b's; one deploying into team-b does."""
    receiver = multi_user_receiver(fake_kfp, clock, TEAM_A)
    add_schedule(fake_kfp, "flights-delay-nightly", namespace=TEAM_A, launch_namespace=TEAM_B)
    start_by_hand(fake_kfp, "by-hand", {"serving_name": SERVICE}, namespace=TEAM_A)
    start_by_hand(fake_kfp, "by-hand", {"serving_name": SERVICE, "launch_namespace": ""}, namespace=TEAM_A)
    (decision,) = receiver.handle(parsed(drift_alert(namespace=TEAM_B)))
    assert decision.outcome == STARTED, decision.reason
    for run in fake_kfp.runs.values():
        run["state"] = "SUCCEEDED"
    clock.now += datetime.timedelta(hours=7)  # past the cooldown
    blocking = start_by_hand(
        fake_kfp, "by-hand", {"serving_name": SERVICE, "launch_namespace": TEAM_B}, namespace=TEAM_A
    )
    (later,) = receiver.handle(parsed(drift_alert(namespace=TEAM_B, starts_at="2025-01-01T07:00:00Z")))
    assert later.outcome == SKIPPED and f"run {blocking} of this model is still running" in later.reason


def test_on_a_standalone_kfp_the_launch_namespace_tells_two_schedules_of_one_name_apart(fake_kfp, clock):
    """One standalone KFP, flights-delay deployed into ml-dev and into ml-prod by two schedules:
    each namespace's alert starts its own (without a launch namespace both would count for both,
    and be refused)."""
    receiver = Receiver(KfpRetraining(fake_kfp.url, namespaces=["ml-dev", NAMESPACE]), clock=clock)
    dev, _ = add_schedule(fake_kfp, "flights-delay-dev", launch_namespace="ml-dev")
    prod, _ = add_schedule(fake_kfp, "flights-delay-prod", launch_namespace=NAMESPACE)
    (for_prod,) = receiver.handle(parsed(drift_alert()))
    assert for_prod.outcome == STARTED and prod in for_prod.schedule, for_prod.reason
    (for_dev,) = receiver.handle(parsed(drift_alert(namespace="ml-dev", fingerprint="ffff000011112222")))
    assert for_dev.outcome == STARTED and dev in for_dev.schedule, for_dev.reason
    assert len(started_runs(fake_kfp)) == 2
    # Still: a namespace the receiver does not serve is refused, a schedule launching there or not.
    add_schedule(fake_kfp, "flights-delay-test", launch_namespace="ml-test")
    (elsewhere,) = receiver.handle(parsed(drift_alert(namespace="ml-test")))
    assert elsewhere.outcome == REFUSED
    assert "namespace ml-test is not one this receiver serves" in elsewhere.reason


def test_on_a_standalone_kfp_a_schedule_without_a_launch_namespace_counts_for_every_namespace_served(
    fake_kfp, clock
):
    """The dev overlay's case before its versions carried launch_namespace: runs in KFP's own
    namespace, which the receiver is not told, so the schedule counts for each namespace served
    (as before launch namespaces existed)."""
    receiver = Receiver(KfpRetraining(fake_kfp.url, namespaces=["kfstack-dev"]), clock=clock)
    add_schedule(fake_kfp, "flights-delay-nightly")
    (decision,) = receiver.handle(parsed(drift_alert(namespace="kfstack-dev")))
    assert decision.outcome == STARTED, decision.reason


def test_a_served_namespace_the_receiver_may_not_read_is_named(fake_kfp, clock):
    """A missing RoleBinding in one served namespace: the error (a 503, retried) says which."""
    receiver = multi_user_receiver(fake_kfp, clock, TEAM_A, "team-c")
    add_schedule(fake_kfp, "flights-delay-nightly", namespace=TEAM_A, launch_namespace=TEAM_B)
    fake_kfp.denied_namespaces = {"team-c"}
    with pytest.raises(KfpAuthError, match=r"listing the recurring runs of namespace team-c: .*403"):
        receiver.handle(parsed(drift_alert(namespace=TEAM_B)))
    assert fake_kfp.runs == {}


@pytest.mark.parametrize(
    ("parameters", "default", "own", "expected"),
    [
        ({"launch_namespace": TEAM_B}, None, TEAM_A, TEAM_B),
        ({}, TEAM_B, TEAM_A, TEAM_B),  # the version's compiled default
        ({"launch_namespace": ""}, TEAM_B, TEAM_A, TEAM_A),  # the argument overrides the default
        ({}, None, TEAM_A, TEAM_A),
        ({}, "", None, None),  # standalone: KFP's own namespace, not known to the receiver
    ],
)
def test_where_a_run_launches(parameters, default, own, expected):
    declared = (*DECLARED, "launch_namespace")
    compiled = spec(declared, {"launch_namespace": default} if default is not None else None)
    assert launch_namespace(parameters, compiled, own) == expected
