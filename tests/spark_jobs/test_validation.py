"""One test per quarantine rule, on tiny DataFrames through the real Spark code."""

import datetime

import pytest

from kfstack_examples.flights.features_job.validation import (
    IN_WINDOW,
    KEY_HASH,
    OUTSIDE,
    REASON,
    UNDATED,
    WINDOW,
    counts,
    duplicate_groups,
    quarantine_rows,
    tag_flights,
    tag_flights_by_rules,
    tag_groups,
    valid_rows,
    window_membership,
)
from tests.spark_jobs.conftest import VALID_FLIGHT, flight, flights_frame

CARRIERS = ["UA", "AA", "DL"]
REJECTED_COLUMNS = (*VALID_FLIGHT, REASON)


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
        ({"distance": "NaN"}, "unparseable_distance"),
        ({"dep_delay": "-Infinity"}, "unparseable_dep_delay"),
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


@pytest.mark.slow
def test_the_groups_pass_finds_the_duplicates_the_whole_table_pass_finds(spark):
    # Copies with the same key and different raw text (the same flight sent twice), an identical
    # copy, an invalid twin, and flights with one row each.
    rows = [
        flight(),
        flight(distance=" 1400"),
        flight(),
        flight(flight="7"),
        flight(flight="7", air_time="-3"),
        flight(flight="8", dep_delay="2"),
        flight(flight="8", dep_delay="1"),
        flight(flight="99"),
    ]
    frame = flights_frame(spark, rows)
    everything = tag_flights(frame, CARRIERS)
    by_rules = tag_flights_by_rules(frame, CARRIERS)
    groups = duplicate_groups(by_rules)
    assert groups.count() == 2  # the flights with more than one valid row: the default and 8
    regrouped = tag_groups(frame, CARRIERS, groups)
    singles = by_rules.join(groups, KEY_HASH, "left_anti")

    def as_set(df):
        return sorted(tuple(r) for r in df.select(*REJECTED_COLUMNS).collect())

    assert as_set(quarantine_rows(everything)) == sorted(
        as_set(quarantine_rows(by_rules)) + as_set(quarantine_rows(regrouped.where("reason = 'duplicate'")))
    )
    assert sorted(map(tuple, valid_rows(everything).collect())) == sorted(
        map(tuple, valid_rows(singles).unionByName(valid_rows(regrouped)).collect())
    )


def test_a_group_without_duplicates_keeps_all_its_rows(spark):
    # A key hash that another flight's collides with: tagging the group tells the flights apart.
    frame = flights_frame(spark, [flight(), flight(flight="7")])
    groups = tag_flights_by_rules(frame, CARRIERS).select(KEY_HASH)
    assert [r[REASON] for r in tag_groups(frame, CARRIERS, groups).collect()] == [None, None]


def test_quarantine_keeps_the_raw_values_and_the_reason(spark):
    tagged = tag_flights(flights_frame(spark, [flight(), flight(distance="14OO")]), CARRIERS)
    rejected = [r.asDict() for r in quarantine_rows(tagged).collect()]
    assert rejected == [{**VALID_FLIGHT, "distance": "14OO", REASON: "unparseable_distance"}]
    kept = valid_rows(tagged).collect()
    assert len(kept) == 1 and kept[0]["distance"] == 1400.0


def test_a_window_places_every_row_in_it_outside_it_or_undated(spark):
    rows = [
        flight(day="1", flight="1"),
        flight(day="31", flight="2"),
        flight(month="2", day="1", flight="3"),
        flight(month="12", day="31", year="2012", flight="4"),
        flight(month="13", flight="5"),  # invalid_date: in no window
        flight(day="x", flight="6"),  # unparseable_day
    ]
    tagged = tag_flights(flights_frame(spark, rows), CARRIERS)

    def membership(start, end):
        placed = tagged.withColumn(WINDOW, window_membership(start, end)).collect()
        return {str(int(r["flight"])): r[WINDOW] for r in placed}

    january = membership(datetime.date(2013, 1, 1), datetime.date(2013, 1, 31))
    assert january == {"1": IN_WINDOW, "2": IN_WINDOW, "3": OUTSIDE, "4": OUTSIDE, "5": UNDATED, "6": UNDATED}
    later = membership(datetime.date(2013, 1, 31), None)
    assert [f for f, place in sorted(later.items()) if place == IN_WINDOW] == ["2", "3"]
    earlier = membership(None, datetime.date(2012, 12, 31))
    assert [f for f, place in sorted(earlier.items()) if place == IN_WINDOW] == ["4"]
    # Without a window every row is in it (the undated ones are then quarantined).
    assert set(membership(None, None).values()) == {IN_WINDOW}


def test_the_content_hash_sees_every_value_and_no_order(spark):
    from kfstack_examples.flights.features_job.job import content_hash

    rows = [flight(flight=str(n), distance=str(100 + n)) for n in range(40)]

    def hashed(frame):
        tagged = tag_flights(frame, CARRIERS).withColumn(WINDOW, window_membership(None, None))
        return content_hash(len(rows), tagged.agg(*counts()).collect()[0].asDict())

    original = hashed(flights_frame(spark, rows))
    assert original == hashed(flights_frame(spark, rows[::-1]).repartition(3))
    changed = [*rows[:-1], flight(flight="39", distance="140")]
    assert hashed(flights_frame(spark, changed)) != original
    # A value moved to another column is another content.
    swapped = [*rows[:-1], flight(flight="139", distance="39")]
    assert hashed(flights_frame(spark, swapped)) != original
