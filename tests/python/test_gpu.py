"""GPU-only checks of the torch ops (skipped without CUDA): the example DSA indexer module under
torch.compile(fullgraph=True) and in a CUDA graph, graph capture and replay of every op, a chunk
at a real shape, the paged decode indexer against the CPU op (every algorithm, next_n 1 to 4),
compiled, and in one CUDA graph replayed as the contexts grow, sparse attention against the CPU
op (every h_q, both d_qk, topk up to 2048), compiled and in a CUDA graph. test_torch.py runs
every op against its reference on the GPU as well; bench/host_time_bench.py measures the eager
host time per call."""
import pytest

from conftest import needs_cuda, torch

pytestmark = needs_cuda

if torch is not None:
    from litetopk._ext import ext
    from litetopk.ops import (IndexerState, SparseKvCache, dense_decode, flash_mla_sparse_fwd,
                              fp8_mqa_logits, fp8_mqa_topk, fp8_paged_mqa_logits,
                              fp8_paged_mqa_topk, sparse_attention, topk)
    from litetopk.ops.paged import fp8_paged_mqa_topk_plan, paged_indexer_state
    from dsa_indexer import DSAIndexer, capture, make_inputs, same_selection
    from test_torch import (attention_inputs, check_attention_close, check_paged_selection,
                            dense_cache, indexer_inputs, paged_inputs, paged_row_ends,
                            paged_tolerance)


def modules(k=64):
    torch.manual_seed(0)
    fused = DSAIndexer(topk=k, fused=True).cuda().eval()
    unfused = DSAIndexer(topk=k, fused=False).cuda().eval()
    unfused.load_state_dict(fused.state_dict())
    return fused, unfused


def test_dsa_indexer_compiled_fullgraph_and_graphed():
    """Inductor computes the module's prepare() (the linear layers, LayerNorm, the fp8 scales)
    with other roundings than eager mode: its fp8 inputs, so its scores, differ in low bits, and
    keys near a row's k-th score may differ. So the compiled module is checked against itself
    (fused against unfused, a CUDA graph replay against the call) with the scores of its own
    prepare(), and the ops compiled against the ops in eager mode on the same inputs."""
    fused, unfused = modules()
    inputs = make_inputs(1024, device="cuda")
    ks, ke, k = inputs[2], inputs[3], fused.topk

    def select(q, kv, kv_scale, weights):
        logits = fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke)
        return (fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, k)[0],
                topk(logits, k, ks, ke)[0])

    def scores_of(x, q_lora):
        return fp8_mqa_logits(*unfused.prepare(x, q_lora), ks, ke)

    with torch.no_grad():
        q, (kv, kv_scale), weights = unfused.prepare(*inputs[:2])
        scores = fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke)
        eager = unfused(*inputs)
        for got in torch.compile(select, fullgraph=True)(q, kv, kv_scale, weights):
            assert same_selection(got, eager, scores, ks)

        compiled_fused = torch.compile(fused, fullgraph=True)
        compiled_unfused = torch.compile(unfused, fullgraph=True)
        compiled_scores = torch.compile(scores_of, fullgraph=True)(*inputs[:2])
        got = compiled_fused(*inputs)
        want = compiled_unfused(*inputs)
        assert same_selection(got, want, compiled_scores, ks)
        graph, replayed = capture(lambda: compiled_fused(*inputs))
        graph.replay()
        torch.cuda.synchronize()
        assert same_selection(replayed, got, compiled_scores, ks)


