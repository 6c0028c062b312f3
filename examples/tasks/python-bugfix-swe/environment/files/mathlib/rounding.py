"""Rounding helpers with the rules people expect from a calculator."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal


def round_half_up(x: float, ndigits: int = 0) -> float:
    """Round to `ndigits` decimals, halves away from zero (2.5 -> 3, -2.5 -> -3, 2.675 -> 2.68 at 2 digits).

    Unlike the built-in round(), which rounds halves to even and works on the binary value, this rounds the
    decimal value as it is written.
    """
    quantum = Decimal(1).scaleb(-ndigits)
    return float(Decimal(repr(x)).quantize(quantum, rounding=ROUND_HALF_UP))


def clamp(x: float, low: float, high: float) -> float:
    """Limit x to the closed interval [low, high]."""
    if low > high:
        raise ValueError(f"empty interval [{low}, {high}]")
    return max(low, min(high, x))
