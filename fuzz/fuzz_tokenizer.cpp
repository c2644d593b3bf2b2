// libFuzzer target for the tokenizers: encode and decode arbitrary bytes with one vocabulary of
// each algorithm (fuzz_common.h: byte-level BPE with the GPT-2 and llama-3 pre-tokenizers,
// SentencePiece, WordPiece, raw-character BPE), loaded once.
//
// Input: byte 0 = s picks the vocabulary (s % V, V vocabularies) and the mode ((s / V) % 3);
// the bits of s / (3 V) are the mode's options. The rest is the text, or the ids (mode 2).
//   mode 0, round trip: the text made valid UTF-8 (utf8_sanitize) is encoded as untrusted text
//     (parse_special = false, no BOS/EOS), then decoded. Checked: encode succeeds, every id is in
//     [0, n_vocab), decode succeeds, and decode(encode(t)) == t for
//       - byte-level BPE: every t (the byte alphabet covers every byte; nothing is normalized);
//       - SentencePiece and raw-character BPE: every t without U+2581 (the character that
//         stands for a space inside the vocabulary decodes to a space, so a text that writes it
//         comes back with a space there). SPM's add_space_prefix "▁" is removed again by decode's
//         strip_leading_space, so leading spaces survive.
//       - WordPiece: no round trip (it lowercases, strips accents and drops spacing); only the
//         validity checks.
//   mode 1, trusted text: the raw bytes (not sanitized) with parse_special = true, BOS/EOS as the
//     vocabulary says, strict_utf8 from option bit 0. Checked: strict mode fails exactly when the
//     text is not valid UTF-8; otherwise encode succeeds, ids are in range, decode succeeds with
//     and without render_special.
//   mode 2, ids: the rest as little-endian u16 ids, each taken modulo n_vocab; option bit 0 adds
//     an id outside the vocabulary (n_vocab + x or a negative one), which decode and the stream
//     decoder must refuse with an error. Options bits 1-2 set render_special and
//     strip_leading_space. Checked: decode succeeds on in-range ids.
// In every mode, the streaming detokenizer (StreamDecoder: push each id, then finish) gives the
// same text as decode whenever decode's text is valid UTF-8 (tokenizer_stream.h's contract).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.h"
#include "text/tokenizer.h"
#include "text/tokenizer_stream.h"
#include "text/unicode.h"

using namespace ggflow;
using namespace ggflow::text;

namespace {

std::vector<Tokenizer>* g_toks = nullptr;

std::string show(std::string_view s) {
  std::string o;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      o += char(c);
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02X", c);
      o += b;
    }
  }
  return o;
}

void check_ids(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < tok.n_vocab(), "id %d outside [0, %d)", id, tok.n_vocab());
}

// Stream decoding equals decode when decode's text is valid UTF-8.
void check_stream(const Tokenizer& tok, const std::vector<int32_t>& ids, const DecodeOptions& opt) {
  auto whole = tok.decode(ids, opt);
  FUZZ_CHECK(whole.ok(), "decode of in-range ids failed: %s", whole.error().str().c_str());
  StreamDecoder sd(tok, opt);
  std::string streamed;
  for (int32_t id : ids) {
    auto piece = sd.push(id);
    FUZZ_CHECK(piece.ok(), "stream push of id %d failed: %s", id, piece.error().str().c_str());
    FUZZ_CHECK(utf8_first_invalid(*piece) == piece->size(), "stream emitted invalid UTF-8 [%s]", show(*piece).c_str());
    streamed += *piece;
  }
  streamed += sd.finish();
  if (utf8_first_invalid(*whole) == whole->size())
    FUZZ_CHECK(streamed == *whole, "stream [%s] != decode [%s]", show(streamed).c_str(), show(*whole).c_str());
}

