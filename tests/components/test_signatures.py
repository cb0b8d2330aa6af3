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


def test_a_setting_new_to_a_component_gets_its_docstring_entry_and_readme_row():
    """A field added to a settings class the component takes whole (SETTINGS_CLASSES) reaches its
    docstring and README with no other edit: written after its settings' last entry and row."""
    source = next(s for s in SOURCES if s.function == "distributed_training")
    text = source.path.read_text(encoding="utf-8")
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("        gpu_pool:"))
    end = next(i for i in range(at + 1, len(lines)) if not lines[i].startswith(" " * 12))
    written = signatures.written(source, "\n".join(lines[:at] + lines[end:]))
    assert "        gpu_pool: " in written and written.count("        gpu_pool: ") == 1
    readme = source.path.with_name("README.md").read_text(encoding="utf-8")
    without = "\n".join(line for line in readme.split("\n") if not line.startswith("| `gpu_pool` |"))
    assert "| `gpu_pool` | `str` |" in signatures.readme_written(source, without)


def test_a_docstring_without_its_settings_entries_is_refused():
    source = next(s for s in SOURCES if s.function == "distributed_training")
    text = source.path.read_text(encoding="utf-8")
    names = {p.name for p in source.settings}
    broken = "\n".join(
        line for line in text.split("\n") if not any(line.startswith(f"        {name}:") for name in names)
    )
    with pytest.raises(ValueError, match="no Args entry for"):
        signatures.written(source, broken)
