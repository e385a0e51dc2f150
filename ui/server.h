// The HTTP server of `trace ui`: the web app (its page, script and stylesheet, embedded in
// the binary at build time: ui/app/, docs/ui.md) and the JSON API of ui/api.h, on the
// recorder's HTTP front (recorder/server/frontend.h), so the same admission rules hold as
// for `trace serve`: loopback Host names only, no foreign web Origin, the API key (when one
// is set) on every API call, bounded heads, bodies and connections. The page and its assets
// hold no data and are served without the key; the page asks for the key when the API
// answers 401 and sends it as a bearer token.
//
//   GET /, /index.html, /app.js, /app.css   the app
//   /ui/api/...                             ui/api.h
//   GET /ui/api/replays/ID/events           a replay's progress as server-sent events: one
//                                           "data: {...}" per change (ReplayStateJson), the
//                                           last one with "done": true
//
// Ownership: borrows the Store (must outlive the server). Thread safety: Start and Stop
// from the owning thread. Errors: Start fails with IOError naming host:port.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "recorder/server.h"
#include "store/store.h"
#include "ui/api.h"

namespace trace::recorder {
class HttpFrontend;
}

namespace trace::ui {

class UiServer {
 public:
  UiServer(store::Store* store, UiApiOptions api_options, const recorder::ServerOptions& http);
  ~UiServer();

  Status Start();
  void Stop();
  int port() const;
  std::string url() const;  // "http://127.0.0.1:PORT/"

 private:
  void AddRoutes();

  std::unique_ptr<UiApi> api_;
  std::unique_ptr<recorder::HttpFrontend> front_;
};

}  // namespace trace::ui
