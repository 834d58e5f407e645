"""DeepGEMM's DSA indexer logits as an optional peer for litetopk's benchmarks.

DeepGEMM (deepseek-ai/DeepGEMM) is never a dependency of litetopk and none of its code is in this
repository: it is built from its public source on the GPU machine, outside the tree (its
setup.py with CUTLASS's headers; docs/BENCHMARKS.md names the commit), and put on PYTHONPATH. This module only
calls it when `import deep_gemm` works; `load()` returns None otherwise.

Written against DeepGEMM 54e22612409371d6364144b69086735beb54e98b (v2.6.1), whose Python API (csrc/apis/attention.hpp) is:
  fp8_fp4_mqa_logits(q=(q_fp8, None), kv=(kv_fp8, kv_scale), weights, cu_seq_len_k_start,
                     cu_seq_len_k_end, clean_logits=True, max_seqlen_k=0,
                     logits_dtype=torch.float32) -> logits [T, S]
  get_paged_mqa_logits_metadata(context_lens [B, next_n] int32, block_kv, num_sms)
                     -> schedule_meta [num_sms + 1, 2] int32
  fp8_fp4_paged_mqa_logits(q=(q_fp8, None), kv_cache, weights, context_lens, block_table,
                     schedule_meta, max_context_len, clean_logits=False,
                     logits_dtype=torch.float32, indices=None) -> logits [B * next_n, max_context]
  and the legacy wrappers fp8_mqa_logits(q_fp8, ...) / fp8_paged_mqa_logits(q_fp8, ...) (fp32).
On sm90 (H200): H in {32, 64}, D in {32, 64, 128}, fp32 weights; paged: 64-token pages,
next_n in {1, 2}.

Input recipe of DeepGEMM's tests (tests/test_attention.py):
- prefill: q = randn(T, H, D, bf16).to(float8_e4m3fn); kv = randn(S, D, bf16) cast per row:
  amax = |kv|.float().amax(dim=1).clamp(1e-4), kv_scale = amax / 448 (fp32 [S]),
  kv_fp8 = (kv * (1 / kv_scale)).to(float8_e4m3fn) (deep_gemm.utils.per_custom_dims_cast_to_fp8
  (kv, (0,), False)); weights = randn(T, H, fp32). Causal ranges there: ks = 0,
  ke = arange(T) + (S - T) (exclusive; litetopk's benchmarks use S - T + t + 1).
  Reference: logits[t, s] = sum_h relu(q[t, h] . kv[s]) * weights[t, h] * kv_scale[s] on
  [ks, ke), -inf elsewhere (clean_logits=True).
- paged decode: kv_cache = randn(num_blocks, 64, 1, D, bf16) cast per token the same way and
  packed as uint8 [num_blocks, 64, 1, D + 4]: per page, 64 * D fp8 bytes then 64 fp32 scales
  (pack_paged_kv_cache below); q = randn(B, next_n, H, D, bf16).to(float8_e4m3fn); weights =
  randn(B * next_n, H, fp32); block_table int32 [B, max_pages] (random page permutation);
  context_lens int32 [B, next_n] (2-D: row b, j sees keys [0, context_lens[b, j])).

Run DeepGEMM in a torch process with the system libstdc++ preloaded and its JIT cache out of the
tree: HOME=/root DG_JIT_CACHE_DIR=/tmp/dgcache LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6.
The first call of each shape JIT-compiles its kernel (seconds): warm up before timing.

Pure Python; torch is imported lazily.
"""

DEEPGEMM_COMMIT = "54e22612409371d6364144b69086735beb54e98b"
DEEPGEMM_VERSION = "2.6.1"
PAGE_TOKENS = 64  # the only page size DeepGEMM's sm90 paged kernel takes
FP8_E4M3_MAX = 448.0

load_error = None  # why the last load() returned None


def load():
    """The imported `deep_gemm` module, or None (never raises) when it is missing or broken."""
    global load_error
    try:
        import deep_gemm  # noqa: PLC0415 - optional peer
    except Exception as exc:  # ImportError, OSError from _C, an assert in its init, ...
        load_error = f"{type(exc).__name__}: {exc}"
        return None
    if not (hasattr(deep_gemm, "fp8_fp4_mqa_logits") or hasattr(deep_gemm, "fp8_mqa_logits")):
        load_error = "deep_gemm has no fp8 MQA logits function"
        return None
    load_error = None
    return deep_gemm


def describe(dg):
    """One line naming the loaded DeepGEMM, for benchmark output."""
    if dg is None:
        return f"DeepGEMM: not available ({load_error})"
    version = getattr(dg, "__version__", "?")
    return f"DeepGEMM {version} ({getattr(dg, '__file__', '?')}), written against {DEEPGEMM_COMMIT[:7]}"