void round_trip(const Tokenizer& tok, std::string_view raw) {
  const std::string text = utf8_sanitize(raw);
  auto ids = tok.encode(text, {.add_special = false, .parse_special = false});
  FUZZ_CHECK(ids.ok(), "encode of valid UTF-8 failed: %s", ids.error().str().c_str());
  check_ids(tok, *ids);
  auto back = tok.decode(*ids);
  FUZZ_CHECK(back.ok(), "decode failed: %s", back.error().str().c_str());
  bool exact = false;
  switch (tok.kind()) {
    case VocabKind::ByteBpe: exact = true; break;
    case VocabKind::Spm:
    case VocabKind::RawBpe: exact = text.find("\xE2\x96\x81") == std::string::npos; break;
    case VocabKind::Wpm: exact = false; break;
  }
  if (exact) FUZZ_CHECK(*back == text, "round trip [%s] -> [%s]", show(text).c_str(), show(*back).c_str());
  check_stream(tok, *ids, {});
}

void trusted(const Tokenizer& tok, std::string_view raw, unsigned opts) {
  const bool strict = opts & 1;
  auto ids = tok.encode(raw, {.add_special = true, .parse_special = true, .strict_utf8 = strict});
  const bool valid = utf8_first_invalid(raw) == raw.size();
  if (strict && !valid) {
    FUZZ_CHECK(!ids.ok(), "strict encode accepted invalid UTF-8 [%s]", show(raw).c_str());
    FUZZ_CHECK(!ids.error().what.empty(), "strict encode error without a message");
    return;
  }
  FUZZ_CHECK(ids.ok(), "encode failed: %s", ids.error().str().c_str());
  check_ids(tok, *ids);
  FUZZ_CHECK(tok.decode(*ids, {.render_special = true}).ok(), "decode (render_special) failed");
  check_stream(tok, *ids, {});
}

void decode_ids(const Tokenizer& tok, std::string_view raw, unsigned opts) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < raw.size(); i += 2)
    ids.push_back(int32_t((uint8_t(raw[i]) | uint32_t(uint8_t(raw[i + 1])) << 8) % uint32_t(tok.n_vocab())));
  const DecodeOptions opt{.render_special = bool(opts & 2), .strip_leading_space = bool(opts & 4)};
  check_stream(tok, ids, opt);
  for (int32_t id : ids) FUZZ_CHECK(tok.piece(id, opt.render_special).ok(), "piece(%d) failed", id);
  if (opts & 1) {
    const int32_t bad = raw.size() % 2 ? -1 - int32_t(uint8_t(raw.back())) : tok.n_vocab() + int32_t(raw.size());
    ids.insert(ids.begin() + ptrdiff_t(ids.size() / 2), bad);
    auto r = tok.decode(ids, opt);
    FUZZ_CHECK(!r.ok() && !r.error().what.empty(), "decode accepted id %d outside [0, %d)", bad, tok.n_vocab());
    StreamDecoder sd(tok, opt);
    FUZZ_CHECK(!sd.push(bad).ok(), "stream push accepted id %d", bad);
    FUZZ_CHECK(!tok.piece(bad).ok(), "piece accepted id %d", bad);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_toks = new std::vector<Tokenizer>();
  for (const auto& rel : fuzz::tokenizer_vocabs()) {
    const std::string path = fuzz::root() + "/" + rel;
    auto f = gguf::File::open(path);
    if (!f) fuzz::setup_failed(path + ": " + f.error().str());
    auto t = Tokenizer::from_file(*f);
    if (!t) fuzz::setup_failed(path + ": " + t.error().str());
    g_toks->push_back(std::move(*t));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const unsigned v = unsigned(g_toks->size());
  const unsigned s = data[0];
  const Tokenizer& tok = (*g_toks)[s % v];
  const unsigned mode = (s / v) % 3, opts = s / (3 * v);
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (mode) {
    case 0: round_trip(tok, rest); break;
    case 1: trusted(tok, rest, opts); break;
    default: decode_ids(tok, rest, opts); break;
  }
  return 0;
}
