"""manifests/: every kustomization builds offline, validates, grants exactly what the launchers
need, and matches the node-pool profiles."""

import dataclasses
import functools
import re
import shutil
import subprocess
from collections import Counter

import pytest
import yaml

from kfstack import images
from kfstack.kubernetes import inference_service, node_pools, pods, resources
from kfstack.kubernetes.resources import TRAINJOB_NODE
from kfstack.kubernetes.training_jobs import TrainingJobRequest
from kfstack_examples.flights import predictor
from kfstack_examples.flights.training.settings import TrainingSettings
from tests.conftest import REPO_ROOT
from tests.kubernetes.test_builders import round_trip
from tests.upstream_crds import validate_with_crds

MANIFESTS = REPO_ROOT / "manifests"
OVERLAYS = ("dev", "prod")
# Everything one cluster gets: what all environments share (applied once), kfstack's Trainer v2
# runtime (applied once, only where Trainer v2 is installed), Katib's permission to run kfstack's
# trial kinds (applied once, only where Katib is installed) and each overlay; and the flights
# example's KServe runtime (examples/manifests, applied once where KServe is installed), which a
# team's own predictor replaces with its own. Paths from the repository root.
BUILDS = {
    "cluster": "manifests/cluster",
    "trainer-v2": "manifests/cluster/trainer-v2",
    "katib": "manifests/cluster/katib",
    "spark-driver-policy": "manifests/cluster/spark-driver-policy",
    "flights-predictor": "examples/manifests/flights-predictor",
    "dev": "manifests/overlays/dev",
    "prod": "manifests/overlays/prod",
}
# The custom resources (Kueue, Trainer v2) each build holds; the validator checks every one of
# them against the upstream CRDs.
CUSTOM_KINDS = {
    "cluster": {"ResourceFlavor": 3},
    "trainer-v2": {"ClusterTrainingRuntime": 1},
    "katib": {},
    "spark-driver-policy": {},
    "flights-predictor": {"ClusterServingRuntime": 1},
    "dev": {"ClusterQueue": 3, "LocalQueue": 3},
    # prod's namespace is in the Kubeflow platform's Istio mesh: the canary analysis's policy.
    "prod": {"ClusterQueue": 3, "LocalQueue": 3, "AuthorizationPolicy": 1},
}
CUSTOM_GROUPS = ("kueue.x-k8s.io/", "trainer.kubeflow.org/", "serving.kserve.io/", "security.istio.io/")
CORE_MODELS = {
    "Namespace": "V1Namespace",
    "ServiceAccount": "V1ServiceAccount",
    "Role": "V1Role",
    "RoleBinding": "V1RoleBinding",
    "ClusterRole": "V1ClusterRole",
    "ClusterRoleBinding": "V1ClusterRoleBinding",
    "PriorityClass": "V1PriorityClass",
    "NetworkPolicy": "V1NetworkPolicy",
    "ValidatingAdmissionPolicy": "V1ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding": "V1ValidatingAdmissionPolicyBinding",
}
# The account each overlay binds the launcher Role to: (namespace, name).
RUNS_ACCOUNT = {"dev": ("kubeflow", "pipeline-runner"), "prod": ("ml-prod", "kfstack-runner")}
# Exactly the calls kfstack/kubernetes/launcher.py makes: a batch job is created, read by
# polling (no watch), listed by the run cleanup and deleted; the primary pod is found by label or
# name (list) and its log read (get); a Katib Experiment's Trials are listed
# (kfstack/kubernetes/katib_experiment.py). The serving stage will add its kind (KServe).
LAUNCHER_RULES = {
    ("kubeflow.org", "pytorchjobs"): {"create", "get", "list", "delete"},
    ("kubeflow.org", "tfjobs"): {"create", "get", "list", "delete"},
    ("kubeflow.org", "experiments"): {"create", "get", "list", "delete"},
    ("kubeflow.org", "trials"): {"list"},
    ("trainer.kubeflow.org", "trainjobs"): {"create", "get", "list", "delete"},
    ("sparkoperator.k8s.io", "sparkapplications"): {"create", "get", "list", "delete"},
    ("serving.kserve.io", "inferenceservices"): {"create", "get", "list", "update"},
    ("", "pods"): {"list"},
    ("", "pods/log"): {"get"},
    # Before the first create, the LocalQueue its jobs name (kfstack/kubernetes/access.py).
    ("kueue.x-k8s.io", "localqueues"): {"get"},
    # The ServingRuntime a team's predictor runs in, checked against the pipeline.
    ("serving.kserve.io", "servingruntimes"): {"get"},
}
# What KFP 2.17's own pods need of a run's account (overlays/prod/namespace/runner.yaml says
# where each comes from): (group, resource, resourceNames) -> verbs.
PIPELINE_POD_RULES = {
    ("argoproj.io", "workflowtaskresults", ()): {"create", "patch"},
    # KFP's driver resolves the schedule-time placeholder from the run's Workflow (its name
    # changes every run, so no resourceNames).
    ("argoproj.io", "workflows", ()): {"get"},
    ("", "pods", ()): {"get"},
    ("", "configmaps", ("kfp-launcher",)): {"get"},
    ("", "secrets", ("mlpipeline-minio-artifact",)): {"get"},
}


