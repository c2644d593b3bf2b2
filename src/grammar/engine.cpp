#include "grammar/engine.h"

#include <algorithm>

namespace ggflow::grammar::detail {

using Kind = Grammar::Kind;

Engine::Engine(const Grammar& g) : g_(g) {
  nodes_.push_back({0, 0, 0});  // kBottom
  nodes_.push_back({0, 0, 0});  // kAccept
  adv_off_.assign(2, -1);
  visited_.assign(64, {0, 0});
}

int64_t Engine::intern_node(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto it = node_ids_.find(key);
  if (it != node_ids_.end()) return it->second;
  const uint32_t depth = nodes_[parent].depth + 1;
  if (depth > g_.limits().max_stack_depth) return kTooDeep;
  const uint32_t id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back({pos, parent, depth});
  adv_off_.push_back(-1);
  node_ids_.emplace(key, id);
  return id;
}

bool Engine::visit(uint64_t key) {
  if ((visit_count_ + 1) * 2 > visited_.size()) {  // grow, keeping this generation's entries
    std::vector<std::pair<uint64_t, uint32_t>> old(visited_.size() * 2, {0, 0});
    old.swap(visited_);
    const size_t mask = visited_.size() - 1;
    for (const auto& [k, gen] : old) {
      if (gen != visit_gen_) continue;
      size_t h = (k * 0x9E3779B97F4A7C15ull) >> 20 & mask;
      while (visited_[h].second == visit_gen_) h = (h + 1) & mask;
      visited_[h] = {k, gen};
    }
  }
  const size_t mask = visited_.size() - 1;
  size_t h = (key * 0x9E3779B97F4A7C15ull) >> 20 & mask;
  while (visited_[h].second == visit_gen_) {
    if (visited_[h].first == key) return false;
    h = (h + 1) & mask;
  }
  visited_[h] = {key, visit_gen_};
  ++visit_count_;
  return true;
}

int32_t Engine::closure(std::vector<uint32_t>* out) {
  if (++visit_gen_ == 0) {  // the stamps wrapped: forget them all
    std::fill(visited_.begin(), visited_.end(), std::pair<uint64_t, uint32_t>{0, 0});
    visit_gen_ = 1;
  }
  visit_count_ = 0;
  const auto& el = g_.elements();
  uint32_t steps = 0;
  int32_t result = 0;
  while (!seeds_.empty() && result == 0) {
    const auto [p, par] = seeds_.back();
    seeds_.pop_back();
    if (!visit((uint64_t{p} << 32) | par)) continue;
    if (++steps > g_.limits().max_closure_steps) {
      result = kTooMuchWork;
      break;
    }
    const Grammar::Element e = el[p];
    if (e.kind == Kind::Chars) {
      const int64_t id = intern_node(p, par);
      if (id < 0) result = static_cast<int32_t>(id);
      else out->push_back(static_cast<uint32_t>(id));
    } else if (e.kind == Kind::End) {
      if (par == kBottom) out->push_back(kAccept);
      else seeds_.push_back({nodes_[par].pos, nodes_[par].parent});
    } else {
      uint32_t ret = par;  // a reference in tail position returns straight to the caller's caller
      if (el[p + 1].kind != Kind::End) {
        const int64_t id = intern_node(p + 1, par);
        if (id < 0) {
          result = static_cast<int32_t>(id);
          break;
        }
        ret = static_cast<uint32_t>(id);
      }
      for (uint32_t a : g_.rules()[e.arg].alts) seeds_.push_back({a, ret});
    }
  }
  seeds_.clear();
  work_ += steps;
  return result;
}

int32_t Engine::advance(uint32_t node) {
  if (adv_off_[node] != -1) return adv_off_[node];
  seeds_.push_back({nodes_[node].pos + 1, nodes_[node].parent});
  std::vector<uint32_t> next;
  const int32_t r = closure(&next);
  if (r < 0) {
    adv_off_[node] = r;
    return r;
  }
  std::sort(next.begin(), next.end());
  next.erase(std::unique(next.begin(), next.end()), next.end());
  const int32_t off = static_cast<int32_t>(adv_pool_.size());
  adv_pool_.push_back(static_cast<uint32_t>(next.size()));
  adv_pool_.insert(adv_pool_.end(), next.begin(), next.end());
  adv_off_[node] = off;
  return off;
}

int32_t Engine::intern_config(const std::vector<uint32_t>& stacks, const uint8_t* partial, uint8_t n_partial, uint8_t total, bool uniform) {
  static const uint8_t kZeros[3] = {0, 0, 0};
  if (uniform || !partial) partial = kZeros;  // a uniform character's bytes do not matter
  std::string key;
  key.reserve(3 + n_partial + 4 * stacks.size());
  key += static_cast<char>(n_partial);
  key += static_cast<char>(total);
  key += static_cast<char>(uniform);
  key.append(reinterpret_cast<const char*>(partial), n_partial);
  key.append(reinterpret_cast<const char*>(stacks.data()), 4 * stacks.size());
  auto [it, fresh] = config_ids_.try_emplace(std::move(key), static_cast<int32_t>(configs_.size()));
  if (fresh) {
    Config c{};
    c.off = static_cast<uint32_t>(config_pool_.size());
    c.n = static_cast<uint32_t>(stacks.size());
    std::copy(partial, partial + n_partial, c.partial);
    c.n_partial = n_partial;
    c.total = total;
    c.uniform = uniform;
    c.accept = n_partial == 0 && !stacks.empty() && stacks[0] == kAccept;  // ascending: kAccept first
    configs_.push_back(c);
    config_pool_.insert(config_pool_.end(), stacks.begin(), stacks.end());
    row_of_.push_back(-1);
    majors_.push_back({{0, 0}, kDead, false});
    major_known_.push_back(0);
  }
  return it->second;
}

int32_t Engine::start() {
  for (uint32_t a : g_.rules()[g_.root()].alts) seeds_.push_back({a, kBottom});
  std::vector<uint32_t> stacks;
  const int32_t r = closure(&stacks);
  if (r < 0) return r;
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > g_.limits().max_stacks) return kAmbiguous;
  return intern_config(stacks, nullptr, 0, 0, false);
}

