// The per-sampled-token fields of an LlmCall, listed once: the arrays that hold one entry per
// sampled token (token_ids, logits_digests, logits, logprobs, runner_up_ids,
// runner_up_logits) or num_layers / route_width entries per sampled token (layer_digests,
// route_ids). The store's writer moves them into token columns (store/codec.h) and the
// redactor drops them with a redacted output; both clear them through here, so a field added
// to that group in trace.proto is added here, once.
//
// Ownership: works on the caller's message. Thread safety: as the message (one writer).
// Errors: none.
#pragma once

#include "proto/trace.pb.h"

namespace trace::proto {

// Empties the eight per-sampled-token arrays of `call`. The widths (num_layers, route_width)
// and every other field are left as they are.
void ClearSampledTokenArrays(LlmCall* call);

}  // namespace trace::proto