def mqa_logits(dg, q, kv, kv_scale, weights, ks, ke, clean_logits=True, max_seqlen_k=0):
    """DeepGEMM's fp8 MQA logits: fp32 [T, S], -inf outside [ks[t], ke[t]) when clean_logits.

    q: fp8 e4m3 [T, H, D] contiguous; kv: fp8 e4m3 [S, D] contiguous; kv_scale: fp32 [S];
    weights: fp32 [T, H]; ks, ke: int32 [T] (key ranges, end exclusive). The result is a view
    of a [align(T, 128 // H), align(S + 256, 256)] buffer (row stride padded, not contiguous).
    With max_seqlen_k > 0 (clean_logits must then be False) it is the compressed [T, max_seqlen_k]
    form: column j of row t is key ks[t] + j. With clean_logits, one call is two kernels
    (sm90_fp8_mqa_logits, then smxx_clean_logits writing the -inf): the anchors time both.
    """
    import torch  # noqa: PLC0415

    kv_scale = kv_scale.to(torch.float32).contiguous()
    weights = weights.to(torch.float32)
    ks = ks.to(torch.int32).contiguous()
    ke = ke.to(torch.int32).contiguous()
    if hasattr(dg, "fp8_fp4_mqa_logits"):
        return dg.fp8_fp4_mqa_logits((q, None), (kv, kv_scale), weights, ks, ke,
                                     clean_logits=clean_logits, max_seqlen_k=max_seqlen_k,
                                     logits_dtype=torch.float32)
    if max_seqlen_k:
        return dg.fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke,
                                 clean_logits=clean_logits, max_seqlen_k=max_seqlen_k)
    return dg.fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke, clean_logits=clean_logits)


def _context_lens_2d(context_lens, next_n):
    """[B, next_n] int32 context lengths, as DeepGEMM's current API wants them.

    A 1-D [B] tensor means the older convention: token j of a row's next_n sees
    context_lens[b] - next_n + j + 1 keys.
    """
    import torch  # noqa: PLC0415

    context_lens = context_lens.to(torch.int32)
    if context_lens.dim() == 1:
        offsets = torch.arange(next_n, device=context_lens.device, dtype=torch.int32)
        context_lens = context_lens[:, None] - next_n + 1 + offsets[None, :]
    return context_lens.contiguous()


def paged_metadata(dg, context_lens, next_n=1, block_kv=PAGE_TOKENS):
    """DeepGEMM's per-SM schedule for the paged kernel ([num_sms + 1, 2] int32).

    Depends only on context_lens: compute it once, outside a timed region, and pass it to
    paged_mqa_logits as schedule_meta.
    """
    return dg.get_paged_mqa_logits_metadata(_context_lens_2d(context_lens, next_n), block_kv,
                                            dg.get_num_sms())


def paged_mqa_logits(dg, q, kv_cache, weights, context_lens, block_table, max_context,
                     schedule_meta=None, clean_logits=False):
    """DeepGEMM's fp8 paged MQA logits (decode): fp32 [B * next_n, max_context].

    q: fp8 e4m3 [B, next_n, H, D]; kv_cache: uint8 [num_pages, 64, 1, D + 4]
    (pack_paged_kv_cache); weights: fp32 [B * next_n, H] contiguous; context_lens: int32
    [B, next_n] or [B] (see _context_lens_2d); block_table: int32 [B, max_pages], page ids;
    max_context: the logits' width (>= every context length, a multiple of 64 is customary).
    Row b * next_n + j is valid on [0, context_lens[b, j]) only: DeepGEMM's 2-D context lengths
    do not allow clean_logits, so the columns past a row's length hold unspecified values (its
    tests mask them); clean_logits is passed through for versions that take it.
    The result is a view of a buffer whose row stride is max_context rounded up to 256.
    """
    import torch  # noqa: PLC0415

    next_n = q.shape[1]
    context_lens = _context_lens_2d(context_lens, next_n)
    if schedule_meta is None:
        schedule_meta = paged_metadata(dg, context_lens, next_n, kv_cache.shape[1])
    weights = weights.to(torch.float32).contiguous()
    block_table = block_table.to(torch.int32)
    if hasattr(dg, "fp8_fp4_paged_mqa_logits"):
        return dg.fp8_fp4_paged_mqa_logits((q, None), kv_cache, weights, context_lens,
                                           block_table, schedule_meta, int(max_context),
                                           clean_logits=clean_logits,
                                           logits_dtype=torch.float32)
    return dg.fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table,
                                   schedule_meta, int(max_context), clean_logits=clean_logits)


# --- DeepGEMM's input recipe -------------------------------------------------------------------

def per_row_cast_to_fp8(x):
    """(x_fp8, scale fp32 [rows]): DeepGEMM's per_custom_dims_cast_to_fp8(x, (0,), False)."""
    import torch  # noqa: PLC0415

    amax = x.abs().float().amax(dim=tuple(range(1, x.dim())), keepdim=True).clamp(1e-4)
    scale = amax / FP8_E4M3_MAX
    x_fp8 = (x * (1.0 / scale)).to(torch.float8_e4m3fn)
    return x_fp8, scale.reshape(x.shape[0])


