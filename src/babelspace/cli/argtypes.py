"""argparse value types shared by the subcommands."""

from __future__ import annotations

import argparse
import math


def positive_int(value: str) -> int:
    return _bounded_int(value, 1, "a positive integer")


def _bounded_int(value: str, low: int, what: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value!r}") from None
    if n < low:
        raise argparse.ArgumentTypeError(f"expected {what}, got {n}")
    return n


def non_negative_int(value: str) -> int:
    return _bounded_int(value, 0, "an integer >= 0")


def finite_float(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {value!r}")
    return x


def open_fraction(value: str) -> float:
    """A number strictly between 0 and 1 (a precision target, a quantile)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, not {value!r}") from None
    if not 0 < number < 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1 (exclusive), not {value}")
    return number


def comma_list(value: str) -> list[str]:
    """``de,fr, ja`` -> ``["de", "fr", "ja"]`` (empty items dropped)."""
    return [v.strip() for v in value.split(",") if v.strip()]
