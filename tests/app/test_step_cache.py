"""The step cache: real runs of a small pipeline through kfp.local, answered from earlier runs
under the same root when their component, inputs and code are the same
(:mod:`kfstack.app.step_cache`)."""

from __future__ import annotations

import io
import os
import pathlib
import shutil

import pytest

from kfstack import kfp_adapter
from kfstack.app import run_directory, step_cache
from kfstack.app.local_run import run_pipeline_locally
from kfstack.app.summary import CACHED, SUCCEEDED

PIPELINE = "tests.app.cached_pipeline:pipeline"


@pytest.fixture
def counts(tmp_path, monkeypatch):
    """The folder the steps leave a file in each time they execute (cached_pipeline.py)."""
    folder = tmp_path / "counts"
    folder.mkdir()
    monkeypatch.setenv("COUNT_DIR", str(folder))
    return folder


def executed(counts: pathlib.Path) -> list[str]:
    """The steps that executed so far, one entry per execution, sorted."""
    return sorted(name.split("-")[0] for name in os.listdir(counts))


def run(root, cache=True, **arguments):
    summary = run_pipeline_locally(PIPELINE, arguments, str(root), console_stream=io.StringIO(), cache=cache)
    assert summary.status == SUCCEEDED, summary.error
    return summary


def statuses(summary) -> dict[str, str]:
    return {name: stage.status for name, stage in summary.stages.items()}


def test_a_second_run_reuses_the_steps_whose_inputs_did_not_change(tmp_path, counts):
    root = tmp_path / "runs"
    first = run(root)
    second = run(root, scale=2.0)

    # produce's inputs are the same; consume's scale changed; announce is never cached.
    assert statuses(second) == {"produce": CACHED, "consume": SUCCEEDED, "announce": SUCCEEDED}
    assert executed(counts) == ["announce"] * 2 + ["consume"] * 2 + ["produce"]
    produce = second.stages["produce"]
    assert produce.cached_from == first.run_dir and produce.seconds == 0.0
    assert produce.log == os.path.join(first.run_dir, "logs", "produce.log") and os.path.isfile(produce.log)
    # The reused output is the first run's own file, which the changed step read.
    assert second.artifacts["data"].startswith(first.run_dir + os.sep)
    assert "produce                      CACHED" in second.render()
    assert f"(outputs of {os.path.basename(first.run_dir)})" in second.render()

    third = run(root, scale=2.0)
    # consume's Metrics output has no file, and that is no reason to run it again.
    assert "figures" not in second.artifacts  # the summary lists the outputs that are on disk
    assert statuses(third) == {"produce": CACHED, "consume": CACHED, "announce": SUCCEEDED}
    assert third.metrics["figures.size"] == 3
    assert third.stages["consume"].cached_from == second.run_dir
    assert executed(counts).count("consume") == 2


def test_without_the_cache_every_step_runs_and_nothing_is_recorded(tmp_path, counts):
    root = tmp_path / "runs"
    run(root)
    uncached = run(root, cache=False)
    assert statuses(uncached) == dict.fromkeys(("produce", "consume", "announce"), SUCCEEDED)
    assert executed(counts) == ["announce"] * 2 + ["consume"] * 2 + ["produce"] * 2
    assert not os.path.exists(os.path.join(uncached.run_dir, step_cache.CACHE_DIR))


def test_a_changed_file_named_in_the_arguments_runs_its_step_again(tmp_path, counts):
    root, notes = tmp_path / "runs", tmp_path / "notes.txt"
    notes.write_text("first")
    run(root, notes=str(notes))
    notes.write_text("second")
    again = run(root, notes=str(notes))
    assert statuses(again)["produce"] == CACHED  # it does not name the file
    assert statuses(again)["consume"] == SUCCEEDED


