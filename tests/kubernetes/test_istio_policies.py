"""Istio's side of a profile namespace: the AuthorizationPolicy prod ships for the deployment
step (manifests/components/canary-analysis-authorization) and the PeerAuthentication the install
guide documents for a STRICT mesh. Both validate against Istio 1.30's CRDs (../shared/crds/istio),
their CEL rules (which the validator does not run) are checked here, and their selectors and
rules are matched against the pods and requests they are about."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from kfstack.serving.protocols import V1Predict, V2Tensor
from tests.kubernetes import rendered_pods
from tests.kubernetes.rendered_pods import selects
from tests.kubernetes.test_manifests import MANIFESTS, VALIDATOR, objects_of

POLICY = "kfstack-canary-analysis"
ACTIVATOR = "cluster.local/ns/knative-serving/sa/activator"
# The store's pods as the community distribution labels them (applications/pipeline/upstream/
# third-party/seaweedfs/base/seaweedfs/seaweedfs-deployment.yaml in kubeflow/manifests).
SEAWEEDFS_POD = {"app": "seaweedfs", "application-crd-id": "kubeflow-pipelines"}


def validate(tmp_path, objects: list[dict]) -> None:
    """Every object validates against the upstream CRDs (none skipped)."""
    if not VALIDATOR.is_file():
        pytest.skip(
            f"upstream CRDs and validator not found at {VALIDATOR.parent.parent} "
            f"(set KFSTACK_SHARED_DIR): the Istio objects were not validated against Istio's CRDs"
        )
    path = tmp_path / "istio.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    proc = subprocess.run([sys.executable, str(VALIDATOR), str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("OK ") == len(objects), proc.stdout


def check_selector_rules(spec: dict) -> None:
    """The CEL rules of Istio 1.30's CRDs on a workload selector (x-kubernetes-validations:
    no wildcard in a key or value, no empty key)."""
    for key, value in spec["selector"]["matchLabels"].items():
        assert key and "*" not in key and "*" not in value, (key, value)


def authorization_policy(env: str) -> dict | None:
    found = [o for o in objects_of(env) if o["kind"] == "AuthorizationPolicy"]
    assert len(found) <= 1, env
    return found[0] if found else None


def path_matches(pattern: str, path: str) -> bool:
    """Istio's path match in an AuthorizationPolicy operation: exact, ``prefix*``, ``*suffix``,
    or ``*`` (any)."""
    if pattern == "*":
        return True
    if pattern.endswith("*"):
        return path.startswith(pattern[:-1])
    if pattern.startswith("*"):
        return path.endswith(pattern[1:])
    return path == pattern


def admitted(policy: dict, principal: str, method: str, path: str) -> bool:
    """Whether an ALLOW policy has a rule admitting this request (from and to both match)."""
    for rule in policy["spec"]["rules"]:
        sources = [f["source"] for f in rule.get("from", [])]
        if sources and not any(principal in s.get("principals", []) for s in sources):
            continue
        operations = [t["operation"] for t in rule.get("to", [])]
        if not operations or any(
            method in op.get("methods", [method])
            and any(path_matches(p, path) for p in op.get("paths", ["*"]))
            for op in operations
        ):
            return True
    return False


# --- The AuthorizationPolicy ----------------------------------------------------------------------


def test_only_prod_ships_the_authorization_policy():
    # dev runs on standalone KFP, without Istio.
    assert authorization_policy("dev") is None
    assert authorization_policy("prod") is not None


def test_the_authorization_policy_validates_against_istios_crd(tmp_path):
    policy = authorization_policy("prod")
    validate(tmp_path, [policy])
    spec = policy["spec"]
    # CEL: only one of selector, targetRef and targetRefs.
    assert sum(key in spec for key in ("selector", "targetRef", "targetRefs")) == 1
    check_selector_rules(spec)
    for rule in spec["rules"]:
        for source in (f["source"] for f in rule["from"]):
            # CEL: serviceAccounts cannot be combined with principals or namespaces.
            assert "serviceAccounts" not in source
    assert spec["action"] == "ALLOW"


def runs_account() -> tuple[str, str]:
    """prod's runs' account: the ServiceAccount the overlay creates, which the environment file
    names and the launcher Role is bound to."""
    objects = objects_of("prod")
    (account,) = [
        o for o in objects if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == "kfstack-runner"
    ]
    namespace, name = account["metadata"]["namespace"], account["metadata"]["name"]
    (binding,) = [
        o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "kfstack-launcher"
    ]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    environment = yaml.safe_load((MANIFESTS / "overlays" / "prod" / "pipeline-parameters.yaml").read_text())
    assert environment["service_account"] == name
    return namespace, name


def test_the_principal_is_the_runs_account_and_the_activator():
    namespace, name = runs_account()
    policy = authorization_policy("prod")
    assert policy["metadata"]["namespace"] == namespace
    principals = [
        p for rule in policy["spec"]["rules"] for f in rule["from"] for p in f["source"]["principals"]
    ]
    assert principals == [f"cluster.local/ns/{namespace}/sa/{name}", ACTIVATOR]


@pytest.fixture(scope="module", params=["serverless", "standard"])
def predictors(request) -> list[rendered_pods.Pod]:
    _, found = rendered_pods.run_pods({"serving_mode": request.param})
    return found


def test_the_policy_selects_kfstacks_predictors_and_nothing_else(predictors):
    selector = authorization_policy("prod")["spec"]["selector"]
    assert predictors
    for pod in predictors:
        assert selects(selector, pod.labels), pod.role
    batch, _ = rendered_pods.run_pods()
    for pod in batch + rendered_pods.kfp_task_pods():
        assert not selects(selector, pod.labels), pod.role
    # Another team's InferenceService in the namespace: KServe's labels, not kfstack's.
    other = {rendered_pods.KSERVE_SERVICE_LABEL: "churn", rendered_pods.KSERVE_COMPONENT_LABEL: "predictor"}
    assert not selects(selector, other)


def test_the_policy_admits_the_deployment_steps_requests_and_no_others():
    namespace, name = runs_account()
    policy = authorization_policy("prod")
    model = "flights-delay"
    requests = [
        ("POST", V1Predict().path(model)),
        ("POST", V2Tensor(input_name="features").path(model)),
        # The rollout's readiness check (kfstack/serving/kserve_rollout.py, _ready_url).
        ("GET", f"/v2/models/{model}/ready"),
    ]
    for caller in (f"cluster.local/ns/{namespace}/sa/{name}", ACTIVATOR):
        for method, path in requests:
            assert admitted(policy, caller, method, path), (caller, method, path)
        for method, path in [
            ("DELETE", V1Predict().path(model)),
            ("POST", "/metrics"),
            ("GET", "/v1/models"),
        ]:
            assert not admitted(policy, caller, method, path), (caller, method, path)
    for stranger in (
        f"cluster.local/ns/{namespace}/sa/default-editor",
        "cluster.local/ns/team-b/sa/kfstack-runner",
    ):
        assert not admitted(policy, stranger, "POST", V1Predict().path(model)), stranger


# --- The PeerAuthentication of the install guide ----------------------------------------------------


def documented_peer_authentication() -> dict:
    """The one PeerAuthentication in manifests/README.md's YAML blocks."""
    readme = (MANIFESTS / "README.md").read_text()
    blocks = re.findall(r"^```yaml\n(.*?)^```", readme, flags=re.MULTILINE | re.DOTALL)
    found = [
        doc
        for block in blocks
        for doc in yaml.safe_load_all(block)
        if doc and doc.get("kind") == "PeerAuthentication"
    ]
    assert len(found) == 1, f"manifests/README.md documents {len(found)} PeerAuthentications, not 1"
    return found[0]


def test_the_documented_peer_authentication_validates_against_istios_crd(tmp_path):
    validate(tmp_path, [documented_peer_authentication()])


def test_the_documented_peer_authentication_opens_only_the_stores_s3_port():
    policy = documented_peer_authentication()
    # Acts only in its own namespace (or the root one): the store's.
    assert policy["metadata"]["namespace"] == "kubeflow"
    spec = policy["spec"]
    # CEL: portLevelMtls requires a selector with labels; ports in 1..65535.
    check_selector_rules(spec)
    assert spec["selector"]["matchLabels"]
    assert all(0 < int(port) <= 65535 for port in spec["portLevelMtls"])
    assert selects(spec["selector"], SEAWEEDFS_POD)
    assert spec["mtls"] == {"mode": "STRICT"}
    assert spec["portLevelMtls"] == {8333: {"mode": "PERMISSIVE"}}
