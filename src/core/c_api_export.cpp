// The C API: converts the C structs to the C++ ones, keeps the last error per thread, and stops
// every exception at the boundary.
#include "litetopk/c_api.h"

#include <exception>
#include <string>

#include "litetopk/device.h"
#include "litetopk/indexer.h"
#include "litetopk/select.h"

namespace {

thread_local std::string g_last_error;

int record(const litetopk::Status& status) {
  g_last_error = status.is_ok() ? std::string() : status.to_string();
  return static_cast<int>(status.code());
}

int record_exception(const char* what) {
  g_last_error = std::string("Internal: unexpected exception: ") + what;
  return LITETOPK_INTERNAL;
}

litetopk::SelectProblem to_cpp(const litetopk_select_problem& c) {
  litetopk::SelectProblem p;
  p.scores = c.scores;
  p.dtype = static_cast<litetopk::DType>(c.dtype);
  p.batch = c.batch;
  p.n = c.n;
  p.row_stride = c.row_stride;
  p.row_starts = c.row_starts;
  p.row_ends = c.row_ends;
  p.k = c.k;
  p.largest = (c.flags & LITETOPK_SMALLEST) == 0;
  p.sorted = (c.flags & LITETOPK_SORTED) != 0;
  p.deterministic = (c.flags & LITETOPK_DETERMINISTIC) != 0;
  p.indices = c.indices;
  p.values = c.values;
  return p;
}

litetopk::SelectOptions options_of(const litetopk_select_problem& c, int32_t algo) {
  litetopk::SelectOptions o;
  o.algo = static_cast<litetopk::SelectAlgo>(algo);
  o.validate_ranges = (c.flags & LITETOPK_VALIDATE_RANGES) != 0;
  return o;
}

litetopk::Status null_problem() {
  return {litetopk::StatusCode::kInvalidArgument, "problem must not be null"};
}

static_assert(LITETOPK_INDEXER_AUTO == static_cast<int>(litetopk::IndexerAlgo::kAuto));
static_assert(LITETOPK_INDEXER_UNFUSED == static_cast<int>(litetopk::IndexerAlgo::kUnfused));
static_assert(LITETOPK_INDEXER_FUSED == static_cast<int>(litetopk::IndexerAlgo::kFused));

litetopk::IndexerProblem to_cpp(const litetopk_indexer_problem& c) {
  litetopk::IndexerProblem p;
  p.q = c.q;
  p.kv = c.kv;
  p.kv_scale = c.kv_scale;
  p.weights = c.weights;
  p.ks = c.ks;
  p.ke = c.ke;
  p.num_queries = c.num_queries;
  p.num_heads = c.num_heads;
  p.head_dim = c.head_dim;
  p.num_keys = c.num_keys;
  p.k = c.k;
  p.indices = c.indices;
  p.values = c.values;
  return p;
}

// The options of an indexer call; an algo outside the enum is an error, not a cast.
litetopk::Status indexer_options(int32_t algo, int64_t candidate_capacity,
                                 const litetopk::IndexerState* state,
                                 litetopk::IndexerOptions* options) {
  if (algo != LITETOPK_INDEXER_AUTO && algo != LITETOPK_INDEXER_UNFUSED &&
      algo != LITETOPK_INDEXER_FUSED) {
    return {litetopk::StatusCode::kInvalidArgument,
            "algo must be 0 (auto), 1 (unfused) or 2 (fused), got " + std::to_string(algo)};
  }
  if (candidate_capacity < 0) {
    return {litetopk::StatusCode::kInvalidArgument,
            "candidate_capacity must be >= 0 (0: the default), got " +
                std::to_string(candidate_capacity)};
  }
  options->algo = static_cast<litetopk::IndexerAlgo>(algo);
  options->candidate_capacity = candidate_capacity;
  options->state = state;
  return litetopk::Status::ok();
}

// Runs `body` (returning a Status) with exceptions turned into codes.
template <typename Body>
int guarded(Body&& body) {
  try {
    return record(body());
  } catch (const std::exception& e) {
    return record_exception(e.what());
  } catch (...) {
    return record_exception("unknown");
  }
}

}  // namespace

