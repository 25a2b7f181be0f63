"""Rounding for JSON output: never NaN, numbers rounded for display only."""

from __future__ import annotations

import math

#: Decimal places of percentages (scores, interval ends) in ``to_dict``.
PERCENT_DP = 4
#: Decimal places of fractions (rates, kappa, alpha, tau) in ``to_dict``.
FRACTION_DP = 4


def _round(value: float | None, dp: int) -> float | None:
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value):
        return None
    return round(value, dp)


def percent(value: float | None) -> float | None:
    """Round a percentage for JSON; None for None or a non-finite value."""
    return _round(value, PERCENT_DP)


def fraction(value: float | None) -> float | None:
    """Round a fraction for JSON; None for None or a non-finite value."""
    return _round(value, FRACTION_DP)
