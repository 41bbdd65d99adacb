#include "base/thread_pool.h"

#include <algorithm>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#define RS_CPU_RELAX() _mm_pause()
#else
#define RS_CPU_RELAX() std::this_thread::yield()
#endif

namespace rs {
namespace {
constexpr int kSpinIterations = 1 << 16;  // ~0.1-1 ms of polling before a worker sleeps
}

int hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < std::max(1, num_threads); ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::run_range(int index) {
  const int64_t begin = index * job_chunk_;
  const int64_t end = std::min(job_count_, begin + job_chunk_);
  if (begin >= end) return;
  try {
    (*job_)(begin, end);
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::parallel_for(int64_t count, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (count <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (count + grain - 1) / grain;
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), units));
  if (threads <= 1) {
    fn(0, count);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_count_ = count;
    job_chunk_ = ((units + threads - 1) / threads) * grain;
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_.notify_all();
  run_range(0);
  while (pending_.load(std::memory_order_acquire) != 0) RS_CPU_RELAX();
  std::exception_ptr error;
  {
    std::lock_guard lock(mutex_);
    error = std::exchange(error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  while (true) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && !stopping_.load(std::memory_order_relaxed) &&
           spins < kSpinIterations) {
      RS_CPU_RELAX();
      ++spins;
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_.load(std::memory_order_acquire) != seen; });
    }
    if (stopping_) return;
    seen = generation_.load(std::memory_order_acquire);
    run_range(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace rs
