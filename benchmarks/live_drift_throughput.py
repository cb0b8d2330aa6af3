"""Benchmark: the flights predictor's throughput with live drift on against off, same run.

Two predictor processes on loopback serve the same model directory (which carries its training
``profile.json``), one with ``--live_drift=on`` (the default window, 2,000 rows), one with
``--live_drift=off``, with the same client as :mod:`benchmarks.predictor_throughput`: V1
``:predict`` requests of 1 and of 1,000 flight records at concurrency 1. The window is filled
before timing (so every measured request also evicts). The two servers are measured in short
alternating rounds (``--rounds``), the ratio on/off taken per round; the median is the figure
(pairing keeps it meaningful while a shared machine's load drifts). Beside requests per second,
each server process's own CPU seconds per request (user + system, from the kernel's accounting),
which other processes' load disturbs far less than wall-clock throughput. Goal (issue 29):
on/off >= 0.95 at both sizes.

    python -m benchmarks.live_drift_throughput [--model DIR] [--features-uri DIR] [--rounds 10]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import tempfile
from typing import Any

import psutil

from benchmarks.common import machine_facts, write_result
from benchmarks.predictor_throughput import MODEL_NAME, load, sample_records, trained_model_dir
from kfstack_examples.flights.predictor import MODULE, command

GOAL_RATIO = 0.95
SIZES = (1, 1000)
MODES = ("on", "off")


class Server:
    """One predictor process, live drift ``mode``."""

    def __init__(self, model_dir: str, run_dir: str, mode: str) -> None:
        from kfstack.serving import local_services

        self.run_dir = run_dir
        self.service = local_services.start_service(
            run_dir,
            f"drift-{mode}",
            lambda port: command(
                model_dir,
                MODEL_NAME,
                port,
                "--enable_latency_logging=false",
                f"--live_drift={mode}",
                module=MODULE,
            ),
            ready_path=f"/v2/models/{MODEL_NAME}/ready",
        )
        self.port = self.service.port

    def window_rows(self) -> float | None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
        connection.close()
        for line in text.splitlines():
            if line.startswith("kfstack_predictor_drift_window_rows{"):
                return float(line.rsplit(" ", 1)[1])
        return None

    def stop(self) -> None:
        from kfstack.serving import local_services

        local_services.stop_service(self.run_dir, self.service.name)


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def measure(server: Server, body: bytes, requests: int) -> dict[str, float]:
    """``requests`` requests of ``body``: the client's figures and the server's CPU per request."""
    before = cpu_seconds(server.service.pid)
    figures = load(server.port, body, requests, 1)
    # load() sends a warm-up of up to 50 requests first, counted in the CPU too.
    sent = requests + min(50, requests)
    figures["server_cpu_ms_per_request"] = round((cpu_seconds(server.service.pid) - before) / sent * 1000, 4)
    return figures


def run(model_dir: str | None, features_uri: str | None, rounds: int, requests: int) -> dict[str, Any]:
    records = sample_records(max(SIZES))
    bodies = {n: json.dumps({"instances": records[:n]}).encode() for n in SIZES}
    counts = {1: requests, 1000: max(10, requests // 40)}
    with tempfile.TemporaryDirectory(prefix="kfstack-drift-bench-") as tmp:
        model = model_dir or trained_model_dir(features_uri, tmp)
        assert os.path.isfile(os.path.join(model, "profile.json")), "the model directory carries no profile"
        servers = {mode: Server(model, os.path.join(tmp, mode), mode) for mode in MODES}
        try:
            # Fill the window first: every measured request then also evicts.
            load(servers["on"].port, bodies[1000], 2, 1)
            window = servers["on"].window_rows()
            assert servers["off"].window_rows() is None
            figures: dict[str, list[dict]] = {f"{mode} x{n}": [] for mode in MODES for n in SIZES}
            for turn in range(rounds):
                for n in SIZES:
                    # Who goes first alternates too.
                    for mode in MODES if turn % 2 == 0 else MODES[::-1]:
                        figures[f"{mode} x{n}"].append(measure(servers[mode], bodies[n], counts[n]))
        finally:
            for server in servers.values():
                server.stop()

    def ratios(key: str, invert: bool) -> list[float]:
        pairs = zip(figures[f"on x{n}"], figures[f"off x{n}"], strict=True)
        return [round(off[key] / on[key] if invert else on[key] / off[key], 3) for on, off in pairs]

    throughput, cpu = {}, {}
    for n in SIZES:
        throughput[f"x{n}"] = ratios("requests_per_second", invert=False)
        # CPU per request, off over on: the throughput ratio a CPU-bound server would have.
        cpu[f"x{n}"] = ratios("server_cpu_ms_per_request", invert=True)
    medians = {
        "throughput_on_to_off": {k: statistics.median(v) for k, v in throughput.items()},
        "cpu_per_request_off_to_on": {k: statistics.median(v) for k, v in cpu.items()},
    }
    medians_of_figures = {
        key: {
            field: statistics.median(f[field] for f in values)
            for field in ("requests_per_second", "p50_ms", "p99_ms", "server_cpu_ms_per_request")
        }
        for key, values in figures.items()
    }
    return {
        "benchmark": "live_drift_throughput",
        "command": f"python -m benchmarks.live_drift_throughput --rounds {rounds} --requests {requests}",
        "machine": machine_facts(),
        "window_rows_when_timed": window,
        "median_figures": medians_of_figures,
        "ratios_per_round": {"throughput_on_to_off": throughput, "cpu_per_request_off_to_on": cpu},
        "ratios_median": medians,
        "goal": f">= {GOAL_RATIO}",
        "meets_goal": {
            kind: all(value >= GOAL_RATIO for value in values.values()) for kind, values in medians.items()
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a trained model directory (with its profile.json)")
    parser.add_argument("--features-uri", default=None)
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds of both servers")
    parser.add_argument("--requests", type=int, default=1500, help="single-record requests per round")
    args = parser.parse_args(argv)
    result = run(args.model, args.features_uri, args.rounds, args.requests)
    write_result(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
