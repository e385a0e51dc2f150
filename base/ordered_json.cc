#include "base/ordered_json.h"

#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trace {

namespace {

using Json = nlohmann::ordered_json;

// An object up to this many keys finds a key by scanning it (as cheap as hashing at this
// size); a larger one gets a hash index of its keys while it is open.
constexpr size_t kScanLimit = 16;

// An object's members while it is being parsed: movable pairs (ordered_map's pairs hold a
// const key, so its vector copies every key and value each time it grows) and, once there
// are many, an open-addressing index of their positions.
class MemberList {
 public:
  // The position of the member named `key`, added (with a null value) if it is new.
  size_t FindOrAdd(std::string&& key) {
    if (members_.size() < kScanLimit) {
      for (size_t i = 0; i < members_.size(); ++i) {
        if (members_[i].first == key) return i;
      }
    } else {
      if (slots_.size() < 2 * (members_.size() + 1)) Rehash();
      size_t slot = Slot(key);
      for (; slots_[slot] != kEmpty; slot = (slot + 1) & (slots_.size() - 1)) {
        if (members_[slots_[slot]].first == key) return slots_[slot];
      }
      slots_[slot] = members_.size();
    }
    members_.emplace_back(std::move(key), nullptr);
    return members_.size() - 1;
  }
  Json& ValueAt(size_t i) { return members_[i].second; }
  Json ToObject() && {
    Json object(Json::value_t::object);
    object.get_ptr<Json::object_t*>()->reserve(members_.size());
    for (auto& [key, value] : members_)
      AppendDistinctMember(object, std::move(key), std::move(value));
    return object;
  }

 private:
  static constexpr size_t kEmpty = ~size_t{0};

  size_t Slot(std::string_view key) const {
    return std::hash<std::string_view>{}(key) & (slots_.size() - 1);
  }
  void Rehash() {
    size_t size = 64;
    while (size < 4 * (members_.size() + 1)) size *= 2;
    slots_.assign(size, kEmpty);
    for (size_t i = 0; i < members_.size(); ++i) {
      size_t slot = Slot(members_[i].first);
      while (slots_[slot] != kEmpty) slot = (slot + 1) & (size - 1);
      slots_[slot] = i;
    }
  }

  std::vector<std::pair<std::string, Json>> members_;
  std::vector<size_t> slots_;  // positions in members_, a power-of-two table
};

// nlohmann's SAX interface. Each open array or object is built on its own and handed to
// its parent when it closes; a key names the member the next value fills. A repeated key
// keeps its first place and takes its last value, as nlohmann's own DOM builder does.
class OrderedBuilder {
 public:
  Json Take() { return failed_ ? Json(Json::value_t::discarded) : std::move(root_); }

  bool null() { return Put(nullptr); }
  bool boolean(bool b) { return Put(b); }
  bool number_integer(Json::number_integer_t n) { return Put(n); }
  bool number_unsigned(Json::number_unsigned_t n) { return Put(n); }
  bool number_float(Json::number_float_t d, const Json::string_t&) { return Put(d); }
  bool string(Json::string_t& s) { return Put(std::move(s)); }
  bool binary(Json::binary_t& b) { return Put(Json::binary(std::move(b))); }

  bool start_object(std::size_t) {
    open_.emplace_back();
    open_.back().is_object = true;
    return true;
  }
  bool key(Json::string_t& k) {
    Open& o = open_.back();
    o.member = o.members.FindOrAdd(std::move(k));
    return true;
  }
  bool end_object() {
    Json done = std::move(open_.back().members).ToObject();
    open_.pop_back();
    return Put(std::move(done));
  }
  bool start_array(std::size_t) {
    open_.emplace_back();
    return true;
  }
  bool end_array() {
    Json done(std::move(open_.back().elements));
    open_.pop_back();
    return Put(std::move(done));
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    failed_ = true;
    return false;
  }

 private:
  struct Open {
    bool is_object = false;
    Json::array_t elements;  // an array's
    MemberList members;      // an object's
    size_t member = 0;       // the member the next value fills
  };

  bool Put(Json value) {
    if (open_.empty()) {
      root_ = std::move(value);
    } else if (Open& o = open_.back(); o.is_object) {
      o.members.ValueAt(o.member) = std::move(value);
    } else {
      o.elements.push_back(std::move(value));
    }
    return true;
  }

  Json root_;
  std::vector<Open> open_;
  bool failed_ = false;
};

}  // namespace

void AppendDistinctMember(nlohmann::ordered_json& object, std::string key,
                          nlohmann::ordered_json value) {
  // ordered_map is a vector of (key, value) pairs; its own emplace searches it first.
  Json::object_t::Container& members = *object.get_ptr<Json::object_t*>();
  members.emplace_back(std::move(key), std::move(value));
}

nlohmann::ordered_json ParseOrderedJson(std::string_view text) {
  // nlohmann's lexer takes a NUL byte for the end of the input, so `{...}\0junk` would be
  // parsed as `{...}`. A NUL is never valid JSON (not even inside a string, where control
  // characters must be escaped), so text holding one is refused whole.
  if (!text.empty() && std::memchr(text.data(), '\0', text.size()) != nullptr) {
    return Json(Json::value_t::discarded);
  }
  OrderedBuilder builder;
  Json::sax_parse(text.begin(), text.end(), &builder, Json::input_format_t::json,
                  /*strict=*/true, /*ignore_comments=*/false);
  return builder.Take();
}

}  // namespace trace
