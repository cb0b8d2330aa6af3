"""One test per quarantine rule, on tiny DataFrames through the real Spark code."""

import pytest

from kfstack.spark_jobs.flights_features.validation import (
    REASON,
    quarantine_rows,
    tag_flights,
    valid_rows,
)
from tests.spark_jobs.conftest import VALID_FLIGHT, flight, flights_frame

CARRIERS = ["UA", "AA", "DL"]


def reasons(spark, rows):
    tagged = tag_flights(flights_frame(spark, rows), CARRIERS)
    return [r[REASON] for r in tagged.orderBy("raw_flight", "raw_distance").collect()]


def test_a_real_flight_is_valid(spark):
    assert reasons(spark, [flight()]) == [None]


def test_allowed_missing_values_are_not_errors(spark):
    cancelled = flight(
        dep_time=None, dep_delay=None, arr_time=None, arr_delay=None, air_time=None, tailnum=None
    )
    assert reasons(spark, [cancelled]) == [None]


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"distance": "14OO"}, "unparseable_distance"),
        ({"arr_delay": "late"}, "unparseable_arr_delay"),
        ({"time_hour": "yesterday"}, "unparseable_time_hour"),
        ({"carrier": None}, "missing_carrier"),
        ({"origin": "  "}, "missing_origin"),
        ({"sched_dep_time": None}, "missing_sched_dep_time"),
        ({"time_hour": None}, "missing_time_hour"),
        ({"month": "2", "day": "30"}, "invalid_date"),
        ({"month": "13"}, "invalid_date"),
        ({"sched_dep_time": "1275"}, "invalid_sched_dep_time"),
        ({"arr_time": "2500"}, "invalid_arr_time"),
        ({"distance": "-1400"}, "nonpositive_distance"),
        ({"air_time": "0"}, "nonpositive_air_time"),
        ({"carrier": "ZZ"}, "unknown_carrier"),
    ],
)
def test_each_rule_quarantines_with_its_reason(spark, overrides, reason):
    assert reasons(spark, [flight(**overrides)]) == [reason]


def test_unparseable_wins_over_later_rules(spark):
    # Both an unparseable distance and an unknown carrier: the first rule in order is reported.
    assert reasons(spark, [flight(distance="far", carrier="ZZ")]) == ["unparseable_distance"]


def test_duplicates_keep_one_row_and_quarantine_the_rest(spark):
    rows = [flight(), flight(), flight(), flight(flight="99")]
    assert sorted(reasons(spark, rows), key=str) == [None, None, "duplicate", "duplicate"]


def test_an_invalid_row_does_not_make_its_valid_twin_a_duplicate(spark):
    rows = [flight(), flight(air_time="-3")]
    assert sorted(reasons(spark, rows), key=str) == [None, "nonpositive_air_time"]


def test_quarantine_keeps_the_raw_values_and_the_reason(spark):
    tagged = tag_flights(flights_frame(spark, [flight(), flight(distance="14OO")]), CARRIERS)
    rejected = [r.asDict() for r in quarantine_rows(tagged).collect()]
    assert rejected == [{**VALID_FLIGHT, "distance": "14OO", REASON: "unparseable_distance"}]
    kept = valid_rows(tagged).collect()
    assert len(kept) == 1 and kept[0]["distance"] == 1400.0
