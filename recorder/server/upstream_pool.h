// Connections to the upstream of proxy mode, kept open and reused: each request borrows an
// idle client (its keep-alive connection already open, TCP_NODELAY set) or opens a new one,
// and gives it back when done, so an agent's calls do not each pay a TCP (and TLS)
// handshake. A client that failed, or was stopped mid-request, is dropped instead.
//
// Ownership: the pool owns its idle clients; a Lease owns its client until it goes back.
// Thread safety: Acquire and the Lease's return are safe from any thread; a Lease belongs to
// one thread (httplib::Client::stop() may be called on its client from another, to abort
// the request in flight; then Discard it). Errors: none here; requests report theirs.
#pragma once

#include <httplib.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace trace::recorder {

class UpstreamPool {
 public:
  // `origin`: "http://host:port" or "https://host". At most `max_idle` clients are kept.
  explicit UpstreamPool(std::string origin, size_t max_idle = 32);

  class Lease {
   public:
    Lease(UpstreamPool* pool, std::unique_ptr<httplib::Client> client)
        : pool_(pool), client_(std::move(client)) {}
    Lease(Lease&&) = default;
    ~Lease();
    httplib::Client& client() { return *client_; }
    // The request failed or was cut: do not reuse this connection.
    void Discard() { discard_ = true; }

   private:
    UpstreamPool* pool_;
    std::unique_ptr<httplib::Client> client_;
    bool discard_ = false;
  };

  Lease Acquire();

 private:
  void Return(std::unique_ptr<httplib::Client> client);

  const std::string origin_;
  const size_t max_idle_;
  std::mutex mu_;  // guards: idle_
  std::vector<std::unique_ptr<httplib::Client>> idle_;
};

}  // namespace trace::recorder
