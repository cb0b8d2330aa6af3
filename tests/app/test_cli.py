"""The ``kfstack`` CLI's contract, in-process: every command, every bad-input path, exit codes.

0 success; 2 bad input with ONE stderr line ``kfstack <command>: ...`` naming what to fix and
nothing started or written; 1 a failed run; 130 Ctrl-C; 1 with a traceback for a bug. No real
pipeline runs: ``run`` tests replace ``run_pipeline_locally`` where the ``run`` command's module
imported it.
"""

from __future__ import annotations

import os
import re
from types import SimpleNamespace

import pytest
import yaml

from kfstack.app import cli
from kfstack.app.cli import run as run_command
from kfstack.errors import CancelledError, TrainingFailedError
from kfstack.pipelines import pipeline_names
from kfstack.tuning.spec import LOCAL_BUDGET
from kfstack.version import __version__, label_safe, pipeline_version

# The example most of these tests run (kfstack-examples, installed beside kfstack).
FLIGHTS = "flights-training"
# Lines logging.basicConfig's format would write ("2024-01-01 12:00:00,123 INFO name: msg").
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
# Cheap valid parameters: the pre-run check renders the cluster objects (about a second).
CHEAP = ["--param", "sample_fraction=0.01"]
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip() and not _LOG_LINE.match(line)]


def assert_one_line(err: str, command: str) -> str:
    """The bad-input stderr is exactly one line, ``kfstack <command>: ...``; returns it."""
    lines = _error_lines(err)
    assert len(lines) == 1, f"expected one stderr line, got {lines!r}"
    assert lines[0].startswith(f"kfstack {command}: "), lines[0]
    assert "Traceback" not in err
    return lines[0]


def bad_input(capsys, argv: list[str]) -> str:
    """Runs ``argv``; asserts exit 2 and one stderr line; returns that line."""
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == cli.EXIT_BAD_INPUT == 2, (code, out, err)
    return assert_one_line(err, argv[0])


@pytest.fixture
def local_runs(monkeypatch):
    """Replaces the embedded run; records calls. ``.result`` is what a call returns or raises."""
    calls: list[tuple[str, dict, str]] = []

    class Fake:
        result: object = None

        def __call__(
            self,
            name,
            arguments,
            pipeline_root,
            verbose=False,
            resume=None,
            cache=True,
            track=True,
            tracking_uri=None,
        ):
            calls.append((name, dict(arguments), pipeline_root))
            self.resumed, self.cache, self.track, self.tracking_uri = resume, cache, track, tracking_uri
            if isinstance(self.result, BaseException):
                raise self.result
            return self.result

    fake = Fake()
    fake.calls = calls
    monkeypatch.setattr(run_command, "run_pipeline_locally", fake)
    return fake


def _summary(status: str, text: str = "SUMMARY-TEXT", error: str | None = None):
    written: list[str] = []
    return SimpleNamespace(
        status=status,
        render=lambda: text,
        write_json=written.append,
        written=written,
        run_dir="RUN-DIR",
        error=error,
    )


# --- list, --version, usage ------------------------------------------------------------------


def test_list_prints_registered_pipelines(capsys):
    assert cli.main(["list"]) == 0
    out, err = capsys.readouterr()
    assert out.split() == pipeline_names()
    assert FLIGHTS in out.split()
    assert _error_lines(err) == []


def test_version_exits_zero(capsys):
    assert cli.main(["--version"]) == 0
    assert f"kfstack {__version__}" in capsys.readouterr().out


def test_help_exits_zero(capsys):
    assert cli.main(["--help"]) == 0
    assert "usage: kfstack" in capsys.readouterr().out


def test_no_command_is_usage_error(capsys):
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert "command" in err and "required" in err


def test_unknown_command_is_usage_error(capsys):
    assert cli.main(["deploy"]) == 2
    assert "invalid choice: 'deploy'" in capsys.readouterr().err


def test_render_without_out_is_usage_error(capsys, tmp_path):
    assert cli.main(["render"]) == 2
    assert "--out" in capsys.readouterr().err