def make_prefill_inputs(T, S, H, D=128, device="cuda", generator=None):
    """DeepGEMM's test inputs: dict of q, kv, kv_scale, weights (ranges are the caller's)."""
    import torch  # noqa: PLC0415

    q = torch.randn(T, H, D, device=device, dtype=torch.bfloat16, generator=generator)
    kv = torch.randn(S, D, device=device, dtype=torch.bfloat16, generator=generator)
    weights = torch.randn(T, H, device=device, dtype=torch.float32, generator=generator)
    kv_fp8, kv_scale = per_row_cast_to_fp8(kv)
    return {"q": q.to(torch.float8_e4m3fn), "kv": kv_fp8, "kv_scale": kv_scale.contiguous(),
            "weights": weights}


def pack_paged_kv_cache(kv_fp8, kv_scale, page_tokens=PAGE_TOKENS):
    """DeepGEMM's fused paged cache from fp8 [P * page_tokens, D] keys and fp32 scales.

    Returns uint8 [P, page_tokens, 1, D + 4]: each page's page_tokens * D fp8 bytes, then its
    page_tokens fp32 scales (the layout of DeepGEMM's kv_cache_cast_to_fp8). Key i of the flat
    input is token i % page_tokens of page i // page_tokens.
    """
    import torch  # noqa: PLC0415

    tokens, D = kv_fp8.shape
    assert tokens % page_tokens == 0, "pad the keys to whole pages"
    pages = tokens // page_tokens
    packed = torch.empty((pages, page_tokens * (D + 4)), device=kv_fp8.device, dtype=torch.uint8)
    packed[:, :page_tokens * D] = kv_fp8.reshape(pages, page_tokens * D).view(torch.uint8)
    packed[:, page_tokens * D:] = (kv_scale.to(torch.float32).contiguous()
                                   .reshape(pages, page_tokens).view(torch.uint8))
    return packed.view(pages, page_tokens, 1, D + 4)


def reference_logits(q, kv, kv_scale, weights, ks, ke, key_chunk=16384):
    """fp32 torch reference on [ks, ke) (-inf elsewhere): for checks on small shapes."""
    import torch  # noqa: PLC0415

    T, S = q.shape[0], kv.shape[0]
    qf, kf, w = q.float(), kv.float(), weights.float()
    out = torch.empty((T, S), device=q.device, dtype=torch.float32)
    for s0 in range(0, S, key_chunk):
        s1 = min(S, s0 + key_chunk)
        scores = torch.einsum("thd,sd->ths", qf, kf[s0:s1]).relu_()
        chunk = torch.einsum("ths,th->ts", scores, w) * kv_scale[None, s0:s1].float()
        cols = torch.arange(s0, s1, device=q.device)
        inside = (cols[None, :] >= ks[:, None]) & (cols[None, :] < ke[:, None])
        out[:, s0:s1] = chunk.masked_fill(~inside, float("-inf"))
    return out


def make_paged_inputs(batch, context, next_n, H, D=128, device="cuda", generator=None,
                      page_tokens=PAGE_TOKENS):
    """DeepGEMM's paged decode test inputs (tests/test_attention.py's recipe): a dict of
    q [B, next_n, H, D] float8_e4m3fn (bf16 randn cast), kv_cache [num_pages, 64, 1, D + 4]
    uint8 (bf16 randn keys cast per token, packed by pack_paged_kv_cache), weights
    [B * next_n, H] fp32 randn, context_lens [B] int32 (every request `context` tokens: the 1-D
    form, query j sees context - next_n + j + 1; _context_lens_2d gives DeepGEMM's 2-D one),
    block_table [B, pages per request] int32 (a random permutation of every page: no two requests
    share one) and max_context (the pages' tokens: context rounded up to a page).
    """
    import torch  # noqa: PLC0415

    pages = -(-context // page_tokens)
    num_pages = batch * pages
    q = torch.randn(batch, next_n, H, D, device=device, dtype=torch.bfloat16,
                    generator=generator)
    kv = torch.randn(num_pages * page_tokens, D, device=device, dtype=torch.bfloat16,
                     generator=generator)
    kv_fp8, kv_scale = per_row_cast_to_fp8(kv)
    del kv
    kv_cache = pack_paged_kv_cache(kv_fp8, kv_scale, page_tokens)
    del kv_fp8, kv_scale
    weights = torch.randn(batch * next_n, H, device=device, dtype=torch.float32,
                          generator=generator)
    block_table = (torch.randperm(num_pages, device=device, generator=generator)
                   .to(torch.int32).view(batch, pages))
    context_lens = torch.full((batch,), context, device=device, dtype=torch.int32)
    return {"q": q.to(torch.float8_e4m3fn), "kv_cache": kv_cache, "weights": weights,
            "context_lens": context_lens, "block_table": block_table,
            "max_context": pages * page_tokens}
