"""The whole way, embedded, every part real: drift injected into a live flights predictor's
traffic raises KfstackLiveDrift in a real Prometheus (Debian's 2.42, the shipped rules), which a
real Alertmanager (0.25, the shipped route) delivers to ``kfstack alert-receiver --local``, whose
flights-retraining run puts a retrained model in production -- the chain
``python -m benchmarks.drift_to_retraining`` measures, run here with its own functions and short
waits (``for: 10s``, ``group_wait: 1s``, a 500-row window scraped every second).

A first run deploys the model to drift from (about a minute on 2 cores), the retraining run
takes longer: ``slow``. Fast here: the configurations the chain writes (checked by promtool and
amtool) and how it reads the receiver's decisions. The links' parts are tested fast on their
own: the rules with promtool (tests/monitoring_manifests/test_alert_rules.py), the receiver
(tests/app/test_alert_receiver*.py), live drift (tests/monitoring).
"""

from __future__ import annotations

import json
import subprocess
import types

import pytest
import yaml

from benchmarks.drift_to_retraining import (
    ALERT,
    LINKS,
    SERVICE,
    Settings,
    alertmanager_config,
    deploy_first_model,
    drift_rule,
    measure,
    prometheus_config,
    psi_line,
    receiver_decisions,
    retraining_route,
    rule_groups,
)
from tests.debian_tools import debian_tool

SHORT = Settings(
    window_rows=500,
    scrape_seconds=1.0,
    for_="10s",
    group_wait="1s",
    group_interval="1s",
    rows_per_second=100.0,
    quiet_seconds=10.0,
    run_timeout_seconds=900.0,
)


def test_the_chain_runs_the_shipped_rule_and_route_with_its_overrides(tmp_path):
    groups = rule_groups("10s")
    assert drift_rule(groups)["for"] == "10s" and drift_rule(rule_groups(None))["for"] == "10m"
    assert psi_line() == 0.2
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    config = prometheus_config("127.0.0.1:8080", "127.0.0.1:9093", 2.5)
    assert config["global"]["scrape_interval"] == "2500ms"
    (tmp_path / "prometheus.yaml").write_text(yaml.safe_dump(config))
    check = subprocess.run(
        [debian_tool("promtool"), "check", "config", str(tmp_path / "prometheus.yaml")],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr

    token = tmp_path / "token"
    token.write_text("t")
    routed = alertmanager_config("http://127.0.0.1:9095", str(token), "1s", None)
    route = retraining_route(routed)
    assert (route["group_wait"], route["group_interval"]) == ("1s", "5m")  # the shipped interval kept
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(routed))
    check = subprocess.run(
        [debian_tool("amtool"), "check-config", str(tmp_path / "alertmanager.yml")],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run(
        [
            debian_tool("amtool"),
            "config",
            "routes",
            "test",
            f"--config.file={tmp_path / 'alertmanager.yml'}",
            f"alertname={ALERT}",
        ],
        capture_output=True,
        text=True,
    )
    assert "kfstack-retraining" in test.stdout, test.stdout + test.stderr


def test_the_receivers_decisions_are_read_with_their_log_lines_time(tmp_path):
    decision = {"decision": "started", "inference_service": SERVICE, "run": "/runs/x"}
    log = tmp_path / "alert-receiver.log"
    log.write_text(
        "kfstack alert-receiver: listening on http://127.0.0.1:9095/alerts\n"
        f"2026-11-26 11:49:22,250 INFO kfstack.app.alert_receiver.decisions: {json.dumps(decision)}\n"
        "2026-11-26 11:49:23,000 WARNING kfstack.app.alert_receiver.server: not json {\n"
    )
    ((stamp, read),) = receiver_decisions(types.SimpleNamespace(receiver_log=str(log)))
    assert read == decision
    assert stamp % 60 == pytest.approx(22.25)  # local time, to the millisecond


@pytest.mark.slow
def test_injected_drift_starts_a_run_that_puts_a_retrained_model_in_production(tmp_path, monkeypatch):
    binaries = {name: debian_tool(name) for name in ("prometheus", "prometheus-alertmanager")}
    monkeypatch.chdir(tmp_path)
    root = str(tmp_path / "runs")
    first = deploy_first_model(root)
    assert first["serving"]["decision"] == "first", first.get("serving")

    figures = measure(root, SHORT, binaries)

    seconds = figures["seconds_from_drift"]
    assert set(seconds) == set(LINKS)
    # Undrifted traffic raised nothing (measure fails on a pending alert); the drift did.
    assert figures["undrifted_max_psi_seen"] < figures["settings"]["psi_line"]
    assert not figures["traffic"]["failed_requests"]
    # Pending until the for: has passed, and not before the gauge crossed the line.
    assert seconds["gauge_over_line"] <= seconds["alert_pending"] + SHORT.scrape_seconds
    assert seconds["alert_firing"] - seconds["alert_pending"] >= 10 - 2 * SHORT.scrape_seconds
    assert seconds["alert_firing"] <= seconds["run_directory_created"] <= seconds["run_finished"]
    assert [d["decision"] for d in figures["receiver_decisions"]][:1] == ["started"]
    run = figures["run"]
    assert run["status"] == "SUCCEEDED", run["error"]
    assert run["trigger"].startswith(f"alert KfstackLiveDrift on kfstack-bench/{SERVICE} firing since ")
    assert run["drift"]["decision"] == "retrain" and run["gate"] == "challenger"
    assert run["serving"]["decision"] == "promote"
    assert figures["retrained_model_in_production"]
    assert figures["production_after"] == run["serving"]["model_version"] != figures["production_before"]
