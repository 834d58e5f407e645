// The CPU backend's exception boundary: every public CPU call runs its body through run_guarded,
// so an allocation or thread failure becomes kInternal naming the call, never an exception.
#pragma once

#include <exception>
#include <new>

#include "api/format.h"
#include "litetopk/status.h"

namespace litetopk::cpu {

// Runs fn() (returning a Status) and turns any exception into kInternal naming `what`.
template <typename Fn>
Status run_guarded(const char* what, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kInternal, detail::concat(what, ": out of host memory"));
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, detail::concat(what, ": ", e.what()));
  } catch (...) {
    return Status(StatusCode::kInternal, detail::concat(what, ": unknown exception"));
  }
}

}  // namespace litetopk::cpu
