// Communicator: the collectives tensor parallelism needs between the ranks of one model (issue 41). Each rank holds
// its own Communicator and calls every collective in the same order as the others; a call returns once every rank's
// part is done. make_in_process_group() joins ranks that run as threads of one process over host memory (the CPU
// backend: its all-reduce is an in-process sum); NCCL's group (CUDA) comes with multi-GPU machines.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/tensor.h"

namespace rs {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int32_t rank() const = 0;
  virtual int32_t size() const = 0;
  // x (f32, contiguous, the same shape on every rank) becomes the sum over ranks, added in rank order on every rank
  // (so every rank holds the same bits, whatever the threads' timing).
  virtual void all_reduce_sum(Tensor x) = 0;
  // Rank 0's `full` [rows, size() x cols] receives every rank's `local` [rows, cols] (f32) as column block `rank`;
  // the other ranks pass an empty `full`.
  virtual void gather_columns(const Tensor& local, Tensor full) = 0;
  // After a rank failed mid-step: every collective another rank waits in, or calls later, throws, until reset().
  virtual void abort() = 0;
  virtual void reset() = 0;
};

// `size` communicators of one group whose ranks are threads of this process (host tensors).
std::vector<std::unique_ptr<Communicator>> make_in_process_group(int32_t size);

}  // namespace rs
