"""Benchmark: what a failing tracking server costs an embedded run (digits-training, `--no-cache`).

Four runs, one after another: untracked (the baseline), then tracked to a port that refuses, to a
server that accepts and never answers, and to a real tracking server on loopback stopped
``--stop-after`` seconds into the run. For each: the run's status, what its summary's
``tracking`` entry says, and its wall against the baseline's.

    python -m benchmarks.tracking_failures [--stop-after 25]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import tempfile
import threading
from collections.abc import Iterator

from benchmarks.common import machine_facts, run_locally, write_result
from kfstack.tracking.store import LocalServer, free_port

PIPELINE = "digits-training"


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """A socket that accepts every connection and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()


@contextlib.contextmanager
def disappearing_server(root: str, after: float) -> Iterator[str]:
    """A real tracking server, stopped ``after`` seconds into the block."""
    server = LocalServer(root)
    with server.running():
        server.wait_ready(timeout=120)
        timer = threading.Timer(after, server.stop)
        timer.start()
        try:
            yield server.uri
        finally:
            timer.cancel()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-after", type=float, default=25.0)
    args = parser.parse_args(argv)
    scratch = tempfile.mkdtemp(prefix="kfstack-tracking-failures-")
    cases: dict[str, contextlib.AbstractContextManager[str | None]] = {
        "untracked": contextlib.nullcontext(None),
        "refusing": contextlib.nullcontext(f"http://127.0.0.1:{free_port()}"),
        "never answering": silent_server(),
        f"stopped after {args.stop_after:.0f} s": disappearing_server(f"{scratch}/store", args.stop_after),
    }
    results = {}
    for name, target in cases.items():
        with target as uri:
            flags = ["--no-cache", *(["--tracking-uri", uri] if uri else ["--no-tracking"])]
            wall, summary = run_locally(PIPELINE, {}, f"{scratch}/runs", *flags)
        results[name] = {
            "wall_seconds": round(wall, 1),
            "status": summary["status"],
            "tracking": summary["tracking"],
        }
        print(f"{name}: {summary['status']} in {wall:.1f} s; tracking {summary['tracking']}", flush=True)
    baseline = results["untracked"]["wall_seconds"]
    for entry in results.values():
        entry["wall_added_seconds"] = round(entry["wall_seconds"] - baseline, 1)
    print(write_result({"benchmark": "tracking_failures", "machine": machine_facts(), "runs": results}))


if __name__ == "__main__":
    main()
