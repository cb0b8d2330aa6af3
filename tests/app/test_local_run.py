"""The embedded run's machinery, piece by piece, with real processes and files.

The whole run (console lines, logs, summary, temp folder, a real Ctrl-C) is exercised in
tests/pipelines/test_flights_training_local.py; these are the fast checks of each part.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
import types

import psutil
import pytest

from kfstack import progress
from kfstack.app import cli, local_run, run_directory
from kfstack.app.console import DONE, RunConsole
from kfstack.app.summary import RunSummary, collect_outputs, data_counts, unreported_data
from kfstack.errors import UsageError
from kfstack.training.metrics import UNDEFINED


def test_stopping_a_task_stops_its_whole_process_group():
    # A task process with children and a grandchild that ignores SIGTERM (as a stuck rank might).
    script = (
        "import subprocess, sys, time;"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']);"
        "subprocess.Popen([sys.executable, '-c',"
        " 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)']);"
        "print('ready', flush=True); time.sleep(300)"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert process.stdout.readline().strip() == "ready"
    tree = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
    assert len(tree) == 3
    started = time.monotonic()
    local_run._stop_process_group(process, grace_seconds=1.0)
    assert time.monotonic() - started < 10
    assert [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []


def test_output_router_sends_kfp_executor_lines_to_kfps_log():
    own, kfp = io.StringIO(), io.StringIO()
    router = local_run._OutputRouter(own, kfp, echo=None)
    executor_input = json.dumps({"inputs": {"parameterValues": {"epochs": 2.0}}}, indent=4)
    lines = [
        "[KFP Executor 2026-01-01 00:00:00,000 INFO]: Looking for component `x`\n",
        "[KFP Executor 2026-01-01 00:00:00,001 INFO]: Got executor_input:\n",
        *(line + "\n" for line in executor_input.splitlines()),
        "[rank 0] epoch=1 val_auc=0.7\n",
        "Traceback (most recent call last):\n",
        "  }\n",  # indented: the task's own output, not the end of the JSON
        "ValueError: bad\n",
    ]
    for line in lines:
        router.line(line)
    assert (
        own.getvalue()
        == "[rank 0] epoch=1 val_auc=0.7\nTraceback (most recent call last):\n  }\nValueError: bad\n"
    )
    assert '"epochs": 2.0' in kfp.getvalue() and "rank 0" not in kfp.getvalue()


def test_own_log_tail_and_exception_line(tmp_path):
    log = tmp_path / "task.log"
    log.write_text(
        "start\n\nTraceback (most recent call last):\n  File x\nkfstack.errors.DataQualityError: 9 % bad\n"
    )
    tail = local_run.own_log_tail(str(log), lines=3)
    assert tail == [
        "Traceback (most recent call last):",
        "  File x",
        "kfstack.errors.DataQualityError: 9 % bad",
    ]
    assert local_run._exception_line(tail) == "kfstack.errors.DataQualityError: 9 % bad"
    assert local_run.own_log_tail(str(tmp_path / "none.log")) == []


def test_progress_events_round_trip_through_the_file(tmp_path, monkeypatch):
    path = tmp_path / "progress.jsonl"
    progress.report("epoch", 1, 4)  # no file named: nothing happens, nothing raises
    monkeypatch.setenv(progress.PROGRESS_FILE_ENV, str(path))
    progress.report("epoch", 1, 4)
    progress.report("spark: profile")
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"activity": "half a li')  # a line still being written
    events, offset = progress.read_events(str(path), 0)
    assert [e.describe() for e in events] == ["epoch 1/4", "spark: profile"]
    assert progress.read_events(str(path), offset) == ([], offset)
    with open(path, "a", encoding="utf-8") as f:
        f.write('ne"}\n')
    events, _ = progress.read_events(str(path), offset)
    assert [e.activity for e in events] == ["half a line"]


def test_plain_console_writes_one_line_per_change():
    stream = io.StringIO()
    with RunConsole(stream) as console:
        assert not console.live  # not a terminal
        console.task_started("train-model")
        console.task_progress("train-model", progress.ProgressEvent("epoch", 1, 2))
        console.task_finished("train-model", DONE, 3.25)
    assert stream.getvalue().splitlines() == [
        "train-model          running",
        "train-model          running   epoch 1/2",
        "train-model          done      3.2 s",
    ]


def test_live_console_draws_task_lines_on_a_terminal():
    stream = io.StringIO()
    console = RunConsole(stream, live=True)
    with console:
        console.task_started("flights-features")
        console.task_progress("flights-features", progress.ProgressEvent("spark: profile", 6, 7))
        console.task_finished("flights-features", DONE, 12.0)
    text = stream.getvalue()
    assert "flights-features" in text and "spark: profile 6/7" in text and "done" in text


def test_run_directory_layout_and_clean(tmp_path):
    root = tmp_path / "runs"
    first = run_directory.RunDirectory.create(str(root), "p", clock=1_000_000)
    second = run_directory.RunDirectory.create(str(root), "p", clock=1_000_000)  # same second
    assert first.path != second.path
    for run in (first, second):
        assert all(os.path.isdir(d) for d in (run.logs, run.artifacts, run.tmp))
    os.utime(os.path.join(first.path, run_directory.MARKER), (1, 1))
    (root / "registry").mkdir()
    assert run_directory.list_runs(str(root)) == [first, second]
    for run in (first, second):
        run.release()  # both ended
    assert run_directory.clean_runs(str(root), keep=1) == ([first], [])
    assert sorted(os.listdir(root)) == sorted(
        ["registry", run_directory.ROOT_LOCK, os.path.basename(second.path)]
    )
    with pytest.raises(UsageError, match="--keep -2"):
        run_directory.clean_runs(str(root), keep=-2)


def _hold_lock(path: str) -> subprocess.Popen:
    """Another process holding ``path``'s lock, as a running run's process does."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"fd = os.open({path!r}, os.O_RDWR)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
         "print('held', flush=True)\ntime.sleep(120)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_clean_leaves_a_running_run_unless_forced(tmp_path, capsys):
    root = tmp_path / "runs"
    running = run_directory.RunDirectory.create(str(root), "p", clock=1_000_000)
    ended = run_directory.RunDirectory.create(str(root), "p", clock=1_000_100)
    ended.release()
    assert running.in_use() and not ended.in_use()  # this process still runs `running`
    running.release()
    holder = _hold_lock(os.path.join(running.path, run_directory.LOCK))
    try:
        assert running.in_use()
        assert cli.main(["clean", "--pipeline-root", str(root)]) == 0
        out = capsys.readouterr().out
        assert f"removed {ended.path}" in out
        assert f"skipped {running.path}: running (a process holds its lock); --force removes it" in out
        assert os.path.isdir(running.path) and not os.path.exists(ended.path)
        with pytest.raises(UsageError, match="in use: running"):
            run_directory.RunDirectory.reopen(running.path)  # nor is it resumed twice
        assert cli.main(["clean", "--pipeline-root", str(root), "--force"]) == 0
        assert f"removed {running.path}" in capsys.readouterr().out and not os.path.exists(running.path)
    finally:
        holder.kill()
        holder.wait()