def test_every_op_in_a_cuda_graph():
    scores = torch.randn(32, 20000, device="cuda")
    q, kv, kv_scale, weights, ks, ke = indexer_inputs("cuda", T=256, S=4096)
    state = IndexerState(256, device="cuda")
    dq, keys, values, lengths = dense_cache("cuda")
    cache = SparseKvCache.empty(2, 2, 3, device="cuda")
    cache.fill_from_dense(keys, values, lengths.clone())
    sparse_out = torch.empty(dq.shape, dtype=torch.float32, device="cuda")

    def run():
        state.reset()
        selected = topk(scores, 512)
        logits = fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke)
        fused = fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, 256, state=state)
        dense = dense_decode(dq, keys, values, lengths)
        cache.decode(dq, out=(sparse_out, None, None))
        return selected, logits, fused, dense

    eager = [x.clone() for pair in run()[0:1] for x in pair]
    graph, outputs = capture(run)
    scores.copy_(torch.randn_like(scores))  # replay must see the new input
    graph.replay()
    torch.cuda.synchronize()
    # Distinct names: values is the decode cache's values, checked below.
    (top_indices, top_values), logits, (fused_indices, _), (dense, _) = outputs
    assert not torch.equal(top_indices.sort(1).values, eager[0].sort(1).values)
    assert torch.equal(top_values.sort(1).values, torch.topk(scores, 512).values.sort(1).values)
    assert same_selection(fused_indices.cpu(), topk(logits, 256, ks, ke)[0].cpu(), logits.cpu(),
                          ks.cpu())
    want, _ = dense_decode(dq, keys, values, lengths)
    torch.testing.assert_close(dense, want, rtol=1e-3, atol=1e-4)
    want, _ = cache.decode(dq, out_dtype=torch.float32)
    torch.testing.assert_close(sparse_out, want, rtol=1e-3, atol=1e-4)


def test_real_shape_chunk_fused_vs_unfused():
    q, kv, kv_scale, weights, _, _ = indexer_inputs("cuda", T=2048, S=32768)
    T, S = q.shape[0], kv.shape[0]
    ks = torch.zeros(T, dtype=torch.int32, device="cuda")
    ke = torch.arange(S - T + 1, S + 1, dtype=torch.int32, device="cuda")
    logits = fp8_mqa_logits(q, (kv, kv_scale), weights, ks, ke)
    state = IndexerState(2048, device="cuda")
    for algo in ("unfused", "fused", "auto"):
        indices, _ = fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, 2048, state=state,
                                  algo=algo)
        selected, _ = topk(logits, 2048, ks, ke)
        assert same_selection(indices.cpu(), selected.cpu(), logits.cpu()), algo


# ---------------------------------------------------------------- paged decode indexer

PAGED_ALGOS = ("auto", "unfused", "fused")


def cpu_paged(inputs, max_context, k):
    """The CPU op's (logits, indices) on copies of the inputs: the reference."""
    host = [x.cpu() for x in inputs]
    return (fp8_paged_mqa_logits(*host, max_context),
            fp8_paged_mqa_topk(*host, max_context, k)[0])


def check_against_cpu(indices, inputs, cpu_logits, row_ends, k):
    """GPU indices against the CPU scores: the right count, no NaN (out-of-range block) token,
    and every chosen token's CPU score >= the CPU k-th score - 2 tol (GPU and CPU scores differ
    by fp32 accumulation only)."""
    tol = paged_tolerance(inputs[0], inputs[1], inputs[2])
    indices = indices.cpu()
    for row in range(cpu_logits.shape[0]):
        end = int(row_ends[row])
        scores = cpu_logits[row, :end]
        scores = scores[~scores.isnan()]
        want = min(k, scores.numel())
        got = indices[row, :want].long()
        assert (indices[row, want:] == -1).all(), row
        assert (got >= 0).all() and (got < end).all() and got.unique().numel() == want, row
        chosen = cpu_logits[row, got]
        assert not chosen.isnan().any(), row
        if want:
            kth = float(torch.topk(scores, want).values.min())
            assert float(chosen.min()) >= kth - 2 * float(tol[row]), row


