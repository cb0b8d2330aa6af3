"""Registration of the production model in Kubeflow Model Registry (``register_model``): its
plain function (``core.register_production_model``), the registry parts it is built on
(:mod:`kfstack.serving.model_registry`), and the component under kfp.local.

No real Model Registry server runs here. The real ``model-registry`` 0.3.18 client talks real
HTTP to a fake server on 127.0.0.1 (tests/serving/fake_model_registry.py) that implements the
endpoints that client calls and checks every body against the client's own OpenAPI models. What
a real server would add -- its database, its own validation, an auth proxy's token review -- is
not exercised; the fake reproduces the behaviours the step depends on (unique names, 404 on a
missing lookup, 401 on a wrong token).

The model directory is a minimal one: a ``lineage.json`` written by :class:`Lineage` and a
``model.onnx`` built with ``onnx.helper`` (the step reads the opset from it).
"""

import dataclasses
import json
import re
import socket
import sys
import urllib.request

import onnx
import pytest
from onnx import TensorProto, helper

from kfstack.components.serving.register_model.core import register_production_model
from kfstack.errors import InvalidParameterError, PlatformNotAvailableError, RunFailedError
from kfstack.lineage import Lineage
from kfstack.serving import model_registry as mr
from kfstack.uris import storage_uri
from tests.kfp_local import run_pipeline, task_outputs
from tests.serving import fake_model_registry
from tests.serving.fake_model_registry import API, FakeModelRegistry

# The fake registry without authentication, as a fixture of this module.
fake_registry = fake_model_registry.fake_registry

NAME = "flights-delay"
VERSION = "flights-training-20261124-101500"
BUCKET_URI = "minio://mlpipeline/v2/artifacts/flights-training/run-1/train-model/model"
TOKEN = "pod-service-account-token"
PARAMETERS = {
    "framework": "pytorch",
    "training_api": "trainer-v2",
    "workers": 2,
    "epochs": 3,
    "batch_size": 512,
    "learning_rate": 0.003,
    "seed": 42,
    "sample_fraction": 0.25,
    "data_uri": "",
    "window_start": "2013-01-01",
    "window_end": "",
    "synthetic_drift": 0.0,
}


def lineage(version: str = VERSION, **changes) -> Lineage:
    values = {
        "model_version": version,
        "pipeline_version": "0.1.0+abc1234",
        "kfstack_version": "0.1.0",
        "run_id": "2b8e6c1a-run",
        "created": "2026-11-24T10:20:00+00:00",
        "data": {
            "window": {"start": "2013-01-01", "end": "2013-07-01"},
            "content_hash": "c0ffee",
            "rows_read": 84194,
            "feature_spec_hash": "f00d",
        },
        "parameters": PARAMETERS,
        "metrics": {"val_auc": 0.71, "val_log_loss": 0.52, "val_accuracy": 0.77},
    }
    return Lineage(**{**values, **changes})


def write_onnx(path: str, opset: int = 18) -> None:
    """A one-node ONNX graph importing ``opset`` of the default domain (and the ML domain, which
    must not be taken for it)."""
    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["y"])],
        "flights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 1])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("ai.onnx.ml", 3), helper.make_opsetid("", opset)]
    )
    onnx.checker.check_model(model)
    onnx.save(model, path)


@pytest.fixture
def model_dir(tmp_path) -> str:
    """A trained model's directory as far as registration reads it."""
    path = tmp_path / "model"
    path.mkdir()
    lineage().save(str(path))
    write_onnx(str(path / mr.ONNX_FILE))
    (path / "feature_spec.json").write_text("{}")
    return str(path)


@pytest.fixture
def token_file(tmp_path) -> str:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return str(path)


def register(model_dir: str, url: str, decision: str = "first", platform: str = "kubernetes", **kw):
    return register_production_model(
        platform=platform,
        model_dir=model_dir,
        model_location=kw.pop("model_location", BUCKET_URI),
        decision=decision,
        serving_name=kw.pop("serving_name", NAME),
        registry_url=url,
        author=kw.pop("author", "ml-platform"),
        model_format=kw.pop("model_format", "onnx"),
        token_path=kw.pop("token_path", "/nonexistent/token"),
        **kw,
    )


def expected_metadata() -> dict:
    return {
        **PARAMETERS,
        "pipeline_version": "0.1.0+abc1234",
        "kfstack_version": "0.1.0",
        "run_id": "2b8e6c1a-run",
        "trained_at": "2026-11-24T10:20:00+00:00",
        "window_start": "2013-01-01",
        "window_end": "2013-07-01",
        "content_hash": "c0ffee",
        "rows_read": 84194,
        "feature_spec_hash": "f00d",
        "val_auc": 0.71,
        "val_log_loss": 0.52,
        "val_accuracy": 0.77,
    }


