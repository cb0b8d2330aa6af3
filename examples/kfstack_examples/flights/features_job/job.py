"""The flights feature job: read -> validate/quarantine -> join -> featurise -> shards + spec.

Runs the same way everywhere: in-process on the local platform (``run_feature_job``, Spark
``local[*]``), and as a SparkApplication's main file on a cluster (``main(argv)``; ``python -m
kfstack_examples.flights.features_job``)::

    python -m kfstack_examples.flights.features_job --output-uri out/features \\
        --quarantine-uri out/quarantine [--input-uri DIR] [--num-shards 4] [--seed 42] \\
        [--max-quarantine-fraction 0.05] [--sample-fraction 1.0]

Outputs (layout in :mod:`kfstack_examples.flights.feature_spec`): Parquet shards per split,
``feature_spec.json``, ``plane_lookup.parquet``, ``airport_lookup.parquet``, ``profile.json`` (and,
given a reference profile, ``drift_profile.json``: the same binned on its edges),
``job_report.json`` and ``holdout_requests.parquet`` (up to :data:`HOLDOUT_RECORDS` labelled
test-split flights as a caller sends them, for the canary analysis) and ``test_requests.parquet``
(every test-split flight so, for the evaluation through the predictor) under the output URI; the
quarantined rows (raw values + ``reason``) under the quarantine URI.

Row accounting: ``rows_read`` counts the flights the job looked at (after ``sample_fraction``, in
the data window); each is either written to exactly one split or quarantined, and the job checks
``rows_read == rows_written + rows_quarantined`` against the files it wrote. A windowed run
leaves out, and counts as ``rows_undated``, the rows whose date cannot be read: they belong to no
window (a run without a window quarantines them with the reason).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from kfstack.api import (
    DataQualityError,
    InvalidParameterError,
    KfstackError,
    document_hash,
    fsspec_uri,
    report_progress,
    write_data_lineage,
    write_report,
)
from kfstack.api.spark import QualityReport
from kfstack_examples.flights.feature_spec import (
    AIRPORT_LOOKUP_FILE,
    DRIFT_PROFILE_FILE,
    FEATURE_SPEC_FILE,
    HOLDOUT_FILE,
    JOB_REPORT_FILE,
    LABEL_COLUMN,
    PLANE_LOOKUP_FILE,
    PROFILE_FILE,
    SPLITS,
    TEST_REQUESTS_FILE,
)
from kfstack_examples.flights.features_job import (
    class_archive,
    featurize,
    profile,
    sources,
    synthetic_drift,
    validation,
)
from kfstack_examples.flights.features_job.config import (
    JAVA_OPTIONS,
    SPARK_CONF,
    FeatureJobConfig,
    parse_args,
)
from kfstack_examples.flights.features_job.statistics import train_statistics

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class FeatureJobReport:
    """What the job did, row by row (also written as ``job_report.json``)."""

    rows_read: int
    rows_written: int
    rows_quarantined: int
    quarantined_by_reason: dict[str, int]
    rows_per_split: dict[str, int]
    input_uri: str
    output_uri: str
    quarantine_uri: str
    window: dict[str, str] = dataclasses.field(default_factory=dict)
    content_hash: str = ""
    # A windowed run: rows whose date cannot be read, left out (they belong to no window; a run
    # without a window quarantines them) -- counted here, so that none goes unseen.
    rows_undated: int = 0
    job: dict[str, Any] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    # Per phase (PHASES): seconds, and the Spark jobs, stages and tasks it ran.
    phases: dict[str, dict[str, float | int]] = dataclasses.field(default_factory=dict)

    @property
    def quality_report(self) -> QualityReport:
        """The rows read and quarantined per reason, as the quality module every team's job may
        use counts them: its share of rejected rows and its check are the job's."""
        return QualityReport(self.rows_read, self.quarantined_by_reason)

    @property
    def quarantined_fraction(self) -> float:
        return self.quality_report.quarantined_fraction

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "quarantined_fraction": self.quarantined_fraction}


def content_hash(rows_read: int, counted: Mapping[str, Any]) -> str:
    """The window's content hash: SHA-256 of the row count and the row-hash sums
    (:func:`validation.counts`) -- the same rows in any order or partitioning give the same hash."""
    sums = [validation.hash_sum(counted, seed) for seed in validation.ROW_HASHES]
    return hashlib.sha256(f"{rows_read}:{sums[0]}:{sums[1]}".encode()).hexdigest()


