"""Benchmark: the predictor's throughput and latency against a trivial KServe model server.

Both servers are KServe ``ModelServer`` processes on loopback (gRPC off, latency logging off),
measured in the same run with the same client: V1 ``:predict`` requests of 1 and of 100 flight
records, at concurrency 1 and 8 (threads, one persistent HTTP connection each). The trivial
server answers 0.5 per record without looking at it, so the ratio is what the predictor's own
work (request checks, NumPy transform, onnxruntime) costs. Resident memory is read once each
server is ready.

    python -m benchmarks.predictor_throughput [--model DIR] [--features-uri DIR] [--requests 2000]

Without ``--model`` a model is trained for one epoch on ``--features-uri`` (default: the
feature job runs first on the full data). Goals (issue: KServe serving): at concurrency 1 the
predictor keeps >= 85% of the trivial server's requests/s, single-record p99 <= 10 ms, and its
resident memory after loading is <= 1.2x the trivial server's.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import tempfile
import time

import numpy as np
import psutil

from benchmarks.common import machine_facts, write_result
from kfstack_examples.flights.predictor import MODULE as PREDICTOR_MODULE
from kfstack_examples.flights.predictor import command

MODEL_NAME = "flights-delay"
TRIVIAL_MODULE = "benchmarks.trivial_predictor"
GOAL_THROUGHPUT_RATIO = 0.85
GOAL_P99_MS = 10.0
GOAL_MEMORY_RATIO = 1.2
CASES = ((1, 1), (1, 100), (8, 1), (8, 100))  # (concurrency, records per request)


def sample_records(n: int = 100) -> list[dict]:
    """Real flights as a caller would send them (the shipped table's first rows, typed)."""
    import zipfile

    import pandas as pd

    from kfstack_examples.flights.features_job import sources
    from kfstack_examples.flights.scoring import REQUEST_FIELDS

    with (
        zipfile.ZipFile(os.path.join(sources.default_data_dir(), "flights.csv.zip")) as z,
        z.open("flights.csv") as f,
    ):
        frame = pd.read_csv(f, nrows=n, keep_default_na=False, dtype=str).replace({"NA": None})
    kinds = {field.name: field.kind for field in REQUEST_FIELDS}
    return [
        {k: (float(v) if kinds[k] != "str" and v is not None else v) for k, v in row.items() if k in kinds}
        for row in frame.to_dict("records")
    ]


class Server:
    """One server of the comparison, started as an embedded run's service is."""

    def __init__(self, module: str, model_dir: str, run_dir: str) -> None:
        from kfstack.serving import local_services

        self.run_dir = run_dir
        self.service = local_services.start_service(
            run_dir,
            module.rsplit(".", 1)[-1],
            lambda port: command(
                model_dir, MODEL_NAME, port, "--enable_latency_logging=false", module=module
            ),
            ready_path=f"/v2/models/{MODEL_NAME}/ready",
        )
        self.port = self.service.port
        self.rss_after_load = psutil.Process(self.service.pid).memory_info().rss

    def stop(self) -> None:
        from kfstack.serving import local_services

        local_services.stop_service(self.run_dir, self.service.name)


def load(port: int, body: bytes, requests: int, concurrency: int, path: str = "") -> dict:
    """``requests`` POSTs of ``body`` to ``path`` (default: the predictor's V1 predict) from
    ``concurrency`` threads; throughput and latencies."""
    path = path or f"/v1/models/{MODEL_NAME}:predict"

    def worker(count: int) -> list[float]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        latencies = []
        for _ in range(count):
            started = time.perf_counter()
            connection.request(
                "POST",
                path,
                body=body,
                headers={"content-type": "application/json"},
            )
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise SystemExit(f"HTTP {response.status}")
            latencies.append((time.perf_counter() - started) * 1000)
        connection.close()
        return latencies

    # Warm-up (first requests load lazily initialised paths), not measured.
    worker(min(50, requests))
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        shares = [requests // concurrency] * concurrency
        latencies = [ms for part in pool.map(worker, shares) for ms in part]
    elapsed = time.perf_counter() - started
    return {
        "requests_per_second": round(len(latencies) / elapsed, 1),
        "p50_ms": round(float(np.percentile(latencies, 50)), 3),
        "p99_ms": round(float(np.percentile(latencies, 99)), 3),
    }


def trained_model_dir(features_uri: str | None, tmp: str) -> str:
    from benchmarks.ddp_scaling import build_features
    from kfstack_examples.flights.pipelines.steps import train_locally
    from kfstack_examples.flights.training.settings import TrainingSettings

    features = features_uri or build_features(tmp)
    model = os.path.join(tmp, "model")
    train_locally(
        TrainingSettings(epochs=1, workers=1, max_restarts=0),
        features_uri=features,
        model_uri=model,
        logs_uri=os.path.join(tmp, "logs"),
    )
    return model


def run(model_dir: str | None, features_uri: str | None, requests: int) -> dict:
    records = sample_records(100)
    bodies = {n: json.dumps({"instances": records[:n]}).encode() for n in (1, 100)}
    with tempfile.TemporaryDirectory(prefix="kfstack-serve-bench-") as tmp:
        model = model_dir or trained_model_dir(features_uri, tmp)
        figures: dict[str, dict] = {}
        memory: dict[str, int] = {}
        for label, module in (("trivial", TRIVIAL_MODULE), ("predictor", PREDICTOR_MODULE)):
            server = Server(module, model, os.path.join(tmp, label))
            try:
                memory[label] = server.rss_after_load
                for concurrency, size in CASES:
                    count = requests if size == 1 else max(200, requests // 5)
                    figures[f"{label} c{concurrency} x{size}"] = load(
                        server.port, bodies[size], count, concurrency
                    )
            finally:
                server.stop()
    ratios = {
        f"c{c} x{n}": round(
            figures[f"predictor c{c} x{n}"]["requests_per_second"]
            / figures[f"trivial c{c} x{n}"]["requests_per_second"],
            3,
        )
        for c, n in CASES
    }
    p99_single = figures["predictor c1 x1"]["p99_ms"]
    memory_ratio = memory["predictor"] / memory["trivial"]
    return {
        "benchmark": "predictor_throughput",
        "command": f"python -m benchmarks.predictor_throughput --requests {requests}",
        "machine": machine_facts(),
        "figures": figures,
        "throughput_ratio_predictor_to_trivial": ratios,
        "rss_after_load_mib": {k: round(v / 2**20, 1) for k, v in memory.items()},
        "memory_ratio": round(memory_ratio, 3),
        "goals": {
            "throughput_ratio_c1_x1": f">= {GOAL_THROUGHPUT_RATIO}",
            "p99_single_record_ms": f"<= {GOAL_P99_MS}",
            "memory_ratio": f"<= {GOAL_MEMORY_RATIO}",
        },
        "meets_goal": {
            "throughput": ratios["c1 x1"] >= GOAL_THROUGHPUT_RATIO,
            "p99": p99_single <= GOAL_P99_MS,
            "memory": memory_ratio <= GOAL_MEMORY_RATIO,
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a trained model directory")
    parser.add_argument("--features-uri", default=None)
    parser.add_argument("--requests", type=int, default=2000, help="single-record requests per case")
    args = parser.parse_args(argv)
    result = run(args.model, args.features_uri, args.requests)
    write_result(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
