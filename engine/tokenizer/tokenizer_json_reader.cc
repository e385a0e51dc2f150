// The streaming reader of tokenizer.json (tokenizer_json_reader.h).
#include "engine/tokenizer/tokenizer_json_reader.h"

#include <algorithm>

#include "base/escape.h"

namespace trace::engine {
namespace {

// The SAX handler (nlohmann's sax_parse). Inside the root object's "model" object, a
// "vocab" object and a "merges" array are streamed into FlatVocabAndMerges and stand in the
// DOM as an empty object / array (so the tokenizer sees which key won and its type); every
// other event goes to nlohmann's own DOM builder. No recursion: nesting is a stack or a
// counter.
class TokenizerSax {
 public:
  using json = nlohmann::json;

  TokenizerSax(nlohmann::json* root, FlatVocabAndMerges* flat) : dom_(*root, true), out_(flat) {}

  bool null() { return Scalar(&Dom::null); }
  bool boolean(bool v) { return mode_ == Mode::kDom ? dom_.boolean(v) : Other(); }
  bool number_integer(json::number_integer_t v) {
    if (mode_ == Mode::kDom) return dom_.number_integer(v);
    return Integer(v >= 0 && v <= kMaxTokenId ? static_cast<int32_t>(v) : -1);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (mode_ == Mode::kDom) return dom_.number_unsigned(v);
    return Integer(v <= static_cast<uint64_t>(kMaxTokenId) ? static_cast<int32_t>(v) : -1);
  }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return mode_ == Mode::kDom ? dom_.number_float(v, s) : Other();
  }
  bool binary(json::binary_t& v) { return mode_ == Mode::kDom ? dom_.binary(v) : Other(); }

  bool string(json::string_t& v) {
    if (mode_ == Mode::kDom) return dom_.string(v);
    if (skip_ > 0) return true;
    if (mode_ == Mode::kVocab) return Other();
    if (in_pair_) {  // an element of a [a, b] merge
      if (pair_count_ < 2) {
        out_->merge_text += v;
        pair_sizes_[pair_count_] = v.size();
      }
      ++pair_count_;
      return true;
    }
    // Old format "a b": split at the first space; the right part ends at the next one.
    const std::string_view text(v);
    const size_t space = text.find(' ');
    if (space == std::string_view::npos) {
      out_->AddBadMerge(FlatVocabAndMerges::MergeForm::kNoSpace);
    } else {
      const size_t second = text.find(' ', space + 1);
      const size_t right_end = second == std::string_view::npos ? text.size() : second;
      out_->AddMerge(text.substr(0, space), text.substr(space + 1, right_end - space - 1));
    }
    return true;
  }

  bool start_object(std::size_t len) {
    if (mode_ == Mode::kDom) {
      if (places_.empty()) {
        places_.push_back(Place::kRoot);
      } else if (places_.back() == Place::kRoot && key_is_model_) {
        places_.push_back(Place::kModel);
      } else if (places_.back() == Place::kModel && model_key_ == ModelKey::kVocab) {
        // A later "vocab" replaces an earlier one, as in the DOM.
        out_->vocab.clear();
        out_->vocab_keys.clear();
        mode_ = Mode::kVocab;
        return dom_.start_object(len) && dom_.end_object();  // the placeholder
      } else {
        places_.push_back(Place::kOther);
      }
      return dom_.start_object(len);
    }
    return Nested();
  }

  bool start_array(std::size_t len) {
    if (mode_ == Mode::kDom) {
      if (!places_.empty() && places_.back() == Place::kModel && model_key_ == ModelKey::kMerges) {
        out_->merges.clear();
        out_->merge_text.clear();
        mode_ = Mode::kMerges;
        return dom_.start_array(len) && dom_.end_array();  // the placeholder
      }
      places_.push_back(Place::kOther);
      return dom_.start_array(len);
    }
    if (skip_ == 0 && mode_ == Mode::kMerges && !in_pair_) {
      in_pair_ = true;
      pair_count_ = 0;
      pair_ok_ = true;
      pair_offset_ = out_->merge_text.size();
      return true;
    }
    return Nested();
  }

  bool key(json::string_t& k) {
    if (mode_ == Mode::kDom) {
      if (places_.back() == Place::kRoot) {
        key_is_model_ = k == "model";
      } else if (places_.back() == Place::kModel) {
        model_key_ = k == "vocab"    ? ModelKey::kVocab
                     : k == "merges" ? ModelKey::kMerges
                                     : ModelKey::kOther;
      }
      return dom_.key(k);
    }
    if (skip_ == 0) {  // a key of model.vocab itself
      key_offset_ = out_->vocab_keys.size();
      key_size_ = k.size();
      out_->vocab_keys += k;
    }
    return true;
  }

  bool end_object() {
    if (mode_ == Mode::kDom) {
      places_.pop_back();
      return dom_.end_object();
    }
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    mode_ = Mode::kDom;  // the end of model.vocab (an object in merges is skipped)
    return true;
  }

