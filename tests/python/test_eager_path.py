"""The eager CUDA path of litetopk.ops without a GPU: CPU tensors stand in for device 0's and a
stand-in extension for the library's GPU calls, so that what the ops pass to the size queries and
to the calls can be checked on any machine. The stand-in checks the workspace as the library does:
the call's options (the algorithm as resolved, the state) decide the size it needs. Skipped
without torch."""
import pytest

from conftest import needs_torch, torch

pytestmark = needs_torch

if torch is not None:
    from litetopk import ops
    from litetopk.ops import _runtime as runtime
    from litetopk._ext import ext as real_ext
    from test_torch import attention_inputs, indexer_inputs, numpy_attention

STREAM = 0  # the default stream


class StandIn:
    """The GPU calls of litetopk._C that the eager ops make, with the library's rules: auto
    resolves per problem, the workspace depends on the resolved algorithm and on the state, and a
    call with less workspace than it needs raises ValueError."""

    def __init__(self):
        self.size_queries = []
        self.calls = []

    def __getattr__(self, name):  # indexer_state_bytes and the like
        return getattr(real_ext(), name)

    # ---- select_topk_plan(problem, options) -> SelectPlan; select_topk_launch(plan, scores,
    # row_starts, row_ends, indices, values, workspace, stream)
    class SelectPlan:
        def __init__(self, problem, algo, workspace_bytes):
            self.problem, self.algo, self.workspace_bytes = problem, algo, workspace_bytes

    def select_topk_plan(self, problem, options):
        self.size_queries.append(("select", problem))
        if problem.k < 1:
            raise ValueError(f"k must be >= 1, got {problem.k}")
        lib = real_ext()
        algo = options.algo
        if algo == lib.SelectAlgo.auto:
            algo = lib.SelectAlgo["sample-filter" if problem.k <= 64 else "radix"]
        sample_filter = algo == lib.SelectAlgo["sample-filter"]
        size = problem.batch * (16 if sample_filter else problem.n) * 4
        return self.SelectPlan(problem, algo, size)

    def select_topk_launch(self, plan, scores, row_starts, row_ends, indices, values, workspace,
                           stream):
        assert workspace != 0 or plan.workspace_bytes == 0
        self.calls.append(("select", plan, scores, row_starts, row_ends, indices, values,
                           workspace, stream))

    # ---- indexer_topk_plan(problem, algo, candidate_capacity, cold_sample, state,
    # state_bytes) -> IndexerPlan; indexer_topk_launch(plan, q, kv, kv_scale, weights, ks, ke,
    # indices, values, state, state_bytes, workspace, stream)
    class IndexerPlan:
        def __init__(self, problem, algo, has_state, workspace_bytes):
            self.problem, self.algo = problem, algo
            self.has_state, self.workspace_bytes = has_state, workspace_bytes

    def indexer_topk_plan(self, problem, algo, candidate_capacity=0, cold_sample=True, state=0,
                          state_bytes=0):
        self.size_queries.append(("indexer", problem, algo, state, state_bytes))
        lib = real_ext()
        if state and state_bytes < lib.indexer_state_bytes(problem.k):
            raise ValueError("options.state->bytes must be >= indexer_state_bytes(k)")
        if algo == lib.IndexerAlgo.auto:
            algo = lib.IndexerAlgo["fused" if problem.num_keys >= 8 * problem.k else "unfused"]
        T, S, k = problem.num_queries, problem.num_keys, problem.k
        lists_or_logits = T * 4 * k * 8 if algo == lib.IndexerAlgo.fused else T * S * 4 + 4096
        writer = S * 4 + 1024 if state else 0  # the hot-sample writer's part
        return self.IndexerPlan(problem, algo, bool(state), lists_or_logits + writer)

    def indexer_topk_launch(self, plan, q, kv, kv_scale, weights, ks, ke, indices, values,
                            state, state_bytes, workspace, stream):
        assert workspace != 0 and stream == STREAM
        assert bool(state) == plan.has_state
        self.calls.append(("indexer", plan, indices, values, state, workspace))

    def indexer_logits(self, problem, q, kv, kv_scale, weights, ks, ke, logits, logits_stride,
                       stream):
        self.calls.append(("logits", problem, logits, logits_stride))

    # ---- sparse_attention_plan(problem) -> SparseAttentionPlan (the library's own, which runs
    # on the host); sparse_attention_launch(plan, q, kv, indices, out, max_logits, lse,
    # workspace, stream). The tensors are on the CPU, so the stand-in's launch runs the CPU
    # reference on the addresses it is given.
    def sparse_attention_plan(self, problem):
        self.size_queries.append(("sparse_attention", problem))
        return real_ext().sparse_attention_plan(problem)

    def sparse_attention_launch(self, plan, q, kv, indices, out, max_logits, lse, workspace,
                                stream):
        assert (workspace != 0) == (plan.workspace_bytes > 0) and stream == STREAM
        problem = real_ext().SparseAttentionProblem(plan.problem)
        problem.q, problem.kv, problem.indices = q, kv, indices
        problem.out, problem.max_logits, problem.lse = out, max_logits, lse
        self.calls.append(("sparse_attention", plan, problem, workspace))
        real_ext().sparse_attention_cpu(problem)


