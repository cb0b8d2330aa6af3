"""Every component's README lists exactly the component's inputs and outputs.

A component documents itself beside its code (``components/<category>/<name>/README.md``): an
``Inputs`` and an ``Outputs`` section, each a Markdown table whose first column is an argument
name in backticks, and a ``Platforms`` section. The names are checked against the compiled
component interface (``component_spec``), so a renamed, added or removed argument fails here
until the README follows. Components are found by scanning ``components/**/component.py``: a
new component without a README fails too. ``validate_run`` lives in ``pipelines/`` and is
documented in a section of ``components/README.md``.
"""

from __future__ import annotations

import dataclasses
import importlib
import pathlib
import re

import pytest
from kfp.dsl.base_component import BaseComponent

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
COMPONENTS_DIR = REPO_ROOT / "components"
INDEX = COMPONENTS_DIR / "README.md"
VALIDATE_RUN_SECTION = "Pipeline-level component: `validate_run`"

PARAMETER_TYPES = {
    "String": "str",
    "Integer": "int",
    "Float": "float",
    "Boolean": "bool",
    "Dict": "dict",
    "List": "list",
}
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_ARTIFACT_TYPE = re.compile(r"^system\.(\w+)@")
_NAME_CELL = re.compile(r"^`([A-Za-z_][A-Za-z0-9_]*)`$")


@dataclasses.dataclass(frozen=True)
class DocumentedComponent:
    """A component object and the Markdown that documents it."""

    label: str
    component: BaseComponent
    doc_path: pathlib.Path
    doc: str  # the README, or the section of the index that documents the component


def section(markdown: str, title: str) -> str | None:
    """The body under the first heading titled ``title``, up to the next heading of the same or
    a higher level; ``None`` when there is no such heading. Fenced code is not special-cased:
    READMEs here have no headings inside code blocks."""
    lines = markdown.splitlines()
    for start, line in enumerate(lines):
        match = _HEADING.match(line)
        if match and match.group(2) == title:
            level = len(match.group(1))
            body = []
            for following in lines[start + 1 :]:
                heading = _HEADING.match(following)
                if heading and len(heading.group(1)) <= level:
                    break
                body.append(following)
            return "\n".join(body)
    return None


def table_rows(body: str) -> list[list[str]]:
    """The data rows (cells stripped) of the Markdown table(s) in ``body``: header and
    separator rows are skipped."""
    rows: list[list[str]] = []
    in_table = False
    for line in body.splitlines():
        stripped = line.strip()
        if not stripped.startswith("|"):
            in_table = False
            continue
        cells = [cell.strip() for cell in stripped.strip("|").split("|")]
        if not in_table:
            in_table = True  # the header row
            continue
        if all(re.fullmatch(r":?-{3,}:?", cell) for cell in cells):
            continue
        rows.append(cells)
    return rows


def documented_arguments(doc: str, title: str, where: str) -> dict[str, str]:
    """Name -> type cell of every row of the ``title`` section's table."""
    body = section(doc, title)
    assert body is not None, f"{where}: no '{title}' section"
    documented: dict[str, str] = {}
    for cells in table_rows(body):
        match = _NAME_CELL.match(cells[0])
        assert match, (
            f"{where}, {title}: the first column must be one argument name in backticks, got {cells[0]!r}"
        )
        name = match.group(1)
        assert name not in documented, f"{where}, {title}: {name!r} is listed twice"
        documented[name] = cells[1].strip("`") if len(cells) > 1 else ""
    return documented


def expected_type(kfp_type: str, direction: str) -> str:
    """How a README writes a KFP type: ``str``, ``Input[Dataset]``, ``Output[Metrics]``..."""
    artifact = _ARTIFACT_TYPE.match(kfp_type)
    if artifact:
        return f"{direction}[{artifact.group(1)}]"
    return PARAMETER_TYPES.get(kfp_type, kfp_type)


def interface(component: BaseComponent) -> tuple[dict[str, str], dict[str, str]]:
    """(inputs, outputs): name -> README type, from the component's spec.

    Inputs are the parameters and the ``Input[...]`` artifacts; outputs the ``Output[...]``
    artifacts and, when the function returns something, ``Output`` (KFP's name for a return
    value; a returned parameter's type, e.g. ``str``).
    """
    spec = component.component_spec
    inputs = {name: expected_type(value.type, "Input") for name, value in (spec.inputs or {}).items()}
    outputs = {name: expected_type(value.type, "Output") for name, value in (spec.outputs or {}).items()}
    return inputs, outputs


