"""Lines of code a team writes for kfstack: a pipeline's page, counted as code (imports included;
docstrings, comments and blank lines excluded), plus any line of its training code that exists
for kfstack alone (declarations a team's code would not have otherwise).

    python -m benchmarks.page_lines

Counts digits' page, the page ``kfstack init`` writes (PyTorch, standard serving) and the
diabetes test project's (tests/team_project/src/), and how many places beside the code's own
signature or parser write one hyperparameter.
"""

from __future__ import annotations

import ast
import io
import json
import pathlib
import sys
import tempfile
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[1]


def code_lines(source: str) -> int:
    """The lines holding code: not blank, not only a comment, not inside a docstring."""
    tree = ast.parse(source)
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstrings.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    counted: set[int] = set()
    ignored = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in ignored or token.type == tokenize.ENDMARKER:
            continue
        for line in range(token.start[0], token.end[0] + 1):
            if line not in docstrings:
                counted.add(line)
    return len(counted)


def for_kfstack(source: str, names: tuple[str, ...]) -> int:
    """Code lines of the module-level assignments to ``names`` (``HYPERPARAMETERS = {...}``)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    total = 0
    for node in tree.body:
        targets = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        if set(targets) & set(names):
            total += code_lines("\n".join(lines[node.lineno - 1 : node.end_lineno]))
    return total


DECLARATIONS = ("HYPERPARAMETERS", "METRICS")


def measure(page: pathlib.Path, code: pathlib.Path) -> dict[str, int]:
    page_lines = code_lines(page.read_text())
    declared = for_kfstack(code.read_text(), DECLARATIONS)
    return {"page": page_lines, "declarations in the code": declared, "total": page_lines + declared}


def main() -> int:
    from kfstack.app import cli

    examples = ROOT / "examples" / "kfstack_examples"
    results = {
        "digits": measure(examples / "digits" / "pipeline.py", examples / "digits" / "trainer.py"),
        "diabetes test project": measure(
            ROOT / "tests" / "team_project" / "src" / "diabetes" / "pipeline.py",
            ROOT / "tests" / "team_project" / "src" / "diabetes" / "train.py",
        ),
    }
    with tempfile.TemporaryDirectory() as scratch:
        project = pathlib.Path(scratch) / "churn"
        if cli.main(["init", str(project), "--framework", "pytorch"]) != 0:
            return 1
        package = project / "churn"
        results["init template (pytorch, standard)"] = measure(package / "pipeline.py", package / "train.py")
    json.dump(results, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
