"""A model trained on synthetic features, and test splits rewritten to hold one class only."""

from __future__ import annotations

import pathlib
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kfstack.components.training.train_model.stage import train_locally
from kfstack.training.settings import TrainingSettings


@pytest.fixture(scope="session")
def trained(tmp_path_factory) -> tuple[str, str]:
    """(model URI, features URI): two epochs on 3,000 synthetic rows, exported to ONNX."""
    from tests.training.conftest import make_feature_dir

    root = tmp_path_factory.mktemp("eval")
    features = make_feature_dir(root / "features", rows=3000, shards=1, seed=3)
    train_locally(
        TrainingSettings(epochs=2, workers=1, batch_size=128, learning_rate=0.01, max_restarts=0),
        features_uri=features,
        model_uri=str(root / "model"),
        logs_uri=str(root / "logs"),
        threads_per_worker=1,
    )
    return str(root / "model"), features


def with_test_labels(features_uri: str, destination: pathlib.Path, label: int) -> str:
    """A copy of ``features_uri`` whose test split has every label set to ``label``.

    The features are untouched, so the model scores the same rows; only the truth changes, which
    is how a small sample can end up with one class in its test split.
    """
    shutil.copytree(features_uri, destination)
    for part in sorted((destination / "test").glob("*.parquet")):
        table = pq.read_table(part)
        column = table.schema.get_field_index("label")
        labels = pa.array([label] * table.num_rows, type=table.schema.field("label").type)
        pq.write_table(table.set_column(column, "label", labels), part)
    return str(destination)


@pytest.fixture(scope="session")
def on_time_only(trained, tmp_path_factory) -> str:
    """Features whose test split has no delayed flight."""
    return with_test_labels(trained[1], tmp_path_factory.mktemp("on_time_only") / "features", 0)


@pytest.fixture(scope="session")
def delayed_only(trained, tmp_path_factory) -> str:
    """Features whose test split has no on-time flight."""
    return with_test_labels(trained[1], tmp_path_factory.mktemp("delayed_only") / "features", 1)
