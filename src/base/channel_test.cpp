#include "base/channel.h"

#include <gtest/gtest.h>

#include <thread>

namespace rs {

TEST(Channel, DeliversInOrderAcrossThreads) {
  Channel<int> channel;
  std::thread producer([&] {
    for (int i = 0; i < 1000; ++i) channel.push(i);
    channel.close();
  });
  int expected = 0;
  while (auto value = channel.pop()) EXPECT_EQ(*value, expected++);
  producer.join();
  EXPECT_EQ(expected, 1000);
  EXPECT_FALSE(channel.push(1));
}

TEST(Channel, PopForTimesOut) {
  Channel<int> channel;
  EXPECT_FALSE(channel.pop_for(std::chrono::milliseconds(5)).has_value());
}

}  // namespace rs
