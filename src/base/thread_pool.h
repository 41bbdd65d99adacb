// ThreadPool: a fixed set of workers for data-parallel kernels; the calling thread takes part too.
// Workers spin briefly before sleeping, because a decode step issues hundreds of short parallel loops.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rs {

class ThreadPool {
 public:
  // num_threads counts the caller: 1 means "run everything inline".
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Splits [0, count) into contiguous ranges and calls fn(begin, end) on each, at most one range per thread,
  // returning when all are done. Ranges are multiples of `grain` (except the last). Not re-entrant; one caller.
  // An exception thrown by fn on any thread is rethrown here once every range has finished.
  void parallel_for(int64_t count, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

 private:
  void worker_loop(int index);
  void run_range(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_count_ = 0;
  int64_t job_chunk_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stopping_{false};
  std::exception_ptr error_;  // first exception of the current job (guarded by mutex_)
};

// Number of hardware threads, at least 1.
int hardware_threads();

}  // namespace rs
