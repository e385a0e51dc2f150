#include "recorder/server/local_call.h"

#include <algorithm>

namespace trace::recorder {

bool Call::OnToken(const TokenStep& step) {
  if (stop_hit_) return true;
  if (!decoder_) decoder_ = std::make_unique<engine::IncrementalDecoder>(*tokenizer_, true);
  text_ += decoder_->Push(step.token);
  ++tokens_;
  token_ends_.push_back(text_.size());
  if (stream && req.logprobs) pending_.push_back(step);
  for (const std::string& s : req.sampling.stop) {
    size_t from = text_.size() > s.size() + 64 ? text_.size() - s.size() - 64 : 0;
    size_t pos = text_.find(s, from);
    if (pos != std::string::npos) {
      text_.resize(pos);
      stop_hit_ = true;
      matched_stop_ = s;
    }
  }
  if (stream && !tools_active) {
    // Hold back what might be the start of a stop sequence, and an incomplete character.
    size_t hold = max_stop_len > 0 ? max_stop_len - 1 : 0;
    size_t safe = stop_hit_ ? text_.size() : (text_.size() > hold ? text_.size() - hold : 0);
    while (safe > emitted_ && safe < text_.size() &&
           (static_cast<unsigned char>(text_[safe]) & 0xC0) == 0x80) {
      --safe;
    }
    if (safe > emitted_) {
      StreamQueue::Piece piece;
      piece.text = text_.substr(emitted_, safe - emitted_);
      // The logprobs of the tokens whose text is now complete within what is sent.
      size_t n = emitted_tokens_;
      while (n < tokens_ && token_ends_[n] <= safe) ++n;
      if (req.logprobs) {
        for (size_t i = emitted_tokens_; i < n; ++i) {
          piece.logprobs.push_back(MakeLogprob(pending_[i - (tokens_ - pending_.size())]));
        }
        pending_.erase(pending_.begin(),
                       pending_.begin() + static_cast<std::ptrdiff_t>(n - emitted_tokens_));
      }
      emitted_tokens_ = n;
      {
        std::lock_guard<std::mutex> lock(stream->mu);
        stream->pieces.push_back(std::move(piece));
      }
      emitted_ = safe;
      stream->cv.notify_all();
    }
  }
  return stop_hit_;
}

void Call::OnFinish(const GenerationResult&) {
  if (!stream) return;
  {
    std::lock_guard<std::mutex> lock(stream->mu);
    stream->finished = true;
  }
  stream->cv.notify_all();
}

const std::string& Call::FinalText() {
  if (!flushed_ && !stop_hit_ && decoder_) text_ += decoder_->Flush();
  flushed_ = true;
  return text_;
}

TokenLogprob Call::MakeLogprob(const TokenStep& s) const {
  TokenLogprob lp;
  lp.token = engine::SanitizeUtf8(tokenizer_->TokenBytes(s.token));
  lp.logprob = s.model_logprob;
  for (const auto& [id, v] : s.top) {
    lp.top.emplace_back(engine::SanitizeUtf8(tokenizer_->TokenBytes(id)), v);
  }
  return lp;
}

std::vector<TokenLogprob> Call::LogprobsOf(const std::vector<TokenStep>& steps) const {
  std::vector<TokenLogprob> out;
  out.reserve(steps.size());
  for (const TokenStep& s : steps) out.push_back(MakeLogprob(s));
  return out;
}

}  // namespace trace::recorder
