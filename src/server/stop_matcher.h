// StopMatcher: finds stop strings in streamed text and holds back any tail that could still grow into one,
// so that no byte of a stop string ever reaches the client.
#pragma once

#include <string>
#include <vector>

namespace rs::server {

class StopMatcher {
 public:
  // include_stop: a matched stop string is returned too (vLLM's include_stop_str_in_output).
  explicit StopMatcher(std::vector<std::string> stops, bool include_stop = false)
      : stops_(std::move(stops)), include_stop_(include_stop) {}

  // Appends `text`; returns what may be sent now. After a match, stopped() is true, the text before the stop string
  // (and the stop string itself with include_stop) has been returned, and later calls return nothing.
  std::string push(const std::string& text);
  // The held-back tail, when the output ends without a match.
  std::string flush();
  bool stopped() const { return stopped_; }
  // The stop string that matched (empty before a match).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  bool include_stop_ = false;
  std::string pending_;  // text not yet returned
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace rs::server