# --- compile ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_compile_all_pipelines(capsys, tmp_path):
    out_dir = tmp_path / "dist"
    assert cli.main(["compile", "--out", str(out_dir)]) == 0
    out, _ = capsys.readouterr()
    stamped = label_safe(pipeline_version())
    expected = sorted(str(out_dir / f"{name}-{stamped}.yaml") for name in pipeline_names())
    assert sorted(out.split()) == expected
    assert sorted(str(p) for p in out_dir.iterdir()) == expected


def test_compile_named_pipeline(capsys, tmp_path):
    assert cli.main(["compile", FLIGHTS, "--out", str(tmp_path)]) == 0
    path = tmp_path / f"{FLIGHTS}-{label_safe(pipeline_version())}.yaml"
    assert capsys.readouterr().out.split() == [str(path)]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    with open(path) as f:
        spec = next(yaml.safe_load_all(f))
    assert spec["pipelineInfo"]["name"] == FLIGHTS


def test_compile_unknown_pipeline_lists_known_ones(capsys, tmp_path):
    out_dir = tmp_path / "dist"
    line = bad_input(capsys, ["compile", "nope", "--out", str(out_dir)])
    assert "unknown pipeline 'nope'" in line
    for name in pipeline_names():
        assert name in line
    assert not out_dir.exists()


def test_compile_unknown_among_known_writes_nothing(capsys, tmp_path):
    out_dir = tmp_path / "dist"
    line = bad_input(capsys, ["compile", FLIGHTS, "nope", "--out", str(out_dir)])
    assert "'nope'" in line
    assert not out_dir.exists()


def test_compile_out_under_regular_file(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = bad_input(capsys, ["compile", "--out", str(blocker / "dist")])
    assert str(blocker / "dist") in line and "cannot write" in line


def test_compile_out_is_regular_file(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    line = bad_input(capsys, ["compile", "--out", str(blocker)])
    assert "cannot write" in line
    assert blocker.read_text() == "x"


@pytest.mark.skipif(IS_ROOT, reason="root ignores directory permissions")
@pytest.mark.parametrize("sub", ["", "dist"], ids=["readonly-dir", "under-readonly-dir"])
def test_compile_out_read_only_directory(capsys, tmp_path, sub):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        target = ro / sub if sub else ro
        line = bad_input(capsys, ["compile", "--out", str(target)])
        assert "cannot write" in line
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)


def test_compile_out_not_writable_simulated(capsys, tmp_path, monkeypatch):
    # The read-only case for any user (root included): os.access says no for this directory.
    target = tmp_path / "dist"
    target.mkdir()
    real_access = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda path, mode, *a, **kw: (
            False if os.fspath(path) == str(target) else real_access(path, mode, *a, **kw)
        ),
    )
    line = bad_input(capsys, ["compile", "--out", str(target)])
    assert "permission denied" in line
    assert list(target.iterdir()) == []


# --- render ----------------------------------------------------------------------------------


def _rendered_kinds(out_dir) -> dict[str, str]:
    kinds = {}
    for path in sorted(out_dir.glob("*.yaml")):
        with open(path) as f:
            obj = yaml.safe_load(f)
        assert path.name.startswith(obj["kind"].lower() + "-")
        kinds[obj["kind"]] = path.name
    return kinds


def test_render_default_writes_spark_and_both_training_apis(capsys, tmp_path):
    """training_api=auto: the cluster decides at run time, so both jobs are rendered."""
    out_dir = tmp_path / "objects"
    assert cli.main(["render", FLIGHTS, "--out", str(out_dir)]) == 0
    printed = capsys.readouterr().out.split()
    assert sorted(printed) == sorted(str(p) for p in out_dir.iterdir() if p.name != ".kfstack-render")
    assert set(_rendered_kinds(out_dir)) == {
        "SparkApplication",
        "Experiment",
        "PyTorchJob",
        "TrainJob",
        "InferenceService",
    }


