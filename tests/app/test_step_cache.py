"""The step cache: real runs of a small pipeline through kfp.local, answered from earlier runs
under the same root when their component, inputs and code are the same
(:mod:`kfstack.app.step_cache`)."""

from __future__ import annotations

import io
import os
import pathlib
import shutil

import pytest

from kfstack.app import run_directory, step_cache
from kfstack.app.local_run import run_pipeline_locally
from kfstack.app.summary import CACHED, SUCCEEDED

PIPELINE = "tests.app.cached_pipeline:pipeline"


@pytest.fixture
def counts(tmp_path):
    folder = tmp_path / "counts"
    folder.mkdir()
    return folder


def executed(counts: pathlib.Path) -> list[str]:
    """The steps that executed so far, one entry per execution, sorted."""
    return sorted(name.split("-")[0] for name in os.listdir(counts))


def run(root, counts, cache=True, **arguments):
    arguments = {"count_dir": str(counts), **arguments}
    summary = run_pipeline_locally(PIPELINE, arguments, str(root), console_stream=io.StringIO(), cache=cache)
    assert summary.status == SUCCEEDED, summary.error
    return summary


def statuses(summary) -> dict[str, str]:
    return {name: stage.status for name, stage in summary.stages.items()}


def test_a_second_run_reuses_the_steps_whose_inputs_did_not_change(tmp_path, counts):
    root = tmp_path / "runs"
    first = run(root, counts)
    second = run(root, counts, scale=2.0)

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

    third = run(root, counts, scale=2.0)
    # consume's Metrics output has no file, and that is no reason to run it again.
    assert "figures" not in second.artifacts  # the summary lists the outputs that are on disk
    assert statuses(third) == {"produce": CACHED, "consume": CACHED, "announce": SUCCEEDED}
    assert third.metrics["figures.size"] == 3
    assert third.stages["consume"].cached_from == second.run_dir
    assert executed(counts).count("consume") == 2


def test_without_the_cache_every_step_runs_and_nothing_is_recorded(tmp_path, counts):
    root = tmp_path / "runs"
    run(root, counts)
    uncached = run(root, counts, cache=False)
    assert statuses(uncached) == dict.fromkeys(("produce", "consume", "announce"), SUCCEEDED)
    assert executed(counts) == ["announce"] * 2 + ["consume"] * 2 + ["produce"] * 2
    assert not os.path.exists(os.path.join(uncached.run_dir, step_cache.CACHE_DIR))


def test_a_changed_file_named_in_the_arguments_runs_its_step_again(tmp_path, counts):
    root, notes = tmp_path / "runs", tmp_path / "notes.txt"
    notes.write_text("first")
    run(root, counts, notes=str(notes))
    notes.write_text("second")
    again = run(root, counts, notes=str(notes))
    assert statuses(again)["produce"] == CACHED  # it does not name the file
    assert statuses(again)["consume"] == SUCCEEDED


def test_clean_keeps_a_run_whose_outputs_a_running_run_reuses_and_then_forgets_it(tmp_path, counts):
    root = tmp_path / "runs"
    first = run(root, counts)
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
    again = run(root, counts)
    assert statuses(again) == dict.fromkeys(("produce", "consume", "announce"), SUCCEEDED)


def test_a_run_whose_outputs_are_gone_is_neither_reused_nor_held(tmp_path, counts):
    root = tmp_path / "runs"
    first = run(root, counts)
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


def test_the_code_digest_follows_the_packages_files(tmp_path, monkeypatch):
    package = tmp_path / "teamcode"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text("EPOCHS = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = step_cache.code_digest("teamcode.pipeline:PIPELINE")
    assert step_cache.code_digest("teamcode.pipeline:PIPELINE") == before
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"compiled")
    assert step_cache.code_digest("teamcode.pipeline:PIPELINE") == before  # bytecode is not code
    (package / "train.py").write_text("EPOCHS = 2\n")
    changed = step_cache.code_digest("teamcode.pipeline:PIPELINE")
    assert changed != before
    # A folder of the package that is a link (as kfstack's components/ is in a checkout).
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "prepare.py").write_text("ROWS = 1\n")
    (package / "jobs").symlink_to(tmp_path / "jobs")
    linked = step_cache.code_digest("teamcode.pipeline:PIPELINE")
    assert linked != changed
    (tmp_path / "jobs" / "prepare.py").write_text("ROWS = 2\n")
    assert step_cache.code_digest("teamcode.pipeline:PIPELINE") != linked
