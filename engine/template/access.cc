// The Renderer's attribute access, item access and slicing, following jinja2's sandbox
// (sandbox.py getattr / getitem): a dict, str or list exposes Python's methods as attributes
// (HasMethod: the method tables of methods.cc), and calling one that would change it fails.
#include <cstdint>
#include <string>
#include <vector>

#include "base/escape.h"
#include "engine/template/renderer.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {

namespace {

// jinja2's object description in "has no attribute" messages: 'dict object'.
std::string ObjectName(const Value& v) {
  return std::string(KindName(v)) + " object";
}

// Python's sequence index normalisation: -1 is the last element.
bool NormalizeIndex(int64_t* index, size_t size) {
  if (*index < 0) *index += static_cast<int64_t>(size);
  return *index >= 0 && *index < static_cast<int64_t>(size);
}

// Python slice semantics (PySlice_AdjustIndices).
std::vector<size_t> SliceIndices(size_t size, const Value& start_v, const Value& stop_v,
                                 const Value& step_v, Status* status) {
  std::vector<size_t> out;
  int64_t n = static_cast<int64_t>(size);
  int64_t step = 1;
  if (!step_v.is_none() && !step_v.is_undefined()) {
    if (!step_v.is_integral()) {
      *status = TypeError("slice indices must be integers or None");
      return out;
    }
    step = step_v.as_int();
    if (step == 0) {
      *status = InvalidArgument("slice step cannot be zero");
      return out;
    }
  }
  auto get = [&](const Value& v, int64_t dflt, bool* ok) -> int64_t {
    if (v.is_none() || v.is_undefined()) return dflt;
    if (!v.is_integral()) {
      *ok = false;
      return 0;
    }
    return v.as_int();
  };
  bool ok = true;
  int64_t start = get(start_v, step < 0 ? n - 1 : 0, &ok);
  int64_t stop = get(stop_v, step < 0 ? -n - 1 : n, &ok);
  if (!ok) {
    *status = TypeError("slice indices must be integers or None");
    return out;
  }
  auto adjust = [&](int64_t v, bool is_start) {
    if (v < 0) {
      v += n;
      if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= n) {
      v = step < 0 ? n - 1 : n;
    }
    (void)is_start;
    return v;
  };
  if (!start_v.is_none() && !start_v.is_undefined()) start = adjust(start, true);
  if (!stop_v.is_none() && !stop_v.is_undefined()) {
    stop = adjust(stop, false);
  } else if (step < 0) {
    stop = -1;
  }
  if (step > 0) {
    for (int64_t i = start; i < stop; i += step) out.push_back(static_cast<size_t>(i));
  } else {
    for (int64_t i = start; i > stop; i += step) out.push_back(static_cast<size_t>(i));
  }
  return out;
}

}  // namespace

Result<Value> Renderer::GetAttr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      return UndefinedError(obj);
    case Kind::kDict:
      if (HasMethod(Kind::kDict, name)) return BoundMethod(obj, name);
      if (const Value* v = obj.dict()->Find(name)) return *v;
      break;
    case Kind::kNamespace:
      if (const Value* v = obj.dict()->Find(name)) return *v;
      break;
    case Kind::kString:
      if (HasMethod(Kind::kString, name)) return BoundMethod(obj, name);
      break;
    case Kind::kList:
      if (HasMethod(Kind::kList, name)) return BoundMethod(obj, name);
      break;
    default:
      break;
  }
  return Value::Undefined(Quote(ObjectName(obj)) + " has no attribute " + Quote(name));
}

Result<Value> Renderer::GetItem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      return UndefinedError(obj);
    case Kind::kDict:
      if (key.is_string()) {
        if (const Value* v = obj.dict()->Find(key.str())) return *v;
        if (HasMethod(Kind::kDict, key.str())) return BoundMethod(obj, key.str());
      }
      break;
    case Kind::kNamespace:
      if (key.is_string()) return GetAttr(obj, key.str());
      break;
    case Kind::kList:
      if (key.is_integral()) {
        int64_t i = key.as_int();
        if (NormalizeIndex(&i, obj.items().size())) return obj.items()[i];
      } else if (key.is_string()) {
        return GetAttr(obj, key.str());
      }
      break;
    case Kind::kString:
      if (key.is_integral()) {
        auto cps = DecodeUtf8(obj.str());
        int64_t i = key.as_int();
        if (NormalizeIndex(&i, cps.size())) {
          std::string one;
          AppendUtf8(one, cps[i]);
          return Value::Str(one);
        }
      } else if (key.is_string()) {
        return GetAttr(obj, key.str());
      }
      break;
    default:
      break;
  }
  if (key.is_string()) {
    return Value::Undefined(Quote(ObjectName(obj)) + " has no attribute " + Quote(key.str()));
  }
  return Value::Undefined(Quote(ObjectName(obj)) + " has no element " +
                          EscapeForDisplay(ToPyRepr(key)));
}

Result<Value> Renderer::Slice(const Value& obj, const Value& start, const Value& stop,
                              const Value& step) {
  Status st;
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_list()) {
    auto idx = SliceIndices(obj.items().size(), start, stop, step, &st);
    if (!st.ok()) return st;
    std::vector<Value> items;
    for (size_t i : idx) items.push_back(obj.items()[i]);
    return Value::MakeList(std::move(items), obj.is_tuple());
  }
  if (obj.is_string()) {
    auto cps = DecodeUtf8(obj.str());
    auto idx = SliceIndices(cps.size(), start, stop, step, &st);
    if (!st.ok()) return st;
    std::string out;
    for (size_t i : idx) AppendUtf8(out, cps[i]);
    return Value::Str(std::move(out));
  }
  return Value::Undefined(Quote(ObjectName(obj)) + " is not subscriptable");
}

}  // namespace trace::engine::tmpl
