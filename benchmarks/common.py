"""What every benchmark records beside its figures: the machine, the date, where results go."""

from __future__ import annotations

import datetime
import json
import os
import platform

import psutil

RESULTS_DIR = os.path.join(os.path.dirname(__file__), "results")


def machine_facts() -> dict:
    return {
        "cpu": platform.processor() or platform.machine(),
        "logical_cores": psutil.cpu_count(logical=True),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
    }


def write_result(result: dict) -> str:
    """Writes ``result`` to ``benchmarks/results/<benchmark>.json`` (ignored by git)."""
    os.makedirs(RESULTS_DIR, exist_ok=True)
    path = os.path.join(RESULTS_DIR, f"{result['benchmark']}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    return path