@functools.cache
def build(name: str) -> str:
    """`kubectl kustomize` of one entry of BUILDS (offline: nothing there is remote)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: `kubectl kustomize` cannot build the manifests here")
    proc = subprocess.run(
        [kubectl, "kustomize", str(REPO_ROOT / BUILDS[name])], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def objects_of(name: str) -> list[dict]:
    """The objects of one build, parsed afresh (callers may change them)."""
    return [o for o in yaml.safe_load_all(build(name)) if o]


@pytest.fixture(scope="module", params=list(BUILDS))
def built(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(request.param) / "built.yaml"
    path.write_text(build(request.param))
    return request.param, path, objects_of(request.param)


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request):
    return request.param, objects_of(request.param)


def test_every_object_is_checked_by_a_crd_or_an_sdk_model(built):
    name, _, objects = built
    kinds = {o["kind"] for o in objects}
    assert kinds <= set(CORE_MODELS) | set(CUSTOM_KINDS[name]), name


def test_custom_resources_validate_against_the_upstream_crds(built, tmp_path):
    name, _, objects = built
    custom = [o for o in objects if o["apiVersion"].startswith(CUSTOM_GROUPS)]
    assert Counter(o["kind"] for o in custom) == CUSTOM_KINDS[name]
    # Each one validated, none skipped (the validator skips an object no CRD it has describes).
    validate_with_crds(tmp_path, custom)


def test_core_objects_round_trip_through_the_sdk_models(built):
    name, _, objects = built
    core = [o for o in objects if o["kind"] in CORE_MODELS]
    # The Trainer v2 and KServe builds hold only their runtimes, checked against their CRDs above.
    assert core or set(CUSTOM_KINDS[name]) in ({"ClusterTrainingRuntime"}, {"ClusterServingRuntime"})
    for obj in core:
        assert round_trip(obj, CORE_MODELS[obj["kind"]]) == obj


def test_every_core_model_is_exercised():
    kinds = {o["kind"] for name in BUILDS for o in objects_of(name)}
    assert set(CORE_MODELS) <= kinds


def test_the_launcher_role_grants_every_batch_kind_the_run_cleanup_deletes():
    batch = {
        (kind.group, kind.plural)
        for kind in resources.KINDS.values()
        if kind.lifecycle is resources.Lifecycle.BATCH
    }
    assert batch <= set(LAUNCHER_RULES)
    assert all(LAUNCHER_RULES[key] >= {"create", "get", "list", "delete"} for key in batch)
    assert LAUNCHER_RULES[(resources.TRIAL.group, resources.TRIAL.plural)] == {"list"}
    # A long-lived service is applied (create or update), polled and listed, never deleted.
    services = [kind for kind in resources.KINDS.values() if kind.lifecycle is resources.Lifecycle.SERVICE]
    assert services
    for kind in services:
        assert LAUNCHER_RULES[(kind.group, kind.plural)] == {"create", "get", "list", "update"}


def test_rbac_is_namespaced_and_exactly_what_the_launchers_need(overlay):
    env, objects = overlay
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    (role,) = [o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "kfstack-launcher"]
    granted = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted[(group, resource)] = set(rule["verbs"])
    assert granted == LAUNCHER_RULES
    (binding,) = [
        o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "kfstack-launcher"
    ]
    namespace = role["metadata"]["namespace"]
    assert binding["metadata"]["namespace"] == namespace == {"dev": "kfstack-dev", "prod": "ml-prod"}[env]
    (subject,) = binding["subjects"]
    # Whom the runs' pods run as, where they run: standalone KFP's runner in its own namespace
    # (dev launches into kfstack-dev); prod's own account, never the profile's default-editor.
    assert (subject["namespace"], subject["name"]) == RUNS_ACCOUNT[env]


def test_prods_runs_account_gets_what_kfps_pods_need_and_no_more():
    objects = objects_of("prod")
    (role,) = [
        o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == "kfstack-runner-pipeline-pods"
    ]
    granted = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted[(group, resource, tuple(rule.get("resourceNames", ())))] = set(rule["verbs"])
    assert granted == PIPELINE_POD_RULES
    (binding,) = [
        o
        for o in objects
        if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "kfstack-runner-pipeline-pods"
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    namespace, name = RUNS_ACCOUNT["prod"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    # dev's runs are standalone KFP's pipeline-runner, which KFP itself grants all of this.
    assert not [o for o in objects_of("dev") if o["metadata"]["name"] == "kfstack-runner-pipeline-pods"]


def test_scheduling_objects_match_the_node_pool_profiles(overlay):
    # What a job of this environment meets on the cluster: its overlay plus the shared objects.
    _, objects = overlay
    by_kind = {}
    for obj in objects + objects_of("cluster"):
        by_kind.setdefault(obj["kind"], {})[obj["metadata"]["name"]] = obj
    for kind in ("ClusterQueue", "ResourceFlavor", "PriorityClass"):
        assert all("namespace" not in o["metadata"] for o in by_kind[kind].values()), kind
    for profile in node_pools.load_profiles().values():
        if profile.priority_class:
            assert profile.priority_class in by_kind["PriorityClass"]
        if profile.queue is None:
            continue
        local_queue = by_kind["LocalQueue"][profile.queue]
        cluster_queue = by_kind["ClusterQueue"][local_queue["spec"]["clusterQueue"]]
        (group,) = cluster_queue["spec"]["resourceGroups"]
        assert profile.accelerator.resource in group["coveredResources"]
        (flavor_ref,) = group["flavors"]
        flavor = by_kind["ResourceFlavor"][flavor_ref["name"]]
        # Kueue puts admitted pods on the flavor's nodes: the same nodes the profile selects.
        assert flavor["spec"]["nodeLabels"] == profile.node_selector
        quota = {r["name"]: r["nominalQuota"] for r in flavor_ref["resources"]}
        assert int(quota[profile.accelerator.resource]) >= profile.accelerator.count


@pytest.mark.parametrize(
    "folder",
    sorted(str(p.parent.relative_to(MANIFESTS)) for p in MANIFESTS.rglob("kustomization.yaml")),
)
def test_every_kustomization_builds_on_its_own(folder):
    # Anyone may run `kubectl kustomize` on any folder here (review, GitOps tools that build every
    # kustomization they find): none may depend on being included from elsewhere.
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: `kubectl kustomize` cannot build the manifests here")
    proc = subprocess.run([kubectl, "kustomize", str(MANIFESTS / folder)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _trainer_runtime() -> dict:
    (runtime,) = objects_of("trainer-v2")
    assert runtime["metadata"]["name"] == "kfstack-torch-distributed"
    return runtime


def test_trainer_runtime_fits_kfstacks_trainjobs():
    # Trainer v2 puts a TrainJob's spec.trainer into the replicated job labelled as the trainer
    # step and its container `node`, and kfstack's runtimePatches name both as TRAINJOB_NODE.
    runtime = _trainer_runtime()
    assert runtime["metadata"]["labels"]["trainer.kubeflow.org/framework"] == "torch"
    assert runtime["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}
    (node,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert node["name"] == TRAINJOB_NODE
    assert node["template"]["metadata"]["labels"] == {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
    }
    (container,) = node["template"]["spec"]["template"]["spec"]["containers"]
    assert container["name"] == TRAINJOB_NODE


def test_trainer_runtime_restarts_the_whole_group_as_often_as_the_other_platforms():
    jobset = _trainer_runtime()["spec"]["template"]["spec"]
    assert jobset["failurePolicy"]["maxRestarts"] == TrainingSettings().max_restarts
    (node,) = jobset["replicatedJobs"]
    # A failed node fails its Job at once (no in-place retry of one rank), so JobSet restarts all.
    assert node["template"]["spec"]["backoffLimit"] == 0
    pod = node["template"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    # One runtime serves every pool, and the pools' PriorityClasses differ (see the YAML).
    assert "priorityClassName" not in pod


def test_trainer_runtime_restricts_its_pods_as_kfstacks_trainjobs_do():
    """On Trainer v2.1 a TrainJob cannot set its pods' security contexts: the runtime does."""
    (node,) = _trainer_runtime()["spec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]["spec"]
    assert pod["securityContext"] == pods.to_dict(pods.pod_security_context())
    assert pod["terminationGracePeriodSeconds"] == pods.TERMINATION_GRACE_SECONDS
    (container,) = pod["containers"]
    assert container["securityContext"] == pods.to_dict(pods.container_security_context())


def test_trainer_runtime_keeps_finished_pods_as_long_as_the_v1_jobs():
    ttl = {f.name: f.default for f in dataclasses.fields(TrainingJobRequest)}["ttl_seconds_after_finished"]
    assert _trainer_runtime()["spec"]["template"]["spec"]["ttlSecondsAfterFinished"] == ttl


def test_trainer_runtime_image_is_kfstacks_torch_trainer_of_this_release():
    (node,) = _trainer_runtime()["spec"]["template"]["spec"]["replicatedJobs"]
    (container,) = node["template"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == images.image_for("torch-trainer", registry=images.DEFAULT_REGISTRY)


# --- Katib ---------------------------------------------------------------------------------------

TRIAL_KINDS = [kind for kind in resources.KINDS.values() if kind.trial is not None]


def _katib_section() -> str:
    readme = (MANIFESTS / "README.md").read_text()
    start = readme.index("\n## Katib\n")
    return readme[start : readme.index("\n## ", start + 1)]


def test_katib_may_run_every_trial_kind_kfstack_declares():
    assert {kind.kind for kind in TRIAL_KINDS} == {"PyTorchJob", "TFJob", "TrainJob"}
    objects = objects_of("katib")
    (role,) = [o for o in objects if o["kind"] == "ClusterRole"]
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    for kind in TRIAL_KINDS:
        # Katib's trial controller creates, watches and deletes the trial jobs.
        assert granted[(kind.group, kind.plural)] >= {"create", "get", "list", "watch", "delete"}, kind.kind
    # Its pod webhook walks a TrainJob trial's pods up through their JobSet to the Trial.
    assert granted[("jobset.x-k8s.io", "jobsets")] == {"get", "list", "watch"}
    (binding,) = [o for o in objects if o["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "katib-controller", "namespace": "kubeflow"}
    ]


def test_the_install_guide_lists_every_trial_kind_katib_must_watch():
    section = _katib_section()
    listed = re.findall(r"^(\w+\.v\w+\.[\w.]+)$", section, flags=re.MULTILINE)
    assert sorted(listed) == sorted(f"{k.kind}.{k.version}.{k.group}" for k in TRIAL_KINDS)
    # The check command finds each of them, and says how many it must find.
    (pattern,) = re.findall(r"grep -cE '\^ \+- \((.+)\)\$'", section)
    assert sorted(alternative.replace("\\.", ".") for alternative in pattern.split("|")) == sorted(listed)
    assert f"# must print {len(TRIAL_KINDS)};" in section


def test_katib_injects_its_metrics_collector_in_both_environments():
    (namespace,) = [o for o in objects_of("dev") if o["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["katib.kubeflow.org/metrics-collector-injection"] == "enabled"
    # prod's profile namespace gets the label from the profile controller; the guide checks it.
    assert (
        "kubectl get namespace ml-prod -L katib.kubeflow.org/metrics-collector-injection" in _katib_section()
    )


# --- KServe --------------------------------------------------------------------------------------


def test_serving_runtime_serves_what_kfstacks_inference_services_ask_for():
    (runtime,) = objects_of("flights-predictor")
    assert runtime["metadata"]["name"] == predictor.RUNTIME
    (model_format,) = runtime["spec"]["supportedModelFormats"]
    # The flights pipelines' InferenceServices name the format without a version, which KServe
    # matches to a runtime by name.
    assert model_format["name"] == predictor.MODEL_FORMAT
    (container,) = runtime["spec"]["containers"]
    # KServe injects the storage initializer's volume into the container of this name.
    assert container["name"] == inference_service.CONTAINER_NAME == "kserve-container"
    # The examples' images carry kfstack's names under the examples' own registry path.
    examples_registry = f"{images.DEFAULT_REGISTRY}/examples"
    assert container["image"] == images.image_for("predictor", registry=examples_registry)
    assert container["command"][-1] == predictor.MODULE
    # The flags the predictor's parser takes (KServe's own and --model_dir).
    from kfstack_examples.flights.predictor.server import parser

    args = parser().parse_args(container["args"])
    assert (args.model_name, args.model_dir, args.http_port, args.enable_grpc) == (
        "{{.Name}}",
        "/mnt/models",
        8080,
        False,
    )
