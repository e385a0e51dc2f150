// The Renderer's binary operators, comparisons and membership tests, with Python's
// semantics as jinja2 evaluates them (int64 instead of big ints: overflow is an error).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "engine/template/renderer.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {

namespace {

// The bytes a copy of `items` takes: a Value holds its string by value (a list or dict
// only by pointer), so copying a list of long strings copies the strings too.
size_t CopySize(const std::vector<Value>& items) {
  size_t size = items.size() * sizeof(Value);
  for (const Value& v : items) {
    if (v.is_string()) size += v.str().size();
  }
  return size;
}

}  // namespace

Result<Value> Renderer::AddAll(const Value& first, const std::vector<Value>& terms) {
  Value total = first;
  size_t i = 0;
  // The same checks as Binary's `+`, on the running size.
  if (total.is_string()) {
    std::string text = total.str();
    for (; i < terms.size() && terms[i].is_string(); ++i) {
      if (text.size() + terms[i].str().size() > MaxBuiltSize()) {
        return TooLarge("concatenation result");
      }
      text += terms[i].str();
    }
    total = Value::Str(std::move(text));
  } else if (total.is_list()) {
    std::vector<Value> items = total.items();
    size_t size = CopySize(items);
    for (; i < terms.size() && terms[i].is_list() && terms[i].is_tuple() == total.is_tuple(); ++i) {
      const size_t more = CopySize(terms[i].items());
      if (size + more > MaxBuiltSize()) return TooLarge("concatenation result");
      items.insert(items.end(), terms[i].items().begin(), terms[i].items().end());
      size += more;
    }
    total = Value::MakeList(std::move(items), total.is_tuple());
  }
  // Numbers, and the error for the first term of another kind.
  for (; i < terms.size(); ++i) {
    TRACE_ASSIGN_OR_RETURN(total, Binary("+", total, terms[i]));
  }
  return total;
}

