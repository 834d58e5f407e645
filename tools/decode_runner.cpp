#include "decode_runner.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <utility>

#include "decode_gpu.h"

namespace litetopk::tools {

namespace {

constexpr int64_t kD = kSparseDecodeHeadDim;
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  const std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  return elapsed.count();
}

// One timed run when not benchmarking; on the GPU after an untimed one (the first launch of a
// kernel also loads it).
BenchOptions timed_runs(const BenchOptions& bench, bool on_gpu) {
  return bench.enabled ? bench : BenchOptions{true, on_gpu ? 1 : 0, 1};
}

double rel_l2(const std::vector<float>& out, const std::vector<float>& ref) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double e = static_cast<double>(out[i]) - static_cast<double>(ref[i]);
    err += e * e;
    norm += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
  }
  if (norm > 0) return std::sqrt(err / norm);
  return err > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

}  // namespace

std::string decode_spec_error(const DecodeSpec& spec) {
  std::ostringstream error;
  if (spec.dtype != DType::kFloat16 && spec.dtype != DType::kBFloat16) {
    error << "dtype must be fp16 or bf16, got " << dtype_name(spec.dtype);
  } else if (spec.batch < 1 || spec.context < 1 || spec.num_kv_heads < 1 ||
             spec.num_q_heads < 1) {
    error << "batch, context, kv-heads and q-heads must be >= 1";
  } else if (spec.context > kMaxInt32 - 256) {
    error << "context must be below 2^31 - 256 tokens (int32 lengths), got " << spec.context;
  } else if (spec.num_q_heads % spec.num_kv_heads != 0 ||
             spec.num_q_heads / spec.num_kv_heads > kSparseDecodeMaxGroupSize) {
    error << "q-heads must be kv-heads (" << spec.num_kv_heads << ") times a group size in 1.."
          << kSparseDecodeMaxGroupSize << ", got " << spec.num_q_heads;
  } else if (spec.block_size != 128 && spec.block_size != 256) {
    error << "block size must be 128 or 256, got " << spec.block_size;
  }
  return error.str();
}

const char* decode_pattern_label(testkit::DecodePattern pattern) {
  switch (pattern) {
    case testkit::DecodePattern::kNeedles: return "synthetic";
    case testkit::DecodePattern::kFlat: return "flat";
    case testkit::DecodePattern::kExtremes: return "extremes";
    case testkit::DecodePattern::kSpread: return "spread";
    case testkit::DecodePattern::kPassages: return "passages";
    case testkit::DecodePattern::kRope: return "rope";
  }
  return "invalid";
}

bool parse_decode_pattern(const std::string& name, testkit::DecodePattern* pattern) {
  for (const auto p : {testkit::DecodePattern::kNeedles, testkit::DecodePattern::kFlat,
                       testkit::DecodePattern::kSpread, testkit::DecodePattern::kPassages,
                       testkit::DecodePattern::kRope}) {
    if (name == decode_pattern_label(p)) {
      *pattern = p;
      return true;
    }
  }
  return false;
}

std::string decode_shape_label(const DecodeSpec& spec) {
  std::ostringstream label;
  label << spec.batch << 'x' << spec.context << " kv=" << spec.num_kv_heads
        << " q=" << spec.num_q_heads << " BS=" << spec.block_size;
  return label.str();
}

std::string delta_label(float delta) {
  if (std::isinf(delta)) return "inf";
  char text[32];
  std::snprintf(text, sizeof(text), "%g", static_cast<double>(delta));
  return text;
}

std::string selection_label(const testkit::DecodeSelection& selection) {
  if (selection.rule == SparseSelection::kDelta) return delta_label(selection.value);
  return "m" + delta_label(selection.value);
}

bool parse_selection(const std::string& text, testkit::DecodeSelection* selection) {
  if (!text.empty() && text[0] == 'm') {
    char* end = nullptr;
    const float value = std::strtof(text.c_str() + 1, &end);
    if (text.size() == 1 || end != text.c_str() + text.size() || !(value >= 0 && value < 1)) {
      return false;
    }
    *selection = {SparseSelection::kMass, value};
    return true;
  }
  selection->rule = SparseSelection::kDelta;
  return parse_delta(text, &selection->value);
}

bool parse_delta(const std::string& text, float* delta) {
  if (text == "inf") {
    *delta = std::numeric_limits<float>::infinity();
    return true;
  }
  char* end = nullptr;
  const float value = std::strtof(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value < 0) {
    return false;
  }
  *delta = value;
  return true;
}

DecodeRunner::DecodeRunner(const DecodeSpec& spec)
    : spec_(spec), cache_(spec.dtype, 0, 1, spec.block_size, 1, false) {}

DecodeRunner::~DecodeRunner() = default;

