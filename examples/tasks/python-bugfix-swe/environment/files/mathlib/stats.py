"""Summary statistics over sequences of numbers."""

from __future__ import annotations

from collections.abc import Iterable


def _as_floats(values: Iterable[float]) -> list[float]:
    data = [float(v) for v in values]
    if not data:
        raise ValueError("at least one value is required")
    return data


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean. Raises ValueError for an empty input."""
    data = _as_floats(values)
    return sum(data) / len(data)


def median(values: Iterable[float]) -> float:
    """Middle value; the mean of the two middle values for an even count. Raises ValueError when empty."""
    data = sorted(_as_floats(values))
    mid = len(data) // 2
    if len(data) % 2:
        return data[mid]
    return (data[mid - 1] + data[mid]) / 2


def variance(values: Iterable[float], *, sample: bool = False) -> float:
    """Population variance, or the sample variance (n - 1 denominator) with sample=True."""
    data = _as_floats(values)
    if sample and len(data) < 2:
        raise ValueError("the sample variance needs at least two values")
    m = sum(data) / len(data)
    return sum((x - m) ** 2 for x in data) / (len(data) - 1 if sample else len(data))
