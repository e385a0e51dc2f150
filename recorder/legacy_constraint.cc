// Version-1 constraints (recorder/constrained.h): a set of alternatives, each a sequence of
// segments: literal text or a choice among strings (token tries over the candidates'
// tokenizations), a JSON string (printable ASCII, bounded length, closed by '"'), or a
// JSON integer (bounded digits). What `trace record` wrote into constraint_json before
// spec version 2; kept so those runs replay through the same masks, and used for
// guided_choice.
#include "recorder/constrained.h"

#include <algorithm>
#include <set>

namespace trace::recorder {
namespace {

using nlohmann::json;

constexpr int32_t kMaxStringBytes = 40;
constexpr int32_t kMaxIntegerDigits = 9;

bool IsContentByte(unsigned char c) {
  return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\';
}

// A trie over token sequences; node 0 of each trie is its root.
struct TrieNode {
  std::vector<std::pair<int32_t, int32_t>> children;  // (token, node), sorted by token
  int32_t terminal = -1;  // >= 0: a candidate ends here (the value is its index)
};

struct Segment {
  enum Kind { kTrie, kString, kInteger } kind = kTrie;
  int32_t trie_root = 0;  // kTrie: index into nodes_
  int32_t max_len = 0;    // kString: bytes; kInteger: digits
};

// One piece of a grammar under construction: literal text, a choice, or a value.
struct Piece {
  Segment::Kind kind;
  std::vector<std::string> choices;  // kTrie: the candidate texts (one for a literal)
  int32_t max_len = 0;               // kString / kInteger
};

class ConstraintImpl : public Constraint {
 public:
  ConstraintImpl(const engine::Tokenizer& tokenizer, const TokenClasses& classes)
      : tokenizer_(tokenizer), classes_(classes) {}

  // Root trie over the alternatives' first pieces, then each alternative's segments.
  Status Build(const std::vector<std::vector<Piece>>& alternatives, int32_t end_token) {
    root_ = NewNode();
    for (size_t a = 0; a < alternatives.size(); ++a) {
      const auto& pieces = alternatives[a];
      if (pieces.empty() || pieces[0].kind != Segment::kTrie || pieces[0].choices.size() != 1) {
        return Internal("constraint alternative " + std::to_string(a) +
                        " must start with literal text");
      }
      std::vector<int32_t> ids = tokenizer_.Encode(pieces[0].choices[0]);
      if (ids.empty()) return InvalidArgument("constraint: empty alternative");
      int32_t node = Insert(root_, ids);
      if (nodes_[node].terminal >= 0) {
        return InvalidArgument("constraint: duplicate alternative \"" + pieces[0].choices[0] +
                               "\"");
      }
      nodes_[node].terminal = static_cast<int32_t>(a);
      std::vector<Segment> segs;
      for (size_t i = 1; i < pieces.size(); ++i) {
        Segment s;
        s.kind = pieces[i].kind;
        s.max_len = pieces[i].max_len;
        if (s.kind == Segment::kTrie) {
          s.trie_root = NewNode();
          for (size_t c = 0; c < pieces[i].choices.size(); ++c) {
            std::vector<int32_t> cids = tokenizer_.Encode(pieces[i].choices[c]);
            if (cids.empty()) return InvalidArgument("constraint: empty choice");
            nodes_[Insert(s.trie_root, cids)].terminal = static_cast<int32_t>(c);
          }
        }
        segs.push_back(s);
      }
      Segment end;
      end.trie_root = NewNode();
      nodes_[Insert(end.trie_root, std::vector<int32_t>{end_token})].terminal = 0;
      segs.push_back(end);
      alts_.push_back(std::move(segs));
    }
    node_ = root_;
    return Status::Ok();
  }

  void AllowedMask(std::vector<uint8_t>* mask) override {
    mask->assign(classes_.vocab_size(), 0);
    if (done_) return;
    if (alt_ < 0) {
      AddTrie(node_, mask);
      if (nodes_[node_].terminal >= 0) AddStart(nodes_[node_].terminal, 0, mask);
      return;
    }
    const Segment& s = alts_[alt_][seg_];
    switch (s.kind) {
      case Segment::kTrie:
        AddTrie(node_, mask);
        if (nodes_[node_].terminal >= 0) AddStart(alt_, seg_ + 1, mask);
        break;
      case Segment::kString:
        AddString(len_, s.max_len, mask);
        break;
      case Segment::kInteger:
        AddInteger(len_, s.max_len, mask);
        if (len_ > 0) AddStart(alt_, seg_ + 1, mask);
        break;
    }
  }