@pytest.fixture
def lib(monkeypatch):
    """CPU tensors as device 0's, the stand-in as the extension; returns the stand-in."""
    stand_in = StandIn()
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 0)
    monkeypatch.setattr(runtime, "ext", lambda: stand_in)
    monkeypatch.setattr(runtime, "_current_device", lambda: 0)
    monkeypatch.setattr(runtime, "_raw_stream", lambda device: STREAM)
    monkeypatch.setattr(runtime, "_capturing", lambda: False)
    monkeypatch.setattr(runtime, "_empty_workspace",
                        lambda nbytes, device: torch.empty(nbytes, dtype=torch.uint8))
    monkeypatch.setattr(runtime, "_plans", {})
    monkeypatch.setattr(runtime, "_scratch", {})
    return stand_in


@pytest.mark.parametrize("algo", ["auto", "unfused", "fused"])
def test_indexer_workspace_covers_the_state(lib, algo):
    """A call with a state needs the hot-sample writer's workspace as well: the size query gets
    the state (the H200's first run failed here with the stateless size)."""
    q, kv, kv_scale, weights, ks, ke = indexer_inputs("cpu", T=16, S=256)
    state = ops.IndexerState(32)
    for with_state in (False, True, False, True):
        ops.fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, 32, algo=algo,
                         state=state if with_state else None)
        assert (lib.calls[-1][4] != 0) == with_state
    assert len(lib.calls) == 4
    assert len(lib.size_queries) == 2  # one per signature: with and without the state
    assert [query[3] != 0 for query in lib.size_queries] == [False, True]
    # The call runs the algorithm its workspace was sized for: auto resolved once, up front.
    assert {call[1].algo.name for call in lib.calls} == {"unfused" if algo == "unfused"
                                                         else "fused"}


def test_indexer_out_and_plan_with_state(lib):
    q, kv, kv_scale, weights, ks, ke = indexer_inputs("cpu", T=16, S=256)
    state = ops.IndexerState(32)
    indices = torch.empty(16, 32, dtype=torch.int32)
    ops.fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, 32, state=state, out=(indices, None))
    assert lib.calls[-1][2] == indices.data_ptr() and lib.calls[-1][3] == 0
    plan = ops.fp8_mqa_topk_plan(q, (kv, kv_scale), weights, ks, ke, 32, state=state)
    stateless = ops.fp8_mqa_topk_plan(q, (kv, kv_scale), weights, ks, ke, 32)
    assert plan["workspace_bytes"] == stateless["workspace_bytes"] + 256 * 4 + 1024
    with pytest.raises(ValueError, match="state must be of dtype uint8"):
        ops.fp8_mqa_topk(q, (kv, kv_scale), weights, ks, ke, 32, state=state.buffer.int())


