"""kfstack.spark.quality without Spark: the counts, the check and the report file (the tagging
itself runs in the sample application's real run, test_spark_job_stage.py)."""

from __future__ import annotations

import json

import pytest

from kfstack.contracts import REPORT_PATH_ENV, read_report
from kfstack.errors import DataQualityError, InvalidParameterError
from kfstack.spark import quality

REPORT = quality.QualityReport(
    rows_read=200, quarantined_by_reason={"missing_id": 6, "bad_amount": 4, "late": 4}
)


def test_the_counts_follow_from_the_rows_per_reason():
    assert (REPORT.rows_quarantined, REPORT.rows_valid, REPORT.quarantined_fraction) == (14, 186, 0.07)
    assert REPORT.top_reasons(2) == [("missing_id", 6), ("bad_amount", 4)]  # ties by name
    assert REPORT.metrics() == {
        "rows_read": 200,
        "rows_valid": 186,
        "rows_quarantined": 14,
        "quarantined_fraction": 0.07,
        "quarantined.bad_amount": 4,
        "quarantined.late": 4,
        "quarantined.missing_id": 6,
    }
    assert quality.QualityReport(0, {}).quarantined_fraction == 0.0


def test_the_check_fails_above_the_share_and_names_the_top_reasons():
    REPORT.check(0.07)  # at the limit: accepted
    with pytest.raises(DataQualityError) as raised:
        REPORT.check(0.05, where="s3://team/quarantine")
    message = str(raised.value)
    assert "14 of 200 rows (7.0%)" in message and "max_quarantine_fraction=5.0%" in message
    assert "missing_id (6), bad_amount (4), late (4)" in message
    assert "s3://team/quarantine" in message
    with pytest.raises(InvalidParameterError, match="within 0 and 1"):
        REPORT.check(5)


def test_the_report_is_written_where_the_step_reads_it(tmp_path, monkeypatch):
    path = tmp_path / "report.json"
    monkeypatch.setenv(REPORT_PATH_ENV, str(path))
    assert quality.write_report(REPORT.metrics())
    assert read_report(str(path), "test")["rows_valid"] == 186.0
    assert json.loads(path.read_text())["quarantined.late"] == 4


def test_outside_a_step_nothing_is_written_and_a_bad_value_is_refused(monkeypatch):
    monkeypatch.delenv(REPORT_PATH_ENV, raising=False)
    assert not quality.write_report({"rows": 1})
    with pytest.raises(InvalidParameterError, match="rows, share"):
        quality.write_report({"rows": "many", "share": float("nan"), "ok": 1})


def test_rules_are_checked_before_any_spark_work():
    class Rows:  # tag_rows refuses before it touches a column
        columns = ("id", "reason")

    with pytest.raises(InvalidParameterError, match="at least one"):
        quality.tag_rows(Rows(), [])  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="named twice: late"):
        quality.tag_rows(Rows(), [("late", None), ("late", None)])  # type: ignore[list-item]
    with pytest.raises(InvalidParameterError, match="already have a column 'reason'"):
        quality.tag_rows(Rows(), [("late", None)])  # type: ignore[list-item]
