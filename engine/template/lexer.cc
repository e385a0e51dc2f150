// Template lexer: jinja2's lexer rules (jinja2/lexer.py) for the configuration
// transformers uses: trim_blocks, lstrip_blocks, keep_trailing_newline=False.
#include <cctype>
#include <charconv>
#include <string>

#include "base/escape.h"
#include "engine/template/template_internal.h"

namespace trace::engine::tmpl {
namespace {

Status LexError(const std::string& origin, int line, const std::string& what) {
  return InvalidArgument("template " + origin + " line " + std::to_string(line) + ": " + what);
}

int CountNewlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Length of the Python-whitespace run starting at `pos` (UTF-8 aware).
size_t WhitespaceRun(std::string_view s, size_t pos) {
  size_t start = pos;
  while (pos < s.size()) {
    unsigned char c = s[pos];
    if (c < 0x80) {
      if (!IsPyWhitespace(c)) break;
      ++pos;
      continue;
    }
    size_t len = (c >= 0xF0) ? 4 : (c >= 0xE0) ? 3 : 2;
    if (pos + len > s.size()) break;
    auto cps = DecodeUtf8(s.substr(pos, len));
    if (cps.size() != 1 || !IsPyWhitespace(cps[0])) break;
    pos += len;
  }
  return pos - start;
}

bool AllWhitespace(std::string_view s) {
  return WhitespaceRun(s, 0) == s.size();
}

// Normalises \r\n and \r to \n and drops one trailing newline, as jinja2 does.
std::string NormalizeSource(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Decodes a Python string literal body (backslash escapes as 'unicode-escape').
Result<std::string> UnescapeString(std::string_view body, const std::string& origin, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out.push_back(c);
      continue;
    }
    char e = body[++i];
    auto hex = [&](int digits) -> Result<char32_t> {
      uint32_t v = 0;
      for (int k = 1; k <= digits; ++k) {
        if (i + k >= body.size() || !std::isxdigit(static_cast<unsigned char>(body[i + k]))) {
          return LexError(origin, line, "bad \\x/\\u escape in string literal");
        }
        char h = body[i + k];
        v = v * 16 +
            (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
      }
      i += digits;
      return static_cast<char32_t>(v);
    };
    switch (e) {
      case '\n':
        break;  // line continuation
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x': {
        TRACE_ASSIGN_OR_RETURN(char32_t cp, hex(2));
        AppendUtf8(out, cp);
        break;
      }
      case 'u': {
        TRACE_ASSIGN_OR_RETURN(char32_t cp, hex(4));
        AppendUtf8(out, cp);
        break;
      }
      case 'U': {
        TRACE_ASSIGN_OR_RETURN(char32_t cp, hex(8));
        AppendUtf8(out, cp);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = e - '0';
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k) {
            v = v * 8 + (body[++i] - '0');
          }
          AppendUtf8(out, v);
        } else {
          // Python keeps unknown escapes as written.
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const std::string& origin) : src_(std::move(source)), origin_(origin) {}

  Result<std::vector<Token>> Run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      // Find the next tag opener.
      size_t tag = std::string::npos;
      for (size_t p = src_.find('{', pos); p != std::string::npos; p = src_.find('{', p + 1)) {
        if (p + 1 < src_.size() &&
            (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) {
          tag = p;
          break;
        }
      }
      if (tag == std::string::npos) {
        Emit(Tok::kText, src_.substr(pos));
        break;
      }
      char kind = src_[tag + 1];
      size_t after = tag + 2;
      char sign = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      std::string text = src_.substr(pos, tag - pos);
      int text_newlines = CountNewlines(text);
      if (sign == '-') {
        text = PyStrip(text, nullptr, false, true);
      } else if (sign != '+' && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            AllWhitespace(std::string_view(text).substr(l_pos))) {
          text.resize(l_pos);
        }
      }
      if (!text.empty()) Emit(Tok::kText, text);
      line_ += text_newlines;
      pos = after;

      if (kind == '#') {
        TRACE_ASSIGN_OR_RETURN(pos, SkipComment(pos, &line_starting));
        continue;
      }
      if (kind == '%') {
        // {% raw %} ... {% endraw %}
        size_t raw_end = MatchRawBegin(pos);
        if (raw_end != std::string::npos) {
          TRACE_ASSIGN_OR_RETURN(pos, LexRaw(raw_end, &line_starting));
          continue;
        }
      }
      Emit(kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, "");
      TRACE_ASSIGN_OR_RETURN(pos, LexInside(pos, kind == '{', &line_starting));
    }
    Emit(Tok::kEof, "");
    return std::move(tokens_);
  }

