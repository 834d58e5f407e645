#include "select_runner.h"

#include <algorithm>

namespace litetopk::tools {

namespace {

constexpr std::size_t kRotationBytes = std::size_t{256} << 20;
constexpr std::size_t kMaxRotationCopies = 1024;

std::size_t copies_for(std::size_t bytes) {
  if (bytes == 0 || bytes >= kRotationBytes) return 1;
  return std::min(kMaxRotationCopies, (kRotationBytes + bytes - 1) / bytes);
}

}  // namespace

std::string variant_name(const Variant& variant) {
  if (variant.backend == Backend::kGpu) return select_algo_name(variant.gpu_algo);
  return variant.cpu_algo == CpuSelectAlgo::kReference ? "cpu-reference" : "cpu";
}

bool parse_variant(const std::string& name, Variant* variant) {
  if (name == "cpu" || name == "cpu-reference") {
    variant->backend = Backend::kCpu;
    variant->cpu_algo = name == "cpu" ? CpuSelectAlgo::kFast : CpuSelectAlgo::kReference;
    return true;
  }
  variant->backend = Backend::kGpu;
  return parse_select_algo(name.c_str(), &variant->gpu_algo);
}

SelectionRunner::SelectionRunner(const SelectProblem& host_problem, BenchOptions bench)
    : host_problem_(host_problem), bench_(bench) {}

Status SelectionRunner::run(const Variant& variant, RunResult* result) {
  *result = RunResult{};
  if (variant.backend == Backend::kCpu) return run_cpu(variant.cpu_algo, result);
  return run_gpu(variant.gpu_algo, result);
}

Status SelectionRunner::upload() {
  const SelectProblem& p = host_problem_;
  const std::size_t bytes = static_cast<std::size_t>(p.batch * p.n) * dtype_size(p.dtype);
  score_copies_.resize(bench_.enabled ? copies_for(bytes) : 1);
  for (testkit::DeviceBuffer& copy : score_copies_) {
    if (Status s = copy.allocate(bytes); !s) return s;
    if (Status s = testkit::copy_to_device(copy.data(), p.scores, bytes); !s) return s;
  }
  const std::size_t range_bytes = static_cast<std::size_t>(p.batch) * sizeof(int32_t);
  const auto upload_ranges = [&](const int32_t* host, testkit::DeviceBuffer* device) {
    if (host == nullptr) return Status::ok();
    if (Status s = device->allocate(range_bytes); !s) return s;
    return testkit::copy_to_device(device->data(), host, range_bytes);
  };
  if (Status s = upload_ranges(p.row_starts, &row_starts_); !s) return s;
  if (Status s = upload_ranges(p.row_ends, &row_ends_); !s) return s;
  return indices_.allocate(static_cast<std::size_t>(p.batch * p.k) * sizeof(int32_t));
}

Status SelectionRunner::run_gpu(SelectAlgo algo, RunResult* result) {
  if (score_copies_.empty()) {
    if (Status s = upload(); !s) return s;
  }
  SelectProblem p = host_problem_;
  p.scores = score_copies_[0].data();
  p.row_starts = host_problem_.row_starts ? row_starts_.as<int32_t>() : nullptr;
  p.row_ends = host_problem_.row_ends ? row_ends_.as<int32_t>() : nullptr;
  p.indices = indices_.as<int32_t>();
  p.values = nullptr;
  SelectOptions options;
  options.algo = algo;
  result->algo = select_algo_name(algo == SelectAlgo::kAuto ? select_topk_dispatch(p) : algo);

  std::size_t workspace_bytes = 0;
  if (Status s = select_topk_workspace_size(p, &workspace_bytes, options); !s) return s;
  testkit::DeviceBuffer workspace;
  if (Status s = workspace.allocate(workspace_bytes); !s) return s;
  if (Status s = testkit::fill_device(indices_.data(), kPoisonByte, indices_.size()); !s) return s;
  if (Status s = select_topk(p, workspace.data(), workspace_bytes, nullptr, options); !s) return s;
  result->indices.resize(static_cast<std::size_t>(p.batch * p.k));
  if (Status s = testkit::copy_to_host(result->indices.data(), indices_.data(), indices_.size());
      !s) {
    return s;
  }
  if (!bench_.enabled) return Status::ok();

  return time_on_device(
      bench_,
      [&](int i) {
        p.scores = score_copies_[static_cast<std::size_t>(i + 1) % score_copies_.size()].data();
        return select_topk(p, workspace.data(), workspace_bytes, nullptr, options);
      },
      &result->timing);
}

Status SelectionRunner::run_cpu(CpuSelectAlgo algo, RunResult* result) {
  SelectProblem p = host_problem_;
  result->algo = variant_name({Backend::kCpu, SelectAlgo::kAuto, algo});
  result->indices.assign(static_cast<std::size_t>(p.batch * p.k), 0);
  std::fill_n(reinterpret_cast<unsigned char*>(result->indices.data()),
              result->indices.size() * sizeof(int32_t), static_cast<unsigned char>(kPoisonByte));
  p.indices = result->indices.data();
  p.values = nullptr;
  if (Status s = select_topk_cpu(p, algo); !s) return s;
  if (!bench_.enabled) return Status::ok();

  std::vector<int32_t> scratch(result->indices.size());
  p.indices = scratch.data();
  return time_on_host(bench_, [&](int) { return select_topk_cpu(p, algo); }, &result->timing);
}

}  // namespace litetopk::tools
