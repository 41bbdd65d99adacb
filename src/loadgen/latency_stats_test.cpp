#include "loadgen/latency_stats.h"

#include <gtest/gtest.h>

namespace rs::loadgen {
namespace {

TEST(LatencyStats, PercentilesInterpolateBetweenRanksAsNumpyDoes) {
  const std::vector<double> sorted = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_DOUBLE_EQ(percentile(sorted, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(sorted, 50), 5.5);  // numpy.percentile(range(1, 11), 50)
  EXPECT_DOUBLE_EQ(percentile(sorted, 90), 9.1);
  EXPECT_DOUBLE_EQ(percentile(sorted, 99), 9.91);
  EXPECT_DOUBLE_EQ(percentile(sorted, 100), 10);
  EXPECT_DOUBLE_EQ(percentile({42}, 99), 42);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
}

TEST(LatencyStats, SummaryOfUnsortedSample) {
  std::vector<double> values;
  for (int i = 100; i >= 1; --i) values.push_back(i * 0.01);  // 0.01 .. 1.00, descending
  const Distribution d = summarize(values);
  EXPECT_EQ(d.count, 100u);
  EXPECT_NEAR(d.mean, 0.505, 1e-12);
  EXPECT_NEAR(d.p50, 0.505, 1e-12);
  EXPECT_NEAR(d.p90, 0.901, 1e-12);
  EXPECT_NEAR(d.p99, 0.9901, 1e-12);
  EXPECT_DOUBLE_EQ(d.max, 1.0);
  EXPECT_EQ(summarize({}).count, 0u);
  EXPECT_EQ(summarize({}).p99, 0.0);
}

}  // namespace
}  // namespace rs::loadgen
