"""litetopk: exact GPU top-k fused into the kernels that compute the scores.

- numpy on the CPU, no torch needed (the library's CPU backend): `select_topk`, `indexer_topk`,
  `indexer_logits`, `indexer_topk_paged`, `indexer_logits_paged`, `SparseKvCache`,
  `sparse_kv_from_dense`, `sparse_kv_append`, `sparse_decode`, `dense_decode`,
  `sparse_kv_rebuild`, `sparse_attention` (litetopk.cpu), fp8 e4m3 bytes in litetopk.fp8, bf16
  bits in litetopk.bf16.
- torch (when importable): ops under `torch.ops.litetopk` (topk, fp8_mqa_logits, fp8_mqa_topk,
  fp8_paged_mqa_logits, fp8_paged_mqa_topk, the sparse decoding ops, sparse_attention, each with
  an `_out` variant) registered on import, and the functions engines call in `litetopk.ops`:
  `topk`, `fp8_mqa_logits`, `fp8_mqa_topk`, `fp8_paged_mqa_logits` and `fp8_paged_mqa_topk` with
  DeepGEMM's arguments, `sparse_attention` (alias `flash_mla_sparse_fwd`) with FlashMLA's,
  `IndexerState`, `SparseKvCache`, `dense_decode`.

The binding is nanobind over the C++ API (include/litetopk), chosen over ctypes and the C ABI:
typed signatures checked by the binding, sub-microsecond calls (the eager ops aim at <= 5 us of host
time), and no API struct written a second time in Python. The compiled extension litetopk._C is
specific to one Python version; the package imports without it and raises ImportError (with how to
build it) only when a call needs the library. The C ABI (include/litetopk/c_api.h) stays for other
languages' bindings.
"""
import types

from . import _ext

# litetopk._C from a build folder on sys.path (<build>/python/litetopk, see python/CMakeLists.txt)
# is found before one next to these files.
__path__[:0] = _ext.build_folders(__path__)

from . import bf16, fp8  # noqa: E402
from ._ext import available as extension_available  # noqa: E402
from .cpu import (SparseKvCache, dense_decode, indexer_logits, indexer_logits_paged, indexer_topk,
                  indexer_topk_paged, select_topk, sparse_attention, sparse_decode,
                  sparse_kv_append, sparse_kv_from_dense, sparse_kv_rebuild)

__version__ = "0.1.0"


class _MissingTorch(types.ModuleType):
    """litetopk.ops when torch cannot be imported: any of its functions raises
    ModuleNotFoundError saying so (rather than an AttributeError on None). It is false, so
    `if litetopk.ops:` tells whether the torch ops are there."""

    def __init__(self, name, error):
        super().__init__(name, "litetopk.ops needs torch, which could not be imported.")
        self._error = error

    def __getattr__(self, attribute):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        raise ModuleNotFoundError(
            f"{self.__name__}.{attribute} needs torch, which could not be imported "
            f"({self._error}); install torch (pip install torch). Without torch the numpy "
            f"functions run on the CPU: litetopk.select_topk, litetopk.indexer_topk and the "
            f"others in litetopk.cpu.", name="torch")

    def __bool__(self):
        return False

    def __dir__(self):
        return []

    def __repr__(self):
        return f"<litetopk.ops unavailable: torch could not be imported ({self._error})>"


try:
    import torch  # noqa: F401  (the torch ops below need it)
except ImportError as _torch_error:
    ops = _MissingTorch(__name__ + ".ops", _torch_error)
else:
    from . import ops


def build_info():
    """{'version', 'cuda_compiled', 'cuda_targets'} of the compiled library."""
    from ._ext import ext
    lib = ext()
    return {"version": lib.version, "cuda_compiled": lib.cuda_compiled,
            "cuda_targets": lib.cuda_targets}


__all__ = [
    "SparseKvCache", "bf16", "build_info", "dense_decode", "extension_available", "fp8",
    "indexer_logits", "indexer_logits_paged", "indexer_topk", "indexer_topk_paged", "ops",
    "select_topk", "sparse_attention", "sparse_decode", "sparse_kv_append",
    "sparse_kv_from_dense", "sparse_kv_rebuild",
]