def test_select_plans_per_signature(lib):
    scores = torch.randn(4, 300)
    first = ops.topk(scores, 16)
    second = ops.topk(scores + 1, 16)
    assert first[0].shape == (4, 16) and second[1].dtype == torch.float32
    assert len(lib.size_queries) == 1 and len(lib.calls) == 2
    # The call gets the algorithm auto resolved to, and the new tensors' addresses.
    assert lib.calls[1][1].algo == real_ext().SelectAlgo["sample-filter"]
    assert lib.calls[1][5] == second[0].data_ptr()
    ops.topk(scores, 100)  # another k: another plan, another algorithm
    assert len(lib.size_queries) == 2 and lib.calls[-1][1].algo == real_ext().SelectAlgo.radix
    ops.topk(scores[:, :200], 16)  # another shape and row stride
    assert len(lib.size_queries) == 3 and (lib.calls[-1][1].problem.n,
                                          lib.calls[-1][1].problem.row_stride) == (200, 300)
    indices = torch.empty(4, 16, dtype=torch.int32)
    ops.topk(scores, 16, out=(indices, None))
    assert len(lib.size_queries) == 4 and lib.calls[-1][6] == 0


def test_bad_input_raises_every_time(lib):
    """A signature whose checks fail keeps no plan: the same bad call raises again."""
    scores = torch.randn(4, 300)
    for _ in range(2):
        with pytest.raises(ValueError, match="indices must be of dtype int32"):
            ops.topk(scores, 16, out=(torch.empty(4, 16), None))
        with pytest.raises(ValueError, match="k must be >= 1, got 0"):
            ops.topk(scores, 0)
    assert not lib.calls and not runtime._plans


def test_workspace_reuse_and_capture(lib, monkeypatch):
    scores = torch.randn(4, 300)
    ops.topk(scores, 100)
    ops.topk(scores, 100)
    assert lib.calls[0][7] == lib.calls[1][7]  # one workspace per stream and thread
    assert len(runtime._scratch) == 1
    monkeypatch.setattr(runtime, "_capturing", lambda: True)
    owners = []
    monkeypatch.setattr(runtime, "_empty_workspace",
                        lambda nbytes, device: owners.append(torch.empty(nbytes, dtype=torch.uint8))
                        or owners[-1])
    ops.topk(scores, 100)
    ops.topk(scores, 100)
    # Under graph capture every call takes a workspace of its own, of exactly its size.
    assert [o.numel() for o in owners] == [4 * 300 * 4] * 2
    assert lib.calls[2][7] == owners[0].data_ptr() != lib.calls[3][7]


def test_workspace_is_kept_on_the_default_stream_only(lib, monkeypatch):
    monkeypatch.setattr(runtime, "_SCRATCH_MAX_BYTES", 1000)
    ops.topk(torch.randn(4, 300), 100)  # 4800 bytes: over the cap
    assert not runtime._scratch
    monkeypatch.setattr(runtime, "_SCRATCH_MAX_BYTES", 1 << 20)
    monkeypatch.setattr(runtime, "_raw_stream", lambda device: 0x5EED)
    ops.topk(torch.randn(4, 300), 100)  # a side stream
    assert not runtime._scratch and lib.calls[-1][8] == 0x5EED


