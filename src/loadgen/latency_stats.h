// Distribution: mean and percentiles of a sample of latencies (or any figure), as the serving benchmarks report them.
#pragma once

#include <cstddef>
#include <vector>

namespace rs::loadgen {

struct Distribution {
  size_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

// The q-th percentile (0..100) of ascending `sorted` values, interpolating linearly between the two nearest ranks
// (numpy's default, which SGLang's and vLLM's benchmarks use). 0 for an empty sample.
double percentile(const std::vector<double>& sorted, double q);

// Summarises `values` (any order; 0 everywhere when empty).
Distribution summarize(std::vector<double> values);

}  // namespace rs::loadgen
