"""litetopk on the CPU with numpy arrays (no torch needed): the library's CPU backend.

fp8 e4m3 data travels as uint8 bytes (litetopk.fp8 converts), bfloat16 as ml_dtypes.bfloat16
when that package is installed. Every function checks its arguments before the library sees them:
- a required argument given as None: TypeError naming it;
- an integer argument (k, max_context, the sizes of a cache) that is not an integer (a float, a
  bool, a string): TypeError naming it; the same for an index array (row ranges, key ranges,
  lengths, block tables) whose dtype is not an integer one, and ValueError for values that do
  not fit in int32;
- a flag (largest, sorted, deterministic) that is not True or False: TypeError naming it;
- input arrays in non-native byte order (">f4" on a little-endian machine) are converted; a
  cache the library writes into must be native (ValueError naming the array);
- outputs whose size an argument sets (k, max_context, capacity, a cache's sizes) are checked
  against the memory available (MemoryError naming the argument and the bytes), and a top-k
  output that is mostly -1 padding (k far above the row length) warns;
- arrays with a zero-size batch give zero-size results.
Array shapes and dtypes are checked by litetopk._problems (ValueError naming the argument), and
the library's own errors come back as ValueError with its message. Every function returns new
arrays.
"""
import operator
import os
import warnings

import numpy as np

from . import _problems as P
from . import bf16 as _bf16
from ._ext import ext

_INT32 = np.iinfo(np.int32)
# A top-k output whose -1 / NaN padding (k above the row length) exceeds this warns.
PADDING_WARNING_BYTES = 64 << 20


# ---- arguments ----

def _required(x, name):
    if x is None:
        raise TypeError(f"{name} is required, got None")
    return x


def _integer(x, name):
    """x as a Python int: ints and numpy integers; TypeError naming `name` for anything else
    (floats, bools, strings, None)."""
    if not isinstance(x, (bool, np.bool_)):
        try:
            return operator.index(x)
        except TypeError:
            pass
    raise TypeError(f"{name} must be an integer, got {x!r} ({type(x).__name__})")


def _flag(x, name):
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    raise TypeError(f"{name} must be True or False, got {x!r} ({type(x).__name__})")


def _real(x, name):
    """x as a float: ints, floats and numpy numbers; TypeError naming `name` otherwise."""
    if not isinstance(x, (bool, np.bool_, str, bytes)) and x is not None:
        try:
            return float(x)
        except (TypeError, ValueError):
            pass
    raise TypeError(f"{name} must be a number, got {x!r} ({type(x).__name__})")


def _native(x):
    """x (an ndarray) in the machine's byte order: a converted copy when it is not."""
    if x.dtype.isnative:
        return x
    return x.astype(x.dtype.newbyteorder("="))


def _array(x, name, dtype=None):
    """A required input as an ndarray in native byte order (converted to `dtype` when given)."""
    _required(x, name)
    if dtype is not None:
        return np.ascontiguousarray(_native(np.asarray(x)), dtype=dtype)
    x = np.asarray(x)
    if x.dtype.kind in "OSU":
        raise TypeError(f"{name} must be a numeric array, got dtype {x.dtype}")
    return _native(x)


def _int32(x, name, required=True):
    """An index array as contiguous int32: TypeError naming `name` for a non-integer dtype (float,
    bool), ValueError for values outside int32; None stays None unless required."""
    if x is None:
        if required:
            raise TypeError(f"{name} is required (an int32 array), got None")
        return None
    x = np.asarray(x)
    if x.size == 0 and x.dtype.kind == "f":  # [] from a list
        x = x.astype(np.int32)
    if x.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array (int32), got dtype {x.dtype}")
    if x.dtype != np.int32 and x.size:
        low, high = x.min(), x.max()
        if low < _INT32.min or high > _INT32.max:
            raise ValueError(f"{name} must hold int32 values, got values in [{low}, {high}]")
    return np.ascontiguousarray(x, dtype=np.int32)


def _view(x, name=None):
    """The view the checks take (litetopk._problems.numpy_view): an empty array as C-contiguous
    (numpy gives it zero strides); a non-native array is refused (ValueError naming `name`)."""
    if not x.dtype.isnative:
        raise ValueError(f"{name or 'an array'} must be in native byte order, got dtype "
                         f"{x.dtype.str}")
    view = P.numpy_view(x)
    if x.size == 0:
        strides, step = [], 1
        for extent in reversed(x.shape):
            strides.append(step)
            step *= max(extent, 1)
        view = (view[0], view[1], tuple(reversed(strides)), view[3], view[4], True)
    return view


