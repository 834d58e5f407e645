"""FlashMLA's sparse prefill attention (flash_mla_sparse_fwd) as an optional peer for litetopk's
sparse_attention benchmark (bench/attention_bench.py), and the benchmark's input generator.

FlashMLA (deepseek-ai/FlashMLA) is never a dependency of litetopk and none of its code is in this
repository. It is built from its public source on the GPU machine, outside the tree, and put on
PYTHONPATH (FlashMLA built from its public source outside the tree); `load()` returns None
(and `load_error` says why) when `import flash_mla` fails. This file is our own code around its
Python entry point.

Written against FlashMLA 9241ae3ef9bac614dd25e45e507e089f888280e0 (2026-04-29; csrc/cutlass at
NVIDIA/cutlass 147f5673d0c1c3dcf66f78d677fd647e4a020219). What we rely on, in our words:

  flash_mla.flash_mla_sparse_fwd(q, kv, indices, sm_scale, d_v=512, attn_sink=None,
                                 topk_length=None) -> (out, max_logits, lse)
  q [s_q, h_q, d_qk] bf16, kv [s_kv, 1, d_qk] bf16 (values: its first d_v columns), indices
  [s_q, 1, topk] int32 (a slot outside [0, s_kv) is skipped; a repeated token counts once per
  slot); out [s_q, h_q, d_v] bf16, max_logits and lse [s_q, h_q] fp32, all allocated per call.

Our notes on its constraints on sm90 (H200) at that commit:
  - h_q must be 64 or 128 (the kernel works on 64 heads per CTA); engines with 16 or 32 heads per
    GPU pad q with zero heads to 64 (pad_heads); a zero head's output is the plain mean of the
    selected values and is thrown away.
  - topk must be a positive multiple of 128 (two 64-slot tiles per step): pad rows with -1
    (pad_topk) for other k.
  - h_kv = 1, d_qk 576 or 512, d_v 512; bf16 q and kv, int32 indices; last dimensions
    contiguous; no batch dimension (flatten and offset the indices); s_q * topk below 2^31.
  - sm_scale has no default (1 / sqrt(d_qk) is what we pass).
  - max_logits and lse are in natural-log units since FlashMLA's refactor of 2026-01-16 (082094b):
    max_logits = max_j sm_scale * q.k_j, lse = ln sum_j exp(sm_scale * q.k_j), and a query with no
    valid slot gets out 0, max_logits -inf, lse +inf. The first release (2025-09) returned base-2
    values; its README still describes those. litetopk's contract (docs/attention.md) is the base-2
    one: to_base2 converts (times log2(e); +inf lse of an empty query -> -inf).
  - It runs on torch's current stream, one kernel per call.

The input generator (make_indices, make_q, make_kv, make_inputs) draws with torch on any device
(the GPU for the benchmark; CPU tensors work for small shapes) with the semantics of litetopk's
testkit/sparse_attention_workload.h, not its bytes: each row holds n_valid = topk - n_pad - n_out
distinct tokens and n_out out-of-range entries shuffled together, then n_pad trailing -1; random
rows, or groups of G neighbouring queries sharing round(X * n_valid) tokens with every other token
of a member its own (a full group's union is n_shared + G (n_valid - n_shared); the last group is
shorter when G does not divide s_q). group_overlap is the testkit's measure_group_unions metric.

Pure Python; torch is imported lazily.
"""
import math

FLASHMLA_COMMIT = "9241ae3ef9bac614dd25e45e507e089f888280e0"
CUTLASS_COMMIT = "147f5673d0c1c3dcf66f78d677fd647e4a020219"
SUPPORTED_H_Q = (64, 128)
SUPPORTED_D_QK = (576, 512)
D_V = 512
TOPK_MULTIPLE = 128
LOG2_E = 1.4426950408889634
INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)

# Independent random streams of one seed (as the testkit separates its streams).
_STREAM_Q, _STREAM_KV, _STREAM_TOKENS, _STREAM_OUT_OF_RANGE, _STREAM_SHUFFLE = range(5)

