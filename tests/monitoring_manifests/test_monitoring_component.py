"""manifests/components/monitoring: what each environment's monitoring overlay builds validates
against prometheus-operator v0.93's CRDs, carries the labels its Prometheus selects by (set by
the overlay, not the component), and keeps the rules' promises: severity and a runbook for every
alert, labels bounded by the InferenceService or training job, no canary, no `job` selector."""

from __future__ import annotations

import re

import pytest
import yaml

from kfstack.kubernetes import inference_service
from tests.conftest import REPO_ROOT
from tests.monitoring_manifests.monitoring_objects import (
    COMPONENT,
    MONITORING_OVERLAYS,
    alerts,
    build,
    dashboard,
    objects_of,
    one,
    panel_queries,
    rules,
)
from tests.upstream_crds import run_validator

RUNBOOKS = REPO_ROOT / "docs" / "runbooks.md"
RUNBOOK_BASE = "https://github.com/kfstack/kfstack/blob/main/docs/runbooks.md#"
# The labels an alert may carry besides severity: what it is about, never a pod or a request.
ALERT_LABELS = {"namespace", "inference_service", "training_job", "framework"}
SEVERITIES = {"critical", "warning"}
# The label kube-prometheus-stack's Prometheus selects PodMonitors and PrometheusRules by.
SELECTOR_LABEL = "release"
KFSTACK_SERIES = re.compile(r"\b((?:kfstack_predictor_\w+|process_\w+))(\{[^}]*\})?")


@pytest.mark.parametrize("environment", MONITORING_OVERLAYS)
def test_each_monitoring_overlay_validates_against_the_operators_crds(environment, tmp_path):
    built = tmp_path / "monitoring.yaml"
    built.write_text(build(environment))
    kinds = sorted(o["kind"] for o in objects_of(environment))
    assert kinds == ["ConfigMap", "PodMonitor", "PrometheusRule"]
    # prometheus-operator's kinds have no model in any dependency: only their CRDs check them.
    report = run_validator(built, "prometheus-operator's CRD validation of PodMonitor and PrometheusRule")
    validated = re.findall(r"^OK (\w+)/", report, re.MULTILINE)
    assert sorted(validated) == ["PodMonitor", "PrometheusRule"], report


@pytest.mark.parametrize("environment", MONITORING_OVERLAYS)
def test_the_overlay_sets_namespace_and_selector_labels(environment):
    for obj in objects_of(environment):
        assert obj["metadata"]["namespace"] == MONITORING_OVERLAYS[environment]
        assert obj["metadata"]["labels"][SELECTOR_LABEL], obj["metadata"]["name"]
        assert obj["metadata"]["labels"]["kfstack.dev/environment"] == environment


def test_the_component_names_no_environment():
    # The selector label and the namespace are each installation's: only an overlay sets them.
    for path in COMPONENT.glob("*.yaml"):
        for document in yaml.safe_load_all(path.read_text()):
            metadata = (document or {}).get("metadata", {})
            assert SELECTOR_LABEL not in metadata.get("labels", {}), path.name
            assert "namespace" not in metadata, path.name
    kustomization = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Component"
    assert "namespace" not in kustomization and "labels" not in kustomization


def test_the_environment_overlays_apply_without_prometheus_operator():
    from tests.kubernetes.test_manifests import objects_of as environment_objects

    for environment in MONITORING_OVERLAYS:
        groups = {o["apiVersion"].split("/")[0] for o in environment_objects(environment)}
        assert "monitoring.coreos.com" not in groups, environment


def test_the_pod_monitor_scrapes_predictors_and_labels_them_as_the_rules_expect():
    monitor = one(objects_of("dev"), "PodMonitor")
    selector = monitor["spec"]["selector"]["matchExpressions"]
    assert {"key": "serving.kserve.io/inferenceservice", "operator": "Exists"} in selector
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    # The flights example's runtime serves /metrics on its HTTP port (examples/manifests).
    runtime = yaml.safe_load(
        (REPO_ROOT / "examples/manifests/flights-predictor/serving-runtime.yaml").read_text()
    )
    (container,) = runtime["spec"]["containers"]
    assert "--http_port=8080" in container["args"]
    assert endpoint["portNumber"] == container["ports"][0]["containerPort"] == 8080
    assert endpoint["path"] == runtime["metadata"]["annotations"]["prometheus.kserve.io/path"]
    targets = {r["targetLabel"]: r["sourceLabels"] for r in endpoint["relabelings"]}
    assert targets["inference_service"] == ["__meta_kubernetes_pod_label_serving_kserve_io_inferenceservice"]
    assert targets["namespace"] == ["__meta_kubernetes_namespace"]
    assert targets["pod"] == ["__meta_kubernetes_pod_name"]
    # Prometheus' meta label of the pod label kfstack puts on a Standard-mode canary.
    meta_name = re.sub(r"[^a-zA-Z0-9_]", "_", inference_service.CANARY_POD_LABEL)
    assert targets["canary"] == ["__meta_kubernetes_pod_label_" + meta_name]


