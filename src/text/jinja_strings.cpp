// Python str operations on UTF-8 (see jinja_strings.h).
#include "text/jinja_strings.h"

#include <algorithm>
#include <cstdint>

#include "text/jinja_value.h"

namespace ggflow::jinja::pystr {

std::string strip(const std::string& s, const std::string* chars, bool left, bool right) {
  auto cps = utf8_decode(s);
  std::vector<uint32_t> set;
  if (chars) set = utf8_decode(*chars);
  auto strip_it = [&](uint32_t c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : is_py_space(c);
  };
  size_t b = 0, e = cps.size();
  if (left) while (b < e && strip_it(cps[b])) ++b;
  if (right) while (e > b && strip_it(cps[e - 1])) --e;
  return utf8_encode(cps, b, e);
}

std::vector<std::string> split(const std::string& s, const std::string* sep, long maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) throw TemplateError("ValueError: empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || long(out.size()) < maxsplit) {
      size_t k = s.find(*sep, pos);
      if (k == std::string::npos) break;
      check_list_size(out.size() + 2, "the result of split()");
      out.push_back(s.substr(pos, k - pos));
      pos = k + sep->size();
    }
    out.push_back(s.substr(pos));
    return out;
  }
  auto cps = utf8_decode(s);
  size_t k = 0, n = cps.size();
  while (k < n) {
    while (k < n && is_py_space(cps[k])) ++k;
    if (k == n) break;
    if (maxsplit >= 0 && long(out.size()) == maxsplit) {
      size_t e = n;
      while (e > k && is_py_space(cps[e - 1])) --e;
      out.push_back(utf8_encode(cps, k, e));
      break;
    }
    size_t b = k;
    while (k < n && !is_py_space(cps[k])) ++k;
    check_list_size(out.size() + 1, "the result of split()");
    out.push_back(utf8_encode(cps, b, k));
  }
  return out;
}

std::vector<std::string> rsplit(const std::string& s, const std::string* sep, long maxsplit) {
  if (maxsplit < 0) return split(s, sep, maxsplit);
  if (!sep) throw TemplateError("unsupported construct: rsplit() with maxsplit and no separator");
  std::vector<std::string> out;
  size_t end = s.size();
  while (long(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    size_t k = s.rfind(*sep, end - sep->size());
    if (k == std::string::npos) break;
    check_list_size(out.size() + 2, "the result of rsplit()");
    out.push_back(s.substr(k + sep->size(), end - k - sep->size()));
    end = k;
  }
  out.push_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, long count) {
  std::string out;
  // The size of the result first: `to` may be large and occur many times.
  size_t matches = 0;
  if (from.empty()) {
    matches = cp_length(s) + 1;
  } else {
    for (size_t k = s.find(from); k != std::string::npos; k = s.find(from, k + from.size())) ++matches;
  }
  charge_steps(int64_t(s.size() / 64));
  if (count >= 0) matches = std::min(matches, size_t(count));
  size_t removed = from.size() * matches;
  if (matches && to.size() > SIZE_MAX / 2 / matches) check_string_size(SIZE_MAX, "the result of replace()");
  check_string_size(s.size() - removed + to.size() * matches, "the result of replace()");
  if (from.empty()) {  // Python inserts `to` between every code point
    auto cps = utf8_decode(s);
    long n = 0;
    for (size_t k = 0; k <= cps.size(); ++k) {
      if (count < 0 || n < count) { out += to; ++n; }
      if (k < cps.size()) utf8_append(out, cps[k]);
    }
    return out;
  }
  size_t pos = 0;
  long n = 0;
  while (count < 0 || n < count) {
    size_t k = s.find(from, pos);
    if (k == std::string::npos) break;
    out.append(s, pos, k - pos);
    out += to;
    pos = k + from.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

static uint32_t lower_cp(uint32_t c) {
  if ((c >= 'A' && c <= 'Z') || (c >= 0xc0 && c <= 0xde && c != 0xd7)) return c + 32;
  return c;
}
static uint32_t upper_cp(uint32_t c) {
  if ((c >= 'a' && c <= 'z') || (c >= 0xe0 && c <= 0xfe && c != 0xf7)) return c - 32;
  return c;
}
static bool is_alpha_cp(uint32_t c) { return lower_cp(c) != upper_cp(c) || (c >= 0xdf && c <= 0xff && c != 0xf7); }

static std::string map_cps(const std::string& s, uint32_t (*f)(uint32_t)) {
  std::string out;
  for (uint32_t c : utf8_decode(s)) utf8_append(out, f(c));
  return out;
}

std::string lower(const std::string& s) { return map_cps(s, lower_cp); }
std::string upper(const std::string& s) { return map_cps(s, upper_cp); }

std::string capitalize(const std::string& s) {
  auto cps = utf8_decode(s);
  std::string out;
  for (size_t k = 0; k < cps.size(); ++k) utf8_append(out, k == 0 ? upper_cp(cps[k]) : lower_cp(cps[k]));
  return out;
}

std::string title(const std::string& s) {
  std::string out;
  bool prev_alpha = false;
  for (uint32_t c : utf8_decode(s)) {
    utf8_append(out, prev_alpha ? lower_cp(c) : upper_cp(c));
    prev_alpha = is_alpha_cp(c);
  }
  return out;
}

std::vector<std::string> splitlines(const std::string& s) {
  auto cps = utf8_decode(s);
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t k = 0; k < cps.size(); ++k) {
    uint32_t c = cps[k];
    bool brk = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) || c == 0x85 ||
               c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    check_list_size(out.size() + 1, "the result of splitlines()");
    out.push_back(utf8_encode(cps, b, k));
    if (c == '\r' && k + 1 < cps.size() && cps[k + 1] == '\n') ++k;
    b = k + 1;
  }
  if (b < cps.size()) out.push_back(utf8_encode(cps, b, cps.size()));
  return out;
}

size_t cp_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

}  // namespace ggflow::jinja::pystr
