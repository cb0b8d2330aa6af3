"""Every component documents itself and has its tests where it is.

A component documents itself beside its code (``components/<category>/<name>/README.md``): an
``Inputs`` and an ``Outputs`` section, each a Markdown table whose first column is an argument
name in backticks, and a ``Platforms`` section. The names are checked against the compiled
component interface (``component_spec``), so a renamed, added or removed argument fails here
until the README follows. Components are found by scanning ``components/**/component.py``: a
new component without a README fails too. ``validate_run`` lives in ``pipelines/`` and is
documented in a section of ``components/README.md``.

Beside each README is a ``metadata.yaml`` in kubeflow/pipelines-components' schema, and each
component's tests are mirrored under ``tests/components/<category>/<name>/`` (``validate_run``'s
in ``tests/pipelines/test_validate_run.py``), at that repository's levels: a unit test of the
plain function the component calls, and a run of the component under kfp.local.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import pathlib
import re

import jsonschema
import pytest
import yaml
from kfp.dsl.base_component import BaseComponent

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
COMPONENTS_DIR = REPO_ROOT / "components"
INDEX = COMPONENTS_DIR / "README.md"
TESTS_DIR = REPO_ROOT / "tests"
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


# --- metadata.yaml ----------------------------------------------------------------------------

# The rules of kubeflow/pipelines-components' metadata.yaml (scripts/validate_metadata): the keys
# it knows and those it requires, the stability levels, Kubeflow Pipelines among the Kubeflow
# dependencies, and a dependency's version in semantic versioning (optionally ==, >=, <=, ~=).
_VERSION = r"^(==|>=|<=|~=)?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([-+][0-9A-Za-z.+-]+)?$"
_DEPENDENCY = {
    "type": "object",
    "required": ["name", "version"],
    "properties": {"name": {"type": "string"}, "version": {"type": "string", "pattern": _VERSION}},
}
METADATA_SCHEMA = {
    "type": "object",
    "required": ["name", "stability", "dependencies", "lastVerified"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "stability": {"enum": ["alpha", "beta", "stable"]},
        "dependencies": {
            "type": "object",
            "required": ["kubeflow"],
            "additionalProperties": False,
            "properties": {
                "kubeflow": {
                    "type": "array",
                    "items": _DEPENDENCY,
                    "contains": {"properties": {"name": {"const": "Pipelines"}}, "required": ["name"]},
                },
                "external_services": {"type": "array", "items": _DEPENDENCY},
            },
        },
        "lastVerified": {},  # a date-time: YAML reads it as one (checked below)
        "tags": {"type": "array", "items": {"type": "string"}},
        "ci": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"skip_dependency_probe": {"type": "boolean"}},
        },
        "links": {"type": "object"},
        "managed": {"type": "boolean"},
        "description": {"type": "string"},
    },
}
FOLDER_COMPONENTS = [c for c in COMPONENTS if c.doc_path != INDEX]


@pytest.mark.parametrize("documented", FOLDER_COMPONENTS, ids=lambda c: c.label)
def test_metadata_follows_the_pipelines_components_schema(documented):
    path = documented.doc_path.parent / "metadata.yaml"
    where = path.relative_to(REPO_ROOT).as_posix()
    assert path.exists(), f"no {where} beside the component"
    metadata = yaml.safe_load(path.read_text(encoding="utf-8"))
    problems = [
        f"{'.'.join(map(str, error.absolute_path)) or 'top level'}: {error.message}"
        for error in jsonschema.Draft202012Validator(METADATA_SCHEMA).iter_errors(metadata)
    ]
    assert not problems, f"{where}: " + "; ".join(sorted(problems))
    assert metadata["name"] == path.parent.name, f"{where}: name is not the folder's"
    verified = metadata["lastVerified"]
    assert isinstance(verified, datetime.datetime) and verified.tzinfo is not None, (
        f"{where}: lastVerified={verified!r} is not a date-time with its zone (2026-11-25T00:00:00Z)"
    )


# --- tests where the component is -------------------------------------------------------------

_LOCAL_RUN = re.compile(r"\brun_pipeline\(|\blocal\.init\(")


@dataclasses.dataclass(frozen=True)
class ComponentTests:
    """Where a component's tests are and how they name it."""

    where: pathlib.Path  # the mirrored folder, or validate_run's module
    modules: list[pathlib.Path]
    component_module: str  # imported by the test that runs it under kfp.local
    plain: re.Pattern[str]  # how a unit test reaches the plain function


def component_tests(documented: DocumentedComponent) -> ComponentTests:
    if documented.doc_path == INDEX:  # validate_run, with the pipelines
        path = TESTS_DIR / "pipelines" / "test_validate_run.py"
        return ComponentTests(
            path,
            [path] if path.exists() else [],
            "kfstack.pipelines.validate_run",
            re.compile(r"kfstack\.pipelines\.rendering import .*\bcheck_run_parameters\b"),
        )
    folder = TESTS_DIR / "components" / documented.label
    package = re.escape("kfstack.components." + documented.label.replace("/", "."))
    return ComponentTests(
        folder,
        sorted(folder.glob("test_*.py")),
        f"kfstack.components.{documented.label.replace('/', '.')}.component",
        # core.py or stage.py, or the component's own function where it has neither.
        re.compile(rf"{package}(\.| import )(core|stage)\b|\.python_func\b"),
    )


@pytest.mark.parametrize("documented", COMPONENTS, ids=lambda c: c.label)
def test_every_component_has_unit_and_kfp_local_tests_where_it_is(documented):
    tests = component_tests(documented)
    where = tests.where.relative_to(REPO_ROOT).as_posix()
    assert tests.modules, f"{documented.label}: no test module in {where}"
    texts = {path.name: path.read_text(encoding="utf-8") for path in tests.modules}
    assert any(tests.plain.search(text) for text in texts.values()), (
        f"{where}: no unit test of {documented.label}'s plain function (its core or stage module, "
        f"or the component's python_func)"
    )
    runs = [
        name
        for name, text in texts.items()
        if f"{tests.component_module} import" in text and _LOCAL_RUN.search(text)
    ]
    assert runs, f"{where}: no test imports {tests.component_module} and runs it under kfp.local"