// Advances the stacks of `c` whose top matches `cp` (every stack when `all`).
int32_t Engine::step_stacks(const Config& c, uint32_t cp, bool all) {
  scratch_.clear();
  for (uint32_t i = c.off; i < c.off + c.n; ++i) {
    const uint32_t s = config_pool_[i];
    if (s == kAccept || (!all && !top_set(s).contains(cp))) continue;
    ++work_;
    const int32_t off = advance(s);
    if (off < 0) return off;
    const uint32_t* p = &adv_pool_[off];
    scratch_.insert(scratch_.end(), p + 1, p + 1 + p[0]);
  }
  std::sort(scratch_.begin(), scratch_.end());
  scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
  if (scratch_.empty()) return kDead;
  if (scratch_.size() > g_.limits().max_stacks) return kAmbiguous;
  return intern_config(scratch_, nullptr, 0, 0, false);
}

namespace {
// Some member of `set` in [lo, hi] that UTF-8 can encode (not a surrogate).
bool intersects_scalar(const CodepointSet& set, uint32_t lo, uint32_t hi) {
  if (lo < 0xD800 && set.intersects(lo, std::min<uint32_t>(hi, 0xD7FF))) return true;
  return hi > 0xDFFF && set.intersects(std::max<uint32_t>(lo, 0xE000), hi);
}
}  // namespace

int32_t Engine::compute_step(int32_t cfg, uint8_t byte) {
  const Config c = configs_[cfg];  // a copy: interning may grow configs_
  uint8_t bytes[4] = {0, 0, 0, 0};
  int n, total;
  if (c.n_partial == 0) {
    if (byte < 0x80) return step_stacks(c, byte, false);
    total = utf8_length(byte);
    if (total == 0) return kDead;
    bytes[0] = byte;
    n = 1;
  } else {
    if ((byte & 0xC0) != 0x80) return kDead;
    total = c.total;
    n = c.n_partial + 1;
    if (c.uniform) {  // every stack here matches whatever the character turns out to be
      if (n == total) return step_stacks(c, 0, true);
      scratch_.assign(config_pool_.begin() + c.off, config_pool_.begin() + c.off + c.n);
      return intern_config(scratch_, nullptr, static_cast<uint8_t>(n), static_cast<uint8_t>(total), true);
    }
    std::copy(c.partial, c.partial + c.n_partial, bytes);
    bytes[c.n_partial] = byte;
    if (n == total) {
      uint32_t cp;
      if (!utf8_decode(bytes, n, &cp)) return kDead;
      return step_stacks(c, cp, false);
    }
  }
  // Half a character: the code points it can still become are [lo, hi]. Keep the stacks whose
  // top can match one; when each kept top matches all of them and UTF-8 constrains no later byte
  // (only E0 ED F0 F4 constrain the second byte), the bytes themselves no longer matter: the
  // config is "uniform", shared by every such character (one config instead of thousands).
  uint32_t lo, hi;
  if (!utf8_prefix_range(bytes, n, total, &lo, &hi)) return kDead;
  bool uniform = !(n == 1 && (bytes[0] == 0xE0 || bytes[0] == 0xED || bytes[0] == 0xF0 || bytes[0] == 0xF4));
  scratch_.clear();
  for (uint32_t i = c.off; i < c.off + c.n; ++i) {
    const uint32_t s = config_pool_[i];
    if (s == kAccept) continue;
    const CodepointSet& set = top_set(s);
    if (set.contains_range(lo, hi)) {
      scratch_.push_back(s);
    } else if (intersects_scalar(set, lo, hi)) {
      scratch_.push_back(s);
      uniform = false;
    }
  }
  if (scratch_.empty()) return kDead;
  return intern_config(scratch_, bytes, static_cast<uint8_t>(n), static_cast<uint8_t>(total), uniform);
}

