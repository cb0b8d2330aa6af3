"""``kfstack serve``: a model directory of any format served as its runtime would until Ctrl-C;
a directory that is not a model of that format is refused before anything starts."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import httpx
import pytest

from kfstack.app.cli import EXIT_BAD_INPUT, main
from kfstack.training.process_group import free_port
from kfstack_examples.flights import predictor


def test_a_directory_that_is_not_a_model_of_the_format_is_refused(tmp_path, capsys):
    assert main(["serve", "--model", str(tmp_path), "--format", "sklearn"]) == EXIT_BAD_INPUT
    error = capsys.readouterr().err
    assert "not a sklearn model directory: nothing was written to the model directory" in error
    (tmp_path / "model.onnx").write_bytes(b"not a pickle")
    assert main(["serve", "--model", str(tmp_path), "--format", "sklearn"]) == EXIT_BAD_INPUT
    assert "one .joblib/.pkl/.pickle file" in capsys.readouterr().err


def test_a_custom_model_needs_its_predictor_class(tmp_path, capsys):
    assert main(["serve", "--model", str(tmp_path), "--format", "custom"]) == EXIT_BAD_INPUT
    assert "--predictor" in capsys.readouterr().err
    assert main(
        ["serve", "--model", str(tmp_path), "--format", "custom", "--predictor", "no.such:Class"]
    ) == (EXIT_BAD_INPUT)
    assert "no.such" in capsys.readouterr().err


def test_the_server_listens_on_loopback_unless_address_says_otherwise(tmp_path, monkeypatch):
    from tests.serving import standard_models

    standard_models.sklearn_digits(str(tmp_path))
    started: list[list[str]] = []

    def execv(_path: str, argv: list[str]) -> None:
        started.append(argv)  # stands in for the server replacing this process

    monkeypatch.setattr("os.execv", execv)
    for flags, address in (([], "127.0.0.1"), (["--address", "0.0.0.0"], "0.0.0.0")):
        main(["serve", "--model", str(tmp_path), "--format", "sklearn", *flags])
        binds = [arg for arg in started[-1] if arg.startswith("--bind_address")]
        assert binds == [f"--bind_address={address}"]


def test_the_server_flags_a_deployment_appends_are_handed_to_the_server(tmp_path, monkeypatch, capsys):
    """On a cluster KServe appends the InferenceService's args (kfstack's server flags) to the
    ServingRuntime's `kfstack serve` command line: the server gets them, and checks them."""
    from tests.serving import standard_models

    standard_models.sklearn_digits(str(tmp_path))
    started: list[list[str]] = []
    monkeypatch.setattr("os.execv", lambda _path, argv: started.append(argv))
    flags = ["--live_drift_ignore_features=f0,f1", "--max_body_bytes=1024"]
    main(["serve", "--model", str(tmp_path), "--format", "sklearn", *flags])
    assert started[-1][-2:] == flags
    # A word that is no flag is refused; so is an unknown flag of any other command.
    assert main(["serve", "--model", str(tmp_path), "--format", "sklearn", "stray"]) == EXIT_BAD_INPUT
    assert "serve: unexpected stray" in capsys.readouterr().err
    assert main(["list", "--live_drift_ignore_features=f0"]) == EXIT_BAD_INPUT
    assert "unrecognized arguments: --live_drift_ignore_features=f0" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [["--format", "pickle"], []])
def test_the_format_is_one_of_the_contracts(tmp_path, bad):
    assert main(["serve", "--model", str(tmp_path), *bad]) == EXIT_BAD_INPUT


def serve_until_ctrl_c(log_path, arguments: list[str], ready_url: str, request) -> None:
    """``kfstack serve`` with ``arguments`` in its own process: ready at ``ready_url``, answers
    ``request(url)`` (asserting on it), then stops cleanly on Ctrl-C."""
    port = free_port()
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "kfstack.app.cli", "serve", *arguments, "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                assert process.poll() is None, log_path.read_text()
                try:
                    if httpx.get(url + ready_url, timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
            request(url)
        finally:
            process.send_signal(signal.SIGINT)
            code = process.wait(timeout=30)
    assert code == 0, log_path.read_text()
    assert "kfstack serve:" in log_path.read_text()


def test_serves_the_flights_model_as_a_custom_predictor_until_ctrl_c(trained, raw_records, tmp_path):
    name = predictor.DEFAULT_MODEL_NAME

    def predict(url):
        response = httpx.post(f"{url}/v1/models/{name}:predict", json={"instances": raw_records[:2]})
        assert response.status_code == 200, response.text
        assert len(response.json()["predictions"]) == 2

    arguments = ["--model", trained["model"], "--format", "custom", "--predictor", predictor.MODEL_CLASS]
    serve_until_ctrl_c(tmp_path / "serve.log", [*arguments, "--name", name], f"/v1/models/{name}", predict)


def test_serves_an_onnx_model_as_triton_would(tmp_path):
    """A model directory with one ``.onnx`` file, laid out as Triton's repository and answered
    over V2 (a digit's class probabilities)."""
    from tests.serving import standard_models

    standard_models.onnx_digits(str(tmp_path / "onnx"), standard_models.sklearn_digits(str(tmp_path / "sk")))
    x, _ = standard_models.digits()

    def infer(url):
        tensor = {"name": "pixels", "shape": [2, 64], "datatype": "FP32", "data": x[:2].ravel().tolist()}
        body = {"inputs": [tensor]}
        response = httpx.post(f"{url}/v2/models/digits/infer", json=body)
        assert response.status_code == 200, response.text
        (output,) = response.json()["outputs"]
        assert output["name"] == "probabilities" and output["shape"] == [2, 10]

    arguments = ["--model", str(tmp_path / "onnx"), "--format", "onnx", "--name", "digits"]
    serve_until_ctrl_c(tmp_path / "serve.log", arguments, "/v2/models/digits/ready", infer)
