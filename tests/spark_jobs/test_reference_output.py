"""The feature job's output held to a reference written before its Spark work was reshaped.

The fingerprints under ``reference/`` were written by the job as it was before (one Spark pass
per check and statistic). Two runs cover its paths: every row of a small real input with
malformed rows (quarantine reasons, duplicate, splits, profile), and a windowed run of the same
input with synthetic drift, binned on the first run's profile edges (window, undated rows,
drift profile). Counts, vocabularies, splits, quarantine, every categorical index, quantiles and
histograms must be equal; partition-dependent float statistics within
:data:`reference_output.RELATIVE_TOLERANCE`.

Two intended changes since, each compared with the fingerprints before it:

- a missing value no longer counts in its feature's last histogram bin (it is in the missing
  share alone, as the drift check reads it): only those bins' counts changed;
- the quantiles are exact (every distinct value counted) where they were Spark's approximate
  ones (rank error 0.1% of the values): only quantiles moved, each within that rank error
  (e.g. dep_minute_of_day's 0.99 from 1320 to 1349, a sparse tail), and where a median (the
  imputed value) moved, the encoding's mean and the scaled sums of that feature with it (the
  windowed run's dest_alt: 341 -> 421 m, the next airport over). The fingerprints were then
  written again by the job.

Regenerate only for an intended change of the output (and say why in the commit)::

    python -m tests.spark_jobs.test_reference_output
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import pytest

from kfstack_examples.flights.feature_spec import PROFILE_FILE
from kfstack_examples.flights.features_job.job import FeatureJobConfig, run_feature_job
from tests.spark_jobs import reference_output
from tests.spark_jobs.conftest import write_input_dir

# The reference comparison runs the whole Spark job twice: minutes on two cores.
pytestmark = pytest.mark.slow

REFERENCE_DIR = os.path.join(os.path.dirname(__file__), "reference")
SAMPLE_ROWS = 4000
RUNS = ("whole", "windowed")


def reference_input(real_flights):
    """The first flights of the shipped table, with a malformed row of several kinds."""
    import pandas as pd

    flights = real_flights.head(SAMPLE_ROWS).copy()
    bad = flights.head(6).copy()
    bad.loc[bad.index[0], "distance"] = "14OO"  # unparseable_distance
    bad.loc[bad.index[1], "carrier"] = "ZZ"  # unknown_carrier
    bad.loc[bad.index[2], "day"] = "31"  # January 31st: a valid date, outside the window
    bad.loc[bad.index[3], "month"] = "13"  # invalid_date; undated in the windowed run
    bad.loc[bad.index[4], "sched_dep_time"] = "1261"  # invalid_sched_dep_time
    # bad.index[5] is unchanged: a duplicate
    return pd.concat([flights, bad], ignore_index=True)


def run_reference_jobs(spark, root: str, shipped_data_dir: str, real_flights) -> dict[str, tuple[str, str]]:
    """Runs both reference runs under ``root``; ``{run: (output_dir, quarantine_dir)}``."""
    input_dir = write_input_dir(
        os.path.join(root, "input"), shipped_data_dir, reference_input(real_flights), "csv.zip"
    )
    outputs = {
        run: (os.path.join(root, run, "features"), os.path.join(root, run, "quarantine")) for run in RUNS
    }
    settings = {
        "whole": {"num_shards": 3},
        "windowed": {
            "num_shards": 2,
            "window_start": "2013-01-01",
            "window_end": "2013-01-30",
            "synthetic_drift": 0.3,
            "reference_profile_uri": os.path.join(outputs["whole"][0], PROFILE_FILE),
            "seed": 7,
        },
    }
    for run in RUNS:  # in order: the windowed run bins on the whole run's profile
        output_uri, quarantine_uri = outputs[run]
        config = FeatureJobConfig(
            input_uri=input_dir, output_uri=output_uri, quarantine_uri=quarantine_uri, **settings[run]
        )
        run_feature_job(config, spark=spark)
    return outputs


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, spark, shipped_data_dir, real_flights):
    return run_reference_jobs(
        spark, str(tmp_path_factory.mktemp("reference")), shipped_data_dir, real_flights
    )


@pytest.mark.parametrize("run", RUNS)
def test_the_output_equals_the_reference(outputs, run):
    with open(os.path.join(REFERENCE_DIR, f"{run}.json")) as f:
        expected = json.load(f)
    actual = reference_output.fingerprint(*outputs[run])
    assert reference_output.compare(expected, actual) == []


def test_the_comparison_sees_a_changed_count_vocabulary_or_statistic(outputs):
    found = reference_output.fingerprint(*outputs["whole"])
    changed = json.loads(json.dumps(found))
    changed["report"]["quarantined_by_reason"]["unknown_carrier"] += 1
    vocabulary = changed["spec"]["categorical"][0]["vocabulary"]
    vocabulary[0], vocabulary[1] = vocabulary[1], vocabulary[0]
    changed["profile"]["numeric"]["distance"]["mean"] *= 1.01
    differences = reference_output.compare(found, changed)
    assert len(differences) == 4, differences
    # ... and lets a partition-dependent float move within the tolerance.
    changed = json.loads(json.dumps(found))
    changed["profile"]["numeric"]["distance"]["mean"] *= 1 + reference_output.RELATIVE_TOLERANCE / 10
    assert reference_output.compare(found, changed) == []


if __name__ == "__main__":  # writes the reference fingerprints (see the module docstring)
    from kfstack_examples.flights.features_job import sources
    from kfstack_examples.flights.features_job.job import local_spark_session
    from tests.conftest import load_real_flights

    session = local_spark_session(shuffle_partitions=2)
    with tempfile.TemporaryDirectory() as tmp:
        written = run_reference_jobs(
            session, tmp, sources.default_data_dir(), load_real_flights(sources.default_data_dir())
        )
        os.makedirs(REFERENCE_DIR, exist_ok=True)
        for name, dirs in written.items():
            with open(os.path.join(REFERENCE_DIR, f"{name}.json"), "w") as f:
                json.dump(reference_output.fingerprint(*dirs), f, indent=1, sort_keys=True)
                f.write("\n")
    session.stop()
    sys.exit(0)
