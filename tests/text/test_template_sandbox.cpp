// The chat-template sandbox against server-side template injection. A chat template ships inside
// the model file, so it is untrusted input: CVE-2024-34359 (llama-cpp-python) rendered the Jinja
// template of a GGUF file with an unsandboxed jinja2 Environment, and `{{ ''.__class__.__mro__[1]
// .__subclasses__() }}`-style walks reached os.popen. ggflow renders templates with its own engine
// (text/jinja_*), which has no host objects; this table holds the published SSTI payloads (the
// PayloadsAllTheThings / HackTricks Jinja2 lists, the llama-cpp-python advisory) and the resource
// bombs that any template engine must survive, each with what it must get:
//   - refused: the render (or the parse) fails with an error naming what was refused, and for a
//     limit the limit's name and value (text::TemplateLimits, documented in text/jinja_value.h);
//   - rendered: harmless output, e.g. an undefined name prints as nothing, as in Jinja2.
// Every payload must finish within a time bound (kBound below, measured with steady_clock, parse
// and render together) and leave the output within max_output. Memory safety (no overflow of the
// native stack, no out-of-bounds access, no leak through reference cycles) is what the run under
// AddressSanitizer + UBSan with leak detection checks (scripts/sanitize.sh address runs this test).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "text/template.h"

using ggflow::text::ChatInputs;
using ggflow::text::ChatTemplate;
using ggflow::text::TemplateLimits;
using nlohmann::ordered_json;

