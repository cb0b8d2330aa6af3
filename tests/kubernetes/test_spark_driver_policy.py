"""The Spark driver's reach: its Role grants what Spark's driver calls and no more, and the
admission policy admits a pod it creates only when the pod is one of its executors, running as
its own account and asking nothing of the node.

The policy's CEL is evaluated here with cel-python on sample admission requests. That is a CEL
library, not the API server's own admission (which also type-checks the expressions against the
Pod schema): it shows what the expressions decide, and a cluster is the final word.
"""

from __future__ import annotations

import copy
from typing import Any

import celpy
import pytest
import yaml

from kfstack.kubernetes.spark_application import build_spark_application
from tests.conftest import REPO_ROOT
from tests.kubernetes.conftest import spark_request

POLICY_FILE = REPO_ROOT / "manifests" / "cluster" / "spark-driver-policy" / "spark-driver-policy.yaml"
RBAC_FILE = REPO_ROOT / "manifests" / "base" / "namespaced" / "spark-rbac.yaml"
DRIVER = "system:serviceaccount:ml-prod:kfstack-spark"

EXECUTOR: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "job-exec-1", "labels": {"spark-role": "executor", "spark-app-selector": "spark-1"}},
    "spec": {
        "serviceAccountName": "kfstack-spark",
        "containers": [{"name": "spark-kubernetes-executor", "image": "ghcr.io/kfstack/kfstack-spark:0.1.0"}],
        "volumes": [{"name": "spark-local-dir-1", "emptyDir": {}}],
    },
}


def _policy() -> dict:
    (policy, binding) = list(yaml.safe_load_all(POLICY_FILE.read_text()))
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    return policy


def admitted(pod: dict, username: str = DRIVER, operation: str = "CREATE") -> tuple[bool, list[str]]:
    """The policy's decision on a pod admission request, as its CEL decides: (admitted, the
    messages of the validations that failed)."""
    spec = _policy()["spec"]
    rules = spec["matchConstraints"]["resourceRules"]
    if not any(operation in rule["operations"] and "pods" in rule["resources"] for rule in rules):
        return True, []
    env = celpy.Environment()
    activation = {
        "object": celpy.json_to_cel(pod),
        "request": celpy.json_to_cel({"operation": operation, "userInfo": {"username": username}}),
    }

    def true(expression: str) -> bool:
        return bool(env.program(env.compile(expression)).evaluate(activation))

    if not all(true(condition["expression"]) for condition in spec["matchConditions"]):
        return True, []  # not a Spark driver's request: this policy has no say
    failed = [v["message"] for v in spec["validations"] if not true(v["expression"])]
    return not failed, failed


def _changed(**changes: Any) -> dict:
    pod = copy.deepcopy(EXECUTOR)
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = pod
        for part in parents:
            node = node[part]
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return pod


def test_a_drivers_own_executor_is_admitted():
    assert admitted(EXECUTOR) == (True, [])


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (_changed(spec__serviceAccountName="default-editor"), "run as its own service account"),
        (_changed(spec__serviceAccountName=None), "run as its own service account"),
        (_changed(metadata__labels={"spark-role": "driver"}), "its executors only"),
        (_changed(metadata__labels=None), "its executors only"),
        (_changed(spec__hostNetwork=True), "shares no namespace of the node"),
        (_changed(spec__hostPID=True), "shares no namespace of the node"),
        (_changed(spec__volumes=[{"name": "root", "hostPath": {"path": "/"}}]), "mounts no path of the node"),
        (
            _changed(spec__containers=[{"name": "x", "image": "x", "securityContext": {"privileged": True}}]),
            "no privileged container",
        ),
    ],
)
def test_anything_else_a_driver_creates_is_denied(pod, message):
    allowed, messages = admitted(pod)
    assert not allowed and any(message in m for m in messages), messages


def test_other_accounts_and_operations_are_not_this_policys_business():
    editor_pod = _changed(spec__serviceAccountName="default-editor", metadata__labels=None)
    assert admitted(editor_pod, username="system:serviceaccount:ml-prod:default-editor") == (True, [])
    assert admitted(editor_pod, username="alice@example.com") == (True, [])
    assert admitted(editor_pod, operation="DELETE") == (True, [])
    # Another namespace's driver account is held to the same rule.
    assert not admitted(editor_pod, username="system:serviceaccount:team-b:kfstack-spark")[0]


def test_kfstacks_spark_application_runs_its_executors_as_the_drivers_account():
    spec = build_spark_application(spark_request(service_account="team-spark"))["spec"]
    assert spec["executor"]["serviceAccount"] == spec["driver"]["serviceAccount"] == "team-spark"


def test_the_drivers_role_grants_pods_and_config_maps_and_nothing_else():
    role = next(o for o in yaml.safe_load_all(RBAC_FILE.read_text()) if o["kind"] == "Role")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["pods", "configmaps"],
            "verbs": ["create", "get", "list", "watch", "delete", "deletecollection"],
        }
    ]
