"""Benchmark: the Spark feature job vs the same joins and aggregations in DuckDB.

Both engines read the same CSV tables, tag every flight with the same validation rules (the
rule lists are imported from the Spark job), join weather, planes and airports, derive the
label, the hash split and the raw features, compute the training statistics (vocabularies,
medians, means, standard deviations, quantiles) and write the encoded splits as Parquet.
Spark runs as the real job (``python -m kfstack_examples.flights.features_job``, JVM start
included, as a SparkApplication would); DuckDB runs the equivalent SQL in-process. DuckDB is
the baseline, not a second implementation: it writes no quarantine file, lookups or profile
JSON, which makes the comparison conservative for Spark.

The driver maps the class archive that ``make setup`` records (the feature job's
``class_archive``) where there is one, as every local session does; the result says whether
there was (``KFSTACK_CACHE_DIR`` pointed at an empty folder measures without).

Inputs: the shipped tables (x1: 336,776 flights) and the flights table replicated xN with
distinct flight numbers (x10: 3,367,760 flights; x30: 10,103,280). Goals: the Spark job on x1 in
<= 25 s wall, JVM start included; Spark <= 3 x DuckDB on x10. Each Spark run also records its
phases (seconds, Spark jobs, stages, tasks: the job report's ``phases``) and the peak resident
memory of its process tree (the driver JVM included).

    python -m benchmarks.spark_vs_duckdb [--scales 1,10] [--no-duckdb]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

import duckdb

from benchmarks.common import machine_facts, write_result
from kfstack.app.local_run import PeakMemorySampler
from kfstack_examples.flights.feature_spec import JOB_REPORT_FILE
from kfstack_examples.flights.features import CATEGORICAL_FEATURES, NUMERIC_FEATURES, WEATHER_FIELDS
from kfstack_examples.flights.features_job import class_archive, sources
from kfstack_examples.flights.features_job.validation import (
    FLIGHT_COLUMNS,
    HHMM_FIELDS,
    NUMERIC_FIELDS,
    REQUIRED_FIELDS,
    TIMESTAMP_FIELDS,
)

GOAL_RATIO = 3.0
GOAL_X1_SECONDS = 25.0
SHIPPED_FLIGHTS = 336_776


def prepare_inputs(tmp: str, scales: list[int]) -> dict[int, str]:
    """``{scale: dir}`` of plain CSV tables (flights extracted from the zip, replicated)."""
    shipped = sources.default_data_dir()
    x1 = os.path.join(tmp, "x1")
    os.makedirs(x1)
    for table in ("weather", "planes", "airports", "airlines"):
        shutil.copy(os.path.join(shipped, f"{table}.csv"), x1)
    with zipfile.ZipFile(os.path.join(shipped, "flights.csv.zip")) as z:
        z.extract("flights.csv", x1)
    inputs = {1: x1}
    header = duckdb.sql(f"SELECT * FROM read_csv('{x1}/flights.csv', all_varchar=true) LIMIT 0")
    assert header is not None  # a SELECT always yields a relation
    columns = header.columns
    # Replica k gets flight numbers + k * 10000: distinct flights, not duplicates.
    select = ", ".join(
        "CAST(CAST(flight AS INTEGER) + r.range * 10000 AS VARCHAR) AS flight" if c == "flight" else c
        for c in columns
    )
    for scale in scales:
        if scale == 1:
            continue
        inputs[scale] = os.path.join(tmp, f"x{scale}")
        shutil.copytree(x1, inputs[scale])
        duckdb.sql(
            f"COPY (SELECT {select} FROM read_csv('{x1}/flights.csv', all_varchar=true, nullstr='NA') "
            f"CROSS JOIN range({scale}) r) TO '{inputs[scale]}/flights.csv' (HEADER, NULLSTR 'NA')"
        )
    return inputs


def spark_job(input_dir: str, out: str) -> dict:
    """The job as a SparkApplication driver runs it: wall seconds, peak memory of the process
    tree, and the job report's phases."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kfstack_examples.flights.features_job",
            "--input-uri",
            input_dir,
            "--output-uri",
            os.path.join(out, "features"),
            "--quarantine-uri",
            os.path.join(out, "q"),
            "--num-shards",
            "4",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The job's own process tree (its Python and the driver JVM), not this benchmark's.
    with PeakMemorySampler(root_pid=proc.pid) as memory:
        _, stderr = proc.communicate()
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"spark job failed:\n{stderr[-4000:]}")
    with open(os.path.join(out, "features", JOB_REPORT_FILE), encoding="utf-8") as f:
        report = json.load(f)
    return {
        "seconds": round(seconds, 1),
        "peak_rss_gib": round(memory.peak_bytes / 2**30, 2),
        "spark_jobs": sum(phase["spark_jobs"] for phase in report["phases"].values()),
        "phases": report["phases"],
    }


