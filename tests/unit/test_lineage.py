"""Lineage records: hashes that ignore float noise and key order, the comparison of a
reproduction, and the record refused when it is missing or of another format."""

import json

import pytest

from kfstack.errors import InvalidParameterError
from kfstack.lineage import LINEAGE_FILE, Lineage, compare, document_hash, model_version


def record(**changes) -> Lineage:
    values = {
        "model_version": "flights-training-20261124-101500",
        "pipeline_version": "0.1.0+abc1234",
        "kfstack_version": "0.1.0",
        "run_id": "run-1",
        "created": "2026-11-24T10:20:00+00:00",
        "data": {
            "window": {"start": "2013-01-01", "end": ""},
            "content_hash": "c0",
            "rows_read": 10,
            "feature_spec_hash": "f0",
        },
        "parameters": {"seed": 42, "learning_rate": 0.003, "window_start": "2013-01-01"},
        "metrics": {"val_auc": 0.7, "val_log_loss": 0.5},
    }
    return Lineage(**{**values, **changes})


def test_a_document_hash_ignores_key_order_and_float_noise_only():
    a = {"mean": 12.345678901234567, "names": ["x", "y"], "n": 3}
    assert document_hash(a) == document_hash({"n": 3, "names": ["x", "y"], "mean": 12.345678901234568})
    assert document_hash(a) != document_hash({**a, "mean": 12.3456789013})
    assert document_hash(a) != document_hash({**a, "names": ["y", "x"]})


def test_the_model_version_is_the_run_that_trained_it():
    assert model_version("f3a9-uuid", "/runs/flights-training-20261124-101500/") == (
        "flights-training-20261124-101500"
    )
    assert model_version("f3a9-uuid", "") == "f3a9-uuid"


def test_a_record_round_trips_and_a_missing_or_foreign_one_is_refused(tmp_path):
    record().save(str(tmp_path))
    assert Lineage.load(str(tmp_path)) == record()
    with pytest.raises(InvalidParameterError, match=r"has no lineage\.json"):
        Lineage.load(str(tmp_path / "elsewhere"))
    (tmp_path / LINEAGE_FILE).write_text(json.dumps({**record().to_dict(), "format_version": 99}))
    with pytest.raises(InvalidParameterError, match="of format 99"):
        Lineage.load(str(tmp_path))


def test_a_reproduction_matches_within_the_tolerance_and_names_what_differs():
    assert all(
        d.matches for d in compare(record(), record(metrics={"val_auc": 0.7 + 1e-9, "val_log_loss": 0.5}))
    )
    differences = compare(
        record(),
        record(
            data={**record().data, "feature_spec_hash": "f1"},
            metrics={"val_auc": 0.71, "val_log_loss": 0.5},
        ),
        tolerance=1e-6,
    )
    assert [d.item for d in differences if not d.matches] == ["data.feature_spec_hash", "metrics.val_auc"]
    missing = compare(record(), record(metrics={"val_auc": 0.7}))
    assert [d.item for d in missing if not d.matches] == ["metrics.val_log_loss"]
    other_parameters = compare(record(), record(parameters={"seed": 7, "learning_rate": 0.003}))
    assert [(d.item, d.recorded, d.reproduced) for d in other_parameters if not d.matches] == [
        ("parameters.seed", 42, 7),
        ("parameters.window_start", "2013-01-01", None),
    ]
    assert [d.item for d in compare(record(), record()) if d.item.startswith("parameters")] == ["parameters"]


def test_the_record_names_the_pipeline_and_an_earlier_record_without_it_still_loads(tmp_path):
    record(pipeline="churn-training").save(str(tmp_path / "named"))
    assert Lineage.load(str(tmp_path / "named")).pipeline == "churn-training"
    (tmp_path / "earlier").mkdir()
    earlier = {k: v for k, v in record().to_dict().items() if k != "pipeline"}
    (tmp_path / "earlier" / LINEAGE_FILE).write_text(json.dumps(earlier))
    assert Lineage.load(str(tmp_path / "earlier")).pipeline == ""