@pytest.fixture
def no_client(monkeypatch):
    """The model-registry client made unimportable (an image without the ``registry`` extra)."""
    for module in [m for m in sys.modules if m == "model_registry" or m.startswith("model_registry.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "model_registry", None)


# --- registration -----------------------------------------------------------------------------


def test_a_first_deployment_registers_the_model_version_artifact_and_lineage(
    model_dir, token_file, monkeypatch
):
    monkeypatch.setenv("KFSTACK_NAMESPACE", "team-flights")
    with FakeModelRegistry(token=TOKEN) as fake:
        result = register(model_dir, fake.url, "first", token_path=token_file)

        assert result.registered and result.created
        assert (result.name, result.version) == (NAME, VERSION)
        # What KServe reads: the artifact's URI with the scheme it knows (MinIO speaks S3).
        assert result.uri == "s3://mlpipeline/v2/artifacts/flights-training/run-1/train-model/model"
        assert {r.authorization for r in fake.requests} == {f"Bearer {TOKEN}"}
        assert fake.calls("POST") == [
            "POST /registered_models",
            "POST /model_versions",
            f"POST /model_versions/{result.model_version_id}/artifacts",
        ]
        output = json.loads(result.to_json())
        assert output == {
            "registered": True,
            "created": True,
            "url": fake.url,
            "name": NAME,
            "version": VERSION,
            "uri": result.uri,
            "registered_model_id": result.registered_model_id,
            "model_version_id": result.model_version_id,
            "model_artifact_id": result.model_artifact_id,
        }

        # Read back with the client, as a user of the registry would.
        client = mr.connect(mr.RegistryEndpoint.parse(fake.url), "reader", TOKEN)
        model = client.get_registered_model(NAME)
        version = client.get_model_version(NAME, VERSION)
        artifact = client.get_model_artifact(NAME, VERSION)
    assert (model.id, model.owner) == (result.registered_model_id, "ml-platform")
    assert (version.id, version.author) == (result.model_version_id, "ml-platform")
    assert version.custom_properties == expected_metadata()
    assert "0.1.0+abc1234" in version.description and "2013-01-01 to 2013-07-01" in version.description
    assert artifact.id == result.model_artifact_id
    assert (artifact.uri, artifact.model_format_name, artifact.model_format_version) == (
        result.uri,
        "onnx",
        "18",
    )
    # The pipeline run it came from, as a registry UI links back to it.
    assert (artifact.model_source_kind, artifact.model_source_class) == ("kfp", "pipelinerun")
    assert (artifact.model_source_id, artifact.model_source_group) == ("2b8e6c1a-run", "team-flights")


def test_a_promotion_registers_a_new_version_of_the_same_model(model_dir, tmp_path, fake_registry):
    register(model_dir, fake_registry.url, "first")
    promoted = tmp_path / "promoted"
    promoted.mkdir()
    lineage("flights-retraining-20261201-060000").save(str(promoted))
    write_onnx(str(promoted / mr.ONNX_FILE), opset=17)

    # The embedded platform: a local directory, registered as a file:// URI, no source run.
    result = register(
        str(promoted), fake_registry.url, "promote", platform="local", model_location=str(promoted)
    )

    assert result.registered and result.created
    assert result.uri == f"file://{promoted}"
    assert [v["name"] for v in fake_registry.versions_of(NAME)] == [
        VERSION,
        "flights-retraining-20261201-060000",
    ]
    assert len(fake_registry.registered_models) == 1
    artifact = fake_registry.artifacts[result.model_artifact_id]
    assert artifact["modelFormatVersion"] == "17"
    assert "modelSourceKind" not in artifact


@pytest.mark.parametrize("decision", ["rollback", "unchanged", "skipped"])
def test_a_model_that_did_not_go_into_production_is_not_registered(
    decision, model_dir, fake_registry, no_client
):
    result = register(model_dir, fake_registry.url, decision)

    assert json.loads(result.to_json()) == {
        "registered": False,
        "reason": f"decision={decision}: the model did not go into production (only first and promote "
        "register)",
        "url": fake_registry.url,
    }
    assert fake_registry.requests == []


def test_no_url_is_off_nothing_read_imported_or_contacted(tmp_path, fake_registry, no_client):
    result = register(str(tmp_path / "no-such-model"), "", "promote", platform="bogus")

    assert json.loads(result.to_json()) == {
        "registered": False,
        "reason": "no model_registry_url: registration is off",
        "url": "",
    }
    assert fake_registry.requests == []


def test_without_the_client_a_registration_says_what_to_install(model_dir, fake_registry, no_client):
    with pytest.raises(PlatformNotAvailableError, match=r"install kfstack\[registry\]"):
        register(model_dir, fake_registry.url, "first")
    assert fake_registry.requests == []


def test_a_retried_registration_reports_the_existing_ids_and_writes_nothing(model_dir, fake_registry):
    first = register(model_dir, fake_registry.url, "first")
    posts = len(fake_registry.calls("POST"))

    again = register(model_dir, fake_registry.url, "first")

    assert again.registered and not again.created
    assert (again.registered_model_id, again.model_version_id, again.model_artifact_id) == (
        first.registered_model_id,
        first.model_version_id,
        first.model_artifact_id,
    )
    assert len(fake_registry.calls("POST")) == posts
    assert len(fake_registry.versions_of(NAME)) == 1 and len(fake_registry.artifacts) == 1


def test_a_registration_interrupted_before_its_artifact_is_completed_by_the_retry(model_dir, fake_registry):
    fake_registry.fail_next[("POST", "/model_versions/2/artifacts")] = 503

    with pytest.raises(mr.ModelRegistryError, match=rf"Model Registry at {fake_registry.url} answered 503"):
        register(model_dir, fake_registry.url, "first")
    assert len(fake_registry.versions) == 1 and fake_registry.artifacts == {}

    result = register(model_dir, fake_registry.url, "first")

    assert result.registered and result.created
    assert len(fake_registry.versions_of(NAME)) == 1
    assert [a["uri"] for a in fake_registry.artifacts_of(result.model_version_id)] == [result.uri]


def test_a_version_registered_with_another_uri_is_a_conflict(model_dir, fake_registry):
    register(model_dir, fake_registry.url, "first", model_location="s3://elsewhere/model")

    with pytest.raises(
        mr.ModelRegistryError, match=r"already, with the model at s3://elsewhere/model, not s3://"
    ):
        register(model_dir, fake_registry.url, "first")


# --- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize("token", ["wrong-token", None])
def test_refused_credentials_fail_the_step_naming_the_url(token, model_dir, tmp_path):
    token_path = tmp_path / "token"
    if token:
        token_path.write_text(token)
    with FakeModelRegistry(token=TOKEN) as fake, pytest.raises(mr.ModelRegistryAuthError) as caught:
        register(model_dir, fake.url, "promote", token_path=str(token_path))
    message = str(caught.value)
    assert f"Model Registry at {fake.url} refused the credentials (401" in message
    assert isinstance(caught.value, RunFailedError)
    assert fake.calls("POST") == []


def test_an_unreachable_registry_fails_the_step_naming_the_url(model_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"

    with pytest.raises(
        mr.ModelRegistryUnavailableError, match=rf"cannot reach the Model Registry at {url}: "
    ):
        register(model_dir, url, "first")


def test_https_without_a_token_fails_before_contacting_anything(model_dir):
    with pytest.raises(
        mr.ModelRegistryAuthError, match=r"https://registry.example:8443 is https:// and needs"
    ):
        register(model_dir, "https://registry.example:8443", "first", token_path="/nonexistent/token")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://registry:21", "needs http:// or https://"),
        ("registry:8080", "needs http:// or https://"),
        ("http://", "names no host"),
        ("http://user:secret@registry:8080", "carries credentials"),
        ("http://registry:8080/?x=1", "has a query"),
        ("http://registry:99999", "is not a URL"),
    ],
)
def test_a_bad_url_is_refused_whatever_the_decision(url, problem, model_dir, no_client):
    with pytest.raises(InvalidParameterError, match=re.escape(f"model_registry_url={url!r} {problem}")):
        register(model_dir, url, "rollback")


def test_an_unknown_decision_or_platform_is_refused(model_dir, fake_registry):
    with pytest.raises(InvalidParameterError, match=r"decision='promoted' is not one of first, promote"):
        register(model_dir, fake_registry.url, "promoted")
    with pytest.raises(InvalidParameterError, match=r"platform='cloud'"):
        register(model_dir, fake_registry.url, "first", platform="cloud")
    assert fake_registry.requests == []


# --- the parts --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "server_address", "port", "secure"),
    [
        # A URL's own default port: the client alone would add 8080 to an http:// one.
        ("http://registry", "http://registry:80", 80, False),
        (
            "http://model-registry-service.kubeflow.svc:8080",
            "http://model-registry-service.kubeflow.svc:8080",
            8080,
            False,
        ),
        # A path prefix (a gateway) keeps the port before it, where the client would append it.
        ("https://gateway.example/model-registry/", "https://gateway.example:443/model-registry", 443, True),
        ("http://[::1]:9000", "http://[::1]:9000", 9000, False),
    ],
)
def test_the_endpoint_spells_out_the_port(url, server_address, port, secure):
    endpoint = mr.RegistryEndpoint.parse(url)
    assert (endpoint.server_address, endpoint.port, endpoint.secure) == (server_address, port, secure)


