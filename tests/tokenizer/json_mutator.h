// Structure-aware mutation of JSON text for the differential loader tests: byte-level
// mutants of a tokenizer.json are almost all invalid JSON (the fuzz driver's: 99.8 %), so
// they exercise the parser's errors and little else. These mutants stay valid JSON and
// change the document's shape instead: values of every type put anywhere, keys duplicated
// (the same key twice in one object, which a DOM cannot hold, so the tree here keeps the
// members as a list), renamed, deleted, swapped, subtrees copied elsewhere, merges made of
// the document's own strings. The walk that picks where to mutate goes deep (vocab and
// merges entries) and stops early (the model's and the root's own keys) alike.
//
// Ownership: values. Thread safety: a JsonMutator is single-threaded.
// Errors: Parse returns false on text that is not valid JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace trace::engine::testing {

class JsonMutator {
 public:
  explicit JsonMutator(uint64_t seed) : rng_(seed) {}

  // Valid JSON text -> a mutated one (1 to 4 structural edits, half the time 1; 1 in 16 also gets a
  // byte edit, so that streaming positions see syntax errors too). "" when `json` is not valid.
  std::string Mutate(const std::string& json) {
    Node root;
    if (!Parse(json, &root)) return "";
    strings_.clear();
    CollectStrings(root);
    const size_t edits = Below(2) == 0 ? 1 : 1 + Below(4);
    for (size_t i = 0; i < edits; ++i) Edit(&root);
    std::string out;
    Write(root, &out);
    if (Below(16) == 0 && !out.empty()) {
      const size_t at = Below(out.size());
      switch (Below(3)) {
        case 0:
          out.resize(at);
          break;
        case 1:
          out[at] = "\"[]{},:\\0 x"[Below(11)];
          break;
        default:
          out.insert(at, 1, "\"[]{},:\\"[Below(8)]);
          break;
      }
    }
    return out;
  }

 private:
  struct Node {
    enum Kind : uint8_t { kScalar, kObject, kArray } kind = kScalar;
    std::string text;               // kScalar: its JSON text
    std::vector<std::string> keys;  // kObject: JSON text of each key (duplicates kept)
    std::vector<Node> kids;
  };

  // Builds the tree with nlohmann's SAX parser (duplicated keys survive).
  struct Builder {
    Node* root;
    std::vector<Node*> stack;
    std::string pending_key;
    using json = nlohmann::json;
    Node* Add(Node n) {
      if (stack.empty()) {
        *root = std::move(n);
        return root;
      }
      Node* top = stack.back();
      if (top->kind == Node::kObject) top->keys.push_back(pending_key);
      top->kids.push_back(std::move(n));
      return &top->kids.back();
    }
    bool Scalar(std::string text) {
      Add(Node{Node::kScalar, std::move(text), {}, {}});
      return true;
    }
    bool null() { return Scalar("null"); }
    bool boolean(bool v) { return Scalar(v ? "true" : "false"); }
    bool number_integer(json::number_integer_t v) { return Scalar(std::to_string(v)); }
    bool number_unsigned(json::number_unsigned_t v) { return Scalar(std::to_string(v)); }
    bool number_float(json::number_float_t, const json::string_t& s) { return Scalar(s); }
    bool string(json::string_t& s) { return Scalar(json(s).dump()); }
    bool binary(json::binary_t&) { return Scalar("null"); }
    bool start_object(std::size_t) {
      stack.push_back(Add(Node{Node::kObject, "", {}, {}}));
      return true;
    }
    bool start_array(std::size_t) {
      stack.push_back(Add(Node{Node::kArray, "", {}, {}}));
      return true;
    }
    bool end_object() {
      stack.pop_back();
      return true;
    }
    bool end_array() {
      stack.pop_back();
      return true;
    }
    bool key(json::string_t& k) {
      pending_key = json(k).dump();
      return true;
    }
    template <class E>
    bool parse_error(std::size_t, const std::string&, const E&) {
      return false;
    }
  };
  // (A kid vector may reallocate while children are added, but only the last child of the
  // top is ever pointed to after it was pushed, and a container's kids are complete
  // before its parent gets another child.)

  static bool Parse(const std::string& text, Node* root) {
    Builder b{root, {}, {}};
    return nlohmann::json::sax_parse(text.begin(), text.end(), &b) && b.stack.empty();
  }

  static void Write(const Node& n, std::string* out) {
    if (n.kind == Node::kScalar) {
      *out += n.text;
      return;
    }
    *out += n.kind == Node::kObject ? '{' : '[';
    for (size_t i = 0; i < n.kids.size(); ++i) {
      if (i > 0) *out += ',';
      if (n.kind == Node::kObject) *out += n.keys[i] + ':';
      Write(n.kids[i], out);
    }
    *out += n.kind == Node::kObject ? '}' : ']';
  }