def _opt(x, name=None):
    return None if x is None else _view(x, name)


# ---- memory ----

def _read_int(path):
    try:
        with open(path) as file:
            text = file.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_memory():
    """Bytes of memory a new array may take: MemAvailable, capped by a cgroup v2 limit; None
    when unknown."""
    found = []
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    if not found:
        try:
            found.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            pass
    limit, used = (_read_int("/sys/fs/cgroup/memory.max"),
                   _read_int("/sys/fs/cgroup/memory.current"))
    if limit is not None and used is not None:
        found.append(max(limit - used, 0))
    return min(found) if found else None


def _gigabytes(nbytes):
    return f"{nbytes / 1e9:.2f} GB"


def _check_memory(what, shape, nbytes, cause, hint=""):
    """MemoryError when outputs `what` of `shape` (nbytes in all) cannot fit in the memory
    available; `cause` names the arguments that size them ("k=100000000")."""
    available = available_memory()
    if available is not None and nbytes > available:
        raise MemoryError(
            f"{cause} makes {what} {list(shape)} take {nbytes} bytes "
            f"({_gigabytes(nbytes)}), more than the {available} bytes ({_gigabytes(available)}) "
            f"of memory available{hint}")


def _topk_outputs(function, rows, n, k, value_dtype):
    """Allocates the [rows, k] int32 indices and values of a top-k over rows of length n, after
    the memory check on k; warns when most of it would be padding (k > n)."""
    k_out = max(k, 0)
    item = 4 + np.dtype(value_dtype).itemsize
    nbytes = rows * k_out * item
    _check_memory("the outputs indices and values", (rows, k_out), nbytes, f"k={k}",
                  f" (a row has {n} entries: k above that only adds -1 padding)" if k > n else "")
    padding = rows * max(k_out - max(n, 0), 0) * item
    if padding > PADDING_WARNING_BYTES:
        warnings.warn(f"{function}: k={k} is larger than the {n} entries of a row, so "
                      f"{_gigabytes(padding)} of the {_gigabytes(nbytes)} of outputs "
                      f"[{rows}, {k}] are -1 / NaN padding", RuntimeWarning, stacklevel=3)
    return np.empty((rows, k_out), dtype=np.int32), np.empty((rows, k_out), dtype=value_dtype)


# ---- selection and the indexers ----

def select_topk(scores, k, row_starts=None, row_ends=None, largest=True, sorted=False,
                deterministic=False, algo="fast", num_threads=0):
    """Exact top-k of each row of scores [B, N] (float32, float16 or bfloat16; unit column
    stride). Returns (indices [B, k] int32 relative to the row start, -1 padded; values [B, k] of
    the scores' dtype, NaN padded). row_starts/row_ends [B] (integers) restrict each row to
    [start, end). largest, sorted, deterministic: True or False. algo: "fast" (threaded) or
    "reference" (full sort)."""
    scores = _array(scores, "scores")
    if scores.ndim != 2:
        raise ValueError(f"scores must be a 2-D array [batch, n], got shape {scores.shape}")
    k = _integer(k, "k")
    largest = _flag(largest, "largest")
    sorted_ = _flag(sorted, "sorted")
    deterministic = _flag(deterministic, "deterministic")
    num_threads = _integer(num_threads, "num_threads")
    row_starts = _int32(row_starts, "row_starts", required=False)
    row_ends = _int32(row_ends, "row_ends", required=False)
    indices, values = _topk_outputs("select_topk", scores.shape[0], scores.shape[1], k,
                                    scores.dtype)
    problem = P.select_problem(_view(scores), k, _opt(row_starts), _opt(row_ends),
                               _view(indices), _view(values), largest, sorted_, deterministic)
    lib = ext()
    lib.select_topk_cpu(problem, P.enum_value(lib.CpuSelectAlgo, algo, "algo"), num_threads)
    return indices, values


def _indexer_inputs(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke):
    return (np.ascontiguousarray(_array(q, "q")), np.ascontiguousarray(_array(kv, "kv")),
            _array(kv_scale, "kv_scale", np.float32), _array(weights, "weights", np.float32),
            _int32(cu_seqlen_ks, "cu_seqlen_ks"), _int32(cu_seqlen_ke, "cu_seqlen_ke"))