def test_the_storage_uri_is_what_kserve_reads(tmp_path):
    assert storage_uri("minio://mlpipeline/v2/artifacts/m") == "s3://mlpipeline/v2/artifacts/m"
    assert storage_uri("gs://bucket/m") == "gs://bucket/m"
    assert storage_uri(str(tmp_path / "m")) == f"file://{tmp_path}/m"


def test_the_opset_is_read_from_the_onnx_model(tmp_path):
    write_onnx(str(tmp_path / "a.onnx"), opset=15)
    assert mr.onnx_opset(str(tmp_path / "a.onnx")) == 15
    (tmp_path / "b.onnx").write_bytes(b"\xff\xff\xff")
    with pytest.raises(InvalidParameterError, match="is not an ONNX model"):
        mr.onnx_opset(str(tmp_path / "b.onnx"))
    ml_only = helper.make_model(
        helper.make_graph([], "g", [], []), opset_imports=[helper.make_opsetid("ai.onnx.ml", 3)]
    )
    (tmp_path / "c.onnx").write_bytes(ml_only.SerializeToString())
    with pytest.raises(InvalidParameterError, match="imports no opset"):
        mr.onnx_opset(str(tmp_path / "c.onnx"))
    with pytest.raises(InvalidParameterError, match="cannot read the ONNX model"):
        mr.onnx_opset(str(tmp_path / "missing.onnx"))