def test_render_says_which_objects_are_alternatives(capsys, tmp_path):
    assert cli.main(["render", FLIGHTS, "--out", str(tmp_path / "both")]) == 0
    # The TrainJob and the PyTorchJob, and the tuning step's two Experiments (one per trial kind).
    assert "4 object(s) start with '# only when:'" in capsys.readouterr().err
    assert cli.main(["render", FLIGHTS, "--out", str(tmp_path / "one"), "--param", "training_api=v1"]) == 0
    assert capsys.readouterr().err == ""


def test_render_tensorflow_writes_tfjob(capsys, tmp_path):
    out_dir = tmp_path / "objects"
    assert cli.main(["render", FLIGHTS, "--out", str(out_dir), "--param", "framework=tensorflow"]) == 0
    assert set(_rendered_kinds(out_dir)) == {"SparkApplication", "Experiment", "TFJob", "InferenceService"}


@pytest.mark.parametrize(
    ("params", "names"),
    [
        (["gpu_pool=nope"], ["gpu_pool"]),
        (["spark_executor_memory=lots"], ["spark_executor_memory"]),
        (["epochs=-1"], ["epochs"]),
        (["workers=0"], ["workers"]),
        (["sample_fraction=nan"], ["sample_fraction"]),
        (["framework=jax"], ["framework"]),
        (["num_shards=1", "workers=2"], ["num_shards", "workers"]),
    ],
    ids=lambda v: "+".join(v) if isinstance(v, list) else None,
)
def test_render_refused_value(capsys, tmp_path, params, names):
    out_dir = tmp_path / "objects"
    argv = ["render", FLIGHTS, "--out", str(out_dir)]
    for p in params:
        argv += ["--param", p]
    line = bad_input(capsys, argv)
    for name in names:
        assert name in line
    assert not out_dir.exists()


def test_render_unknown_parameter(capsys, tmp_path):
    out_dir = tmp_path / "objects"
    line = bad_input(capsys, ["render", FLIGHTS, "--out", str(out_dir), "--param", "wokers=3"])
    assert "unknown parameter" in line and "wokers" in line
    assert "workers" in line  # the known ones are listed
    assert not out_dir.exists()


@pytest.mark.parametrize("pair", ["workers", "=3"])
def test_render_malformed_param(capsys, tmp_path, pair):
    out_dir = tmp_path / "objects"
    line = bad_input(capsys, ["render", FLIGHTS, "--out", str(out_dir), "--param", pair])
    assert "NAME=VALUE" in line and repr(pair) in line
    assert not out_dir.exists()


@pytest.mark.parametrize("pair", ["workers=two", "workers=2.5", "sample_fraction=half"])
def test_render_mistyped_param(capsys, tmp_path, pair):
    out_dir = tmp_path / "objects"
    line = bad_input(capsys, ["render", FLIGHTS, "--out", str(out_dir), "--param", pair])
    assert pair.split("=")[0] in line
    assert not out_dir.exists()


def test_render_unknown_pipeline(capsys, tmp_path):
    out_dir = tmp_path / "objects"
    line = bad_input(capsys, ["render", "nope", "--out", str(out_dir)])
    assert "unknown pipeline 'nope'" in line and FLIGHTS in line
    assert not out_dir.exists()


def test_render_out_under_regular_file(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = bad_input(capsys, ["render", FLIGHTS, "--out", str(blocker / "objects")])
    assert "cannot write" in line and str(blocker / "objects") in line


@pytest.mark.skipif(IS_ROOT, reason="root ignores directory permissions")
def test_render_out_read_only_directory(capsys, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        line = bad_input(capsys, ["render", FLIGHTS, "--out", str(ro)])
        assert "cannot write" in line
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o755)


# --- run: bad input --------------------------------------------------------------------------


def test_run_without_local_submits_nothing(capsys, tmp_path, local_runs):
    root = tmp_path / "runs"
    line = bad_input(capsys, ["run", FLIGHTS, "--pipeline-root", str(root)])
    assert "--local" in line and "Nothing was submitted" in line
    assert local_runs.calls == [] and not root.exists()


def test_run_local_refuses_platform_kubernetes(capsys, tmp_path, local_runs):
    root = tmp_path / "runs"
    line = bad_input(
        capsys, ["run", "--local", FLIGHTS, "--pipeline-root", str(root), "--param", "platform=kubernetes"]
    )
    assert "platform" in line
    assert local_runs.calls == [] and not root.exists()


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        (["epochs=-1"], "epochs"),
        (["gpu_pool=nope"], "gpu_pool"),
        (["num_shards=1", "workers=2"], "num_shards"),
        (["wokers=3"], "unknown parameter"),
        (["workers"], "NAME=VALUE"),
        (["workers=two"], "workers"),
    ],
    ids=lambda v: "+".join(v) if isinstance(v, list) else None,
)
def test_run_local_bad_param_creates_no_run_directory(capsys, tmp_path, local_runs, params, needle):
    root = tmp_path / "runs"
    argv = ["run", "--local", FLIGHTS, "--pipeline-root", str(root)]
    for p in params:
        argv += ["--param", p]
    line = bad_input(capsys, argv)
    assert needle in line
    assert local_runs.calls == []
    assert not root.exists()


