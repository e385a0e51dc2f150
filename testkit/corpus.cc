// Deterministic tokenizer corpus (see corpus.h). Only long-assigned code points are used
// (nothing newer than Unicode 13), so ICU in node, PCRE2 and utf8proc agree on their
// properties.
#include "testkit/corpus.h"

#include <array>
#include <string_view>

#include "base/splitmix64.h"

namespace trace::engine::testing {
namespace {

// base/splitmix64.h, with the draws the corpus makes.
class Rng : public SplitMix64 {
 public:
  using SplitMix64::SplitMix64;
  bool Chance(int percent) { return Below(100) < static_cast<size_t>(percent); }
  template <typename T, size_t N>
  const T& Pick(const T (&items)[N]) {
    return items[Below(N)];
  }
};

void AppendCodepoint(std::string* s, uint32_t cp) {
  if (cp < 0x80) {
    s->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

const std::string_view kWords[] = {"the",
                                   "of",
                                   "and",
                                   "to",
                                   "in",
                                   "is",
                                   "that",
                                   "for",
                                   "it",
                                   "as",
                                   "was",
                                   "with",
                                   "be",
                                   "by",
                                   "on",
                                   "not",
                                   "he",
                                   "this",
                                   "are",
                                   "or",
                                   "his",
                                   "from",
                                   "at",
                                   "which",
                                   "but",
                                   "have",
                                   "an",
                                   "had",
                                   "they",
                                   "you",
                                   "were",
                                   "their",
                                   "one",
                                   "all",
                                   "we",
                                   "can",
                                   "her",
                                   "has",
                                   "there",
                                   "been",
                                   "if",
                                   "more",
                                   "when",
                                   "will",
                                   "would",
                                   "who",
                                   "so",
                                   "no",
                                   "record",
                                   "replay",
                                   "agent",
                                   "model",
                                   "token",
                                   "deterministic",
                                   "kernel",
                                   "tokenizer",
                                   "Transformer",
                                   "language",
                                   "inference",
                                   "batch",
                                   "sampler",
                                   "logits",
                                   "Hello",
                                   "World",
                                   "OpenAI",
                                   "Qwen",
                                   "Llama",
                                   "GPU",
                                   "CPU",
                                   "internationalization",
                                   "antidisestablishmentarianism",
                                   "naïve",
                                   "café",
                                   "résumé",
                                   "coöperate",
                                   "Zürich",
                                   "São",
                                   "Paulo",
                                   "façade",
                                   "über",
                                   "JSON",
                                   "HTTP",
                                   "API",
                                   "UTF-8",
                                   "e-mail",
                                   "state-of-the-art",
                                   "co-op",
                                   "well-known",
                                   "x86_64",
                                   "README",
                                   "TODO",
                                   "FIXME",
                                   "iPhone",
                                   "McDonald",
                                   "O'Neil",
                                   "rock'n'roll",
                                   "quickly",
                                   "brown"};

const std::string_view kContractions[] = {
    "don't", "I'm",   "we'll", "they've", "she'd", "it's",  "IT'S",    "You'RE",
    "can't", "won't", "I'D",   "We'Ve",   "he'LL", "'s",    "'t",      "'re",
    "''",    "'",     "y'all", "ma'am",   "'m'",   "'ll'd", "o'clock", "rock 'n' roll"};

const std::string_view kPunct[] = {".", ",", "!", "?", ";", ":", "...", " -", "—", "\""};

const std::string_view kCode[] = {
    "int main(int argc, char** argv) {\n  return 0;\n}\n",
    "def f(x):\n\tif x > 0:\n\t\treturn x ** 2\n\treturn -x\n",
    "const add = (a, b) => a + b; // sum\n",
    "for (size_t i = 0; i < n; ++i) { sum += v[i] * w[i]; }",
    "    self.assertEqual(result, {'a': 1, \"b\": [1, 2, 3]})\n",
    "#include <vector>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;\n",
    "if (x != nullptr && *x == '\\n') { x++; }\r\n",
    "fn main() -> Result<(), Box<dyn Error>> { println!(\"{}\", 42); Ok(()) }",
    "<div class=\"row\"><span>&amp; &lt;tag&gt;</span></div>\n",
    "git commit -m \"fix: handle CRLF\" && make -j2 2>&1 | tee log.txt",
    "{\"ids\": [1, 2, 3], \"pieces\": [\"a\", \"b\"], \"ok\": true}\n",
    "    }\n  }\n}\n\n\n",
    "x = [i for i in range(10) if i % 2 == 0]  # evens\n",
    "$ echo $HOME/.config/*.json ~user @decorator 100% ^_^ `code`",
    "a<<=2; b>>=3; c||=d; e&&=f; g?\?=h; i**=j; k//=l; m->n; o::p"};

const std::string_view kKoreanWords[] = {
    "안녕하세요", "감사합니다", "한국어", "토큰화", "모델", "재현",   "기록",   "서울",
    "프로그래밍", "인공지능",   "데이터", "사람",   "오늘", "날씨가", "좋네요", "했습니다"};

const std::string_view kChineseWords[] = {
    "你好",     "世界", "模型", "分词器", "记录", "回放", "确定性",         "北京",
    "人工智能", "数据", "我们", "今天",   "天气", "很好", "中华人民共和国", "编程"};

const std::string_view kJapaneseWords[] = {
    "こんにちは", "ありがとう", "日本語", "トークン", "東京", "カタカナ",       "ひらがな", "漢字",
    "記録",       "再生",       "モデル", "です",     "ます", "コンピューター", "ラーメン", "ｶﾀｶﾅ"};

const std::string_view kEmoji[] = {"😀",
                                   "👍",
                                   "👍🏽",
                                   "👨‍👩‍👧‍👦",
                                   "🏳️‍🌈",
                                   "🇯🇵",
                                   "🇺🇸",
                                   "1️⃣",
                                   "❤️",
                                   "🧑‍💻",
                                   "👩🏾‍🚀",
                                   "🤷‍♂️",
                                   "🐱",
                                   "🎉",
                                   "✨",
                                   "🔥",
                                   "💯",
                                   "🙏🏻",
                                   "👁️‍🗨️",
                                   "🏴‍☠️",
                                   "☕",
                                   "©️",
                                   "™",
                                   "🥲"};

const std::string_view kSpecial[] = {"<|im_start|>",
                                     "<|im_end|>",
                                     "<|endoftext|>",
                                     "<think>",
                                     "</think>",
                                     "<tool_call>",
                                     "</tool_call>",
                                     "<|im_start|",
                                     "<|im_end",
                                     "<|vision_pad|>",
                                     "<|fim_prefix|>",
                                     "<tool_response>",
                                     "</tool_response>",
                                     "<|box_start|>",
                                     "<|",
                                     "|>"};

const std::string_view kSpaces[] = {" ",      "  ",     "\t",     "\n",       "\r\n",
                                    "\n\n",   " \n",    "\t\t",   "   \n\t ", "\r",
                                    "\u00A0", "\u3000", "\u2028", "\u2003"};

// Base letters and combining marks, to produce decomposed text NFC will compose.
const uint32_t kBases[] = {'a', 'e', 'i', 'o', 'u', 'A', 'E', 'O', 'n', 'c', 's', 'z'};
const uint32_t kMarks[] = {0x0300, 0x0301, 0x0302, 0x0303, 0x0308,
                           0x0323, 0x0327, 0x030C, 0x0307, 0x031B};

std::string English(Rng& rng, size_t words) {
  std::string s;
  for (size_t i = 0; i < words; ++i) {
    if (i > 0) s += ' ';
    std::string w(rng.Chance(8) ? rng.Pick(kContractions) : rng.Pick(kWords));
    if (i == 0 && !w.empty() && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 32);
    s += w;
    if (rng.Chance(12)) s += rng.Pick(kPunct);
  }
  s += '.';
  return s;
}

std::string Numbers(Rng& rng) {
  std::string s;
  switch (rng.Below(6)) {
    case 0:
      for (size_t i = 0, n = 1 + rng.Below(40); i < n; ++i)
        s += static_cast<char>('0' + rng.Below(10));
      break;
    case 1:
      s = std::to_string(rng.Below(1000000)) + "," + std::to_string(100 + rng.Below(900)) + "." +
          std::to_string(rng.Below(100));
      break;
    case 2:
      s = "+1 (";
      s += std::to_string(200 + rng.Below(800));
      s += ") 555-";
      s += std::to_string(1000 + rng.Below(9000));
      break;
    case 3:
      s = "3.14159265358979323846264338327950288419716939937510";
      break;
    case 4:
      s = "v";
      s += std::to_string(rng.Below(10));
      s += ".";
      s += std::to_string(rng.Below(100));
      s += ".";
      s += std::to_string(rng.Below(1000));
      s += " 2026-11-29T23:";
      s += std::to_string(10 + rng.Below(50));
      break;
    default:
      s = "٣٤٥ ໑໒ १२३ ①②③ ½ ²³ 0x1F600 1e-9 -42";
      break;
  }
  return s;
}

std::string Script(Rng& rng, const std::string_view (&words)[16], uint32_t lo, uint32_t hi,
                   std::string_view sep) {
  std::string s;
  for (size_t i = 0, n = 1 + rng.Below(8); i < n; ++i) {
    if (rng.Chance(70)) {
      s += rng.Pick(words);
    } else {
      for (size_t j = 0, m = 1 + rng.Below(4); j < m; ++j) {
        AppendCodepoint(&s, static_cast<uint32_t>(lo + rng.Below(hi - lo + 1)));
      }
    }
    if (rng.Chance(40)) s += sep;
  }
  return s;
}

std::string Combining(Rng& rng) {
  std::string s;
  for (size_t i = 0, n = 1 + rng.Below(6); i < n; ++i) {
    AppendCodepoint(&s, rng.Pick(kBases));
    for (size_t j = 0, m = rng.Below(3); j < m; ++j) AppendCodepoint(&s, rng.Pick(kMarks));
    if (rng.Chance(30)) s += ' ';
  }
  // Decomposed Hangul (L V T jamo) composes to syllables under NFC.
  if (rng.Chance(40)) {
    AppendCodepoint(&s, 0x1100 + static_cast<uint32_t>(rng.Below(19)));
    AppendCodepoint(&s, 0x1161 + static_cast<uint32_t>(rng.Below(21)));
    if (rng.Chance(50)) AppendCodepoint(&s, 0x11A8 + static_cast<uint32_t>(rng.Below(27)));
  }
  if (rng.Chance(30)) s += "Ångström ﬁ Ω Å K";  // singletons and compatibility chars
  return s;
}

std::string Whitespace(Rng& rng) {
  std::string s;
  for (size_t i = 0, n = 1 + rng.Below(6); i < n; ++i) {
    s += rng.Pick(kSpaces);
    if (rng.Chance(50)) s += rng.Pick(kWords);
  }
  if (rng.Chance(20)) s += "\u0085\uFEFF x";
  return s;
}

std::string Invalid(Rng& rng) {
  static const std::string_view kBad[] = {"\xFF",
                                          "\xC3",
                                          "\xE2\x82",
                                          "\xF0\x9F\x98",
                                          "\xC0\x80",
                                          "\xED\xA0\x80",
                                          "\xF5\x80\x80\x80",
                                          "\x80\x80",
                                          "\xE0\x80\xAF",
                                          "\xF4\x90\x80\x80",
                                          "\xC3\x28",
                                          "\xFE\xFF",
                                          "\xEF\xBB\xBF",
                                          "\xF0\x80",
                                          "\xE1\x80\xC3\xA9",
                                          "\xF8\x88\x80\x80\x80"};
  std::string s;
  for (size_t i = 0, n = 1 + rng.Below(5); i < n; ++i) {
    if (rng.Chance(50)) s += rng.Pick(kWords);
    if (rng.Chance(30)) s += ' ';
    if (rng.Chance(70)) {
      s += rng.Pick(kBad);
    } else {
      for (size_t j = 0, m = 1 + rng.Below(6); j < m; ++j) {
        s += static_cast<char>(0x80 + rng.Below(128));
      }
    }
  }
  return s;
}

std::string Runs(Rng& rng) {
  static const std::string_view kUnits[] = {"a", " ", "=", "-", "\n", "ab", "😀", "\t", "0", "한"};
  std::string s;
  std::string_view unit = rng.Pick(kUnits);
  for (size_t i = 0, n = 20 + rng.Below(300); i < n; ++i) s += unit;
  if (rng.Chance(50)) s += " end";
  return s;
}

std::string Specials(Rng& rng) {
  std::string s;
  for (size_t i = 0, n = 1 + rng.Below(5); i < n; ++i) {
    s += rng.Pick(kSpecial);
    if (rng.Chance(60)) s += rng.Chance(50) ? "user\n" : English(rng, 1 + rng.Below(5));
    if (rng.Chance(30)) s += rng.Pick(kSpaces);
  }
  return s;
}

std::string Other(Rng& rng) {
  // Other long-established scripts: Greek, Cyrillic, Hebrew, Arabic, Devanagari, Thai.
  static const std::pair<uint32_t, uint32_t> kRanges[] = {{0x03B1, 0x03C9}, {0x0430, 0x044F},
                                                          {0x05D0, 0x05EA}, {0x0627, 0x064A},
                                                          {0x0915, 0x0939}, {0x0E01, 0x0E2E}};
  std::string s;
  for (size_t i = 0, n = 1 + rng.Below(5); i < n; ++i) {
    const auto& r = rng.Pick(kRanges);
    for (size_t j = 0, m = 1 + rng.Below(7); j < m; ++j) {
      AppendCodepoint(&s, static_cast<uint32_t>(r.first + rng.Below(r.second - r.first + 1)));
    }
    s += rng.Chance(80) ? " " : ", ";
  }
  return s;
}

std::string Category(Rng& rng, size_t category, bool allow_invalid) {
  switch (category) {
    case 0:
      return English(rng, 1 + rng.Below(30));
    case 1:
      return std::string(rng.Pick(kCode));
    case 2:
      return Script(rng, kKoreanWords, 0xAC00, 0xD7A3, " ");
    case 3:
      return Script(rng, kChineseWords, 0x4E00, 0x9FA5, "，");
    case 4:
      return Script(rng, kJapaneseWords, 0x3041, 0x3096, "。");
    case 5: {
      std::string s;
      for (size_t i = 0, n = 1 + rng.Below(6); i < n; ++i) {
        s += rng.Pick(kEmoji);
        if (rng.Chance(40)) s += rng.Chance(50) ? " " : std::string(rng.Pick(kWords));
      }
      return s;
    }
    case 6:
      return Combining(rng);
    case 7:
      return Whitespace(rng);
    case 8:
      return Numbers(rng);
    case 9:
      return Specials(rng);
    case 10:
      return allow_invalid ? Invalid(rng) : English(rng, 5);
    case 11:
      return Runs(rng);
    case 12:
      return Other(rng);
    default: {  // a mix of several categories
      std::string s;
      for (size_t i = 0, n = 2 + rng.Below(4); i < n; ++i) {
        s += Category(rng, rng.Below(13), allow_invalid);
        if (rng.Chance(50)) s += rng.Pick(kSpaces);
      }
      return s;
    }
  }
}

}  // namespace

std::vector<std::string> GenerateCorpus(uint64_t seed, size_t count) {
  Rng rng(seed);
  std::vector<std::string> corpus;
  corpus.reserve(count + 32);
  // Fixed cases first: the empty string and the edges each category is about.
  corpus.push_back("");
  corpus.push_back(" ");
  corpus.push_back("\n");
  corpus.push_back("<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n");
  corpus.push_back("<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"f\"}\n</tool_call>");
  corpus.push_back("\xEF\xBB\xBFhello");  // a BOM is kept
  corpus.push_back("e\xCC\x81 vs \xC3\xA9");
  corpus.push_back("12345678901234567890");
  corpus.push_back("   leading and trailing   ");
  corpus.push_back("\xFF\xFE\xFD");
  for (size_t i = 0; corpus.size() < count; ++i) {
    corpus.push_back(Category(rng, i % 14, /*allow_invalid=*/true));
  }
  return corpus;
}

std::string GenerateBenchText(const std::string& kind, size_t bytes, uint64_t seed) {
  Rng rng(seed);
  std::string text;
  text.reserve(bytes + 4096);
  size_t i = 0;
  while (text.size() < bytes) {
    if (kind == "english") {
      text += English(rng, 10 + rng.Below(60));
    } else {
      text += Category(rng, i++ % 14, /*allow_invalid=*/false);
    }
    text += rng.Chance(30) ? "\n\n" : "\n";
  }
  return text;
}

}  // namespace trace::engine::testing