  void CollectStrings(const Node& n) {
    if (n.kind == Node::kScalar) {
      if (!n.text.empty() && n.text[0] == '"') strings_.push_back(n.text);
      return;
    }
    for (const std::string& k : n.keys) strings_.push_back(k);
    for (const Node& k : n.kids) CollectStrings(k);
  }

  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }

  std::string RandomString() {
    static const char* kStrings[] = {"\"model\"",   "\"vocab\"",   "\"merges\"", "\"type\"",
                                     "\"BPE\"",     "\"a b\"",     "\"\"",       "\"x y z\"",
                                     "\"\\u0000\"", "\"\\u0120\"", "\"ab\"",     "\"a\""};
    if (!strings_.empty() && Below(2) == 0) return strings_[Below(strings_.size())];
    return kStrings[Below(std::size(kStrings))];
  }

  // A string's content (the JSON text without its quotes).
  static std::string Inner(const std::string& s) { return s.substr(1, s.size() - 2); }

  // (No id near the 16,000,000 limit: both loaders would allocate tables that large, half
  // a gigabyte per load; load_diff_test's edge cases cover the limit.)
  Node RandomValue(const Node& root) {
    static const char* kScalars[] = {"0",
                                     "1",
                                     "-1",
                                     "2",
                                     "1000",
                                     "16000001",
                                     "18446744073709551615",
                                     "9223372036854775808",
                                     "-0",
                                     "1.0",
                                     "1e2",
                                     "0.5",
                                     "null",
                                     "true",
                                     "false",
                                     "300",
                                     "7"};
    switch (Below(6)) {
      case 0:
        return Node{Node::kScalar, kScalars[Below(std::size(kScalars))], {}, {}};
      case 1:
        return Node{Node::kScalar, RandomString(), {}, {}};
      case 2: {  // a merge made of the document's strings, as a pair or as "a b"
        const std::string a = RandomString(), b = RandomString();
        if (Below(2) == 0)
          return Node{Node::kScalar, "\"" + Inner(a) + " " + Inner(b) + "\"", {}, {}};
        return Node{
            Node::kArray, "", {}, {Node{Node::kScalar, a, {}, {}}, Node{Node::kScalar, b, {}, {}}}};
      }
      case 3: {  // a copy of a subtree from anywhere (when small)
        const Node* n = Walk(const_cast<Node*>(&root), 0.5);
        if (!n->kids.empty()) {
          const Node& pick = n->kids[Below(n->kids.size())];
          std::string text;
          Write(pick, &text);
          if (text.size() < 4096) return pick;
        }
        return Node{Node::kScalar, "null", {}, {}};
      }
      case 4: {
        static const char* kShapes[] = {"[]",
                                        "{}",
                                        "[\"a\",\"b\"]",
                                        "[[\"a\"],\"b\"]",
                                        "{\"a\":1}",
                                        "[\"a\"]",
                                        "[\"a\",\"b\",\"c\"]",
                                        "[1,[2,[3]]]",
                                        "{\"vocab\":{\"a\":0},\"merges\":[]}"};
        Node n;
        Parse(kShapes[Below(std::size(kShapes))], &n);
        return n;
      }
      default:
        return Node{Node::kObject,
                    "",
                    {RandomString()},
                    {Node{Node::kScalar, std::to_string(Below(400)), {}, {}}}};
    }
  }

  // A container reached by descending from the root into random child containers, each
  // step taken with probability `go` (so both shallow and deep containers are picked).
  Node* Walk(Node* n, double go) {
    for (;;) {
      std::vector<size_t> containers;
      for (size_t i = 0; i < n->kids.size(); ++i) {
        if (n->kids[i].kind != Node::kScalar) containers.push_back(i);
      }
      if (containers.empty() || static_cast<double>(Below(1000)) >= go * 1000) return n;
      n = &n->kids[containers[Below(containers.size())]];
    }
  }

  void Edit(Node* root) {
    if (root->kind == Node::kScalar) {
      *root = RandomValue(*root);
      return;
    }
    Node* c = Walk(root, 0.75);
    const bool object = c->kind == Node::kObject;
    const size_t n = c->kids.size();
    std::string key = Below(2) == 0 && n > 0 ? c->keys.empty() ? RandomString() : c->keys[Below(n)]
                                             : RandomString();
    switch (n == 0 ? 5 : Below(6)) {
      case 0:  // replace a value
        c->kids[Below(n)] = RandomValue(*root);
        break;
      case 1: {  // duplicate a member or item (same key), before or after, maybe a new value
        const size_t i = Below(n);
        Node copy = Below(2) == 0 ? c->kids[i] : RandomValue(*root);
        const size_t at = Below(n + 1);
        if (object) c->keys.insert(c->keys.begin() + at, c->keys[i]);
        c->kids.insert(c->kids.begin() + at, std::move(copy));
        break;
      }
      case 2: {  // delete
        const size_t i = Below(n);
        if (object) c->keys.erase(c->keys.begin() + i);
        c->kids.erase(c->kids.begin() + i);
        break;
      }
      case 3:  // rename a key (to a sibling's: a duplicate; or another)
        if (object) c->keys[Below(n)] = key;
        break;
      case 4: {  // swap two
        const size_t i = Below(n), j = Below(n);
        std::swap(c->kids[i], c->kids[j]);
        if (object) std::swap(c->keys[i], c->keys[j]);
        break;
      }
      default: {  // insert
        const size_t at = Below(n + 1);
        if (object) c->keys.insert(c->keys.begin() + at, key);
        c->kids.insert(c->kids.begin() + at, RandomValue(*root));
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  std::vector<std::string> strings_;  // JSON texts of the document's strings and keys
};

}  // namespace trace::engine::testing
