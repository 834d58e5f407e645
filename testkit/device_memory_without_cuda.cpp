// DeviceBuffer, copies and DeviceTimer in a build without CUDA: every call says so.
#include "testkit/device_memory.h"

namespace litetopk::testkit {

namespace {
Status not_compiled() {
  return Status(StatusCode::kNotCompiled,
                "this litetopk build has no CUDA backend (configure with LITETOPK_ENABLE_CUDA=ON)");
}
}  // namespace

DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&&) noexcept = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept = default;
Status DeviceBuffer::allocate(std::size_t) { return not_compiled(); }
Status copy_to_device(void*, const void*, std::size_t) { return not_compiled(); }
Status copy_to_host(void*, const void*, std::size_t) { return not_compiled(); }
Status fill_device(void*, int, std::size_t) { return not_compiled(); }
Status device_synchronize() { return not_compiled(); }
DeviceGraph::~DeviceGraph() = default;
Status DeviceGraph::capture(const std::function<Status(cudaStream_t)>&) { return not_compiled(); }
Status DeviceGraph::replay() { return not_compiled(); }

DeviceTimer::DeviceTimer() = default;
DeviceTimer::~DeviceTimer() = default;
Status DeviceTimer::start(cudaStream_t) { return not_compiled(); }
Status DeviceTimer::stop(float*, cudaStream_t) { return not_compiled(); }

}  // namespace litetopk::testkit