def component_files() -> list[pathlib.Path]:
    return sorted(COMPONENTS_DIR.glob("**/component.py"))


def load_component(path: pathlib.Path) -> BaseComponent:
    """The one component object defined in ``components/<...>/component.py``."""
    relative = path.relative_to(COMPONENTS_DIR).with_suffix("")
    module = importlib.import_module(".".join(("kfstack", "components", *relative.parts)))
    found = [value for value in vars(module).values() if isinstance(value, BaseComponent)]
    assert len(found) == 1, f"{path}: expected one component, found {len(found)}"
    return found[0]


def documented_components() -> list[DocumentedComponent]:
    documented = []
    for path in component_files():
        readme = path.parent / "README.md"
        label = path.parent.relative_to(COMPONENTS_DIR).as_posix()
        doc = readme.read_text(encoding="utf-8") if readme.exists() else ""
        documented.append(DocumentedComponent(label, load_component(path), readme, doc))
    from kfstack.pipelines.validate_run import validate_run

    index = INDEX.read_text(encoding="utf-8")
    documented.append(
        DocumentedComponent("validate_run", validate_run, INDEX, section(index, VALIDATE_RUN_SECTION) or "")
    )
    return documented


COMPONENTS = documented_components()


def where(documented: DocumentedComponent) -> str:
    doc = documented.doc_path.relative_to(REPO_ROOT).as_posix()
    if documented.doc_path == INDEX:
        return f"{doc} (section '{VALIDATE_RUN_SECTION}')"
    return doc


def mismatch(title: str, expected: set[str], documented: set[str]) -> str:
    problems = []
    if missing := sorted(expected - documented):
        problems.append(f"missing from the README: {', '.join(missing)}")
    if extra := sorted(documented - expected):
        problems.append(f"in the README but not a component {title.lower()[:-1]}: {', '.join(extra)}")
    return "; ".join(problems)


def test_components_are_found():
    labels = {c.label for c in COMPONENTS}
    assert {
        "data/spark_job",
        "training/distributed_training",
        "evaluation/model_evaluation",
        "common/cleanup_run",
        "validate_run",
    } <= labels


@pytest.mark.parametrize("documented", COMPONENTS, ids=lambda c: c.label)
def test_readme_exists(documented):
    assert documented.doc_path.exists(), f"no {where(documented)} beside the component"
    assert documented.doc.strip(), f"{where(documented)} does not document {documented.label}"


@pytest.mark.parametrize("title", ["Inputs", "Outputs"])
@pytest.mark.parametrize("documented", COMPONENTS, ids=lambda c: c.label)
def test_readme_lists_exactly_the_interface(documented, title):
    inputs, outputs = interface(documented.component)
    expected = inputs if title == "Inputs" else outputs
    readme = documented_arguments(documented.doc, title, where(documented))
    problem = mismatch(title, set(expected), set(readme))
    assert not problem, f"{where(documented)}, {title}: {problem}"


@pytest.mark.parametrize("title", ["Inputs", "Outputs"])
@pytest.mark.parametrize("documented", COMPONENTS, ids=lambda c: c.label)
def test_readme_types_match(documented, title):
    inputs, outputs = interface(documented.component)
    expected = inputs if title == "Inputs" else outputs
    readme = documented_arguments(documented.doc, title, where(documented))
    wrong = {
        name: (readme[name], kind)
        for name, kind in expected.items()
        if name in readme and readme[name] != kind
    }
    assert not wrong, f"{where(documented)}, {title}: README type != component type: " + ", ".join(
        f"{name}: {got!r} != {want!r}" for name, (got, want) in sorted(wrong.items())
    )


@pytest.mark.parametrize("documented", COMPONENTS, ids=lambda c: c.label)
def test_readme_has_platforms_section(documented):
    body = section(documented.doc, "Platforms")
    assert body is not None, f"{where(documented)}: no 'Platforms' section"
    assert body.strip(), f"{where(documented)}: the 'Platforms' section is empty"


def test_index_links_every_component_readme():
    index = INDEX.read_text(encoding="utf-8")
    links = set(re.findall(r"\]\(([^)#]+/README\.md)\)", index))
    expected = {f"{c.label}/README.md" for c in COMPONENTS if c.doc_path != INDEX}
    assert expected <= links, f"components/README.md does not link {', '.join(sorted(expected - links))}"
