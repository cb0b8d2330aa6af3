"""Every batch pod kfstack creates is labelled out of an Istio mesh, and every model server left in it.

The measure: the objects ``kfstack render`` writes for the built-in pipelines and the digits
example, in every variant of the training step (Trainer v2, PyTorchJob, elastic PyTorchJob, TFJob
with either topology), walked down to each pod template they hold -- Spark driver and executors,
each replica spec, the TrainJob's runtime patches, and the same again inside every Katib
Experiment's trial template. In mesh mode (``istio_mesh``, on by default) each carries the
workload label and both opt-out labels; with ``istio_mesh=false`` the workload label only, and no
Istio label anywhere in the object. The model servers stay in the mesh: an InferenceService
carries none of them.

Nothing here runs on a cluster: the objects are checked as data and against the upstream CRDs.
"""

import json

import pytest
import yaml

from kfstack.app.cli import main
from kfstack.kubernetes.naming import (
    BATCH_WORKLOAD,
    DATAPLANE_MODE_LABEL,
    SIDECAR_INJECT_LABEL,
    WORKLOAD_LABEL,
    batch_pod_labels,
)
from kfstack.kubernetes.resources import TRAINJOB_NODE
from tests.kubernetes.conftest import RUN_ID
from tests.kubernetes.test_manifests import objects_of
from tests.kubernetes.test_render import checkable
from tests.upstream_crds import validate_with_crds

# (pipeline, --param values): every way a run's batch objects can come out. training_api=auto
# renders the TrainJob and the PyTorchJob, each with its Experiment.
CASES = {
    "flights-auto": ("flights-training", {}),
    "flights-trainer-v2": ("flights-training", {"training_api": "trainer-v2"}),
    "flights-v1": ("flights-training", {"training_api": "v1"}),
    "flights-v1-elastic": (
        "flights-training",
        {"training_api": "v1", "workers": "3", "elastic_min_workers": "2", "elastic_max_workers": "4"},
    ),
    "flights-tf-mwms": ("flights-training", {"framework": "tensorflow", "workers": "2"}),
    "flights-tf-ps": (
        "flights-training",
        {"framework": "tensorflow", "tf_topology": "parameter_server", "tf_parameter_servers": "2"},
    ),
    "flights-retraining": ("flights-retraining", {}),
    "digits": ("digits-training", {}),
}
ISTIO_LABELS = (SIDECAR_INJECT_LABEL, DATAPLANE_MODE_LABEL)
# Kinds that are not batch work: they keep their place in the mesh.
SERVING_KINDS = {"InferenceService"}
# Every place a batch pod's labels can be written, found by the walk below at least once.
EXPECTED_PLACES = {
    "SparkApplication.driver",
    "SparkApplication.executor",
    "TrainJob.node",
    "PyTorchJob.Master",
    "PyTorchJob.Worker",
    "TFJob.Worker",
    "TFJob.Chief",
    "TFJob.PS",
    "Experiment>TrainJob.node",
    "Experiment>PyTorchJob.Master",
    "Experiment>PyTorchJob.Worker",
    "Experiment>TFJob.Worker",
    "Experiment>TFJob.Chief",
    "Experiment>TFJob.PS",
}


def pod_templates(obj: dict, outer: str = "") -> list[tuple[str, dict]]:
    """``(place, labels)`` of every pod template in a batch object; a kind it does not know
    fails, so that a new batch kind cannot slip past the measure."""
    kind, spec = obj["kind"], obj["spec"]
    place = f"{outer}{kind}"

    def labels_of(template: dict) -> dict:
        return (template.get("metadata") or {}).get("labels") or {}

    if kind == "SparkApplication":
        return [(f"{place}.{role}", spec[role].get("labels") or {}) for role in ("driver", "executor")]
    if kind in ("PyTorchJob", "TFJob"):
        replicas = spec["pytorchReplicaSpecs" if kind == "PyTorchJob" else "tfReplicaSpecs"]
        return [(f"{place}.{name}", labels_of(replica["template"])) for name, replica in replicas.items()]
    if kind == "TrainJob":
        found = [
            (f"{place}.{job['name']}", labels_of(job["template"]["spec"]["template"]))
            for patch in spec.get("runtimePatches") or []
            for job in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        ]
        # The runtime's node pods are the only pods a TrainJob makes: without a patch for them
        # their labels would be the runtime's alone.
        assert [name for name, _ in found] == [f"{place}.{TRAINJOB_NODE}"], found
        return found
    if kind == "Experiment":
        return pod_templates(spec["trialTemplate"]["trialSpec"], f"{place}>")
    raise AssertionError(f"{kind}: a kind the walk does not know; say where its pods' labels are")


