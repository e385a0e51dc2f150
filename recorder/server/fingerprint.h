// The model part of a run header's fingerprints (proto::ModelFingerprint) from a loaded
// model: what FillFingerprints (recorder/server.h) records for the local engine, and what
// the replay tests write into the runs they make, so the two cannot drift apart.
//
// Ownership: borrows the model; fills the caller's message. Thread safety: reentrant (the
// model is only read). Errors: none.
#pragma once

#include "engine/engine.h"
#include "proto/trace.pb.h"

namespace trace::recorder {

// Architecture, dtype, parameter count, the weights', config's, tokenizer's and chat
// template's SHA-256 (as the model folder has them), the folder, layer count and vocabulary
// size. The served model name and a chat template given apart from the folder are the
// server's to add.
void FillModelFingerprint(const engine::Model& model, proto::ModelFingerprint* m);

}  // namespace trace::recorder