def indexer_logits(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke):
    """The DSA indexer's scores [T, S] fp32 (DeepGEMM fp8_mqa_logits' layouts: q [T, H, D] and
    kv [S, D] e4m3 bytes, kv_scale [S], weights [T, H], ks/ke [T] integers); -inf outside
    [ks, ke)."""
    inputs = _indexer_inputs(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke)
    views = [_view(x) for x in inputs]
    T, _, _, S = P.indexer_shapes(views[0], views[1])
    _check_memory("the logits", (T, S), T * S * 4, f"q's T={T} with kv's S={S}")
    logits = np.empty((T, S), dtype=np.float32)
    problem = P.indexer_args(*views, k=1)
    ext().indexer_logits_cpu(problem, logits.ctypes.data,
                             P.logits_stride(_view(logits), T, S, -1))
    return logits


def indexer_topk(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke, k):
    """The top k keys of each query under the indexer's scores (the CPU reference: fp64 scores
    rounded to fp32, then exact selection). Returns (indices [T, k] int32 relative to ks, -1
    padded; values [T, k] fp32)."""
    inputs = _indexer_inputs(q, kv, kv_scale, weights, cu_seqlen_ks, cu_seqlen_ke)
    views = [_view(x) for x in inputs]
    T, _, _, S = P.indexer_shapes(views[0], views[1])
    k = _integer(k, "k")
    indices, values = _topk_outputs("indexer_topk", T, S, k, np.float32)
    ext().indexer_topk_cpu(P.indexer_args(*views, k, _view(indices), _view(values)))
    return indices, values


def _paged_inputs(q, kv_cache, weights, context_lens, block_table):
    return (np.ascontiguousarray(_array(q, "q")), np.ascontiguousarray(_array(kv_cache, "kv_cache")),
            _array(weights, "weights", np.float32), _int32(context_lens, "context_lens"),
            _int32(block_table, "block_table"))


def indexer_logits_paged(q, kv_cache, weights, context_lens, block_table, max_context):
    """The decode indexer's scores over a paged cache, DeepGEMM fp8_paged_mqa_logits' layouts:
    q [B, next_n, H, D] e4m3 bytes, kv_cache [num_blocks, 64, 1, D + 4] uint8 (per block: 64 x D
    key bytes, then 64 fp32 scales), weights [B * next_n, H], context_lens [B], block_table
    [B, max_blocks] (integers). Query j of request b sees its first context_lens[b] - next_n + j
    + 1 tokens (clamped to [0, max_context]; max_context, an integer, <= max_blocks * 64).
    Returns logits [B * next_n, max_context] fp32: -inf past each row's visible tokens, NaN for a
    token whose block-table entry is outside the cache."""
    inputs = _paged_inputs(q, kv_cache, weights, context_lens, block_table)
    views = [_view(x) for x in inputs]
    max_context = _integer(max_context, "max_context")
    B, next_n = P.paged_indexer_shapes(views[0], views[1], views[4])[:2]
    width = max(max_context, 0)
    _check_memory("the logits", (B * next_n, width), B * next_n * width * 4,
                  f"max_context={max_context}")
    logits = np.empty((B * next_n, width), dtype=np.float32)
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
    max_context = _integer(max_context, "max_context")
    B, next_n = P.paged_indexer_shapes(views[0], views[1], views[4])[:2]
    k = _integer(k, "k")
    indices, values = _topk_outputs("indexer_topk_paged", B * next_n, max_context, k,
                                    np.float32)
    ext().indexer_topk_paged_cpu(P.paged_indexer_args(*views, max_context, k, _view(indices),
                                                      _view(values)))
    return indices, values


# ---- sparse attention ----

def _aligned(x, alignment=16):
    """x, or a copy when its address is not `alignment`-byte aligned (the library moves q, kv and
    out with TMA on the GPU and checks the same alignment on the CPU)."""
    return x.copy() if x.ctypes.data % alignment else x