def test_clean_keeps_a_run_whose_outputs_a_running_run_reuses_and_then_forgets_it(tmp_path, counts):
    root = tmp_path / "runs"
    first = run(root)
    # What a running run does when the cache answers a step from `first`: it holds `first`.
    reusing_run = run_directory.RunDirectory.create(str(root), "reusing")
    reusing = step_cache.StepCache(reusing_run, "code")
    key = sorted(os.listdir(os.path.join(first.run_dir, step_cache.CACHE_DIR)))[0].removesuffix(".json")
    assert reusing.get(key) is not None and reusing.take_hit() == first.run_dir

    removed, skipped = run_directory.clean_runs(str(root))
    assert first.run_dir in {s.path for s in skipped}
    assert {s.reason for s in skipped if s.path == first.run_dir} == {
        f"{run_directory.REUSED}; --force removes it anyway"
    }
    assert os.path.isdir(first.run_dir) and first.run_dir not in {r.path for r in removed}

    reusing.release()  # the reusing run ended
    reusing_run.release()
    removed, _ = run_directory.clean_runs(str(root))
    assert first.run_dir in {r.path for r in removed}
    # Its entries went with it: the next run computes every step again.
    again = run(root)
    assert statuses(again) == dict.fromkeys(("produce", "consume", "announce"), SUCCEEDED)


def test_a_run_whose_outputs_are_gone_is_neither_reused_nor_held(tmp_path, counts):
    root = tmp_path / "runs"
    first = run(root)
    entries = pathlib.Path(first.run_dir, step_cache.CACHE_DIR)
    [produced] = [e for e in entries.iterdir() if '"data"' in e.read_text()]
    for folder in pathlib.Path(first.run_dir, "artifacts").iterdir():
        shutil.rmtree(folder)  # the outputs removed by hand; the entries stay
    reusing_run = run_directory.RunDirectory.create(str(root), "reusing")
    reusing = step_cache.StepCache(reusing_run, "code")
    assert reusing.get(produced.name.removesuffix(".json")) is None
    # Still running, the reusing run holds nothing of the run it could not reuse.
    assert run_directory.RunDirectory(first.run_dir).in_use() is None
    reusing.release()
    reusing_run.release()


def test_a_running_run_is_not_reused_from(tmp_path):
    running = run_directory.RunDirectory.create(str(tmp_path), "running")  # this process holds it
    assert run_directory.hold_for_reuse(running) is None
    running.release()
    fd = run_directory.hold_for_reuse(running)
    assert fd is not None
    assert running.in_use() == run_directory.REUSED
    os.close(fd)
    assert running.in_use() is None


@pytest.fixture
def team_package(tmp_path, monkeypatch) -> pathlib.Path:
    """A team's package on this process's path: a Spark application (``job``), training code
    (``train``, which names a helper module as a string) and what each imports, a data file, and
    a folder of modules that is a link (as kfstack's components/ is in a checkout)."""
    package = tmp_path / "teamcode"
    package.mkdir()
    files = {
        "__init__.py": "",
        "job.py": (
            '"""Features; the trainer (teamcode.model) reads them."""\n'
            "from teamcode import common\n"
            "from teamcode.linked import prepare\n"
        ),
        "common.py": "ROWS = 1\n",
        "train.py": 'from .model import LAYERS\nHELPER = "teamcode.helpers:run"\n',
        "model.py": "LAYERS = 2\n",
        "helpers.py": "def run():\n    return 1\n",
        "columns.json": '["a", "b"]\n',
    }
    for name, text in files.items():
        (package / name).write_text(text)
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "prepare.py").write_text("STEPS = 1\n")
    (package / "linked").symlink_to(tmp_path / "linked")
    monkeypatch.syspath_prepend(str(tmp_path))
    return package


def step_keys(tmp_path) -> dict[str, str]:
    """The keys of a Spark step and a training step of a new run of the team's pipeline: real
    keys (kfp's, with this run's code), the steps' arguments as kfstack's components take them."""
    run_dir = run_directory.RunDirectory.create(str(tmp_path / "runs"), "keys")
    try:
        cache = step_cache.StepCache(run_dir, step_cache.StepCode("teamcode.pipelines:training"))
        arguments = {
            "spark": {"spark_application": "teamcode.job", "input_uri": str(tmp_path / "data")},
            "training": {"training_code": "teamcode.train", "epochs": 2},
        }
        return {
            step: cache.compute_key(step, "image", ["python"], given) for step, given in arguments.items()
        }
    finally:
        run_dir.release()


