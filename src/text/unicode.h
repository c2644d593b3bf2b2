// UTF-8 helpers for the tokenizer: validation with replacement, code point decode/encode, and
// the GPT-2 byte-level alphabet (each of the 256 byte values mapped to one printable code point,
// so that any byte string becomes a string of "characters" a BPE vocabulary can hold).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ggflow::text {

// Length of the UTF-8 sequence that starts with lead byte `c` (1 for continuation/invalid bytes).
inline size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

// Length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are not one (overlong
// forms, surrogates, code points above U+10FFFF and truncated sequences are all invalid).
size_t utf8_valid_len(std::string_view s, size_t i);

// Offset of the first invalid byte, or s.size() when `s` is valid UTF-8.
size_t utf8_first_invalid(std::string_view s);

// Copy of `s` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD
// (one replacement character per invalid byte). Valid input comes back unchanged.
std::string utf8_sanitize(std::string_view s);

// Number of bytes at the end of `s` that form the start of a UTF-8 sequence which is still
// incomplete (0..3). Used by the streaming detokenizer to hold back half a character.
size_t utf8_incomplete_tail(std::string_view s);

// Append the UTF-8 encoding of code point `cp` to `out`.
void utf8_append(std::string& out, uint32_t cp);

// GPT-2 byte-level alphabet: byte -> UTF-8 text of its code point, and back.
const std::array<std::string, 256>& byte_to_unicode();
// Decode one byte-level token text into raw bytes. Characters outside the alphabet (which a
// byte-level vocabulary should not contain) are copied through as their UTF-8 bytes.
std::string byte_level_decode(std::string_view text);

}  // namespace ggflow::text
