"""FlashInfer's Hopper sparse MLA (BatchMLAPagedAttentionWrapper, backend "fa3", page size 1) as
an optional peer for litetopk's sparse_attention benchmark (bench/attention_bench.py).

FlashInfer (flashinfer-ai/flashinfer) is never a dependency of litetopk and none of its code is in
this repository. Its public source is unpacked outside the tree on the GPU machine and put on
PYTHONPATH (docs/attention.md, "FlashInfer", has the recipe); `load()` returns None (and
`load_error` says why) when it cannot be imported. This file is our own code around its Python
entry point.

Which FlashInfer call this is. vLLM's FLASHINFER_MLA_SPARSE backend (the default at 16 heads or
fewer, vllm-project/vllm#33451) calls `trtllm_batch_decode_with_kv_cache_mla(...,
sparse_mla_top_k=k)`, whose kernels are TensorRT-LLM cubins for Blackwell (SM100/SM103) only: on
an SM90 device FlashInfer routes that call to its XQA backend, which rejects sparse_mla_top_k.
On Hopper vLLM has FLASHINFER_MLA_SPARSE_SM90 (vllm/v1/attention/backends/mla/
flashinfer_mla_sparse_sm90.py), which runs FlashInfer's FA3-style SM90 MLA kernel with page size 1,
so that each query's top-k rows are its page table: one batch row per query, kv_indices = the row's
valid tokens packed in front, kv_len = their count, causal off. This file makes the same call.

Written against FlashInfer fb28d7242b3506a2348265962041acc1fb56cca4 (2026-08-22, version.txt
0.6.18; 3rdparty/cutlass at NVIDIA/cutlass b46b16d003484063bca4ed365e44095c4c6ed633, 3rdparty/cccl
at NVIDIA/cccl 876867684f7fac130e0f5911236e0a92a970d4fd). What we rely on, in our words:

  w = flashinfer.mla.BatchMLAPagedAttentionWrapper(float_workspace, backend="fa3")
  w.plan(qo_indptr, kv_indptr, kv_indices, kv_len, num_heads, 512, d_qk - 512, 1, False,
         sm_scale, torch.bfloat16, torch.bfloat16)        # host work: copies the arrays to CPU
  out, lse = w.run(q_nope, q_pe, ckv, kpe, return_lse=True)
  q_nope [s_q, h_q, 512] and q_pe [s_q, h_q, d_qk - 512] bf16 (strided views are fine: the kernel
  takes row and head strides), ckv [s_kv, 1, 512] and kpe [s_kv, 1, d_qk - 512] bf16 (views of
  kv), out [s_q, h_q, 512] bf16, lse [s_q, h_q] fp32 in base 2 (log2 sum 2^(l * log2 e);
  return_lse_base_on_e=True gives natural log); an empty row gets lse -inf. No max_logits.

Our notes on it at that commit (from its source, not measured):
  - One CTA works on a 64-row tile of (query position x head) of ONE request, so with one request
    per query a tile holds h_q real rows (h_q 8: 1/8 of the tile, 16: 1/4); KV tiles of 64 rows, two
    stages, one 128-thread producer warpgroup gathering rows with cp.async through the page table,
    one consumer warpgroup (wgmma); a persistent cooperative grid whose work list (and split-KV
    merge) the host plan builds from kv_len.
  - Every kv_indices entry is read: rows must be compacted (prepare() drops indices outside
    [0, s_kv) and puts the valid ones first); a repeated token counts once per slot.
  - d_qk 576 (kpe 64) or 512 (kpe 0, NoPE); d_v is the 512 ckv columns.

Importing: at that commit `import flashinfer` runs a package __init__ that imports CuTe-DSL
(nvidia-cutlass-dsl), cuDNN frontend, cuda-python and more, none of which the GPU machine has.
flashinfer.mla itself needs only torch, jinja2, tvm_ffi (apache-tvm-ffi) and pynvml (nvidia-ml-py),
so load() registers the package without running its __init__ and imports flashinfer.mla (unless
flashinfer is already imported). The kernel module is loaded from FlashInfer's AOT folder
(flashinfer/data/aot/<name>/<name>.so) when it is there, else JIT-built with nvcc and ninja into
FLASHINFER_WORKSPACE_BASE/.cache/flashinfer.

Pure Python; torch is imported lazily.
"""
import importlib.util
import sys

FLASHINFER_COMMIT = "fb28d7242b3506a2348265962041acc1fb56cca4"
FLASHINFER_VERSION = "0.6.18"
CUTLASS_COMMIT = "b46b16d003484063bca4ed365e44095c4c6ed633"
CCCL_COMMIT = "876867684f7fac130e0f5911236e0a92a970d4fd"
D_CKV = 512
SUPPORTED_D_QK = (576, 512)
WORKSPACE_BYTES = 256 << 20  # the split-KV partial results (vLLM reserves 128 MiB)

load_error = None  # why the last load() returned None
_module = None


def _import_mla():
    """flashinfer.mla, importing the package without running flashinfer/__init__.py."""
    if "flashinfer" not in sys.modules:
        spec = importlib.util.find_spec("flashinfer")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("No module named 'flashinfer' (not on PYTHONPATH)")
        package = importlib.util.module_from_spec(spec)
        sys.modules["flashinfer"] = package
    import flashinfer.mla  # noqa: PLC0415 - optional peer
    return flashinfer.mla


