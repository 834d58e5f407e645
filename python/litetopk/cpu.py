"""litetopk on the CPU with numpy arrays (no torch needed): the library's CPU backend.

fp8 e4m3 data travels as uint8 bytes (litetopk.fp8 converts), bfloat16 as ml_dtypes.bfloat16
when that package is installed. Every function checks its arrays (ValueError naming the argument)
and returns new arrays; the library's own errors come back as ValueError with its message.
"""
import numpy as np

from . import _problems as P
from . import bf16 as _bf16
from ._ext import ext

_view = P.numpy_view


def _opt(x):
    return None if x is None else _view(x)


def _int32(x):
    return None if x is None else np.ascontiguousarray(x, dtype=np.int32)


def select_topk(scores, k, row_starts=None, row_ends=None, largest=True, sorted=False,
                deterministic=False, algo="fast", num_threads=0):
    """Exact top-k of each row of scores [B, N] (float32, float16 or bfloat16; unit column
    stride). Returns (indices [B, k] int32 relative to the row start, -1 padded; values [B, k] of
    the scores' dtype, NaN padded). row_starts/row_ends [B] restrict each row to
    [start, end). algo: "fast" (threaded) or "reference" (full sort)."""
    scores = np.asarray(scores)
    if scores.ndim != 2:
        raise ValueError(f"scores must be a 2-D array [batch, n], got shape {scores.shape}")
    k = int(k)
    row_starts, row_ends = _int32(row_starts), _int32(row_ends)
    indices = np.empty((scores.shape[0], max(k, 0)), dtype=np.int32)
    values = np.empty((scores.shape[0], max(k, 0)), dtype=scores.dtype)
    args = P.select_args(_view(scores), k, _opt(row_starts), _opt(row_ends), _view(indices),
                         _view(values), largest, sorted, deterministic)
    ext().select_topk_cpu(*args, P.algo_code(P.CPU_SELECT_ALGOS, algo, "algo"), int(num_threads))
    return indices, values


def _indexer_inputs(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke):
    return (np.ascontiguousarray(q), np.ascontiguousarray(kv),
            np.ascontiguousarray(kv_scale, dtype=np.float32),
            np.ascontiguousarray(weights, dtype=np.float32), _int32(cu_seqlen_ks),
            _int32(cu_seqlen_ke))


def indexer_logits(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke):
    """The DSA indexer's scores [T, S] fp32 (DeepGEMM fp8_mqa_logits' layouts: q [T, H, D] and
    kv [S, D] e4m3 bytes, kv_scale [S], weights [T, H], ks/ke [T]); -inf outside [ks, ke)."""
    inputs = _indexer_inputs(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke)
    views = [_view(x) for x in inputs]
    T, _, _, S = P.indexer_shapes(views[0], views[1])
    logits = np.empty((T, S), dtype=np.float32)
    problem = P.indexer_args(*views, k=1)
    ext().indexer_logits_cpu(problem, logits.ctypes.data, P.logits_stride(_view(logits), T, S,
                                                                         -1))
    return logits


def indexer_topk(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k):
    """The top k keys of each query under the indexer's scores (the CPU reference: fp64 scores
    rounded to fp32, then exact selection). Returns (indices [T, k] int32 relative to ks, -1
    padded; values [T, k] fp32)."""
    inputs = _indexer_inputs(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke)
    views = [_view(x) for x in inputs]
    T = P.indexer_shapes(views[0], views[1])[0]
    k = int(k)
    indices = np.empty((T, max(k, 0)), dtype=np.int32)
    values = np.empty((T, max(k, 0)), dtype=np.float32)
    ext().indexer_topk_cpu(P.indexer_args(*views, k, _view(indices), _view(values)))
    return indices, values


def _paged_inputs(q, kv_cache, weights, context_lens, block_table):
    return (np.ascontiguousarray(q), np.ascontiguousarray(kv_cache),
            np.ascontiguousarray(weights, dtype=np.float32), _int32(context_lens),
            _int32(block_table))


def indexer_logits_paged(q, kv_cache, weights, context_lens, block_table, max_context):
    """The decode indexer's scores over a paged cache, DeepGEMM fp8_paged_mqa_logits' layouts:
    q [B, next_n, H, D] e4m3 bytes, kv_cache [num_blocks, 64, 1, D + 4] uint8 (per block: 64 x D
    key bytes, then 64 fp32 scales), weights [B * next_n, H], context_lens [B], block_table
    [B, max_blocks]. Query j of request b sees its first context_lens[b] - next_n + j + 1 tokens
    (clamped to [0, max_context]; max_context <= max_blocks * 64). Returns logits
    [B * next_n, max_context] fp32: -inf past each row's visible tokens, NaN for a token whose
    block-table entry is outside the cache."""
    inputs = _paged_inputs(q, kv_cache, weights, context_lens, block_table)
    views = [_view(x) for x in inputs]
    max_context = int(max_context)
    B, next_n = P.paged_indexer_shapes(views[0], views[1], views[4])[:2]
    logits = np.empty((B * next_n, max(max_context, 0)), dtype=np.float32)
    problem = P.paged_indexer_args(*views, max_context, 1)
    stride = P.logits_stride(_view(logits), B * next_n, logits.shape[1], -1)
    ext().indexer_logits_paged_cpu(problem, logits.ctypes.data, stride)
    return logits


