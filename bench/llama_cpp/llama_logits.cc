// llama_logits: the logits llama.cpp computes for a token sequence, to check a GGUF conversion
// against trace's engine (bench/llama_cpp/compare.sh builds it against the llama.cpp it built;
// it is not part of trace's CMake build).
//
//   llama_logits MODEL.gguf 1,2,3,... [THREADS]
//
// Runs every token but the last as one batch (llama.cpp's batched matmul path), then the last
// token alone (its single-token path), and prints the logits after the last token, one per
// line with %.9g (which reads back to the same float). The KV cache is F32 and flash attention
// off so that the check measures the conversion, not llama.cpp's lossy paths: with F32 weights
// this matches trace's canonical logits to about 5e-7 of their spread (the size of trace's own
// canonical-vs-fast reordering difference), while llama.cpp's CPU flash attention, even on an
// F32 cache, moves them by about 6e-4. Errors: one line, exit 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"

namespace {

[[noreturn]] void Fail(const std::string& msg) {
  std::fprintf(stderr, "llama_logits: %s\n", msg.c_str());
  std::exit(1);
}

std::vector<llama_token> ParseTokens(const char* text) {
  std::vector<llama_token> out;
  const char* p = text;
  while (*p != '\0') {
    char* end = nullptr;
    long v = std::strtol(p, &end, 10);
    if (end == p || v < 0) Fail(std::string("bad token list '") + text + "'");
    out.push_back(static_cast<llama_token>(v));
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') Fail(std::string("bad token list '") + text + "'");
  }
  if (out.size() < 2) Fail("need at least 2 tokens");
  return out;
}

void Decode(llama_context* ctx, const std::vector<llama_token>& tokens, size_t begin, size_t end) {
  llama_batch batch = llama_batch_init(static_cast<int32_t>(end - begin), 0, 1);
  for (size_t i = begin; i < end; ++i) {
    const int32_t j = batch.n_tokens++;
    batch.token[j] = tokens[i];
    batch.pos[j] = static_cast<llama_pos>(i);
    batch.n_seq_id[j] = 1;
    batch.seq_id[j][0] = 0;
    batch.logits[j] = i + 1 == end;
  }
  if (llama_decode(ctx, batch) != 0) Fail("llama_decode failed");
  llama_batch_free(batch);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: llama_logits MODEL.gguf 1,2,3,... [THREADS]\n");
    return 2;
  }
  const std::vector<llama_token> tokens = ParseTokens(argv[2]);
  const int threads = argc == 4 ? std::atoi(argv[3]) : 2;
  llama_log_set(
      [](ggml_log_level level, const char* text, void*) {
        if (level >= GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
      },
      nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.progress_callback = [](float, void*) { return true; };  // no progress dots on stderr
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) Fail(std::string(argv[1]) + ": llama.cpp cannot load it");
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(tokens.size() + 16);
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(tokens.size());
  cp.n_threads = cp.n_threads_batch = threads;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) Fail("cannot create a context");
  Decode(ctx, tokens, 0, tokens.size() - 1);
  Decode(ctx, tokens, tokens.size() - 1, tokens.size());
  const float* logits = llama_get_logits_ith(ctx, -1);
  const int32_t n = llama_vocab_n_tokens(llama_model_get_vocab(model));
  for (int32_t i = 0; i < n; ++i) std::printf("%.9g\n", logits[i]);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
