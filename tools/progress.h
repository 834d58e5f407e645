// A heartbeat for work that may take long: while a Progress is alive, a thread prints
// "litetopk: <what>: <N> s" every `interval`, so that a run of more than a couple of seconds
// shows it is working (and what it is doing) even when its own output comes only at the end.
// Work that ends within the first interval prints nothing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <iosfwd>
#include <mutex>
#include <string>
#include <thread>

namespace litetopk::tools {

class Progress {
 public:
  explicit Progress(std::string what, std::ostream& out = default_stream(),
                    std::chrono::milliseconds interval = std::chrono::seconds(2));
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // std::cerr: unbuffered, and apart from the tables and JSON a command writes to stdout.
  static std::ostream& default_stream();

 private:
  void beat();

  std::string what_;
  std::ostream& out_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable stopped_;
  bool done_ = false;
  bool printed_ = false;
  std::thread thread_;
};

}  // namespace litetopk::tools
