#include "text/tokenizer_vocab.h"

namespace ggflow::text {

Result<VocabKind> vocab_kind(const std::string& model) {
  if (model == "llama") return VocabKind::Spm;
  if (model == "gpt2") return VocabKind::ByteBpe;
  if (model == "gemma4") return VocabKind::RawBpe;
  if (model == "bert") return VocabKind::Wpm;
  return make_error("tokenizer model '" + model + "' (tokenizer.ggml.model) is not supported",
                    "ggflow tokenizes 'llama' (SentencePiece), 'gpt2' (byte-level BPE), "
                    "'gemma4' and 'bert' (WordPiece) vocabularies; 't5' (Unigram) and 'rwkv' "
                    "are not implemented");
}

namespace {

// Optional scalar key: absent -> keep the default; present with another type -> error.
template <class T>
Status read_opt(const gguf::File& f, std::string_view key, std::optional<T>& out) {
  if (!f.has(key)) return {};
  auto r = f.get<T>(key);
  if (!r) return r.error();
  out = *r;
  return {};
}

Status read_id(const gguf::File& f, std::string_view key, int32_t& out) {
  if (!f.has(key)) return {};
  auto r = f.get<int64_t>(key);
  if (!r) return r.error();
  // Some converters write -1 (or 0xFFFFFFFF) for "none".
  out = (*r < 0 || *r > INT32_MAX) ? kNoToken : static_cast<int32_t>(*r);
  return {};
}

}  // namespace

Result<VocabData> read_vocab(const gguf::File& file) {
  VocabData v;
  auto model = file.get<std::string>("tokenizer.ggml.model");
  if (!model) {
    return make_error("this GGUF file has no tokenizer (tokenizer.ggml.model is missing)",
                      "use a model file converted with its vocabulary");
  }
  v.model = *model;
  auto kind = vocab_kind(v.model);
  if (!kind) return kind.error();
  if (file.has("tokenizer.ggml.pre")) {
    auto pre = file.get<std::string>("tokenizer.ggml.pre");
    if (!pre) return pre.error();
    v.pre = *pre;
  }
  auto tokens = file.get<std::vector<std::string>>("tokenizer.ggml.tokens");
  if (!tokens) return tokens.error();
  v.tokens = std::move(*tokens);
  if (v.tokens.empty() || v.tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return make_error("tokenizer.ggml.tokens has " + std::to_string(v.tokens.size()) + " entries",
                      "a vocabulary needs between 1 and 2^31-1 tokens");
  }
  const size_t n = v.tokens.size();
  if (file.has("tokenizer.ggml.scores")) {
    auto s = file.get<std::vector<float>>("tokenizer.ggml.scores");
    if (!s) return s.error();
    v.scores = std::move(*s);
  }
  if (file.has("tokenizer.ggml.token_type")) {
    auto t = file.get<std::vector<int32_t>>("tokenizer.ggml.token_type");
    if (!t) return t.error();
    v.types = std::move(*t);
  }
  if (file.has("tokenizer.ggml.merges")) {
    auto m = file.get<std::vector<std::string>>("tokenizer.ggml.merges");
    if (!m) return m.error();
    v.merges = std::move(*m);
  }
  if (!v.scores.empty() && v.scores.size() != n) {
    return make_error("tokenizer.ggml.scores has " + std::to_string(v.scores.size()) +
                          " entries for " + std::to_string(n) + " tokens",
                      "the file's vocabulary arrays disagree; re-convert the model");
  }
  if (!v.types.empty() && v.types.size() != n) {
    return make_error("tokenizer.ggml.token_type has " + std::to_string(v.types.size()) +
                          " entries for " + std::to_string(n) + " tokens",
                      "the file's vocabulary arrays disagree; re-convert the model");
  }
  if ((*kind == VocabKind::ByteBpe || *kind == VocabKind::RawBpe) && v.merges.empty()) {
    return make_error("tokenizer model '" + v.model + "' needs tokenizer.ggml.merges",
                      "the file's BPE vocabulary has no merges; re-convert the model");
  }
  struct IdKey {
    const char* key;
    int32_t* out;
  };
  const IdKey ids[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos},     {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.eot_token_id", &v.eot},     {"tokenizer.ggml.eom_token_id", &v.eom},
      {"tokenizer.ggml.padding_token_id", &v.pad}, {"tokenizer.ggml.unknown_token_id", &v.unk},
      {"tokenizer.ggml.seperator_token_id", &v.sep}, {"tokenizer.ggml.cls_token_id", &v.cls},
      {"tokenizer.ggml.fim_pre_token_id", &v.fim_pre}, {"tokenizer.ggml.fim_suf_token_id", &v.fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &v.fim_mid},
  };
  for (const auto& k : ids) {
    if (auto st = read_id(file, k.key, *k.out); !st) return st.error();
    if (*k.out != kNoToken && static_cast<size_t>(*k.out) >= n) {
      return make_error(std::string(k.key) + " = " + std::to_string(*k.out) +
                            " is outside the vocabulary of " + std::to_string(n) + " tokens",
                        "the file is damaged or was converted with the wrong vocabulary");
    }
  }
  if (auto st = read_opt(file, "tokenizer.ggml.add_bos_token", v.add_bos); !st) return st.error();
  if (auto st = read_opt(file, "tokenizer.ggml.add_eos_token", v.add_eos); !st) return st.error();
  if (auto st = read_opt(file, "tokenizer.ggml.add_sep_token", v.add_sep); !st) return st.error();
  if (auto st = read_opt(file, "tokenizer.ggml.add_space_prefix", v.add_space_prefix); !st)
    return st.error();
  return v;
}

}  // namespace ggflow::text