def test_run_local_unknown_pipeline(capsys, tmp_path, local_runs):
    root = tmp_path / "runs"
    line = bad_input(capsys, ["run", "--local", "nope", "--pipeline-root", str(root)])
    assert "unknown pipeline 'nope'" in line and FLIGHTS in line
    assert local_runs.calls == [] and not root.exists()


def test_run_local_pipeline_root_under_regular_file(capsys, tmp_path, local_runs):
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = bad_input(capsys, ["run", "--local", FLIGHTS, "--pipeline-root", str(blocker / "runs"), *CHEAP])
    assert "cannot write" in line
    assert local_runs.calls == []


def test_run_local_summary_json_under_regular_file(capsys, tmp_path, local_runs):
    blocker = tmp_path / "file"
    blocker.write_text("")
    root = tmp_path / "runs"
    line = bad_input(
        capsys,
        [
            "run",
            "--local",
            FLIGHTS,
            "--pipeline-root",
            str(root),
            "--summary-json",
            str(blocker / "summary.json"),
            *CHEAP,
        ],
    )
    assert "cannot write" in line
    assert local_runs.calls == [] and not root.exists()


# --- run: outcomes and exit codes ------------------------------------------------------------


def test_run_local_success(capsys, tmp_path, local_runs):
    root = tmp_path / "runs"
    summary_json = tmp_path / "out" / "summary.json"
    local_runs.result = _summary("SUCCEEDED")
    code = cli.main(
        ["run", "--local", FLIGHTS, "--pipeline-root", str(root), "--summary-json", str(summary_json), *CHEAP]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "SUMMARY-TEXT" in out
    ((name, arguments, pipeline_root),) = local_runs.calls
    assert name == FLIGHTS and pipeline_root == str(root)
    budget = {f"tuning_{field}": value for field, value in LOCAL_BUDGET.items()}
    assert arguments == {"sample_fraction": 0.01, "platform": "local", **budget}
    assert local_runs.result.written == [str(summary_json)]
    assert local_runs.cache is True  # the step cache is on unless --no-cache


def test_run_local_no_cache_turns_the_step_cache_off(capsys, tmp_path, local_runs):
    local_runs.result = _summary("SUCCEEDED")
    argv = ["run", "--local", FLIGHTS, "--pipeline-root", str(tmp_path / "runs"), "--no-cache", *CHEAP]
    code = cli.main(argv)
    assert code == 0, capsys.readouterr().err
    assert local_runs.cache is False


@pytest.mark.parametrize(
    ("flags", "track", "uri"),
    [
        ([], True, None),
        (["--no-tracking"], False, None),
        (["--tracking-uri", "http://mlflow:5000"], True, "http://mlflow:5000"),
    ],
)
def test_run_local_hands_the_tracking_choice_to_the_run(capsys, tmp_path, local_runs, flags, track, uri):
    local_runs.result = _summary("SUCCEEDED")
    argv = ["run", "--local", FLIGHTS, "--pipeline-root", str(tmp_path / "runs"), *flags, *CHEAP]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert (local_runs.track, local_runs.tracking_uri) == (track, uri)


@pytest.mark.parametrize("flag", [["--no-tracking"], ["--tracking-uri", "http://mlflow:5000"]])
def test_tracking_flags_are_refused_for_a_cluster_run(capsys, flag):
    line = bad_input(capsys, ["run", FLIGHTS, *flag])
    assert f"{flag[0]}: only with --local" in line and "Nothing was submitted" in line


def test_no_cache_is_refused_for_a_cluster_run(capsys, tmp_path):
    line = bad_input(capsys, ["run", FLIGHTS, "--no-cache"])
    assert "--no-cache: only with --local" in line and "Nothing was submitted" in line


def test_run_local_failed_run_exits_1(capsys, tmp_path, local_runs):
    local_runs.result = _summary(
        "FAILED", "status     FAILED", error="task distributed-training failed: X: y"
    )
    code = cli.main(["run", "--local", FLIGHTS, "--pipeline-root", str(tmp_path / "runs"), *CHEAP])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_FAILED == 1
    assert "status     FAILED" in out
    assert assert_one_line(err, "run") == "kfstack run: task distributed-training failed: X: y"


def test_run_local_cancelled_run_exits_130_with_one_line(capsys, tmp_path, local_runs):
    # What run_pipeline_locally returns after Ctrl-C: a summary, already written, CANCELLED.
    local_runs.result = _summary("CANCELLED", "status     CANCELLED")
    summary_json = tmp_path / "summary.json"
    argv = [
        "run",
        "--local",
        FLIGHTS,
        "--pipeline-root",
        str(tmp_path / "runs"),
        "--summary-json",
        str(summary_json),
    ]
    code = cli.main([*argv, *CHEAP])
    out, err = capsys.readouterr()
    assert code == 130
    line = assert_one_line(err, "run")
    assert "cancelled" in line and "RUN-DIR" in line
    assert out == ""  # one line, not the whole summary
    assert local_runs.result.written == [str(summary_json)]


def test_run_local_keyboard_interrupt_exits_130(capsys, tmp_path, local_runs):
    local_runs.result = KeyboardInterrupt()
    code = cli.main(["run", "--local", FLIGHTS, "--pipeline-root", str(tmp_path / "runs"), *CHEAP])
    _, err = capsys.readouterr()
    assert code == cli.EXIT_INTERRUPTED == 130
    assert "interrupted" in assert_one_line(err, "run")


def test_run_local_cancelled_exits_130(capsys, tmp_path, local_runs):
    local_runs.result = CancelledError("SIGTERM")
    code = cli.main(["run", "--local", FLIGHTS, "--pipeline-root", str(tmp_path / "runs"), *CHEAP])
    assert code == 130
    assert "interrupted" in capsys.readouterr().err


def test_run_local_run_failed_error_exits_1_with_message(capsys, tmp_path, local_runs):
    local_runs.result = TrainingFailedError("rank 1 died")
    code = cli.main(["run", "--local", FLIGHTS, "--pipeline-root", str(tmp_path / "runs"), *CHEAP])
    _, err = capsys.readouterr()
    assert code == 1
    line = assert_one_line(err, "run")
    assert "rank 1 died" in line and "TrainingFailedError" in line


def test_run_local_unexpected_error_prints_traceback(capsys, tmp_path, local_runs):
    local_runs.result = RuntimeError("bug")
    code = cli.main(["run", "--local", FLIGHTS, "--pipeline-root", str(tmp_path / "runs"), *CHEAP])
    _, err = capsys.readouterr()
    assert code == 1
    assert "Traceback" in err and "RuntimeError: bug" in err


def test_run_local_mistyped_param_names_what_it_accepts(capsys, tmp_path, local_runs):
    line = bad_input(
        capsys, ["run", "--local", FLIGHTS, "--pipeline-root", str(tmp_path / "r"), "--param", "epochs=abc"]
    )
    assert line == "kfstack run: --param epochs='abc': expected a whole number"
    line = bad_input(
        capsys,
        ["run", "--local", FLIGHTS, "--pipeline-root", str(tmp_path / "r"), "--param", "learning_rate=inf"],
    )
    assert line == "kfstack run: --param learning_rate='inf': expected a finite number"
    assert local_runs.calls == [] and not (tmp_path / "r").exists()


def test_run_help_points_to_describe(capsys):
    assert cli.main(["run", "--help"]) == 0
    assert "kfstack describe PIPELINE" in capsys.readouterr().out


# --- describe --------------------------------------------------------------------------------


def test_describe_lists_every_parameter_from_the_compiled_interface(capsys):
    from kfstack import pipeline_spec
    from kfstack.pipelines import load_pipeline, rendering

    assert cli.main(["describe", FLIGHTS]) == 0
    out = capsys.readouterr().out
    parameters = pipeline_spec.pipeline_parameters(rendering.compiled_spec(load_pipeline(FLIGHTS)))
    assert len(parameters) == len(load_pipeline(FLIGHTS).component_spec.inputs)
    fixed = {
        "platform",
        "launch_namespace",
        "object_store_secret",
        "tracking_uri",
        "tracking_secret",
        "num_shards",
        "max_quarantine_fraction",
    }
    for parameter in parameters:
        note = "; compiled in, not overridable per run" if parameter.name in fixed else ""
        assert f"  {parameter.name}  ({parameter.type}, default {parameter.default!r}{note})" in out
    # Types and defaults as a user types them: integers are whole, descriptions are the docstring's.
    from kfstack_examples.flights.training.settings import TrainingSettings

    assert f"  epochs  (int, default {TrainingSettings.epochs})" in out
    assert "  learning_rate  (float, default 0.003)" in out
    assert "  gpu_pool  (str, default 'h100')" in out
    assert "Global batch size, split evenly over ranks." in out


def test_describe_shows_the_tuning_budget_of_an_embedded_run_beside_a_cluster_runs(capsys):
    from kfstack.app.cli.run import local_arguments

    assert cli.main(["describe", FLIGHTS]) == 0
    out = capsys.readouterr().out
    # The default is what a cluster run compiles in; an embedded run takes the local budget,
    # which is what `kfstack run --local` really passes.
    embedded = local_arguments(FLIGHTS, {})
    assert embedded["tuning_max_trials"] == 4
    assert (
        "  tuning_max_trials  (int, default 12)\n"
        "      a cluster run: 12; an embedded run (kfstack run --local): 4, unless set\n"
    ) in out
    assert f"an embedded run (kfstack run --local): {embedded['tuning_parallel_trials']}, unless set" in out
    # A setting the embedded run does not change has no such line.
    assert "  gpu_pool  (str, default 'h100')\n      a cluster run" not in out


def test_describe_unknown_pipeline(capsys):
    line = bad_input(capsys, ["describe", "nope"])
    assert "unknown pipeline 'nope'" in line


# --- render --out: refuses foreign files, replaces its own output whole ----------------------


def test_render_refuses_a_directory_it_did_not_write(capsys, tmp_path):
    out_dir = tmp_path / "gitops"
    out_dir.mkdir()
    (out_dir / "kustomization.yaml").write_text("keep me")
    line = bad_input(capsys, ["render", FLIGHTS, "--out", str(out_dir)])
    assert "not empty" in line and "not written by kfstack render" in line
    assert [p.name for p in out_dir.iterdir()] == ["kustomization.yaml"]
    assert (out_dir / "kustomization.yaml").read_text() == "keep me"


def test_render_replaces_its_own_earlier_output_whole(capsys, tmp_path):
    out_dir = tmp_path / "objects"
    assert cli.main(["render", FLIGHTS, "--out", str(out_dir)]) == 0
    assert set(_rendered_kinds(out_dir)) == {
        "SparkApplication",
        "Experiment",
        "PyTorchJob",
        "TrainJob",
        "InferenceService",
    }
    assert cli.main(["render", FLIGHTS, "--out", str(out_dir), "--param", "framework=tensorflow"]) == 0
    # The PyTorchJob of the first render is gone: the directory is exactly the second render.
    assert set(_rendered_kinds(out_dir)) == {"SparkApplication", "Experiment", "TFJob", "InferenceService"}
    printed = capsys.readouterr().out.split()
    second = printed[6:]  # the first render printed its six files (two Experiments)
    assert sorted(second) == sorted(str(p) for p in out_dir.glob("*.yaml"))


def test_render_refuses_files_added_beside_its_output(capsys, tmp_path):
    out_dir = tmp_path / "objects"
    assert cli.main(["render", FLIGHTS, "--out", str(out_dir)]) == 0
    capsys.readouterr()
    (out_dir / "notes.txt").write_text("mine")
    before = sorted(p.name for p in out_dir.iterdir())
    line = bad_input(capsys, ["render", FLIGHTS, "--out", str(out_dir), "--param", "framework=tensorflow"])
    assert "notes.txt" in line
    assert sorted(p.name for p in out_dir.iterdir()) == before


# --- clean -----------------------------------------------------------------------------------


def _fake_run(root, name: str, mtime: float):
    from kfstack.app.run_directory import MARKER

    run = root / name
    (run / "logs").mkdir(parents=True)
    (run / MARKER).write_text("{}")
    os.utime(run / MARKER, (mtime, mtime))
    return run


def test_clean_removes_runs_and_nothing_else(capsys, tmp_path):
    root = tmp_path / "runs"
    old, new = _fake_run(root, "p-1", 1_000), _fake_run(root, "p-2", 2_000)
    registry = root / "registry"
    registry.mkdir()
    (registry / "model.onnx").write_text("kept on purpose")
    (root / "summary.json").write_text("{}")  # make run's copy of the last summary

    assert cli.main(["clean", "--pipeline-root", str(root), "--keep", "1", "--dry-run"]) == 0
    assert "would remove 1 run(s)" in capsys.readouterr().out
    assert old.exists()

    assert cli.main(["clean", "--pipeline-root", str(root), "--keep", "1"]) == 0
    out = capsys.readouterr().out
    assert f"removed {old}" in out and not old.exists() and new.exists()
    assert cli.main(["clean", "--pipeline-root", str(root)]) == 0
    assert not new.exists()
    # The root's lock (which orders a clean and a starting run) stays with the user's files.
    assert sorted(p.name for p in root.iterdir()) == [".kfstack-root.lock", "registry", "summary.json"]
    assert (registry / "model.onnx").read_text() == "kept on purpose"


def test_clean_negative_keep_is_bad_input(capsys, tmp_path):
    line = bad_input(capsys, ["clean", "--pipeline-root", str(tmp_path), "--keep", "-1"])
    assert "--keep -1" in line


def test_compile_stamps_the_pipeline_version_everywhere_a_run_sees_it(capsys, tmp_path):
    """An explicit version: the file name, the display name and description, every task's env
    (with the pipeline's name: a task's tracking experiment), and every task pod's label (with -
    where + is not allowed); KFP still loads the spec."""
    from google.protobuf import json_format
    from kfp import components

    assert cli.main(["compile", FLIGHTS, "--out", str(tmp_path), "--pipeline-version", "0.1.0+abc1234"]) == 0
    path = tmp_path / f"{FLIGHTS}-0.1.0-abc1234.yaml"
    assert capsys.readouterr().out.split() == [str(path)]
    with open(path) as f:
        spec, platform = [d for d in yaml.safe_load_all(f) if d]
    assert spec["pipelineInfo"]["displayName"] == f"{FLIGHTS} 0.1.0+abc1234"
    assert spec["pipelineInfo"]["description"].endswith("Pipeline version 0.1.0+abc1234.")
    executors = spec["deploymentSpec"]["executors"]
    assert len(executors) >= 7
    for name, executor in executors.items():
        env = executor["container"]["env"]
        assert {"name": "KFSTACK_PIPELINE_VERSION", "value": "0.1.0+abc1234"} in env, name
        assert {"name": "KFSTACK_PIPELINE", "value": FLIGHTS} in env, name
        pod = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"][name]["podMetadata"]
        assert pod["labels"]["kfstack.dev/pipeline-version"] == "0.1.0-abc1234"
    loaded = components.load_component_from_file(str(path))
    assert loaded.name == FLIGHTS
    stamped = json_format.MessageToDict(loaded.platform_spec)["platforms"]["kubernetes"]["deploymentSpec"]
    assert stamped["executors"]["exec-model-deployment"]["podMetadata"]["labels"]
    # The run's check takes KFP's times of the run (a recurring run's MLflow parent says so),
    # which only a version compiled for a backend that fills them in gets.
    (check,) = [
        task
        for component in spec["components"].values()
        for name, task in component.get("dag", {}).get("tasks", {}).items()
        if name == "validate-run"
    ]
    assert check["inputs"]["parameters"]["scheduled_time"] == {
        "runtimeValue": {"constant": "{{$.pipeline_job_schedule_time_utc}}"}
    }
    assert check["inputs"]["parameters"]["created_time"] == {
        "runtimeValue": {"constant": "{{$.pipeline_job_create_time_utc}}"}
    }


def test_compile_refuses_a_version_no_label_can_hold(capsys, tmp_path):
    line = bad_input(capsys, ["compile", "--out", str(tmp_path), "--pipeline-version", "1.0 beta"])
    assert "--pipeline-version" in line and "letters, digits" in line
    assert not list(tmp_path.iterdir())


def test_reproduce_refuses_another_pipeline_version_naming_both_and_runs_nothing(tmp_path, capsys):
    from kfstack.lineage import Lineage
    from kfstack.version import pipeline_version

    Lineage(
        model_version="flights-training-20260101-000000",
        pipeline_version="0.0.9+0000000",
        kfstack_version="0.0.9",
        run_id="run-1",
        created="2026-01-01T00:00:00+00:00",
        data={},
        parameters={"seed": 42},
        metrics={"val_auc": 0.7},
    ).save(str(tmp_path / "model"))
    root = tmp_path / "runs"
    assert cli.main(["reproduce", str(tmp_path / "model"), "--pipeline-root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "0.0.9+0000000" in err and pipeline_version() in err
    assert not root.exists()  # nothing ran
    assert cli.main(["reproduce", str(tmp_path / "nothing"), "--pipeline-root", str(root)]) == 2
    assert "has no lineage.json" in capsys.readouterr().err
    # A model of uncommitted code names code nobody can check out again.
    dirty = Lineage.load(str(tmp_path / "model"))
    Lineage(**{**dirty.to_dict(), "pipeline_version": "0.0.9+0000000-dirty"}).save(str(tmp_path / "dirty"))
    assert cli.main(["reproduce", str(tmp_path / "dirty"), "--pipeline-root", str(root)]) == 2
    assert "uncommitted changes, which cannot be checked out again" in capsys.readouterr().err
    assert not root.exists()


def test_a_reproduction_runs_the_named_pipeline_with_its_tuning_and_deployment_off():
    from kfstack.app.reproduce import reproduction_arguments
    from kfstack.lineage import Lineage

    def record(parameters):
        return Lineage(
            model_version="m",
            pipeline_version="0.1.0+0000000",
            kfstack_version="0.1.0",
            run_id="run-1",
            created="2026-01-01T00:00:00+00:00",
            data={},
            parameters=parameters,
            metrics={},
        )

    assert reproduction_arguments("digits-training", record({"dropout": 0.2, "tune": True})) == {
        "dropout": 0.2,
        "tune": False,
        "deploy": False,
        "platform": "local",
    }
    # A team's pipeline without those switches gets none of them.
    hello = "tests.app.team_pipeline:team_hello"
    assert reproduction_arguments(hello, record({"who": "team"})) == {"who": "team", "platform": "local"}
    # What the pipeline fixes itself (the training step records the whole job shape) is its own
    # to set; the records' comparison after the run says whether it set the same.
    assert reproduction_arguments("digits-training", record({"framework": "tensorflow", "epochs": 3})) == {
        "epochs": 3,
        "tune": False,
        "deploy": False,
        "platform": "local",
    }
    # A record written before a parameter was renamed: taken under its name now, with a warning.
    with pytest.warns(FutureWarning, match="canary_max_auc_drop is now canary_max_quality_drop"):
        arguments = reproduction_arguments("flights-training", record({"canary_max_auc_drop": 0.05}))
    assert arguments["canary_max_quality_drop"] == 0.05 and "canary_max_auc_drop" not in arguments
