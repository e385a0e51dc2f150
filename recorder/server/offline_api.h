// The model API of a `trace rerun` that has no live model: a run recorded through
// `--upstream` re-run offline (no --upstream, no --model). Every model call of every wire
// format, and every embeddings call, goes to the server's CallGate (the cassette); one the
// recording cannot answer gets a 503 in the API's shape naming what to pass to go live.
// GET /v1/models lists the model name the recording used.
//
// Ownership: borrows the frontend, which must outlive it. Thread safety: handlers run
// concurrently on the frontend's threads. Errors: as above; nothing throws.
#pragma once

#include <string>

#include "recorder/server/frontend.h"

namespace trace::recorder {

class OfflineModelApi {
 public:
  OfflineModelApi(HttpFrontend* frontend, std::string model_name)
      : frontend_(frontend), model_name_(std::move(model_name)) {}
  // Adds the model routes to the frontend.
  void Register();
  const std::string& model_name() const { return model_name_; }

 private:
  HttpFrontend* frontend_;
  std::string model_name_;
};

}  // namespace trace::recorder
