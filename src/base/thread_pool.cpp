#include "base/thread_pool.h"

#include <algorithm>

namespace rs {

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
  if (begin < end) (*job_)(begin, end);
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
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  start_.notify_all();
  run_range(0);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_range(index);
    {
      std::lock_guard lock(mutex_);
      --pending_;
    }
    done_.notify_one();
  }
}

}  // namespace rs
