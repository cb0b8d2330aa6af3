"""Data drift: a new data window's profile against the profile of the data production was
trained on.

A profile (``profile.json``, :mod:`kfstack.monitoring.profiling` or a data step of a team's
own) holds per numeric feature its missing share and a histogram over fixed edges, per
categorical feature the shares of its most frequent values, and the label rate per split. The
new window's profile must be computed with the reference's histogram edges (profiled with the
reference, or by a data step given the reference's profile), so that the bins compare; values
beyond the reference's range fall into its edge bins, where a shift shows.

**Per feature, the population stability index** (PSI) of the new shares against the reference's,
``sum((a - e) * ln(a / e))``, a share below :data:`SHARE_FLOOR` counted as the floor (an empty
bin on one side would otherwise make it infinite):

- numeric: the histogram's bins plus one bin for missing values;
- categorical: every value either profile lists, plus one bin for everything else (a value the
  reference never saw counts at the floor there, so a new category shows as drift).

**The label rate shift**: the absolute difference of the training split's label rates.

**Decision** (:class:`DriftThresholds`, pipeline parameters): drifted when any feature's PSI
exceeds ``max_psi`` (0.2 is the customary "significant shift" line; 0.1 "some") or the label rate
moved by more than ``max_label_rate_shift``, or the feature set changed (a feature added or
removed since the reference: the model cannot be compared feature by feature, and a model of
the new code is wanted anyway). Features in ``ignored_features`` are measured and reported but do
not decide: a feature that encodes the calendar (the month, the day of the year) differs between
any two windows by construction.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from kfstack.errors import InvalidParameterError
from kfstack.settings import Settings, setting

SHARE_FLOOR = 1e-4
MISSING = "(missing)"
OTHER = "(other)"
# The split whose label rate is compared (the data a model is trained on).
TRAIN_SPLIT = "train"


def population_stability(
    expected: Sequence[float], actual: Sequence[float], floor: float = SHARE_FLOOR
) -> float:
    """PSI of ``actual`` shares against ``expected`` shares over the same bins (each sums to 1;
    shares below ``floor`` count as ``floor``)."""
    if len(expected) != len(actual):
        raise InvalidParameterError(f"PSI over {len(expected)} and {len(actual)} bins: the bins must match")
    total = 0.0
    for e, a in zip(expected, actual, strict=True):
        e, a = max(e, floor), max(a, floor)
        total += (a - e) * math.log(a / e)
    return total


def _shares(counts: Sequence[float]) -> list[float]:
    total = float(sum(counts))
    return [c / total for c in counts] if total else [0.0] * len(counts)


def numeric_shares(entry: Mapping[str, Any]) -> list[float]:
    """A numeric feature's profile as shares: the missing share, then each histogram bin's."""
    missing = float(entry.get("missing_fraction") or 0.0)
    present = _shares(entry["histogram"]["counts"])
    return [missing, *(share * (1.0 - missing) for share in present)]


def numeric_psi(name: str, reference: Mapping[str, Any], current: Mapping[str, Any]) -> float:
    """PSI of one numeric feature.

    Raises:
        InvalidParameterError: The two histograms have different edges.
    """
    if not _same_edges(reference["histogram"]["edges"], current["histogram"]["edges"]):
        raise InvalidParameterError(
            f"drift of {name}: the profiles' histograms have different edges; compute the new window's "
            f"profile with the reference's (the feature job's --reference-profile-uri)"
        )
    return population_stability(numeric_shares(reference), numeric_shares(current))


def _same_edges(a: Sequence[float], b: Sequence[float]) -> bool:
    return len(a) == len(b) and all(
        math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) for x, y in zip(a, b, strict=True)
    )


def categorical_shares(entry: Mapping[str, Any], values: Sequence[str]) -> list[float]:
    """A categorical feature's profile as shares over ``values``, then everything else."""
    top = entry.get("top_values") or {}
    listed = [float(top.get(v, 0.0)) for v in values]
    return [*listed, max(0.0, 1.0 - sum(listed))]


def categorical_psi(reference: Mapping[str, Any], current: Mapping[str, Any]) -> float:
    """PSI of one categorical feature over the values either profile lists, plus the rest."""
    values = sorted(set(reference.get("top_values") or {}) | set(current.get("top_values") or {}))
    return population_stability(categorical_shares(reference, values), categorical_shares(current, values))


def label_rate(profile: Mapping[str, Any]) -> float | None:
    """The training split's label rate (None when the profile has no such split)."""
    split = (profile.get("splits") or {}).get(TRAIN_SPLIT) or {}
    rate = split.get("label_rate")
    return None if rate is None else float(rate)


