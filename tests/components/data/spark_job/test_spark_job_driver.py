"""The driver wrapper: the team's application as ``__main__`` with spark-submit's argv, its
report checked and copied once it returned. In-process (no JVM: the wrapper itself needs none),
plus one run as a file, the way spark-submit starts it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from kfstack.contracts import REPORT_PATH_ENV, ContractError, SparkApplicationCode
from kfstack.spark import driver

# An application that records what it saw as __main__ and reports two numbers.
RECORDING_APP = """
import json, os, sys
seen = {{"name": __name__, "argv": sys.argv, "path0": sys.path[0]}}
with open({seen!r}, "w") as f:
    json.dump(seen, f)
with open(os.environ["KFSTACK_REPORT_PATH"], "w") as f:
    json.dump({{"rows_read": 10, "rows_written": 8}}, f)
{tail}
"""


def write_app(tmp_path, tail: str = "", name: str = "job.py"):
    seen = tmp_path / "seen.json"
    app = tmp_path / name
    app.write_text(RECORDING_APP.format(seen=str(seen), tail=textwrap.dedent(tail)))
    return app, seen


def test_a_file_runs_as_main_with_spark_submits_argv_and_its_report_is_copied(tmp_path):
    app, seen = write_app(tmp_path)
    upload = tmp_path / "artifacts" / "report"  # a folder that does not exist yet
    argv, path = list(sys.argv), list(sys.path)

    report = driver.run(SparkApplicationCode(str(app), ("--day", "2026-11-01")), str(upload))

    assert report == {"rows_read": 10.0, "rows_written": 8.0}
    assert json.loads(upload.read_text()) == {"rows_read": 10, "rows_written": 8}
    recorded = json.loads(seen.read_text())
    assert recorded == {"name": "__main__", "argv": [str(app), "--day", "2026-11-01"], "path0": str(tmp_path)}
    # Run in-process, the wrapper leaves this process as it found it.
    assert (sys.argv, sys.path) == (argv, path)
    assert REPORT_PATH_ENV not in os.environ


def test_a_local_scheme_file_is_the_path_on_the_drivers_machine(tmp_path):
    app, seen = write_app(tmp_path)
    driver.run(SparkApplicationCode(f"local://{app}"))
    assert json.loads(seen.read_text())["argv"] == [str(app)]


def test_a_module_runs_as_python_m_runs_it_from_the_working_directory(tmp_path, monkeypatch):
    package = tmp_path / "team_jobs"
    package.mkdir()
    (package / "__init__.py").write_text("")
    write_app(package, name="clean.py")
    monkeypatch.chdir(tmp_path)

    report = driver.run(SparkApplicationCode("team_jobs.clean", ("--fast",)), str(tmp_path / "report.json"))

    recorded = json.loads((package / "seen.json").read_text())
    assert recorded["name"] == "__main__"
    # As ``python -m``: argv[0] is the module's file, the working directory is first on the path.
    assert recorded["argv"] == [str(package / "clean.py"), "--fast"]
    assert recorded["path0"] == str(tmp_path)
    assert report == {"rows_read": 10.0, "rows_written": 8.0}
    sys.modules.pop("team_jobs", None)


def test_exit_status_zero_is_success_and_the_report_still_goes(tmp_path):
    app, _ = write_app(tmp_path, tail="sys.exit(0)")
    upload = tmp_path / "report.json"
    assert driver.run(SparkApplicationCode(str(app)), str(upload)) == {"rows_read": 10.0, "rows_written": 8.0}
    assert upload.is_file()


def test_a_non_zero_exit_propagates_and_nothing_is_copied(tmp_path):
    app, _ = write_app(tmp_path, tail="sys.exit(3)")
    upload = tmp_path / "report.json"
    with pytest.raises(SystemExit) as raised:
        driver.run(SparkApplicationCode(str(app)), str(upload))
    assert raised.value.code == 3
    assert not upload.exists()


def test_an_exception_of_the_application_propagates_unchanged(tmp_path):
    app, _ = write_app(tmp_path, tail="raise KeyError('amount')")
    with pytest.raises(KeyError, match="amount"):
        driver.run(SparkApplicationCode(str(app)), str(tmp_path / "report.json"))


def test_a_report_that_is_not_numbers_fails_in_the_driver_and_is_not_copied(tmp_path):
    app = tmp_path / "job.py"
    app.write_text(
        "import json, os\n"
        "with open(os.environ['KFSTACK_REPORT_PATH'], 'w') as f:\n"
        "    json.dump({'rows_read': 'many', 'ok': 1}, f)\n"
    )
    upload = tmp_path / "report.json"
    with pytest.raises(ContractError, match=r"rows_read") as raised:
        driver.run(SparkApplicationCode(str(app)), str(upload))
    assert "spark application" in str(raised.value) and "finite numbers" in str(raised.value)
    assert not upload.exists()


def test_no_report_is_no_metrics_and_no_file(tmp_path):
    app = tmp_path / "job.py"
    app.write_text("print('nothing to report')\n")
    upload = tmp_path / "report.json"
    assert driver.run(SparkApplicationCode(str(app)), str(upload)) == {}
    assert not upload.exists()


def test_main_without_an_application_is_a_usage_error(capsys):
    assert driver.main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_run_as_a_file_the_wrapper_keeps_its_own_folder_off_the_path(tmp_path):
    app, seen = write_app(tmp_path)
    upload = tmp_path / "out" / "report.json"
    # A module beside the wrapper must not shadow one of the application's.
    (tmp_path / "local.py").write_text("WHERE = 'the application folder'\n")
    app.write_text(app.read_text() + "import local\nassert local.WHERE == 'the application folder'\n")
    done = subprocess.run(
        [sys.executable, driver.__file__, str(app), "--x", "1"],
        env={**os.environ, driver.REPORT_UPLOAD_URI_ENV: str(upload)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(seen.read_text())["argv"] == [str(app), "--x", "1"]
    assert json.loads(upload.read_text()) == {"rows_read": 10, "rows_written": 8}
    assert "copied to" in done.stderr


def test_run_as_a_file_a_failing_application_sets_the_exit_status(tmp_path):
    app, _ = write_app(tmp_path, tail="sys.exit(7)")
    done = subprocess.run([sys.executable, driver.__file__, str(app)], capture_output=True, timeout=60)
    assert done.returncode == 7
    assert driver.FAILURE_LINE.encode() not in done.stderr  # a bare status gives no reason


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        ("raise KeyError('amount')", "KeyError: 'amount'"),
        ("sys.exit('no table named flights')", "no table named flights"),
    ],
)
def test_the_wrappers_last_line_is_the_applications_reason(tmp_path, tail, reason):
    """An exception (its traceback first) or an exit with a message: exit status 1 and a last
    line the step's error quotes."""
    app, _ = write_app(tmp_path, tail=tail)
    done = subprocess.run(
        [sys.executable, driver.__file__, str(app)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == f"{driver.FAILURE_LINE}{reason}"
    if "raise" in tail:
        assert "Traceback (most recent call last)" in done.stderr


def test_locations_in_the_arguments_are_the_drivers_values(tmp_path, monkeypatch):
    """Replaced in the driver, after any shell: a space in a location is kept whole, and an
    input not given (the variable unset) is empty."""
    app, seen = write_app(tmp_path)
    monkeypatch.setenv("KFSTACK_OUTPUT_URI", str(tmp_path / "the output"))
    monkeypatch.delenv("KFSTACK_INPUT_URI", raising=False)
    driver.run(
        SparkApplicationCode(
            str(app), ("--out=$KFSTACK_OUTPUT_URI/part", "--in=$KFSTACK_INPUT_URI", "--cost=$5")
        )
    )
    argv = json.loads(seen.read_text())["argv"]
    assert argv[1:] == [f"--out={tmp_path / 'the output'}/part", "--in=", "--cost=$5"]


def test_a_location_the_spark_step_has_not_is_refused_before_spark_starts(tmp_path):
    from kfstack.components.data.spark_job.stage import settings_from_arguments
    from kfstack.errors import InvalidParameterError

    arguments = {
        "spark_application": "team.jobs.clean",
        "spark_arguments": ["--model=$KFSTACK_MODEL_DIR", "--out=$KFSTACK_OUTPUT_DIR"],
        "output": str(tmp_path / "out"),
        "report": str(tmp_path / "report"),
    }
    with pytest.raises(InvalidParameterError) as refused:
        settings_from_arguments(arguments)
    message = str(refused.value)
    assert "$KFSTACK_MODEL_DIR, which a Spark application is not given" in message
    assert "$KFSTACK_OUTPUT_DIR is not a location" in message