def indexer_topk_paged(q, kv_cache, weights, context_lens, block_table, max_context, k):
    """The top k token positions of each query under indexer_logits_paged's scores (the CPU
    reference: fp64 scores rounded to fp32, then exact selection; a token of an out-of-range
    block is never selected). Returns (indices [B * next_n, k] int32 token positions, -1 padded;
    values [B * next_n, k] fp32)."""
    inputs = _paged_inputs(q, kv_cache, weights, context_lens, block_table)
    views = [_view(x) for x in inputs]
    max_context = int(max_context)
    B, next_n = P.paged_indexer_shapes(views[0], views[1], views[4])[:2]
    k = int(k)
    indices = np.empty((B * next_n, max(k, 0)), dtype=np.int32)
    values = np.empty((B * next_n, max(k, 0)), dtype=np.float32)
    ext().indexer_topk_paged_cpu(P.paged_indexer_args(*views, max_context, k, _view(indices),
                                                      _view(values)))
    return indices, values


def _aligned(x, alignment=16):
    """x, or a copy when its address is not `alignment`-byte aligned (the library moves q, kv and
    out with TMA on the GPU and checks the same alignment on the CPU)."""
    return x.copy() if x.ctypes.data % alignment else x


def sparse_attention(q, kv, indices, sm_scale, d_v=512, out_dtype=np.float32):
    """MLA attention over each query's selected tokens (include/litetopk/attention.h; FlashMLA's
    flash_mla_sparse_fwd), the CPU reference: q [s_q, h_q, d_qk] and kv [s_kv, 1, d_qk] as bf16
    bits (uint16), ml_dtypes.bfloat16 or float32 (rounded to bf16, nearest even); indices
    [s_q, 1, topk] (or [s_q, topk]) int32, an index outside [0, s_kv) skipped, a repeated token
    counted once per slot. h_q 16, 32, 64 or 128, d_qk 576 or 512, d_v 512. Logits in fp64, out
    rounded to bf16. Returns (out [s_q, h_q, d_v] of out_dtype: float32 (the bf16 values, exact)
    or uint16 (the bf16 bits); max_logits [s_q, h_q] and lse [s_q, h_q] fp32 in base 2); a query
    with nothing to attend gets out 0, max_logits and lse -inf."""
    out_dtype = np.dtype(out_dtype)
    if out_dtype not in (np.dtype(np.float32), np.dtype(np.uint16)):
        raise ValueError(f"out_dtype must be float32 or uint16 (bf16 bits), got {out_dtype.name}")
    d_v = int(d_v)
    if d_v != P.SPARSE_ATTENTION_D_V:
        raise ValueError(f"d_v must be {P.SPARSE_ATTENTION_D_V}, got {d_v}")
    q = _aligned(_bf16.as_bf16_bits(q, "q"))
    kv = _aligned(_bf16.as_bf16_bits(kv, "kv"))
    indices = np.asarray(indices)
    if indices.dtype.kind not in "iu":
        raise ValueError(f"indices must be an integer array (int32), got dtype "
                         f"{indices.dtype.name}")
    indices = _int32(indices)
    if q.ndim != 3:
        raise ValueError(f"q must be a 3-D array [s_q, h_q, d_qk], got shape {q.shape}")
    s_q, h_q = q.shape[0], q.shape[1]
    out = np.empty((s_q, h_q, d_v), dtype=np.uint16)
    max_logits = np.empty((s_q, h_q), dtype=np.float32)
    lse = np.empty((s_q, h_q), dtype=np.float32)
    problem = P.sparse_attention_args(_view(q), _view(kv), _view(indices), float(sm_scale),
                                      _view(out), _view(max_logits), _view(lse),
                                      bf16=("uint16",))
    ext().sparse_attention_cpu(problem)
    if out_dtype == np.float32:
        out = _bf16.from_bf16_bits(out)
    return out, max_logits, lse


