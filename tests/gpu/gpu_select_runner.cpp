#include "gpu/gpu_select_runner.h"

#include <limits>

#include "litetopk/device.h"

namespace litetopk::testing {

using testkit::DeviceBuffer;

bool gpu_available() {
  DeviceInfo info;
  return query_device(&info).is_ok() && info.device_count > 0;
}

void restrict_to_ranges(SelectCase* c, HostRows* rows, const std::vector<int32_t>& starts,
                        const std::vector<int32_t>& ends) {
  c->with_ranges = true;
  rows->starts = starts;
  rows->ends = ends;
  const int64_t stride = c->row_stride == 0 ? c->n : c->row_stride;
  const auto esize = static_cast<int64_t>(dtype_size(c->dtype));
  const float inf = std::numeric_limits<float>::infinity();
  const uint32_t poison = encode_score(c->largest ? inf : -inf, c->dtype);
  for (int64_t r = 0; r < c->batch; ++r) {
    void* row = rows->scores.data() + r * stride * esize;
    for (int64_t e = 0; e < stride; ++e) {
      if (e < starts[static_cast<std::size_t>(r)] || e >= ends[static_cast<std::size_t>(r)]) {
        store_score(row, c->dtype, e, poison);
      }
    }
  }
}

::testing::AssertionResult gpu_matches_reference(const SelectCase& c, const HostRows& rows,
                                                 SelectAlgo algo) {
  HostResult ref, got;
  if (const Status s = run_cpu_select(c, rows, CpuSelectAlgo::kReference, 1, &ref); !s) {
    return ::testing::AssertionFailure()
           << c.name << ": the CPU reference failed: " << s.to_string();
  }
  GpuRunOptions options;
  options.algo = algo;
  if (const Status s = run_gpu_select(c, rows, options, &got); !s) {
    return ::testing::AssertionFailure() << c.name << ": the GPU run failed: " << s.to_string();
  }
  return check_selection(c, rows, got.indices.data(), got.values.data(), ref.indices.data(),
                         ref.values.data());
}

Status run_gpu_select(const SelectCase& c, const HostRows& rows, const GpuRunOptions& options,
                      HostResult* result) {
  const std::size_t out_count = static_cast<std::size_t>(c.batch * c.k);
  const std::size_t value_bytes = out_count * dtype_size(c.dtype);
  DeviceBuffer scores, starts, ends, indices, values, workspace;
  Status s = scores.allocate(rows.scores.size());
  if (s) s = testkit::copy_to_device(scores.data(), rows.scores.data(), rows.scores.size());
  if (s && c.with_ranges) {
    s = starts.allocate(rows.starts.size() * sizeof(int32_t));
    if (s) s = ends.allocate(rows.ends.size() * sizeof(int32_t));
    if (s) s = testkit::copy_to_device(starts.data(), rows.starts.data(), starts.size());
    if (s) s = testkit::copy_to_device(ends.data(), rows.ends.data(), ends.size());
  }
  if (s) s = indices.allocate(out_count * sizeof(int32_t));
  if (s) s = values.allocate(value_bytes);
  if (s) s = testkit::fill_device(indices.data(), 0x5a, indices.size());
  if (s) s = testkit::fill_device(values.data(), 0x5a, values.size());
  if (!s) return s;

  SelectProblem p = make_problem(c, rows, indices.as<int32_t>(), values.data());
  p.scores = scores.data();
  p.row_starts = c.with_ranges ? starts.as<int32_t>() : nullptr;
  p.row_ends = c.with_ranges ? ends.as<int32_t>() : nullptr;
  SelectOptions o;
  o.algo = options.algo;
  o.validate_ranges = options.validate_ranges;
  std::size_t bytes = 0;
  s = select_topk_workspace_size(p, &bytes, o);
  if (s) s = workspace.allocate(bytes);
  if (s) s = select_topk(p, workspace.data(), bytes, nullptr, o);
  if (s) s = testkit::device_synchronize();
  if (!s) return s;
  result->indices.resize(out_count);
  result->values.resize(value_bytes);
  s = testkit::copy_to_host(result->indices.data(), indices.data(), indices.size());
  if (s) s = testkit::copy_to_host(result->values.data(), values.data(), values.size());
  return s;
}

}  // namespace litetopk::testing
