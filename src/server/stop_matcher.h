// StopMatcher: finds stop strings in streamed text and holds back any tail that could still grow into one,
// so that no byte of a stop string ever reaches the client.
#pragma once

#include <string>
#include <vector>

namespace rs::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Appends `text`; returns what may be sent now. After a match, stopped() is true, the text before the stop string
  // has been returned, and later calls return nothing.
  std::string push(const std::string& text);
  // The held-back tail, when the output ends without a match.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // text not yet returned
  bool stopped_ = false;
};

}  // namespace rs::server