def _num(col: str) -> str:
    return f"TRY_CAST({col} AS DOUBLE)"


def duckdb_job(input_dir: str, out: str) -> float:
    """The same reads, rules, joins, statistics and writes in DuckDB SQL."""
    started = time.perf_counter()
    os.makedirs(out, exist_ok=True)
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")

    def read(t):
        return f"read_csv('{input_dir}/{t}.csv', all_varchar=true, nullstr='NA')"

    rules = [f"WHEN {c} IS NOT NULL AND {_num(c)} IS NULL THEN 'unparseable_{c}'" for c in NUMERIC_FIELDS]
    rules += [
        f"WHEN {c} IS NOT NULL AND TRY_CAST({c} AS TIMESTAMP) IS NULL THEN 'unparseable_{c}'"
        for c in TIMESTAMP_FIELDS
    ]
    rules += [f"WHEN {c} IS NULL THEN 'missing_{c}'" for c in REQUIRED_FIELDS]
    rules.append(
        "WHEN TRY_CAST(printf('%04d-%02d-%02d', CAST(year AS INT), CAST(month AS INT), "
        "CAST(day AS INT)) AS DATE) IS NULL THEN 'invalid_date'"
    )
    rules += [
        f"WHEN {_num(c)} NOT BETWEEN 0 AND 2400 OR {_num(c)} % 100 >= 60 THEN 'invalid_{c}'"
        for c in HHMM_FIELDS
    ]
    rules.append(f"WHEN {_num('distance')} <= 0 THEN 'nonpositive_distance'")
    rules.append(f"WHEN {_num('air_time')} <= 0 THEN 'nonpositive_air_time'")
    rules.append(f"WHEN carrier NOT IN (SELECT carrier FROM {read('airlines')}) THEN 'unknown_carrier'")
    con.execute(
        f"CREATE TEMP TABLE tagged AS SELECT *, CASE {' '.join(rules)} END AS reason FROM {read('flights')}"
    )
    con.execute(f"""
        CREATE TEMP TABLE checked AS SELECT * REPLACE (
            CASE WHEN reason IS NULL AND row_number() OVER (
                PARTITION BY year, month, day, carrier, flight, origin, sched_dep_time, reason IS NULL
                ORDER BY {", ".join(FLIGHT_COLUMNS)}) > 1 THEN 'duplicate' ELSE reason END AS reason)
        FROM tagged""")
    con.execute("SELECT reason, count(*) FROM checked GROUP BY reason").fetchall()
    weather = ", ".join(f"avg({_num(c)}) AS {c}" for c in WEATHER_FIELDS)
    con.execute(f"""
        CREATE TEMP TABLE raw AS
        WITH f AS (SELECT * FROM checked WHERE reason IS NULL),
        w AS (SELECT origin, time_hour, {weather} FROM {read("weather")} GROUP BY ALL),
        p AS (SELECT tailnum, {_num("year")} AS plane_year, manufacturer AS plane_manufacturer,
                     engine AS plane_engine, {_num("seats")} AS plane_seats,
                     {_num("engines")} AS plane_engines FROM {read("planes")}),
        a AS (SELECT faa, {_num("lat")} AS dest_lat, {_num("lon")} AS dest_lon,
                     {_num("alt")} AS dest_alt FROM {read("airports")}),
        j AS (SELECT f.*, w.* EXCLUDE (origin, time_hour), p.* EXCLUDE (tailnum), a.* EXCLUDE (faa),
                     make_date(CAST(f.year AS INT), CAST(f.month AS INT), CAST(f.day AS INT)) AS d,
                     floor({_num("f.sched_dep_time")} / 100) * 60 + {_num("f.sched_dep_time")} % 100 AS dep,
                     floor({_num("f.sched_arr_time")} / 100) * 60 + {_num("f.sched_arr_time")} % 100 AS arr
              FROM f LEFT JOIN w USING (origin, time_hour) LEFT JOIN p USING (tailnum)
                     LEFT JOIN a ON f.dest = a.faa)
        SELECT
            CASE WHEN {_num("arr_delay")} > 15 OR dep_time IS NULL OR arr_delay IS NULL
                THEN 1 ELSE 0 END AS label,
            CASE WHEN hash(year, month, day, carrier, flight, origin, sched_dep_time) % 100 < 80
                     THEN 'train'
                 WHEN hash(year, month, day, carrier, flight, origin, sched_dep_time) % 100 < 90
                     THEN 'validation'
                 ELSE 'test' END AS split,
            carrier, origin, dest, CAST(floor(dep / 60) AS INT)::VARCHAR AS dep_hour,
            isodow(d)::VARCHAR AS day_of_week,
            coalesce(plane_manufacturer, '<missing>') AS plane_manufacturer,
            coalesce(plane_engine, '<missing>') AS plane_engine,
            {_num("month")} AS month, dayofyear(d)::DOUBLE AS day_of_year, dep AS dep_minute_of_day,
            arr AS arr_minute_of_day, (arr - dep + 1440) % 1440 AS scheduled_minutes,
            {_num("distance")} AS distance, {_num("year")} - plane_year AS plane_age,
            plane_seats, plane_engines, dest_lat, dest_lon, dest_alt, {", ".join(WEATHER_FIELDS)}
        FROM j""")
    stats = ", ".join(
        f"median({n}) AS {n}_median, avg({n}) AS {n}_mean, stddev_samp({n}) AS {n}_std, "
        f"quantile_cont({n}, [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99]) AS {n}_q"
        for n in NUMERIC_FEATURES
    )
    con.execute(f"CREATE TEMP TABLE stats AS SELECT {stats} FROM raw WHERE split = 'train'")
    vocab = " UNION ALL ".join(
        f"SELECT '{c}' AS feature, {c} AS value, count(*) AS n FROM raw WHERE split = 'train' GROUP BY ALL"
        for c in CATEGORICAL_FEATURES
    )
    con.execute(f"""CREATE TEMP TABLE vocab AS SELECT feature, value,
        row_number() OVER (PARTITION BY feature ORDER BY n DESC, value) - 1 AS idx FROM ({vocab})""")
    encoded_cat = ", ".join(
        f"coalesce((SELECT idx FROM vocab v WHERE v.feature = '{c}' AND v.value = raw.{c}), "
        f"(SELECT count(*) FROM vocab v WHERE v.feature = '{c}')) AS cat__{c}"
        for c in CATEGORICAL_FEATURES
    )
    encoded_num = ", ".join(
        f"CAST((coalesce({n}, {n}_median) - {n}_mean) / nullif({n}_std, 0) AS FLOAT) AS num__{n}"
        for n in NUMERIC_FEATURES
    )
    for split in ("train", "validation", "test"):
        con.execute(
            f"COPY (SELECT label, {encoded_cat}, {encoded_num} FROM raw, stats WHERE split = '{split}') "
            f"TO '{out}/{split}' (FORMAT parquet, PER_THREAD_OUTPUT)"
        )
    con.close()
    return time.perf_counter() - started


