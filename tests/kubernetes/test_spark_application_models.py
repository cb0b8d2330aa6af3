"""The SparkApplication as the kubeflow-spark-api 2.4.0 models build it.

``fixtures/spark_application/<case>.json`` holds, per case below, the object the builder wrote
when it still assembled the dict by hand (and, since the driver's admission policy, the executors'
own ``serviceAccount``, the driver's); the models must write the same data. Every field the
job sets must also survive a round trip through the models (they drop a key they do not know
without a word) and exist in the spark-operator 2.5.2 CRD, the release the cluster runs.
"""

import json
import pathlib
from collections.abc import Callable

import pytest
import yaml
from kubeflow_spark_api.models import SparkV1beta2SparkApplication

from kfstack.kubernetes import node_pools, pods
from kfstack.kubernetes.spark_application import (
    SparkApplicationRequest,
    SparkResources,
    build_spark_application,
)
from kfstack.pipeline_spec import artifact_placeholder, output_placeholder
from kfstack.settings import Placeholder, katib_parameter
from tests.kubernetes.conftest import NAMESPACE, spark_request
from tests.upstream_crds import ABSENT, SHARED_DIR, available, validate_with_crds

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "spark_application"
CRD = SHARED_DIR / "crds" / "spark-operator" / "sparkoperator.k8s.io_sparkapplications.yaml"

# A GPU-less pool unlike the shipped ``cpu`` one: no node selector, no priority class, a taint.
HIGHMEM = node_pools.NodePoolProfile(
    name="highmem",
    description="GPU-less pool outside the shipped profiles: no selector, no priority class",
    node_selector={},
    tolerations=({"key": "kfstack.dev/highmem", "operator": "Exists", "effect": "NoSchedule"},),
    accelerator=None,
    cpu="8",
    memory="64Gi",
    priority_class=None,
    queue=None,
    spot=False,
)

CASES: dict[str, Callable[[], SparkApplicationRequest]] = {
    "default": spark_request,
    "image_pull_secret_only": lambda: spark_request(secrets=pods.SecretRefs(image_pull="regcred")),
    "custom_pool_and_sizes": lambda: spark_request(
        profile=HIGHMEM,
        resources=SparkResources(
            driver_cores=2, driver_memory="3g", executor_instances=5, executor_cores=4, executor_memory="512m"
        ),
        labels={},
        namespace=NAMESPACE,
        time_to_live_seconds=3600,
    ),
    "gpu_pool": lambda: spark_request(
        profile=node_pools.get_profile("h100-spot"),
        secrets=pods.SecretRefs(object_store="kfstack-object-store", image_pull="regcred"),
    ),
    # What `kfstack render` and Katib templates hand over: run-time values in string fields.
    "placeholders": lambda: spark_request(
        arguments=[
            "--output-uri",
            artifact_placeholder("flights-features", "features"),
            "--quarantine-uri",
            artifact_placeholder("flights-features", "quarantine"),
        ],
        resources=SparkResources(
            driver_memory=katib_parameter("driverMemory"), executor_memory=katib_parameter("executorMemory")
        ),
        service_account=katib_parameter("serviceAccount"),
        secrets=pods.SecretRefs(object_store=katib_parameter("objectStoreSecret")),
    ),
    # Run-time values in the integer sizes, which the models type as strict integers.
    "integer_placeholders": lambda: spark_request(
        resources=SparkResources(
            driver_cores=output_placeholder("size-spark", "driver_cores"),
            executor_cores=output_placeholder("size-spark", "executor_cores"),
            executor_instances=output_placeholder("size-spark", "executors"),
        )
    ),
}
# (role, key) of the sizes the "integer_placeholders" case fills with a Placeholder.
INTEGER_SIZES = (("driver", "cores"), ("executor", "cores"), ("executor", "instances"))
# Cases whose every field the models hold; a string in an integer field they refuse, as does the CRD.
TYPED_CASES = [name for name in CASES if name != "integer_placeholders"]


def build(case: str) -> dict:
    return build_spark_application(CASES[case]())


def round_trip(obj: dict) -> dict:
    """Through the spark-api models and back: a key they do not know is lost on the way."""
    return SparkV1beta2SparkApplication.from_dict(obj).to_dict()


def unknown_paths(value, schema: dict, path: str = "") -> list[str]:
    """Key paths of ``value`` that ``schema`` (a CRD's structural schema) has no place for.

    A subtree under ``x-kubernetes-preserve-unknown-fields`` or a map (``additionalProperties``)
    takes any keys.
    """
    if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("additionalProperties"):
        return []
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        unknown = []
        for key, item in value.items():
            if key in properties:
                unknown += unknown_paths(item, properties[key], f"{path}.{key}")
            else:
                unknown.append(f"{path}.{key}")
        return unknown
    if isinstance(value, list):
        return [
            found
            for index, item in enumerate(value)
            for found in unknown_paths(item, schema.get("items", {}), f"{path}[{index}]")
        ]
    return []


@pytest.fixture(scope="module")
def crd_schema() -> dict:
    if not available():
        pytest.skip(
            f"{ABSENT}: the key check against the spark-operator 2.5.2 CRD not run, the model checks did"
        )
    crd = yaml.safe_load(CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    return version["schema"]["openAPIV3Schema"]


def test_every_case_has_its_recording_and_no_recording_is_left_over():
    assert sorted(path.stem for path in FIXTURES.glob("*.json")) == sorted(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_models_write_the_recorded_object(case):
    recorded = json.loads((FIXTURES / f"{case}.json").read_text())
    assert build(case) == recorded


@pytest.mark.parametrize("case", TYPED_CASES)
def test_the_models_keep_every_field_the_job_sets(case):
    built = build(case)
    assert round_trip(built) == built


def test_placeholders_in_integer_sizes_are_written_as_they_are():
    built = build("integer_placeholders")
    spec = built["spec"]
    for role, key in INTEGER_SIZES:
        assert isinstance(spec[role][key], Placeholder), (role, key)
    # Everything else goes through the models: with numbers in their place, nothing is lost.
    typed = json.loads(json.dumps(built))
    for number, (role, key) in enumerate(INTEGER_SIZES, start=1):
        typed["spec"][role][key] = number
    assert round_trip(typed) == typed


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_key_the_job_sets_is_in_the_crd(case, crd_schema):
    built = build(case)
    # The CRD leaves metadata to the API server (ObjectMeta); the validator below checks it.
    assert "metadata" in crd_schema["properties"]
    body = {key: value for key, value in built.items() if key != "metadata"}
    assert unknown_paths(body, crd_schema) == []


def test_the_crd_key_check_would_catch_a_wrong_key(crd_schema):
    built = build("default")
    built["spec"]["driver"]["coresLimit"] = "2"  # the CRD's field is coreLimit
    built["spec"]["sparkConf"]["spark.any.key"] = "free"  # a map: any key is fine
    found = unknown_paths(built["spec"], crd_schema["properties"]["spec"], "spec")
    assert found == ["spec.driver.coresLimit"]


def test_the_round_trip_would_catch_a_field_the_models_do_not_know():
    built = build("default")
    built["spec"]["driver"]["coresLimit"] = "2"
    assert "coresLimit" not in round_trip(built)["spec"]["driver"]


def test_every_typed_case_validates_against_the_upstream_crd(tmp_path):
    # The default case is validated with the other builders' objects in test_builders.py.
    validate_with_crds(tmp_path, [build(case) for case in TYPED_CASES if case != "default"])