@pytest.mark.parametrize("next_n", [1, 2, 3, 4])
def test_paged_gpu_matches_cpu(next_n):
    contexts = [5000, 0, 37, 3000, 4097, 64, 1]
    k = 512
    inputs = paged_inputs("cuda", contexts=contexts, next_n=next_n, seed=20 + next_n)
    max_context = 4800  # cuts request 0
    cpu_logits, _ = cpu_paged(inputs, max_context, k)
    logits = fp8_paged_mqa_logits(*inputs, max_context)
    got = logits.cpu()
    assert torch.equal(got.isnan(), cpu_logits.isnan())
    assert torch.equal(got.isinf(), cpu_logits.isinf())
    finite = cpu_logits.isfinite()
    error = torch.where(finite, (got.double() - cpu_logits.double()).abs(), 0)
    assert (error <= paged_tolerance(*inputs[:3])[:, None]).all()
    row_ends = paged_row_ends(inputs[3].cpu(), next_n, max_context)
    for algo in PAGED_ALGOS:
        indices, values = fp8_paged_mqa_topk(*inputs, max_context, k, algo=algo)
        check_paged_selection(indices, values, logits, row_ends, k)  # its own logits
        check_against_cpu(indices, inputs, cpu_logits, row_ends, k)


def test_paged_compiled_fullgraph():
    inputs = paged_inputs("cuda", contexts=[3000, 17, 0, 2048], next_n=2, seed=31)
    max_context, k = inputs[4].shape[1] * 64, 256  # the table's whole span

    def select(q, kv_cache, weights, lens, table):
        logits = fp8_paged_mqa_logits(q, kv_cache, weights, lens, table, max_context)
        fused, _ = fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, max_context, k,
                                      algo="fused")
        unfused, _ = fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, max_context, k,
                                        algo="unfused")
        return logits, fused, unfused

    logits, fused, unfused = select(*inputs)
    compiled = torch.compile(select, fullgraph=True)
    got_logits, got_fused, got_unfused = compiled(*inputs)
    assert torch.equal(got_logits.nan_to_num(), logits.nan_to_num())
    for got in (got_fused, got_unfused, fused):
        assert same_selection(got.cpu(), unfused.cpu(), logits.cpu())


@pytest.mark.parametrize("algo", PAGED_ALGOS)
def test_paged_cuda_graph_replay_as_contexts_grow(algo):
    """One graph captured at max_context serves later decode steps: context_lens (a device
    tensor) grows between replays, and each replay equals an eager call at the new lengths."""
    final = [6000, 2500, 64, 4000]
    max_context, k, next_n = 6144, 2048, 2
    q, kv_cache, weights, lens, table = paged_inputs("cuda", contexts=final, next_n=next_n,
                                                     max_blocks=96, out_of_range=False, seed=41)
    steps = [[100, 0, 1, 2047], [2049, 1000, 30, 2500], final]
    lens.copy_(torch.tensor(steps[0], dtype=torch.int32))
    indices = torch.empty(len(final) * next_n, k, dtype=torch.int32, device="cuda")
    values = torch.empty(indices.shape, dtype=torch.float32, device="cuda")
    logits = torch.empty(indices.shape[0], max_context, dtype=torch.float32, device="cuda")

    def run():
        fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, max_context, k, algo=algo,
                           out=(indices, values))
        fp8_paged_mqa_logits(q, kv_cache, weights, lens, table, max_context, out=logits)

    graph, _ = capture(run)
    for step in steps:
        lens.copy_(torch.tensor(step, dtype=torch.int32))
        indices.fill_(-7)
        graph.replay()
        torch.cuda.synchronize()
        want_logits = fp8_paged_mqa_logits(q, kv_cache, weights, lens, table, max_context)
        want, _ = fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, max_context, k,
                                     algo=algo)
        assert torch.equal(logits.nan_to_num(), want_logits.nan_to_num()), step
        assert same_selection(indices.cpu(), want.cpu(), want_logits.cpu()), step
        row_ends = paged_row_ends(lens.cpu(), next_n, max_context)
        check_paged_selection(indices, values, want_logits, row_ends, k)


