#include "report.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <ostream>
#include <sstream>

namespace litetopk::tools {

Table::Table(std::vector<std::string> header, std::size_t left_columns)
    : left_columns_(left_columns) {
  rows_.push_back(std::move(header));
}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(rows_[0].size());
  rows_.push_back(std::move(cells));
}

void Table::print(std::ostream& out) const {
  std::vector<std::size_t> widths(rows_[0].size(), 0);
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    std::ostringstream line;
    for (std::size_t c = 0; c < widths.size(); ++c) {
      line << (c < left_columns_ ? std::left : std::right)
           << std::setw(static_cast<int>(widths[c])) << rows_[r][c]
           << (c + 1 < widths.size() ? "  " : "");
    }
    std::string text = line.str();
    text.erase(text.find_last_not_of(' ') + 1);  // empty trailing cells
    out << text << '\n';
    if (r == 0) {
      std::size_t total = 2 * (widths.size() - 1);
      for (std::size_t w : widths) total += w;
      out << std::string(total, '-') << '\n';
    }
  }
}

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

std::string scientific(double value, int digits) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::ostringstream out;
  out << std::scientific << std::setprecision(digits) << value;
  return out.str();
}

std::string shape_label(int64_t batch, int64_t n, int64_t k) {
  std::ostringstream out;
  out << batch << 'x' << n << " k=" << k;
  return out.str();
}

double gigabytes_per_second(std::size_t bytes, double ms) {
  return ms > 0 ? static_cast<double>(bytes) / (ms * 1e6) : 0.0;
}

double teraflops_per_second(double flops, double ms) {
  return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0;
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

bool write_json_record(const std::string& path, const nlohmann::ordered_json& record) {
  std::ofstream file(path);
  file << record.dump(2) << '\n';
  file.close();
  if (!file) {
    const Status error(StatusCode::kInvalidArgument, "cannot write the JSON file " + path);
    std::cerr << "litetopk: error: " << error.to_string() << '\n';
    return false;
  }
  std::cout << "wrote " << path << '\n';
  return true;
}

}  // namespace litetopk::tools
