"""Istio's side of a profile namespace: the AuthorizationPolicy prod ships for the deployment
step (manifests/components/canary-analysis-authorization), and what the install guide documents:
the PeerAuthentication for a STRICT mesh and the Sidecar that lets the deployment task reach
another launch namespace. All validate against Istio 1.30's CRDs (../shared/crds/istio), their
CEL rules (which the validator does not run) are checked here, and their selectors and rules are
matched against the pods and requests they are about."""

from __future__ import annotations

import re

import pytest
import yaml

from kfstack.kubernetes import naming
from kfstack.serving.protocols import V1Predict, V2Tensor
from tests.kubernetes import rendered_pods
from tests.kubernetes.rendered_pods import selects
from tests.kubernetes.test_manifests import MANIFESTS, objects_of
from tests.upstream_crds import validate_with_crds

POLICY = "kfstack-canary-analysis"
ACTIVATOR = "cluster.local/ns/knative-serving/sa/activator"
# The store's pods as the community distribution labels them (applications/pipeline/upstream/
# third-party/seaweedfs/base/seaweedfs/seaweedfs-deployment.yaml in kubeflow/manifests).
SEAWEEDFS_POD = {"app": "seaweedfs", "application-crd-id": "kubeflow-pipelines"}
# The egress hosts of the community distribution's root Sidecar, which every sidecar of a namespace
# without a Sidecar of its own gets (kubeflow/manifests at 009c8808,
# common/istio/istio-install/base/sidecar-prune-egress.yaml).
ROOT_SIDECAR_HOSTS = (
    "./*",
    "kubeflow/*",
    "kubeflow-system/*",
    "knative-serving/*",
    "knative-eventing/*",
    "istio-system/*",
)
PIPELINES = ("flights-training", "flights-retraining", "digits-training")
DEPLOYMENT_TASK = "kfp/exec-model-deployment"


def check_labels_rules(labels: dict) -> None:
    """The CEL rules of Istio 1.30's CRDs on a workload selector's labels (x-kubernetes-validations:
    no wildcard in a key or value, no empty key)."""
    for key, value in labels.items():
        assert key and "*" not in key and "*" not in value, (key, value)


def check_selector_rules(spec: dict) -> None:
    check_labels_rules(spec["selector"]["matchLabels"])


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
    validate_with_crds(tmp_path, [policy])
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


def documented(kind: str) -> dict:
    """The one object of ``kind`` in manifests/README.md's YAML blocks."""
    readme = (MANIFESTS / "README.md").read_text()
    blocks = re.findall(r"^```yaml\n(.*?)^```", readme, flags=re.MULTILINE | re.DOTALL)
    found = [
        doc
        for block in blocks
        for doc in yaml.safe_load_all(block)
        if isinstance(doc, dict) and doc.get("kind") == kind
    ]
    assert len(found) == 1, f"manifests/README.md documents {len(found)} {kind}s, not 1"
    return found[0]


def documented_peer_authentication() -> dict:
    return documented("PeerAuthentication")


def test_the_documented_peer_authentication_validates_against_istios_crd(tmp_path):
    validate_with_crds(tmp_path, [documented_peer_authentication()])


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


# --- The Sidecar of the install guide -------------------------------------------------------------


def documented_sidecar() -> dict:
    return documented("Sidecar")


def test_the_documented_sidecar_validates_against_istios_crd(tmp_path):
    sidecar = documented_sidecar()
    assert sidecar["apiVersion"] == "networking.istio.io/v1"
    validate_with_crds(tmp_path, [sidecar])
    check_labels_rules(sidecar["spec"]["workloadSelector"]["labels"])


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_the_documented_sidecar_selects_the_deployment_task_and_no_other_pod(pipeline):
    # A workloadSelector matches the pod's labels exactly as a matchLabels selector does.
    selector = {"matchLabels": documented_sidecar()["spec"]["workloadSelector"]["labels"]}
    tasks = rendered_pods.kfp_task_pods(pipeline)
    assert {pod.role for pod in tasks if selects(selector, pod.labels)} == {DEPLOYMENT_TASK}, pipeline
    # It needs KFP's own label too: a pod of the namespace that asks for a sidecar by itself (a
    # notebook, another team's service) keeps the root's egress.
    assert not selects(selector, {naming.SIDECAR_INJECT_LABEL: "true"})


def test_the_documented_sidecar_selects_no_batch_pod_or_predictor():
    selector = {"matchLabels": documented_sidecar()["spec"]["workloadSelector"]["labels"]}
    batch, predictors = rendered_pods.run_pods()
    for pod in batch + predictors:
        assert not selects(selector, pod.labels), pod.role


def test_the_documented_sidecar_keeps_the_roots_hosts_and_adds_the_launch_namespace():
    sidecar = documented_sidecar()
    (egress,) = sidecar["spec"]["egress"]
    hosts = egress["hosts"]
    # A Sidecar's egress replaces the root's: everything the root lists must stay.
    assert set(ROOT_SIDECAR_HOSTS) <= set(hosts), hosts
    (added,) = set(hosts) - set(ROOT_SIDECAR_HOSTS)
    namespace, _, services = added.partition("/")
    # Every service of one other namespace: the launch namespace of the deployment task's calls.
    assert services == "*", added
    own = sidecar["metadata"]["namespace"]
    listed = {host.partition("/")[0] for host in ROOT_SIDECAR_HOSTS}
    assert namespace not in listed | {own, "*"}, added
