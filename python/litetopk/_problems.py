"""Checks arrays against litetopk's contracts and builds the extension's arguments.

Shared by the numpy functions (litetopk.cpu) and the torch ops (litetopk.ops). An array arrives
here as a view: (address, shape, strides in elements, dtype name, device index (-1: host memory),
C-contiguous), made by the caller's adapter (`numpy_view`, or `litetopk.ops`' torch adapter). A mismatch raises ValueError naming the
argument, what was expected and what was given, before anything reaches the library; the library
then checks the sizes themselves (k, H, D, ranges ...) and its message comes back as ValueError too.
"""

from ._ext import ext

SCORE_DTYPES = ("float32", "bfloat16", "float16")
CACHE_DTYPES = ("float16", "bfloat16")
FP8_DTYPES = ("float8_e4m3fn", "uint8")
HEAD_DIM = 128  # sparse and dense decode


def numpy_view(x):
    """The view of a numpy array (bfloat16 and float8_e4m3fn come from ml_dtypes, when used)."""
    return (x.__array_interface__["data"][0], x.shape,
            tuple(s // x.itemsize for s in x.strides), x.dtype.name, -1, x.flags.c_contiguous)


def device_name(index):
    return "cpu" if index < 0 else f"cuda:{index}"


def _fail(name, expected, view):
    raise ValueError(f"{name} must be {expected}, got shape {tuple(view[1])} dtype {view[3]}"
                     f" on {device_name(view[4])}")


def _shape_matches(got, shape):
    if len(got) != len(shape):
        return False
    for g, w in zip(got, shape):
        if w is not None and g != w:
            return False
    return True


def check(name, view, shape=None, dtypes=None, contiguous=True, device=None):
    """Checks one array view: shape (None entries match anything), dtype, C-contiguity, device
    (an index, -1 for host memory)."""
    if view is None:
        raise ValueError(f"{name} is required")
    if shape is not None and not _shape_matches(view[1], shape):
        want = "[" + ", ".join("*" if w is None else str(w) for w in shape) + "]"
        _fail(name, f"of shape {want}", view)
    if dtypes is not None and view[3] not in dtypes:
        _fail(name, "of dtype " + " or ".join(dtypes), view)
    if contiguous and not view[5]:
        raise ValueError(f"{name} must be contiguous, got shape {tuple(view[1])} strides "
                         f"{tuple(view[2])} (elements)")
    if device is not None and view[4] != device:
        raise ValueError(f"{name} must be on {device_name(device)} like the other inputs, got "
                         f"{device_name(view[4])}")


def address(view):
    return 0 if view is None else view[0]


def enum_value(enum, name, what):
    """The member `name` of one of the extension's enums (the C++ enum itself); ValueError naming
    the members otherwise."""
    try:
        return enum[name]
    except (KeyError, TypeError):
        raise ValueError(f"{what} must be one of {', '.join(enum.__members__)}, got "
                         f"{name!r}") from None


# ---- select_topk ----

def select_problem(scores, k, row_starts, row_ends, indices, values, largest, sorted_,
                   deterministic):
    """The extension's SelectProblem (litetopk::SelectProblem) for these array views."""
    if scores is None or len(scores[1]) != 2:
        _fail("scores", "a 2-D array [batch, n]", scores)
    batch, n = scores[1]
    check("scores", scores, dtypes=SCORE_DTYPES, contiguous=False)
    row_stride, col_stride = scores[2]
    if col_stride != 1 and n > 1:
        raise ValueError(f"scores must have unit stride along a row, got strides {scores[2]}")
    if batch <= 1:
        row_stride = n
    device = scores[4]
    for name, view in (("row_starts", row_starts), ("row_ends", row_ends)):
        if view is not None:
            check(name, view, (batch,), ("int32",), device=device)
    check("indices", indices, (batch, max(k, 0)), ("int32",), device=device)
    if values is not None:
        check("values", values, (batch, max(k, 0)), (scores[3],), device=device)
    lib = ext()
    problem = lib.SelectProblem()
    problem.scores, problem.dtype = scores[0], lib.DType[scores[3]]
    problem.batch, problem.n, problem.row_stride, problem.k = batch, n, row_stride, k
    problem.row_starts, problem.row_ends = address(row_starts), address(row_ends)
    problem.indices, problem.values = indices[0], address(values)
    problem.largest, problem.sorted, problem.deterministic = largest, sorted_, deterministic
    return problem


# ---- indexer ----

def indexer_shapes(q, kv):
    """(T, H, D, S) from q [T, H, D] and kv [S, D]."""
    if q is None or len(q[1]) != 3:
        _fail("q", "a 3-D array [T, H, D]", q)
    if kv is None or len(kv[1]) != 2:
        _fail("kv", "a 2-D array [S, D]", kv)
    T, H, D = q[1]
    return T, H, D, kv[1][0]


def indexer_args(q, kv, kv_scale, weights, ks, ke, k, indices=None, values=None):
    """The extension's IndexerProblem (litetopk::IndexerProblem); indices/values are checked when
    given."""
    T, H, D, S = indexer_shapes(q, kv)
    device = q[4]
    check("q", q, dtypes=FP8_DTYPES)
    check("kv", kv, (S, D), FP8_DTYPES, device=device)
    check("kv_scale", kv_scale, (S,), ("float32",), device=device)
    check("weights", weights, (T, H), ("float32",), device=device)
    check("cu_seqlen_ks", ks, (T,), ("int32",), device=device)
    check("cu_seqlen_ke", ke, (T,), ("int32",), device=device)
    if indices is not None:
        check("indices", indices, (T, max(k, 0)), ("int32",), device=device)
    if values is not None:
        check("values", values, (T, max(k, 0)), ("float32",), device=device)
    problem = ext().IndexerProblem()
    problem.q, problem.kv, problem.kv_scale, problem.weights = q[0], kv[0], kv_scale[0], weights[0]
    problem.ks, problem.ke, problem.indices, problem.values = (ks[0], ke[0], address(indices),
                                                              address(values))
    problem.num_queries, problem.num_heads, problem.head_dim, problem.num_keys = T, H, D, S
    problem.k = k
    return problem


def logits_stride(logits, T, S, device):
    """The row stride of a [T, S] fp32 logits array with unit column stride."""
    check("logits", logits, (T, S), ("float32",), contiguous=False, device=device)
    row, col = logits[2]
    if col != 1 and S > 1:
        raise ValueError(f"logits must have unit stride along a row, got strides {logits[2]}")
    return row if T > 1 else S


# ---- paged decode indexer ----

PAGED_KV_DTYPES = ("uint8",)


def paged_indexer_shapes(q, kv_cache, block_table):
    """(B, next_n, H, D, num_blocks, block_size, max_blocks) from q [B, next_n, H, D], kv_cache
    [num_blocks, block_size, 1, D + 4] and block_table [B, max_blocks]."""
    if q is None or len(q[1]) != 4:
        _fail("q", "a 4-D array [batch, next_n, num_heads, head_dim]", q)
    if kv_cache is None or len(kv_cache[1]) != 4:
        _fail("kv_cache", "a 4-D array [num_blocks, block_size, 1, head_dim + 4]", kv_cache)
    if block_table is None or len(block_table[1]) != 2:
        _fail("block_table", "a 2-D array [batch, max_blocks]", block_table)
    B, next_n, H, D = q[1]
    num_blocks, block_size = kv_cache[1][0], kv_cache[1][1]
    return B, next_n, H, D, num_blocks, block_size, block_table[1][1]


def paged_indexer_args(q, kv_cache, weights, context_lens, block_table, max_context, k,
                       indices=None, values=None):
    """The extension's PagedIndexerProblem (DeepGEMM's fp8_paged_mqa_logits layouts):
    q [B, next_n, H, D] e4m3, kv_cache [num_blocks, block_size, 1, D + 4] uint8 (contiguous: a
    block is block_size * D key bytes, then block_size fp32 scales), weights [B * next_n, H]
    fp32, context_lens [B] int32, block_table [B, max_blocks] int32 (contiguous), max_context
    (the logits' width and the workspace's size) and k; indices/values [B * next_n, k] are
    checked when given."""
    B, next_n, H, D, num_blocks, block_size, max_blocks = paged_indexer_shapes(q, kv_cache,
                                                                               block_table)
    device = q[4]
    check("q", q, dtypes=FP8_DTYPES)
    check("kv_cache", kv_cache, (num_blocks, block_size, 1, D + 4), PAGED_KV_DTYPES,
          device=device)
    check("weights", weights, (B * next_n, H), ("float32",), device=device)
    check("context_lens", context_lens, (B,), ("int32",), device=device)
    check("block_table", block_table, (B, max_blocks), ("int32",), device=device)
    if indices is not None:
        check("indices", indices, (B * next_n, max(k, 0)), ("int32",), device=device)
    if values is not None:
        check("values", values, (B * next_n, max(k, 0)), ("float32",), device=device)
    problem = ext().PagedIndexerProblem()
    problem.q, problem.kv_cache, problem.weights = q[0], kv_cache[0], weights[0]
    problem.context_lens, problem.block_table = context_lens[0], block_table[0]
    problem.indices, problem.values = address(indices), address(values)
    problem.batch, problem.next_n, problem.num_heads, problem.head_dim = B, next_n, H, D
    problem.num_blocks, problem.block_size, problem.max_blocks = num_blocks, block_size, max_blocks
    problem.max_context, problem.k = int(max_context), k
    return problem


# ---- decoding ----

def sparse_cache_args(key_codes, key_scales, key_residuals, values, tail_keys, lengths,
                      block_table=None):
    """The extension's SparseKvCache (litetopk::SparseKvCache). Shapes (BS = block size, D = 128):
    tail_keys [B, Hkv, BS, D] of the cache dtype and lengths [B] int32; contiguous cache: key_codes
    [B, Hkv, max_blocks, BS, D/4] uint8, key_scales [B, Hkv, max_blocks, D], key_residuals and
    values [B, Hkv, max_blocks, BS, D]; paged (block_table [B, max_blocks] int32): the same with
    [num_pages, Hkv] in front of [BS, ...] instead of [B, Hkv, max_blocks]."""
    if tail_keys is None or len(tail_keys[1]) != 4:
        _fail("tail_keys", "a 4-D array [batch, kv_heads, block_size, head_dim]", tail_keys)
    batch, heads, block, dim = tail_keys[1]
    dtype, device = tail_keys[3], tail_keys[4]
    check("tail_keys", tail_keys, dtypes=CACHE_DTYPES)
    check("lengths", lengths, (batch,), ("int32",), device=device)
    if block_table is None:
        if key_codes is None or len(key_codes[1]) != 5:
            _fail("key_codes", "a 5-D array [batch, kv_heads, max_blocks, block_size, D/4]",
                  key_codes)
        max_blocks, num_pages = key_codes[1][2], 0
        lead = (batch, heads, max_blocks)
    else:
        if block_table is None or len(block_table[1]) != 2:
            _fail("block_table", "a 2-D array [batch, max_blocks]", block_table)
        check("block_table", block_table, (batch, None), ("int32",), device=device)
        max_blocks = block_table[1][1]
        if key_codes is None or len(key_codes[1]) != 4:
            _fail("key_codes", "a 4-D array [num_pages, kv_heads, block_size, D/4]", key_codes)
        num_pages = key_codes[1][0]
        lead = (num_pages, heads)
    check("key_codes", key_codes, lead + (block, dim // 4), ("uint8",), device=device)
    check("key_scales", key_scales, lead + (dim,), (dtype,), device=device)
    check("key_residuals", key_residuals, lead + (block, dim), ("int8", "uint8"), device=device)
    check("values", values, lead + (block, dim), (dtype,), device=device)
    lib = ext()
    cache = lib.SparseKvCache()
    cache.dtype, cache.batch, cache.num_kv_heads = lib.DType[dtype], batch, heads
    cache.head_dim = dim
    cache.block_size, cache.max_blocks, cache.num_pages = block, max_blocks, num_pages
    cache.block_table, cache.lengths = address(block_table), lengths[0]
    cache.key_codes, cache.key_scales, cache.key_residuals = (key_codes[0], key_scales[0],
                                                              key_residuals[0])
    cache.values, cache.tail_keys = values[0], tail_keys[0]
    return cache


def dense_cache_args(keys, values, lengths, dtypes=CACHE_DTYPES):
    """The extension's DenseKvCache (litetopk::DenseKvCache): keys and values
    [B, Hkv, capacity, D] with the same
    element strides (unit channel stride), lengths [B] int32."""
    if keys is None or len(keys[1]) != 4:
        _fail("keys", "a 4-D array [batch, kv_heads, capacity, head_dim]", keys)
    batch, heads, capacity, dim = keys[1]
    device = keys[4]
    check("keys", keys, dtypes=dtypes, contiguous=False)
    check("values", values, (batch, heads, capacity, dim), (keys[3],), contiguous=False,
          device=device)
    if keys[2][3] != 1 or values[2] != keys[2]:
        raise ValueError(f"keys and values must have the same strides with a unit channel stride, "
                         f"got {keys[2]} and {values[2]}")
    check("lengths", lengths, (batch,), ("int32",), device=device)
    lib = ext()
    cache = lib.DenseKvCache()
    cache.dtype, cache.batch, cache.num_kv_heads = lib.DType[keys[3]], batch, heads
    cache.head_dim, cache.capacity = dim, capacity
    cache.keys, cache.values, cache.lengths = keys[0], values[0], lengths[0]
    cache.batch_stride, cache.head_stride, cache.token_stride = keys[2][:3]
    return cache


def decode_problem(cache, q, device, out, lse, softmax_scale, delta=None, kept_mask=None):
    """The extension's SparseDecodeProblem over a SparseKvCache (with delta and kept_mask
    [B, Hkv, max_blocks] uint8 or None), or its DenseDecodeProblem over a DenseKvCache: q
    [B, Hq, D] of the cache dtype, out [B, Hq, D] (fp32, fp16 or bf16), lse [B, Hq] fp32 or
    None."""
    lib = ext()
    if q is None or len(q[1]) != 3:
        _fail("q", "a 3-D array [batch, num_q_heads, head_dim]", q)
    check("q", q, dtypes=(cache.dtype.name,), device=device)
    check("out", out, tuple(q[1]), SCORE_DTYPES, device=device)
    if lse is not None:
        check("lse", lse, tuple(q[1][:2]), ("float32",), device=device)
    sparse = isinstance(cache, lib.SparseKvCache)
    problem = lib.SparseDecodeProblem() if sparse else lib.DenseDecodeProblem()
    problem.cache, problem.num_q_heads, problem.softmax_scale = cache, q[1][1], float(softmax_scale)
    problem.q, problem.out, problem.out_dtype, problem.lse = (q[0], out[0], lib.DType[out[3]],
                                                              address(lse))
    if sparse:
        problem.delta = float(delta)
        if kept_mask is not None:
            check("kept_mask", kept_mask, (cache.batch, cache.num_kv_heads, cache.max_blocks),
                  ("uint8", "bool"), device=device)
        problem.kept_mask = address(kept_mask)
    return problem


def sparse_cache_shapes(batch, kv_heads, max_blocks, block_size=128, num_pages=None,
                        head_dim=HEAD_DIM):
    """Shapes of (key_codes, key_scales, key_residuals, values, tail_keys, lengths, block_table)
    of a sparse cache; block_table is None for a contiguous cache (num_pages None)."""
    lead = (batch, kv_heads, max_blocks) if num_pages is None else (num_pages, kv_heads)
    return (lead + (block_size, head_dim // 4), lead + (head_dim,),
            lead + (block_size, head_dim), lead + (block_size, head_dim),
            (batch, kv_heads, block_size, head_dim), (batch,),
            None if num_pages is None else (batch, max_blocks))


class SparseKvCacheArrays:
    """The arrays of a sparse decoding cache, in the order the ops take them (block_table None
    for a contiguous cache)."""

    FIELDS = ("key_codes", "key_scales", "key_residuals", "values", "tail_keys", "lengths",
              "block_table")

    def __init__(self, key_codes, key_scales, key_residuals, values, tail_keys, lengths,
                 block_table=None):
        self.key_codes, self.key_scales, self.key_residuals = key_codes, key_scales, key_residuals
        self.values, self.tail_keys, self.lengths = values, tail_keys, lengths
        self.block_table = block_table

    def arrays(self):
        return tuple(getattr(self, name) for name in self.FIELDS)


# ---- sparse attention (FlashMLA's sparse prefill layouts) ----

BF16_DTYPES = ("bfloat16",)
SPARSE_ATTENTION_D_V = 512


def sparse_attention_shapes(q, kv, indices):
    """(s_q, h_q, d_qk, s_kv, topk) from q [s_q, h_q, d_qk], kv [s_kv, 1, d_qk] and indices
    [s_q, 1, topk] (or [s_q, topk])."""
    if q is None or len(q[1]) != 3:
        _fail("q", "a 3-D array [s_q, h_q, d_qk]", q)
    if kv is None or len(kv[1]) != 3:
        _fail("kv", "a 3-D array [s_kv, 1, d_qk]", kv)
    if indices is None or len(indices[1]) not in (2, 3):
        _fail("indices", "a 3-D array [s_q, 1, topk]", indices)
    s_q, h_q, d_qk = q[1]
    return s_q, h_q, d_qk, kv[1][0], indices[1][-1]


def sparse_attention_args(q, kv, indices, sm_scale, out, max_logits=None, lse=None,
                          bf16=BF16_DTYPES, algo="auto"):
    """The extension's SparseAttentionProblem (include/litetopk/attention.h): q [s_q, h_q, d_qk]
    bf16, kv [s_kv, 1, d_qk] bf16 (one latent head), indices [s_q, 1, topk] int32 (or
    [s_q, topk]), out [s_q, h_q, d_v] bf16, max_logits and lse [s_q, h_q] fp32 or None; every
    array contiguous; algo a name of the extension's SparseAttentionAlgo (the GPU kernel; the CPU
    reference ignores it). `bf16`: the dtype names that hold bf16 (numpy
    passes its uint16 bits). The library then checks the sizes (h_q, d_qk, d_v, topk, sm_scale),
    whether union-packed applies, and the alignment."""
    lib = ext()
    algo = enum_value(lib.SparseAttentionAlgo, algo, "algo")
    s_q, h_q, d_qk, s_kv, topk = sparse_attention_shapes(q, kv, indices)
    device = q[4]
    check("q", q, dtypes=bf16)
    check("kv", kv, (s_kv, 1, d_qk), bf16, device=device)
    if len(indices[1]) == 3:
        check("indices", indices, (s_q, 1, topk), ("int32",), device=device)
    else:
        check("indices", indices, (s_q, topk), ("int32",), device=device)
    if out is None or len(out[1]) != 3:
        _fail("out", "a 3-D array [s_q, h_q, d_v]", out)
    d_v = out[1][2]
    check("out", out, (s_q, h_q, d_v), bf16, device=device)
    for name, view in (("max_logits", max_logits), ("lse", lse)):
        if view is not None:
            check(name, view, (s_q, h_q), ("float32",), device=device)
    problem = lib.SparseAttentionProblem()
    problem.q, problem.kv, problem.indices = q[0], kv[0], indices[0]
    problem.s_q, problem.s_kv, problem.h_q, problem.d_qk = s_q, s_kv, h_q, d_qk
    problem.d_v, problem.topk, problem.sm_scale, problem.algo = d_v, topk, float(sm_scale), algo
    problem.out, problem.max_logits, problem.lse = out[0], address(max_logits), address(lse)
    return problem