 private:
  void Emit(Tok type, std::string text) { tokens_.push_back(Token{type, std::move(text), line_}); }

  // After a block end: `-%}` eats all following whitespace, `+%}` nothing, `%}` one '\n'.
  size_t AfterBlockEnd(size_t pos, char sign, bool* line_starting) {
    size_t start = pos;
    if (sign == '-') {
      pos += WhitespaceRun(src_, pos);
    } else if (sign != '+' && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    line_ += CountNewlines(std::string_view(src_).substr(start, pos - start));
    *line_starting = pos > 0 && src_[pos - 1] == '\n';
    return pos;
  }

  Result<size_t> SkipComment(size_t pos, bool* line_starting) {
    size_t end = src_.find("#}", pos);
    if (end == std::string::npos) return LexError(origin_, line_, "missing end of comment tag");
    char sign = 0;
    size_t body_end = end;
    if (end > pos && (src_[end - 1] == '-' || src_[end - 1] == '+')) {
      sign = src_[end - 1];
      body_end = end - 1;
    }
    line_ += CountNewlines(std::string_view(src_).substr(pos, body_end - pos));
    // `-#}` eats following whitespace, `+#}` keeps the newline, `#}` trims one.
    return AfterBlockEnd(end + 2, sign, line_starting);
  }

  // If `pos` (just after "{%" and its sign) starts `\s*raw\s*(-%}\s*|%})`, returns the
  // position after it.
  size_t MatchRawBegin(size_t pos) {
    size_t p = pos + WhitespaceRun(src_, pos);
    if (src_.compare(p, 3, "raw") != 0) return std::string::npos;
    p += 3;
    p += WhitespaceRun(src_, p);
    if (src_.compare(p, 3, "-%}") == 0) return p + 3 + WhitespaceRun(src_, p + 3);
    if (src_.compare(p, 2, "%}") == 0) return p + 2;
    return std::string::npos;
  }

  Result<size_t> LexRaw(size_t pos, bool* line_starting) {
    size_t search = pos;
    while (true) {
      size_t open = src_.find("{%", search);
      if (open == std::string::npos)
        return LexError(origin_, line_, "missing end of raw directive");
      size_t p = open + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p += WhitespaceRun(src_, p);
      if (src_.compare(p, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      p += 6;
      p += WhitespaceRun(src_, p);
      char end_sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) end_sign = src_[p++];
      if (src_.compare(p, 2, "%}") != 0) {
        search = open + 2;
        continue;
      }
      std::string text = src_.substr(pos, open - pos);
      int newlines = CountNewlines(text);
      if (sign == '-') {
        text = PyStrip(text, nullptr, false, true);
      } else if (sign != '+') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if (l_pos > 0 && l_pos < text.size() &&
            AllWhitespace(std::string_view(text).substr(l_pos))) {
          text.resize(l_pos);
        }
      }
      if (!text.empty()) Emit(Tok::kText, text);
      line_ += newlines;
      return AfterBlockEnd(p + 2, end_sign, line_starting);
    }
  }

  // Lexes expression tokens until the matching `}}` / `%}` outside brackets.
  Result<size_t> LexInside(size_t pos, bool is_var, bool* line_starting) {
    std::vector<char> balance;
    while (true) {
      // whitespace
      size_t ws = WhitespaceRun(src_, pos);
      line_ += CountNewlines(std::string_view(src_).substr(pos, ws));
      pos += ws;
      if (pos >= src_.size()) {
        return LexError(origin_, line_,
                        is_var ? "unexpected end of template, expected '}}'"
                               : "unexpected end of template, expected '%}'");
      }
      if (balance.empty()) {
        if (is_var) {
          if (src_.compare(pos, 3, "-}}") == 0) {
            Emit(Tok::kVarEnd, "");
            pos += 3;
            size_t run = WhitespaceRun(src_, pos);
            line_ += CountNewlines(std::string_view(src_).substr(pos, run));
            pos += run;
            *line_starting = pos > 0 && src_[pos - 1] == '\n';
            return pos;
          }
          if (src_.compare(pos, 2, "}}") == 0) {
            Emit(Tok::kVarEnd, "");
            *line_starting = false;
            return pos + 2;
          }
        } else {
          if (src_.compare(pos, 3, "+%}") == 0 || src_.compare(pos, 3, "-%}") == 0) {
            Emit(Tok::kBlockEnd, "");
            return AfterBlockEnd(pos + 3, src_[pos], line_starting);
          }
          if (src_.compare(pos, 2, "%}") == 0) {
            Emit(Tok::kBlockEnd, "");
            return AfterBlockEnd(pos + 2, 0, line_starting);
          }
        }
      }
      unsigned char c = src_[pos];
      if (std::isalpha(c) || c == '_') {
        size_t end = pos;
        while (end < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) {
          ++end;
        }
        Emit(Tok::kName, src_.substr(pos, end - pos));
        pos = end;
        continue;
      }
      if (c == '\'' || c == '"') {
        size_t p = pos + 1;
        while (p < src_.size() && src_[p] != static_cast<char>(c)) {
          if (src_[p] == '\\') ++p;
          ++p;
        }
        if (p >= src_.size()) return LexError(origin_, line_, "unterminated string literal");
        std::string body = src_.substr(pos + 1, p - pos - 1);
        TRACE_ASSIGN_OR_RETURN(std::string value, UnescapeString(body, origin_, line_));
        Emit(Tok::kString, std::move(value));
        line_ += CountNewlines(body);
        pos = p + 1;
        continue;
      }
      if (std::isdigit(c)) {
        TRACE_ASSIGN_OR_RETURN(pos, LexNumber(pos));
        continue;
      }
      static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                   "/",  "%",  "~",  "<",  ">",  "=",  ".", ",", ":",
                                   "|",  "(",  ")",  "[",  "]",  "{",  "}"};
      bool matched = false;
      for (const char* op : kOps) {
        size_t n = std::char_traits<char>::length(op);
        if (src_.compare(pos, n, op) == 0) {
          std::string o(op);
          if (o == "(" || o == "[" || o == "{") {
            balance.push_back(o == "(" ? ')' : o == "[" ? ']' : '}');
          } else if (o == ")" || o == "]" || o == "}") {
            if (balance.empty()) return LexError(origin_, line_, "unexpected '" + o + "'");
            if (balance.back() != o[0]) {
              return LexError(origin_, line_,
                              "unexpected '" + o + "', expected '" + balance.back() + "'");
            }
            balance.pop_back();
          }
          Emit(Tok::kOp, o);
          pos += n;
          matched = true;
          break;
        }
      }
      if (!matched) {
        return LexError(origin_, line_,
                        std::string("unexpected character '") + static_cast<char>(c) + "'");
      }
    }
  }

  Result<size_t> LexNumber(size_t pos) {
    auto digits = [&](size_t p) {
      while (p < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[p])) ||
                                 (src_[p] == '_' && p + 1 < src_.size() &&
                                  std::isdigit(static_cast<unsigned char>(src_[p + 1]))))) {
        ++p;
      }
      return p;
    };
    size_t end = digits(pos);
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      end = digits(end + 1);
      is_float = true;
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t p = end + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) {
        end = digits(p);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = pos; i < end; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    Token t{is_float ? Tok::kFloat : Tok::kInt, text, line_};
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), t.int_value);
      if (ec != std::errc())
        return LexError(origin_, line_, "integer literal out of range: " + EscapeForDisplay(text));
    }
    tokens_.push_back(std::move(t));
    return end;
  }

  std::string src_;
  const std::string& origin_;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> Lex(std::string_view source, const std::string& origin) {
  Lexer lexer(NormalizeSource(source), origin);
  return lexer.Run();
}

}  // namespace trace::engine::tmpl
