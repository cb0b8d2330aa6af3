"""Both environments on one cluster: neither overlay overwrites an object of the other or one
they share, each has its namespace and its own queues, and those queues admit that namespace."""

import re

from tests.kubernetes.test_manifests import MANIFESTS, OVERLAYS, objects_of

NAMESPACES = {"dev": "kfstack-dev", "prod": "ml-prod"}
# The one object an overlay puts elsewhere: dev's admission at standalone KFP's object store, in
# KFP's namespace (overlays/dev/kfp-object-store says why).
ELSEWHERE = {"dev": {("NetworkPolicy", "kubeflow", "kfstack-dev-seaweedfs")}, "prod": set()}
# ml-prod belongs to a Kubeflow profile: the profile controller creates it and refuses to adopt a
# namespace it did not create, so the prod overlay creates none and the install guide labels it.
CREATES_NAMESPACE = {"dev": True, "prod": False}
ENVIRONMENT_LABEL = "kfstack.dev/environment"


def _key(obj: dict) -> tuple[str, str, str, str]:
    """What identifies an object on a cluster: API group, kind, namespace, name."""
    group = obj["apiVersion"].rpartition("/")[0]
    return group, obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def _describe(key: tuple[str, str, str, str]) -> str:
    group, kind, namespace, name = key
    return f"{kind}.{group or 'core'} {namespace + '/' if namespace else ''}{name}"


def _of_kind(objects: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def _documented_labels(readme: str, namespace: str) -> dict[str, str]:
    """The labels the install guide's `kubectl label namespace <namespace> k=v ...` lines set."""
    found = re.findall(rf"kubectl label namespace {re.escape(namespace)}((?: [\w./-]+=[\w.-]+)+)", readme)
    assert found, f"manifests/README.md does not say how to label namespace {namespace}"
    return dict(pair.split("=", 1) for line in found for pair in line.split())


def test_the_overlays_define_no_object_differently():
    seen = {}
    clashes = []
    for env in OVERLAYS:
        for obj in objects_of(env):
            key = _key(obj)
            first_env, first = seen.setdefault(key, (env, obj))
            if first != obj:
                clashes.append(f"{_describe(key)} ({first_env} vs {env})")
    assert not clashes, "applying both overlays, the second overwrites " + ", ".join(clashes)


def test_the_overlays_leave_the_shared_objects_alone():
    # Deleting one environment (`kubectl delete -k`) must not delete what the other still uses,
    # and the shared objects say nothing about an environment.
    shared = objects_of("cluster")
    shared_keys = {_key(o) for o in shared}
    for env in OVERLAYS:
        both = shared_keys & {_key(o) for o in objects_of(env)}
        assert not both, f"{env} also applies " + ", ".join(_describe(k) for k in sorted(both))
    for obj in shared:
        assert ENVIRONMENT_LABEL not in obj["metadata"].get("labels", {}), _describe(_key(obj))


def test_each_overlay_feeds_its_local_queues_into_its_own_cluster_queues():
    cluster_queues = {env: _of_kind(objects_of(env), "ClusterQueue") for env in OVERLAYS}
    for env in OVERLAYS:
        others = [cq for other in OVERLAYS if other != env for cq in cluster_queues[other].values()]
        assert not set(cluster_queues[env]) & {cq["metadata"]["name"] for cq in others}, env
        # One cohort lends idle quota between its queues; dev must not borrow what prod paid for.
        cohorts = {cq["spec"].get("cohortName") for cq in cluster_queues[env].values()}
        assert not cohorts & {cq["spec"].get("cohortName") for cq in others}, env
        for name, local_queue in _of_kind(objects_of(env), "LocalQueue").items():
            target = local_queue["spec"]["clusterQueue"]
            assert target in cluster_queues[env], f"{env}: LocalQueue {name} feeds {target!r}, not its own"


def test_each_overlay_has_its_namespace_and_its_queues_admit_it():
    readme = (MANIFESTS / "README.md").read_text()
    for env in OVERLAYS:
        objects = objects_of(env)
        namespace = NAMESPACES[env]
        elsewhere = {
            (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"])
            for o in objects
            if o["metadata"].get("namespace", namespace) != namespace
        }
        assert elsewhere == ELSEWHERE[env]
        created = [o for o in objects if o["kind"] in ("Namespace", "Profile")]
        if CREATES_NAMESPACE[env]:
            (created_ns,) = created
            assert (created_ns["apiVersion"], created_ns["kind"]) == ("v1", "Namespace")
            assert created_ns["metadata"]["name"] == namespace
            labels = created_ns["metadata"].get("labels", {})
        else:
            assert created == [], f"{env}: the profile controller owns namespace {namespace}"
            labels = _documented_labels(readme, namespace)
        for name, cluster_queue in _of_kind(objects, "ClusterQueue").items():
            selector = cluster_queue["spec"]["namespaceSelector"]
            # Only plain label matches, and never the empty selector that admits every namespace.
            assert list(selector) == ["matchLabels"] and selector["matchLabels"], name
            assert selector["matchLabels"].items() <= labels.items(), f"{name} does not admit {namespace}"
