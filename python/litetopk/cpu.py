"""litetopk on the CPU with numpy arrays (no torch needed): the library's CPU backend.

fp8 e4m3 data travels as uint8 bytes (litetopk.fp8 converts), bfloat16 as ml_dtypes.bfloat16
when that package is installed. Every function checks its arrays (ValueError naming the argument)
and returns new arrays; the library's own errors come back as ValueError with its message.
"""
import numpy as np

from . import _problems as P
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