def render(tmp_path_factory, case: str, istio_mesh: bool) -> list[dict]:
    """The objects ``kfstack render`` writes for ``case`` (files read back)."""
    pipeline, values = CASES[case]
    out = tmp_path_factory.mktemp(f"{case}-mesh-{istio_mesh}") / "rendered"
    params = [f"{name}={value}" for name, value in values.items()]
    if not istio_mesh:
        params.append("istio_mesh=false")
    argv = ["render", pipeline, "--out", str(out), "--run-id", RUN_ID]
    for param in params:
        argv += ["--param", param]
    assert main(argv) == 0
    return [yaml.safe_load(path.read_text()) for path in sorted(out.glob("*.yaml"))]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[tuple[str, bool], list[dict]]:
    return {
        (case, istio_mesh): render(tmp_path_factory, case, istio_mesh)
        for case in CASES
        for istio_mesh in (True, False)
    }


def batch_objects(objects: list[dict]) -> list[dict]:
    return [obj for obj in objects if obj["kind"] not in SERVING_KINDS]


def test_every_batch_pod_in_a_mesh_is_labelled_out_of_it(rendered, record_property):
    """The issue's measure: batch objects without the opt-out in mesh mode (before: all)."""
    expected = batch_pod_labels(istio_mesh=True)
    objects = templates = lacking_objects = 0
    lacking = []
    for (case, istio_mesh), found in rendered.items():
        if not istio_mesh:
            continue
        for obj in batch_objects(found):
            objects += 1
            unlabelled = [
                f"{case}: {place} of {obj['metadata'].get('name')}: {labels}"
                for place, labels in pod_templates(obj)
                if {key: labels.get(key) for key in expected} != expected
            ]
            templates += len(pod_templates(obj))
            lacking += unlabelled
            lacking_objects += bool(unlabelled)
    summary = (
        f"mesh mode: {objects - lacking_objects} of {objects} batch objects and "
        f"{templates - len(lacking)} of {templates} pod templates carry the opt-out "
        f"({len(CASES)} renders)"
    )
    print(summary)
    record_property("mesh_opt_out", summary)
    assert objects and templates
    assert not lacking, "\n".join(lacking)


def test_without_a_mesh_batch_pods_carry_the_workload_label_and_nothing_of_istio(rendered):
    for (case, istio_mesh), found in rendered.items():
        if istio_mesh:
            continue
        for obj in batch_objects(found):
            for place, labels in pod_templates(obj):
                assert labels.get(WORKLOAD_LABEL) == BATCH_WORKLOAD, (case, place)
            text = json.dumps(obj)
            assert not any(label in text for label in ISTIO_LABELS), (case, obj["kind"])


def test_the_walk_reaches_every_kind_of_batch_pod(rendered):
    """The measure is not vacuous: every place a batch pod's labels live was checked."""
    places = {
        place.split(".")[0] + "." + place.split(".")[1]
        for found in rendered.values()
        for obj in batch_objects(found)
        for place, _ in pod_templates(obj)
    }
    assert places >= EXPECTED_PLACES, EXPECTED_PLACES - places


def test_the_pods_labels_stay_off_the_objects_themselves(rendered):
    """The batch labels are pod labels: a job object keeps the run's labels (and the queue's);
    the Experiment's Trials copy its labels, and are no pods either."""
    for found in rendered.values():
        for obj in batch_objects(found):
            assert WORKLOAD_LABEL not in obj["metadata"].get("labels", {}), obj["kind"]


def test_model_servers_stay_in_the_mesh(rendered):
    """Predictors keep their sidecar (it enforces the profile's policies): the serving objects
    carry neither the batch labels nor an opt-out, whatever istio_mesh says."""
    served = [obj for found in rendered.values() for obj in found if obj["kind"] in SERVING_KINDS]
    assert served
    for obj in served:
        text = json.dumps(obj)
        assert WORKLOAD_LABEL not in text
        assert not any(label in text for label in ISTIO_LABELS)


def test_the_labelled_objects_validate_against_the_upstream_crds(rendered, tmp_path):
    objects = [obj for found in rendered.values() for obj in found]
    validate_with_crds(tmp_path, checkable(objects))


def test_kfstacks_trainer_runtime_labels_its_node_pods_out_of_the_mesh():
    """The shipped runtime sets the labels itself, on the node pods (not on the Job): a TrainJob
    without kfstack's patches gets them too."""
    (runtime,) = objects_of("trainer-v2")
    (node,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert node["name"] == TRAINJOB_NODE
    assert node["template"]["spec"]["template"]["metadata"]["labels"] == batch_pod_labels(istio_mesh=True)
    assert WORKLOAD_LABEL not in node["template"]["metadata"]["labels"]


@pytest.mark.parametrize("pipeline", sorted({pipeline for pipeline, _ in CASES.values()}))
def test_the_mesh_is_a_parameter_every_pipeline_describes(pipeline, capsys):
    """``kfstack render`` prints the files it wrote, not the parameters: the setting is seen in
    ``kfstack describe`` (default on) and its effect in the written objects, checked above."""
    assert main(["describe", pipeline]) == 0
    assert "istio_mesh  (bool, default True)" in capsys.readouterr().out
