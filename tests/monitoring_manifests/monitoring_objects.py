"""The monitoring component as the environments build it: its objects, the rule groups out of
the PrometheusRule's spec, and the dashboard out of its ConfigMap."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import REPO_ROOT

MANIFESTS = REPO_ROOT / "manifests"
COMPONENT = MANIFESTS / "components" / "monitoring"
# Each environment's monitoring overlay, the namespace it puts the objects in.
MONITORING_OVERLAYS = {"dev": "kfstack-dev", "prod": "ml-prod"}
DASHBOARD_CONFIGMAP = "kfstack-dashboard"


@functools.cache
def build(environment: str) -> str:
    """`kubectl kustomize` of overlays/<environment>/monitoring (offline)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: `kubectl kustomize` cannot build the manifests here")
    proc = subprocess.run(
        [kubectl, "kustomize", str(MANIFESTS / "overlays" / environment / "monitoring")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def objects_of(environment: str) -> list[dict]:
    return [o for o in yaml.safe_load_all(build(environment)) if o]


def one(objects: list[dict], kind: str) -> dict:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def rule_groups(environment: str = "dev") -> list[dict]:
    """The PrometheusRule's spec.groups: a Prometheus rule file's content."""
    return one(objects_of(environment), "PrometheusRule")["spec"]["groups"]


def rules(environment: str = "dev") -> list[dict]:
    return [rule for group in rule_groups(environment) for rule in group["rules"]]


def alerts(environment: str = "dev") -> list[dict]:
    return [rule for rule in rules(environment) if "alert" in rule]


def dashboard(environment: str = "dev") -> dict:
    configmap = [
        o
        for o in objects_of(environment)
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == DASHBOARD_CONFIGMAP
    ]
    assert len(configmap) == 1, f"no ConfigMap {DASHBOARD_CONFIGMAP} in {environment}'s monitoring"
    (content,) = configmap[0]["data"].values()
    return json.loads(content)


def panel_queries(board: dict) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every panel target."""
    return [
        (panel["title"], target["expr"]) for panel in board["panels"] for target in panel.get("targets", [])
    ]
