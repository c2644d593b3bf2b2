// Lexer of the template engine: splits a template into text and tag tokens and applies Jinja's
// whitespace control the way Hugging Face configures it: trim_blocks (drop the first newline after
// a block or comment tag), lstrip_blocks (drop spaces and tabs before a block or comment tag that
// starts a line; `{%+` opts out), `-` on either side of a tag (strip all whitespace on that side),
// and keep_trailing_newline=False (one final newline of the source is dropped).
#pragma once

#include <string>
#include <vector>

namespace ggflow::jinja {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
  Tok type;
  std::string text;  // Text: the data; Name/Op: spelling; String: unescaped value; Int/Float: digits
  int line;
};

// Throws TemplateError (with the line) for an unterminated tag, string or comment.
std::vector<Token> tokenize(const std::string& source);

}  // namespace ggflow::jinja
