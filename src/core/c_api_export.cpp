// The C API: converts the C structs to the C++ ones, keeps the last error per thread, and stops
// every exception at the boundary.
#include "litetopk/c_api.h"

#include <exception>
#include <string>

#include "litetopk/device.h"
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

}  // extern "C"
