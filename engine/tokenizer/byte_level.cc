// The GPT-2 byte-level alphabet (byte_level.h).
#include "engine/tokenizer/byte_level.h"

#include <array>
#include <cstdint>

namespace trace::engine::internal {
namespace {

// GPT-2 byte <-> unicode alphabet: printable bytes stand for themselves, the others are
// shifted to U+0100 and up, so every byte has a visible one-character name.
// Only the reading direction is kept: tokens are stored as their bytes, so nothing maps a
// byte back to its character.
struct ByteAlphabet {
  // By code point (the alphabet's characters are all below U+0800, which is every code
  // point a one- or two-byte sequence can name): the byte, or -1 when not in the alphabet.
  std::array<int16_t, 0x800> codepoint_to_byte;

  ByteAlphabet() {
    codepoint_to_byte.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : 256u + next++;
      codepoint_to_byte[cp] = static_cast<uint8_t>(b);
    }
  }
};

const ByteAlphabet& Alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

}  // namespace

// Maps a byte-level token string ("Ġthe") to the bytes it stands for (" the"). Returns
// false when a character is not in the byte alphabet.
bool ByteLevelToBytes(std::string_view text, std::string* bytes) {
  const auto& map = Alphabet().codepoint_to_byte;
  bytes->clear();
  bytes->reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<uint8_t>(text[i]);
    uint32_t cp;
    if (b < 0x80) {
      cp = b;
      i += 1;
    } else if ((b & 0xE0) == 0xC0 && i + 1 < text.size()) {
      cp = ((b & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return false;  // the alphabet only uses one- and two-byte characters
    }
    const int16_t byte = map[cp];  // cp < 0x800 by construction
    if (byte < 0) return false;
    bytes->push_back(static_cast<char>(byte));
  }
  return true;
}

}  // namespace trace::engine::internal