class SparseKvCache(P.SparseKvCacheArrays):
    """A sparse decoding cache in host memory (include/litetopk/sparse_decode.h): numpy arrays
    key_codes, key_scales, key_residuals (e4m3 bytes), values, tail_keys, lengths and, when paged,
    block_table. `empty` allocates a contiguous (or paged, with num_pages) zero cache."""

    @classmethod
    def empty(cls, batch, kv_heads, max_blocks, block_size=128, dtype=np.float16,
              num_pages=None, block_table=None):
        shapes = P.sparse_cache_shapes(batch, kv_heads, max_blocks, block_size, num_pages)
        dtypes = (np.uint8, dtype, np.uint8, dtype, dtype, np.int32)
        arrays = [np.zeros(shape, dtype=dt) for shape, dt in zip(shapes, dtypes)]
        if num_pages is not None:
            if block_table is None:
                raise ValueError("a paged cache (num_pages given) needs its block_table")
            block_table = _int32(block_table)
        return cls(*arrays, block_table=block_table)

    def args(self):
        """The extension's cache tuple (checks every array)."""
        return P.sparse_cache_args(*(_opt(x) for x in self.arrays()))


def _dense(keys, values, lengths, dtypes=P.CACHE_DTYPES):
    lengths = _int32(lengths)
    return P.dense_cache_args(_view(np.asarray(keys)), _view(np.asarray(values)), _view(lengths),
                              dtypes), lengths


def sparse_kv_from_dense(cache, keys, values, lengths):
    """Fills `cache` (a SparseKvCache) from a dense cache keys/values [B, Hkv, capacity, D] with
    lengths [B]: full blocks quantized, the open block's keys to the tail; cache.lengths =
    lengths."""
    dense, _ = _dense(keys, values, lengths)
    ext().sparse_kv_from_dense_cpu(dense, cache.args())


def sparse_kv_append(cache, new_keys, new_values):
    """Appends one token per sequence (new_keys/new_values [B, Hkv, D] of the cache dtype)."""
    new_keys, new_values = np.ascontiguousarray(new_keys), np.ascontiguousarray(new_values)
    args = cache.args()
    shape = (args[1], args[2], args[3])
    P.check("new_keys", _view(new_keys), shape, (cache.tail_keys.dtype.name,))
    P.check("new_values", _view(new_values), shape, (cache.tail_keys.dtype.name,))
    ext().sparse_kv_append_cpu(args, new_keys.ctypes.data, new_values.ctypes.data)


def _attention(q, dtype, out_dtype, softmax_scale):
    q = np.ascontiguousarray(q)
    out = np.empty(q.shape, dtype=out_dtype)
    lse = np.empty(q.shape[:2], dtype=np.float32)
    return q, out, lse, P.attention_args(_view(q), dtype, -1, _view(out), _view(lse),
                                         softmax_scale)


def sparse_decode(cache, q, delta=5.0, softmax_scale=0.0, out_dtype=np.float32):
    """Sparse decoding of one query token per sequence (q [B, Hq, D] of the cache dtype), the fp64
    reference. Returns (out [B, Hq, D] of out_dtype, lse [B, Hq], kept_mask [B, Hkv, max_blocks]
    uint8, kept_fraction)."""
    args = cache.args()
    q, out, lse, attention = _attention(q, cache.tail_keys.dtype.name, out_dtype, softmax_scale)
    kept = np.zeros((args[1], args[2], args[5]), dtype=np.uint8)
    fraction = ext().sparse_decode_cpu(args, attention, float(delta), kept.ctypes.data)
    return out, lse, kept, fraction


def dense_decode(q, keys, values, lengths, softmax_scale=0.0, out_dtype=np.float32):
    """Dense attention (fp64 reference) of q [B, Hq, D] over keys/values [B, Hkv, capacity, D]
    (fp16, bf16 or fp32) and lengths [B]. Returns (out [B, Hq, D], lse [B, Hq])."""
    dense, _ = _dense(keys, values, lengths, P.SCORE_DTYPES)
    q, out, lse, attention = _attention(q, np.asarray(keys).dtype.name, out_dtype, softmax_scale)
    ext().dense_decode_cpu(dense, attention)
    return out, lse


def sparse_kv_rebuild(cache, capacity=None):
    """The cache as dense fp32 keys and values [B, Hkv, capacity, D] (rebuilt keys s * (L + R) in
    full blocks) and lengths, capacity max_blocks * block_size by default."""
    args = cache.args()
    batch, heads, dim, block, max_blocks = args[1], args[2], args[3], args[4], args[5]
    capacity = max_blocks * block if capacity is None else capacity
    keys = np.zeros((batch, heads, capacity, dim), dtype=np.float32)
    values = np.zeros_like(keys)
    lengths = np.zeros(batch, dtype=np.int32)
    dense, _ = _dense(keys, values, lengths, P.SCORE_DTYPES)
    ext().sparse_kv_rebuild_cpu(args, dense)
    return keys, values, lengths
