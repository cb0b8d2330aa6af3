"""Live drift: the rows a model server answers, against its training profile, as they come.

The batch drift check (:mod:`kfstack.monitoring.drift`) compares a new data window's profile with
the training profile when a scheduled run comes; a model server sees the same features all the
time. :class:`LiveDrift` keeps the last ``window_rows`` rows it was given (count-based, not
time-based: a quiet hour and a busy minute weigh the same) **binned on the reference profile's
own bins** as they arrive:

- numeric: the missing bin (None, NaN and the infinities, as
  :func:`kfstack.monitoring.profiling.profile_dataset` counts missing), then the histogram's bins,
  a value beyond the edges in the end bin on its side, exactly as the batch profile bins;
- categorical: the values the reference lists (a value is its ``str``; None is
  :data:`~kfstack.monitoring.drift.MISSING`; a whole float such as ``3.0`` from a numeric matrix
  is ``"3"``, as the integer column it was profiled from), then one bin for every other value.

So a row costs O(features) and the window a fixed ring of bin indices plus the running counts
(NumPy, vectorised over a request's rows). The PSI is computed only when asked
(:meth:`LiveDrift.report`, when ``/metrics`` is scraped), with the one
:func:`~kfstack.monitoring.drift.population_stability` of the batch check, and only once the
window is full: on fewer rows the index is mostly sampling noise.

One difference from the batch check, on purpose: a category the reference never listed counts in
its "other" bin here, where the batch check gives each new value a bin of its own. The window
then needs no memory for values it cannot foresee; a new category still shows, as a rise of
"other" (and strongly where the reference lists every value it saw, its "other" share 0).

The drift thresholds' ``ignored_features`` are measured (each keeps its own PSI) but left out of
:attr:`LiveDriftReport.max_psi`, the figure an alert compares, as the batch decision leaves them
out.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
import logging
import math
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kfstack.errors import InvalidParameterError
from kfstack.monitoring.drift import (
    MISSING,
    DriftThresholds,
    categorical_shares,
    numeric_shares,
    population_stability,
)
from kfstack.monitoring.profiling import PROFILE_FILE
from kfstack.settings import Settings, setting

logger = logging.getLogger("kfstack.live_drift")

# Rows a window holds by default: where undrifted traffic stays below the default PSI line at
# every scrape (BENCHMARKS.md, "Live drift": the false-alarm measurement).
DEFAULT_WINDOW_ROWS = 2000
# A profile of a model that takes a matrix may name its columns in order (column i is the i-th
# name): how a request's rows by position map onto the profiled features.
FEATURE_ORDER_KEY = "feature_order"
# auto: on where the model directory has a profile whose features the requests carry, else off
# with the reason logged; on: a server that cannot watch refuses to start; off: never.
AUTO, ON, OFF = "auto", "on", "off"
MODES = (AUTO, ON, OFF)


@dataclasses.dataclass(frozen=True)
class LiveDriftSettings(Settings):
    """A model server's live drift (its ``--live_drift*`` flags): the mode (:data:`MODES`), the
    window's rows, and the drift check's PSI limit and ignored features (defaults: the batch
    check's, :class:`~kfstack.monitoring.drift.DriftThresholds`)."""

    concern = "live drift"

    mode: str = setting(AUTO, choices=MODES)
    window_rows: int = setting(DEFAULT_WINDOW_ROWS, ge=1)
    max_psi: float = setting(DriftThresholds.max_psi, gt=0.0)
    ignored_features: tuple[str, ...] = ()

    @property
    def thresholds(self) -> DriftThresholds:
        return DriftThresholds(max_psi=self.max_psi, ignored_features=self.ignored_features)


@dataclasses.dataclass(frozen=True)
class FeatureBins:
    """One profiled feature's bins and the reference's share in each (see the module docstring).

    Attributes:
        name: The feature.
        numeric: A numeric feature (else categorical).
        expected: The reference's shares, bin by bin: numeric ``[missing, *histogram]``,
            categorical ``[*values, other]``.
        edges: A numeric feature's histogram edges.
        values: A categorical feature's listed values.
    """

    name: str
    numeric: bool
    expected: tuple[float, ...]
    edges: tuple[float, ...] = ()
    values: tuple[str, ...] = ()


class Reference:
    """A training profile as the bins a window counts in: its numeric features, then its
    categorical ones, each in the profile's order.

    Raises:
        InvalidParameterError: The profile has no feature, or a numeric one without edges.
    """

    def __init__(self, profile: Mapping[str, Any]) -> None:
        features: list[FeatureBins] = []
        for name, entry in (profile.get("numeric") or {}).items():
            try:
                edges = tuple(float(e) for e in entry["histogram"]["edges"])
                expected = numeric_shares(entry)
            except (KeyError, TypeError, ValueError) as err:
                raise InvalidParameterError(
                    f"profile: numeric feature {name} has no histogram ({err})"
                ) from None
            if len(edges) < 2:
                raise InvalidParameterError(f"profile: numeric feature {name} has fewer than two edges")
            features.append(FeatureBins(name, True, tuple(expected), edges=edges))
        for name, entry in (profile.get("categorical") or {}).items():
            values = tuple(str(v) for v in (entry.get("top_values") or {}))
            features.append(FeatureBins(name, False, tuple(categorical_shares(entry, values)), values=values))
        if not features:
            raise InvalidParameterError("profile: no numeric or categorical feature to watch")
        self.features = tuple(features)
        order = profile.get(FEATURE_ORDER_KEY)
        self.feature_order: tuple[str, ...] | None = tuple(order) if order else None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features)