namespace {

// The bound on one payload's wall time (parse + render). The engine's own bounds keep the worst
// payload here near 0.5 s on one core of the CI machine; sanitizer and unoptimized builds are
// several times slower.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || !defined(NDEBUG)
constexpr double kBound = 5.0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr double kBound = 5.0;
#else
constexpr double kBound = 1.0;
#endif
#else
constexpr double kBound = 1.0;
#endif

std::string rep(const std::string& s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

std::string str(int64_t x) { return std::to_string(x); }

struct Outcome {
  bool ok = false;
  std::string text;  // the output, or the error's message
  double seconds = 0;
};

Outcome run(const std::string& source, const ordered_json& extra = ordered_json::object(),
            const TemplateLimits& limits = {}) {
  ChatInputs in;
  in.messages = ordered_json::parse(R"([{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": "hi"},
                                         {"role": "assistant", "content": "yo"}])");
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.add_generation_prompt = true;
  in.extra = extra;
  auto t0 = std::chrono::steady_clock::now();
  Outcome o;
  auto t = ChatTemplate::parse(source, limits);
  if (!t) {
    o.text = t.error().what;
  } else {
    auto r = t->render(in);
    o.ok = r.ok();
    o.text = r.ok() ? *r : r.error().what;
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

enum class Expect { Refused, Rendered };

struct Payload {
  std::string name;
  std::string source;
  Expect expect;
  std::string want;  // Refused: a part of the error message; Rendered: the whole output
  ordered_json extra = ordered_json::object();
};

Payload refused(std::string name, std::string source, std::string want, ordered_json extra = ordered_json::object()) {
  return {std::move(name), std::move(source), Expect::Refused, std::move(want), std::move(extra)};
}
Payload rendered(std::string name, std::string source, std::string want) {
  return {std::move(name), std::move(source), Expect::Rendered, std::move(want)};
}

const std::string kNoAccess = "is not accessible in the sandbox";
std::string no_access(const std::string& attr) { return "attribute '" + attr + "' " + kNoAccess; }

// A nested value `depth` levels deep: [[[...]]].
ordered_json deep_json(int depth) {
  ordered_json j = ordered_json::array();
  for (int k = 1; k < depth; ++k) j = ordered_json::array({std::move(j)});
  return j;
}

std::vector<Payload> payloads() {
  const std::string max_string = str(int64_t(TemplateLimits::kMaxString));
  const std::string max_items = str(TemplateLimits::kMaxItems);
  const std::string max_range = str(TemplateLimits::kMaxRange);
  const std::string max_nesting = str(TemplateLimits::kMaxNesting);
  const std::string os_popen = ".os.popen('id').read() }}";
  std::vector<Payload> p = {
      // --- Attribute walks to Python internals: refused by name, whatever the object. -------------
      refused("str.__class__", "{{ ''.__class__ }}", no_access("__class__") + " (asked of a value of type str"),
      refused("__mro__ walk to __subclasses__", "{{ ''.__class__.__mro__[1].__subclasses__() }}", no_access("__class__")),
      refused("__base__ walk", "{{ ''.__class__.__base__.__subclasses__()[40]('/etc/passwd').read() }}",
              no_access("__class__")),
      refused("list.__class__", "{{ [].__class__.__base__.__subclasses__() }}", no_access("__class__")),
      refused("dict.__class__", "{{ {}.__class__ }}", no_access("__class__") + " (asked of a value of type dict"),
      refused("int.__class__", "{{ (1).__class__ }}", no_access("__class__") + " (asked of a value of type int"),
      refused("messages.__class__", "{{ messages.__class__.__init__.__globals__ }}", no_access("__class__")),
      refused("message dict __init__", "{{ messages[0].__init__.__globals__['os'] }}", no_access("__init__")),
      refused("message dict __dict__", "{{ messages[0].__dict__ }}", no_access("__dict__")),
      refused("self.__init__", "{{ self.__init__.__globals__.__builtins__ }}",
              no_access("__init__") + " (asked of an undefined value"),
      refused("self._TemplateReference__context", "{{ self._TemplateReference__context.cycler.__init__.__globals__"
              + os_popen, "'self' is undefined"),
      refused("config.__class__", "{{ config.__class__.__init__.__globals__['os'].popen('id').read() }}",
              no_access("__class__")),
      refused("config.items()", "{{ config.items() }}", "'config' is undefined"),
      refused("request.application", "{{ request.application.__globals__.__builtins__.__import__('os') }}",
              "'request' is undefined"),
      refused("lipsum.__globals__", "{{ lipsum.__globals__['os'].popen('id').read() }}", no_access("__globals__")),
      refused("cycler.__init__", "{{ cycler.__init__.__globals__" + os_popen, no_access("__init__")),
      refused("joiner.__init__", "{{ joiner.__init__.__globals__" + os_popen, no_access("__init__")),
      refused("namespace.__init__", "{{ namespace.__init__.__globals__" + os_popen,
              no_access("__init__") + " (asked of a value of type function"),
      refused("namespace object __dict__", "{{ namespace(a=1).__dict__ }}", no_access("__dict__")),
      refused("namespace object __init__", "{% set ns = namespace() %}{{ ns.__init__ }}", no_access("__init__")),
      refused("range.__class__", "{{ range.__class__ }}", no_access("__class__")),
      refused("range.__globals__", "{{ range.__globals__.__builtins__ }}", no_access("__globals__")),
      refused("dict.__class__ (builtin)", "{{ dict.__class__.__base__ }}", no_access("__class__")),
      refused("raise_exception.__globals__", "{{ raise_exception.__globals__ }}", no_access("__globals__")),
      refused("strftime_now.__globals__", "{{ strftime_now.__globals__ }}", no_access("__globals__")),
      refused("loop.__class__", "{% for x in [1] %}{{ loop.__class__ }}{% endfor %}", no_access("__class__")),
      refused("caller.__globals__", "{% macro m() %}{{ caller.__globals__ }}{% endmacro %}{% call m() %}{% endcall %}",
              no_access("__globals__")),
      refused("macro.__globals__", "{% macro m() %}{% endmacro %}{{ m.__globals__ }}", no_access("__globals__")),
      refused("item syntax str['__class__']", "{{ ''['__class__'] }}", no_access("__class__")),
      refused("item syntax list['__class__']", "{{ messages['__class__'] }}", no_access("__class__")),
      refused("item syntax dict['__class__']", "{{ messages[0]['__class__']['__base__'] }}", no_access("__class__")),
      refused("item syntax int['__class__']", "{{ (1)['__class__'] }}", no_access("__class__")),
      refused("'__import__' name", "{{ __import__('os').popen('id').read() }}", "'__import__' is undefined"),
      refused("os name", "{{ os.popen('id').read() }}", "'os' is undefined"),
      refused("getattr builtin", "{{ getattr('', '__class__') }}", "'getattr' is undefined"),
      refused("eval builtin", "{{ eval('1') }}", "'eval' is undefined"),
      refused("open builtin", "{{ open('/etc/passwd').read() }}", "'open' is undefined"),
      // --- String methods: a whitelist; Python's internals among them are refused. ----------------
      refused("str.__add__", "{{ 'a'.__add__('b') }}", no_access("__add__")),
      refused("str.__mod__", "{{ '%s'.__mod__('x') }}", no_access("__mod__")),
      refused("str.__getattribute__", "{{ ''.__getattribute__('__class__') }}", no_access("__getattribute__")),
      refused("list.__len__", "{{ [].__len__() }}", no_access("__len__")),
      refused("dict.__getitem__", "{{ {}.__getitem__('a') }}", no_access("__getitem__")),
      refused("method.__self__", "{{ messages[0].items.__self__ }}", no_access("__self__")),
      refused("method.__func__", "{{ 'a'.upper.__func__ }}", no_access("__func__")),
      refused("str.format_map", "{{ '{a}'.format_map({'a': 1}) }}", "'format_map' is undefined"),
      refused("str.translate (not whitelisted)", "{{ 'a'.translate({}) }}", "'translate' is undefined"),
      // --- Format-string tricks. -------------------------------------------------------------------
      refused("'{0.__class__}'.format", "{{ '{0.__class__}'.format(1) }}", "unsupported construct: str.format field '{0.__class__}'"),
      refused("'{0.__class__.__mro__}'.format", "{{ '{0.__class__.__mro__}'.format('') }}", "str.format field"),
      refused("'{0[__class__]}'.format", "{{ '{0[__class__]}'.format({}) }}", "str.format field"),
      refused("format spec width bomb", "{{ '{:>99999999999}'.format(1) }}", "str.format field"),
      refused("format index overflow", "{{ '{99999999999999999999999}'.format(1) }}", "missing argument"),
      refused("format arg walk", "{{ '{}'.format(''.__class__) }}", no_access("__class__")),
      refused("'%' formatting", "{{ '%s' % 'x' }}", "unsupported construct: '%' string formatting"),
      refused("'%(name)s' formatting", "{{ '%(a)s' % {'a': ''.__class__} }}", no_access("__class__")),
      refused("format filter", "{{ '%s'|format(1) }}", "unknown filter 'format'"),
      // --- Filters that reach attributes. ---------------------------------------------------------
      refused("|attr('__class__')", "{{ ''|attr('__class__') }}", "unknown filter 'attr'"),
      refused("|attr in an if", "{% if true %}{{ ''|attr('__class__') }}{% endif %}", "unknown filter 'attr'"),
      refused("|map('attribute')", "{{ messages|map(attribute='__class__')|list }}", no_access("__class__")),
      refused("|map('attribute') dotted", "{{ messages|map(attribute='role.__class__')|list }}", no_access("__class__")),
      refused("|selectattr", "{{ messages|selectattr('__class__')|list }}", no_access("__class__")),
      refused("|rejectattr", "{{ messages|rejectattr('__init__')|list }}", no_access("__init__")),
      refused("|sort(attribute)", "{{ messages|sort(attribute='__class__') }}", no_access("__class__")),
      refused("|join(attribute)", "{{ messages|join(',', attribute='__class__') }}", no_access("__class__")),
      refused("|sum(attribute)", "{{ messages|sum(attribute='__len__') }}", no_access("__len__")),
      refused("|map to a filter that does not exist", "{{ messages|map('attr', '__class__')|list }}", "unknown filter 'attr'"),
      refused("|groupby", "{{ messages|groupby('role') }}", "unknown filter 'groupby'"),
      refused("|xmlattr", "{{ {'a': 1}|xmlattr }}", "unknown filter 'xmlattr'"),
      refused("|pprint", "{{ messages|pprint }}", "unknown filter 'pprint'"),
      // --- dict/list: read-only data; mutators raise a SecurityError. ------------------------------
      rendered("dict.items is data", "{% for k, v in messages[0].items() %}{{ k }}={{ v }};{% endfor %}",
               "role=system;content=Be brief.;"),
      rendered("dict.get of an internal name is a missing key", "{{ messages[0].get('__class__') }}", "None"),
      rendered("a dict key named like an internal is data", "{{ {'__class__': 'data'}['__class__'] }}", "data"),
      refused("list.append", "{{ messages.append(1) }}", "SecurityError: access to attribute 'append' of 'list' object is unsafe"),
      refused("list.pop", "{{ messages.pop() }}", "SecurityError"),
      refused("dict.update", "{{ messages[0].update({'role': 'x'}) }}", "SecurityError"),
      refused("dict.setdefault", "{{ messages[0].setdefault('x', 1) }}", "SecurityError"),
      refused("dict.clear", "{{ messages[0].clear() }}", "SecurityError"),
      // --- Undefined names print as nothing, as in Jinja2. ----------------------------------------
      rendered("undefined Flask/Jinja globals", "[{{ self }}{{ config }}{{ request }}{{ lipsum }}{{ cycler }}{{ joiner }}"
               "{{ __builtins__ }}{{ os }}]", "[]"),
      rendered("builtins print as functions", "{{ range }} {{ namespace }}", "<function range> <function namespace>"),
      rendered("a namespace prints opaque", "{% set ns = namespace(a=1) %}{{ ns }}", "<Namespace>"),
      rendered("a namespace holding itself", "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me.me }}", "<Namespace>"),
      rendered("a macro in a namespace holding itself",
               "{% macro m() %}{% endmacro %}{% set ns = namespace(f=m) %}{% set ns.me = ns %}{% set ns.l = [ns, m] %}ok", "ok"),
      rendered("huge strftime format", "[{{ strftime_now('%c' * 10000) }}]", "[]"),
      // --- No file system: include/import/extends and the other file tags are refused. ------------
      refused("include", "{% include '/etc/passwd' %}", "unsupported tag '{% include %}'"),
      refused("include (second line)", "x\n{% include 'other.jinja' %}", "chat template line 2: unsupported tag '{% include %}'"),
      refused("import", "{% import 'os' as os %}", "unsupported tag '{% import %}'"),
      refused("from import", "{% from 'x.html' import m %}", "unsupported tag '{% from %}'"),
      refused("extends", "{% extends 'base.html' %}", "unsupported tag '{% extends %}'"),
      refused("block", "{% block body %}x{% endblock %}", "unsupported tag '{% block %}'"),
      refused("do", "{% do messages.append(1) %}", "unsupported tag '{% do %}'"),
      refused("autoescape", "{% autoescape false %}x{% endautoescape %}", "unsupported tag '{% autoescape %}'"),
      refused("recursive for", "{% for x in messages recursive %}{{ loop(x) }}{% endfor %}",
              "unsupported construct 'recursive' for loop"),
      // --- {% raw %} edge cases. -----------------------------------------------------------------
      rendered("raw keeps a payload as text", "{% raw %}{{ ''.__class__ }}{% endraw %}", "{{ ''.__class__ }}"),
      rendered("raw around tags", "{% raw %}{% include 'x' %}{% endraw %}", "{% include 'x' %}"),
      rendered("raw with whitespace control", "a {%- raw -%}  {{ x }}  {%- endraw -%} b", "a{{ x }}b"),
      rendered("raw inside raw", "{% raw %}{% raw %}{% endraw %}", "{% raw %}"),
      refused("unterminated raw", "{% raw %}{{ ''.__class__ }}", "missing {% endraw %}"),
      refused("stray endraw", "{% raw %}{% endraw %}{% endraw %}", "unsupported tag '{% endraw %}'"),
      refused("unterminated endraw tag", "{% raw %}x{% endraw", "unterminated endraw tag"),
      // --- Lexer edge cases. ---------------------------------------------------------------------
      refused("invalid \\x escape", "{{ '\\xZZ' }}", "invalid \\x escape in string literal"),
      refused("code point above U+10FFFF", "{{ '\\U7fffffff' }}", "code point above U+10FFFF"),
      refused("truncated \\u escape", "{{ '\\u12' }}", "truncated \\u escape"),
      refused("unterminated string", "{{ 'abc }}", "unterminated string literal"),
      refused("unterminated comment", "{# abc", "unterminated comment"),
      refused("unterminated tag", "{{ 1 + ", "unexpected end of template inside a tag"),
      // --- Integers are 64-bit: overflow is an error, never a wrapped value or a trap. ------------
      refused("int + overflow", "{{ 9223372036854775807 + 1 }}", "integer overflow: 9223372036854775807 + 1 does not fit in 64 bits"),
      refused("int * overflow", "{{ 4611686018427387904 * 2 }}", "integer overflow"),
      refused("int ** overflow", "{{ 10 ** 100 }}", "integer overflow: 10 ** 100"),
      refused("2 ** 64", "{{ 2 ** 64 }}", "integer overflow"),
      refused("INT64_MIN // -1 (SIGFPE in C++)", "{{ (-9223372036854775807 - 1) // -1 }}", "integer overflow"),
      rendered("INT64_MIN % -1 (SIGFPE in C++)", "{{ (-9223372036854775807 - 1) % -1 }}", "0"),
      refused("-INT64_MIN", "{{ -(-9223372036854775807 - 1) }}", "integer overflow"),
      refused("abs(INT64_MIN)", "{{ (-9223372036854775807 - 1)|abs }}", "integer overflow"),
      refused("sum overflow", "{{ [9223372036854775807, 1]|sum }}", "integer overflow"),
      refused("integer literal past 64 bits", "{{ 99999999999999999999999 }}", "does not fit in 64 bits"),
      rendered("float literal past double", "{{ 1e999 }} {{ 1e-999 }}", "inf 0.0"),
      rendered("int of a float past int64", "{{ 1e300|int }} {{ '1e300'|int }}", "0 0"),
      rendered("slice step past the length", "{{ 'abc'[1::9223372036854775807] }}{{ 'abc'[::-9223372036854775807 - 1] }}"
               "{{ [1, 2, 3][-9223372036854775807 - 1:] }}", "bc[1, 2, 3]"),
      rendered("index far out of range", "[{{ 'abc'[-9223372036854775807 - 1] }}{{ messages[9223372036854775807] }}]", "[]"),
      // --- Loops and ranges. ---------------------------------------------------------------------
      refused("range(10**9)", "{{ range(10**9)|length }}",
              "range() too big: range(1000000000) has 1000000000 items, over the limit of " + max_range + " (Limits::max_range)"),
      refused("loop over range(10**9)", "{% for i in range(10**9) %}{% endfor %}", "(Limits::max_range)"),
      refused("range of 2**64 - 1 items", "{{ range(-9223372036854775807 - 1, 9223372036854775807)|length }}",
              "has 18446744073709551615 items"),
      refused("negative huge range", "{{ range(0, -9223372036854775807 - 1, -1)|length }}", "(Limits::max_range)"),
      rendered("sparse range is fine", "{{ range(0, 10**18, 10**17)|length }}", "10"),
      refused("|join on a huge range", "{{ range(10**9)|join(',') }}", "(Limits::max_range)"),
      refused("nested loops 10^5 x 10^5", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
              "loop iteration limit exceeded: the loops ran more than 1000000 iterations (Limits::max_iterations)"),
      refused("nested loops 10^3 x 10^3 x 10^3", "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}"
              "{% endfor %}{% endfor %}{% endfor %}", "(Limits::max_iterations)"),
      refused("loop over a 10M-character string", "{% for c in 'a' * 10000000 %}{% endfor %}",
              "list size limit exceeded: the characters of a string"),
      refused("|list of a 16M-character string", "{{ ('a' * 16000000)|list|length }}", "(Limits::max_items)"),
      refused("steps: cheap expression in a long loop", "{% for i in range(100000) %}{% for j in range(10) %}{{ " +
              rep("1+", 100) + "1 }}{% endfor %}{% endfor %}",
              "evaluation step limit exceeded: the template took more than " + str(TemplateLimits::kMaxSteps) +
              " steps (Limits::max_steps)"),
      refused("steps: 'in' over a long list in a loop",
              "{% set l = range(100000)|list %}{% for i in range(100000) %}{{ -1 in l }}{% endfor %}", "(Limits::max_steps)"),
      refused("steps: sort a long list in a loop",
              "{% set l = range(100000)|list %}{% for i in range(1000) %}{{ l|sort|length }}{% endfor %}", "(Limits::max_steps)"),
      refused("steps: unique is quadratic", "{{ range(100000)|list|unique|list|length }}", "(Limits::max_steps)"),
      refused("steps: list equality in a loop",
              "{% set l = range(100000)|list %}{% for i in range(100000) %}{{ l == l }}{% endfor %}", "(Limits::max_steps)"),
      refused("steps: str.strip on 16 MB in a loop",
              "{% set b = 'a' * 16000000 %}{% for i in range(100000) %}{{ b.strip()|length }}{% endfor %}", "(Limits::max_"),
      refused("steps: index into 16 MB in a loop",
              "{% set b = 'a' * 16000000 %}{% for i in range(100000) %}{{ b[5] }}{% endfor %}", "(Limits::max_"),
      refused("steps: map and join in a loop",
              "{% set l = range(100000)|list %}{% for i in range(1000) %}{{ l|map('string')|join(',')|length }}{% endfor %}",
              "(Limits::max_steps)"),
      refused("steps: count in 16 MB in a loop",
              "{% set b = 'ab' * 8000000 %}{% for i in range(100000) %}{{ b.count('b') }}{% endfor %}", "(Limits::max_"),
      refused("steps: exponential macro recursion",
              "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
              "(Limits::max_steps)"),
      // --- Recursion: macros, and nesting in the source (the parser's recursion). -----------------
      refused("recursive macro", "{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}",
              "macro recursion depth limit exceeded: calls of 'f' nested deeper than " + str(TemplateLimits::kMaxDepth) +
              " (Limits::max_depth)"),
      refused("mutually recursive macros", "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
              "(Limits::max_depth)"),
      refused("recursion through caller", "{% macro f() %}{% call f() %}{{ caller() }}{% endcall %}{% endmacro %}{{ f() }}",
              "(Limits::max_depth)"),
      refused("recursion inside deep expressions", "{% macro f(n) %}{{ " + rep("[-", 60) + "f(n+1)" + rep("]", 60) +
              " }}{% endmacro %}{{ f(0) }}",
              "evaluation depth limit exceeded: expressions, statements and macro calls nested more than " +
              str(TemplateLimits::kMaxEvalDepth) + " deep at run time (Limits::max_eval_depth)"),
      refused("100k nested parentheses", "{{ " + rep("(", 100000) + "1" + rep(")", 100000) + " }}",
              "nesting limit exceeded: the template nests brackets, blocks or operators deeper than " + max_nesting +
              " levels (Limits::max_nesting)"),
      refused("100k nested lists", "{{ " + rep("[", 100000) + rep("]", 100000) + " }}", "(Limits::max_nesting)"),
      refused("100k nested dicts", "{{ " + rep("{'a': ", 100000) + "1" + rep("}", 100000) + " }}", "(Limits::max_nesting)"),
      refused("100k nested calls", "{{ " + rep("f(", 100000) + rep(")", 100000) + " }}", "(Limits::max_nesting)"),
      refused("100k 'not'", "{{ " + rep("not ", 100000) + "1 }}", "(Limits::max_nesting)"),
      refused("100k unary minus", "{{ " + rep("-", 100000) + "1 }}", "(Limits::max_nesting)"),
      refused("50k conditional chain", "{{ " + rep("1 if 1 else ", 50000) + "1 }}", "(Limits::max_nesting)"),
      refused("100k chained +", "{{ 1" + rep("+1", 100000) + " }}",
              "nesting limit exceeded: an expression is more than " + max_nesting + " levels deep"),
      refused("100k chained ~ in a set", "{% set x = 'a'" + rep(" ~ 'a'", 100000) + " %}", "(Limits::max_nesting)"),
      refused("100k chained attributes", "{{ messages" + rep(".a", 100000) + " }}", "(Limits::max_nesting)"),
      refused("100k chained subscripts", "{{ messages" + rep("[0]", 100000) + " }}", "(Limits::max_nesting)"),
      refused("100k chained calls", "{{ range" + rep("()", 100000) + " }}", "(Limits::max_nesting)"),
      refused("100k chained filters", "{{ 'a'" + rep("|upper", 100000) + " }}", "(Limits::max_nesting)"),
      refused("100k chained tests", "{{ 1" + rep(" is number", 100000) + " }}", "(Limits::max_nesting)"),
      refused("20k nested if blocks", rep("{% if true %}", 20000) + "x" + rep("{% endif %}", 20000), "(Limits::max_nesting)"),
      refused("20k nested for blocks", rep("{% for i in [1] %}", 20000) + rep("{% endfor %}", 20000), "(Limits::max_nesting)"),
      refused("20k nested macros", rep("{% macro m() %}", 20000) + rep("{% endmacro %}", 20000), "(Limits::max_nesting)"),
      refused("20k nested set blocks", rep("{% set x %}", 20000) + rep("{% endset %}", 20000), "(Limits::max_nesting)"),
      refused("20k nested filter blocks", rep("{% filter upper %}", 20000) + rep("{% endfilter %}", 20000), "(Limits::max_nesting)"),
      refused("source of 2 MiB", "{{ 1 }}" + rep("x", 2 << 20),
              "template size limit exceeded: the template is 2097159 bytes, over the limit of " +
              str(int64_t(TemplateLimits::kMaxSource)) + " (Limits::max_source)"),
      // --- Values nested deeper than the printers can recurse. -----------------------------------
      refused("list nested 100k deep by a loop",
              "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}",
              "nesting limit exceeded: a value would nest lists/dicts " + str(TemplateLimits::kMaxNesting + 1) + " deep"),
      refused("dict nested 100k deep by a loop",
              "{% set ns = namespace(x={}) %}{% for i in range(100000) %}{% set ns.x = {'a': ns.x} %}{% endfor %}{{ ns.x|tojson }}",
              "(Limits::max_nesting)"),
      refused("tuples nested by |items in a loop",
              "{% set ns = namespace(x={'a': 1}) %}{% for i in range(100000) %}{% set ns.x = {'a': ns.x|items|list} %}{% endfor %}",
              "(Limits::max_nesting)"),
      refused("input JSON nested 1000 deep", "{{ deep }}", "nesting limit exceeded: an input value", {{"deep", deep_json(1000)}}),
      rendered("namespaces chained 100k deep", "{% set ns = namespace() %}{% for i in range(100000) %}"
               "{% set ns.x = namespace(y=ns.x) %}{% endfor %}ok", "ok"),
      // --- String and list bombs. ----------------------------------------------------------------
      refused("'a' * 10**9", "{{ 'a' * 10**9 }}",
              "string size limit exceeded: string repetition ('...' * n) would be 1000000000 bytes, over the limit of " +
              max_string + " (Limits::max_string)"),
      refused("'ab' * 2**62 (size overflows)", "{{ 'ab' * 4611686018427387904 }}", "(Limits::max_string)"),
      refused("repetition of a repetition", "{{ ('a' * 1000000) * 1000 }}", "(Limits::max_string)"),
      refused("doubling with set and ~", "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
              "{% endfor %}{{ ns.s|length }}", "string size limit exceeded: the result of '~'"),
      refused("doubling with set and +", "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
              "{% endfor %}", "(Limits::max_string)"),
      refused("doubling with set and * 2", "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s * 2 %}"
              "{% endfor %}", "(Limits::max_string)"),
      refused("doubling without a loop", "{% set s = 'a' %}" + rep("{% set s = s ~ s %}", 64) + "{{ s }}", "(Limits::max_string)"),
      refused("list doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
              "list size limit exceeded: the result of '+' would have 1048576 items, over the limit of " + max_items +
              " (Limits::max_items)"),
      refused("list repetition", "{{ [1] * 10**9 }}", "list size limit exceeded: list repetition ([...] * n)"),
      refused("list repetition of big strings", "{{ ['a' * 1000000] * 10000 }}",
              "memory limit exceeded: list repetition ([...] * n) would copy 10000000000 bytes"),
      refused("list growing by one per iteration", "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
              "{% set ns.l = ns.l + [i] %}{% endfor %}", "(Limits::max_steps)"),
      refused("|join with a huge separator", "{{ range(100000)|join('x' * 1000) }}", "string size limit exceeded: the result of join"),
      refused("str.join of huge strings", "{{ ''.join(['a' * 10000000, 'b' * 10000000]) }}", "the result of str.join()"),
      refused("replace('', big)", "{{ ('a' * 1000)|replace('', 'b' * 100000) }}",
              "string size limit exceeded: the result of replace() would be 100101000 bytes"),
      refused("str.replace growth", "{{ ('a' * 100000).replace('a', 'b' * 1000) }}", "the result of replace()"),
      refused("format repetition", "{{ ('{0}' * 100).format('a' * 1000000) }}", "the result of str.format()"),
      refused("indent width 10**12", "{{ 'x'|indent(10**12) }}", "string size limit exceeded: the indentation of indent()"),
      refused("indent of many lines", "{{ ('\\n' * 100000)|indent(1000, true, true) }}", "the result of indent()"),
      refused("tojson indent 10**9", "{{ {'a': 1}|tojson(indent=10**9) }}", "string size limit exceeded: the JSON text"),
      refused("tojson of a wide shared list", "{{ ([range(100000)|list] * 100)|tojson }}", "the JSON text"),
      refused("repr of a wide shared list", "{{ [range(100000)|list] * 100 }}", "string size limit exceeded: the text of a list"),
      refused("split into 8M pieces", "{{ (',' * 8000000).split(',')|length }}", "list size limit exceeded: the result of split()"),
      refused("wordcount of 8M words", "{{ ('a ' * 8000000)|wordcount }}", "the result of split()"),
      refused("splitlines into 8M lines", "{{ ('\\n' * 8000000).splitlines()|length }}", "the result of splitlines()"),
      refused("output bomb", "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
              "output size limit exceeded: the template output would exceed " + str(int64_t(TemplateLimits::kMaxOutput)) +
              " bytes (Limits::max_output)"),
      refused("output bomb in one expression", "{{ 'x' * 16000000 }}{{ 'x' * 16000000 }}", "(Limits::max_output)"),
      refused("captured block bomb", "{% set s %}{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}{% endset %}",
              "(Limits::max_output)"),
      refused("filter block bomb", "{% filter upper %}{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}{% endfilter %}",
              "(Limits::max_output)"),
      refused("memory: copies of 16 MB in a loop", "{% set b = 'a' * 16000000 %}{% for i in range(100000) %}{% set c = b %}{% endfor %}",
              "memory limit exceeded: the template built more than " + str(TemplateLimits::kMaxBytes) +
              " bytes of strings (Limits::max_bytes)"),
      refused("memory: 16 MB strings held by recursive macros", "{% macro f(s, n) %}{% if n %}{{ f(s ~ 'x', n - 1) }}{% endif %}"
              "{% endmacro %}{{ f('a' * 16000000, 199) }}", "(Limits::max_bytes)"),
      refused("raise_exception with 10 MB", "{{ raise_exception('x' * 10000000) }}", "raise_exception: xxxx"),
  };
  return p;
}

}  // namespace

TEST(TemplateSandbox, PublishedPayloadsAreRefusedOrHarmless) {
  const std::vector<Payload> table = payloads();
  double total = 0;
  std::vector<std::pair<double, std::string>> times;
  for (const Payload& p : table) {
    SCOPED_TRACE(p.name);
    Outcome o = run(p.source, p.extra);
    total += o.seconds;
    times.emplace_back(o.seconds, p.name);
    EXPECT_LT(o.seconds, kBound) << p.name << " took " << o.seconds << " s";
    if (p.expect == Expect::Refused) {
      EXPECT_FALSE(o.ok) << p.name << " rendered " << o.text.size() << " bytes: " << o.text.substr(0, 200);
      if (o.ok) continue;
      EXPECT_NE(o.text.find(p.want), std::string::npos) << p.name << "\n  error: " << o.text << "\n  wanted: " << p.want;
      EXPECT_EQ(o.text.rfind("chat template", 0), 0u) << o.text;  // says where it comes from
      EXPECT_LE(o.text.size(), 1200u) << "error messages stay short";
    } else {
      EXPECT_TRUE(o.ok) << p.name << ": " << o.text;
      EXPECT_EQ(o.text, p.want) << p.name;
    }
    EXPECT_LE(o.text.size(), TemplateLimits::kMaxOutput);
  }
  std::sort(times.rbegin(), times.rend());
  std::printf("template sandbox: %zu payloads in %.2f s (bound %.1f s each); the slowest:\n", table.size(), total, kBound);
  for (size_t k = 0; k < 5 && k < times.size(); ++k) std::printf("  %.3f s  %s\n", times[k].first, times[k].second.c_str());
  EXPECT_GE(table.size(), 150u);
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
  // The whole table ran in this process: its peak memory stays near what Limits::max_bytes allows.
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  EXPECT_LT(ru.ru_maxrss, 1024L << 10) << "peak RSS " << ru.ru_maxrss / 1024 << " MiB";
#endif
}

// A limit error reaches the user as a clear message: what, where, the limit's name and value, and
// a hint that says why.
TEST(TemplateSandbox, LimitErrorsNameTheLimitTheValueAndTheLine) {
  auto t = ChatTemplate::parse("{{ 'ok' }}\n{% for m in messages %}\n{{ range(m.n) | length }}\n{% endfor %}");
  ASSERT_TRUE(t.ok()) << t.error().str();
  ChatInputs in;
  in.messages = ordered_json::parse(R"([{"n": 5}, {"n": 5000000}])");
  auto r = t->render(in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().what,
            "chat template line 3: range() too big: range(5000000) has 5000000 items, over the limit of 100000 "
            "(Limits::max_range)");
  EXPECT_NE(r.error().hint.find("sandbox"), std::string::npos) << r.error().hint;
  EXPECT_NE(r.error().str().find("--template"), std::string::npos) << r.error().str();
}

// The limits are configurable, and the messages give the configured values.
TEST(TemplateSandbox, ConfiguredLimitsAreTheOnesEnforced) {
  TemplateLimits lim;
  lim.max_range = 10;
  lim.max_iterations = 50;
  lim.max_output = 100;
  lim.max_string = 64;
  lim.max_items = 20;
  lim.max_depth = 5;
  lim.max_nesting = 8;
  lim.max_eval_depth = 30;
  lim.max_source = 200;
  EXPECT_NE(run("{{ range(11) }}", {}, lim).text.find("over the limit of 10 (Limits::max_range)"), std::string::npos);
  EXPECT_EQ(run("{{ range(10)|length }}", {}, lim).text, "10");
  EXPECT_NE(run("{% for i in range(10) %}{% for j in range(10) %}{% endfor %}{% endfor %}", {}, lim).text.find("more than 50 iterations"),
            std::string::npos);
  EXPECT_NE(run("{% for i in range(10) %}0123456789abcdef{% endfor %}", {}, lim).text.find("exceed 100 bytes (Limits::max_output)"),
            std::string::npos);
  EXPECT_NE(run("{{ 'x' * 65 }}", {}, lim).text.find("over the limit of 64 (Limits::max_string)"), std::string::npos);
  EXPECT_NE(run("{{ [1] * 21 }}", {}, lim).text.find("over the limit of 20 (Limits::max_items)"), std::string::npos);
  EXPECT_NE(run("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", {}, lim).text.find("deeper than 5 (Limits::max_depth)"),
            std::string::npos);
  EXPECT_NE(run("{{ (((((((((1))))))))) }}", {}, lim).text.find("deeper than 8 levels (Limits::max_nesting)"), std::string::npos);
  EXPECT_NE(run("{{ [[[[[[[[1]]]]]]]] }}", {}, lim).text.find("Limits::max_nesting"), std::string::npos);
  EXPECT_EQ(run("{{ [[[[[[[1]]]]]]] }}", {}, lim).text, "[[[[[[[1]]]]]]]");
  EXPECT_NE(run("{{ x }}", {{"x", deep_json(9)}}, lim).text.find("deeper than 8 levels (Limits::max_nesting)"), std::string::npos);
  EXPECT_NE(run(std::string(201, 'x'), {}, lim).text.find("201 bytes, over the limit of 200"), std::string::npos);
  lim = {};
  lim.max_eval_depth = 30;
  EXPECT_NE(run("{% macro f(n) %}{{ [[[f(n)]]] }}{% endmacro %}{{ f(0) }}", {}, lim).text.find("more than 30 deep"),
            std::string::npos);
  lim = {};
  lim.max_steps = 1000;
  EXPECT_NE(run("{% for i in range(1000) %}{% endfor %}", {}, lim).text.find("more than 1000 steps (Limits::max_steps)"),
            std::string::npos);
  lim = {};
  lim.max_bytes = 1000;
  EXPECT_NE(run("{% set s = 'a' * 600 %}{{ s }}{{ s }}", {}, lim).text.find("more than 1000 bytes of strings (Limits::max_bytes)"),
            std::string::npos);
}

// Building the prompt piece by piece (`{% set ns.out = ns.out ~ ... %}`, as many real templates
// do) appends in place: a long conversation stays far inside the limits, and the result is what
// Jinja2 gives even when a piece changes the accumulator itself.
TEST(TemplateSandbox, AccumulatingTemplatesStayLinear) {
  std::string tpl =
      "{% set ns = namespace(out='', n=0) %}"
      "{% for m in messages %}{% set ns.out = ns.out ~ '<' ~ m.role ~ '>' ~ m.content ~ '\\n' %}{% endfor %}"
      "{{ ns.out|length }}";
  ChatInputs in;
  for (int k = 0; k < 5000; ++k) in.messages.push_back({{"role", "user"}, {"content", std::string(2000, 'a')}});
  auto t = ChatTemplate::parse(tpl);
  ASSERT_TRUE(t.ok());
  auto t0 = std::chrono::steady_clock::now();
  auto r = t->render(in);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.error().str();
  EXPECT_EQ(*r, std::to_string(5000 * (2000 + 7)));
  EXPECT_LT(s, kBound);
  // A piece that changes the accumulator: the left side is the value from before the pieces ran.
  EXPECT_EQ(run("{% set ns = namespace(s='a') %}{% macro m() %}{% set ns.s = 'X' %}b{% endmacro %}"
                "{% set ns.s = ns.s ~ m() ~ ns.s %}{{ ns.s }}").text,
            "abX");
  EXPECT_EQ(run("{% set ns = namespace(s='a') %}{% macro m() %}{% set ns.s = ns.s ~ 'y' %}b{% endmacro %}"
                "{% set ns.s = ns.s ~ m() %}{{ ns.s }}").text,
            "ab");
  EXPECT_NE(run("{% set ns = namespace(s='a') %}{% set ns.s = ns.s + 1 %}").text.find("TypeError: unsupported operand types for +"),
            std::string::npos);
  EXPECT_EQ(run("{% set ns = namespace(s='a') %}{% set ns.s = ns.s + 'b' ~ 1 %}{{ ns.s }}").text, "ab1");
  EXPECT_EQ(run("{% set ns = namespace(s=1) %}{% set ns.s = ns.s + 2 %}{{ ns.s }}").text, "3");
}