  bool end_array() {
    if (mode_ == Mode::kDom) {
      places_.pop_back();
      return dom_.end_array();
    }
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    if (in_pair_) {
      in_pair_ = false;
      FlatVocabAndMerges::Merge m{pair_offset_, 0, 0, FlatVocabAndMerges::MergeForm::kNeither};
      if (pair_ok_ && pair_count_ == 2) {
        m.form = FlatVocabAndMerges::MergeForm::kPair;
        m.left_size = pair_sizes_[0];
        m.right_size = pair_sizes_[1];
      } else {
        out_->merge_text.resize(pair_offset_);
      }
      out_->merges.push_back(m);
      return true;
    }
    mode_ = Mode::kDom;  // the end of model.merges (an array in vocab is skipped)
    return true;
  }

  // Rethrows what the DOM parser would throw (the same message), for ReadTokenizerJson to catch.
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& last_token, const Exception& ex) {
    return dom_.parse_error(position, last_token, ex);
  }

 private:
  using Dom = nlohmann::detail::json_sax_dom_parser<json>;
  enum class Mode : uint8_t { kDom, kVocab, kMerges };
  enum class Place : uint8_t { kRoot, kModel, kOther };
  enum class ModelKey : uint8_t { kOther, kVocab, kMerges };

  bool Scalar(bool (Dom::*f)()) { return mode_ == Mode::kDom ? (dom_.*f)() : Other(); }

  // A streamed value that is an integer: a vocab id (or -1), or a non-string merge part.
  bool Integer(int32_t id) {
    if (skip_ > 0) return true;
    if (mode_ == Mode::kVocab) {
      out_->vocab.push_back({key_offset_, key_size_, id});
      return true;
    }
    return Other();
  }

  // A streamed scalar that is neither a token id nor a merge string.
  bool Other() {
    if (skip_ > 0) return true;
    if (mode_ == Mode::kVocab) {
      out_->vocab.push_back({key_offset_, key_size_, -1});
    } else if (in_pair_) {
      pair_ok_ = false;
      ++pair_count_;
    } else {
      out_->AddBadMerge(FlatVocabAndMerges::MergeForm::kNeither);
    }
    return true;
  }

  // An object or array inside a streamed value: recorded as a bad value, its contents
  // skipped (counted, never stored).
  bool Nested() {
    if (skip_ == 0) Other();
    ++skip_;
    return true;
  }

  Dom dom_;
  FlatVocabAndMerges* out_;
  Mode mode_ = Mode::kDom;
  // DOM mode: where each open container is, and the key just read at the two levels that
  // matter (the root object's and the model object's).
  std::vector<Place> places_;
  bool key_is_model_ = false;
  ModelKey model_key_ = ModelKey::kOther;
  // Streaming: depth inside a skipped object or array; the pending vocab key; the
  // [a, b] merge element being read.
  size_t skip_ = 0;
  size_t key_offset_ = 0;
  size_t key_size_ = 0;
  bool in_pair_ = false;
  bool pair_ok_ = true;
  size_t pair_count_ = 0;
  size_t pair_sizes_[2] = {0, 0};
  size_t pair_offset_ = 0;
};

}  // namespace

void FlatVocabAndMerges::AddVocab(std::string_view key, int32_t id) {
  vocab.push_back({vocab_keys.size(), key.size(), id});
  vocab_keys += key;
}

void FlatVocabAndMerges::AddMerge(std::string_view left, std::string_view right) {
  merges.push_back({merge_text.size(), left.size(), right.size(), MergeForm::kPair});
  merge_text += left;
  merge_text += right;
}

void FlatVocabAndMerges::AddBadMerge(MergeForm form) {
  merges.push_back({merge_text.size(), 0, 0, form});
}

std::vector<uint32_t> FlatVocabAndMerges::SortedUniqueVocab() const {
  std::vector<uint32_t> order(vocab.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return Key(vocab[a]) < Key(vocab[b]); });
  std::vector<uint32_t> unique;
  unique.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    if (i + 1 < order.size() && Key(vocab[order[i]]) == Key(vocab[order[i + 1]])) continue;
    unique.push_back(order[i]);  // the last of a run of equal keys
  }
  return unique;
}

std::string JsonErrorText(const nlohmann::json::exception& e) {
  return EscapeForDisplay(e.what(), 2 * kDisplayLimit);
}

Result<nlohmann::json> ReadTokenizerJson(std::string_view text, const std::string& name,
                                         FlatVocabAndMerges* flat) {
  // nlohmann reports errors by exception; they are caught here and never leave the module.
  try {
    nlohmann::json root;
    TokenizerSax sax(&root, flat);
    nlohmann::json::sax_parse(text.begin(), text.end(), &sax);
    return root;
  } catch (const nlohmann::json::exception& e) {
    return Corruption(name + ": not valid JSON (" + JsonErrorText(e) + ")");
  }
}

}  // namespace trace::engine