def flip_low_bits(q, seed):
    """A nearby query: the lowest bit of about a quarter of q's fp8 bytes flipped (never into
    NaN), in place."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    raw = q.view(torch.uint8)
    mask = (torch.rand(raw.shape, generator=gen) < 0.25).to(raw.device)
    mask &= (raw & 0x7f) < 0x7e
    raw ^= mask.to(torch.uint8)


def test_paged_state_steps_are_exact():
    """The decode state across steps: no history, the same query, garbage, a nearby query; each
    step's fused result is exact on its own logits, equals unfused up to ties, and is what the
    state holds after it."""
    contexts = [5000, 0, 37, 3000, 4097, 64, 1]
    next_n, k = 2, 512
    inputs = paged_inputs("cuda", contexts=contexts, next_n=next_n, seed=51)
    max_context = 4800
    state = paged_indexer_state(len(contexts), next_n, k)
    row_ends = paged_row_ends(inputs[3].cpu(), next_n, max_context)
    plan = fp8_paged_mqa_topk_plan(*inputs, max_context, k, algo="fused", state=state)
    assert plan["algo"] == "fused" and plan["has_state"]
    assert fp8_paged_mqa_topk_plan(*inputs, max_context, k, state=state)["algo"] == "unfused"
    for step in range(5):
        if step == 2:
            state.random_(-10, 6000)
        if step == 3:
            flip_low_bits(inputs[0], step)
        logits = fp8_paged_mqa_logits(*inputs, max_context)
        indices, values = fp8_paged_mqa_topk(*inputs, max_context, k, algo="fused", state=state)
        check_paged_selection(indices, values, logits, row_ends, k)
        unfused, _ = fp8_paged_mqa_topk(*inputs, max_context, k, algo="unfused")
        assert same_selection(indices.cpu(), unfused.cpu(), logits.cpu()), step
        assert torch.equal(state.cpu(), indices.cpu()), step


def test_paged_state_bad_arguments():
    inputs = paged_inputs("cuda", contexts=[300, 20], next_n=1, seed=52)
    with pytest.raises(ValueError, match="int32"):
        fp8_paged_mqa_topk(*inputs, 320, 64, algo="fused",
                           state=torch.zeros(2, 64, dtype=torch.int64, device="cuda"))
    with pytest.raises(ValueError, match="paged_indexer_state_bytes"):
        fp8_paged_mqa_topk(*inputs, 320, 64, algo="fused", state=paged_indexer_state(1, 1, 64))
    with pytest.raises(ValueError):
        paged_indexer_state(2, 0, 64)
    # CPU tensors run the reference and leave the state alone.
    host = [x.cpu() for x in inputs]
    state = paged_indexer_state(2, 1, 64, device="cpu")
    fp8_paged_mqa_topk(*host, 320, 64, algo="fused", state=state)
    assert (state == 0).all()


def test_paged_state_graph_replay_and_compile():
    """One graph with a state, replayed while the contexts grow and the query drifts; and the
    op with a state under torch.compile(fullgraph=True)."""
    final = [6000, 2500, 64, 4000]
    max_context, k, next_n = 6144, 2048, 2
    q, kv_cache, weights, lens, table = paged_inputs("cuda", contexts=final, next_n=next_n,
                                                     max_blocks=96, out_of_range=False, seed=53)
    steps = [[100, 0, 1, 2047], [2049, 1000, 30, 2500], [3000, 1500, 64, 3000], final]
    lens.copy_(torch.tensor(steps[0], dtype=torch.int32))
    state = paged_indexer_state(len(final), next_n, k)
    indices = torch.empty(len(final) * next_n, k, dtype=torch.int32, device="cuda")
    values = torch.empty(indices.shape, dtype=torch.float32, device="cuda")

    def run():
        fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, max_context, k, algo="fused",
                           out=(indices, values), state=state)

    graph, _ = capture(run)
    for number, step in enumerate(steps):
        lens.copy_(torch.tensor(step, dtype=torch.int32))
        if number == 2:
            flip_low_bits(q, number)
        graph.replay()
        torch.cuda.synchronize()
        logits = fp8_paged_mqa_logits(q, kv_cache, weights, lens, table, max_context)
        want, _ = fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, max_context, k,
                                     algo="unfused")
        assert same_selection(indices.cpu(), want.cpu(), logits.cpu()), step
        check_paged_selection(indices, values, logits, paged_row_ends(lens.cpu(), next_n,
                                                                      max_context), k)

    def select(q, kv_cache, weights, lens, table, state):
        return fp8_paged_mqa_topk(q, kv_cache, weights, lens, table, max_context, k,
                                  algo="fused", state=state)[0]

    compiled = torch.compile(select, fullgraph=True)
    got = compiled(q, kv_cache, weights, lens, table, state)
    logits = fp8_paged_mqa_logits(q, kv_cache, weights, lens, table, max_context)
    assert same_selection(got.cpu(), want.cpu(), logits.cpu())
    assert torch.equal(state.cpu(), got.cpu())


# ---------------------------------------------------------------- sparse attention

def cpu_attention(q, kv, indices, sm_scale):
    """The CPU op (the reference) on copies of CUDA tensors."""
    return torch.ops.litetopk.sparse_attention(q.cpu(), kv.cpu(), indices.cpu(), sm_scale)


@pytest.mark.parametrize("h_q", [16, 32, 64, 128])
@pytest.mark.parametrize("d_qk", [576, 512])
@pytest.mark.parametrize("topk", [1, 100, 2048])
def test_sparse_attention_gpu_matches_cpu(h_q, d_qk, topk):
    s_q = 4 if topk == 2048 and h_q == 128 else 8
    q, kv, indices = attention_inputs("cuda", s_q=s_q, s_kv=4096, h_q=h_q, d_qk=d_qk, topk=topk,
                                      seed=h_q + d_qk + topk)
    scale = 1.0 / d_qk ** 0.5
    got = sparse_attention(q, kv, indices, scale)
    check_attention_close(got, cpu_attention(q, kv, indices, scale), kv, indices)


def test_sparse_attention_gpu_empty_and_neighbour_rows():
    q, kv, indices = attention_inputs("cuda", s_q=16, s_kv=1000, h_q=64, topk=300, seed=50)
    indices[8:] = indices[0]           # neighbours sharing a row, a repeated token included
    indices[9, 0, :5] = indices[9, 0, 5]
    got = sparse_attention(q, kv, indices, 0.04)
    check_attention_close(got, cpu_attention(q, kv, indices, 0.04), kv, indices)
    out, max_logits, lse = sparse_attention(q, kv[:0], indices, 0.04)  # s_kv = 0
    assert (out == 0).all() and max_logits.isneginf().all() and lse.isneginf().all()
    out, _, lse = sparse_attention(q[:0], kv, indices[:0], 0.04)       # s_q = 0
    assert out.shape == (0, 64, 512) and lse.shape == (0, 64)


def neighbour_shared_inputs(h_q, s_kv=2000, topk=200, seed=56):
    """Groups of G = 64 / h_q neighbouring queries (the union-packed kernel's groups): the first
    groups hold attention_inputs' edge rows (-1 padding, out-of-range indices, a token listed
    twice, which sends its group to the per-query path, an empty query, a single valid slot);
    then a group whose rows share 80% of their tokens (each in its own order, the rest distinct
    tokens of its own), a group of permuted copies of one row (its last row cut short with -1
    padding), and a last group cut short by s_q (G - 1 queries: copies of its first row)."""
    group = 64 // h_q
    g1 = (5 + group - 1) // group * group  # the first group after the edge rows 0 .. 4
    g2 = g1 + group
    last = g2 + group
    s_q = last + group - 1
    q, kv, indices = attention_inputs("cpu", s_q=s_q, s_kv=s_kv, h_q=h_q, topk=topk, seed=seed)
    generator = torch.Generator().manual_seed(seed)

    def permuted(row):
        return row[torch.randperm(row.numel(), generator=generator)]

    base = indices[g1, 0].clone()
    shared = topk * 4 // 5
    others = torch.tensor(sorted(set(range(s_kv)) - set(base.tolist())), dtype=torch.int32)
    for s in range(g1 + 1, g2):
        own = permuted(others)[:topk - shared]
        indices[s, 0] = permuted(torch.cat([base[:shared], own]))
    for s in range(g2 + 1, last):
        indices[s, 0] = permuted(indices[g2, 0])
    indices[last - 1, 0, topk // 3:] = -1
    for s in range(last + 1, s_q):
        indices[s, 0] = permuted(indices[last, 0])
    return q.cuda(), kv.cuda(), indices.cuda()


@pytest.mark.parametrize("h_q", [16, 32])
def test_sparse_attention_every_algo_on_neighbour_shared_rows(h_q):
    """Every algorithm against the CPU op where neighbouring queries share their rows (the
    union-packed kernel's case), with the contract's edge rows in the first group (a query that
    lists a token twice sends its group to the per-query path)."""
    q, kv, indices = neighbour_shared_inputs(h_q)
    want = cpu_attention(q, kv, indices, 0.045)
    for algo in ext().SparseAttentionAlgo.__members__:
        got = sparse_attention(q, kv, indices, 0.045, algo=algo)
        check_attention_close(got, want, kv, indices)
        again = sparse_attention(q, kv, indices, 0.045, algo=algo)  # deterministic
        for a, b in zip(got, again):
            assert torch.equal(a, b), algo
        out = torch.full_like(got[0], 7.0)
        sparse_attention(q, kv, indices, 0.045, out=(out, None, None), algo=algo)
        assert torch.equal(out, got[0]), algo


def test_sparse_attention_compiled_fullgraph():
    q, kv, indices = attention_inputs("cuda", s_q=32, s_kv=2048, h_q=64, topk=512, seed=51)

    def layer(q, kv, indices):
        out, max_logits, lse = flash_mla_sparse_fwd(q, kv, indices, 0.05)
        return out.float() * 2, max_logits, lse * 0.6931471805599453

    eager = layer(q, kv, indices)
    compiled = torch.compile(layer, fullgraph=True)(q, kv, indices)
    for a, b in zip(eager, compiled):
        assert torch.allclose(a, b, rtol=1e-6, atol=0, equal_nan=True)


def test_sparse_attention_cuda_graph_replay():
    """One captured graph (the functional op and the _out variant) replayed on new q, kv and
    indices written into the captured tensors: each replay equals an eager call on them."""
    q, kv, indices = attention_inputs("cuda", s_q=16, s_kv=4096, h_q=32, topk=777, seed=52)
    out = torch.empty(16, 32, 512, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(16, 32, device="cuda")

    def run():
        sparse_attention(q, kv, indices, 0.06, out=(out, None, lse))
        return sparse_attention(q, kv, indices, 0.06)

    graph, outputs = capture(run)
    for seed in (53, 54, 55):
        new_q, new_kv, new_indices = attention_inputs("cuda", s_q=16, s_kv=4096, h_q=32,
                                                      topk=777, seed=seed)
        q.copy_(new_q)
        kv.copy_(new_kv)
        indices.copy_(new_indices)
        out.fill_(7.0)
        graph.replay()
        torch.cuda.synchronize()
        want = sparse_attention(q, kv, indices, 0.06)
        assert torch.equal(out, want[0]) and torch.equal(lse, want[2]), seed
        for got, w in zip(outputs, want):
            assert torch.equal(got, w), seed
        check_attention_close(want, cpu_attention(q, kv, indices, 0.06), kv, indices)
