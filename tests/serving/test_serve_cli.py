"""``kfstack serve``: a model directory served until Ctrl-C; a directory that is not a model is
refused before anything starts."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import httpx

from kfstack.app.cli import EXIT_BAD_INPUT, main
from kfstack.training.process_group import free_port


def test_a_directory_that_is_not_a_model_is_refused(tmp_path, capsys):
    assert main(["serve", "--model", str(tmp_path)]) == EXIT_BAD_INPUT
    error = capsys.readouterr().err
    assert "not a trained model directory" in error
    assert "model.onnx, feature_spec.json" in error


def test_serves_until_ctrl_c(trained, raw_records, tmp_path):
    port = free_port()
    with open(tmp_path / "serve.log", "w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kfstack.app.cli",
                "serve",
                "--model",
                trained["model"],
                "--port",
                str(port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}/v1/models/flights-delay"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                assert process.poll() is None, (tmp_path / "serve.log").read_text()
                try:
                    if httpx.get(url, timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
            response = httpx.post(f"{url}:predict", json={"instances": raw_records[:2]})
            assert response.status_code == 200, response.text
            assert len(response.json()["predictions"]) == 2
        finally:
            process.send_signal(signal.SIGINT)
            code = process.wait(timeout=30)
    assert code == 0, (tmp_path / "serve.log").read_text()
    assert "kfstack serve:" in (tmp_path / "serve.log").read_text()