def test_a_standard_mode_canary_carries_the_canary_label_and_the_promoted_predictor_does_not():
    from kfstack.kubernetes.node_pools import get_profile

    def request(version: str) -> inference_service.ServingRequest:
        return inference_service.ServingRequest(
            name="flights",
            mode="standard",
            storage_uri=f"s3://models/flights/{version}",
            model_version=version,
            profile=get_profile("serving"),
            model_format="sklearn",
        )

    def pod_labels(predictor: dict) -> dict:
        return predictor.get("labels") or {}

    live = inference_service.confirmed(inference_service.first_rollout(request("1")), request("1"))
    assert inference_service.CANARY_POD_LABEL not in pod_labels(live["spec"]["predictor"])
    canary = inference_service.canary_rollout(live, request("2"))
    (entry,) = canary["spec"]["canary"]
    assert pod_labels(entry["predictor"]) == {inference_service.CANARY_POD_LABEL: "true"}
    assert inference_service.CANARY_POD_LABEL not in pod_labels(canary["spec"]["predictor"])
    promoted = inference_service.promoted(canary, request("2"))
    assert inference_service.CANARY_POD_LABEL not in pod_labels(promoted["spec"]["predictor"])


def test_every_alert_has_a_severity_and_a_runbook_section():
    headings = {
        re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in RUNBOOKS.read_text().splitlines()
        if line.startswith("#")
    }
    for alert in alerts():
        assert alert["labels"]["severity"] in SEVERITIES, alert["alert"]
        url = alert["annotations"]["runbook_url"]
        assert url == RUNBOOK_BASE + alert["alert"].lower(), alert["alert"]
        assert alert["alert"].lower() in headings, f"docs/runbooks.md has no section {alert['alert']}"
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]


def test_alert_labels_are_bounded():
    # promtool compares a fired alert's whole label set with a case's exp_labels
    # (test_alert_rules.py), so the firing cases fix every alert's labels: these, no pod, no
    # instance, nothing a request sends.
    from tests.monitoring_manifests.test_alert_rules import CASES

    cases = yaml.safe_load(CASES.read_text())["tests"]
    fired = [
        (check["alertname"], set(expected["exp_labels"]))
        for case in cases
        for check in case.get("alert_rule_test", [])
        for expected in check["exp_alerts"]
    ]
    assert {name for name, _ in fired} == {alert["alert"] for alert in alerts()}
    for name, labels in fired:
        assert labels - {"severity"} <= ALERT_LABELS, (name, labels)
        assert "namespace" in labels, name
    for alert in alerts():
        assert not set(alert["labels"]) - {"severity"}, alert["alert"]


def test_no_rule_or_panel_selects_on_job():
    expressions = [rule["expr"] for rule in rules()] + [expr for _, expr in panel_queries(dashboard())]
    for expr in expressions:
        assert not re.search(r"[{,]\s*job\s*(=|!=|=~|!~)", expr), expr


def test_the_serving_rules_leave_canary_pods_out():
    for rule in rules():
        for name, matchers in KFSTACK_SERIES.findall(rule["expr"]):
            assert 'canary=""' in matchers, (rule.get("alert"), name)


def test_the_live_drift_alert_keeps_the_metric_contract():
    (drift,) = [alert for alert in alerts() if alert["alert"] == "KfstackLiveDrift"]
    expr = " ".join(drift["expr"].split())
    assert expr == 'max by (namespace, inference_service) (kfstack_predictor_drift_max_psi{canary=""}) > 0.2'

    assert drift["for"] == "10m"


def test_the_dashboard_reads_its_datasource_from_a_variable():
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    datasource = {"type": "prometheus", "uid": "${datasource}"}
    for panel in board["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == datasource, panel["title"]
        assert all(target["datasource"] == datasource for target in panel["targets"]), panel["title"]
    for name in ("namespace", "inference_service"):
        assert variables[name]["datasource"] == datasource
    assert one(objects_of("dev"), "ConfigMap")["metadata"]["labels"]["grafana_dashboard"] == "1"
