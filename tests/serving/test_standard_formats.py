"""The stand-ins for KServe's format runtimes: the files each loads, the shapes each answers, a
malformed request's 400, and the Open Inference Protocol as Triton's own HTTP client speaks it --
against a real server on loopback, the onnx stand-in and the flights predictor alike."""

from __future__ import annotations

import json

import numpy as np
import pytest
from kserve import InferInput, InferRequest
from kserve.errors import InvalidInput

from kfstack.serving import standard_formats
from kfstack.serving.model_server import call_predict
from tests.serving import standard_models
from tests.serving.conftest import Predictor

FORMAT_SERVER = "kfstack.serving.format_server"


@pytest.fixture(scope="module")
def digits_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("formats")
    sklearn_model = standard_models.sklearn_digits(str(root / "sklearn"))
    standard_models.onnx_digits(str(root / "onnx"), sklearn_model)
    standard_formats.triton_layout(str(root / "onnx"), "digits", str(root / "repository"))
    repository = str(root / "repository")
    x, y = standard_models.digits()
    held_out = x[-standard_models.DIGITS_TEST_ROWS :], y[-standard_models.DIGITS_TEST_ROWS :]
    return {
        "sklearn": str(root / "sklearn"),
        "repository": repository,
        "rows": held_out,
        "model": sklearn_model,
    }


def loaded(model_format, name, model_dir):
    model = standard_formats.model_for(model_format, name, model_dir)
    model.load()
    return model


def test_sklearn_answers_v1_and_v2_as_kserves_server_does(digits_models, monkeypatch):
    model = loaded("sklearn", "digits", digits_models["sklearn"])
    x, _ = digits_models["rows"]
    labels = call_predict(model, {"instances": x[:5].tolist()})["predictions"]
    assert labels == digits_models["model"].predict(x[:5]).tolist()
    monkeypatch.setenv("PREDICT_PROBA", "true")
    [row] = call_predict(model, {"instances": x[:1].tolist()})["predictions"]
    assert len(row) == 10 and abs(sum(row) - 1) < 1e-9
    request = InferRequest(
        model_name="digits", infer_inputs=[InferInput("input-0", [2, 64], "FP64", x[:2].tolist())]
    )
    response = call_predict(model, request)
    assert response.outputs[0].name == "output-0" and response.outputs[0].shape == [2, 10]
    assert model.get_input_types() == [{"name": "input-0", "datatype": "FP64", "shape": [-1, 64]}]


@pytest.mark.parametrize(
    ("instances", "message"),
    [
        ([[1.0, 2.0]], "rows of 2 values; the model takes 64"),
        ([], "expected a non-empty list of rows"),
        ([["a"] * 64], "not a matrix of numbers"),
        ([[float("nan")] * 64], "every value must be a finite number"),
    ],
)
def test_a_malformed_request_is_a_400_not_a_500(digits_models, instances, message):
    model = loaded("sklearn", "digits", digits_models["sklearn"])
    with pytest.raises(InvalidInput, match=message):
        call_predict(model, {"instances": instances})


def test_a_directory_must_hold_exactly_one_model_file(tmp_path, digits_models):
    with pytest.raises(FileNotFoundError, match=r"no \.joblib/\.pkl/\.pickle file"):
        loaded("sklearn", "m", str(tmp_path))
    for name in ("a.pkl", "b.joblib"):
        (tmp_path / name).write_bytes(b"x")
    with pytest.raises(ValueError, match="more than one sklearn model file"):
        loaded("sklearn", "m", str(tmp_path))


def test_xgboost_loads_a_json_booster(tmp_path):
    rows, labels = standard_models.xgboost_cancer(str(tmp_path))
    model = loaded("xgboost", "cancer", str(tmp_path))
    probabilities = np.asarray(call_predict(model, {"instances": rows.tolist()})["predictions"])
    assert probabilities.shape == (len(rows),) and ((probabilities > 0.5) == labels).mean() > 0.9
    assert model.get_input_types()[0]["shape"] == [-1, 30]


def test_onnx_is_served_as_triton_serves_it(digits_models):
    model = loaded("onnx", "digits", digits_models["repository"])
    assert model.get_input_types() == [{"name": "pixels", "datatype": "FP32", "shape": [-1, 64]}]
    assert model.get_output_types() == [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 10]}]
    x, _ = digits_models["rows"]
    request = InferRequest(
        model_name="digits",
        infer_inputs=[InferInput("pixels", [3, 64], "FP32", x[:3].astype(np.float32).tolist())],
    )
    probabilities = call_predict(model, request).outputs[0].as_numpy()
    # The same linear model as the sklearn pickle: the same probabilities, to float32 precision.
    expected = digits_models["model"].predict_proba(x[:3])
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)
    with pytest.raises(InvalidInput, match="Open Inference Protocol \\(V2\\) only"):
        call_predict(model, {"instances": x[:1].tolist()})
    wrong = InferRequest(
        model_name="digits", infer_inputs=[InferInput("pixels", [1, 64], "FP64", x[:1].tolist())]
    )
    with pytest.raises(InvalidInput, match="datatype FP64; the model takes FP32"):
        call_predict(model, wrong)
    with pytest.raises(FileNotFoundError, match="Triton's layout"):
        loaded("onnx", "other", digits_models["repository"])


# --- over HTTP, with Triton's own client -------------------------------------------------------


@pytest.fixture(scope="module")
def onnx_server(digits_models, tmp_path_factory):
    server = Predictor(
        digits_models["repository"],
        str(tmp_path_factory.mktemp("onnx-server")),
        "--model_format=onnx",
        name="digits",
        module=FORMAT_SERVER,
        service="digits",
    )
    yield server
    server.stop()