def local_spark_session(shuffle_partitions: int = 4, java_options: str | None = None) -> SparkSession:
    """A ``local[*]`` session sized for one machine (a SparkApplication brings its own), with the
    job's settings (:data:`~.config.SPARK_CONF`).

    Args:
        shuffle_partitions: ``spark.sql.shuffle.partitions``.
        java_options: More options of the driver JVM; by default the one that maps the class
            archive, if one was recorded (:mod:`.class_archive`).
    """
    if java_options is None:
        java_options = class_archive.java_options()
    # Python workers run on this interpreter, not PATH's python3: PySpark refuses a worker of
    # another minor version (a venv of Python 3.13 on a machine whose python3 is 3.11). An
    # in-process session's SparkContext reads the worker's interpreter from PYSPARK_PYTHON only.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[*]").appName("kfstack-flights-features")
    for key, value in {**SPARK_CONF, **LOCAL_SQL_CONF}.items():
        builder = builder.config(key, value)
    spark = (
        builder.config("spark.driver.memory", "2g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        # Scratch files (spark-*, blockmgr-*) go where Python's do ($TMPDIR): a watched run
        # points that into its own temp folder and removes it whatever the outcome.
        .config("spark.local.dir", tempfile.gettempdir())
        # The driver is the only JVM, and its threads compete with the tasks for the few cores
        # of one machine: the throughput collector rather than G1's concurrent threads (4% of
        # the job's wall time on 2 cores, at x1 and x10), and the JIT waits for twice the calls
        # before it compiles a method, so its compiler threads spend their time on the hottest
        # code (2 cores, alternating runs: x1 18.2 -> 17.4 s, x10 41.2 -> 39.7 s, x30 96.8 ->
        # 92.2 s; compiling sooner, at 0.3, cost 3 s on x10).
        .config(
            "spark.driver.extraJavaOptions",
            f"-Djava.io.tmpdir={tempfile.gettempdir()} {JAVA_OPTIONS} -XX:+UseParallelGC "
            f"-XX:CompileThresholdScaling=2 {java_options}",
        )
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def sample(flights: DataFrame, fraction: float, seed: int) -> DataFrame:
    """Keeps ``fraction`` of the flights, chosen by a seeded hash of the raw flight key."""
    if fraction >= 1.0:
        return flights
    key = [F.col(k) for k in validation.FLIGHT_KEY if k in flights.columns]
    bucket = F.pmod(F.xxhash64(*key, F.lit(seed), F.lit("sample")), F.lit(1_000_000))
    return flights.where(bucket < int(fraction * 1_000_000))


def _read_json(uri: str) -> dict:
    """A JSON document the job is given.

    Raises:
        InvalidParameterError: It cannot be read or is not JSON (nothing was written yet).
    """
    try:
        with fsspec.open(fsspec_uri(uri), "r") as f:
            return json.load(f)
    except (OSError, ValueError) as err:
        raise InvalidParameterError(f"cannot read {uri}: {err}") from err


def _write_json(uri: str, data: dict) -> None:
    with fsspec.open(uri, "w") as f:
        json.dump(data, f, indent=2, default=float)


def _write_small_table(df: DataFrame, uri: str, sort_by: str | None = None) -> None:
    """Lookup tables are small: one plain Parquet file, written through fsspec (sorted by
    ``sort_by`` in Arrow: a Spark sort would cost two jobs for a few thousand rows)."""
    table = df.toArrow()
    _write_arrow(table.sort_by(sort_by) if sort_by else table, uri)


def _write_arrow(table: pa.Table, uri: str) -> None:
    with fsspec.open(uri, "wb") as f:
        pq.write_table(table, f)


def _parquet_rows(dir_uri: str) -> tuple[int, int]:
    """(files, rows) of the Parquet files directly under ``dir_uri``, from their footers."""
    fs, path = fsspec.core.url_to_fs(dir_uri)
    files = sorted(p for p in fs.ls(path, detail=False) if p.endswith(".parquet"))
    rows = 0
    for p in files:
        with fs.open(p, "rb") as f:
            rows += pq.ParquetFile(f).metadata.num_rows
    return len(files), rows


def _rows_per_reason(quarantine_uri: str) -> dict[str, int]:
    """The quarantined rows per reason, from the quarantine files written (their reason column
    alone): rejected rows are few, and counting them in Spark would cost a pass over all rows."""
    fs, path = fsspec.core.url_to_fs(quarantine_uri)
    files = [p for p in fs.ls(path, detail=False) if p.endswith(".parquet")]
    if not files:
        return {}
    reasons = pq.read_table(files, columns=[validation.REASON], filesystem=fs)[validation.REASON]
    return {str(r["values"]): int(r["counts"]) for r in reasons.value_counts().to_pylist()}


def _drifted_and_split(tagged: DataFrame, config: FeatureJobConfig) -> DataFrame:
    """Tagged rows as the features take them: changed by the run's synthetic drift (none on
    real data; the quarantine keeps the raw values), then given their split -- a changed
    flight's by its changed key."""
    drifted = synthetic_drift.inject_drift(tagged, config.synthetic_drift, config.seed)
    return featurize.with_split(drifted, config.seed)


def _without_duplicates(
    tagged: DataFrame,
    flights: DataFrame,
    airlines: list[str],
    config: FeatureJobConfig,
    cached: list[DataFrame],
) -> DataFrame:
    """The valid rows of ``tagged`` (:func:`validation.tag_flights_by_rules`, the rows in the
    run's window, :func:`_drifted_and_split`) with each flight once, and its split; the
    duplicates are added to the quarantine.

    Which flights have more than one valid row is an aggregation of one column (one Spark job);
    only those flights are read again from ``flights`` and tagged with the duplicate rule: a
    shuffle of their rows alone, not of the whole table (a third of the validation pass)."""
    groups = validation.duplicate_groups(tagged).persist()
    cached.append(groups)
    if groups.count() == 0:
        return validation.valid_rows(tagged, [featurize.SPLIT])
    # A flight's rows share its date, so a group is in the window or not; a group that only
    # shares a key hash with one in it may be outside.
    in_window = validation.window_membership(config.window.start, config.window.end) == validation.IN_WINDOW
    regrouped = _drifted_and_split(
        validation.tag_groups(flights, airlines, groups).where(in_window), config
    ).persist()
    cached.append(regrouped)
    duplicates = regrouped.where(F.col(validation.REASON) == validation.DUPLICATE)
    validation.quarantine_rows(duplicates).repartition(1).write.mode("append").parquet(
        sources.spark_path(config.quarantine_uri)
    )
    singles = tagged.join(groups, validation.KEY_HASH, "left_anti")
    return validation.valid_rows(singles, [featurize.SPLIT]).unionByName(
        validation.valid_rows(regrouped, [featurize.SPLIT])
    )


def write_shards(encoded: DataFrame, output_uri: str, num_shards: int) -> dict[str, tuple[int, int]]:
    """Writes exactly ``num_shards`` Parquet files per split; returns per split its rows (read
    from the files' footers) and positive labels (observed while writing).

    Raises:
        DataQualityError: A split has too few rows for ``num_shards`` files.
    """
    counts = {}
    for split in SPLITS:
        split_uri = sources.join_uri(output_uri, split)
        labels = Observation(f"labels of {split}")
        (
            encoded.where(F.col(featurize.SPLIT) == split)
            .drop(featurize.SPLIT)
            .observe(labels, F.sum(LABEL_COLUMN).alias("positives"))
            # Round-robin within the split: shards differ by at most one row per input
            # partition, so the ranks reading them get equal work.
            .repartition(num_shards)
            .write.mode("overwrite")
            .parquet(sources.spark_path(split_uri))
        )
        files, rows = _parquet_rows(split_uri)
        if files != num_shards:
            raise DataQualityError(
                f"split {split!r} has {rows} rows, too few for num_shards={num_shards} "
                f"(wrote {files} shard files); lower num_shards or raise sample_fraction"
            )
        counts[split] = (rows, labels.get["positives"] or 0)
    return counts


# SQL settings of the job on one machine (its own local session, or spark-submit --master local),
# which a SparkApplication leaves at Spark's defaults.
LOCAL_SQL_CONF = {
    # Adaptive execution splits every query into a job per stage and builds each cached table in
    # a stage of its own: on one small machine that is scheduling cost, with no skew or
    # partition counts worth adapting to.
    "spark.sql.adaptive.enabled": "false",
    # The profile and statistics aggregate every feature at once, hundreds of columns: let
    # whole-stage code generation compile them rather than fall back to interpreting.
    "spark.sql.codegen.maxFields": "1000",
    # The validated rows are cached as they are, not compressed column by column: on 2 cores the
    # compression cost more than it saved (x10: 45.1-45.6 s against 49.6-50.1; x30 as fast, with
    # the same peak). A SparkApplication keeps it, for its memory.
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}
# The job's phases in the order they run: the live progress of a watched run counts them.
PHASES = (
    "spark session",
    "read and validate",  # the counts are gathered while the quarantine is written
    "join and fit encoding",
    "encode and write shards",
    "lookups and holdout",
    "profile",
)
# Labelled test-split records the job writes for the canary analysis (a replay needs hundreds to a
# few thousand; the file stays small).
HOLDOUT_RECORDS = 5000


class PhaseLog:
    """Where the job's time goes, phase by phase: seconds, and the Spark jobs, stages and tasks it
    ran (each phase is a Spark job group, read back from the status tracker). Every phase is also
    reported as the job's live progress. The counts are what make the job's fixed cost visible:
    at this data size each Spark job costs scheduling and code generation, whatever its rows."""

    def __init__(self) -> None:
        self.spark: SparkSession | None = None
        self.phases: dict[str, dict[str, float | int]] = {}
        # Job groups of this run alone: a session may run the job more than once.
        self._run = uuid.uuid4().hex[:8]

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        report_progress(f"spark: {name}", PHASES.index(name), len(PHASES))
        if self.spark is not None:
            self.spark.sparkContext.setJobGroup(f"{self._run}:{name}", f"kfstack feature job: {name}")
        started = time.perf_counter()
        yield
        seconds = time.perf_counter() - started
        if self.spark is not None:  # work after the phase belongs to no phase
            self.spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        self.phases[name] = {"seconds": round(seconds, 2), **self._spark_work(f"{self._run}:{name}")}
        logger.info("phase %s: %.1fs %s", name, seconds, self.phases[name])

    def _spark_work(self, group: str) -> dict[str, int]:
        if self.spark is None:
            return {"spark_jobs": 0, "stages": 0, "tasks": 0}
        tracker = self.spark.sparkContext.statusTracker()
        jobs = [job for job_id in tracker.getJobIdsForGroup(group) if (job := tracker.getJobInfo(job_id))]
        stages = [
            stage
            for stage_id in {s for job in jobs for s in job.stageIds}
            if (stage := tracker.getStageInfo(stage_id)) and stage.numCompletedTasks > 0
        ]
        return {
            "spark_jobs": len(jobs),
            "stages": len(stages),  # those that ran: a stage whose shuffle output is reused is skipped
            "tasks": sum(stage.numCompletedTasks for stage in stages),
        }


def run_feature_job(config: FeatureJobConfig, spark: SparkSession | None = None) -> FeatureJobReport:
    """Runs the whole job; see the module docstring.

    Args:
        config: The run's parameters (validated before Spark starts).
        spark: A session to use; by default a ``local[*]`` one is created and stopped after.

    Raises:
        InvalidParameterError: Bad parameters or missing tables (nothing written).
        DataQualityError: Too many rows quarantined (the quarantine and report are written).
    """
    input_uri = config.input_uri or sources.default_data_dir()
    sources.locate_tables(input_uri)  # fail on missing tables before starting the JVM
    # A drift check's reference profile, read (and checked) before any work too.
    edges = (
        profile.reference_edges(_read_json(config.reference_profile_uri))
        if config.reference_profile_uri
        else None
    )
    started = time.perf_counter()
    owns_session = spark is None
    log = PhaseLog()
    with log.phase("spark session"):
        spark = spark or local_spark_session(config.shuffle_partitions)
    log.spark = spark
    staging_uri = sources.join_uri(config.output_uri, "_staging")
    cached: list[DataFrame] = []
    try:
        with log.phase("read and validate"):
            tables = sources.read_tables(spark, input_uri, staging_uri)
            airlines = [
                r["carrier"] for r in tables["airlines"].select(F.trim("carrier").alias("carrier")).collect()
            ]
            flights = sample(tables["flights"], config.sample_fraction, config.seed)
            window = config.window
            # One pass reads, tags and keeps the rows, and writes the quarantine; the valid and
            # undated rows and the window's content hash are observed in it, so the rows kept
            # are the window's alone, without their row hashes, and with their split. The
            # duplicate rule alone needs the other rows of a flight: it follows, on the few
            # flights concerned.
            observation = Observation("validation counts")
            tagged = (
                validation.tag_flights_by_rules(flights, airlines)
                .withColumn(validation.WINDOW, validation.window_membership(window.start, window.end))
                .observe(observation, *validation.counts())
                .where(F.col(validation.WINDOW) == validation.IN_WINDOW)
                .drop(validation.WINDOW, *validation.ROW_HASHES.values())
            )
            kept = _drifted_and_split(tagged, config).persist(StorageLevel.MEMORY_AND_DISK_DESER)
            cached.append(kept)
            # The rejected rows alone are moved into one file: the pass itself stays parallel.
            validation.quarantine_rows(kept).repartition(1).write.mode("overwrite").parquet(
                sources.spark_path(config.quarantine_uri)
            )
            counted = observation.get
            valid = _without_duplicates(kept, flights, airlines, config, cached)
        by_reason = _rows_per_reason(config.quarantine_uri)
        # The pass counted the duplicates among the valid rows; they are quarantined since.
        duplicates = by_reason.get(validation.DUPLICATE, 0)
        rows_read = counted[validation.VALID] - duplicates + sum(by_reason.values())
        report = FeatureJobReport(
            rows_read=rows_read,
            rows_written=0,
            rows_quarantined=sum(by_reason.values()),
            quarantined_by_reason=dict(sorted(by_reason.items())),
            rows_per_split={},
            input_uri=input_uri,
            output_uri=config.output_uri,
            quarantine_uri=config.quarantine_uri,
            window=dict(zip(("start", "end"), window.as_strings(), strict=True)),
            content_hash=content_hash(rows_read, counted),
            rows_undated=counted[validation.UNDATED],
            job=config.lineage(),
        )
        if rows_read == 0:
            raise DataQualityError(
                f"no flights to read in {input_uri} for {window.describe()} "
                f"(sample_fraction={config.sample_fraction})"
            )
        try:
            report.quality_report.check(config.max_quarantine_fraction, where=config.quarantine_uri)
        except DataQualityError:
            # A failed run's report too: what it read, and where its time went up to the check.
            report.seconds = round(time.perf_counter() - started, 2)
            report.phases = log.phases
            _write_json(sources.join_uri(config.output_uri, JOB_REPORT_FILE), report.to_dict())
            raise

        # The lookup tables are small: each is aggregated once, kept, and broadcast to the joins.
        planes = featurize.plane_lookup(tables["planes"]).persist()
        airports = featurize.airport_lookup(tables["airports"]).persist()
        weather = featurize.weather_by_hour(tables["weather"]).persist()
        cached += [planes, airports, weather]
        # Not cached: the statistics join the training split's flights once, the shards each
        # split's once (the split filter reaches below the joins). A cache of the joined
        # features costs more to build than the second join (x10, statistics and shards: 22.2 s
        # cached, 20.0 s not), though each query then broadcasts the lookups again (a small
        # Spark job per table).
        raw = featurize.raw_features(valid, weather, planes, airports)

        with log.phase("join and fit encoding"):
            statistics = train_statistics(raw.where(F.col(featurize.SPLIT) == "train"))
            spec = featurize.fit_encoding(statistics)
        with log.phase("encode and write shards"):
            label_counts = write_shards(featurize.encode(spec, raw), config.output_uri, config.num_shards)
            report.rows_per_split = {split: rows for split, (rows, _) in label_counts.items()}
            report.rows_written = sum(report.rows_per_split.values())
            if report.rows_read != report.rows_written + report.rows_quarantined:
                raise DataQualityError(
                    f"row accounting broke: read {report.rows_read} != written {report.rows_written} "
                    f"+ quarantined {report.rows_quarantined}"
                )
            spec = dataclasses.replace(
                spec,
                extras={
                    "label": "arrived > 15 min late, or cancelled, or diverted",
                    "split": {
                        "rule": "xxhash64(flight key, seed) mod 100",
                        "seed": config.seed,
                        "percentages": featurize.SPLIT_PERCENTAGES,
                    },
                    "rows_per_split": report.rows_per_split,
                    "num_shards": config.num_shards,
                },
            )
            spec.save(sources.join_uri(config.output_uri, FEATURE_SPEC_FILE))
        with log.phase("lookups and holdout"):
            _write_small_table(planes, sources.join_uri(config.output_uri, PLANE_LOOKUP_FILE), "tailnum")
            _write_small_table(airports, sources.join_uri(config.output_uri, AIRPORT_LOOKUP_FILE), "faa")
            # One collection for both files: every test request, in the holdout's seeded order.
            requests = featurize.test_requests(valid, weather, config.seed).toArrow()
            ordered = requests.sort_by(featurize.HOLDOUT_ORDER).drop_columns([featurize.HOLDOUT_ORDER])
            _write_arrow(ordered, sources.join_uri(config.output_uri, TEST_REQUESTS_FILE))
            _write_arrow(ordered.slice(0, HOLDOUT_RECORDS), sources.join_uri(config.output_uri, HOLDOUT_FILE))
        with log.phase("profile"):
            own, on_reference = profile.build_profiles(statistics, label_counts, edges)
            _write_json(sources.join_uri(config.output_uri, PROFILE_FILE), own)
            if on_reference is not None:
                _write_json(sources.join_uri(config.output_uri, DRIFT_PROFILE_FILE), on_reference)
        report.seconds = round(time.perf_counter() - started, 2)
        report.phases = log.phases
        _write_json(sources.join_uri(config.output_uri, JOB_REPORT_FILE), report.to_dict())
        # What the training step records of this data in every model's lineage (kfstack.contracts).
        write_data_lineage(
            config.output_uri,
            data={
                "window": report.window,
                "content_hash": report.content_hash,
                "rows_read": report.rows_read,
                "feature_spec_hash": document_hash(spec.to_dict()),
            },
            parameters=report.job,
        )
        logger.info(
            "feature job: read %d, written %d %s, quarantined %d %s in %.1fs",
            report.rows_read,
            report.rows_written,
            report.rows_per_split,
            report.rows_quarantined,
            report.quarantined_by_reason,
            report.seconds,
        )
        return report
    finally:
        for df in cached:
            df.unpersist()
        fs, staging = fsspec.core.url_to_fs(staging_uri)
        if fs.exists(staging):
            fs.rm(staging, recursive=True)
        if owns_session:
            spark.stop()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the Spark application: exit 0 on success, else exit 1 with the reason."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = parse_args(argv)
    # Under spark-submit (a SparkApplication) the session is configured by the submitter, which
    # starts this process with PYSPARK_GATEWAY_PORT set; otherwise run local[*].
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    spark = SparkSession.builder.getOrCreate() if submitted else None
    if spark is not None and (spark.sparkContext.master or "").startswith("local"):
        # spark-submit on one machine (the embedded platform): the SQL settings the job's own
        # local session is tuned with, which a session may still change.
        for key, value in LOCAL_SQL_CONF.items():
            spark.conf.set(key, value)
    try:
        report = run_feature_job(config, spark=spark)
    except KfstackError as err:
        # The reason, as the exit's message (a Spark step's error names it).
        raise SystemExit(f"{type(err).__name__}: {err}") from None
    print(json.dumps(report.to_dict(), indent=2))
    # The step's Metrics, where a kfstack step reads them (nothing when run on its own).
    write_report(report_metrics(report.to_dict()))
    return 0


def report_metrics(report: Mapping[str, Any]) -> dict[str, float]:
    """The job's report flattened into the numbers a step's Metrics show: rows read, written,
    quarantined (in all, per reason) and per split."""
    metrics: dict[str, float] = {
        "rows_read": report["rows_read"],
        "rows_written": report["rows_written"],
        "rows_quarantined": report["rows_quarantined"],
        "quarantined_fraction": (
            report["rows_quarantined"] / report["rows_read"] if report["rows_read"] else 0.0
        ),
    }
    for reason, count in sorted(report["quarantined_by_reason"].items()):
        metrics[f"quarantined.{reason}"] = count
    for split, count in report["rows_per_split"].items():
        metrics[f"rows.{split}"] = count
    return metrics


if __name__ == "__main__":
    sys.exit(main())