  Status Advance(int32_t token) override {
    if (done_ || token < 0 || token >= classes_.vocab_size()) return Reject(token);
    if (alt_ < 0) {
      if (int32_t child = Child(node_, token); child >= 0) {
        node_ = child;
        if (nodes_[node_].terminal >= 0 && nodes_[node_].children.empty()) {
          EnterSegment(nodes_[node_].terminal, 0);
        }
        return Status::Ok();
      }
      if (nodes_[node_].terminal >= 0) {
        EnterSegment(nodes_[node_].terminal, 0);
        return Advance(token);
      }
      return Reject(token);
    }
    const Segment& s = alts_[alt_][seg_];
    switch (s.kind) {
      case Segment::kTrie:
        if (int32_t child = Child(node_, token); child >= 0) {
          node_ = child;
          if (nodes_[node_].terminal >= 0 && nodes_[node_].children.empty()) {
            EnterSegment(alt_, seg_ + 1);
          }
          return Status::Ok();
        }
        if (nodes_[node_].terminal >= 0) {
          EnterSegment(alt_, seg_ + 1);
          return Advance(token);
        }
        return Reject(token);
      case Segment::kString:
        if (classes_.IsStringContent(token) && len_ + classes_.ByteLength(token) <= s.max_len) {
          len_ += classes_.ByteLength(token);
          return Status::Ok();
        }
        if (classes_.IsStringClose(token) && len_ + classes_.ByteLength(token) - 1 <= s.max_len) {
          EnterSegment(alt_, seg_ + 1);
          return Status::Ok();
        }
        return Reject(token);
      case Segment::kInteger:
        if (IntegerAllows(len_, s.max_len, token)) {
          len_ += classes_.ByteLength(token);
          if (classes_.StartsWithZero(token) && len_ == 1) zero_ = true;
          return Status::Ok();
        }
        if (len_ > 0) {
          EnterSegment(alt_, seg_ + 1);
          return Advance(token);
        }
        return Reject(token);
    }
    return Reject(token);
  }

  bool Done() const override { return done_; }

 private:
  int32_t NewNode() {
    nodes_.emplace_back();
    return static_cast<int32_t>(nodes_.size() - 1);
  }

  int32_t Insert(int32_t root, const std::vector<int32_t>& ids) {
    int32_t node = root;
    for (int32_t id : ids) {
      int32_t next = Child(node, id);
      if (next < 0) {
        next = NewNode();
        auto& ch = nodes_[node].children;
        ch.insert(std::lower_bound(ch.begin(), ch.end(), std::make_pair(id, int32_t{-1})),
                  {id, next});
      }
      node = next;
    }
    return node;
  }

  int32_t Child(int32_t node, int32_t token) const {
    const auto& ch = nodes_[node].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(token, int32_t{-1}));
    return it != ch.end() && it->first == token ? it->second : -1;
  }

  void EnterSegment(int32_t alt, size_t seg) {
    alt_ = alt;
    seg_ = seg;
    len_ = 0;
    zero_ = false;
    if (seg_ >= alts_[alt_].size()) {
      done_ = true;
      return;
    }
    node_ = alts_[alt_][seg_].trie_root;
  }

  void AddTrie(int32_t node, std::vector<uint8_t>* mask) const {
    for (const auto& [id, child] : nodes_[node].children) (*mask)[id] = 1;
  }

  // Tokens that may start segment `seg` of `alt`.
  void AddStart(int32_t alt, size_t seg, std::vector<uint8_t>* mask) const {
    if (seg >= alts_[alt].size()) return;
    const Segment& s = alts_[alt][seg];
    if (s.kind == Segment::kTrie) {
      AddTrie(s.trie_root, mask);
    } else if (s.kind == Segment::kString) {
      AddString(0, s.max_len, mask);
    } else {
      AddInteger(0, s.max_len, mask);
    }
  }

