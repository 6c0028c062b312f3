"""mathlib: small numeric helpers for reports."""

from .rounding import clamp, round_half_up
from .series import cumulative_sum, differences, moving_average
from .stats import mean, median, variance

__all__ = ["clamp", "cumulative_sum", "differences", "mean", "median", "moving_average", "round_half_up",
           "variance"]
__version__ = "0.4.2"
