#include "serve/stream.h"

namespace crucible::serve {

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::none: return "none";
    case Finish::length: return "length";
    case Finish::stop: return "stop";
    case Finish::cancelled: return "cancelled";
    case Finish::deadline: return "deadline";
    case Finish::shutdown: return "shutdown";
  }
  return "?";
}

void Stream::push(int32_t token) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tokens_.push_back(token);
  }
  cv_.notify_all();
}

void Stream::end(Finish why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_ == Finish::none) finish_ = why;
  }
  cv_.notify_all();
}

Stream::Snapshot Stream::wait(size_t seen, std::vector<int32_t>& out, SteadyTime until) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, until, [&] { return tokens_.size() > seen || finish_ != Finish::none; });
  if (tokens_.size() > seen) out.insert(out.end(), tokens_.begin() + long(seen), tokens_.end());
  return {tokens_.size(), finish_};
}

}  // namespace crucible::serve
