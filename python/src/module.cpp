// litetopk._C: the nanobind binding of litetopk's C++ API (include/litetopk/*.h).
//
// The problem, plan and cache structs and the enums are the C++ ones themselves (nb::class_,
// nb::enum_), their pointer fields read and written as addresses (Python ints: a torch tensor's
// data_ptr() or a numpy array's address); the CUDA stream is an int (a cudaStream_t). Each
// feature has a plan (validate, resolve the algorithm, size the workspace) and a launch that
// takes the addresses of one call. The Python package (python/litetopk) checks every array's
// shape, dtype and layout against the sizes it sets, so the library's own validation sees
// consistent problems. Plans and CPU calls release the GIL; launches keep it (they only
// enqueue). A failed Status becomes ValueError (kInvalidArgument, kWorkspaceTooSmall,
// kUnsupported: the caller's input) or RuntimeError (kCudaError, kNotCompiled, kInternal), with
// litetopk's message.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "litetopk/attention.h"
#include "litetopk/device.h"
#include "litetopk/dsa.h"
#include "litetopk/indexer.h"
#include "litetopk/merge.h"
#include "litetopk/retrieval.h"
#include "litetopk/select.h"
#include "litetopk/sparse_decode.h"
#include "litetopk/status.h"
#include "litetopk/types.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using litetopk::DType;
using litetopk::Status;
using litetopk::StatusCode;
using Address = std::uintptr_t;
using ReleaseGil = nb::call_guard<nb::gil_scoped_release>;

// Thrown with the GIL released; nanobind translates it once the guard has taken the GIL back.
void check(const Status& status) {
  if (status.is_ok()) return;
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kWorkspaceTooSmall:
    case StatusCode::kUnsupported:
      throw nb::value_error(status.message().c_str());
    default:
      throw std::runtime_error(status.to_string());
  }
}

template <typename T>
T* as(Address address) {
  return reinterpret_cast<T*>(address);
}

cudaStream_t as_stream(Address stream) { return reinterpret_cast<cudaStream_t>(stream); }

litetopk::DecodeOptions decode_options(int64_t blocks_per_split) {
  litetopk::DecodeOptions options;
  options.blocks_per_split = blocks_per_split;
  return options;
}

// A pointer field of a bound struct, read and written from Python as an address (an int).
template <typename Struct, typename Pointer>
void address_field(nb::class_<Struct>& cls, const char* name, Pointer Struct::*field) {
  cls.def_prop_rw(
      name, [field](const Struct& self) { return reinterpret_cast<Address>(self.*field); },
      [field](Struct& self, Address value) { self.*field = reinterpret_cast<Pointer>(value); });
}

// The state of a call from its address and size (no state when the address is 0).
litetopk::IndexerState indexer_state(Address data, std::size_t bytes) {
  litetopk::IndexerState state;
  state.data = as<void>(data);
  state.bytes = bytes;
  return state;
}

// A problem with the score inputs' addresses of one call set (the sizes as planned).
template <typename Problem>
Problem with_inputs(Problem problem, Address q, Address kv, Address kv_scale, Address weights,
                    Address ks, Address ke) {
  problem.q = as<const void>(q);
  problem.kv = as<const void>(kv);
  problem.kv_scale = as<const float>(kv_scale);
  problem.weights = as<const float>(weights);
  problem.ks = as<const int32_t>(ks);
  problem.ke = as<const int32_t>(ke);
  return problem;
}

