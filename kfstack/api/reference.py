"""Writes docs/api.md, the public API's reference, from the API's own modules: each module's
summary, then every name its ``__all__`` lists with its kind and the first line of its docstring.

``python -m kfstack.api.reference`` rewrites the page; tests/api/test_public_api.py fails when the
page and the modules differ.
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import sys
import typing
from types import ModuleType
from typing import Any

MODULES = (
    "kfstack.api",
    "kfstack.api.pipeline",
    "kfstack.api.spark",
    "kfstack.api.training",
    "kfstack.api.serving",
    "kfstack.api.stages",
)
PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "api.md"


def _summary(text: str | None) -> str:
    """The first paragraph of a docstring, on one line."""
    paragraph = inspect.cleandoc(text or "").split("\n\n")[0]
    return " ".join(paragraph.split())


def _kind(value: Any) -> str:
    if typing.get_origin(value) is not None:
        return "type"
    if inspect.isclass(value):
        return "class"
    if hasattr(value, "component_spec"):
        return "component"
    if callable(value):
        return "function"
    return f"constant ({type(value).__name__})"


def _described(value: Any) -> str:
    """What a name is: its docstring's first paragraph (a component's description); a plain
    constant's value."""
    if typing.get_origin(value) is not None:
        return f"`{value}`"
    if inspect.isclass(value) or callable(value):
        doc = value.component_spec.description if hasattr(value, "component_spec") else value.__doc__
        return _summary(doc)
    if isinstance(value, (str, int, float, bool, tuple)) and len(repr(value)) <= 80:
        return f"`{value!r}`"
    return _summary(type(value).__doc__)


def module_section(module: ModuleType) -> list[str]:
    lines = [f"## `{module.__name__}`", "", _summary(module.__doc__), ""]
    lines += ["| name | kind | what |", "|---|---|---|"]
    for name in sorted(module.__all__, key=str.lower):
        value = getattr(module, name)
        cells = (f"`{name}`", _kind(value), _described(value))
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return [*lines, ""]


def page() -> str:
    modules = [importlib.import_module(name) for name in MODULES]
    names = sum(len(module.__all__) for module in modules)
    lines = [
        "# The public API",
        "",
        "Written by `python -m kfstack.api.reference` from the modules of `kfstack/api/`; a test "
        "keeps it in step with them. These are the names a team's code and pipelines import; "
        "every other module under `kfstack` is internal and may change in any release. "
        f"{len(modules)} modules, {names} names.",
        "",
        "The compatibility promise, from `kfstack/api/__init__.py`:",
        "",
    ]
    (promise,) = [
        paragraph
        for paragraph in inspect.cleandoc(modules[0].__doc__ or "").split("\n\n")
        if paragraph.startswith("The compatibility promise")
    ]
    lines += ["> " + " ".join(promise.split()), ""]
    for module in modules:
        lines += module_section(module)
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> int:
    PAGE.write_text(page())
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