int32_t Engine::ensure_row(int32_t cfg) {
  int32_t row = row_of_[cfg];
  if (row < 0) {
    if (rows_.size() / 256 >= std::max<uint32_t>(g_.limits().max_step_rows, 1)) {  // a cache: drop all, refill
      rows_.clear();
      std::fill(row_of_.begin(), row_of_.end(), -1);
      ++row_epoch_;
    }
    row = static_cast<int32_t>(rows_.size() / 256);
    rows_.resize(rows_.size() + 256, kUnknown);
    row_of_[cfg] = row;
  }
  return row;
}

int32_t Engine::step_slow(int32_t cfg, uint8_t byte) {
  const int32_t row = ensure_row(cfg);
  const int32_t t = compute_step(cfg, byte);  // never touches rows_
  rows_[static_cast<size_t>(row) * 256 + byte] = t;
  return t;
}

// The ASCII half of cfg's row at once: bytes whose tops match the same stacks step to the same
// config, so each group of bytes costs one step.
void Engine::fill_ascii_row(int32_t cfg) {
  const Config c = configs_[cfg];
  if (c.n_partial != 0 || c.n > 64) return;  // step() fills byte by byte instead
  const int32_t row = ensure_row(cfg);
  std::vector<std::pair<uint64_t, int32_t>> groups;  // stacks matched -> step result
  for (int b = 0; b < 128; ++b) {
    int32_t& slot = rows_[static_cast<size_t>(row) * 256 + b];
    if (slot != kUnknown) continue;
    uint64_t matched = 0;
    for (uint32_t k = 0; k < c.n; ++k) {
      const uint32_t s = config_pool_[c.off + k];
      if (s != kAccept && top_set(s).contains(static_cast<uint32_t>(b))) matched |= uint64_t{1} << k;
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == matched; });
    if (it == groups.end()) {
      const int32_t r = matched == 0 ? kDead : step_stacks(c, static_cast<uint32_t>(b), false);  // never touches rows_
      it = groups.insert(groups.end(), {matched, r});
    }
    rows_[static_cast<size_t>(row) * 256 + b] = it->second;
  }
}

const Engine::Major& Engine::ascii_major(int32_t cfg) {
  if (!major_known_[cfg]) {
    fill_ascii_row(cfg);
    int32_t next[128];
    for (int b = 0; b < 128; ++b) next[b] = step(cfg, static_cast<uint8_t>(b));
    Major m{{0, 0}, kDead, false};
    int best = 0;
    for (int b = 0; b < 128; ++b) {  // the live successor of most bytes
      if (next[b] < 0) continue;
      int count = 0;
      for (int k = 0; k < 128; ++k) count += next[k] == next[b];
      if (count > best) {
        best = count;
        m.next = next[b];
      }
    }
    for (int b = 0; b < 128; ++b)
      if (m.next >= 0 && next[b] == m.next) m.bytes[b >> 6] |= uint64_t{1} << (b & 63);
    // Every non-ASCII character leads to the same config when each top matches all of them or
    // none; then U+0080 (C2 80) shows which config that is.
    if (m.next >= 0 && configs_[cfg].n_partial == 0) {
      bool uniform = true;
      const Config c = configs_[cfg];
      for (uint32_t i = c.off; i < c.off + c.n && uniform; ++i) {
        const uint32_t s = config_pool_[i];
        if (s == kAccept) continue;
        const CodepointSet& set = top_set(s);
        const bool all = set.contains_range(0x80, 0xD7FF) && set.contains_range(0xE000, kMaxCodepoint);
        uniform = all || !intersects_scalar(set, 0x80, kMaxCodepoint);
      }
      if (uniform) {
        const int32_t lead = step(cfg, 0xC2);
        m.non_ascii = lead >= 0 && step(lead, 0x80) == m.next;
      }
    }
    majors_[cfg] = m;
    major_known_[cfg] = 1;
  }
  return majors_[cfg];
}

