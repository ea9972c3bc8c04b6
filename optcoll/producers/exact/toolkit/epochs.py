"""Durations in whole epochs: the exact common unit of a set of durations (docs/model.md §6).

Shared by the timed model's grids (``timed.grid``) and the direct AllReduce model's epochs
(``allreduce.problem``): one rule for when float seconds are a whole number of one quantum.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

#: Relative slack when deciding that a float duration is an integer number of quanta.
TOLERANCE = 1e-9
#: Relative slack when recognising a ratio of durations as a fraction (float noise is ~1e-16).
RATIO_TOLERANCE = 1e-12
#: A time-expanded grid with more epochs per link than this is too fine to be worth it.
MAX_EPOCHS_PER_LINK = 24


def exact_unit(values: np.ndarray, max_units: int) -> float | None:
    """The largest q making every value an integer multiple of q with at most ``max_units`` each.

    Works with ratios to the smallest positive value as fractions, so float noise in e.g.
    800.5e-6 and 533.8333e-6 s does not hide that 1/6 µs divides both.
    """
    positive = values[values > 0]
    if positive.size == 0:
        return None
    ref = float(positive.min())
    denominator = 1
    for ratio in np.unique(positive / ref).tolist():
        frac = Fraction(ratio).limit_denominator(max_units)
        if abs(float(frac) - ratio) > RATIO_TOLERANCE * ratio:
            return None
        denominator = math.lcm(denominator, frac.denominator)
        if denominator > max_units:
            return None
    unit = ref / denominator
    if float(positive.max()) / unit > max_units * (1 + TOLERANCE):
        return None
    return unit