load_error = None  # why the last load() returned None
_module = None


def load():
    """The imported `flash_mla` module, or None (never raises) when it is missing or broken."""
    global load_error, _module
    try:
        import flash_mla  # noqa: PLC0415 - optional peer
    except Exception as exc:  # ImportError, OSError from its extension, undefined symbol, ...
        load_error = f"{type(exc).__name__}: {exc}"
        _module = None
        return None
    if not hasattr(flash_mla, "flash_mla_sparse_fwd"):
        load_error = "flash_mla has no flash_mla_sparse_fwd"
        _module = None
        return None
    load_error = None
    _module = flash_mla
    return flash_mla


def describe(fm):
    """One line naming the loaded FlashMLA, for benchmark output."""
    if fm is None:
        return f"FlashMLA: not available ({load_error})"
    return (f"FlashMLA {getattr(fm, '__version__', '?')} ({getattr(fm, '__file__', '?')}), "
            f"written against {FLASHMLA_COMMIT[:7]}")


# --- the call ------------------------------------------------------------------------------------

def padded_heads(h_q):
    """The heads FlashMLA runs for h_q real ones: 64 up to 64, else 128."""
    if not 1 <= h_q <= 128:
        raise ValueError(f"FlashMLA runs at most 128 heads, got h_q = {h_q}")
    return 64 if h_q <= 64 else 128


def pad_heads(q, heads=None):
    """q [s_q, h_q, d] padded with zero heads to [s_q, heads, d] (heads = padded_heads(h_q)), as
    engines with 16 or 32 heads per GPU do; q itself when nothing is added."""
    import torch  # noqa: PLC0415

    s_q, h_q, d = q.shape
    heads = padded_heads(h_q) if heads is None else heads
    if heads == h_q:
        return q.contiguous()
    padded = torch.zeros((s_q, heads, d), dtype=q.dtype, device=q.device)
    padded[:, :h_q] = q
    return padded


