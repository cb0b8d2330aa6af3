"""Every relative link in the project's Markdown leads somewhere: the file exists, and an
``#anchor`` names a heading of the file it points at (GitHub's anchor rules: lower case, spaces
to ``-``, punctuation dropped). External links are not fetched (there is no network); they are
only required to be ``http(s)://`` or ``mailto:``."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

# [text](target) and [text](target "title"), not images' sources inside code.
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def markdown_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [REPO_ROOT / name for name in listed]


def prose(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text only
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for line in prose(path):
        match = HEADING.match(line)
        if match:
            base, n = anchor(match.group(2)), 1
            name = base
            while name in found:  # repeated headings: -1, -2, ...
                name, n = f"{base}-{n}", n + 1
            found.add(name)
    return found


def test_the_anchor_rules_are_githubs():
    assert (
        anchor("Retraining: drift-gated, champion/challenger") == "retraining-drift-gated-championchallenger"
    )
    assert anchor("Lineage and `kfstack reproduce`") == "lineage-and-kfstack-reproduce"
    assert (
        anchor("On a Kubeflow cluster: upload, run, schedule") == "on-a-kubeflow-cluster-upload-run-schedule"
    )


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_and_anchor_leads_somewhere(path):
    broken = []
    for line in prose(path):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file_part, _, fragment = target.partition("#")
            destination = (path.parent / file_part).resolve() if file_part else path
            if not destination.exists():
                broken.append(f"{target}: no such file")
            elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
                broken.append(f"{target}: no heading #{fragment} in {destination.name}")
    assert not broken, f"{path.relative_to(REPO_ROOT)}: " + "; ".join(broken)
