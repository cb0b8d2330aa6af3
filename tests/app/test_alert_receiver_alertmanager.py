"""A real Alertmanager (Debian's prometheus-alertmanager 0.25, a plain process on loopback)
routes a KfstackLiveDrift alert with the shipped configuration
(manifests/components/retraining-trigger/alertmanager.yml) and delivers its notification, with
the bearer token from its credentials file, to the receiver; the started run is on the fake KFP
API. Alertmanager's resolved notification, and its delivery with a wrong token, start nothing."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from kfstack.app.alert_receiver.cluster import KfpRetraining
from kfstack.app.alert_receiver.decisions import Receiver
from kfstack.app.alert_receiver.server import AlertReceiverServer
from kfstack.training.process_group import free_port
from tests.app import fake_kfp_server
from tests.app.test_alert_receiver import SERVICE, add_schedule
from tests.conftest import REPO_ROOT
from tests.debian_tools import debian_tool

fake_kfp = fake_kfp_server.fake_kfp

SHIPPED = REPO_ROOT / "manifests" / "components" / "retraining-trigger" / "alertmanager.yml"
TOKEN = "alertmanager-token"


def configured(receiver_url: str, token_file: Path) -> dict[str, Any]:
    """The shipped configuration with this test's receiver URL, token file and short waits."""
    config = yaml.safe_load(SHIPPED.read_text())
    route = next(r for r in config["route"]["routes"] if r["receiver"] == "kfstack-retraining")
    route.update(group_wait="1s", group_interval="1s")
    (webhook,) = next(r for r in config["receivers"] if r["name"] == "kfstack-retraining")["webhook_configs"]
    webhook["url"] = f"{receiver_url}/alerts"
    webhook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    return config


@contextlib.contextmanager
def alertmanager(tmp_path: Path, config: dict[str, Any]) -> Iterator[str]:
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = open(tmp_path / "alertmanager.log", "w", encoding="utf-8")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        [
            debian_tool("prometheus-alertmanager"),
            f"--config.file={tmp_path / 'alertmanager.yml'}",
            "--cluster.listen-address=",  # no gossip port: a single, private Alertmanager
            f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.path={tmp_path / 'data'}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as ready:
                    if ready.status == 200:
                        break
            except OSError:
                pass
            assert process.poll() is None, (tmp_path / "alertmanager.log").read_text()
            assert time.monotonic() < deadline, "Alertmanager was not ready within 20 s"
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def post_alert(alertmanager_url: str, ends_at: str | None = None) -> None:
    """An alert as Prometheus sends it (Alertmanager's v2 API, POST /api/v2/alerts)."""
    alert: dict[str, Any] = {
        "labels": {
            "alertname": "KfstackLiveDrift",
            "namespace": "ml-prod",
            "inference_service": SERVICE,
            "severity": "warning",
        },
        "annotations": {"summary": "live drift", "max_psi": "0.27"},
        "startsAt": "2025-01-01T00:00:00Z",
        "generatorURL": "http://prometheus.example/graph",
    }
    if ends_at:
        alert["endsAt"] = ends_at
    request = urllib.request.Request(
        f"{alertmanager_url}/api/v2/alerts",
        data=json.dumps([alert]).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


def wait_until(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {seconds:g} s"
        time.sleep(0.1)


@contextlib.contextmanager
def receiver_endpoint(fake: Any, token_file: Path) -> Iterator[str]:
    server = AlertReceiverServer(
        Receiver(KfpRetraining(fake.url, namespaces=["ml-prod"])), str(token_file), "127.0.0.1", 0
    )
    thread = server.serve_in_thread()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_alertmanager_delivers_a_drift_alert_that_starts_one_run(tmp_path, fake_kfp, caplog):
    debian_tool("prometheus-alertmanager")
    add_schedule(fake_kfp, "flights-delay-nightly")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    caplog.set_level("INFO", logger="kfstack.app.alert_receiver")
    with (
        receiver_endpoint(fake_kfp, token_file) as receiver_url,
        alertmanager(tmp_path, configured(receiver_url, token_file)) as am,
    ):
        post_alert(am)
        wait_until(lambda: fake_kfp.runs, 20, "no run was started")
        (run,) = fake_kfp.runs.values()
        parameters = run["runtime_config"]["parameters"]
        assert parameters["force"] is True and parameters["serving_name"] == SERVICE
        assert parameters["trigger"].startswith(
            f"alert KfstackLiveDrift on ml-prod/{SERVICE} firing since 2025-01-01T00:00:00Z, max PSI 0.27 ["
        )
        # Resolved: Alertmanager sends it (send_resolved); nothing more starts.
        run["state"] = "SUCCEEDED"
        post_alert(am, ends_at="2025-01-01T00:30:00Z")
        wait_until(
            lambda: any('"resolved' in r.getMessage() for r in caplog.records), 20, "no resolved notification"
        )
    assert len(fake_kfp.runs) == 1
    decisions = [json.loads(r.getMessage()) for r in caplog.records if r.getMessage().startswith("{")]
    assert [d["decision"] for d in decisions] == ["started", "skipped"]


def test_a_notification_with_the_wrong_token_starts_nothing(tmp_path, fake_kfp, caplog):
    debian_tool("prometheus-alertmanager")
    add_schedule(fake_kfp, "flights-delay-nightly")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token")
    caplog.set_level("INFO", logger="kfstack.app.alert_receiver")
    with (
        receiver_endpoint(fake_kfp, token_file) as receiver_url,
        alertmanager(tmp_path, configured(receiver_url, wrong)) as am,
    ):
        post_alert(am)
        wait_until(lambda: any('"http_status": 401' in r.getMessage() for r in caplog.records), 20, "no 401")
    assert fake_kfp.runs == {}
