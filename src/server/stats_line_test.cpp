#include "server/stats_line.h"

#include <gtest/gtest.h>

namespace rs::server {
namespace {

TEST(StatsLine, SaysNothingWhileIdleAndRatesWhileBusy) {
  sched::SchedulerStats before;
  before.kv = {{.window = 0, .num_pages = 100, .used_pages = 0, .cached_pages = 0}};
  EXPECT_FALSE(stats_line(before, before, 10.0).has_value());
  sched::SchedulerStats now = before;
  now.num_running = 3;
  now.num_queued = 1;
  now.kv[0].used_pages = 25;
  now.prompt_tokens = 1000;
  now.cached_prompt_tokens = 200;
  now.generation_tokens = 500;
  const auto line = stats_line(before, now, 10.0);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line,
            "running=3 waiting=1 kv_pages=25/100 (25.0%) prefill=80.0 tok/s (cached 20.0%) decode=50.0 tok/s "
            "preemptions=0");
  // Finished work since the last line is still reported once, then silence.
  sched::SchedulerStats done = now;
  done.num_running = done.num_queued = 0;
  done.generation_tokens += 10;
  EXPECT_TRUE(stats_line(now, done, 1.0).has_value());
  EXPECT_FALSE(stats_line(done, done, 1.0).has_value());
}

}  // namespace
}  // namespace rs::server
