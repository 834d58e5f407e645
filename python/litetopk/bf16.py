"""bfloat16 as uint16 bits in numpy, which has no bf16 dtype (ml_dtypes.bfloat16 arrays are taken
too, by their bits).

`to_bf16_bits` rounds float32 to the nearest bf16 (ties to even, NaN to a quiet NaN), as torch's
`.to(torch.bfloat16)` does; `from_bf16_bits` widens bits to float32 exactly.
"""
import numpy as np


def to_bf16_bits(x):
    """The bits (uint16) of the nearest bf16 of float values: ties to even, overflow to inf."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    quiet_nan = ((bits >> 16) | 0x40).astype(np.uint16)
    return np.where(np.isnan(x), quiet_nan, rounded).astype(np.uint16)


def from_bf16_bits(bits):
    """float32 values of bf16 bits (uint16), exactly."""
    bits = np.ascontiguousarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def as_bf16_bits(x, name):
    """bf16 bits (uint16, C-contiguous) of an array of bf16 bits (uint16), ml_dtypes.bfloat16 or
    float32 (rounded to the nearest bf16), in any byte order; ValueError naming `name` for
    anything else."""
    x = np.asarray(x)
    if not x.dtype.isnative:
        x = x.astype(x.dtype.newbyteorder("="))
    if x.dtype == np.uint16:
        return np.ascontiguousarray(x)
    if x.dtype.name == "bfloat16":
        return np.ascontiguousarray(x).view(np.uint16)
    if x.dtype == np.float32:
        return to_bf16_bits(x)
    raise ValueError(f"{name} must be bf16 bits (uint16), ml_dtypes.bfloat16 or float32 "
                     f"(rounded to bf16), got shape {tuple(x.shape)} dtype {x.dtype.name}")
