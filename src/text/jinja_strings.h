// Python str operations the templates use (on UTF-8, counting code points): strip, split,
// lower/upper, replace, splitlines. Case mapping covers ASCII and Latin-1 letters only.
#pragma once

#include <string>
#include <vector>

namespace ggflow::jinja::pystr {

// str.strip/lstrip/rstrip; `chars` null: whitespace (str.isspace).
std::string strip(const std::string& s, const std::string* chars, bool left, bool right);
// str.split(sep, maxsplit); `sep` null: runs of whitespace, empty strings dropped.
std::vector<std::string> split(const std::string& s, const std::string* sep, long maxsplit);
std::vector<std::string> rsplit(const std::string& s, const std::string* sep, long maxsplit);
std::string replace(const std::string& s, const std::string& from, const std::string& to, long count);
std::string lower(const std::string& s);
std::string upper(const std::string& s);
std::string capitalize(const std::string& s);
std::string title(const std::string& s);
std::vector<std::string> splitlines(const std::string& s);
size_t cp_length(const std::string& s);

}  // namespace ggflow::jinja::pystr
