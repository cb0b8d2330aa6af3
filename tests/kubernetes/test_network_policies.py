"""The batch pods' NetworkPolicies (manifests/components/network-policies and each overlay's
patches and team-egress.yaml): every policy an overlay renders is a valid ``V1NetworkPolicy`` to
the last key, and its selectors pick exactly the pods they are meant for among the pods a run
creates (rendered by the builders a run calls) and the pods beside them in the namespace."""

from __future__ import annotations

import copy
import json
import re

import pytest
from kubernetes import client

from kfstack.kubernetes import naming
from tests.kubernetes import rendered_pods
from tests.kubernetes.rendered_pods import Pod, selects
from tests.kubernetes.test_builders import round_trip
from tests.kubernetes.test_manifests import MANIFESTS, OVERLAYS, objects_of

BATCH_POLICIES = (
    "kfstack-batch",
    "kfstack-batch-katib",
    "kfstack-batch-object-store",
    "kfstack-batch-team-egress",
    "kfstack-batch-tracking",
)
API_SERVER_POLICY = "kfstack-spark-driver-api-server"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# Pods outside the run's namespace that the batch pods must reach, as upstream labels them:
# CoreDNS keeps kube-dns' `k8s-app: kube-dns`; Katib v0.19.0's db-manager
# (manifests/v1beta1/components/db-manager/db-manager.yaml); the community distribution's and
# standalone KFP 2.17's SeaweedFS (kubeflow/pipelines manifests/kustomize/third-party/seaweedfs/
# base/seaweedfs/seaweedfs-deployment.yaml).
DNS = ({NAMESPACE_NAME_LABEL: "kube-system"}, {"k8s-app": "kube-dns"}, ("UDP", 53), ("TCP", 53))
KATIB_DB_MANAGER = (
    {NAMESPACE_NAME_LABEL: "kubeflow"},
    {"katib.kubeflow.org/component": "db-manager", "sidecar.istio.io/inject": "false"},
    ("TCP", 6789),
)
SEAWEEDFS = (
    {NAMESPACE_NAME_LABEL: "kubeflow"},
    {"app": "seaweedfs", "application-crd-id": "kubeflow-pipelines"},
)
# A Katib suggestion's pod: the Suggestion's labels plus Katib's (pkg/controller.v1beta1/util/
# labels.go, SuggestionLabels); its early-stopping service listens on 6788.
SUGGESTION = {
    "katib.kubeflow.org/experiment": "kfs-tune-0123456789ab",
    "katib.kubeflow.org/suggestion": "kfs-tune-0123456789ab",
    "katib.kubeflow.org/deployment": "kfs-tune-0123456789ab-random",
}


# --- The SDK model, key by key -------------------------------------------------------------------


def unknown_keys(data, type_name: str, path: str = "") -> list[str]:
    """The keys of ``data`` that the Kubernetes client's model ``type_name`` does not define
    (recursively, through its ``attribute_map`` and ``openapi_types``)."""
    if type_name.startswith("list["):
        item = type_name[5:-1]
        return [k for i, value in enumerate(data or []) for k in unknown_keys(value, item, f"{path}[{i}]")]
    if type_name.startswith("dict(") or type_name in ("str", "int", "bool", "float", "object", "datetime"):
        return []
    model = getattr(client, type_name)
    if not isinstance(data, dict):
        return [f"{path or '<root>'}: expected an object ({type_name})"]
    by_key = {key: attribute for attribute, key in model.attribute_map.items()}
    found = []
    for key, value in data.items():
        if key not in by_key:
            found.append(f"{path}.{key}".lstrip("."))
        else:
            found += unknown_keys(value, model.openapi_types[by_key[key]], f"{path}.{key}".lstrip("."))
    return found


def model_problems(obj: dict) -> list[str]:
    """Why ``obj`` is not exactly a ``V1NetworkPolicy``: keys the model lacks, or a difference
    after deserialising it into the model and serialising it back."""
    problems = [f"unknown key {key}" for key in unknown_keys(obj, "V1NetworkPolicy")]
    again = round_trip(obj, "V1NetworkPolicy")
    if again != obj:
        problems.append(
            f"does not round-trip: {json.dumps(obj, sort_keys=True)} != {json.dumps(again, sort_keys=True)}"
        )
    return problems