def sparse_attention(q, kv, indices, sm_scale, d_v=512, out_dtype=np.float32):
    """MLA attention over each query's selected tokens (include/litetopk/attention.h; FlashMLA's
    flash_mla_sparse_fwd), the CPU reference: q [s_q, h_q, d_qk] and kv [s_kv, 1, d_qk] as bf16
    bits (uint16), ml_dtypes.bfloat16 or float32 (rounded to bf16, nearest even); indices
    [s_q, 1, topk] (or [s_q, topk]) integers, an index outside [0, s_kv) skipped, a repeated
    token counted once per slot. h_q 16, 32, 64 or 128, d_qk 576 or 512, d_v 512. Logits in
    fp64, out rounded to bf16. Returns (out [s_q, h_q, d_v] of out_dtype: float32 (the bf16
    values, exact) or uint16 (the bf16 bits); max_logits [s_q, h_q] and lse [s_q, h_q] fp32 in
    base 2); a query with nothing to attend gets out 0, max_logits and lse -inf."""
    out_dtype = np.dtype(out_dtype)
    if out_dtype not in (np.dtype(np.float32), np.dtype(np.uint16)):
        raise ValueError(f"out_dtype must be float32 or uint16 (bf16 bits), got {out_dtype.name}")
    d_v = _integer(d_v, "d_v")
    if d_v != P.SPARSE_ATTENTION_D_V:
        raise ValueError(f"d_v must be {P.SPARSE_ATTENTION_D_V}, got {d_v}")
    sm_scale = _real(sm_scale, "sm_scale")
    q = _aligned(_bf16.as_bf16_bits(_required(q, "q"), "q"))
    kv = _aligned(_bf16.as_bf16_bits(_required(kv, "kv"), "kv"))
    indices = _int32(indices, "indices")
    if q.ndim != 3:
        raise ValueError(f"q must be a 3-D array [s_q, h_q, d_qk], got shape {q.shape}")
    s_q, h_q = q.shape[0], q.shape[1]
    out = np.empty((s_q, h_q, d_v), dtype=np.uint16)
    max_logits = np.empty((s_q, h_q), dtype=np.float32)
    lse = np.empty((s_q, h_q), dtype=np.float32)
    problem = P.sparse_attention_args(_view(q), _view(kv), _view(indices), sm_scale,
                                      _view(out), _view(max_logits), _view(lse),
                                      bf16=("uint16",))
    ext().sparse_attention_cpu(problem)
    if out_dtype == np.float32:
        out = _bf16.from_bf16_bits(out)
    return out, max_logits, lse


# ---- sparse decoding ----

class SparseKvCache(P.SparseKvCacheArrays):
    """A sparse decoding cache in host memory (include/litetopk/sparse_decode.h): numpy arrays
    key_codes, key_scales, key_residuals (int8 bytes), values, tail_keys, lengths and, when paged,
    block_table. `empty` allocates a contiguous (or paged, with num_pages) zero cache."""

    @classmethod
    def empty(cls, batch, kv_heads, max_blocks, block_size=128, dtype=np.float16,
              num_pages=None, block_table=None):
        sizes = {name: _integer(value, name) for name, value in
                 (("batch", batch), ("kv_heads", kv_heads), ("max_blocks", max_blocks),
                  ("block_size", block_size))}
        if num_pages is not None:
            sizes["num_pages"] = _integer(num_pages, "num_pages")
        dtype = np.dtype(dtype)
        shapes = P.sparse_cache_shapes(sizes["batch"], sizes["kv_heads"], sizes["max_blocks"],
                                       sizes["block_size"], sizes.get("num_pages"))
        dtypes = (np.uint8, dtype, np.uint8, dtype, dtype, np.int32)
        nbytes = sum(int(np.prod([max(e, 0) for e in shape])) * np.dtype(dt).itemsize
                     for shape, dt in zip(shapes, dtypes))
        _check_memory("the cache's arrays", shapes[3], nbytes,
                      ", ".join(f"{name}={value}" for name, value in sizes.items()))
        arrays = [np.zeros(shape, dtype=dt) for shape, dt in zip(shapes, dtypes)]
        if num_pages is not None:
            if block_table is None:
                raise TypeError("a paged cache (num_pages given) needs its block_table, got None")
            block_table = _int32(block_table, "block_table")
        return cls(*arrays, block_table=block_table)

    def args(self):
        """The extension's SparseKvCache over these arrays (checks every array; the library
        writes into them, so they must be in native byte order)."""
        return P.sparse_cache_args(*(_opt(x, name) for x, name in zip(self.arrays(),
                                                                     self.FIELDS)))


def _cache_args(cache):
    return _required(cache, "cache").args()


def _dense_arrays(keys, values, lengths):
    return _array(keys, "keys"), _array(values, "values"), _int32(lengths, "lengths")


def _dense(keys, values, lengths, dtypes=P.CACHE_DTYPES):
    """The extension's DenseKvCache of arrays already converted (_dense_arrays): the caller
    keeps them alive through the call."""
    return P.dense_cache_args(_view(keys, "keys"), _view(values, "values"),
                              _view(lengths, "lengths"), dtypes)


