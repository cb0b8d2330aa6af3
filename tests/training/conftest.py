"""Synthetic feature directories in the feature job's layout, with a learnable label; a fault hook."""

from __future__ import annotations

import json
import os
import re
import signal
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kfstack.training import checkpoints
from kfstack_examples.flights.feature_spec import (
    JOB_REPORT_FILE,
    SPLITS,
    CategoricalFeature,
    FeatureSpec,
    NumericFeature,
)

# A Katib metric line's name=value pairs, as Katib's StdOut collector reads them.
KATIB_METRIC = re.compile(r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)")


def katib_metrics(log_text: str) -> list[dict[str, float]]:
    lines = [line for line in log_text.splitlines() if line.startswith("epoch=")]
    return [{m.group(1): float(m.group(2)) for m in KATIB_METRIC.finditer(line)} for line in lines]


def make_feature_dir(root, rows: int = 4000, shards: int = 2, seed: int = 0) -> str:
    """Writes ``<root>/{train,validation,test}/part-*.parquet``, ``feature_spec.json`` and the
    ``job_report.json`` a model's lineage record reads.

    The label depends on one categorical and one numeric feature, so a model that learns
    scores well above 0.5 AUC; the other columns are noise.
    """
    rng = np.random.default_rng(seed)
    spec = FeatureSpec(
        categorical=(
            CategoricalFeature("colour", ("red", "green", "blue")),
            CategoricalFeature("size", tuple(f"s{i}" for i in range(20))),
        ),
        numeric=(NumericFeature("signal", 0.0, 0.0, 1.0), NumericFeature("noise", 0.0, 0.0, 1.0)),
    )
    os.makedirs(root, exist_ok=True)
    spec.save(os.path.join(root, "feature_spec.json"))
    written = {split: rows if split == "train" else rows // 4 for split in SPLITS}
    with open(os.path.join(root, JOB_REPORT_FILE), "w") as f:
        json.dump({"rows_read": sum(written.values()), "rows_per_split": written, "job": {"seed": seed}}, f)
    for _split_index, split in enumerate(SPLITS):
        n = rows if split == "train" else rows // 4
        colour = rng.integers(0, 4, n)  # 3 = the OOV bucket
        size = rng.integers(0, 21, n)
        signal = rng.normal(size=n).astype(np.float32)
        noise = rng.normal(size=n).astype(np.float32)
        logit = 2.0 * signal + np.where(colour == 0, 1.5, -0.5)
        label = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int32)
        table = pa.table(
            {
                "label": label,
                "cat__colour": colour.astype(np.int32),
                "cat__size": size.astype(np.int32),
                "num__signal": signal,
                "num__noise": noise,
            }
        )
        os.makedirs(os.path.join(root, split), exist_ok=True)
        bounds = np.linspace(0, n, shards + 1).astype(int)
        for i in range(shards):
            pq.write_table(
                table.slice(bounds[i], bounds[i + 1] - bounds[i]),
                os.path.join(root, split, f"part-{i:05d}.parquet"),
            )
    return str(root)


@pytest.fixture(scope="session")
def feature_dir(tmp_path_factory) -> str:
    return make_feature_dir(tmp_path_factory.mktemp("features"), rows=4000, shards=2)


def kill_after_first_checkpoint(checkpoint_dir, position: int = 1):
    """An ``on_group_started`` hook that SIGKILLs replica ``position`` of the first attempt as
    soon as a checkpoint exists (mid-training, with something to resume from).

    Returns:
        The hook, and a list that holds ``True`` once the kill happened.
    """
    killed: list[bool] = []

    def hook(attempt, processes):
        if attempt != 1:
            return
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and processes[position].poll() is None:
            if checkpoints.list_checkpoints(str(checkpoint_dir)):
                processes[position].send_signal(signal.SIGKILL)
                killed.append(True)
                return
            time.sleep(0.02)

    return hook, killed
