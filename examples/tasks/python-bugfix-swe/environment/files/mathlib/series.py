"""Transformations of ordered series of numbers."""

from __future__ import annotations

from collections.abc import Iterable


def cumulative_sum(values: Iterable[float]) -> list[float]:
    """Running totals: [a, a+b, a+b+c, ...]."""
    out: list[float] = []
    total = 0.0
    for v in values:
        total += v
        out.append(total)
    return out


def differences(values: Iterable[float]) -> list[float]:
    """Differences between consecutive values: [b-a, c-b, ...]."""
    data = list(values)
    return [b - a for a, b in zip(data, data[1:])]


def moving_average(values: Iterable[float], window: int) -> list[float]:
    """Simple moving average: the mean of every run of `window` consecutive values, in order.

    For n values this yields n - window + 1 averages. `window` must be between 1 and n, otherwise
    ValueError is raised.
    """
    data = [float(v) for v in values]
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    if window > len(data):
        raise ValueError(f"window {window} is larger than the number of values ({len(data)})")
    return [sum(data[i:i + window]) / window for i in range(len(data) - window)]
