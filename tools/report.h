// Output helpers: aligned text tables, number formatting, JSON files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "litetopk/status.h"

namespace litetopk::tools {

// The FP8 e4m3 matmul ceiling measured on the H200 (torch._scaled_mm 8192^3; docs/BENCHMARKS.md).
constexpr double kFp8PeakTflops = 1322.0;

// A text table: the first `left_columns` columns (labels) left-aligned, the others right-aligned.
class Table {
 public:
  Table(std::vector<std::string> header, std::size_t left_columns);
  void add_row(std::vector<std::string> cells);
  void print(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;  // rows_[0] is the header
  std::size_t left_columns_;
};

// `value` with `digits` digits after the point.
std::string fixed(double value, int digits);
// `value` in scientific notation with `digits` digits after the point ("2.72e-02"), or "inf".
std::string scientific(double value, int digits);
// "256x524288 k=256"
std::string shape_label(int64_t batch, int64_t n, int64_t k);
double gigabytes_per_second(std::size_t bytes, double ms);
double teraflops_per_second(double flops, double ms);
// The current UTC time, ISO 8601 ("2026-11-29T11:12:13Z").
std::string utc_timestamp();
// Writes `record` (pretty-printed) to `path` and prints "wrote <path>"; on failure prints the error
// to stderr and returns false.
bool write_json_record(const std::string& path, const nlohmann::ordered_json& record);

}  // namespace litetopk::tools