  void AddString(int32_t len, int32_t max_len, std::vector<uint8_t>* mask) const {
    for (int32_t id = 0; id < classes_.vocab_size(); ++id) {
      int32_t n = classes_.ByteLength(id);
      if ((classes_.IsStringContent(id) && len + n <= max_len) ||
          (classes_.IsStringClose(id) && len + n - 1 <= max_len)) {
        (*mask)[id] = 1;
      }
    }
  }

  bool IntegerAllows(int32_t len, int32_t max_digits, int32_t id) const {
    if (!classes_.IsDigits(id) || zero_) return false;
    int32_t n = classes_.ByteLength(id);
    if (len + n > max_digits) return false;
    // JSON: no leading zeros ("0" alone is fine).
    if (len == 0 && classes_.StartsWithZero(id) && n > 1) return false;
    return true;
  }

  void AddInteger(int32_t len, int32_t max_digits, std::vector<uint8_t>* mask) const {
    for (int32_t id = 0; id < classes_.vocab_size(); ++id) {
      if (IntegerAllows(len, max_digits, id)) (*mask)[id] = 1;
    }
  }

  Status Reject(int32_t token) const {
    return Internal("constrained decoding: token " + std::to_string(token) +
                    " is not allowed by the constraint");
  }

  const engine::Tokenizer& tokenizer_;
  const TokenClasses& classes_;
  std::vector<TrieNode> nodes_;
  std::vector<std::vector<Segment>> alts_;
  int32_t root_ = 0;
  // State: in the root trie while alt_ < 0, else segment seg_ of alternative alt_.
  int32_t alt_ = -1;
  size_t seg_ = 0;
  int32_t node_ = 0;
  int32_t len_ = 0;    // bytes (string) or digits (integer) produced so far
  bool zero_ = false;  // the integer is "0": nothing may follow
  bool done_ = false;
};

// Appends pieces for one JSON value of `schema`; literal text goes into `*pending`.
void AppendValue(const json& schema, std::string* pending, std::vector<Piece>* pieces) {
  auto flush = [&] {
    if (!pending->empty()) {
      pieces->push_back({Segment::kTrie, {*pending}});
      pending->clear();
    }
  };
  std::string type = schema.is_object() && schema.contains("type") && schema["type"].is_string()
                         ? schema["type"].get<std::string>()
                         : "string";
  if (schema.is_object() && schema.contains("enum") && schema["enum"].is_array() &&
      !schema["enum"].empty()) {
    std::vector<std::string> choices;
    std::set<std::string> seen;
    for (const json& v : schema["enum"]) {
      std::string text = v.dump();
      if (seen.insert(text).second) choices.push_back(text);
    }
    flush();
    pieces->push_back({Segment::kTrie, choices});
  } else if (type == "integer" || type == "number") {
    // As many digits as "maximum" has (a small range makes the model pick real ids).
    int32_t digits = kMaxIntegerDigits;
    if (schema.contains("maximum") && schema["maximum"].is_number() &&
        schema["maximum"].get<double>() >= 0 && schema["maximum"].get<double>() < 1e9) {
      digits = static_cast<int32_t>(
          std::to_string(static_cast<int64_t>(schema["maximum"].get<double>())).size());
    }
    flush();
    pieces->push_back({Segment::kInteger, {}, digits});
  } else if (type == "boolean") {
    flush();
    pieces->push_back({Segment::kTrie, {"true", "false"}});
  } else if (type == "object") {
    *pending += "{}";
  } else if (type == "array") {
    *pending += "[]";
  } else if (type == "null") {
    *pending += "null";
  } else {
    int32_t max_bytes = kMaxStringBytes;
    if (schema.is_object() && schema.contains("maxLength") &&
        schema["maxLength"].is_number_integer() && schema["maxLength"].get<int64_t>() > 0) {
      max_bytes = static_cast<int32_t>(
          std::min<int64_t>(schema["maxLength"].get<int64_t>(), kMaxStringBytes));
    }
    *pending += "\"";
    flush();
    pieces->push_back({Segment::kString, {}, max_bytes});
  }
}

}  // namespace