def read_reference(model_dir: str) -> Reference | None:
    """The reference of the model directory's ``profile.json``; None when it has none.

    Raises:
        InvalidParameterError: The file is not a profile (:class:`Reference`).
    """
    path = os.path.join(model_dir, PROFILE_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            profile = json.load(f)
    except (OSError, ValueError) as err:
        raise InvalidParameterError(f"{path}: not a readable profile ({err})") from None
    if not isinstance(profile, dict):
        raise InvalidParameterError(f"{path}: not a profile (a JSON object)")
    return Reference(profile)


def category_key(value: Any) -> str:
    """The name a categorical value has in a profile (see the module docstring)."""
    if value is None:
        return MISSING
    if isinstance(value, str):
        return value
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _floats(values: Any, name: str) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64).reshape(-1)
    except TypeError:  # None among numbers: missing
        pass
    except ValueError as err:
        raise InvalidParameterError(f"live drift: feature {name} is not numeric ({err})") from None
    try:
        return np.array([math.nan if v is None else v for v in values], dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise InvalidParameterError(f"live drift: feature {name} is not numeric ({err})") from None


@dataclasses.dataclass(frozen=True)
class LiveDriftReport:
    """A full window's PSI per feature; ``max_psi`` over the features that decide."""

    psi: dict[str, float]
    ignored_features: tuple[str, ...]

    @property
    def max_psi(self) -> float:
        return max((v for k, v in self.psi.items() if k not in self.ignored_features), default=0.0)

    def drifted_features(self, max_psi: float) -> list[str]:
        return sorted(k for k, v in self.psi.items() if v > max_psi and k not in self.ignored_features)


class LiveDrift:
    """The last ``window_rows`` rows a server answered, binned on ``reference`` (see the module
    docstring). Thread-safe: requests observe while a scrape reports.

    Args:
        reference: The training profile's bins.
        window_rows: Rows the window holds; the PSI is reported once it holds that many.
        thresholds: ``max_psi`` (a report above it is logged once per crossing) and the
            ``ignored_features`` left out of the max.
        columns: The names of a matrix's columns, in order, for :meth:`observe` of a matrix
            (rows by position); None: batches come by name only.

    Raises:
        InvalidParameterError: ``window_rows`` below 1; an ignored feature or a profiled feature
            that ``columns`` lacks.
    """

    def __init__(
        self,
        reference: Reference,
        window_rows: int = DEFAULT_WINDOW_ROWS,
        thresholds: DriftThresholds | None = None,
        columns: Sequence[str] | None = None,
    ) -> None:
        if window_rows < 1:
            raise InvalidParameterError(f"live_drift_window_rows: {window_rows}; at least 1 row")
        self.reference = reference
        self.window_rows = window_rows
        self.thresholds = thresholds or DriftThresholds()
        unknown = sorted(set(self.thresholds.ignored_features) - set(reference.names))
        if unknown:
            raise InvalidParameterError(
                f"live_drift_ignore_features names no profiled feature: {', '.join(unknown)}"
            )
        features = reference.features
        self._numeric = [f for f in features if f.numeric]
        self._categorical = [f for f in features if not f.numeric]
        # Window columns: numeric features first, then categorical (the reference's order).
        sizes = np.array([len(f.expected) for f in (*self._numeric, *self._categorical)], dtype=np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self._total_bins = int(sizes.sum())
        # Equal-width histograms (what both batch profilers write) bin by arithmetic, exactly as
        # they do; any other edges by search.
        self._lo = np.array([f.edges[0] for f in self._numeric], dtype=np.float64)
        self._width = np.array([(f.edges[1] - f.edges[0]) or 1.0 for f in self._numeric], dtype=np.float64)
        self._last_bin = np.array([len(f.edges) - 2 for f in self._numeric], dtype=np.float64)
        self._uneven = [
            j
            for j, f in enumerate(self._numeric)
            if not np.allclose(np.diff(f.edges), f.edges[1] - f.edges[0], rtol=1e-9, atol=1e-12)
        ]
        self._category_index = [{v: i for i, v in enumerate(f.values)} for f in self._categorical]
        # The same bins in plain Python, for a single row (_single_row), in the window's order.
        offsets = self._offsets.tolist()
        self._numeric_plan = [
            (
                f.edges[0],
                float(self._width[j]),
                len(f.edges) - 2,
                list(f.edges[1:-1]) if j in self._uneven else None,
                offsets[j],
            )
            for j, f in enumerate(self._numeric)
        ]
        self._categorical_plan = [
            (lookup, offsets[len(self._numeric) + k]) for k, lookup in enumerate(self._category_index)
        ]
        self._window_names = [f.name for f in (*self._numeric, *self._categorical)]
        self._first_names = self._window_names[:1]
        self._positions: np.ndarray | None = None
        if columns is not None:
            self._positions = self._column_positions(columns)
        self._ring = np.zeros((window_rows, len(sizes)), dtype=np.int64)
        self._counts = np.zeros(self._total_bins, dtype=np.int64)
        self._next = 0
        self._rows = 0
        self._lock = threading.Lock()
        self._above = False

    def _column_positions(self, columns: Sequence[str]) -> np.ndarray:
        where = {name: i for i, name in enumerate(columns)}
        order = [f.name for f in (*self._numeric, *self._categorical)]
        lacking = [name for name in order if name not in where]
        if lacking:
            raise InvalidParameterError(
                f"live drift: the profile's features {', '.join(lacking)} are not among the "
                f"model's columns ({', '.join(columns)})"
            )
        return np.array([where[name] for name in order], dtype=np.int64)

    @property
    def rows(self) -> int:
        """Rows in the window now."""
        return self._rows

    def bins(self, batch: Any) -> np.ndarray:
        """Each row's bin per feature (``[rows, features]``, numeric features then categorical,
        a bin numbered within its feature): a 2-D array by position (``columns``), else any
        mapping of feature name to values (a dict of lists, a DataFrame) by name; columns the
        profile does not describe are ignored.

        Raises:
            InvalidParameterError: A profiled feature the batch lacks, a non-numeric value of a
                numeric feature, or a matrix where no ``columns`` were given.
        """
        if isinstance(batch, np.ndarray):
            if self._positions is None:
                raise InvalidParameterError("live drift: a matrix needs the model's columns in order")
            matrix = np.atleast_2d(batch)
            count = len(self._numeric)
            numeric = np.asarray(matrix[:, self._positions[:count]], dtype=np.float64)
            categorical = [matrix[:, p].tolist() for p in self._positions[count:]]
        else:
            lacking = [f.name for f in self.reference.features if f.name not in batch]
            if lacking:
                raise InvalidParameterError(f"live drift: the batch lacks the features {', '.join(lacking)}")
            numeric = self._numeric_matrix(batch)
            categorical = [batch[f.name] for f in self._categorical]
        rows = numeric.shape[0]
        out = np.empty((rows, len(self._offsets)), dtype=np.int64)
        if self._numeric:
            # NaN stays NaN through these (no warning) and is sent to the missing bin below.
            index = np.clip(np.floor((numeric - self._lo) / self._width), 0, self._last_bin)
            for j in self._uneven:
                inner = np.asarray(self._numeric[j].edges[1:-1], dtype=np.float64)
                index[:, j] = np.searchsorted(inner, numeric[:, j], side="right")
            # Bin 0 is missing; a present value's histogram bin follows it.
            out[:, : len(self._numeric)] = np.where(np.isfinite(numeric), index + 1, 0)
        for k, (values, lookup) in enumerate(zip(categorical, self._category_index, strict=True)):
            keys = values if set(map(type, values)) <= {str} else [category_key(v) for v in values]
            # dict.get mapped in C, a value not listed counting as the last bin (other).
            out[:, len(self._numeric) + k] = np.fromiter(
                map(lookup.get, keys, itertools.repeat(len(lookup), rows)), dtype=np.int64, count=rows
            )
        return out

    def _numeric_matrix(self, batch: Any) -> np.ndarray:
        """The numeric features' values, ``[rows, features]``: one conversion for the whole
        batch where every value is a number (NaN for missing), else feature by feature."""
        if not self._numeric:
            return np.zeros((len(batch[self._categorical[0].name]), 0))
        try:
            return np.array([batch[f.name] for f in self._numeric], dtype=np.float64).T
        except (TypeError, ValueError):  # None among the numbers, or a value that is no number
            return np.column_stack([_floats(batch[f.name], f.name) for f in self._numeric])

    def _single_row(self, batch: Any) -> list[int] | None:
        """The window bins (numbered across features) of a dict batch of one row, binned in
        plain Python as :meth:`bins` bins with arrays (the same IEEE arithmetic, a bisection
        for uneven edges), at a fraction of its fixed cost; None for any other batch."""
        if type(batch) is not dict:
            return None
        try:
            if any(len(batch[name]) != 1 for name in self._first_names):
                return None
            values = [batch[name][0] for name in self._window_names]
        except (KeyError, TypeError):  # a lacking feature, a value that is no column: bins() says
            return None
        row = []
        for value, (lo, width, last, inner, offset) in zip(values, self._numeric_plan, strict=False):
            try:
                x = math.nan if value is None else float(value)
            except (TypeError, ValueError):
                return None
            if not math.isfinite(x):
                row.append(offset)  # missing
            elif inner is not None:
                row.append(offset + 1 + bisect.bisect_right(inner, x))
            else:
                q = (x - lo) / width
                row.append(offset + 1 + (0 if q < 0 else last if q >= last else math.floor(q)))
        for value, (lookup, offset) in zip(
            values[len(self._numeric_plan) :], self._categorical_plan, strict=True
        ):
            row.append(offset + lookup.get(value if type(value) is str else category_key(value), len(lookup)))
        return row

    def observe(self, batch: Any) -> None:
        """Adds a batch's rows to the window (see :meth:`bins`), evicting the oldest beyond
        ``window_rows``. Call it with the rows a request was answered for, never a refused one.

        Raises:
            InvalidParameterError: See :meth:`bins`.
        """
        row = self._single_row(batch)
        size = self.window_rows
        if row is not None:  # a single record's request, the commonest: no array work
            ids = np.array(row, dtype=np.int64)
            with self._lock:
                slot = self._next
                if slot < self._rows:
                    self._counts[self._ring[slot]] -= 1  # a row's bins are distinct: no repeats
                self._ring[slot] = ids
                self._counts[ids] += 1
                self._next = (slot + 1) % size
                self._rows = min(size, self._rows + 1)
            return
        ids = self.bins(batch) + self._offsets
        with self._lock:
            if len(ids) >= size:
                self._ring[:] = ids[-size:]
                self._counts[:] = np.bincount(self._ring.ravel(), minlength=self._total_bins)
                self._next, self._rows = 0, size
                return
            slots = (self._next + np.arange(len(ids))) % size
            # Filled slots hold rows that now leave (the ring fills from slot 0 on).
            evicted = self._ring[slots[slots < self._rows]]
            if len(evicted):
                self._counts -= np.bincount(evicted.ravel(), minlength=self._total_bins)
            self._ring[slots] = ids
            self._counts += np.bincount(ids.ravel(), minlength=self._total_bins)
            self._next = (self._next + len(ids)) % size
            self._rows = min(size, self._rows + len(ids))

    def counts(self) -> dict[str, list[int]]:
        """The window's count per bin, per feature."""
        with self._lock:
            counts = self._counts.copy()
        return {
            f.name: counts[o : o + len(f.expected)].tolist()
            for f, o in zip((*self._numeric, *self._categorical), self._offsets, strict=True)
        }

    def report(self) -> LiveDriftReport | None:
        """The PSI of each feature's window shares against the reference's; None until the
        window is full. A crossing of ``max_psi`` (either way) is logged."""
        with self._lock:
            if self._rows < self.window_rows:
                return None
            counts = self._counts.copy()
        shares = counts / float(self.window_rows)
        psi = {
            f.name: population_stability(f.expected, shares[o : o + len(f.expected)].tolist())
            for f, o in zip((*self._numeric, *self._categorical), self._offsets, strict=True)
        }
        report = LiveDriftReport(psi, self.thresholds.ignored_features)
        limit = self.thresholds.max_psi
        above = report.max_psi > limit
        if above != self._above:
            self._above = above
            if above:
                logger.warning(
                    "live drift: PSI above %s over the last %d rows: %s",
                    limit,
                    self.window_rows,
                    ", ".join(f"{k} {psi[k]:.3f}" for k in report.drifted_features(limit)),
                )
            else:
                logger.info("live drift: PSI back under %s (max %.3f)", limit, report.max_psi)
        return report


class NoLiveDrift:
    """What a model's ``drift`` is where live drift is off or the model has no profile: it takes
    every batch and keeps none, so a team's model calls ``self.drift.observe(...)`` either way."""

    rows = 0

    def observe(self, batch: Any) -> None:
        return None

    def report(self) -> LiveDriftReport | None:
        return None


NO_LIVE_DRIFT = NoLiveDrift()
