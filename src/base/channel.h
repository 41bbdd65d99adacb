// Channel<T>: a thread-safe FIFO between threads (HTTP workers -> scheduler, scheduler -> streams).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

namespace rs {

template <typename T>
class Channel {
 public:
  // Returns false when the channel is closed (the value is dropped).
  bool push(T value) {
    {
      std::lock_guard lock(mutex_);
      if (closed_) return false;
      queue_.push_back(std::move(value));
    }
    ready_.notify_one();
    return true;
  }

  // Blocks until a value arrives or the channel is closed and drained (then nullopt).
  std::optional<T> pop() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return closed_ || !queue_.empty(); });
    return take_locked();
  }

  // Waits at most `timeout`; nullopt on timeout or when closed and drained.
  template <typename Rep, typename Period>
  std::optional<T> pop_for(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return closed_ || !queue_.empty(); });
    return take_locked();
  }

  std::optional<T> try_pop() {
    std::lock_guard lock(mutex_);
    return take_locked();
  }

  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    ready_.notify_all();
  }

  bool closed() const {
    std::lock_guard lock(mutex_);
    return closed_;
  }

  size_t size() const {
    std::lock_guard lock(mutex_);
    return queue_.size();
  }

 private:
  std::optional<T> take_locked() {
    if (queue_.empty()) return std::nullopt;
    T value = std::move(queue_.front());
    queue_.pop_front();
    return value;
  }

  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<T> queue_;
  bool closed_ = false;
};

}  // namespace rs