TokenClasses::TokenClasses(const engine::Tokenizer& tokenizer) {
  int32_t n = tokenizer.vocab_size();
  flags_.assign(n, 0);
  lengths_.assign(n, 0);
  for (int32_t id = 0; id < n; ++id) {
    if (tokenizer.IsSpecial(id)) continue;
    std::string b = tokenizer.TokenBytes(id);
    lengths_[id] = static_cast<int32_t>(b.size());
    if (b.empty()) continue;
    bool content = std::all_of(b.begin(), b.end(),
                               [](char c) { return IsContentByte(static_cast<unsigned char>(c)); });
    if (content) flags_[id] |= kStringContent;
    if (b.back() == '"' && std::all_of(b.begin(), b.end() - 1, [](char c) {
          return IsContentByte(static_cast<unsigned char>(c));
        })) {
      flags_[id] |= kStringClose;
    }
    if (std::all_of(b.begin(), b.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      flags_[id] |= kDigits;
      if (b[0] == '0') flags_[id] |= kLeadingZero;
    }
  }
}

Result<std::unique_ptr<Constraint>> Constraint::Create(const json& spec,
                                                       const engine::Tokenizer& tokenizer,
                                                       const TokenClasses& classes,
                                                       int32_t end_token) {
  if (!spec.is_object() || !spec.contains("kind") || !spec["kind"].is_string()) {
    return InvalidArgument("constraint spec: 'kind' must be a string");
  }
  std::string kind = spec["kind"].get<std::string>();
  std::vector<std::vector<Piece>> alternatives;
  if (kind == "guided_choice") {
    if (!spec.contains("choices") || !spec["choices"].is_array() || spec["choices"].empty()) {
      return InvalidArgument("constraint spec: 'choices' must be a non-empty array");
    }
    std::set<std::string> seen;
    for (const json& c : spec["choices"]) {
      if (!c.is_string() || c.get<std::string>().empty()) {
        return InvalidArgument("constraint spec: 'choices' entries must be non-empty strings");
      }
      if (seen.insert(c.get<std::string>()).second) {
        alternatives.push_back({{Segment::kTrie, {c.get<std::string>()}}});
      }
    }
  } else if (kind == "tool_call") {
    if (!spec.contains("tools") || !spec["tools"].is_array() || spec["tools"].empty()) {
      return InvalidArgument("constraint spec: 'tools' must be a non-empty array");
    }
    for (const json& tool : spec["tools"]) {
      if (!tool.is_object() || !tool.contains("name") || !tool["name"].is_string()) {
        return InvalidArgument("constraint spec: each tool needs a string 'name'");
      }
      std::string pending =
          "<tool_call>\n{\"name\": " + json(tool["name"]).dump() + ", \"arguments\": {";
      std::vector<Piece> pieces;
      const json& params = tool.contains("parameters") ? tool["parameters"] : json::object();
      if (params.is_object() && params.contains("properties") && params["properties"].is_object()) {
        bool first = true;
        // Properties in key order (nlohmann::json keeps objects sorted): deterministic.
        for (const auto& [key, schema] : params["properties"].items()) {
          if (!first) pending += ", ";
          first = false;
          pending += json(key).dump() + ": ";
          AppendValue(schema, &pending, &pieces);
        }
      }
      pending += "}}\n</tool_call>";
      pieces.push_back({Segment::kTrie, {pending}});
      // The first piece must be literal text: the prefix up to the first value.
      alternatives.push_back(std::move(pieces));
    }
  } else {
    return InvalidArgument("constraint spec: unknown kind \"" + kind + "\"");
  }
  auto impl = std::make_unique<ConstraintImpl>(tokenizer, classes);
  TRACE_RETURN_IF_ERROR(impl->Build(alternatives, end_token));
  return std::unique_ptr<Constraint>(std::move(impl));
}

json ToolCallConstraintSpec(const json& tools_for_template, const std::string& only_name) {
  json tools = json::array();
  if (tools_for_template.is_array()) {
    for (const json& t : tools_for_template) {
      const json& fn = t["function"];
      if (!only_name.empty() && fn["name"] != only_name) continue;
      tools.push_back(
          {{"name", fn["name"]},
           {"parameters", fn.contains("parameters") ? fn["parameters"] : json::object()}});
    }
  }
  return {{"kind", "tool_call"}, {"tools", tools}};
}

json GuidedChoiceSpec(const std::vector<std::string>& choices) {
  return {{"kind", "guided_choice"}, {"choices", choices}};
}

}  // namespace trace::recorder