def policies(env: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects_of(env) if o["kind"] == "NetworkPolicy"}


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay_policies(request) -> tuple[str, dict[str, dict]]:
    return request.param, policies(request.param)


def test_every_network_policy_is_exactly_a_v1_network_policy(overlay_policies):
    env, found = overlay_policies
    assert set(BATCH_POLICIES) | {API_SERVER_POLICY} <= set(found), env
    for name, policy in found.items():
        assert model_problems(policy) == [], f"{env}: NetworkPolicy {name}"


@pytest.mark.parametrize(
    ("path", "key"),
    [
        (("spec",), "podselector"),
        (("spec", "egress", 0, "to", 0), "namespace"),
        (("spec", "ingress", 0, "from", 0, "podSelector"), "matchLabel"),
        (("spec", "egress", 1, "ports", 0), "portNumber"),
    ],
)
def test_a_key_the_model_does_not_define_is_caught(path, key):
    (policy,) = [p for p in policies("prod").values() if p["metadata"]["name"] == "kfstack-batch"]
    assert model_problems(policy) == []
    wrong = copy.deepcopy(policy)
    node = wrong
    for step in path:
        node = node[step]
    node[key] = {"x": "y"} if key.endswith("selector") or key == "matchLabel" else "53"
    problems = model_problems(wrong)
    assert any(p.startswith("unknown key ") and p.endswith(key) for p in problems), problems


# --- Label selectors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({}, {}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchLabels": {"a": "1", "b": "2"}}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"b": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"b": "1"}, True),
        (
            {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "DoesNotExist"}]},
            {"a": "1", "b": "2"},
            False,
        ),
    ],
)
def test_label_selector_matching(selector, labels, expected):
    assert selects(selector, labels) is expected


def test_label_selector_matching_refuses_what_kubernetes_refuses():
    for expression in (
        {"key": "a", "operator": "Equals", "values": ["1"]},
        {"key": "a", "operator": "In", "values": []},
        {"key": "a", "operator": "Exists", "values": ["1"]},
    ):
        with pytest.raises(ValueError):
            selects({"matchExpressions": [expression]}, {"a": "1"})


# --- What the policies select ----------------------------------------------------------------------


@pytest.fixture(scope="module", params=[True, False], ids=["mesh", "no-mesh"])
def pods(request) -> dict[str, list[Pod]]:
    """The run's batch and predictor pods (every training API and framework), and KFP's task pods."""
    batch, predictors = rendered_pods.run_pods({"istio_mesh": request.param})
    return {"batch": batch, "predictors": predictors, "kfp": rendered_pods.kfp_task_pods()}


EXPECTED_BATCH_ROLES = {
    "SparkApplication/driver",
    "SparkApplication/executor",
    "PyTorchJob/Master",
    "PyTorchJob/Worker",
    "TFJob/Worker",
    "TrainJob/node",
    "trial/PyTorchJob/Master",
    "trial/PyTorchJob/Worker",
    "trial/TFJob/Worker",
    "trial/TrainJob/node",
}


def test_the_run_renders_every_kind_of_pod_the_policies_are_about(pods):
    assert rendered_pods.roles(pods["batch"]) == EXPECTED_BATCH_ROLES
    assert {"predictor", "predictor/canary"} == rendered_pods.roles(pods["predictors"])
    # The deployment task joins the mesh (pipelines/wiring.py), the others are KFP's plain pods.
    assert {"kfp/exec-model-deployment", "kfp/exec-spark-job"} <= rendered_pods.roles(pods["kfp"])


def test_the_batch_policies_select_every_batch_pod_and_nothing_else(overlay_policies, pods):
    env, found = overlay_policies
    for name in BATCH_POLICIES:
        selector = found[name]["spec"]["podSelector"]
        for pod in pods["batch"]:
            assert selects(selector, pod.labels), f"{env}: {name} does not select {pod.role}"
        for pod in pods["predictors"] + pods["kfp"]:
            assert not selects(selector, pod.labels), f"{env}: {name} selects {pod.role}"
    # Nothing selects the model servers or KFP's pods: the mesh protects those.
    for name, policy in found.items():
        if policy["metadata"]["namespace"] == rendered_namespace(env):
            for pod in pods["predictors"] + pods["kfp"]:
                assert not selects(policy["spec"]["podSelector"], pod.labels), (
                    f"{env}: {name} selects {pod.role}"
                )


