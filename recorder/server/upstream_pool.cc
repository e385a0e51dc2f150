#include "recorder/server/upstream_pool.h"

namespace trace::recorder {

UpstreamPool::UpstreamPool(std::string origin, size_t max_idle)
    : origin_(std::move(origin)), max_idle_(max_idle) {
  // The first client is made here, on the thread that builds the server, before any
  // connection thread exists: httplib::Client's constructor initialises function-local
  // statics (its URL regex) inside the uninstrumented libcpp-httplib.so, whose guard
  // ThreadSanitizer cannot see; made first on a connection thread, TSan reports every later
  // use elsewhere as a race (docs/testing.md). It is also the client the first call uses.
  idle_.push_back(NewClient());
  created_ = 1;
}

std::unique_ptr<httplib::Client> UpstreamPool::NewClient() const {
  auto client = std::make_unique<httplib::Client>(origin_);
  client->set_keep_alive(true);
  // Small requests and SSE events go out at once, not after a delayed ACK (Nagle).
  client->set_tcp_nodelay(true);
  client->set_connection_timeout(10, 0);
  // A model can take minutes to answer, or stay silent that long between events.
  client->set_read_timeout(600, 0);
  client->set_write_timeout(60, 0);
  return client;
}

UpstreamPool::Lease UpstreamPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<httplib::Client> client = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(client));
    }
    ++created_;
  }
  return Lease(this, NewClient());
}

void UpstreamPool::Return(std::unique_ptr<httplib::Client> client) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(client));
}

size_t UpstreamPool::clients_created() const {
  std::lock_guard<std::mutex> lock(mu_);
  return created_;
}

UpstreamPool::Lease::~Lease() {
  if (client_ && !discard_) pool_->Return(std::move(client_));
}

}  // namespace trace::recorder