def load():
    """The imported `flashinfer.mla` module, or None (never raises) when it is missing or broken."""
    global load_error, _module
    try:
        mla = _import_mla()
    except Exception as exc:  # ImportError, a missing dependency, OSError from tvm_ffi, ...
        load_error = f"{type(exc).__name__}: {exc}"
        _module = None
        return None
    if not hasattr(mla, "BatchMLAPagedAttentionWrapper"):
        load_error = "flashinfer.mla has no BatchMLAPagedAttentionWrapper"
        _module = None
        return None
    load_error = None
    _module = mla
    return mla


def describe(mla):
    """One line naming the loaded FlashInfer, for benchmark output."""
    if mla is None:
        return f"FlashInfer: not available ({load_error})"
    package = sys.modules.get("flashinfer")
    version = getattr(sys.modules.get("flashinfer.version"), "__version__", "?")
    where = getattr(package, "__path__", ["?"])[0]
    return (f"FlashInfer {version} ({where}), BatchMLAPagedAttentionWrapper fa3 page size 1, "
            f"written against {FLASHINFER_COMMIT[:7]}")


# --- the call ------------------------------------------------------------------------------------

def check_args(q, kv, indices):
    """Raise ValueError naming the first argument the SM90 MLA wrapper would reject."""
    import torch  # noqa: PLC0415

    if q.dim() != 3 or kv.dim() != 3 or indices.dim() not in (2, 3):
        raise ValueError(f"q, kv must be 3-D and indices 2-D or 3-D, got {tuple(q.shape)}, "
                         f"{tuple(kv.shape)}, {tuple(indices.shape)}")
    s_q, _, d_qk = q.shape
    if d_qk not in SUPPORTED_D_QK:
        raise ValueError(f"d_qk must be 576 or 512, got {d_qk}")
    if tuple(kv.shape[1:]) != (1, d_qk):
        raise ValueError(f"kv must be [s_kv, 1, {d_qk}], got {tuple(kv.shape)}")
    if indices.shape[0] != s_q or (indices.dim() == 3 and indices.shape[1] != 1):
        raise ValueError(f"indices must be [{s_q}, topk] or [{s_q}, 1, topk], got "
                         f"{tuple(indices.shape)}")
    if q.dtype != torch.bfloat16 or kv.dtype != torch.bfloat16:
        raise ValueError(f"q and kv must be bf16, got {q.dtype}, {kv.dtype}")
    if q.stride(-1) != 1 or kv.stride(-1) != 1:
        raise ValueError("q's and kv's last dimensions must be contiguous")


def compact_rows(indices, s_kv):
    """(kv_indices [n] int32, kv_len [s_q] int32, kv_indptr [s_q + 1] int32) for litetopk-style
    index rows [s_q, topk] or [s_q, 1, topk]: each row's entries in [0, s_kv), in their order,
    packed one row after the other; everything else (-1 padding, out-of-range values) dropped."""
    import torch  # noqa: PLC0415

    idx = indices.reshape(indices.shape[0], -1)
    valid = (idx >= 0) & (idx < s_kv)
    kv_len = valid.sum(dim=1, dtype=torch.int32)
    kv_indptr = torch.zeros(idx.shape[0] + 1, dtype=torch.int32, device=idx.device)
    torch.cumsum(kv_len, dim=0, out=kv_indptr[1:])
    kv_indices = idx[valid].to(torch.int32)  # row-major: each row's valid entries, in order
    return kv_indices, kv_len, kv_indptr


class SparsePrefill:
    """One planned FlashInfer call over litetopk-style inputs: construct (plans on the host and
    copies nothing of q or kv), then call for (out, lse) as FlashInfer returns them. Do the
    construction once, outside a timed region, as vLLM plans each step before its graph runs."""

    def __init__(self, q, kv, indices, sm_scale, workspace_bytes=WORKSPACE_BYTES, check=True):
        import torch  # noqa: PLC0415

        mla = _module if _module is not None else load()
        if mla is None:
            raise RuntimeError(f"FlashInfer is not available: {load_error}")
        if check:
            check_args(q, kv, indices)
        s_q, h_q, d_qk = q.shape
        d_kpe = d_qk - D_CKV
        kv_indices, kv_len, kv_indptr = compact_rows(indices, kv.shape[0])
        if kv_indices.numel() == 0:  # every row empty: hand the kernel a real (unread) buffer
            kv_indices = torch.zeros(1, dtype=torch.int32, device=q.device)
        qo_indptr = torch.arange(s_q + 1, dtype=torch.int32, device=q.device)
        self.workspace = torch.empty(workspace_bytes, dtype=torch.uint8, device=q.device)
        self.wrapper = mla.BatchMLAPagedAttentionWrapper(self.workspace, backend="fa3")
        self.wrapper.plan(qo_indptr, kv_indptr, kv_indices, kv_len, h_q, D_CKV, d_kpe, 1, False,
                          float(sm_scale), torch.bfloat16, torch.bfloat16)
        self.q_nope, self.q_pe = q[..., :D_CKV], q[..., D_CKV:]
        self.ckv, self.kpe = kv[..., :D_CKV], kv[..., D_CKV:]
        self.kv_indices = kv_indices  # the wrapper keeps a reference; keep ours alive too

    def __call__(self):
        """(out [s_q, h_q, 512] bf16, lse [s_q, h_q] fp32, base 2)."""
        return self.wrapper.run(self.q_nope, self.q_pe, self.ckv, self.kpe, return_lse=True)


def as_litetopk(result):
    """A FlashInfer result (out, lse) as litetopk returns it: (out, None, lse). Its lse is already
    base 2 with -inf for an empty query, litetopk's convention; it returns no max_logits."""
    out, lse = result
    return out, None, lse