def test_a_run_that_starts_while_clean_works_waits_for_it(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    made: list[run_directory.RunDirectory] = []
    with run_directory._root_locked(str(root), exclusive=True):  # a clean at work
        maker = threading.Thread(
            target=lambda: made.append(run_directory.RunDirectory.create(str(root), "p"))
        )
        maker.start()
        maker.join(timeout=1.0)
        assert maker.is_alive() and made == [] and os.listdir(root) == [run_directory.ROOT_LOCK]
    maker.join(timeout=10)
    (run,) = made
    assert run.in_use()  # made locked: no clean sees it unlocked before it runs
    run.release()


def test_clean_never_follows_a_symbolic_link(tmp_path, capsys):
    elsewhere = run_directory.RunDirectory.create(str(tmp_path / "elsewhere"), "p")
    elsewhere.release()
    root = tmp_path / "runs"
    root.mkdir()
    link = root / "p-linked"
    link.symlink_to(elsewhere.path)
    assert cli.main(["clean", "--pipeline-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"skipped {link}: a symbolic link to {elsewhere.path}: not followed" in out
    assert cli.main(["clean", "--pipeline-root", str(root), "--force"]) == 0
    assert not os.path.lexists(link) and os.path.isfile(os.path.join(elsewhere.path, run_directory.MARKER))


def test_run_directory_in_an_unwritable_place_is_bad_input(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="cannot write"):
        run_directory.RunDirectory.create(str(blocker / "runs"), "p")


class _Artifact:
    def __init__(self, path, schema_title="system.Artifact", metadata=None):
        self.path, self.schema_title, self.metadata = path, schema_title, metadata or {}


def test_summary_lists_existing_paths_only_and_types_metrics(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    outputs = {
        "model": _Artifact(str(model)),
        "test_metrics": _Artifact(
            str(tmp_path / "test_metrics"),
            "system.Metrics",
            {"auc": 0.71, "test_rows": 1734.0, "precision": UNDEFINED, "display_name": "x"},
        ),
        "report": _Artifact(  # a Spark step's report
            str(tmp_path / "report"),
            "system.Metrics",
            {"rows_read": 10.0, "rows_written": 9.0, "rows_quarantined": 1.0, "quarantined.bad_date": 1.0},
        ),
        "count": 3,  # a parameter output: neither a path nor a metric
    }
    metrics, artifacts = collect_outputs(outputs)
    assert artifacts == {"model": str(model)}
    assert metrics["test_metrics.auc"] == 0.71
    assert metrics["test_metrics.test_rows"] == 1734 and type(metrics["test_metrics.test_rows"]) is int
    assert metrics["test_metrics.precision"] is None
    assert "test_metrics.display_name" not in metrics
    data = data_counts(metrics)
    assert data == {"rows_read": 10, "rows_written": 9, "rows_quarantined": 1, "quarantined.bad_date": 1}
    assert all(type(v) is int for v in data.values())


def test_a_data_step_without_a_report_is_said_plainly_not_left_an_empty_section(tmp_path):
    # The Spark step finished and logged nothing on its report: its application wrote none.
    outputs = {"report": _Artifact(str(tmp_path / "report"), "system.Metrics", {"display_name": "report"})}
    metrics, _ = collect_outputs(outputs)
    assert data_counts(metrics) == {}
    said = unreported_data(outputs)
    assert said.startswith(
        "no row counts: the data step's application wrote no report to $KFSTACK_REPORT_PATH"
    )
    summary = RunSummary(
        pipeline="p",
        status="SUCCEEDED",
        run_dir="/r",
        wall_seconds=1.0,
        peak_rss_bytes=0,
        arguments={},
        stages={},
        data={},
        metrics=metrics,
        artifacts={},
        kfp_log="",
        data_unreported=said,
    )
    assert f"data       {said}" in summary.render().splitlines()
    assert summary.to_dict()["data_unreported"] == said
    # A report of other figures only: it is there, but it has no row counts.
    other = {"report": _Artifact(str(tmp_path / "report"), "system.Metrics", {"mean_amount": 3.5})}
    assert unreported_data(other) == (
        "no row counts: the data step's report ($KFSTACK_REPORT_PATH) has mean_amount and none of "
        "rows_read, rows_written, rows_quarantined"
    )
    # Counts (or quarantine reasons alone) there, or no data step that finished: nothing to say.
    counted = {"report": _Artifact(str(tmp_path / "report"), "system.Metrics", {"rows_read": 3.0})}
    reasons = {"report": _Artifact(str(tmp_path / "report"), "system.Metrics", {"quarantined.bad": 1.0})}
    assert unreported_data(counted) == unreported_data(reasons) == unreported_data({}) == ""


def test_the_printed_summary_shows_small_figures_rather_than_zeros():
    summary = RunSummary(
        pipeline="p",
        status="SUCCEEDED",
        run_dir="/r",
        wall_seconds=1.0,
        peak_rss_bytes=0,
        arguments={},
        stages={},
        data={},
        metrics={
            "training_metrics.cost_per_epoch": 2.1758e-05,
            "training_metrics.val_auc": 0.74613,
            "training_metrics.world_size": 2,
        },
        artifacts={},
        kfp_log="",
    )
    lines = summary.render().splitlines()
    assert any(line.split() == ["training_metrics.cost_per_epoch", "2.176e-05"] for line in lines)
    assert any(line.split() == ["training_metrics.val_auc", "0.7461"] for line in lines)
    assert any(line.split() == ["training_metrics.world_size", "2"] for line in lines)


def test_verbose_echoes_kfps_output_and_the_tasks_once(tmp_path):
    log, console_stream = tmp_path / "kfp.log", io.StringIO()
    with local_run._output_to(str(log), echo=console_stream):
        print("kfp: Executing task 'x'")
    with local_run._output_to(str(log), echo=None):
        print("kfp: quiet")
    assert log.read_text() == "kfp: Executing task 'x'\nkfp: quiet\n"
    assert console_stream.getvalue() == "kfp: Executing task 'x'\n"

    own, kfp = io.StringIO(), io.StringIO()
    with RunConsole(console_stream := io.StringIO()) as console:
        router = local_run._OutputRouter(own, kfp, echo=console)
        router.line("[KFP Executor 2026-01-01 00:00:00,000 INFO]: Wrote executor output\n")
        router.line("[rank 0] epoch=1\n")
    assert console_stream.getvalue() == "[rank 0] epoch=1\n"  # kfp's line reaches it via its stream


def test_a_runner_crash_still_writes_a_failed_summary(tmp_path, monkeypatch):
    import contextlib

    @contextlib.contextmanager
    def broken(self):
        raise RuntimeError("kfp moved a function")
        yield

    monkeypatch.setattr(local_run._TaskRunner, "installed", broken)
    summary = local_run.run_pipeline_locally("flights-training", {"platform": "local"}, str(tmp_path))
    assert summary.status == "FAILED"
    assert "the embedded runner raised RuntimeError: kfp moved a function" in summary.error
    with open(os.path.join(summary.run_dir, "summary.json"), encoding="utf-8") as f:
        assert json.load(f)["status"] == "FAILED"
    with open(summary.kfp_log, encoding="utf-8") as f:
        assert "Traceback" in f.read()
    assert not os.path.exists(os.path.join(summary.run_dir, "tmp"))


def test_the_runner_fills_the_run_time_placeholders_kfp_local_leaves():
    """kfp.local 2.17 fails on KFP's run-time placeholders; the runner fills them as a backend
    would: the creation time is the run's start, and a run started here has no schedule time."""
    from kfp import dsl

    from kfstack.app.local_run import _TaskRunner

    runner = types.SimpleNamespace(created="2026-11-24T06:00:00Z")
    arguments = {
        "scheduled_time": dsl.PIPELINE_JOB_SCHEDULE_TIME_UTC_PLACEHOLDER,
        "created_time": dsl.PIPELINE_JOB_CREATE_TIME_UTC_PLACEHOLDER,
        "window_days": 7,
        "other": "text",
    }
    assert _TaskRunner._with_run_times(runner, arguments) == {
        "scheduled_time": "",
        "created_time": "2026-11-24T06:00:00Z",
        "window_days": 7,
        "other": "text",
    }


def test_the_memory_of_a_process_tree_counts_a_child_sharing_its_parents_memory_once():
    parent, forked, other = (100, 1, 2_000, 9_000), (101, 100, 2_000, 9_000), (102, 100, 300, 900)
    assert local_run.tree_rss([parent, forked, other]) == 2_300
    # The same numbers in a process that is not the other's child are two processes' memory.
    assert local_run.tree_rss([parent, (103, 1, 2_000, 9_000)]) == 4_000


def test_the_peak_memory_sampler_sums_a_real_childs_memory():
    child = subprocess.Popen(
        [sys.executable, "-c", "b = bytearray(200 * 2**20); print('ready', flush=True); input()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        own = psutil.Process().memory_info().rss
        with local_run.PeakMemorySampler(interval_seconds=0.05) as memory:
            time.sleep(0.3)
        assert memory.peak_bytes >= own + 200 * 2**20
    finally:
        child.communicate("")


def test_tuned_integers_stay_integers_in_the_summary():
    """A parameter output carries every number as a float; the summary gives each tuned value the
    type its search space says (``hidden_units: 49``, not ``49.0``)."""
    from kfstack.app.summary import best_parameters

    space = {
        "hidden_units": {"type": "int", "min": 16, "max": 128},
        "dropout": {"type": "double", "min": 0.0, "max": 0.5},
        "batch_size": {"type": "discrete", "values": [512, 1024]},
        "activation": {"type": "categorical", "values": ["relu", "tanh"]},
    }
    best = {"hidden_units": 49.0, "dropout": 1.0, "batch_size": 1024.0, "activation": "tanh", "epochs": 3.0}
    found = best_parameters({"tuning_search_space": json.dumps(space)}, {"best_hyperparameters": best})
    assert found == {"hidden_units": 49, "dropout": 1.0, "batch_size": 1024, "activation": "tanh"}
    assert type(found["hidden_units"]) is int and type(found["dropout"]) is float