def rendered_namespace(env: str) -> str:
    return {"dev": "kfstack-dev", "prod": "ml-prod"}[env]


def test_batch_pods_are_reached_only_by_batch_pods_of_their_namespace(overlay_policies, pods):
    env, found = overlay_policies
    ingress = [
        (name, rule)
        for name, policy in found.items()
        if "Ingress" in policy["spec"]["policyTypes"]
        and any(selects(policy["spec"]["podSelector"], pod.labels) for pod in pods["batch"])
        for rule in policy["spec"].get("ingress") or []
    ]
    assert [name for name, _ in ingress] == ["kfstack-batch"], env
    (_, rule) = ingress[0]
    assert "ports" not in rule  # rendezvous, NCCL, Spark's ports: whatever the jobs choose
    (peer,) = rule["from"]
    assert list(peer) == ["podSelector"], "a namespaceSelector or ipBlock would admit other namespaces"
    for pod in pods["batch"]:
        assert selects(peer["podSelector"], pod.labels), pod.role
    for pod in pods["predictors"] + pods["kfp"]:
        assert not selects(peer["podSelector"], pod.labels), pod.role


def egress_rules(found: dict[str, dict], pod: Pod) -> list[dict]:
    """The egress rules of every policy selecting ``pod``."""
    return [
        rule
        for policy in found.values()
        if "Egress" in policy["spec"]["policyTypes"] and selects(policy["spec"]["podSelector"], pod.labels)
        for rule in policy["spec"].get("egress") or []
    ]


def allows(
    rules: list[dict], namespace_labels, pod_labels, port: tuple[str, int], own_namespace: bool
) -> bool:
    """Whether one of ``rules`` lets a pod connect to a pod labelled ``pod_labels`` in a
    namespace labelled ``namespace_labels`` on ``port`` (NetworkPolicy egress semantics: a peer
    without namespaceSelector is in the policy's own namespace; no ``to``: any destination; no
    ``ports``: every port)."""
    for rule in rules:
        ports = rule.get("ports")
        if ports is not None and not any(
            p.get("protocol", "TCP") == port[0] and p.get("port") in (None, port[1]) for p in ports
        ):
            continue
        peers = rule.get("to")
        if peers is None:
            return True
        for peer in peers:
            if "ipBlock" in peer:
                continue
            in_namespace = (
                selects(peer["namespaceSelector"], namespace_labels)
                if "namespaceSelector" in peer
                else own_namespace
            )
            if in_namespace and selects(peer.get("podSelector", {}), pod_labels):
                return True
    return False


def test_every_batch_pod_reaches_dns_katib_the_object_store_and_its_peers(overlay_policies, pods):
    env, found = overlay_policies
    ns_labels, dns_labels, *dns_ports = DNS
    kubeflow, db_manager, db_port = KATIB_DB_MANAGER
    store_ns, store = SEAWEEDFS
    for pod in pods["batch"]:
        rules = egress_rules(found, pod)
        for port in dns_ports:
            assert allows(rules, ns_labels, dns_labels, port, own_namespace=False), (env, pod.role, port)
        assert allows(rules, kubeflow, db_manager, db_port, own_namespace=False), (env, pod.role)
        assert allows(rules, {}, SUGGESTION, ("TCP", 6788), own_namespace=True), (env, pod.role)
        assert allows(rules, store_ns, store, ("TCP", 8333), own_namespace=False), (env, pod.role)
        for peer in pods["batch"]:
            assert allows(rules, {}, peer.labels, ("TCP", 29500), own_namespace=True), (
                env,
                pod.role,
                peer.role,
            )
        # Not the model servers, not KFP's pods, not the same services in another namespace.
        for other in pods["predictors"] + pods["kfp"]:
            assert not allows(rules, {}, other.labels, ("TCP", 8080), own_namespace=True), (
                env,
                pod.role,
                other.role,
            )
        assert not allows(rules, {NAMESPACE_NAME_LABEL: "team-b"}, db_manager, db_port, own_namespace=False)
        assert not allows(rules, {NAMESPACE_NAME_LABEL: "team-b"}, store, ("TCP", 8333), own_namespace=False)


