"""manifests/components/retraining-trigger: the alert receiver's Deployment, Service, RBAC and
NetworkPolicy build as a kustomize Component, round-trip through the Kubernetes SDK models and
agree with each other and with the command they run; the Alertmanager route passes
`amtool check-config` and routes KfstackLiveDrift (and only it) to the receiver."""

from __future__ import annotations

import datetime
import os
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml
from kfp.client import KF_PIPELINES_SA_TOKEN_PATH
from kubernetes import client

from kfstack import images
from kfstack.app.cli import build_parser
from kfstack.app.cli.alert_receiver import parse_duration
from tests.conftest import REPO_ROOT
from tests.debian_tools import debian_tool
from tests.upstream_crds import openapi_round_trip, validate_with_crds

COMPONENT = REPO_ROOT / "manifests" / "components" / "retraining-trigger"
ALERTMANAGER_CONFIG = COMPONENT / "alertmanager.yml"
NAMESPACE = "ml-prod"
URL_PLACEHOLDER = "RECEIVER-NAMESPACE"
RETRAINING_DOC = REPO_ROOT / "docs" / "retraining.md"
MODELS = {
    "ServiceAccount": "V1ServiceAccount",
    "ClusterRole": "V1ClusterRole",
    "RoleBinding": "V1RoleBinding",
    "Deployment": "V1Deployment",
    "Service": "V1Service",
    "NetworkPolicy": "V1NetworkPolicy",
}
# What the receiver asks of a multi-user KFP (kfstack/app/alert_receiver/cluster.py), as its
# SubjectAccessReviews name it (kubeflow/pipelines backend/src/apiserver/common/const.go).
KFP_RULES = {
    "jobs": {"list"},
    "runs": {"list", "create"},
    "pipelines": {"get", "list"},
    "experiments": {"get"},
}