def pad_topk(indices, multiple=TOPK_MULTIPLE):
    """indices [s_q, 1, k] padded with -1 slots to the next multiple of `multiple` (at least
    one multiple)."""
    import torch  # noqa: PLC0415

    k = indices.shape[-1]
    padded_k = max(multiple, -(-k // multiple) * multiple)
    if padded_k == k:
        return indices.contiguous()
    pad = torch.full((*indices.shape[:-1], padded_k - k), -1, dtype=indices.dtype,
                     device=indices.device)
    return torch.cat([indices, pad], dim=-1).contiguous()


def check_args(q, kv, indices, d_v=D_V):
    """Raise ValueError naming the first argument FlashMLA's sm90 sparse prefill would reject."""
    import torch  # noqa: PLC0415

    if q.dim() != 3 or kv.dim() != 3 or indices.dim() != 3:
        raise ValueError(f"q, kv, indices must be 3-D, got {tuple(q.shape)}, {tuple(kv.shape)}, "
                         f"{tuple(indices.shape)}")
    s_q, h_q, d_qk = q.shape
    if h_q not in SUPPORTED_H_Q:
        raise ValueError(f"h_q must be 64 or 128 (pad_heads), got {h_q}")
    if d_qk not in SUPPORTED_D_QK:
        raise ValueError(f"d_qk must be 576 or 512, got {d_qk}")
    if d_v != D_V:
        raise ValueError(f"d_v must be 512, got {d_v}")
    if tuple(kv.shape[1:]) != (1, d_qk):
        raise ValueError(f"kv must be [s_kv, 1, {d_qk}], got {tuple(kv.shape)}")
    if tuple(indices.shape[:2]) != (s_q, 1):
        raise ValueError(f"indices must be [{s_q}, 1, topk], got {tuple(indices.shape)}")
    topk = indices.shape[2]
    if topk <= 0 or topk % TOPK_MULTIPLE:
        raise ValueError(f"topk must be a positive multiple of {TOPK_MULTIPLE} on sm90, got "
                         f"{topk} (pad_topk)")
    if q.dtype != torch.bfloat16 or kv.dtype != torch.bfloat16 or indices.dtype != torch.int32:
        raise ValueError(f"dtypes must be bf16, bf16, int32, got {q.dtype}, {kv.dtype}, "
                         f"{indices.dtype}")
    for name, t in (("q", q), ("kv", kv), ("indices", indices)):
        if t.stride(-1) != 1 and t.size(-1) != 1:
            raise ValueError(f"{name}'s last dimension must be contiguous")


def sparse_prefill(q, kv, indices, sm_scale, d_v=D_V, attn_sink=None, topk_length=None,
                   check=False):
    """One flash_mla_sparse_fwd call: (out [s_q, h_q, d_v] bf16, max_logits [s_q, h_q] fp32,
    lse [s_q, h_q] fp32), natural log. The arguments must already suit FlashMLA (prepare does the
    padding); check=True validates them first (host only, no sync)."""
    fm = _module if _module is not None else load()
    if fm is None:
        raise RuntimeError(f"FlashMLA is not available: {load_error}")
    if check:
        check_args(q, kv, indices, d_v)
    return fm.flash_mla_sparse_fwd(q, kv, indices, float(sm_scale), int(d_v), attn_sink,
                                   topk_length)


def prepare(q, kv, indices):
    """(q, kv, indices) as FlashMLA takes them for litetopk-style inputs: q padded with zero heads
    to 64 or 128, indices [s_q, 1, k] (a 2-D [s_q, k] is viewed so) padded with -1 to a multiple
    of 128, everything contiguous. Do it once, outside a timed region; the real heads are the
    first q.shape[1] of the result."""
    if indices.dim() == 2:
        indices = indices.view(indices.shape[0], 1, indices.shape[1])
    return pad_heads(q), kv.contiguous(), pad_topk(indices)


def to_base2(max_logits, lse):
    """FlashMLA's natural-log (max_logits, lse) in litetopk's base-2 convention: times log2(e),
    and an empty query's +inf lse becomes -inf."""
    import torch  # noqa: PLC0415

    m2 = max_logits * LOG2_E
    l2 = lse * LOG2_E
    l2 = torch.where(torch.isposinf(lse), torch.full_like(l2, float("-inf")), l2)
    return m2, l2


def as_litetopk(result, h_q):
    """A FlashMLA result (out, max_logits, lse) on padded heads as litetopk returns it for the
    first h_q heads: (out [s_q, h_q, d_v], max_logits, lse) with the stats in base 2."""
    out, max_logits, lse = result
    m2, l2 = to_base2(max_logits[:, :h_q], lse[:, :h_q])
    return out[:, :h_q], m2, l2


def flops(s_q, h_q, topk, d_qk=576, d_v=D_V):
    """FlashMLA's FLOP count: 2 * s_q * topk * h_q * (d_qk + d_v), every slot counted."""
    return 2.0 * s_q * topk * h_q * (d_qk + d_v)


# --- inputs --------------------------------------------------------------------------------------

def _rounded(fraction, n):
    """round(fraction * n), halves away from zero (the testkit's llround), for fraction >= 0."""
    return int(math.floor(fraction * n + 0.5))


def _generator(seed, stream, device):
    import torch  # noqa: PLC0415

    g = torch.Generator(device=device)
    g.manual_seed((int(seed) * 1_000_003 + stream) % (2**63))
    return g


def _distinct_rows(n_rows, count, s_kv, generator, device):
    """[n_rows, count] int64: each row `count` distinct tokens of [0, s_kv) in a random order: the
    `count` largest of s_kv uniform keys (a uniform subset, in the keys' order: a uniform order),
    in chunks of about 1 GiB of keys."""
    import torch  # noqa: PLC0415

    out = torch.empty((n_rows, count), dtype=torch.int64, device=device)
    if n_rows == 0 or count == 0:
        return out
    chunk = max(1, (1 << 28) // max(s_kv, 1))
    for r0 in range(0, n_rows, chunk):
        r1 = min(n_rows, r0 + chunk)
        keys = torch.rand((r1 - r0, s_kv), device=device, generator=generator)
        out[r0:r1] = keys.topk(count, dim=1, sorted=True).indices
        del keys
    return out


def _out_of_range(shape, s_kv, generator, device):
    """int64 entries outside [0, s_kv) other than -1, the testkit's six kinds equally likely: s_kv,
    a value in (s_kv, INT32_MAX], INT32_MAX, -2, a value in [INT32_MIN + 1, -2], INT32_MIN."""
    import torch  # noqa: PLC0415

    kind = torch.randint(0, 6, shape, device=device, generator=generator)
    above = s_kv + 1 + torch.randint(0, max(INT32_MAX - s_kv, 1), shape, device=device,
                                     generator=generator)
    below = -2 - torch.randint(0, INT32_MAX - 1, shape, device=device, generator=generator)
    values = torch.full(shape, INT32_MIN, dtype=torch.int64, device=device)
    values = torch.where(kind == 0, torch.full_like(values, s_kv), values)
    values = torch.where(kind == 1, above.clamp(max=INT32_MAX), values)
    values = torch.where(kind == 2, torch.full_like(values, INT32_MAX), values)
    values = torch.where(kind == 3, torch.full_like(values, -2), values)
    values = torch.where(kind == 4, below, values)
    return values


def row_counts(topk, overlap=None, padding_fraction=0.0, out_of_range_fraction=0.0):
    """(n_valid, n_shared, n_out, n_pad) of one row, as the testkit rounds them (n_shared 0 for
    random rows)."""
    n_pad = _rounded(padding_fraction, topk)
    n_out = _rounded(out_of_range_fraction, topk)
    n_valid = topk - n_pad - n_out
    n_shared = 0 if overlap is None else _rounded(float(overlap), max(n_valid, 0))
    return n_valid, n_shared, n_out, n_pad


def _normalize_overlap(overlap):
    if overlap is None or overlap == "random":
        return None
    f = float(overlap)
    if not 0.0 <= f <= 1.0:
        raise ValueError(f"overlap must be None, 'random' or in [0, 1], got {overlap}")
    return f


def overlap_label(overlap, group=8):
    """'random' or 'groups of 8, 50% shared' (the testkit's label)."""
    overlap = _normalize_overlap(overlap)
    if overlap is None:
        return "random"
    return f"groups of {group}, {overlap * 100:g}% shared"


def make_indices(s_q, s_kv, topk, overlap=None, group=8, seed=0, padding_fraction=0.0,
                 out_of_range_fraction=0.0, device="cuda"):
    """[s_q, 1, topk] int32 index rows (the testkit's semantics, drawn with torch on `device`).

    overlap None or "random": each query draws its n_valid tokens on its own, uniformly.
    overlap X in [0, 1]: queries [g*G, (g+1)*G) (G = group; the last group shorter when G does not
    divide s_q) share n_shared = round(X * n_valid) tokens; each member's other tokens are its own,
    distinct from every other member's. Then n_out = round(out_of_range_fraction * topk) entries
    outside [0, s_kv) (never -1) are shuffled in with the valid ones, and n_pad =
    round(padding_fraction * topk) trailing -1 end the row.
    """
    import torch  # noqa: PLC0415

    overlap = _normalize_overlap(overlap)
    for name, f in (("padding_fraction", padding_fraction),
                    ("out_of_range_fraction", out_of_range_fraction)):
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {f}")
    if s_q < 0 or s_kv < 0 or s_kv > INT32_MAX or topk < 1 or group < 1:
        raise ValueError(f"bad sizes: s_q {s_q}, s_kv {s_kv}, topk {topk}, group {group}")
    n_valid, n_shared, n_out, n_pad = row_counts(topk, overlap, padding_fraction,
                                                 out_of_range_fraction)
    if n_valid < 0:
        raise ValueError(f"padding ({n_pad}) + out-of-range entries ({n_out}) exceed topk {topk}")
    G = 1 if overlap is None else int(group)
    members = min(G, max(s_q, 1))
    own = n_valid - n_shared
    needed = n_shared + members * own
    if needed > s_kv:
        raise ValueError(f"s_kv = {s_kv} holds fewer than the {needed} distinct tokens "
                         + ("a row needs" if overlap is None else "a group's union needs"))
    units = -(-s_q // G)
    # Each unit (a query, or a group) draws its union: [0, n_shared) every member's, then each
    # member's own block.
    tokens = _distinct_rows(units, needed, s_kv, _generator(seed, _STREAM_TOKENS, device), device)
    shared = tokens[:, None, :n_shared].expand(units, members, n_shared)
    owned = tokens[:, n_shared:].reshape(units, members, own)
    rows = torch.cat([shared, owned], dim=2).reshape(units * members, n_valid)[:s_q]
    del tokens, shared, owned
    if n_out:
        rows = torch.cat([rows, _out_of_range((s_q, n_out), s_kv, _generator(
            seed, _STREAM_OUT_OF_RANGE, device), device)], dim=1)
    if rows.shape[1] > 1:  # the valid and out-of-range entries in a random order
        keys = torch.rand(rows.shape, device=device,
                          generator=_generator(seed, _STREAM_SHUFFLE, device))
        rows = rows.gather(1, keys.argsort(dim=1))
        del keys
    indices = torch.full((s_q, topk), -1, dtype=torch.int32, device=device)
    indices[:, :n_valid + n_out] = rows.to(torch.int32)
    return indices.view(s_q, 1, topk)


def make_q(s_q, h_q, d_qk=576, std=1.0, seed=0, device="cuda"):
    """q [s_q, h_q, d_qk] bf16 of N(0, std^2) (drawn per h_q: q for 16 heads is not the first 16
    of q for 64)."""
    import torch  # noqa: PLC0415

    g = _generator(seed * 131 + h_q, _STREAM_Q, device)
    return (torch.randn((s_q, h_q, d_qk), device=device, generator=g) * std).to(torch.bfloat16)


def make_kv(s_kv, d_qk=576, std=1.0, seed=0, device="cuda"):
    """kv [s_kv, 1, d_qk] bf16 of N(0, std^2)."""
    import torch  # noqa: PLC0415

    g = _generator(seed, _STREAM_KV, device)
    return (torch.randn((s_kv, 1, d_qk), device=device, generator=g) * std).to(torch.bfloat16)


def make_inputs(s_q, s_kv, h_q, topk, overlap=None, group=8, seed=0, d_qk=576, q_std=1.0,
                kv_std=1.0, padding_fraction=0.0, out_of_range_fraction=0.0, device="cuda"):
    """q, kv and indices for one problem: a dict of q, kv, indices, sm_scale (1 / sqrt(d_qk)),
    d_v, flops (FlashMLA's count, every slot) and label (the testkit's shape label). std 1 gives
    logits of standard deviation about 1 at that scale; FlashMLA's own test uses N(0, 1) / 10."""
    indices = make_indices(s_q, s_kv, topk, overlap, group, seed, padding_fraction,
                           out_of_range_fraction, device)
    label = f"s_q={s_q} s_kv={s_kv} h_q={h_q} d_qk={d_qk} topk={topk} " + overlap_label(
        overlap, group)
    if padding_fraction > 0:
        label += f", {padding_fraction * 100:g}% padding"
    if out_of_range_fraction > 0:
        label += f", {out_of_range_fraction * 100:g}% out of range"
    return {"q": make_q(s_q, h_q, d_qk, q_std, seed, device),
            "kv": make_kv(s_kv, d_qk, kv_std, seed, device), "indices": indices,
            "sm_scale": d_qk ** -0.5, "d_v": D_V, "flops": flops(s_q, h_q, topk, d_qk),
            "label": label}


def group_overlap(indices, s_kv, group):
    """The testkit's measure_group_unions on torch indices [s_q, topk] or [s_q, 1, topk]: a dict of
    mean_union (distinct valid tokens per group of `group` neighbours), mean_overlap ((sum n_q - U)
    / (sum n_q - max n_q) averaged over the groups where it is defined; None if none), reuse
    (sum n_q / sum U) and valid_pairs (slots in [0, s_kv))."""
    import torch  # noqa: PLC0415

    s_q = indices.shape[0]
    idx = indices.reshape(s_q, -1).long()
    topk = idx.shape[1]
    valid = (idx >= 0) & (idx < s_kv)
    key = torch.where(valid, idx, torch.full_like(idx, s_kv))  # skipped slots: sentinel s_kv

    def distinct(rows):  # distinct values below s_kv per row
        srt = rows.sort(dim=1).values
        first = (srt[:, :1] < s_kv).long().sum(1)
        rest = ((srt[:, 1:] != srt[:, :-1]) & (srt[:, 1:] < s_kv)).long().sum(1)
        return first + rest

    units = -(-s_q // group)
    n_q = distinct(key)
    pad = units * group - s_q
    if pad:
        key = torch.cat([key, torch.full((pad, topk), s_kv, dtype=key.dtype,
                                         device=key.device)])
        n_q = torch.cat([n_q, torch.zeros(pad, dtype=n_q.dtype, device=n_q.device)])
    U = distinct(key.reshape(units, group * topk))
    n_q = n_q.reshape(units, group)
    sum_n, max_n = n_q.sum(1), n_q.max(1).values
    defined = sum_n > max_n
    overlaps = (sum_n - U)[defined].double() / (sum_n - max_n)[defined].double()
    total_u = int(U.sum())
    return {"group": group,
            "mean_union": float(U.double().mean()) if units else 0.0,
            "mean_overlap": float(overlaps.mean()) if int(defined.sum()) else None,
            "reuse": float(sum_n.sum()) / total_u if total_u else None,
            "valid_pairs": int(valid.sum())}


# --- a reference for checks ----------------------------------------------------------------------

def reference(q, kv, indices, sm_scale, d_v=D_V, query_chunk=32):
    """fp32 torch reference of the operation (no sink, no topk_length) with FlashMLA's current
    conventions: (out fp32 [s_q, h_q, d_v], max_logits, lse), natural log, an empty query giving
    out 0, max_logits -inf, lse +inf. For small shapes or a few queries (gathers [query_chunk,
    topk, d_qk] fp32)."""
    import torch  # noqa: PLC0415

    s_q, h_q, d_qk = q.shape
    s_kv = kv.shape[0]
    topk = indices.shape[-1]
    kv2 = kv.reshape(s_kv, d_qk).float()
    out = torch.empty((s_q, h_q, d_v), dtype=torch.float32, device=q.device)
    max_logits = torch.empty((s_q, h_q), dtype=torch.float32, device=q.device)
    lse = torch.empty((s_q, h_q), dtype=torch.float32, device=q.device)
    for s0 in range(0, s_q, query_chunk):
        s1 = min(s_q, s0 + query_chunk)
        idx = indices[s0:s1].reshape(s1 - s0, topk).long()
        invalid = (idx < 0) | (idx >= s_kv)
        gathered = kv2.index_select(0, idx.masked_fill(invalid, 0).flatten()).view(
            s1 - s0, topk, d_qk)
        logits = (q[s0:s1].float() @ gathered.transpose(1, 2)) * sm_scale  # [c, h_q, topk]
        logits.masked_fill_(invalid[:, None, :], float("-inf"))
        l = torch.logsumexp(logits, dim=-1)
        l = l.masked_fill(l == float("-inf"), float("inf"))
        out[s0:s1] = torch.exp(logits - l[..., None]) @ gathered[..., :d_v]
        max_logits[s0:s1] = logits.max(dim=-1).values
        lse[s0:s1] = l
    return out, max_logits, lse
