#include <atomic>

#include "backend/cuda/kernels/launch.cuh"

namespace rs::cuda {
namespace {
std::atomic<bool> g_programmatic_launch{false};
}

void set_programmatic_launch(bool enabled) { g_programmatic_launch.store(enabled, std::memory_order_relaxed); }
bool programmatic_launch() { return g_programmatic_launch.load(std::memory_order_relaxed); }

}  // namespace rs::cuda