def test_the_metadata_is_the_lineage_in_scalars():
    record = lineage(
        parameters={**PARAMETERS, "window_end": "2013-03-01", "hidden": [64, 32], "note": None},
        metrics={"val_auc": float("nan")},
    )
    metadata = mr.version_metadata(record)

    assert metadata["hidden"] == "[64,32]"  # not a scalar: compact JSON
    assert "note" not in metadata  # None: nothing to record
    assert metadata["val_auc"] == "nan"  # the registry's JSON has no NaN
    assert metadata["window_end"] == "2013-07-01"  # the window read, over the one asked for
    assert all(isinstance(v, str | int | float | bool) for v in metadata.values())


def test_the_fake_refuses_a_body_the_api_does_not_define(fake_registry):
    def post(body: dict) -> int:
        request = urllib.request.Request(
            fake_registry.url + API + "/registered_models",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request) as response:
                return response.status
        except urllib.error.HTTPError as err:
            return err.code

    assert post({"name": "m", "colour": "blue"}) == 400
    assert post({"owner": "me"}) == 400
    assert post({"name": 7}) == 400
    assert post({"name": "m"}) == 201


# --- the component ----------------------------------------------------------------------------


# kfp.local warns that the component's image is not plain Python; this process has its packages.
@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_the_component_registers_through_kfp_local(model_dir, tmp_path, fake_registry):
    from kfp import dsl

    from kfstack.components.serving.register_model.component import register_model

    @dsl.pipeline(name="register-model-test")
    def registration():
        imported = dsl.importer(artifact_uri=model_dir, artifact_class=dsl.Model)
        register_model(
            platform="local",
            model=imported.output,
            decision="first",
            serving_name=NAME,
            model_registry_url=fake_registry.url,
            model_registry_author="",
            model_format="onnx",  # an imported directory carries no training step's record
        )

    run = run_pipeline(registration, tmp_path / "root")
    output = json.loads(task_outputs(run, "register-model")["parameterValues"]["registration"])

    assert output["registered"] and output["created"]
    assert output["uri"] == f"file://{model_dir}"
    version = fake_registry.versions[output["model_version_id"]]
    assert (version["name"], version["author"]) == (VERSION, "kfstack")


def test_any_format_registers_with_its_own_name_and_an_onnx_graph_with_its_opset(tmp_path):
    sklearn = tmp_path / "sklearn"
    sklearn.mkdir()
    (sklearn / "model.joblib").write_bytes(b"weights")
    assert mr.format_of(str(sklearn), "sklearn") == ("sklearn", "")
    assert mr.format_of(str(sklearn), "sklearn", "1.5") == ("sklearn", "1.5")
    graph = tmp_path / "graph"
    graph.mkdir()
    write_onnx(str(graph / "digits.onnx"), opset=17)  # any name: the directory's one graph
    assert mr.format_of(str(graph), "onnx") == ("onnx", "17")
    with pytest.raises(InvalidParameterError, match=r"exactly one \.onnx graph"):
        mr.format_of(str(sklearn), "onnx")
    with pytest.raises(InvalidParameterError, match="give register_model its model_format"):
        mr.format_of(str(sklearn), "")
    # A dataset without a window is described by where it was.
    record = dataclasses.replace(lineage(VERSION), data={"input_uri": "s3://bucket/data"})
    assert "on s3://bucket/data." in mr.version_description(record)
    metadata = mr.version_metadata(record)
    assert metadata["input_uri"] == "s3://bucket/data" and "content_hash" not in metadata
