// The in-process group behind make_in_process_group(): ranks are threads sharing host memory. Each collective posts
// the rank's pointers, waits for all ranks, does its share of the work on every rank's memory, and waits again (so no
// rank reuses its buffers while another still reads them).
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "backend/communicator.h"
#include "base/error.h"

namespace rs {
namespace {

// State shared by the ranks of one group.
class GroupState {
 public:
  explicit GroupState(int32_t size) : size_(size), data_(size), local_(size) {}

  int32_t size() const { return size_; }
  // Blocks until every rank arrived (a generation-counting barrier); throws once the group is aborted. A waiter
  // spins a little before it sleeps: ranks arrive within microseconds of each other, and waking a sleeping thread
  // takes tens of them (two barriers per collective, four collectives per layer).
  void arrive_and_wait() {
    uint64_t generation = 0;
    {
      std::lock_guard lock(mutex_);
      RS_CHECK(!aborted_, "tensor-parallel group aborted: another rank failed this step");
      generation = generation_.load(std::memory_order_relaxed);
      if (++arrived_ == size_) {
        arrived_ = 0;
        generation_.store(generation + 1, std::memory_order_release);
        changed_.notify_all();
        return;
      }
    }
    for (int spin = 0; spin < kSpins; ++spin) {
      if (generation_.load(std::memory_order_acquire) != generation) return;
      if (aborted_.load(std::memory_order_relaxed)) break;
      if (spin % 64 == 63) {
        std::this_thread::yield();  // more ranks than cores: let the one being waited for run
      } else {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
    }
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != generation || aborted_; });
    RS_CHECK(generation_.load(std::memory_order_acquire) != generation,
             "tensor-parallel group aborted: another rank failed this step");
  }
  void abort() {
    std::lock_guard lock(mutex_);
    aborted_ = true;
    changed_.notify_all();
  }
  void reset() {
    std::lock_guard lock(mutex_);
    aborted_ = false;
    arrived_ = 0;
  }
  const int32_t size_;
  std::vector<float*> data_;         // all_reduce_sum: each rank's buffer
  std::vector<const float*> local_;  // gather_columns: each rank's block

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  static constexpr int kSpins = 4096;  // ~0.1 ms of pauses and yields
  int32_t arrived_ = 0;                // under mutex_
  std::atomic<uint64_t> generation_ = 0;
  std::atomic<bool> aborted_ = false;
};

class InProcessCommunicator : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<GroupState> group, int32_t rank) : group_(std::move(group)), rank_(rank) {}

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return group_->size(); }

  void all_reduce_sum(Tensor x) override {
    RS_CHECK(x.device().is_cpu() && x.dtype() == DType::kF32, "in-process all-reduce: a host f32 tensor, got {} {}",
             dtype_name(x.dtype()), x.shape_string());
    const int64_t count = x.numel();
    group_->data_[rank_] = x.data_as<float>();
    group_->arrive_and_wait();
    // This rank sums its own share of the elements over every rank (in rank order) and writes it back everywhere.
    const int32_t ranks = size();
    const int64_t begin = count * rank_ / ranks, end = count * (rank_ + 1) / ranks;
    for (int64_t i = begin; i < end; ++i) {
      float sum = group_->data_[0][i];
      for (int32_t r = 1; r < ranks; ++r) sum += group_->data_[r][i];
      for (int32_t r = 0; r < ranks; ++r) group_->data_[r][i] = sum;
    }
    group_->arrive_and_wait();
  }

  void gather_columns(const Tensor& local, Tensor full) override {
    RS_CHECK(local.device().is_cpu() && local.dtype() == DType::kF32 && local.ndim() == 2,
             "in-process gather: a host f32 matrix, got {}", local.shape_string());
    const int64_t rows = local.dim(0), cols = local.dim(1);
    if (rank_ == 0)
      RS_CHECK(full.dtype() == DType::kF32 && full.ndim() == 2 && full.dim(0) == rows && full.dim(1) == cols * size(),
               "in-process gather: {} columns of {} ranks into {}", cols, size(), full.shape_string());
    group_->local_[rank_] = local.data_as<float>();
    group_->arrive_and_wait();
    if (rank_ == 0) {
      float* out = full.data_as<float>();
      for (int32_t r = 0; r < size(); ++r)
        for (int64_t row = 0; row < rows; ++row)
          std::memcpy(out + row * cols * size() + r * cols, group_->local_[r] + row * cols, cols * sizeof(float));
    }
    group_->arrive_and_wait();
  }

  void abort() override { group_->abort(); }
  void reset() override { group_->reset(); }

 private:
  std::shared_ptr<GroupState> group_;
  const int32_t rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_in_process_group(int32_t size) {
  RS_CHECK(size >= 1, "a tensor-parallel group of {} ranks", size);
  auto state = std::make_shared<GroupState>(size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int32_t r = 0; r < size; ++r) ranks.push_back(std::make_unique<InProcessCommunicator>(state, r));
  return ranks;
}

}  // namespace rs
