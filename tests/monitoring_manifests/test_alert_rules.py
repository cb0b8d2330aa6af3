"""The PrometheusRule's rule groups on Prometheus' own engine: `promtool check rules` on them as
they ship, and `promtool test rules` with fixtures/alert_cases.yaml, where every alert fires on
its condition and stays quiet without it (other exporters' series cite their sources there)."""

from __future__ import annotations

import pathlib
import subprocess

import yaml

from tests.debian_tools import debian_tool
from tests.monitoring_manifests.monitoring_objects import alerts, rule_groups

CASES = pathlib.Path(__file__).parent / "fixtures" / "alert_cases.yaml"


def _write_rules(path: pathlib.Path, with_annotations: bool, edit=None) -> pathlib.Path:
    """The PrometheusRule's groups as a rule file; ``edit(rule)`` may change a rule first."""
    groups = rule_groups()
    for group in groups:
        for rule in group["rules"]:
            if not with_annotations:
                rule.pop("annotations", None)
            if edit is not None:
                edit(rule)
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def _run_cases(tmp_path: pathlib.Path, rules: pathlib.Path) -> subprocess.CompletedProcess:
    cases = yaml.safe_load(CASES.read_text())
    cases["rule_files"] = [rules.name]
    (tmp_path / "alert_cases.yaml").write_text(yaml.safe_dump(cases, sort_keys=False))
    return subprocess.run(
        [debian_tool("promtool"), "test", "rules", "alert_cases.yaml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )


def test_promtool_accepts_the_rule_groups(tmp_path):
    rules = _write_rules(tmp_path / "kfstack-rules.yaml", with_annotations=True)
    command = [debian_tool("promtool"), "check", "rules", str(rules)]
    proc = subprocess.run(command, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in rule_groups())} rules found" in proc.stdout


def test_every_alert_has_a_firing_and_a_quiet_case():
    cases = yaml.safe_load(CASES.read_text())["tests"]
    checks = [check for case in cases for check in case.get("alert_rule_test", [])]
    for alert in alerts():
        mine = [check for check in checks if check["alertname"] == alert["alert"]]
        name = alert["alert"]
        assert any(check["exp_alerts"] for check in mine), f"{name}: no case where it fires"
        assert any(not check["exp_alerts"] for check in mine), f"{name}: no case where it stays quiet"
    assert {check["alertname"] for check in checks} <= {alert["alert"] for alert in alerts()}


def test_promtool_runs_the_cases(tmp_path):
    # Annotations are left out here: their templates are checked above, and the cases assert when
    # an alert fires and with which labels, not its wording.
    proc = _run_cases(tmp_path, _write_rules(tmp_path / "kfstack-rules.yaml", with_annotations=False))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_promtool_fails_a_case_whose_alert_does_not_fire(tmp_path):
    # The cases can fail: with the drift line raised above every PSI they hold, the firing case
    # of KfstackLiveDrift fails.
    def raise_the_drift_line(rule: dict) -> None:
        if rule.get("alert") == "KfstackLiveDrift":
            assert rule["expr"].rstrip().endswith("> 0.2"), rule["expr"]
            rule["expr"] = rule["expr"].rstrip().removesuffix("> 0.2") + "> 2"

    rules = _write_rules(tmp_path / "kfstack-rules.yaml", with_annotations=False, edit=raise_the_drift_line)
    proc = _run_cases(tmp_path, rules)
    assert proc.returncode != 0
    assert "alertname: KfstackLiveDrift" in proc.stdout + proc.stderr
