#include "server/stop_matcher.h"

#include <algorithm>

namespace rs::server {

std::string StopMatcher::push(const std::string& text) {
  if (stopped_) return {};
  pending_ += text;
  size_t first = std::string::npos, length = 0;
  const std::string* which = nullptr;
  for (const std::string& stop : stops_)
    if (const size_t at = pending_.find(stop);
        at < first || (at == first && at != std::string::npos && stop.size() > length)) {
      first = at;
      length = stop.size();
      which = &stop;
    }
  if (first != std::string::npos) {
    stopped_ = true;
    matched_ = *which;
    std::string out = pending_.substr(0, include_stop_ ? first + length : first);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& stop : stops_)
    for (size_t len = std::min(stop.size() - 1, pending_.size()); len > hold; --len)
      if (pending_.compare(pending_.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return stopped_ ? std::string{} : out;
}

}  // namespace rs::server