@pytest.fixture(scope="module")
def objects(tmp_path_factory) -> dict[str, dict[str, Any]]:
    """The Component built into a namespace, as an overlay adds it; by kind."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:  # as tests/kubernetes/test_manifests.py
        pytest.skip("kubectl is not installed: `kubectl kustomize` cannot build the manifests here")
    overlay = tmp_path_factory.mktemp("overlay")
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump({"namespace": NAMESPACE, "components": [os.path.relpath(COMPONENT, overlay)]})
    )
    built = subprocess.run([kubectl, "kustomize", str(overlay)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    # Core kinds only: the Kubernetes client's models check them
    # (test_every_object_round_trips_through_the_sdk_models).
    found = [o for o in yaml.safe_load_all(built.stdout) if o]
    by_kind = {o["kind"]: o for o in found}
    assert len(by_kind) == len(found), "one object of each kind"
    return by_kind


def test_every_object_round_trips_through_the_sdk_models(objects):
    assert set(objects) == set(MODELS)
    api = client.ApiClient()
    for kind, obj in objects.items():
        assert openapi_round_trip(api, MODELS[kind], obj) == obj, kind
        if kind != "ClusterRole":
            assert obj["metadata"]["namespace"] == NAMESPACE, kind


def test_the_deployment_runs_the_receiver_from_kfstacks_launcher_image(objects):
    deployment = objects["Deployment"]
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == images.image_for("launcher", registry=images.DEFAULT_REGISTRY)
    assert container["command"] == ["kfstack", "alert-receiver"]
    args = build_parser().parse_args(["alert-receiver", *container["args"]])
    assert not args.local and args.port == container["ports"][0]["containerPort"]
    # It acts on its own namespace's alerts: --namespace from the downward API (Kubernetes
    # expands $(VAR) in args from the container's env).
    assert args.namespaces == ["$(POD_NAMESPACE)"]
    (env,) = container["env"]
    assert env == {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
    assert parse_duration(args.stale_after, "--stale-after") == datetime.timedelta(hours=24)
    # The token file is the Secret's key, mounted read-only.
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert args.token_file == f"{mounts['webhook-token']['mountPath']}/token"
    assert volumes["webhook-token"]["secret"] == {
        "secretName": "kfstack-alert-receiver-token",
        "items": [{"key": "token", "path": "token"}],
    }
    # kfp.Client's in-cluster credentials: the projected token at its default path, which it
    # sends only when no host is set (kfp/client/client.py _load_config).
    assert not any(e["name"].startswith("KF_PIPELINES") for e in container["env"])
    assert "--host" not in " ".join(container["args"])
    assert f"{mounts['kfp-token']['mountPath']}/token" == KF_PIPELINES_SA_TOKEN_PATH
    (source,) = volumes["kfp-token"]["projected"]["sources"]
    assert source["serviceAccountToken"]["audience"] == "pipelines.kubeflow.org"
    assert pod["serviceAccountName"] == objects["ServiceAccount"]["metadata"]["name"]
    # Probes reach the health endpoint, unauthenticated.
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"


def test_the_rbac_grants_exactly_what_the_receiver_asks_of_the_kfp_api(objects):
    role, binding = objects["ClusterRole"], objects["RoleBinding"]
    granted: dict[str, set[str]] = {}
    for rule in role["rules"]:
        assert rule["apiGroups"] == ["pipelines.kubeflow.org"]
        for resource in rule["resources"]:
            granted.setdefault(resource, set()).update(rule["verbs"])
    assert granted == KFP_RULES
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (subject,) = binding["subjects"]
    assert subject["name"] == objects["ServiceAccount"]["metadata"]["name"]
    assert subject.get("namespace", NAMESPACE) == NAMESPACE


def test_only_alertmanager_reaches_the_receivers_port(objects):
    policy, service = objects["NetworkPolicy"], objects["Service"]
    pod_labels = objects["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    (peer,) = rule["from"]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "alertmanager"}
    (port,) = service["spec"]["ports"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9095}] and port["port"] == 9095


def test_the_alertmanager_route_passes_amtool_and_sends_only_drift_to_the_receiver():
    checked = subprocess.run(
        [debian_tool("amtool"), "check-config", str(ALERTMANAGER_CONFIG)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr

    def receivers(*labels: str) -> str:
        routed = subprocess.run(
            [
                debian_tool("amtool"),
                *("config", "routes", "test", f"--config.file={ALERTMANAGER_CONFIG}", *labels),
            ],
            capture_output=True,
            text=True,
        )
        assert routed.returncode == 0, routed.stderr
        return routed.stdout.strip()

    drift = ("alertname=KfstackLiveDrift", f"namespace={NAMESPACE}", "inference_service=flights-delay")
    assert receivers(*drift) == "kfstack-retraining"
    assert receivers("alertname=KfstackHighErrorRate", f"namespace={NAMESPACE}") == "default"


def test_the_alertmanager_webhook_reaches_the_service_with_a_bearer_token(objects):
    text = ALERTMANAGER_CONFIG.read_text()
    config = yaml.safe_load(text)
    (webhook,) = next(r for r in config["receivers"] if r["name"] == "kfstack-retraining")["webhook_configs"]
    service = objects["Service"]
    # The URL's namespace is a placeholder, said so beside it: the overlay's namespace goes there.
    assert f".{URL_PLACEHOLDER}." in webhook["url"]
    assert f"{URL_PLACEHOLDER} is a placeholder" in text
    assert webhook["url"].replace(URL_PLACEHOLDER, NAMESPACE) == (
        f"http://{service['metadata']['name']}.{NAMESPACE}.svc.cluster.local:{service['spec']['ports'][0]['port']}/alerts"
    )
    assert set(webhook["http_config"]["authorization"]) == {"credentials_file"}  # type: Bearer


def istio_objects_in_the_docs() -> list[dict[str, Any]]:
    """The Istio objects docs/retraining.md's "From a drift alert" asks a profile namespace for."""
    text = RETRAINING_DOC.read_text()
    section = text[text.index("## From a drift alert") :]
    following = section.find("\n## ", 3)
    section = section[: following if following > 0 else None]
    found = []
    for block in re.findall(r"```yaml\n(.*?)```", section, flags=re.S):
        found += [
            o
            for o in yaml.safe_load_all(block)
            if o and o.get("apiVersion", "").startswith("security.istio.io/")
        ]
    return found


def test_the_documented_istio_objects_admit_alertmanager_to_the_receivers_port_only(objects, tmp_path):
    """Alertmanager has no sidecar: the receiver's port is PERMISSIVE and an ALLOW rule admits
    requests to it, for the receiver's pods only; the objects validate against Istio's CRDs."""
    documented = istio_objects_in_the_docs()
    by_kind = {o["kind"]: o for o in documented}
    assert sorted(by_kind) == ["AuthorizationPolicy", "PeerAuthentication"] and len(documented) == 2
    pod_labels = objects["Deployment"]["spec"]["template"]["metadata"]["labels"]
    (container,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    port = str(container["ports"][0]["containerPort"])
    peer, policy = by_kind["PeerAuthentication"], by_kind["AuthorizationPolicy"]
    for obj in (peer, policy):
        # Selecting the receiver's pods, and nothing else in the namespace.
        assert (
            obj["spec"]["selector"]["matchLabels"]
            == objects["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"]
        )
        assert obj["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    # The CRD's CEL rules, which the validator does not run: portLevelMtls needs a selector with
    # matchLabels, and its keys are ports 1-65535 (security.istio.io_peerauthentications.yaml).
    assert peer["spec"]["portLevelMtls"] == {port: {"mode": "PERMISSIVE"}}
    assert peer["spec"]["mtls"]["mode"] == "STRICT"  # the rest of the pod keeps the profile's mTLS
    assert policy["spec"]["action"] == "ALLOW"
    (rule,) = policy["spec"]["rules"]
    assert "from" not in rule  # a caller without a sidecar has no principal or namespace to match
    (operation,) = [t["operation"] for t in rule["to"]]
    assert operation == {"ports": [port], "methods": ["POST"], "paths": ["/alerts"]}
    validate_with_crds(tmp_path, documented)