extern "C" {

const char* litetopk_last_error(void) { return g_last_error.c_str(); }

const char* litetopk_version(void) {
  static const std::string version = litetopk::build_info().version;
  return version.c_str();
}

int litetopk_select_topk_workspace_size(const litetopk_select_problem* problem, int32_t algo,
                                        size_t* workspace_bytes) {
  return guarded([&] {
    if (problem == nullptr) return null_problem();
    return litetopk::select_topk_workspace_size(to_cpp(*problem), workspace_bytes,
                                                options_of(*problem, algo));
  });
}

int litetopk_select_topk(const litetopk_select_problem* problem, int32_t algo, void* workspace,
                         size_t workspace_bytes, void* stream) {
  return guarded([&] {
    if (problem == nullptr) return null_problem();
    return litetopk::select_topk(to_cpp(*problem), workspace, workspace_bytes,
                                 static_cast<cudaStream_t>(stream), options_of(*problem, algo));
  });
}

int litetopk_select_topk_dispatch(const litetopk_select_problem* problem) {
  if (problem == nullptr) return LITETOPK_ALGO_RADIX;
  try {
    return static_cast<int>(litetopk::select_topk_dispatch(to_cpp(*problem)));
  } catch (...) {
    return LITETOPK_ALGO_RADIX;
  }
}

int litetopk_select_topk_cpu(const litetopk_select_problem* problem, int32_t cpu_algo,
                             int32_t num_threads) {
  return guarded([&] {
    if (problem == nullptr) return null_problem();
    if (cpu_algo != LITETOPK_CPU_REFERENCE && cpu_algo != LITETOPK_CPU_FAST) {
      return litetopk::Status(litetopk::StatusCode::kInvalidArgument,
                              "cpu_algo must be 0 (reference) or 1 (fast), got " +
                                  std::to_string(cpu_algo));
    }
    return litetopk::select_topk_cpu(to_cpp(*problem),
                                     static_cast<litetopk::CpuSelectAlgo>(cpu_algo), num_threads);
  });
}

size_t litetopk_indexer_state_bytes(int64_t k) {
  try {
    return litetopk::indexer_state_bytes(k);
  } catch (...) {
    return 0;
  }
}

int litetopk_indexer_state_reset(void* state_data, size_t state_bytes, void* stream) {
  return guarded([&] {
    litetopk::IndexerState state;
    state.data = state_data;
    state.bytes = state_bytes;
    return litetopk::indexer_state_reset(state, static_cast<cudaStream_t>(stream));
  });
}

int litetopk_indexer_topk_workspace_size(const litetopk_indexer_problem* problem, int32_t algo,
                                         int64_t candidate_capacity, size_t* workspace_bytes) {
  return guarded([&] {
    if (problem == nullptr) return null_problem();
    litetopk::IndexerOptions options;
    if (litetopk::Status s = indexer_options(algo, candidate_capacity, nullptr, &options); !s) {
      return s;
    }
    return litetopk::indexer_topk_workspace_size(to_cpp(*problem), workspace_bytes, options);
  });
}

int litetopk_indexer_topk(const litetopk_indexer_problem* problem, int32_t algo,
                          int64_t candidate_capacity, void* state_data, size_t state_bytes,
                          void* workspace, size_t workspace_bytes, void* stream) {
  return guarded([&] {
    if (problem == nullptr) return null_problem();
    if (state_data == nullptr && state_bytes != 0) {
      return litetopk::Status(litetopk::StatusCode::kInvalidArgument,
                              "state_data is null but state_bytes is " +
                                  std::to_string(state_bytes) + " (no state: pass 0)");
    }
    litetopk::IndexerState state;
    state.data = state_data;
    state.bytes = state_bytes;
    litetopk::IndexerOptions options;
    if (litetopk::Status s = indexer_options(algo, candidate_capacity,
                                             state_data != nullptr ? &state : nullptr, &options);
        !s) {
      return s;
    }
    return litetopk::indexer_topk(to_cpp(*problem), workspace, workspace_bytes,
                                  static_cast<cudaStream_t>(stream), options);
  });
}

int litetopk_indexer_topk_dispatch(const litetopk_indexer_problem* problem) {
  if (problem == nullptr) return LITETOPK_INDEXER_UNFUSED;
  try {
    return static_cast<int>(litetopk::indexer_topk_dispatch(to_cpp(*problem)));
  } catch (...) {
    return LITETOPK_INDEXER_UNFUSED;
  }
}

int litetopk_indexer_logits(const litetopk_indexer_problem* problem, float* logits,
                            int64_t logits_stride, void* stream) {
  return guarded([&] {
    if (problem == nullptr) return null_problem();
    return litetopk::indexer_logits(to_cpp(*problem), logits, logits_stride,
                                    static_cast<cudaStream_t>(stream));
  });
}

int litetopk_indexer_topk_cpu(const litetopk_indexer_problem* problem) {
  return guarded([&] {
    if (problem == nullptr) return null_problem();
    return litetopk::indexer_topk_cpu(to_cpp(*problem));
  });
}

int litetopk_indexer_logits_cpu(const litetopk_indexer_problem* problem, float* logits,
                                int64_t logits_stride) {
  return guarded([&] {
    if (problem == nullptr) return null_problem();
    return litetopk::indexer_logits_cpu(to_cpp(*problem), logits, logits_stride);
  });
}

}  // extern "C"