def triton_client(server):
    import tritonclient.http as httpclient

    return httpclient.InferenceServerClient(server.url.removeprefix("http://"))


@pytest.mark.parametrize("binary", [False, True])
def test_tritons_client_reads_metadata_and_infers(onnx_server, digits_models, binary):
    import tritonclient.http as httpclient

    client = triton_client(onnx_server)
    metadata = client.get_model_metadata("digits")
    assert metadata["inputs"] == [{"name": "pixels", "datatype": "FP32", "shape": [-1, 64]}]
    assert metadata["outputs"] == [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 10]}]
    x, y = digits_models["rows"]
    tensor = httpclient.InferInput("pixels", [50, 64], "FP32")
    tensor.set_data_from_numpy(x[:50].astype(np.float32), binary_data=binary)
    output = httpclient.InferRequestedOutput("probabilities", binary_data=binary)
    result = client.infer("digits", [tensor], outputs=[output])
    probabilities = result.as_numpy("probabilities")
    assert probabilities.shape == (50, 10) and (probabilities.argmax(axis=1) == y[:50]).mean() > 0.9


def test_a_json_body_without_content_type_is_read_as_json(onnx_server, digits_models):
    """What tritonclient sends in JSON mode: a body and no Content-Type (http.client adds none;
    urllib would add a form type). KServe alone answers 400 'inference-header-content-length'."""
    import http.client

    x, _ = digits_models["rows"]
    body = json.dumps(
        {"inputs": [{"name": "pixels", "shape": [1, 64], "datatype": "FP32", "data": x[:1].tolist()}]}
    )
    host, port = onnx_server.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.putrequest("POST", "/v2/models/digits/infer")
    connection.putheader("Content-Length", str(len(body)))
    connection.endheaders(body.encode())
    response = connection.getresponse()
    answer = json.loads(response.read())
    assert response.status == 200, answer
    assert answer["outputs"][0]["shape"] == [1, 10]


def test_without_the_hook_kserve_refuses_such_a_body():
    from kfstack.serving.model_server import _with_json_content_type

    bare = {"type": "http", "headers": [(b"content-length", b"10")]}
    assert (b"content-type", b"application/json") in _with_json_content_type(bare)["headers"]
    binary = {"type": "http", "headers": [(b"inference-header-content-length", b"10")]}
    assert _with_json_content_type(binary) == binary  # a binary request is left alone


def test_v1_to_an_onnx_model_is_a_400(onnx_server):
    response = onnx_server.v1([[0.0] * 64])
    assert response.status_code == 400 and "Open Inference Protocol (V2) only" in response.text


def test_the_flights_predictor_states_its_inputs_and_takes_tritons_client(predictor, raw_records):
    import tritonclient.http as httpclient

    from kfstack_examples.flights.scoring import REQUEST_FIELDS
    from tests.serving.conftest import v2_inputs

    client = triton_client(predictor)
    metadata = client.get_model_metadata(predictor.name)
    assert [spec["name"] for spec in metadata["inputs"]] == [field.name for field in REQUEST_FIELDS]
    assert metadata["outputs"] == [{"name": "probability", "datatype": "FP32", "shape": [-1]}]
    records = [r for r in raw_records if r.get("dep_delay") is not None][:5]
    tensors = []
    for spec in v2_inputs(records):
        tensor = httpclient.InferInput(spec["name"], spec["shape"], spec["datatype"])
        dtype = {"BYTES": np.object_, "INT64": np.int64, "FP64": np.float64}[spec["datatype"]]
        if None in spec["data"]:
            continue  # an optional field left out, as a client without it would
        tensor.set_data_from_numpy(np.asarray(spec["data"], dtype=dtype), binary_data=False)
        tensors.append(tensor)
    result = client.infer(predictor.name, tensors)
    probabilities = result.as_numpy("probability")
    assert probabilities.shape == (5,) and ((probabilities > 0) & (probabilities < 1)).all()


def test_a_server_refuses_kserves_worker_processes(tmp_path):
    """kfstack's metrics are one process's: KServe's multi-process server would answer each
    scrape from one worker at random, so ``--workers`` above 1 is refused before serving."""
    import subprocess

    from kfstack.serving.format_server import command

    standard_models.sklearn_digits(str(tmp_path))
    done = subprocess.run(
        command(str(tmp_path), "m", 0, "sklearn", "", "--workers=2"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "--workers=2: kfstack's metrics and live drift are one process's" in done.stderr


def test_a_body_in_chunks_reaches_the_app_whole_and_one_over_the_limit_is_refused_unread():
    import asyncio

    from kfstack.serving.model_server import RequestAccounting

    chunks = [b'{"instances": ', b"[[1, 2", b"]]}"]
    seen: list[dict] = []
    sent: list[dict] = []

    async def app(scope, receive, send):
        seen.append(await receive())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def request(limit: int) -> None:
        messages = iter(
            {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
            for i, chunk in enumerate(chunks)
        )

        async def receive():
            return next(messages)

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/v1/models/m:predict", "headers": []}
        await RequestAccounting(app, "m", limit)(scope, receive, send)

    asyncio.run(request(100))
    assert seen == [{"type": "http.request", "body": b'{"instances": [[1, 2]]}', "more_body": False}]
    assert sent[0]["status"] == 200
    sent.clear()
    asyncio.run(request(20))  # the count passes 20 bytes at the second chunk
    assert len(seen) == 1 and sent[0]["status"] == 413