nb::dict device_info() {
  litetopk::DeviceInfo info;
  const Status status = litetopk::query_device(&info);
  nb::dict d;
  d["status"] = std::string(litetopk::status_code_name(status.code()));
  d["device_count"] = info.device_count;
  d["name"] = info.name;
  d["compute_capability"] = nb::make_tuple(info.compute_major, info.compute_minor);
  d["sm_count"] = info.sm_count;
  d["global_memory_bytes"] = info.global_memory_bytes;
  d["driver_version"] = info.driver_version;
  d["runtime_version"] = info.runtime_version;
  return d;
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "litetopk's C++ API (include/litetopk), addresses in, Status out as exceptions";

  const litetopk::BuildInfo build = litetopk::build_info();
  m.attr("version") = build.version;
  m.attr("cuda_compiled") = build.cuda_compiled;
  m.attr("cuda_targets") = build.cuda_targets;
  m.attr("SAMPLE_FILTER_MAX_K") = litetopk::kSampleFilterMaxK;
  m.def("device_info", &device_info, "The current CUDA device (device_count 0 without one).");

  // ---- dtypes and select_topk: the C++ structs and enums themselves ----
  nb::enum_<DType>(m, "DType")
      .value("float32", DType::kFloat32)
      .value("bfloat16", DType::kBFloat16)
      .value("float16", DType::kFloat16);
  nb::enum_<litetopk::SelectAlgo>(m, "SelectAlgo")
      .value("auto", litetopk::SelectAlgo::kAuto)
      .value("radix", litetopk::SelectAlgo::kRadix)
      .value("sample-filter", litetopk::SelectAlgo::kSampleFilter)
      .value("grid-radix", litetopk::SelectAlgo::kGridRadix)
      .value("sieve", litetopk::SelectAlgo::kSieve)
      .value("cluster", litetopk::SelectAlgo::kCluster)
      .value("register", litetopk::SelectAlgo::kRegister);
  nb::enum_<litetopk::CpuSelectAlgo>(m, "CpuSelectAlgo")
      .value("reference", litetopk::CpuSelectAlgo::kReference)
      .value("fast", litetopk::CpuSelectAlgo::kFast);

  using litetopk::SelectProblem;
  nb::class_<SelectProblem> select_problem(m, "SelectProblem");
  select_problem.def(nb::init<>())
      .def_rw("dtype", &SelectProblem::dtype)
      .def_rw("batch", &SelectProblem::batch)
      .def_rw("n", &SelectProblem::n)
      .def_rw("row_stride", &SelectProblem::row_stride)
      .def_rw("k", &SelectProblem::k)
      .def_rw("largest", &SelectProblem::largest)
      .def_rw("sorted", &SelectProblem::sorted)
      .def_rw("deterministic", &SelectProblem::deterministic);
  address_field(select_problem, "scores", &SelectProblem::scores);
  address_field(select_problem, "row_starts", &SelectProblem::row_starts);
  address_field(select_problem, "row_ends", &SelectProblem::row_ends);
  address_field(select_problem, "indices", &SelectProblem::indices);
  address_field(select_problem, "values", &SelectProblem::values);

  using litetopk::SelectOptions;
  nb::class_<SelectOptions>(m, "SelectOptions")
      .def(nb::init<>())
      .def_rw("algo", &SelectOptions::algo)
      .def_rw("validate_ranges", &SelectOptions::validate_ranges);

  using litetopk::SelectPlan;
  nb::class_<SelectPlan>(m, "SelectPlan")
      .def_ro("problem", &SelectPlan::problem)
      .def_ro("algo", &SelectPlan::algo)
      .def_ro("workspace_bytes", &SelectPlan::workspace_bytes);

  m.def(
      "select_topk_plan",
      [](const SelectProblem& problem, const SelectOptions& options) {
        SelectPlan plan;
        check(litetopk::select_topk_plan(problem, options, &plan));
        return plan;
      },
      "problem"_a, "options"_a, ReleaseGil(),
      "Validates the sizes, resolves the algorithm on the current device, sizes the workspace.");
  // The hot path: addresses in, one launch; the GIL stays held (the launch only enqueues).
  m.def(
      "select_topk_launch",
      [](const SelectPlan& plan, Address scores, Address row_starts, Address row_ends,
         Address indices, Address values, Address workspace, Address stream) {
        const litetopk::SelectAddresses addresses{as<const void>(scores),
                                                  as<const int32_t>(row_starts),
                                                  as<const int32_t>(row_ends),
                                                  as<int32_t>(indices), as<void>(values)};
        check(litetopk::select_topk_launch(plan, addresses, as<void>(workspace),
                                           as_stream(stream)));
      },
      "plan"_a, "scores"_a, "row_starts"_a, "row_ends"_a, "indices"_a, "values"_a,
      "workspace"_a, "stream"_a);
  m.def(
      "select_topk_cpu",
      [](const SelectProblem& problem, litetopk::CpuSelectAlgo algo, int num_threads) {
        check(litetopk::select_topk_cpu(problem, algo, num_threads));
      },
      "problem"_a, "algo"_a, "num_threads"_a, ReleaseGil());

  // ---- indexer_topk and indexer_topk_paged: the C++ structs and enum themselves ----
  using litetopk::IndexerAlgo;
  nb::enum_<IndexerAlgo>(m, "IndexerAlgo")
      .value("auto", IndexerAlgo::kAuto)
      .value("unfused", IndexerAlgo::kUnfused)
      .value("fused", IndexerAlgo::kFused);

  using litetopk::IndexerProblem;
  nb::class_<IndexerProblem> indexer_problem(m, "IndexerProblem");
  indexer_problem.def(nb::init<>())
      .def(nb::init<const IndexerProblem&>())
      .def_rw("num_queries", &IndexerProblem::num_queries)
      .def_rw("num_heads", &IndexerProblem::num_heads)
      .def_rw("head_dim", &IndexerProblem::head_dim)
      .def_rw("num_keys", &IndexerProblem::num_keys)
      .def_rw("k", &IndexerProblem::k);
  address_field(indexer_problem, "q", &IndexerProblem::q);
  address_field(indexer_problem, "kv", &IndexerProblem::kv);
  address_field(indexer_problem, "kv_scale", &IndexerProblem::kv_scale);
  address_field(indexer_problem, "weights", &IndexerProblem::weights);
  address_field(indexer_problem, "ks", &IndexerProblem::ks);
  address_field(indexer_problem, "ke", &IndexerProblem::ke);
  address_field(indexer_problem, "indices", &IndexerProblem::indices);
  address_field(indexer_problem, "values", &IndexerProblem::values);

  using litetopk::IndexerPlan;
  nb::class_<IndexerPlan>(m, "IndexerPlan")
      .def_ro("problem", &IndexerPlan::problem)
      .def_ro("algo", &IndexerPlan::algo)
      .def_ro("has_state", &IndexerPlan::has_state)
      .def_ro("workspace_bytes", &IndexerPlan::workspace_bytes);

  m.def("indexer_state_bytes", &litetopk::indexer_state_bytes, "k"_a);
  m.def(
      "indexer_state_reset",
      [](Address data, std::size_t bytes, Address stream) {
        check(litetopk::indexer_state_reset(indexer_state(data, bytes), as_stream(stream)));
      },
      "data"_a, "bytes"_a, "stream"_a, ReleaseGil());
  // The plan takes the state the launches will get (its address 0 for none): with one, every
  // launch also writes the hot sample, and the workspace holds the writer's part too.
  m.def(
      "indexer_topk_plan",
      [](const IndexerProblem& problem, IndexerAlgo algo, int64_t candidate_capacity,
         bool cold_sample, Address state_data, std::size_t state_bytes) {
        const litetopk::IndexerState state = indexer_state(state_data, state_bytes);
        litetopk::IndexerOptions options;
        options.algo = algo;
        options.candidate_capacity = candidate_capacity;
        options.cold_sample = cold_sample;
        if (state.data != nullptr) options.state = &state;
        IndexerPlan plan;
        check(litetopk::indexer_topk_plan(problem, options, &plan));
        return plan;
      },
      "problem"_a, "algo"_a, "candidate_capacity"_a = 0, "cold_sample"_a = true,
      "state"_a = Address{0}, "state_bytes"_a = std::size_t{0}, ReleaseGil());
  // The hot path: addresses in, one launch; the GIL stays held (the launch only enqueues).
  m.def(
      "indexer_topk_launch",
      [](const IndexerPlan& plan, Address q, Address kv, Address kv_scale, Address weights,
         Address ks, Address ke, Address indices, Address values, Address state_data,
         std::size_t state_bytes, Address workspace, Address stream) {
        litetopk::IndexerAddresses addresses;
        addresses.q = as<const void>(q);
        addresses.kv = as<const void>(kv);
        addresses.kv_scale = as<const float>(kv_scale);
        addresses.weights = as<const float>(weights);
        addresses.ks = as<const int32_t>(ks);
        addresses.ke = as<const int32_t>(ke);
        addresses.indices = as<int32_t>(indices);
        addresses.values = as<float>(values);
        addresses.state = indexer_state(state_data, state_bytes);
        check(litetopk::indexer_topk_launch(plan, addresses, as<void>(workspace),
                                            as_stream(stream)));
      },
      "plan"_a, "q"_a, "kv"_a, "kv_scale"_a, "weights"_a, "ks"_a, "ke"_a, "indices"_a,
      "values"_a, "state"_a, "state_bytes"_a, "workspace"_a, "stream"_a);
  m.def(
      "indexer_topk_dispatch",
      [](const IndexerProblem& problem) { return litetopk::indexer_topk_dispatch(problem); },
      "problem"_a, ReleaseGil());
  // The logits of `problem`'s sizes at the given input addresses.
  m.def(
      "indexer_logits",
      [](const IndexerProblem& problem, Address q, Address kv, Address kv_scale, Address weights,
         Address ks, Address ke, Address logits, int64_t logits_stride, Address stream) {
        check(litetopk::indexer_logits(with_inputs(problem, q, kv, kv_scale, weights, ks, ke),
                                       as<float>(logits), logits_stride, as_stream(stream)));
      },
      "problem"_a, "q"_a, "kv"_a, "kv_scale"_a, "weights"_a, "ks"_a, "ke"_a, "logits"_a,
      "logits_stride"_a, "stream"_a);
  m.def(
      "indexer_topk_cpu",
      [](const IndexerProblem& problem) { check(litetopk::indexer_topk_cpu(problem)); },
      "problem"_a, ReleaseGil());
  m.def(
      "indexer_logits_cpu",
      [](const IndexerProblem& problem, Address logits, int64_t logits_stride) {
        check(litetopk::indexer_logits_cpu(problem, as<float>(logits), logits_stride));
      },
      "problem"_a, "logits"_a, "logits_stride"_a, ReleaseGil());

  using litetopk::PagedIndexerProblem;
  nb::class_<PagedIndexerProblem> paged_problem(m, "PagedIndexerProblem");
  paged_problem.def(nb::init<>())
      .def(nb::init<const PagedIndexerProblem&>())
      .def_rw("batch", &PagedIndexerProblem::batch)
      .def_rw("next_n", &PagedIndexerProblem::next_n)
      .def_rw("num_heads", &PagedIndexerProblem::num_heads)
      .def_rw("head_dim", &PagedIndexerProblem::head_dim)
      .def_rw("num_blocks", &PagedIndexerProblem::num_blocks)
      .def_rw("block_size", &PagedIndexerProblem::block_size)
      .def_rw("max_blocks", &PagedIndexerProblem::max_blocks)
      .def_rw("max_context", &PagedIndexerProblem::max_context)
      .def_rw("k", &PagedIndexerProblem::k);
  address_field(paged_problem, "q", &PagedIndexerProblem::q);
  address_field(paged_problem, "kv_cache", &PagedIndexerProblem::kv_cache);
  address_field(paged_problem, "weights", &PagedIndexerProblem::weights);
  address_field(paged_problem, "context_lens", &PagedIndexerProblem::context_lens);
  address_field(paged_problem, "block_table", &PagedIndexerProblem::block_table);
  address_field(paged_problem, "indices", &PagedIndexerProblem::indices);
  address_field(paged_problem, "values", &PagedIndexerProblem::values);

  using litetopk::PagedIndexerPlan;
  nb::class_<PagedIndexerPlan>(m, "PagedIndexerPlan")
      .def_ro("problem", &PagedIndexerPlan::problem)
      .def_ro("algo", &PagedIndexerPlan::algo)
      .def_ro("has_state", &PagedIndexerPlan::has_state)
      .def_ro("workspace_bytes", &PagedIndexerPlan::workspace_bytes);

  m.def("paged_indexer_state_bytes", &litetopk::paged_indexer_state_bytes, "batch"_a, "next_n"_a,
        "k"_a);
  m.attr("PAGED_DECODE_STATE_MAX_K") = litetopk::kPagedDecodeStateMaxK;
  m.def(
      "indexer_topk_paged_plan",
      [](const PagedIndexerProblem& problem, IndexerAlgo algo, Address state,
         std::size_t state_bytes) {
        litetopk::IndexerOptions options;
        options.algo = algo;
        const litetopk::IndexerState decode_state{as<void>(state), state_bytes};
        if (state != 0) options.state = &decode_state;
        PagedIndexerPlan plan;
        check(litetopk::indexer_topk_paged_plan(problem, options, &plan));
        return plan;
      },
      "problem"_a, "algo"_a, "state"_a = Address{0}, "state_bytes"_a = std::size_t{0},
      ReleaseGil());
  m.def(
      "indexer_topk_paged_launch",
      [](const PagedIndexerPlan& plan, Address q, Address kv_cache, Address weights,
         Address context_lens, Address block_table, Address indices, Address values,
         Address workspace, Address stream, Address state, std::size_t state_bytes) {
        litetopk::PagedIndexerAddresses addresses{
            as<const void>(q),           as<const void>(kv_cache),   as<const float>(weights),
            as<const int32_t>(context_lens), as<const int32_t>(block_table), as<int32_t>(indices),
            as<float>(values)};
        addresses.state = litetopk::IndexerState{as<void>(state), state_bytes};
        check(litetopk::indexer_topk_paged_launch(plan, addresses, as<void>(workspace),
                                                  as_stream(stream)));
      },
      "plan"_a, "q"_a, "kv_cache"_a, "weights"_a, "context_lens"_a, "block_table"_a,
      "indices"_a, "values"_a, "workspace"_a, "stream"_a, "state"_a = Address{0},
      "state_bytes"_a = std::size_t{0});
  m.def(
      "indexer_topk_paged_dispatch",
      [](const PagedIndexerProblem& problem) {
        return litetopk::indexer_topk_paged_dispatch(problem);
      },
      "problem"_a, ReleaseGil());
  m.def(
      "indexer_logits_paged",
      [](const PagedIndexerProblem& problem, Address logits, int64_t logits_stride,
         Address stream) {
        check(litetopk::indexer_logits_paged(problem, as<float>(logits), logits_stride,
                                             as_stream(stream)));
      },
      "problem"_a, "logits"_a, "logits_stride"_a, "stream"_a, ReleaseGil());
  m.def(
      "indexer_topk_paged_cpu",
      [](const PagedIndexerProblem& problem) {
        check(litetopk::indexer_topk_paged_cpu(problem));
      },
      "problem"_a, ReleaseGil());
  m.def(
      "indexer_logits_paged_cpu",
      [](const PagedIndexerProblem& problem, Address logits, int64_t logits_stride) {
        check(litetopk::indexer_logits_paged_cpu(problem, as<float>(logits), logits_stride));
      },
      "problem"_a, "logits"_a, "logits_stride"_a, ReleaseGil());

  // ---- decoding: the C++ structs themselves ----
  using litetopk::SparseKvCache;
  nb::class_<SparseKvCache> sparse_cache(m, "SparseKvCache");
  sparse_cache.def(nb::init<>())
      .def(nb::init<const SparseKvCache&>())
      .def_rw("dtype", &SparseKvCache::dtype)
      .def_rw("batch", &SparseKvCache::batch)
      .def_rw("num_kv_heads", &SparseKvCache::num_kv_heads)
      .def_rw("head_dim", &SparseKvCache::head_dim)
      .def_rw("block_size", &SparseKvCache::block_size)
      .def_rw("max_blocks", &SparseKvCache::max_blocks)
      .def_rw("num_pages", &SparseKvCache::num_pages);
  address_field(sparse_cache, "block_table", &SparseKvCache::block_table);
  address_field(sparse_cache, "lengths", &SparseKvCache::lengths);
  address_field(sparse_cache, "key_codes", &SparseKvCache::key_codes);
  address_field(sparse_cache, "key_scales", &SparseKvCache::key_scales);
  address_field(sparse_cache, "key_residuals", &SparseKvCache::key_residuals);
  address_field(sparse_cache, "values", &SparseKvCache::values);
  address_field(sparse_cache, "tail_keys", &SparseKvCache::tail_keys);

  using litetopk::DenseKvCache;
  nb::class_<DenseKvCache> dense_cache(m, "DenseKvCache");
  dense_cache.def(nb::init<>())
      .def_rw("dtype", &DenseKvCache::dtype)
      .def_rw("batch", &DenseKvCache::batch)
      .def_rw("num_kv_heads", &DenseKvCache::num_kv_heads)
      .def_rw("head_dim", &DenseKvCache::head_dim)
      .def_rw("capacity", &DenseKvCache::capacity)
      .def_rw("batch_stride", &DenseKvCache::batch_stride)
      .def_rw("head_stride", &DenseKvCache::head_stride)
      .def_rw("token_stride", &DenseKvCache::token_stride);
  address_field(dense_cache, "keys", &DenseKvCache::keys);
  address_field(dense_cache, "values", &DenseKvCache::values);
  address_field(dense_cache, "lengths", &DenseKvCache::lengths);

  nb::enum_<litetopk::SparseSelection>(m, "SparseSelection")
      .value("delta", litetopk::SparseSelection::kDelta)
      .value("mass", litetopk::SparseSelection::kMass);
  using litetopk::SparseDecodeProblem;
  nb::class_<SparseDecodeProblem> sparse_problem(m, "SparseDecodeProblem");
  sparse_problem.def(nb::init<>())
      .def_rw("cache", &SparseDecodeProblem::cache)
      .def_rw("num_q_heads", &SparseDecodeProblem::num_q_heads)
      .def_rw("softmax_scale", &SparseDecodeProblem::softmax_scale)
      .def_rw("selection", &SparseDecodeProblem::selection)
      .def_rw("delta", &SparseDecodeProblem::delta)
      .def_rw("mass_target", &SparseDecodeProblem::mass_target)
      .def_rw("out_dtype", &SparseDecodeProblem::out_dtype);
  address_field(sparse_problem, "q", &SparseDecodeProblem::q);
  address_field(sparse_problem, "out", &SparseDecodeProblem::out);
  address_field(sparse_problem, "lse", &SparseDecodeProblem::lse);
  address_field(sparse_problem, "kept_mask", &SparseDecodeProblem::kept_mask);

  using litetopk::DenseDecodeProblem;
  nb::class_<DenseDecodeProblem> dense_problem(m, "DenseDecodeProblem");
  dense_problem.def(nb::init<>())
      .def_rw("cache", &DenseDecodeProblem::cache)
      .def_rw("num_q_heads", &DenseDecodeProblem::num_q_heads)
      .def_rw("softmax_scale", &DenseDecodeProblem::softmax_scale)
      .def_rw("out_dtype", &DenseDecodeProblem::out_dtype);
  address_field(dense_problem, "q", &DenseDecodeProblem::q);
  address_field(dense_problem, "out", &DenseDecodeProblem::out);
  address_field(dense_problem, "lse", &DenseDecodeProblem::lse);

  nb::class_<litetopk::SparseDecodePlan>(m, "SparseDecodePlan")
      .def_ro("problem", &litetopk::SparseDecodePlan::problem)
      .def_ro("paged", &litetopk::SparseDecodePlan::paged)
      .def_ro("reads_all", &litetopk::SparseDecodePlan::reads_all)
      .def_ro("workspace_bytes", &litetopk::SparseDecodePlan::workspace_bytes);
  nb::class_<litetopk::DenseDecodePlan>(m, "DenseDecodePlan")
      .def_ro("problem", &litetopk::DenseDecodePlan::problem)
      .def_ro("workspace_bytes", &litetopk::DenseDecodePlan::workspace_bytes);

  m.def(
      "sparse_kv_append",
      [](const SparseKvCache& cache, Address new_keys, Address new_values, Address stream) {
        check(litetopk::sparse_kv_append(cache, as<const void>(new_keys),
                                         as<const void>(new_values), as_stream(stream)));
      },
      "cache"_a, "new_keys"_a, "new_values"_a, "stream"_a, ReleaseGil());
  m.def(
      "sparse_kv_from_dense",
      [](const DenseKvCache& dense, const SparseKvCache& cache, Address stream) {
        check(litetopk::sparse_kv_from_dense(dense, cache, as_stream(stream)));
      },
      "dense"_a, "cache"_a, "stream"_a, ReleaseGil());
  m.def(
      "sparse_decode_plan",
      [](const SparseDecodeProblem& problem, int64_t blocks_per_split, bool read_all_when_small) {
        litetopk::SparseDecodePlan plan;
        litetopk::DecodeOptions options = decode_options(blocks_per_split);
        options.read_all_when_small = read_all_when_small;
        check(litetopk::sparse_decode_plan(problem, options, &plan));
        return plan;
      },
      "problem"_a, "blocks_per_split"_a, "read_all_when_small"_a = true, ReleaseGil());
  // The hot path: addresses in, one launch; the GIL stays held (the launch only enqueues).
  m.def(
      "sparse_decode_launch",
      [](const litetopk::SparseDecodePlan& plan, Address q, Address out, Address lse,
         Address kept_mask, Address block_table, Address lengths, Address key_codes,
         Address key_scales, Address key_residuals, Address values, Address tail_keys,
         Address workspace, Address stream) {
        const litetopk::SparseDecodeAddresses addresses{
            as<const void>(q),         as<void>(out),          as<float>(lse),
            as<uint8_t>(kept_mask),    as<const int32_t>(block_table), as<int32_t>(lengths),
            as<uint8_t>(key_codes),    as<void>(key_scales),   as<uint8_t>(key_residuals),
            as<void>(values),          as<void>(tail_keys)};
        check(litetopk::sparse_decode_launch(plan, addresses, as<void>(workspace),
                                             as_stream(stream)));
      },
      "plan"_a, "q"_a, "out"_a, "lse"_a, "kept_mask"_a, "block_table"_a, "lengths"_a,
      "key_codes"_a, "key_scales"_a, "key_residuals"_a, "values"_a, "tail_keys"_a,
      "workspace"_a, "stream"_a);
  m.def(
      "dense_decode_plan",
      [](const DenseDecodeProblem& problem, int64_t blocks_per_split) {
        litetopk::DenseDecodePlan plan;
        check(litetopk::dense_decode_plan(problem, decode_options(blocks_per_split), &plan));
        return plan;
      },
      "problem"_a, "blocks_per_split"_a, ReleaseGil());
  m.def(
      "dense_decode_launch",
      [](const litetopk::DenseDecodePlan& plan, Address q, Address out, Address lse,
         Address keys, Address values, Address lengths, Address workspace, Address stream) {
        const litetopk::DenseDecodeAddresses addresses{as<const void>(q), as<void>(out),
                                                       as<float>(lse),    as<void>(keys),
                                                       as<void>(values),  as<int32_t>(lengths)};
        check(litetopk::dense_decode_launch(plan, addresses, as<void>(workspace),
                                            as_stream(stream)));
      },
      "plan"_a, "q"_a, "out"_a, "lse"_a, "keys"_a, "values"_a, "lengths"_a, "workspace"_a,
      "stream"_a);

  m.def(
      "sparse_kv_append_cpu",
      [](const SparseKvCache& cache, Address new_keys, Address new_values) {
        check(litetopk::sparse_kv_append_cpu(cache, as<const void>(new_keys),
                                             as<const void>(new_values)));
      },
      "cache"_a, "new_keys"_a, "new_values"_a, ReleaseGil());
  m.def(
      "sparse_kv_from_dense_cpu",
      [](const DenseKvCache& dense, const SparseKvCache& cache) {
        check(litetopk::sparse_decode_quantize_cpu(dense, cache));
      },
      "dense"_a, "cache"_a, ReleaseGil());
  m.def(
      "sparse_kv_rebuild_cpu",
      [](const SparseKvCache& cache, const DenseKvCache& out) {
        check(litetopk::sparse_kv_rebuild_cpu(cache, out));
      },
      "cache"_a, "out"_a, ReleaseGil());
  m.def(
      "sparse_decode_cpu",
      [](const SparseDecodeProblem& problem) {
        double kept_fraction = 0;
        litetopk::SparseDecodeCpuDiagnostics diagnostics;
        diagnostics.kept_fraction = &kept_fraction;
        check(litetopk::sparse_decode_cpu(problem, diagnostics));
        return kept_fraction;
      },
      "problem"_a, ReleaseGil());
  m.def(
      "dense_decode_cpu",
      [](const DenseDecodeProblem& problem) { check(litetopk::dense_decode_cpu(problem)); },
      "problem"_a, ReleaseGil());

  // ---- sparse_attention: the C++ structs and enum themselves ----
  using litetopk::SparseAttentionAlgo;
  nb::enum_<SparseAttentionAlgo>(m, "SparseAttentionAlgo")
      .value("auto", SparseAttentionAlgo::kAuto)
      .value("per-query", SparseAttentionAlgo::kPerQuery)
      .value("union-packed", SparseAttentionAlgo::kUnionPacked)
      .value("plain", SparseAttentionAlgo::kPlain);
  using litetopk::SparseAttentionProblem;
  nb::class_<SparseAttentionProblem> attention_problem(m, "SparseAttentionProblem");
  attention_problem.def(nb::init<>())
      .def(nb::init<const SparseAttentionProblem&>())
      .def_rw("s_q", &SparseAttentionProblem::s_q)
      .def_rw("s_kv", &SparseAttentionProblem::s_kv)
      .def_rw("h_q", &SparseAttentionProblem::h_q)
      .def_rw("d_qk", &SparseAttentionProblem::d_qk)
      .def_rw("d_v", &SparseAttentionProblem::d_v)
      .def_rw("topk", &SparseAttentionProblem::topk)
      .def_rw("sm_scale", &SparseAttentionProblem::sm_scale)
      .def_rw("algo", &SparseAttentionProblem::algo);
  address_field(attention_problem, "q", &SparseAttentionProblem::q);
  address_field(attention_problem, "kv", &SparseAttentionProblem::kv);
  address_field(attention_problem, "indices", &SparseAttentionProblem::indices);
  address_field(attention_problem, "out", &SparseAttentionProblem::out);
  address_field(attention_problem, "max_logits", &SparseAttentionProblem::max_logits);
  address_field(attention_problem, "lse", &SparseAttentionProblem::lse);

  using litetopk::SparseAttentionPlan;
  nb::class_<SparseAttentionPlan>(m, "SparseAttentionPlan")
      .def_ro("problem", &SparseAttentionPlan::problem)
      .def_ro("algo", &SparseAttentionPlan::algo)
      .def_ro("group", &SparseAttentionPlan::group)
      .def_ro("workspace_bytes", &SparseAttentionPlan::workspace_bytes);

  m.def(
      "sparse_attention_plan",
      [](const SparseAttentionProblem& problem) {
        SparseAttentionPlan plan;
        check(litetopk::sparse_attention_plan(problem, &plan));
        return plan;
      },
      "problem"_a, ReleaseGil(),
      "Checks the shapes and algorithm, resolves it, sizes the workspace.");
  // The hot path: addresses in, one launch; the GIL stays held (the launch only enqueues).
  m.def(
      "sparse_attention_launch",
      [](const SparseAttentionPlan& plan, Address q, Address kv, Address indices, Address out,
         Address max_logits, Address lse, Address workspace, Address stream) {
        const litetopk::SparseAttentionAddresses addresses{
            as<const void>(q), as<const void>(kv),   as<const int32_t>(indices),
            as<void>(out),     as<float>(max_logits), as<float>(lse)};
        check(litetopk::sparse_attention_launch(plan, addresses, as<void>(workspace),
                                                as_stream(stream)));
      },
      "plan"_a, "q"_a, "kv"_a, "indices"_a, "out"_a, "max_logits"_a, "lse"_a, "workspace"_a,
      "stream"_a);
  m.def(
      "sparse_attention_cpu",
      [](const SparseAttentionProblem& problem) {
        check(litetopk::sparse_attention_cpu(problem));
      },
      "problem"_a, ReleaseGil());

  // ---- dsa_prefill: the C++ structs themselves ----
  using litetopk::DsaPrefillProblem;
  nb::class_<DsaPrefillProblem> dsa_problem(m, "DsaPrefillProblem");
  dsa_problem.def(nb::init<>())
      .def(nb::init<const DsaPrefillProblem&>())
      .def_rw("num_queries", &DsaPrefillProblem::num_queries)
      .def_rw("num_keys", &DsaPrefillProblem::num_keys)
      .def_rw("index_heads", &DsaPrefillProblem::index_heads)
      .def_rw("index_head_dim", &DsaPrefillProblem::index_head_dim)
      .def_rw("k", &DsaPrefillProblem::k)
      .def_rw("h_q", &DsaPrefillProblem::h_q)
      .def_rw("d_qk", &DsaPrefillProblem::d_qk)
      .def_rw("d_v", &DsaPrefillProblem::d_v)
      .def_rw("sm_scale", &DsaPrefillProblem::sm_scale);
  address_field(dsa_problem, "index_q", &DsaPrefillProblem::index_q);
  address_field(dsa_problem, "index_kv", &DsaPrefillProblem::index_kv);
  address_field(dsa_problem, "index_kv_scale", &DsaPrefillProblem::index_kv_scale);
  address_field(dsa_problem, "index_weights", &DsaPrefillProblem::index_weights);
  address_field(dsa_problem, "ks", &DsaPrefillProblem::ks);
  address_field(dsa_problem, "ke", &DsaPrefillProblem::ke);
  address_field(dsa_problem, "q", &DsaPrefillProblem::q);
  address_field(dsa_problem, "kv", &DsaPrefillProblem::kv);
  address_field(dsa_problem, "out", &DsaPrefillProblem::out);
  address_field(dsa_problem, "max_logits", &DsaPrefillProblem::max_logits);
  address_field(dsa_problem, "lse", &DsaPrefillProblem::lse);
  address_field(dsa_problem, "indices", &DsaPrefillProblem::indices);

  using litetopk::DsaPrefillPlan;
  nb::class_<DsaPrefillPlan>(m, "DsaPrefillPlan")
      .def_ro("problem", &DsaPrefillPlan::problem)
      .def_ro("indexer", &DsaPrefillPlan::indexer)
      .def_ro("attention", &DsaPrefillPlan::attention)
      .def_ro("has_indices", &DsaPrefillPlan::has_indices)
      .def_ro("workspace_bytes", &DsaPrefillPlan::workspace_bytes);

  // The plan takes the indexer state the launches will get (its address 0 for none).
  m.def(
      "dsa_prefill_plan",
      [](const DsaPrefillProblem& problem, IndexerAlgo indexer_algo,
         SparseAttentionAlgo attention_algo, Address state_data, std::size_t state_bytes) {
        const litetopk::IndexerState state = indexer_state(state_data, state_bytes);
        litetopk::DsaPrefillOptions options;
        options.indexer.algo = indexer_algo;
        if (state.data != nullptr) options.indexer.state = &state;
        options.attention_algo = attention_algo;
        DsaPrefillPlan plan;
        check(litetopk::dsa_prefill_plan(problem, options, &plan));
        return plan;
      },
      "problem"_a, "indexer_algo"_a, "attention_algo"_a, "state"_a = Address{0},
      "state_bytes"_a = std::size_t{0}, ReleaseGil(),
      "Checks both halves' sizes, plans them, lays out the one workspace.");
  // The hot path: addresses in, one launch (indexer, kv rows, attention); the GIL stays held.
  m.def(
      "dsa_prefill_launch",
      [](const DsaPrefillPlan& plan, Address index_q, Address index_kv, Address index_kv_scale,
         Address index_weights, Address ks, Address ke, Address q, Address kv, Address out,
         Address max_logits, Address lse, Address indices, Address state_data,
         std::size_t state_bytes, Address workspace, Address stream) {
        litetopk::DsaPrefillAddresses addresses;
        addresses.index_q = as<const void>(index_q);
        addresses.index_kv = as<const void>(index_kv);
        addresses.index_kv_scale = as<const float>(index_kv_scale);
        addresses.index_weights = as<const float>(index_weights);
        addresses.ks = as<const int32_t>(ks);
        addresses.ke = as<const int32_t>(ke);
        addresses.q = as<const void>(q);
        addresses.kv = as<const void>(kv);
        addresses.out = as<void>(out);
        addresses.max_logits = as<float>(max_logits);
        addresses.lse = as<float>(lse);
        addresses.indices = as<int32_t>(indices);
        addresses.state = indexer_state(state_data, state_bytes);
        check(litetopk::dsa_prefill_launch(plan, addresses, as<void>(workspace),
                                           as_stream(stream)));
      },
      "plan"_a, "index_q"_a, "index_kv"_a, "index_kv_scale"_a, "index_weights"_a, "ks"_a,
      "ke"_a, "q"_a, "kv"_a, "out"_a, "max_logits"_a, "lse"_a, "indices"_a, "state"_a,
      "state_bytes"_a, "workspace"_a, "stream"_a);
  m.def(
      "dsa_prefill_cpu",
      [](const DsaPrefillProblem& problem) { check(litetopk::dsa_prefill_cpu(problem)); },
      "problem"_a, ReleaseGil());

  // ---- merge_topk: the C++ structs themselves ----
  using litetopk::MergeProblem;
  nb::class_<MergeProblem> merge_problem(m, "MergeProblem");
  merge_problem.def(nb::init<>())
      .def_rw("batch", &MergeProblem::batch)
      .def_rw("shards", &MergeProblem::shards)
      .def_rw("k_in", &MergeProblem::k_in)
      .def_rw("row_stride", &MergeProblem::row_stride)
      .def_rw("shard_stride", &MergeProblem::shard_stride)
      .def_rw("k", &MergeProblem::k)
      .def_rw("largest", &MergeProblem::largest)
      .def_rw("sorted", &MergeProblem::sorted)
      .def_rw("deterministic", &MergeProblem::deterministic);
  address_field(merge_problem, "values", &MergeProblem::values);
  address_field(merge_problem, "indices", &MergeProblem::indices);
  address_field(merge_problem, "counts", &MergeProblem::counts);
  address_field(merge_problem, "out_indices", &MergeProblem::out_indices);
  address_field(merge_problem, "out_values", &MergeProblem::out_values);

  using litetopk::MergePlan;
  nb::class_<MergePlan>(m, "MergePlan")
      .def_ro("problem", &MergePlan::problem)
      .def_ro("workspace_bytes", &MergePlan::workspace_bytes)
      .def_ro("has_counts", &MergePlan::has_counts)
      .def_ro("has_values", &MergePlan::has_values);

  m.def(
      "merge_topk_plan",
      [](const MergeProblem& problem) {
        MergePlan plan;
        check(litetopk::merge_topk_plan(problem, &plan));
        return plan;
      },
      "problem"_a, ReleaseGil(), "Validates the sizes and strides, sizes the workspace.");
  // The hot path: addresses in, one launch; the GIL stays held (the launch only enqueues).
  m.def(
      "merge_topk_launch",
      [](const MergePlan& plan, Address values, Address indices, Address counts,
         Address out_indices, Address out_values, Address workspace, Address stream) {
        const litetopk::MergeAddresses addresses{as<const float>(values),
                                                 as<const int32_t>(indices),
                                                 as<const int32_t>(counts),
                                                 as<int32_t>(out_indices), as<float>(out_values)};
        check(litetopk::merge_topk_launch(plan, addresses, as<void>(workspace),
                                          as_stream(stream)));
      },
      "plan"_a, "values"_a, "indices"_a, "counts"_a, "out_indices"_a, "out_values"_a,
      "workspace"_a, "stream"_a);
  m.def(
      "merge_topk_cpu",
      [](const MergeProblem& problem) { check(litetopk::merge_topk_cpu(problem)); }, "problem"_a,
      ReleaseGil());

  // ---- retrieval_topk: the C++ structs and enum themselves ----
  m.attr("RETRIEVAL_MAX_K") = litetopk::kRetrievalMaxK;
  m.attr("RETRIEVAL_MIN_DIM") = litetopk::kRetrievalMinDim;
  m.attr("RETRIEVAL_MAX_DIM") = litetopk::kRetrievalMaxDim;
  m.attr("RETRIEVAL_DIM_MULTIPLE") = litetopk::kRetrievalDimMultiple;
  using litetopk::RetrievalMetric;
  nb::enum_<RetrievalMetric>(m, "RetrievalMetric")
      .value("ip", RetrievalMetric::kInnerProduct)
      .value("cosine", RetrievalMetric::kCosine)
      .value("l2", RetrievalMetric::kL2);
  using litetopk::RetrievalCorpusFormat;
  nb::enum_<RetrievalCorpusFormat>(m, "RetrievalCorpusFormat")
      .value("same_as_queries", RetrievalCorpusFormat::kSameAsQueries)
      .value("fp8_e4m3", RetrievalCorpusFormat::kFp8E4M3);
  using litetopk::RetrievalPath;
  nb::enum_<RetrievalPath>(m, "RetrievalPath")
      .value("auto", RetrievalPath::kAuto)
      .value("unfused", RetrievalPath::kUnfused)
      .value("fused", RetrievalPath::kFused);

  using litetopk::RetrievalProblem;
  nb::class_<RetrievalProblem> retrieval_problem(m, "RetrievalProblem");
  retrieval_problem.def(nb::init<>())
      .def_rw("dtype", &RetrievalProblem::dtype)
      .def_rw("corpus_format", &RetrievalProblem::corpus_format)
      .def_rw("batch", &RetrievalProblem::batch)
      .def_rw("n", &RetrievalProblem::n)
      .def_rw("dim", &RetrievalProblem::dim)
      .def_rw("metric", &RetrievalProblem::metric)
      .def_rw("k", &RetrievalProblem::k)
      .def_rw("sorted", &RetrievalProblem::sorted)
      .def_rw("deterministic", &RetrievalProblem::deterministic);
  address_field(retrieval_problem, "queries", &RetrievalProblem::queries);
  address_field(retrieval_problem, "corpus", &RetrievalProblem::corpus);
  address_field(retrieval_problem, "corpus_scales", &RetrievalProblem::corpus_scales);
  address_field(retrieval_problem, "corpus_norms", &RetrievalProblem::corpus_norms);
  address_field(retrieval_problem, "range_starts", &RetrievalProblem::range_starts);
  address_field(retrieval_problem, "range_ends", &RetrievalProblem::range_ends);
  address_field(retrieval_problem, "corpus_bitmap", &RetrievalProblem::corpus_bitmap);
  address_field(retrieval_problem, "indices", &RetrievalProblem::indices);
  address_field(retrieval_problem, "scores", &RetrievalProblem::scores);

  using litetopk::RetrievalOptions;
  nb::class_<RetrievalOptions>(m, "RetrievalOptions")
      .def(nb::init<>())
      .def_rw("chunk_rows", &RetrievalOptions::chunk_rows)
      .def_rw("path", &RetrievalOptions::path);

  using litetopk::RetrievalPlan;
  nb::class_<RetrievalPlan>(m, "RetrievalPlan")
      .def_ro("problem", &RetrievalPlan::problem)
      .def_ro("workspace_bytes", &RetrievalPlan::workspace_bytes)
      .def_ro("chunk_rows", &RetrievalPlan::chunk_rows)
      .def_ro("chunks", &RetrievalPlan::chunks)
      .def_ro("path", &RetrievalPlan::path)
      .def_ro("fused_splits", &RetrievalPlan::fused_splits)
      .def_ro("fused_list_capacity", &RetrievalPlan::fused_list_capacity)
      .def_ro("fused_sample_stride", &RetrievalPlan::fused_sample_stride)
      .def_ro("fused_sample_tiles", &RetrievalPlan::fused_sample_tiles)
      .def_ro("has_bitmap", &RetrievalPlan::has_bitmap);

  m.def(
      "retrieval_topk_plan",
      [](const RetrievalProblem& problem, const RetrievalOptions& options) {
        RetrievalPlan plan;
        check(litetopk::retrieval_topk_plan(problem, options, &plan));
        return plan;
      },
      "problem"_a, "options"_a, ReleaseGil(),
      "Validates the sizes, chooses the chunking, sizes the workspace, creates the device's "
      "cuBLAS handle.");
  // The hot path: addresses in, the launches enqueued; the GIL stays held.
  m.def(
      "retrieval_topk_launch",
      [](const RetrievalPlan& plan, Address queries, Address corpus, Address corpus_scales,
         Address corpus_norms, Address range_starts, Address range_ends, Address corpus_bitmap,
         Address indices, Address scores, Address workspace, Address stream) {
        litetopk::RetrievalAddresses addresses;
        addresses.queries = as<const void>(queries);
        addresses.corpus = as<const void>(corpus);
        addresses.corpus_scales = as<const float>(corpus_scales);
        addresses.corpus_norms = as<const float>(corpus_norms);
        addresses.range_starts = as<const int32_t>(range_starts);
        addresses.range_ends = as<const int32_t>(range_ends);
        addresses.corpus_bitmap = as<const uint8_t>(corpus_bitmap);
        addresses.indices = as<int32_t>(indices);
        addresses.scores = as<float>(scores);
        check(litetopk::retrieval_topk_launch(plan, addresses, as<void>(workspace),
                                              as_stream(stream)));
      },
      "plan"_a, "queries"_a, "corpus"_a, "corpus_scales"_a, "corpus_norms"_a, "range_starts"_a,
      "range_ends"_a, "corpus_bitmap"_a, "indices"_a, "scores"_a, "workspace"_a, "stream"_a);
  m.def(
      "retrieval_topk_cpu",
      [](const RetrievalProblem& problem, int num_threads) {
        check(litetopk::retrieval_topk_cpu(problem, num_threads));
      },
      "problem"_a, "num_threads"_a, ReleaseGil());
  m.def(
      "retrieval_corpus_norms",
      [](const RetrievalProblem& problem, Address norms, Address stream) {
        check(litetopk::retrieval_corpus_norms(problem, as<float>(norms), as_stream(stream)));
      },
      "problem"_a, "norms"_a, "stream"_a);
  m.def(
      "retrieval_corpus_norms_cpu",
      [](const RetrievalProblem& problem, Address norms) {
        check(litetopk::retrieval_corpus_norms_cpu(problem, as<float>(norms)));
      },
      "problem"_a, "norms"_a, ReleaseGil());
}
