"""Each component's settings arguments are the parameter catalog's, as
``python -m kfstack.pipelines.signatures`` writes them: written again here in memory, they must
equal the file (kfstack/pipelines/signatures.py)."""

from __future__ import annotations

import inspect

import pytest

from kfstack.pipelines import signatures
from kfstack.pipelines.parameters import CATALOG

SOURCES = list(signatures.component_sources())


def test_every_component_is_found():
    assert len(SOURCES) == 11
    # register_model and data_window require every catalog argument they take: no block.
    assert sorted(source.function for source in SOURCES if not source.settings) == [
        "data_window",
        "register_model",
    ]


@pytest.mark.parametrize("source", SOURCES, ids=lambda source: source.function)
def test_the_settings_are_written_from_the_catalog(source):
    text = source.path.read_text(encoding="utf-8")
    assert signatures.written(source, text) == text, "run: python -m kfstack.pipelines.signatures"
    if source.settings:
        assert text.count(signatures.BEGIN) == 1 and text.count(signatures.END) == 1
    readme = source.path.with_name("README.md").read_text(encoding="utf-8")
    assert signatures.readme_written(source, readme) == readme, "run: python -m kfstack.pipelines.signatures"


def test_a_readme_row_is_written_from_the_catalog():
    source = next(s for s in SOURCES if s.function == "distributed_training")
    readme = source.path.with_name("README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.split("\n") if line.startswith("| `gpu_pool` |"))
    assert row.startswith(
        "| `gpu_pool` | `str` | Kubernetes: node pool of the training replicas (`cpu`, `h100`"
    )
    changed = readme.replace(row, "| `gpu_pool` | `str` | old words |")
    assert signatures.readme_written(source, changed) == readme


def test_a_changed_default_or_description_is_found_and_written_back():
    source = next(s for s in SOURCES if s.function == "distributed_training")
    text = source.path.read_text(encoding="utf-8")
    changed = text.replace('    gpu_pool: str = "h100",', '    gpu_pool: str = "a100",')
    changed = changed.replace("gpu_pool: Kubernetes: node pool", "gpu_pool: Kubernetes: a pool")
    assert changed != text
    assert signatures.written(source, changed) == text


def test_the_written_defaults_are_what_kfp_compiles():
    """Each written argument's type and default, as KFP reads the component, are the catalog's
    (for a setting a settings class reads, that field's)."""
    from kfstack.components.training.distributed_training.component import distributed_training

    arguments = inspect.signature(distributed_training.python_func).parameters
    for name in ("workers", "gpu_pool", "training_timeout_seconds", "istio_mesh"):
        assert arguments[name].default == CATALOG[name].default, name
        assert arguments[name].annotation in (CATALOG[name].type, CATALOG[name].type.__name__), name


def test_a_missing_docstring_entry_is_refused():
    source = next(s for s in SOURCES if s.function == "distributed_training")
    text = source.path.read_text(encoding="utf-8")
    broken = "\n".join(line for line in text.split("\n") if not line.startswith("        gpu_pool:"))
    with pytest.raises(ValueError, match="no Args entry for gpu_pool"):
        signatures.written(source, broken)