def test_sparse_attention_plan_and_addresses(lib):
    """The eager CUDA path of sparse_attention: one size query per signature, then each call
    passes the problem's sizes and the new tensors' addresses in the binding's order (the
    stand-in computes on them with the CPU reference, so the answers must equal the numpy
    function's)."""
    q, kv, indices = attention_inputs("cpu", s_q=5, h_q=32, topk=20, seed=61)
    first = ops.sparse_attention(q, kv, indices, 0.07)
    second = ops.sparse_attention(q, kv, indices, 0.07)
    assert len(lib.size_queries) == 1 and len(lib.calls) == 2
    problem = lib.calls[1][2]
    assert (problem.q, problem.kv, problem.indices) == (q.data_ptr(), kv.data_ptr(),
                                                        indices.data_ptr())
    assert (problem.s_q, problem.s_kv, problem.h_q, problem.d_qk, problem.d_v,
            problem.topk) == (5, 300, 32, 576, 512, 20)
    assert problem.sm_scale == pytest.approx(0.07)
    assert (problem.out, problem.max_logits, problem.lse) == (
        second[0].data_ptr(), second[1].data_ptr(), second[2].data_ptr())
    assert problem.algo == real_ext().SparseAttentionAlgo.auto
    want = numpy_attention(q, kv, indices, 0.07)
    for got in (first, second):
        for g, w in zip(got, want):
            assert torch.equal(g, w)
    out = torch.empty(5, 32, 512, dtype=torch.bfloat16)
    ops.sparse_attention(q, kv, indices, 0.07, out=(out, None, None))
    assert len(lib.size_queries) == 2  # the _out signature
    problem = lib.calls[-1][2]
    assert (problem.out, problem.max_logits, problem.lse) == (out.data_ptr(), 0, 0)
    assert torch.equal(out, want[0])
    ops.sparse_attention(q, kv, indices, 0.08)  # another scale: another plan
    assert len(lib.size_queries) == 3
    assert lib.calls[-1][2].sm_scale == pytest.approx(0.08)
    with pytest.raises(ValueError, match="h_q must be 16, 32, 64 or 128, got 8"):
        ops.sparse_attention(q[:, :8].contiguous(), kv, indices, 0.07)
    assert len(lib.calls) == 4  # a bad signature keeps no plan and calls nothing


def test_sparse_attention_algo_plans(lib):
    """algo is part of the signature: each name has its own plan (the kernel it resolves to,
    and the workspace that kernel needs: the union-packed kernel's unions; auto is union-packed
    at h_q 32, per-query at 64); a bad name calls nothing."""
    q, kv, indices = attention_inputs("cpu", s_q=5, h_q=32, topk=20, seed=62)
    want = numpy_attention(q, kv, indices, 0.07)
    algos = list(real_ext().SparseAttentionAlgo.__members__)
    assert algos == ["auto", "per-query", "union-packed", "plain"]
    plans = {}
    for algo in algos:
        for _ in range(2):  # the second call reuses the plan
            got = ops.sparse_attention(q, kv, indices, 0.07, algo=algo)
            for g, w in zip(got, want):
                assert torch.equal(g, w), algo
        plans[algo] = lib.calls[-1][1]
        assert lib.size_queries[-1][1].algo.name == algo
    assert len(lib.size_queries) == 4 and len(lib.calls) == 8
    assert plans["auto"].algo.name == "union-packed" and plans["per-query"].algo.name == "per-query"
    assert plans["union-packed"].workspace_bytes > 0
    assert plans["auto"].workspace_bytes == plans["union-packed"].workspace_bytes
    assert plans["per-query"].workspace_bytes == plans["plain"].workspace_bytes == 0
    out = torch.empty(5, 32, 512, dtype=torch.bfloat16)
    ops.sparse_attention(q, kv, indices, 0.07, out=(out, None, None), algo="per-query")
    problem = lib.calls[-1][2]
    assert (problem.out, problem.max_logits, problem.lse) == (out.data_ptr(), 0, 0)
    assert lib.calls[-1][1].algo.name == "per-query"
    assert torch.equal(out, want[0])
    calls = len(lib.calls)
    with pytest.raises(ValueError, match="algo must be one of auto, per-query, union-packed, "
                                         "plain, got 'bogus'"):
        ops.sparse_attention(q, kv, indices, 0.07, algo="bogus")
    # union-packed takes h_q 16 and 32 only: at 64 the library's plan refuses it.
    q64, kv64, indices64 = attention_inputs("cpu", s_q=5, h_q=64, topk=20, seed=63)
    with pytest.raises(ValueError, match="algo union-packed needs h_q 16 or 32"):
        ops.sparse_attention(q64, kv64, indices64, 0.07, algo="union-packed")
    assert len(lib.calls) == calls
    ops.sparse_attention(q64, kv64, indices64, 0.07)  # auto at 64: per-query, no workspace
    assert lib.calls[-1][1].algo.name == "per-query" and lib.calls[-1][3] == 0