def run(scales: list[int], with_duckdb: bool) -> dict:
    figures = {}
    with tempfile.TemporaryDirectory(prefix="kfstack-spark-bench-") as tmp:
        for scale, input_dir in prepare_inputs(tmp, scales).items():
            if scale not in scales:
                continue
            flights = SHIPPED_FLIGHTS * scale
            spark = spark_job(input_dir, os.path.join(tmp, f"spark-x{scale}"))
            shutil.rmtree(os.path.join(tmp, f"spark-x{scale}"))
            figures[f"x{scale}"] = {
                "flights": flights,
                "spark_seconds": spark["seconds"],
                "spark_rows_per_second": round(flights / spark["seconds"]),
                "spark_peak_rss_gib": spark["peak_rss_gib"],
                "spark_jobs": spark["spark_jobs"],
                "spark_phases": spark["phases"],
            }
            if with_duckdb:
                duck_seconds = duckdb_job(input_dir, os.path.join(tmp, f"duckdb-x{scale}"))
                figures[f"x{scale}"] |= {
                    "duckdb_seconds": round(duck_seconds, 1),
                    "duckdb_rows_per_second": round(flights / duck_seconds),
                    "spark_to_duckdb_time_ratio": round(spark["seconds"] / duck_seconds, 2),
                }
    result = {
        "benchmark": "spark_vs_duckdb",
        "command": "python -m benchmarks.spark_vs_duckdb --scales "
        + ",".join(map(str, scales))
        + ("" if with_duckdb else " --no-duckdb"),
        "machine": machine_facts(),
        "duckdb_version": duckdb.__version__,
        # Whether a class archive for this JVM and Spark was there for the driver to map (make
        # setup records one; a slow test checks that a session maps it).
        "spark_class_archive_found": bool(class_archive.java_options()),
        "figures": figures,
        "goal": f"spark <= {GOAL_X1_SECONDS:g} s on x1; spark time <= {GOAL_RATIO} x duckdb time on x10",
    }
    meets = {}
    if "x1" in figures:
        meets["x1_seconds"] = figures["x1"]["spark_seconds"] <= GOAL_X1_SECONDS
    if "spark_to_duckdb_time_ratio" in figures.get("x10", {}):
        meets["x10_ratio"] = figures["x10"]["spark_to_duckdb_time_ratio"] <= GOAL_RATIO
    result["meets_goal"] = meets
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="1,10", help="comma-separated replication factors (1 = shipped)")
    parser.add_argument("--no-duckdb", action="store_true", help="the Spark job alone (e.g. for x30)")
    args = parser.parse_args(argv)
    scales = sorted({int(s) for s in args.scales.split(",")})
    result = run(scales, with_duckdb=not args.no_duckdb)
    write_result(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
