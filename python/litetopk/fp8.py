"""fp8 e4m3 (OCP, torch.float8_e4m3fn) as uint8 bytes in numpy, which has no fp8 dtype.

`E4M3_VALUES[b]` is the float32 value of byte b (NaN for 0x7F and 0xFF); `to_e4m3` rounds float32
to the nearest e4m3 byte (ties to even, saturating at +-448, NaN to 0x7F).
"""
import numpy as np


def _values():
    bits = np.arange(256, dtype=np.uint32)
    sign = np.where(bits & 0x80, -1.0, 1.0)
    exponent = (bits >> 3) & 0xF
    mantissa = (bits & 0x7).astype(np.float64)
    magnitude = np.where(exponent == 0, mantissa / 8.0 * 2.0 ** -6,
                         (1.0 + mantissa / 8.0) * 2.0 ** (exponent.astype(np.float64) - 7))
    values = (sign * magnitude).astype(np.float32)
    values[[0x7F, 0xFF]] = np.nan
    return values


E4M3_VALUES = _values()
E4M3_MAX = 448.0
_POSITIVE = E4M3_VALUES[:0x7F].astype(np.float64)  # bytes 0x00 .. 0x7E, ascending


def from_e4m3(data):
    """float32 values of an array of e4m3 bytes (uint8)."""
    return E4M3_VALUES[np.asarray(data, dtype=np.uint8)]


def to_e4m3(x):
    """The nearest e4m3 bytes (uint8) of float values: ties to the even byte, |x| > 448 saturates."""
    x = np.asarray(x, dtype=np.float64)
    magnitude = np.minimum(np.abs(x), E4M3_MAX)
    upper = np.clip(np.searchsorted(_POSITIVE, magnitude), 0, len(_POSITIVE) - 1)
    lower = np.maximum(upper - 1, 0)
    below = magnitude - _POSITIVE[lower]
    above = _POSITIVE[upper] - magnitude
    pick_lower = (below < above) | ((below == above) & (lower % 2 == 0))
    byte = np.where(pick_lower, lower, upper).astype(np.uint8)
    byte = np.where(np.signbit(x), byte | 0x80, byte).astype(np.uint8)
    return np.where(np.isnan(x), np.uint8(0x7F), byte).astype(np.uint8)


def random_e4m3(rng, shape, scale=1.0):
    """e4m3 bytes of rng.standard_normal(shape) * scale."""
    return to_e4m3(rng.standard_normal(shape) * scale)
