#include "recorder/server/upstream_pool.h"

namespace trace::recorder {

UpstreamPool::UpstreamPool(std::string origin, size_t max_idle)
    : origin_(std::move(origin)), max_idle_(max_idle) {}

UpstreamPool::Lease UpstreamPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<httplib::Client> client = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(client));
    }
  }
  auto client = std::make_unique<httplib::Client>(origin_);
  client->set_keep_alive(true);
  // Small requests and SSE events go out at once, not after a delayed ACK (Nagle).
  client->set_tcp_nodelay(true);
  client->set_connection_timeout(10, 0);
  // A model can take minutes to answer, or stay silent that long between events.
  client->set_read_timeout(600, 0);
  client->set_write_timeout(60, 0);
  return Lease(this, std::move(client));
}

void UpstreamPool::Return(std::unique_ptr<httplib::Client> client) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(client));
}

UpstreamPool::Lease::~Lease() {
  if (client_ && !discard_) pool_->Return(std::move(client_));
}

}  // namespace trace::recorder