def sparse_kv_from_dense(cache, keys, values, lengths):
    """Fills `cache` (a SparseKvCache) from a dense cache keys/values [B, Hkv, capacity, D] with
    lengths [B] (integers): full blocks quantized, the open block's keys to the tail;
    cache.lengths = lengths."""
    args = _cache_args(cache)
    keys, values, lengths = _dense_arrays(keys, values, lengths)
    ext().sparse_kv_from_dense_cpu(_dense(keys, values, lengths), args)


def sparse_kv_append(cache, new_keys, new_values):
    """Appends one token per sequence (new_keys/new_values [B, Hkv, D] of the cache dtype)."""
    args = _cache_args(cache)
    new_keys = np.ascontiguousarray(_array(new_keys, "new_keys"))
    new_values = np.ascontiguousarray(_array(new_values, "new_values"))
    shape = (args.batch, args.num_kv_heads, args.head_dim)
    P.check("new_keys", _view(new_keys), shape, (cache.tail_keys.dtype.name,))
    P.check("new_values", _view(new_values), shape, (cache.tail_keys.dtype.name,))
    ext().sparse_kv_append_cpu(args, new_keys.ctypes.data, new_values.ctypes.data)


def _decode_problem(cache, q, out_dtype, softmax_scale, delta=None, kept=None):
    """(q, out, lse, the extension's decode problem) over `cache` (a SparseKvCache or
    DenseKvCache of the extension)."""
    q = np.ascontiguousarray(_array(q, "q"))
    softmax_scale = _real(softmax_scale, "softmax_scale")
    out = np.empty(q.shape, dtype=out_dtype)
    lse = np.empty(q.shape[:2], dtype=np.float32)
    problem = P.decode_problem(cache, _view(q), -1, _view(out), _view(lse), softmax_scale, delta,
                               None if kept is None else _view(kept))
    return q, out, lse, problem


def sparse_decode(cache, q, delta=5.0, softmax_scale=0.0, out_dtype=np.float32):
    """Sparse decoding of one query token per sequence (q [B, Hq, D] of the cache dtype), the fp64
    reference. Returns (out [B, Hq, D] of out_dtype, lse [B, Hq], kept_mask [B, Hkv, max_blocks]
    uint8, kept_fraction)."""
    args = _cache_args(cache)
    delta = _real(delta, "delta")
    kept = np.zeros((args.batch, args.num_kv_heads, args.max_blocks), dtype=np.uint8)
    q, out, lse, problem = _decode_problem(args, q, out_dtype, softmax_scale, delta, kept)
    fraction = ext().sparse_decode_cpu(problem)
    return out, lse, kept, fraction


def dense_decode(q, keys, values, lengths, softmax_scale=0.0, out_dtype=np.float32):
    """Dense attention (fp64 reference) of q [B, Hq, D] over keys/values [B, Hkv, capacity, D]
    (fp16, bf16 or fp32) and lengths [B] (integers). Returns (out [B, Hq, D], lse [B, Hq])."""
    keys, values, lengths = _dense_arrays(keys, values, lengths)
    dense = _dense(keys, values, lengths, P.SCORE_DTYPES)
    q, out, lse, problem = _decode_problem(dense, q, out_dtype, softmax_scale)
    ext().dense_decode_cpu(problem)
    return out, lse


def sparse_kv_rebuild(cache, capacity=None):
    """The cache as dense fp32 keys and values [B, Hkv, capacity, D] (rebuilt keys s * (L + R) in
    full blocks) and lengths, capacity (an integer) max_blocks * block_size by default."""
    args = _cache_args(cache)
    batch, heads, dim = args.batch, args.num_kv_heads, args.head_dim
    block, max_blocks = args.block_size, args.max_blocks
    capacity = max_blocks * block if capacity is None else _integer(capacity, "capacity")
    if capacity < 0:
        raise ValueError(f"capacity must be >= 0, got {capacity}")
    shape = (batch, heads, capacity, dim)
    _check_memory("the rebuilt keys and values", shape, 2 * 4 * int(np.prod(shape)),
                  f"capacity={capacity}")
    keys = np.zeros(shape, dtype=np.float32)
    values = np.zeros_like(keys)
    lengths = np.zeros(batch, dtype=np.int32)
    ext().sparse_kv_rebuild_cpu(args, _dense(keys, values, lengths, P.SCORE_DTYPES))
    return keys, values, lengths