@dataclasses.dataclass(frozen=True)
class DriftThresholds(Settings):
    """The drift decision's limits (see the module docstring)."""

    concern = "drift thresholds"

    max_psi: float = setting(0.2, gt=0.0)
    max_label_rate_shift: float = setting(0.05, ge=0.0, le=1.0)
    ignored_features: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class DriftReport:
    """Per-feature PSI, the label rate shift and the decision."""

    psi: dict[str, float]
    label_rate_reference: float | None
    label_rate_current: float | None
    thresholds: DriftThresholds
    added_features: tuple[str, ...] = ()
    removed_features: tuple[str, ...] = ()

    @property
    def label_rate_shift(self) -> float | None:
        if self.label_rate_reference is None or self.label_rate_current is None:
            return None
        return abs(self.label_rate_current - self.label_rate_reference)

    @property
    def drifted_features(self) -> list[str]:
        ignored = self.thresholds.ignored_features
        return sorted(
            name
            for name, value in self.psi.items()
            if value > self.thresholds.max_psi and name not in ignored
        )

    @property
    def max_psi(self) -> float:
        """The largest PSI among the features that decide (the ignored ones left out)."""
        ignored = self.thresholds.ignored_features
        return max((value for name, value in self.psi.items() if name not in ignored), default=0.0)

    @property
    def feature_set_changed(self) -> bool:
        return bool(self.added_features or self.removed_features)

    @property
    def label_drifted(self) -> bool:
        shift = self.label_rate_shift
        return shift is not None and shift > self.thresholds.max_label_rate_shift

    @property
    def drifted(self) -> bool:
        return bool(self.drifted_features) or self.label_drifted or self.feature_set_changed

    def summary(self) -> dict[str, Any]:
        """A run summary's ``drift`` entry."""
        return {
            "drifted": self.drifted,
            "drifted_features": self.drifted_features,
            "psi": {name: round(value, 6) for name, value in sorted(self.psi.items())},
            "max_psi": round(self.max_psi, 6),
            "label_rate": {"reference": self.label_rate_reference, "current": self.label_rate_current},
            "label_rate_shift": None if self.label_rate_shift is None else round(self.label_rate_shift, 6),
            "label_drifted": self.label_drifted,
            "ignored_features": list(self.thresholds.ignored_features),
            "added_features": list(self.added_features),
            "removed_features": list(self.removed_features),
        }

    def markdown(self) -> str:
        lines = [
            f"# Data drift: **{'drifted' if self.drifted else 'no drift'}**",
            "",
            f"PSI limit {self.thresholds.max_psi}; label rate shift limit "
            f"{self.thresholds.max_label_rate_shift}.",
            "",
            "| feature | PSI | |",
            "|---|---|---|",
        ]
        drifted = set(self.drifted_features)
        for name, value in sorted(self.psi.items(), key=lambda item: -item[1]):
            note = (
                "**drifted**"
                if name in drifted
                else "ignored"
                if name in self.thresholds.ignored_features
                else ""
            )
            lines.append(f"| {name} | {value:.4f} | {note} |")
        shift = self.label_rate_shift
        lines += [
            "",
            f"Label rate (train split): reference {_rate(self.label_rate_reference)}, new window "
            f"{_rate(self.label_rate_current)}, shift {'undefined' if shift is None else f'{shift:.4f}'}"
            f"{' (**drifted**)' if self.label_drifted else ''}.",
        ]
        if self.feature_set_changed:
            lines += [
                "",
                f"**The feature set changed**: added {', '.join(self.added_features) or 'none'}; removed "
                f"{', '.join(self.removed_features) or 'none'}.",
            ]
        return "\n".join(lines) + "\n"


def feature_names(text: str) -> tuple[str, ...]:
    """Feature names from a comma-separated parameter (``"month, day_of_year"``; empty: none)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _rate(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.4f}"


def compare_profiles(
    reference: Mapping[str, Any], current: Mapping[str, Any], thresholds: DriftThresholds
) -> DriftReport:
    """The drift of ``current`` against ``reference`` (both feature-job profiles, ``current``
    binned on the reference's edges). Features only one of them has are reported as added or
    removed (and decide: the feature set changed); the others are compared.

    Raises:
        InvalidParameterError: A feature both have is binned on different edges (``current`` was
            not profiled against this reference), or an ignored feature neither has.
    """
    psi: dict[str, float] = {}
    added: set[str] = set()
    removed: set[str] = set()
    for kind in ("numeric", "categorical"):
        ref, cur = reference.get(kind) or {}, current.get(kind) or {}
        added |= set(cur) - set(ref)
        removed |= set(ref) - set(cur)
        for name in sorted(set(ref) & set(cur)):
            psi[name] = (
                numeric_psi(name, ref[name], cur[name])
                if kind == "numeric"
                else categorical_psi(ref[name], cur[name])
            )
    # A feature that changed kind is both: removed as one, added as the other.
    unknown = sorted(set(thresholds.ignored_features) - set(psi) - added - removed)
    if unknown:
        raise InvalidParameterError(
            f"drift_ignore_features names no feature of the profiles: {', '.join(unknown)}"
        )
    return DriftReport(
        psi,
        label_rate(reference),
        label_rate(current),
        thresholds,
        added_features=tuple(sorted(added)),
        removed_features=tuple(sorted(removed)),
    )
