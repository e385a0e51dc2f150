#include "proto/llm_call_tokens.h"

namespace trace::proto {

void ClearSampledTokenArrays(LlmCall* call) {
  call->clear_token_ids();
  call->clear_logits_digests();
  call->clear_logits();
  call->clear_logprobs();
  call->clear_runner_up_ids();
  call->clear_runner_up_logits();
  call->clear_layer_digests();
  call->clear_route_ids();
}

}  // namespace trace::proto