Result<Value> Renderer::Binary(const std::string& op, const Value& l, const Value& r) {
  if (op == "~") {
    // A string side is used as it is rather than copied by ToPyStr.
    std::string a_str, b_str;
    const std::string& a = l.is_string() ? l.str() : (a_str = ToPyStr(l));
    const std::string& b = r.is_string() ? r.str() : (b_str = ToPyStr(r));
    // Each side is bounded, but a loop that feeds a result back (`s = s ~ s`) doubles it.
    if (a.size() + b.size() > MaxBuiltSize()) return TooLarge("concatenation result");
    std::string out;
    out.reserve(a.size() + b.size());
    out.append(a).append(b);
    return Value::Str(std::move(out));
  }
  if (op == "==") return Value::Bool(PyEquals(l, r));
  if (op == "!=") return Value::Bool(!PyEquals(l, r));
  if (op == "in" || op == "not in") {
    TRACE_ASSIGN_OR_RETURN(bool in, Contains(r, l));
    return Value::Bool(op == "in" ? in : !in);
  }
  if (l.is_undefined()) return UndefinedError(l);
  if (r.is_undefined()) return UndefinedError(r);
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    TRACE_ASSIGN_OR_RETURN(int c, Compare(l, r, op));
    if (op == "<") return Value::Bool(c < 0);
    if (op == ">") return Value::Bool(c > 0);
    if (op == "<=") return Value::Bool(c <= 0);
    return Value::Bool(c >= 0);
  }
  auto unsupported = [&]() {
    return TypeError("unsupported operand type(s) for " + op + ": " + Quote(KindName(l)) + " and " +
                     Quote(KindName(r)));
  };
  if (l.is_number() && r.is_number()) {
    bool ints = l.is_integral() && r.is_integral();
    if (ints && (op == "+" || op == "-" || op == "*")) {
      int64_t out;
      bool overflow = op == "+"   ? __builtin_add_overflow(l.as_int(), r.as_int(), &out)
                      : op == "-" ? __builtin_sub_overflow(l.as_int(), r.as_int(), &out)
                                  : __builtin_mul_overflow(l.as_int(), r.as_int(), &out);
      if (overflow) return IntTooLarge();
      return Value::Int(out);
    }
    if (op == "+") return Value::Float(l.as_double() + r.as_double());
    if (op == "-") return Value::Float(l.as_double() - r.as_double());
    if (op == "*") return Value::Float(l.as_double() * r.as_double());
    if (op == "/") {
      if (r.as_double() == 0) return InvalidArgument("division by zero");
      return Value::Float(l.as_double() / r.as_double());
    }
    if (op == "//" || op == "%") {
      if (ints) {
        int64_t a = l.as_int(), b = r.as_int();
        if (b == 0) return InvalidArgument("integer division or modulo by zero");
        if (a == INT64_MIN && b == -1) return IntTooLarge();
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {
          --q;
          m += b;
        }
        return Value::Int(op == "//" ? q : m);
      }
      // CPython's float_divmod.
      double a = l.as_double(), b = r.as_double();
      if (b == 0) return InvalidArgument("float division or modulo by zero");
      double m = std::fmod(a, b);
      double div = (a - m) / b;
      if (m != 0) {
        if ((b < 0) != (m < 0)) {
          m += b;
          div -= 1.0;
        }
      } else {
        m = std::copysign(0.0, b);
      }
      if (op == "%") return Value::Float(m);
      double floordiv;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, a / b);
      }
      return Value::Float(floordiv);
    }
    if (op == "**") {
      if (ints && r.as_int() >= 0) {
        int64_t result = 1, base = l.as_int(), e = r.as_int();
        while (e > 0) {  // exponentiation by squaring, refusing to overflow
          if ((e & 1) && __builtin_mul_overflow(result, base, &result)) return IntTooLarge();
          e >>= 1;
          if (e > 0 && __builtin_mul_overflow(base, base, &base)) return IntTooLarge();
        }
        return Value::Int(result);
      }
      return Value::Float(std::pow(l.as_double(), r.as_double()));
    }
    return unsupported();
  }
  if (op == "+") {
    // As `~`: a result fed back doubles each time. A list is measured as repetition's is.
    if (l.is_string() && r.is_string()) {
      if (l.str().size() + r.str().size() > MaxBuiltSize()) return TooLarge("concatenation result");
      return Value::Str(l.str() + r.str());
    }
    if (l.is_list() && r.is_list() && l.is_tuple() == r.is_tuple()) {
      if (CopySize(l.items()) + CopySize(r.items()) > MaxBuiltSize()) {
        return TooLarge("concatenation result");
      }
      std::vector<Value> items = l.items();
      items.insert(items.end(), r.items().begin(), r.items().end());
      return Value::MakeList(std::move(items), l.is_tuple());
    }
    if (l.is_string() || l.is_list()) {
      return TypeError("can only concatenate " + std::string(KindName(l)) + " (not \"" +
                       KindName(r) + "\") to " + KindName(l));
    }
    return unsupported();
  }
  if (op == "*") {
    const Value* seq = l.is_integral() ? &r : &l;
    const Value* count = l.is_integral() ? &l : &r;
    if (count->is_integral() && (seq->is_string() || seq->is_list())) {
      int64_t n = std::max<int64_t>(0, count->as_int());
      // Measured by CopySize: `["x" * 10**6] * 1000` copies the string a thousand times.
      size_t unit = seq->is_string() ? seq->str().size() : CopySize(seq->items());
      // An empty sequence repeated is empty whatever the count: `"" * 2**55` looped 2^55
      // times, a hang (template_fuzz). The size check below bounds the loop otherwise.
      if (unit == 0) n = 0;
      if (unit > 0 && static_cast<uint64_t>(n) > MaxBuiltSize() / unit) {
        return TooLarge("repetition result");
      }
      if (seq->is_string()) {
        std::string out;
        out.reserve(static_cast<size_t>(n) * unit);
        for (int64_t i = 0; i < n; ++i) out += seq->str();
        return Value::Str(std::move(out));
      }
      std::vector<Value> items;
      for (int64_t i = 0; i < n; ++i) {
        items.insert(items.end(), seq->items().begin(), seq->items().end());
      }
      return Value::MakeList(std::move(items), seq->is_tuple());
    }
  }
  if (op == "%" && l.is_string()) {
    return Unsupported("unsupported construct: printf-style string formatting with '%'");
  }
  return unsupported();
}

Result<int> Renderer::Compare(const Value& l, const Value& r, const std::string& op) {
  if (l.is_number() && r.is_number()) {
    if (l.is_integral() && r.is_integral()) {
      return l.as_int() < r.as_int() ? -1 : l.as_int() > r.as_int() ? 1 : 0;
    }
    double a = l.as_double(), b = r.as_double();
    return a < b ? -1 : a > b ? 1 : 0;
  }
  if (l.is_string() && r.is_string()) {
    int c = l.str().compare(r.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (l.is_list() && r.is_list()) {
    const auto& a = l.items();
    const auto& b = r.items();
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (PyEquals(a[i], b[i])) continue;
      return Compare(a[i], b[i], op);
    }
    return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
  }
  return TypeError(Quote(op) + " not supported between instances of " + Quote(KindName(l)) +
                   " and " + Quote(KindName(r)));
}

Result<bool> Renderer::Contains(const Value& container, const Value& needle) {
  switch (container.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (!needle.is_string()) {
        return TypeError("'in <string>' requires string as left operand, not " +
                         std::string(KindName(needle)));
      }
      return container.str().find(needle.str()) != std::string::npos;
    case Kind::kList:
      for (const auto& item : container.items()) {
        if (PyEquals(item, needle)) return true;
      }
      return false;
    case Kind::kDict:
      return needle.is_string() && container.dict()->Find(needle.str()) != nullptr;
    default:
      return TypeError("argument of type " + Quote(KindName(container)) + " is not iterable");
  }
}

}  // namespace trace::engine::tmpl
