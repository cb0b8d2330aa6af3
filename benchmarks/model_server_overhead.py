"""Benchmark: kfstack's model server against the same model served by hand.

Two models, each served twice on loopback at once, by two processes:

- **kfstack**: as a run deploys it. The flights predictor (``python -m
  kfstack_examples.flights.predictor``, live drift on its profile as shipped) and the onnx
  stand-in (``python -m kfstack.serving.format_server --model_format=onnx``, the flights
  ``model.onnx`` in Triton's layout): kfstack's request middleware (body limit and deadline,
  the queue gauge, outcome counters, latency histogram) and its hooks.
- **by hand** (:mod:`benchmarks.by_hand_server`): the same ``kserve.Model`` class, loading the same
  files, checking the same way and answering with the same library (the flights feature path and
  onnxruntime), on KServe's bare ``ModelServer``.

Each case (1, 100 and 1,000 records a request; concurrency 1 and 8; V1 for the predictor, V2 for
the onnx model) is measured on both servers in turn, ``--rounds`` times over, A B then B A, and
the ratio kfstack / by hand is taken round by round (its median is reported, with the lowest and
highest round's), so the machine's drift over the run moves both alike. Beside requests per
second, each server's own CPU time per request (its process's user + system time over the round,
from the kernel): on a small machine where the client competes with the server for the cores,
requests per second swing with the scheduler, while the server's CPU a request is its own work.
Goal (issue: fixed costs): a median ratio >= 0.9 in every case.

    python -m benchmarks.model_server_overhead [--model DIR] [--features-uri DIR] [--requests 600]
        [--rounds 9]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from typing import Any

import psutil

from benchmarks.common import machine_facts, write_result
from benchmarks.predictor_throughput import load, sample_records, trained_model_dir

SIZES = (1, 100, 1000)
CONCURRENCY = (1, 8)
GOAL = 0.9
NAME = "flights-delay"


def _start(run_dir: str, service: str, argv: Any) -> tuple[str, Any]:
    from kfstack.serving import local_services

    os.makedirs(run_dir, exist_ok=True)
    return run_dir, local_services.start_service(
        run_dir, service, argv, ready_path=f"/v2/models/{NAME}/ready", timeout_seconds=120
    )


def _servers(kind: str, model_dir: str, repository: str, tmp: str) -> dict[str, Any]:
    """The kfstack and the by-hand server of ``kind``, both started."""
    from kfstack.serving import format_server
    from kfstack_examples.flights.predictor import command as predictor_command

    quiet = "--enable_latency_logging=false"
    served = model_dir if kind == "flights" else repository
    if kind == "flights":
        ours = lambda port: predictor_command(model_dir, NAME, port, quiet)  # noqa: E731
    else:
        ours = lambda port: format_server.command(repository, NAME, port, "onnx", "", quiet)  # noqa: E731

    def by_hand(port: int) -> list[str]:
        return [
            sys.executable, "-m", "benchmarks.by_hand_server", f"--kind={kind}", f"--model_name={NAME}",
            f"--model_dir={served}", f"--http_port={port}", quiet,
        ]  # fmt: skip

    return {
        "kfstack": _start(os.path.join(tmp, kind, "kfstack"), f"{kind}-kfstack", ours),
        "by_hand": _start(os.path.join(tmp, kind, "by-hand"), f"{kind}-by-hand", by_hand),
    }


def _v2_body(repository: str, rows: int) -> bytes:
    """A V2 request of ``rows`` rows for the flights graph's inputs (zeros: valid indices and
    numbers alike)."""
    import onnxruntime

    from kfstack.serving.standard_formats import TRITON_MODEL_FILE, TRITON_VERSION, TritonOnnxModel

    session = onnxruntime.InferenceSession(
        os.path.join(repository, NAME, TRITON_VERSION, TRITON_MODEL_FILE), providers=["CPUExecutionProvider"]
    )
    inputs = []
    for spec in TritonOnnxModel._types(session.get_inputs()):
        width = 1
        for dim in spec["shape"][1:]:
            width *= dim
        zero = 0.0 if spec["datatype"].startswith("FP") else 0
        inputs.append(
            {
                "name": spec["name"],
                "shape": [rows, *spec["shape"][1:]],
                "datatype": spec["datatype"],
                "data": [zero] * (rows * width),
            }
        )
    return json.dumps({"inputs": inputs}).encode()


def _compare(
    servers: dict[str, Any], body: bytes, count: int, concurrency: int, path: str, rounds: int
) -> dict[str, Any]:
    """One case on both servers, ``rounds`` times over: requests per second and each server's own
    CPU time per request, with the ratios taken round by round. The server that goes first
    alternates (A B, B A, ...), so that neither is always the one measured as the machine's
    other work rises or falls."""
    rps: dict[str, list[float]] = {"kfstack": [], "by_hand": []}
    cpu_ms: dict[str, list[float]] = {"kfstack": [], "by_hand": []}
    for round_ in range(rounds):
        for label in ("kfstack", "by_hand") if round_ % 2 == 0 else ("by_hand", "kfstack"):
            service = servers[label][1]
            process = psutil.Process(service.pid)
            before = sum(process.cpu_times()[:2])
            measured = load(service.port, body, count, concurrency, path)
            served = count + min(50, count)  # load()'s warm-up requests are in the CPU time too
            cpu_ms[label].append((sum(process.cpu_times()[:2]) - before) * 1000 / served)
            rps[label].append(measured["requests_per_second"])
    ratios = [a / b for a, b in zip(rps["kfstack"], rps["by_hand"], strict=True)]
    cpu_ratios = [b / a for a, b in zip(cpu_ms["kfstack"], cpu_ms["by_hand"], strict=True)]
    return {
        "kfstack_rps": round(statistics.median(rps["kfstack"]), 1),
        "by_hand_rps": round(statistics.median(rps["by_hand"]), 1),
        "ratio": round(statistics.median(ratios), 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "kfstack_cpu_ms_per_request": round(statistics.median(cpu_ms["kfstack"]), 3),
        "by_hand_cpu_ms_per_request": round(statistics.median(cpu_ms["by_hand"]), 3),
        "cpu_ratio": round(statistics.median(cpu_ratios), 3),
        "cpu_ratio_range": [round(min(cpu_ratios), 3), round(max(cpu_ratios), 3)],
        "requests": count,
        "rounds": rounds,
    }


def run(model_dir: str | None, features_uri: str | None, requests: int, rounds: int) -> dict[str, Any]:
    from kfstack.serving import local_services
    from kfstack.serving.standard_formats import triton_layout

    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kfstack-overhead-") as tmp:
        model = model_dir or trained_model_dir(features_uri, tmp)
        repository = os.path.join(tmp, "repository")
        triton_layout(model, NAME, repository)
        records = sample_records(100)
        v1 = {n: json.dumps({"instances": (records * 10)[:n]}).encode() for n in SIZES}
        v2 = {n: _v2_body(repository, n) for n in SIZES}
        for kind in ("flights", "onnx"):
            servers = _servers(kind, model, repository, tmp)
            path = f"/v1/models/{NAME}:predict" if kind == "flights" else f"/v2/models/{NAME}/infer"
            bodies = v1 if kind == "flights" else v2
            try:
                for size in SIZES:
                    for concurrency in CONCURRENCY:
                        count = max(
                            8 * concurrency, requests // (1 if size == 1 else 5 if size == 100 else 20)
                        )
                        case = _compare(servers, bodies[size], count, concurrency, path, rounds)
                        case["meets_goal"] = case["ratio"] >= GOAL
                        figures[f"{kind} x{size} c{concurrency}"] = case
                        print(kind, size, concurrency, figures[f"{kind} x{size} c{concurrency}"], flush=True)
            finally:
                for run_dir, service in servers.values():
                    local_services.stop_service(run_dir, service.name)
    return {
        "benchmark": "model_server_overhead",
        "command": f"python -m benchmarks.model_server_overhead --requests {requests} --rounds {rounds}",
        "machine": machine_facts(),
        "figures": figures,
        "goal": f"ratio >= {GOAL} in every case",
        "meets_goal": all(f["ratio"] >= GOAL for f in figures.values()),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a trained flights model directory")
    parser.add_argument("--features-uri", default=None)
    parser.add_argument("--requests", type=int, default=600, help="single-record requests per case and round")
    parser.add_argument(
        "--rounds",
        type=int,
        default=9,
        help="rounds per case, each server measured once a round (odd: the median is one round's)",
    )
    args = parser.parse_args(argv)
    result = run(args.model, args.features_uri, args.requests, args.rounds)
    print(write_result(result))
    return result


if __name__ == "__main__":
    main()
