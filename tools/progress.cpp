#include "progress.h"

#include <iostream>
#include <utility>

#include "report.h"

namespace litetopk::tools {

Progress::Progress(std::string what, std::ostream& out, std::chrono::milliseconds interval)
    : what_(std::move(what)),
      out_(out),
      interval_(interval),
      start_(std::chrono::steady_clock::now()),
      thread_([this] { beat(); }) {}

Progress::~Progress() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  stopped_.notify_all();
  thread_.join();
  if (printed_) {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start_;
    out_ << "litetopk: " << what_ << ": done in " << fixed(took.count(), 1) << " s" << std::endl;
  }
}

std::ostream& Progress::default_stream() { return std::cerr; }

void Progress::beat() {
  std::unique_lock<std::mutex> lock(mutex_);
  auto next = start_ + interval_;
  while (!stopped_.wait_until(lock, next, [this] { return done_; })) {
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
    out_ << "litetopk: " << what_ << ": " << fixed(elapsed.count(), 0) << " s" << std::endl;
    printed_ = true;
    next += interval_;
  }
}

}  // namespace litetopk::tools