Status DecodeRunner::prepare(bool selection_error) {
  if (const std::string error = decode_spec_error(spec_); !error.empty()) {
    return Status(StatusCode::kInvalidArgument, "decode spec: " + error);
  }
  if (prepared_) return Status(StatusCode::kInternal, "DecodeRunner::prepare called twice");
  return testkit::run_guarded("DecodeRunner::prepare", [&]() -> Status {
    testkit::DecodeWorkloadSpec w;
    w.pattern = spec_.pattern;
    w.dtype = spec_.dtype;
    w.num_kv_heads = spec_.num_kv_heads;
    w.group_size = spec_.num_q_heads / spec_.num_kv_heads;
    w.lengths.assign(static_cast<std::size_t>(spec_.batch), static_cast<int32_t>(spec_.context));
    w.seed = spec_.seed;
    auto start = std::chrono::steady_clock::now();
    workload_ = testkit::make_decode_workload(w);
    generate_ms_ = elapsed_ms(start);

    Status status;
    if (spec_.on_gpu) {
      gpu_ = std::make_unique<DecodeGpu>();
      if (!(status = gpu_->prepare(&workload_, spec_.block_size, &quantize_ms_))) return status;
      shape_ = gpu_->cache();
      if (selection_error) {
        cache_ = testkit::HostSparseCache(shape_.dtype, shape_.batch, shape_.num_kv_heads,
                                      shape_.block_size, shape_.max_blocks, false);
        if (!(status = gpu_->download_cache(&cache_))) return status;
      }
    } else {
      start = std::chrono::steady_clock::now();
      status = testkit::quantize_workload(&workload_, spec_.block_size, false, &cache_);
      quantize_ms_ = elapsed_ms(start);
      if (!status) return status;
      shape_ = cache_.shape;
    }
    out_.assign(static_cast<std::size_t>(workload_.batch * workload_.num_q_heads * kD), 0.0f);
    kept_mask_.assign(
        static_cast<std::size_t>(workload_.batch * workload_.num_kv_heads * shape_.max_blocks), 0);

    if (selection_error &&
        !(status = workload_.dense_over_rebuilt(cache_.view(), &rebuilt_out_))) {
      return status;
    }
    prepared_ = true;
    return Status::ok();
  });
}

Status DecodeRunner::judge(bool sparse, DecodeRow* row) {
  Status status = decode_fidelity_cpu(
      workload_.fidelity_problem(out_.data(), sparse ? kept_mask_.data() : nullptr,
                                 spec_.block_size, sparse ? shape_.max_blocks : 0),
      &row->fidelity);
  if (!status) return status;
  if (!sparse) {
    row->fidelity.read_fraction = 1.0;  // the dense kernel reads the dense cache
  } else if (!rebuilt_out_.empty()) {
    row->selection_rel_l2 = rel_l2(out_, rebuilt_out_);
  }
  return Status::ok();
}

Status DecodeRunner::run_dense(const BenchOptions& bench, DecodeRow* row) {
  if (!prepared_) return Status(StatusCode::kInternal, "DecodeRunner: run before prepare");
  *row = DecodeRow{};
  row->dense = true;
  const BenchOptions runs = timed_runs(bench, spec_.on_gpu);
  Status status;
  if (gpu_) {
    status = gpu_->run_dense(runs, out_.data(), &row->timing);
    row->workspace_bytes = gpu_->dense_workspace_bytes();
  } else {
    const DenseDecodeProblem p = workload_.dense_problem(out_.data(), DType::kFloat32);
    status = time_on_host(runs, [&](int) { return dense_decode_cpu(p); }, &row->timing);
  }
  return status ? judge(/*sparse=*/false, row) : status;
}

Status DecodeRunner::run_sparse(const testkit::DecodeSelection& selection,
                               const BenchOptions& bench, DecodeRow* row) {
  if (!prepared_) return Status(StatusCode::kInternal, "DecodeRunner: run before prepare");
  *row = DecodeRow{};
  row->delta = selection.value;
  row->rule = selection.rule;
  const BenchOptions runs = timed_runs(bench, spec_.on_gpu);
  Status status;
  if (gpu_) {
    status = gpu_->run_sparse(selection, runs, out_.data(), kept_mask_.data(), &row->timing);
    row->workspace_bytes = gpu_->sparse_workspace_bytes();
  } else {
    SparseDecodeProblem p =
        workload_.sparse_problem(cache_.view(), selection.value, out_.data(), kept_mask_.data());
    p.selection = selection.rule;
    p.mass_target = selection.value;
    status = time_on_host(runs, [&](int) { return sparse_decode_cpu(p); }, &row->timing);
  }
  return status ? judge(/*sparse=*/true, row) : status;
}

DecodeCacheMemory DecodeRunner::memory() const {
  DecodeCacheMemory m;
  SparseKvCacheBytes bytes;
  if (sparse_kv_cache_bytes(shape_, &bytes)) m.sparse_bytes = bytes.total();
  m.dense_bytes = static_cast<std::size_t>(workload_.batch * workload_.num_kv_heads *
                                           workload_.capacity * 2 * kD) *
                  dtype_size(spec_.dtype);
  m.per_token_bytes = sparse_kv_bytes_per_token(spec_.block_size);
  m.per_token_dense_bytes =
      static_cast<double>(2 * kD) * static_cast<double>(dtype_size(spec_.dtype));
  return m;
}

}  // namespace litetopk::tools