def test_a_steps_code_key_covers_the_modules_it_runs(tmp_path, team_package):
    (tmp_path / "data").mkdir()
    before = step_keys(tmp_path)
    assert step_keys(tmp_path) == before

    (team_package / "__pycache__").mkdir()
    (team_package / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"compiled")
    assert step_keys(tmp_path) == before  # bytecode is not code

    # A module only training imports (relatively): training runs again, the Spark step does not
    # (its docstring's mention of that module is not an import).
    (team_package / "model.py").write_text("LAYERS = 3\n")
    edited_model = step_keys(tmp_path)
    assert edited_model["training"] != before["training"]
    assert edited_model["spark"] == before["spark"]

    # A module the training code names as a string (its entry point, say) is its code too.
    (team_package / "helpers.py").write_text("def run():\n    return 2\n")
    edited_helper = step_keys(tmp_path)
    assert edited_helper["training"] != edited_model["training"]
    assert edited_helper["spark"] == before["spark"]

    # A module of the Spark application, and one in a linked folder: the Spark step alone.
    (team_package / "common.py").write_text("ROWS = 2\n")
    edited_common = step_keys(tmp_path)
    assert edited_common["spark"] != before["spark"]
    assert edited_common["training"] == edited_helper["training"]
    (tmp_path / "linked" / "prepare.py").write_text("STEPS = 2\n")
    edited_linked = step_keys(tmp_path)
    assert edited_linked["spark"] != edited_common["spark"]
    assert edited_linked["training"] == edited_helper["training"]

    # A file of the package that is not Python: what it touches cannot be told, every step.
    (team_package / "columns.json").write_text('["a", "b", "c"]\n')
    edited_data = step_keys(tmp_path)
    assert edited_data["spark"] != edited_linked["spark"]
    assert edited_data["training"] != edited_linked["training"]


def test_a_module_that_does_not_parse_counts_the_whole_package(tmp_path, team_package):
    (tmp_path / "data").mkdir()
    (team_package / "train.py").write_text("from .model import (\n")  # half written
    before = step_keys(tmp_path)
    (team_package / "common.py").write_text("ROWS = 2\n")  # nothing training imports
    assert step_keys(tmp_path)["training"] != before["training"]  # when unsure, it runs again


def test_a_local_input_folders_files_are_part_of_the_key(tmp_path, team_package):
    data = tmp_path / "data"
    (data / "flights").mkdir(parents=True)
    table = data / "flights" / "part-0.csv"
    table.write_text("year,month\n2013,1\n")
    before = step_keys(tmp_path)
    assert step_keys(tmp_path) == before

    # Edited in place, to the same size: its times tell (a second later, as an edit comes).
    stat = table.stat()
    table.write_text("year,month\n2013,2\n")
    os.utime(table, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    edited = step_keys(tmp_path)
    assert edited["spark"] != before["spark"]
    assert edited["training"] == before["training"]  # it names no folder

    (data / "weather.csv").write_text("hour\n1\n")  # a new file
    assert step_keys(tmp_path)["spark"] != edited["spark"]


def test_the_runs_folders_and_artifacts_are_not_read(tmp_path):
    root = tmp_path / "runs"
    run_dir = run_directory.RunDirectory.create(str(root), "keys")
    earlier = root / "earlier-run" / "artifacts" / "output"
    earlier.mkdir(parents=True)
    (earlier / "part-0.parquet").write_bytes(b"1")
    artifact = kfp_adapter.artifact("system.Dataset", "data", str(earlier), {})
    try:
        cache = step_cache.StepCache(run_dir, "code")
        keys = [
            cache.compute_key("step", "image", ["python"], {"data": artifact, "folder": str(earlier)}),
            cache.compute_key("step", "image", ["python"], {"data": [artifact], "folder": str(earlier)}),
        ]
        (earlier / "part-1.parquet").write_bytes(b"2")  # the run wrote more: it is the same output
        assert (
            cache.compute_key("step", "image", ["python"], {"data": artifact, "folder": str(earlier)})
            == keys[0]
        )
        assert (
            cache.compute_key("step", "image", ["python"], {"data": [artifact], "folder": str(earlier)})
            == keys[1]
        )
    finally:
        run_dir.release()