void Engine::signature(int32_t cfg, std::vector<uint32_t>* out) const {
  const Config& c = configs_[cfg];
  out->clear();
  out->push_back(c.n_partial);
  out->push_back(c.total);
  out->push_back(c.uniform);
  out->insert(out->end(), c.partial, c.partial + c.n_partial);
  out->push_back(c.n);
  // Each stack's positions top to bottom, then the stacks sorted as sequences.
  std::vector<uint32_t> flat;
  std::vector<std::pair<uint32_t, uint32_t>> spans;  // (start in flat, length)
  for (uint32_t i = c.off; i < c.off + c.n; ++i) {
    const uint32_t start = static_cast<uint32_t>(flat.size());
    for (uint32_t n = config_pool_[i]; n != kBottom && n != kAccept; n = nodes_[n].parent) flat.push_back(nodes_[n].pos);
    spans.push_back({start, static_cast<uint32_t>(flat.size()) - start});
  }
  std::sort(spans.begin(), spans.end(), [&](const auto& a, const auto& b) {
    return std::lexicographical_compare(flat.begin() + a.first, flat.begin() + a.first + a.second, flat.begin() + b.first,
                                        flat.begin() + b.first + b.second);
  });
  for (const auto& [start, len] : spans) {
    out->push_back(len);
    out->insert(out->end(), flat.begin() + start, flat.begin() + start + len);
  }
}

int32_t Engine::from_signature(std::span<const uint32_t> sig) {
  size_t i = 0;
  auto next = [&](uint32_t* v) {
    if (i >= sig.size()) return false;
    *v = sig[i++];
    return true;
  };
  uint32_t n_partial, total, uniform, n;
  uint8_t partial[3] = {0, 0, 0};
  if (!next(&n_partial) || !next(&total) || !next(&uniform) || n_partial > 3 || total > 4 || uniform > 1 || (n_partial > 0) != (total > 0))
    return kDead;
  for (uint32_t k = 0; k < n_partial; ++k) {
    uint32_t b;
    if (!next(&b) || b > 0xFF) return kDead;
    partial[k] = static_cast<uint8_t>(b);
  }
  if (!next(&n)) return kDead;
  std::vector<uint32_t> stacks;
  const auto& el = g_.elements();
  for (uint32_t s = 0; s < n; ++s) {
    uint32_t len;
    if (!next(&len) || len > sig.size() - i) return kDead;
    if (len == 0) {
      stacks.push_back(kAccept);
      continue;
    }
    if (sig[i] >= el.size() || el[sig[i]].kind != Kind::Chars) return kDead;
    uint32_t parent = kBottom;
    for (uint32_t k = len; k-- > 0;) {
      const uint32_t pos = sig[i + k];
      if (pos >= el.size() || el[pos].kind == Kind::End) return kDead;
      const int64_t id = intern_node(pos, parent);
      if (id < 0) return static_cast<int32_t>(id);
      parent = static_cast<uint32_t>(id);
    }
    stacks.push_back(parent);
    i += len;
  }
  if (i != sig.size() || stacks.empty()) return kDead;
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  return intern_config(stacks, partial, static_cast<uint8_t>(n_partial), static_cast<uint8_t>(total), uniform != 0);
}

std::string Engine::expected(int32_t cfg, size_t max_items) const {
  const Config& c = configs_[cfg];
  if (c.n_partial > 0) return "the rest of a UTF-8 character";
  std::vector<uint32_t> sets;
  bool end = false;
  for (uint32_t i = c.off; i < c.off + c.n; ++i) {
    const uint32_t s = config_pool_[i];
    if (s == kAccept) end = true;
    else sets.push_back(g_.elements()[nodes_[s].pos].arg);
  }
  std::sort(sets.begin(), sets.end());
  sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
  std::string out;
  for (size_t k = 0; k < sets.size() && k < max_items; ++k) out += (out.empty() ? "" : ", ") + g_.sets()[sets[k]].to_gbnf();
  if (sets.size() > max_items) out += ", ...";
  if (end) out += (out.empty() ? "" : ", ") + std::string("end of text");
  return out;
}

std::string Engine::reason(int32_t code) const {
  const Limits& l = g_.limits();
  switch (code) {
    case kAmbiguous: return "the grammar is too ambiguous here: more than Limits::max_stacks = " + std::to_string(l.max_stacks) + " parses at once";
    case kTooDeep: return "the parse nests rules deeper than Limits::max_stack_depth = " + std::to_string(l.max_stack_depth);
    case kTooMuchWork: return "one step expands more than Limits::max_closure_steps = " + std::to_string(l.max_closure_steps) + " rule references";
    default: return "no parse continues";
  }
}

size_t Engine::memory_bytes() const {
  return nodes_.size() * (sizeof(Node) + 40) + adv_pool_.size() * 4 + configs_.size() * (sizeof(Config) + 96) +
         config_pool_.size() * 8 + rows_.size() * 4;
}

}  // namespace ggflow::grammar::detail