def test_only_spark_drivers_reach_the_api_server(overlay_policies, pods):
    env, found = overlay_policies
    selector = found[API_SERVER_POLICY]["spec"]["podSelector"]
    chosen = {pod.role for pod in pods["batch"] if selects(selector, pod.labels)}
    assert chosen == {"SparkApplication/driver"}, env
    api_server = ({}, {}, ("TCP", 6443))
    for pod in pods["batch"]:
        reaches = allows(egress_rules(found, pod), *api_server, own_namespace=False)
        assert reaches == (pod.role == "SparkApplication/driver"), (env, pod.role)
    # The rule: the API server's ports, to whatever address it has (see the component's comment).
    (rule,) = found[API_SERVER_POLICY]["spec"]["egress"]
    assert rule == {"ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]}


def test_the_environment_egress_is_filled_and_the_team_egress_allows_nothing_yet(overlay_policies):
    env, found = overlay_policies
    # The component leaves these to the environment; a missing patch would leave them empty.
    for name in ("kfstack-batch-object-store", API_SERVER_POLICY):
        assert found[name]["spec"]["egress"], f"{env}: {name} allows nothing"
    team = found["kfstack-batch-team-egress"]["spec"]
    assert (team["policyTypes"], team["egress"]) == (["Egress"], []), env


def commented_egress(path) -> list[dict]:
    """The commented example egress of a policy file, as YAML."""
    import yaml

    text = path.read_text()
    block = re.search(r"^#   egress:\n((?:#(?:   .*)?\n)+)", text, flags=re.MULTILINE)
    assert block, f"{path} has no commented example"
    lines = [line[4:] if line.startswith("#   ") else "" for line in block.group(0).splitlines()]
    return yaml.safe_load("\n".join(lines))["egress"]


@pytest.mark.parametrize("env", OVERLAYS)
def test_the_team_egress_example_is_a_valid_egress(env):
    example = commented_egress(MANIFESTS / "overlays" / env / "namespace" / "team-egress.yaml")
    assert len(example) == 2
    policy = copy.deepcopy(policies(env)["kfstack-batch-team-egress"])
    policy["spec"]["egress"] = example
    assert model_problems(policy) == []


def test_dev_admits_its_namespace_at_kfps_object_store():
    # Standalone KFP's SeaweedFS admits only its own, istio-system's and profile namespaces' pods.
    found = policies("dev")
    store_policy = found["kfstack-dev-seaweedfs"]
    assert store_policy["metadata"]["namespace"] == "kubeflow"
    assert model_problems(store_policy) == []
    spec = store_policy["spec"]
    assert selects(spec["podSelector"], SEAWEEDFS[1])
    assert spec["policyTypes"] == ["Ingress"]
    (rule,) = spec["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8333}]
    (peer,) = rule["from"]
    assert selects(peer["namespaceSelector"], {NAMESPACE_NAME_LABEL: "kfstack-dev"})
    assert not selects(peer["namespaceSelector"], {NAMESPACE_NAME_LABEL: "ml-prod"})
    assert "kfstack-dev-seaweedfs" not in policies("prod")


def test_the_workload_label_is_the_one_the_builders_set():
    (policy,) = [p for p in policies("prod").values() if p["metadata"]["name"] == "kfstack-batch"]
    assert policy["spec"]["podSelector"] == {"matchLabels": {naming.WORKLOAD_LABEL: naming.BATCH_WORKLOAD}}


def test_the_tracking_policy_allows_nothing_until_filled_and_its_example_reaches_the_server(overlay_policies):
    env, found = overlay_policies
    tracking = found["kfstack-batch-tracking"]
    assert (tracking["spec"]["policyTypes"], tracking["spec"]["egress"]) == (["Egress"], []), env
    example = commented_egress(MANIFESTS / "components" / "network-policies" / "tracking.yaml")
    filled = copy.deepcopy(tracking)
    filled["spec"]["egress"] = example
    assert model_problems(filled) == []
    server = ({NAMESPACE_NAME_LABEL: "mlflow"}, {"app.kubernetes.io/name": "mlflow"}, ("TCP", 5000))
    assert allows(example, *server, own_namespace=False)
    assert not allows(
        example, {NAMESPACE_NAME_LABEL: "kubeflow"}, {"app": "seaweedfs"}, ("TCP", 5000), own_namespace=False
    )
