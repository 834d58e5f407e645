// The installed library from a project of its own: the top 3 of two rows on the CPU backend,
// compared with the answer; exit code 0 when it matches.
#include <cstdint>
#include <cstdio>
#include <vector>

#include <litetopk/device.h>
#include <litetopk/select.h>

int main() {
  const std::vector<float> scores = {0.5f, 2.0f, -1.0f, 1.5f, 3.0f,   // row 0
                                     7.0f, 6.0f, 5.0f, 8.0f, -2.0f};  // row 1
  std::vector<int32_t> indices(6, -7);
  litetopk::SelectProblem p;
  p.scores = scores.data();
  p.dtype = litetopk::DType::kFloat32;
  p.batch = 2;
  p.n = 5;
  p.k = 3;
  p.sorted = true;
  p.indices = indices.data();
  const litetopk::Status status = litetopk::select_topk_cpu(p);
  if (!status) {
    std::fprintf(stderr, "select_topk_cpu: %s\n", status.to_string().c_str());
    return 1;
  }
  const std::vector<int32_t> want = {4, 1, 3, 3, 0, 1};  // relative to the row, best first
  if (indices != want) {
    std::fprintf(stderr, "wrong top 3: got %d %d %d | %d %d %d\n", indices[0], indices[1],
                 indices[2], indices[3], indices[4], indices[5]);
    return 1;
  }
  std::printf("install consumer: litetopk %s, select_topk_cpu top 3 correct\n",
              litetopk::build_info().version.c_str());
  return 0;
}
