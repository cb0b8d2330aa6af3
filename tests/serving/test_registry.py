"""The embedded platform's model registry: first rollout, promotions and rollbacks recorded,
production replaced whole, model directories kept beyond their runs."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import threading

import pytest

from kfstack.errors import InvalidParameterError
from kfstack.serving.registry import FIRST, PROMOTED, ROLLED_BACK, LocalRegistry, ProductionChangedError


def model_dir(tmp_path, name: str) -> str:
    path = tmp_path / "runs" / name / "model"
    path.mkdir(parents=True)
    (path / "model.onnx").write_text(name)
    return str(path)


def test_first_promote_and_rollback_are_recorded(tmp_path):
    registry = LocalRegistry(str(tmp_path / "registry"), "flights-delay")
    assert registry.production() is None
    first = registry.promote(model_dir(tmp_path, "v1"), "0.1.0+run1", "run1")
    assert registry.production() == first
    assert pathlib.Path(first.model_dir, "model.onnx").read_text() == "v1"
    registry.record_rollback("0.1.0+run2", "run2", {"failed_checks": ["AUC"]})
    assert registry.production() == first
    second = registry.promote(model_dir(tmp_path, "v3"), "0.1.0+run3", "run3", {"psi": 0.01})
    assert registry.production().version == "0.1.0+run3"
    history = registry.history()
    assert [(h["event"], h["version"]) for h in history] == [
        (FIRST, "0.1.0+run1"),
        (ROLLED_BACK, "0.1.0+run2"),
        (PROMOTED, "0.1.0+run3"),
    ]
    assert history[1]["production"] == "0.1.0+run1"
    assert history[1]["failed_checks"] == ["AUC"]
    assert history[2]["previous"] == "0.1.0+run1"
    # The registry's copy outlives the run directory it came from.
    shutil.rmtree(tmp_path / "runs")
    assert pathlib.Path(second.model_dir, "model.onnx").read_text() == "v3"


def test_concurrent_promotions_leave_one_whole_record(tmp_path):
    registry = LocalRegistry(str(tmp_path / "registry"), "m")
    dirs = [model_dir(tmp_path, f"v{i}") for i in range(8)]
    threads = [
        threading.Thread(target=registry.promote, args=(d, f"v{i}", f"run{i}")) for i, d in enumerate(dirs)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(os.path.join(registry.path, "production.json"), encoding="utf-8") as f:
        record = json.load(f)
    assert record["version"] in {f"v{i}" for i in range(8)}
    history = registry.history()
    assert len(history) == 8
    assert [h["event"] for h in history].count(FIRST) == 1
    assert not [n for n in os.listdir(registry.path) if n.startswith(".production.json.")]


def test_unsafe_names_are_refused(tmp_path):
    with pytest.raises(InvalidParameterError, match="model name"):
        LocalRegistry(str(tmp_path), "../escape")
    registry = LocalRegistry(str(tmp_path), "m")
    with pytest.raises(InvalidParameterError, match="model version"):
        registry.promote(model_dir(tmp_path, "v1"), "../../x", "run1")


def test_a_version_names_one_model_for_good(tmp_path):
    registry = LocalRegistry(str(tmp_path / "registry"), "m")
    registry.promote(model_dir(tmp_path, "v1"), "1.0", "run1")
    with pytest.raises(InvalidParameterError, match=r"model version 1\.0 is already in the registry"):
        registry.promote(model_dir(tmp_path, "other"), "1.0", "run2")
    assert pathlib.Path(registry.production().model_dir, "model.onnx").read_text() == "v1"
    assert os.path.isabs(registry.production().model_dir)


def test_a_promotion_replaces_only_the_production_it_was_compared_with(tmp_path):
    """Two runs canary against v1 at once: the first to decide promotes; the second, compared
    with v1 and not with the first's model, is refused instead of replacing it unseen."""
    registry = LocalRegistry(str(tmp_path / "registry"), "flights-delay")
    model = model_dir(tmp_path, "m")
    registry.promote(model, "v1", "run-1", replacing=None)
    registry.promote(model, "v2", "run-2", replacing="v1")
    with pytest.raises(ProductionChangedError, match="production is v2 now, not v1"):
        registry.promote(model, "v3", "run-3", replacing="v1")
    with pytest.raises(ProductionChangedError, match="production is v2 now, not None"):
        registry.promote(model, "v4", "run-4", replacing=None)  # a second "first" rollout
    assert registry.production().version == "v2"
    assert [e["version"] for e in registry.history()] == ["v1", "v2"]
