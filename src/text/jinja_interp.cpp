// Statements of the interpreter (see jinja_interp.h): output, if, for with loop.*, set, macro,
// call and filter blocks, break/continue; plus scopes and the sandbox limits.
#include "text/jinja_interp.h"

#include <algorithm>

namespace ggflow::jinja {

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

Interpreter::Interpreter(Limits limits, std::function<std::string(const std::string&)> strftime_now)
    : limits_(limits), budget_(limits), strftime_now_(std::move(strftime_now)) {}

void Interpreter::count_iterations(int64_t n, int line) {
  iterations_ += n;
  budget_.charge_steps(n);
  if (iterations_ > limits_.max_iterations)
    throw TemplateError("loop iteration limit exceeded: the loops ran more than " +
                            std::to_string(limits_.max_iterations) + " iterations (Limits::max_iterations)",
                        line);
}

void Interpreter::emit(const std::string& s, int line) {
  if (s.size() > limits_.max_output - std::min(out_->size(), limits_.max_output))
    throw TemplateError("output size limit exceeded: the template output would exceed " +
                            std::to_string(limits_.max_output) + " bytes (Limits::max_output)",
                        line);
  budget_.charge_steps(int64_t(s.size() / 64));
  out_->append(s);
}

// Forget expired entries once the list has doubled since the last time (amortized O(1)).
template <class T>
static void track(std::vector<std::weak_ptr<T>>& list, const std::shared_ptr<T>& p) {
  if (list.size() >= 64 && (list.size() & (list.size() - 1)) == 0)
    list.erase(std::remove_if(list.begin(), list.end(), [](const std::weak_ptr<T>& w) { return w.expired(); }),
               list.end());
  list.push_back(p);
}

Value Interpreter::make_namespace() {
  Value ns = Value::make_namespace();
  track(namespaces_, ns.dict);
  return ns;
}

// Clears what macros captured and every namespace still alive: the cycles among them (a macro in
// the scope it captured, a namespace holding itself) go, and the values are freed one by one, never
// as one deep chain of destructors.
void Interpreter::release() noexcept {
  try {
    release_values();
  } catch (...) {  // out of memory for the lists below: what is left is freed when it can be
  }
  namespaces_.clear();
  captured_.clear();
  pins_.clear();
  scope_.reset();
}

void Interpreter::release_values() {
  std::vector<std::shared_ptr<Dict>> dicts;
  for (const auto& w : namespaces_)
    if (auto p = w.lock()) dicts.push_back(std::move(p));
  std::vector<std::shared_ptr<Scope>> scopes;
  for (const auto& w : captured_)
    if (auto p = w.lock()) scopes.push_back(std::move(p));
  if (scope_) scopes.push_back(scope_);
  for (auto& sc : scopes) {
    auto vars = std::move(sc->vars);
    sc->vars.clear();
  }
  for (auto& d : dicts) {
    auto items = std::move(d->items);
    d->items.clear();
  }
}

std::string Interpreter::render(const Program& program, const Value& globals) {
  budget_ = Budget(limits_);
  Budget::Install install(budget_);
  struct Release {
    Interpreter& in;
    ~Release() { in.release(); }
  } release_at_end{*this};
  auto root = std::make_shared<Scope>();
  auto builtins = std::make_shared<Scope>();
  builtins->vars["namespace"] = Value::callable("namespace", [](Interpreter& in, CallArgs& a) {
    Value ns = in.make_namespace();
    if (!a.positional.empty()) {
      if (!a.positional[0].is_dict()) throw TemplateError("namespace() takes a dict or keywords", a.line);
      for (const auto& kv : a.positional[0].dict->items) ns.dict->set(kv.first, kv.second);
    }
    for (const auto& kv : a.keywords) ns.dict->set(kv.first, kv.second);
    return ns;
  });
  builtins->vars["dict"] = Value::callable("dict", [](Interpreter&, CallArgs& a) {
    Value d = Value::make_dict();
    if (!a.positional.empty() && a.positional[0].is_dict())
      for (const auto& kv : a.positional[0].dict->items) d.dict->set(kv.first, kv.second);
    for (const auto& kv : a.keywords) d.dict->set(kv.first, kv.second);
    return d;
  });
  builtins->vars["range"] = Value::callable("range", [](Interpreter& in, CallArgs& a) {
    int64_t start = 0, stop = 0, step = 1;
    std::string args;
    for (const Value& v : a.positional) {
      if (v.kind != Kind::Int && v.kind != Kind::Bool)
        throw TemplateError("range() takes integers, got " + v.type_name(), a.line);
      args += (args.empty() ? "" : ", ") + v.str();
    }
    auto arg = [&](size_t k) { return a.positional[k].kind == Kind::Bool ? int64_t(a.positional[k].b) : a.positional[k].i; };
    if (a.positional.size() == 1) stop = arg(0);
    else if (a.positional.size() == 2 || a.positional.size() == 3) {
      start = arg(0);
      stop = arg(1);
      if (a.positional.size() == 3) step = arg(2);
    } else throw TemplateError("range() takes 1 to 3 arguments, got " + std::to_string(a.positional.size()), a.line);
    if (step == 0) throw TemplateError("range() step must not be zero", a.line);
    // The length first, in unsigned arithmetic (stop - start may not fit in 64 bits).
    uint64_t count = 0;
    if (step > 0 && start < stop) count = (uint64_t(stop) - uint64_t(start) - 1) / uint64_t(step) + 1;
    if (step < 0 && start > stop) count = (uint64_t(start) - uint64_t(stop) - 1) / (uint64_t(-(step + 1)) + 1) + 1;
    if (count > uint64_t(in.limits().max_range))
      throw TemplateError("range() too big: range(" + args + ") has " + std::to_string(count) +
                              " items, over the limit of " + std::to_string(in.limits().max_range) +
                              " (Limits::max_range)",
                          a.line);
    List items;
    items.reserve(size_t(count));
    for (uint64_t k = 0; k < count; ++k) items.push_back(Value::integer(int64_t(uint64_t(start) + k * uint64_t(step))));
    return Value::make_list(std::move(items));
  });
  builtins->vars["raise_exception"] = Value::callable("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
    throw TemplateError("raise_exception: " + a.get(0, "message").str(), a.line);
  });
  auto strf = strftime_now_;
  builtins->vars["strftime_now"] = Value::callable("strftime_now", [strf](Interpreter&, CallArgs& a) {
    return Value::string(strf(a.get(0, "format").str()));
  });
  root->parent = builtins;
  if (globals.is_mapping())
    for (const auto& kv : globals.dict->items) root->vars[kv.first] = kv.second;
  scope_ = root;
  std::string out;
  out_ = &out;
  iterations_ = 0;
  depth_ = 0;
  Flow f = exec(program.body);
  if (f != Flow::Normal) throw TemplateError("'break' or 'continue' outside a loop");
  return out;
}

Interpreter::Flow Interpreter::exec(const Body& body) {
  for (const auto& s : body) {
    Flow f = exec(*s);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Interpreter::capture(const Body& body, std::shared_ptr<Scope> scope) {
  std::string buf;
  std::string* saved_out = out_;
  auto saved_scope = scope_;
  out_ = &buf;
  scope_ = std::move(scope);
  try {
    exec(body);
  } catch (...) {
    out_ = saved_out;
    scope_ = saved_scope;
    throw;
  }
  out_ = saved_out;
  scope_ = saved_scope;
  return buf;
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
  Nested nested(*this, s.line);
  try {
    budget_.charge_steps(1);
    return exec_stmt(s);
  } catch (TemplateError& err) {
    if (!err.line) err.line = s.line;
    throw;
  }
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s) {
  switch (s.kind) {
    case SK::Text: emit(s.text, s.line); return Flow::Normal;
    case SK::Output: {
      Value v = eval(*s.expr);
      try {
        emit(v.str(), s.line);
      } catch (TemplateError& e) {
        if (!e.line) e.line = s.line;
        throw;
      }
      return Flow::Normal;
    }
    case SK::If:
      for (const auto& [cond, body] : s.branches)
        if (eval(*cond).truthy()) return exec(body);
      return exec(s.else_body);
    case SK::For: exec_for(s); return Flow::Normal;
    case SK::Set: exec_set(s); return Flow::Normal;
    case SK::SetBlock: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope_;
      Value v = Value::string(capture(s.body, inner));
      if (s.expr) {
        // Apply the filter chain to the captured text: walk the chain from the innermost filter.
        std::vector<const Expr*> chain;
        for (const Expr* f = s.expr.get(); f; f = f->kids.empty() ? nullptr : f->kids[0].get()) chain.push_back(f);
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
          CallArgs a = eval_args(**it, 1);
          v = filter((*it)->name, v, a, (*it)->line);
        }
      }
      assign(s.targets, v, s.line);
      return Flow::Normal;
    }
    case SK::Macro: {
      scope_->vars[s.name] = make_macro(s, scope_);
      return Flow::Normal;
    }
    case SK::CallBlock: {
      const Expr& call = *s.expr;
      Value fn = eval(*call.kids[0]);
      CallArgs a = eval_args(call, 1);
      a.keywords.emplace_back("caller", make_macro(s, scope_, &s));
      emit(this->call(fn, a, s.line).str(), s.line);
      return Flow::Normal;
    }
    case SK::FilterBlock: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope_;
      Value v = Value::string(capture(s.body, inner));
      std::vector<const Expr*> chain;
      for (const Expr* f = s.expr.get(); f; f = f->kids.empty() ? nullptr : f->kids[0].get()) chain.push_back(f);
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        CallArgs a = eval_args(**it, 1);
        v = filter((*it)->name, v, a, (*it)->line);
      }
      emit(v.str(), s.line);
      return Flow::Normal;
    }
    case SK::Break: return Flow::Break;
    case SK::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

void Interpreter::assign(const std::vector<std::string>& targets, const Value& v, int line) {
  if (targets.size() == 1) {
    scope_->vars[targets[0]] = v;
    return;
  }
  if (!v.is_list()) throw TemplateError("cannot unpack a " + v.type_name() + " into " +
                                            std::to_string(targets.size()) + " names", line);
  if (v.list->size() != targets.size())
    throw TemplateError("cannot unpack " + std::to_string(v.list->size()) + " values into " +
                            std::to_string(targets.size()) + " names", line);
  for (size_t k = 0; k < targets.size(); ++k) scope_->vars[targets[k]] = (*v.list)[k];
}

// A namespace attribute is about to change: an append in progress on it (append_in_place) keeps
// the value it started from.
void Interpreter::before_namespace_write(const Dict& d, const std::string& attr) {
  for (Pin* p : pins_)
    if (p->dict == &d && *p->attr == attr && !p->saved) {
      if (const Value* v = d.find(attr)) p->old = *v;
      p->saved = true;
    }
}

// `{% set ns.a = ns.a ~ x ~ y %}` (or `+`) is how many templates build their prompt, one piece per
// message. Copying ns.a each time makes that quadratic, in time and in the bytes counted against
// Limits::max_bytes. When ns.a is a plain string, the pieces are evaluated and appended in place;
// should a piece change ns.a meanwhile (a macro call setting it), ns.a's value from before was kept
// (before_namespace_write) and the result is computed from it, as Jinja2 would.
bool Interpreter::append_in_place(const Stmt& s) {
  std::vector<std::pair<const std::string*, const Expr*>> pieces;  // (operator, right operand)
  const Expr* e = s.expr.get();
  while (e->kind == EK::Binary && (e->name == "~" || e->name == "+")) {
    pieces.emplace_back(&e->name, e->kids[1].get());
    e = e->kids[0].get();
  }
  if (pieces.empty() || e->kind != EK::Attr || e->name != s.attr || e->kids[0]->kind != EK::Name ||
      e->kids[0]->name != s.targets[0])
    return false;
  const Value* ns = scope_->find(s.targets[0]);
  if (!ns || ns->kind != Kind::Namespace) return false;
  const Value* slot = ns->dict->find(s.attr);
  if (!slot || !slot->is_string() || slot->markup) return false;
  std::shared_ptr<Dict> dict = ns->dict;  // `ns` itself may be rebound by a piece
  std::reverse(pieces.begin(), pieces.end());
  std::vector<Value> vals;
  bool plain = true;  // `+` concatenates only a plain string (anything else: the operator decides)
  Pin pin{dict.get(), &s.attr, Value(), false};
  pins_.push_back(&pin);
  try {
    for (const auto& p : pieces) {
      vals.push_back(eval(*p.second));
      if (*p.first == "+" && (!vals.back().is_string() || vals.back().markup)) plain = false;
    }
  } catch (...) {
    pins_.pop_back();
    throw;
  }
  pins_.pop_back();
  before_namespace_write(*dict, s.attr);
  Dict& d = *dict;
  Value* target = d.find(s.attr);  // found again: a piece may have added attributes (and moved them)
  if (!plain || pin.saved) {
    Value acc = pin.saved ? pin.old : *target;
    for (size_t k = 0; k < pieces.size(); ++k) acc = binary_op(*pieces[k].first, acc, vals[k], s.line);
    d.set(s.attr, std::move(acc));
    return true;
  }
  std::vector<std::string> texts;
  size_t add = 0;
  for (size_t k = 0; k < pieces.size(); ++k) {
    texts.push_back(*pieces[k].first == "~" ? vals[k].str() : vals[k].s);
    add += texts.back().size();
  }
  check_string_size(target->s.size() + add, "the result of '~'");
  budget_.charge_bytes(add);
  budget_.charge_steps(int64_t(add / 64));
  for (const auto& t : texts) target->s += t;
  return true;
}

void Interpreter::exec_set(const Stmt& s) {
  if (!s.attr.empty() && append_in_place(s)) return;
  Value v = eval(*s.expr);
  if (!s.attr.empty()) {
    const Value* ns = scope_->find(s.targets[0]);
    if (!ns || ns->kind != Kind::Namespace)
      throw TemplateError("cannot assign attribute '" + s.attr + "' on '" + s.targets[0] +
                              "': not a namespace", s.line);
    before_namespace_write(*ns->dict, s.attr);
    ns->dict->set(s.attr, v);
    return;
  }
  assign(s.targets, v, s.line);
}

void Interpreter::exec_for(const Stmt& s) {
  Value seq = eval(*s.expr);
  List items;
  try {
    items = seq.iterate();
  } catch (TemplateError& e) {
    throw TemplateError(e.what(), s.line);
  }
  auto saved = scope_;
  scope_ = std::make_shared<Scope>();
  scope_->parent = saved;
  if (s.cond) {  // `for x in xs if cond`: filter first, so loop.length counts what remains
    List kept;
    for (const Value& it : items) {
      assign(s.targets, it, s.line);
      if (eval(*s.cond).truthy()) kept.push_back(it);
    }
    items = std::move(kept);
  }
  const int64_t n = int64_t(items.size());
  try {
    // One `loop` object per loop, updated in place each iteration (like Jinja2's LoopContext).
    auto index = std::make_shared<int64_t>(0);
    Value loop = Value::make_dict();
    Dict& d = *loop.dict;
    for (const char* key : {"index", "index0", "revindex", "revindex0", "first", "last", "length", "depth", "depth0",
                            "previtem", "nextitem", "cycle"})
      d.items.emplace_back(key, Value());
    d.items[6].second = Value::integer(n);
    d.items[7].second = Value::integer(1);
    d.items[8].second = Value::integer(0);
    d.items[11].second = Value::callable("cycle", [index](Interpreter&, CallArgs& a) {
      if (a.positional.empty()) throw TemplateError("loop.cycle() needs arguments", a.line);
      return a.positional[size_t(*index) % a.positional.size()];
    });
    for (int64_t k = 0; k < n; ++k) {
      count_iterations(1, s.line);
      *index = k;
      d.items[0].second = Value::integer(k + 1);
      d.items[1].second = Value::integer(k);
      d.items[2].second = Value::integer(n - k);
      d.items[3].second = Value::integer(n - k - 1);
      d.items[4].second = Value::boolean(k == 0);
      d.items[5].second = Value::boolean(k == n - 1);
      d.items[9].second = k > 0 ? items[size_t(k - 1)] : Value::undefined("previtem");
      d.items[10].second = k + 1 < n ? items[size_t(k + 1)] : Value::undefined("nextitem");
      d.depth = std::max({d.depth, d.items[9].second.depth() + 1, d.items[10].second.depth() + 1});
      scope_->vars["loop"] = loop;
      assign(s.targets, items[size_t(k)], s.line);
      Flow f = exec(s.body);
      if (f == Flow::Break) break;
    }
    if (n == 0) exec(s.else_body);
  } catch (...) {
    scope_ = saved;
    throw;
  }
  scope_ = saved;
}

Value Interpreter::make_macro(const Stmt& s, std::shared_ptr<Scope> closure, const Stmt* caller_of) {
  const Stmt* def = &s;
  std::string name = caller_of ? "caller" : s.name;
  track(captured_, closure);
  return Value::callable(name, [def, closure, name](Interpreter& in, CallArgs& a) {
    if (in.depth_ >= in.limits_.max_depth)
      throw TemplateError("macro recursion depth limit exceeded: calls of '" + name + "' nested deeper than " +
                              std::to_string(in.limits_.max_depth) + " (Limits::max_depth)",
                          a.line);
    in.budget_.charge_steps(10);  // a call costs about ten steps' time: a scope, its arguments, a capture
    auto scope = std::make_shared<Scope>();
    scope->parent = closure;
    auto saved = in.scope_;
    in.scope_ = scope;
    List varargs;
    try {
      for (size_t k = 0; k < def->params.size(); ++k) {
        const auto& [pname, pdef] = def->params[k];
        Value v;
        bool found = false;
        if (k < a.positional.size()) { v = a.positional[k]; found = true; }
        for (const auto& kw : a.keywords)
          if (kw.first == pname) { v = kw.second; found = true; }
        if (!found) v = pdef ? in.eval(*pdef) : Value::undefined(pname);
        scope->vars[pname] = v;
      }
      for (size_t k = def->params.size(); k < a.positional.size(); ++k) varargs.push_back(a.positional[k]);
      Value kwargs = Value::make_dict();
      for (const auto& kw : a.keywords) {
        bool is_param = kw.first == "caller";
        for (const auto& p : def->params) is_param = is_param || p.first == kw.first;
        if (!is_param) kwargs.dict->set(kw.first, kw.second);
        if (kw.first == "caller") scope->vars["caller"] = kw.second;
      }
      scope->vars["varargs"] = Value::make_list(std::move(varargs));
      scope->vars["kwargs"] = kwargs;
    } catch (...) {
      in.scope_ = saved;
      throw;
    }
    in.scope_ = saved;
    ++in.depth_;
    std::string text;
    try {
      text = in.capture(def->body, scope);
    } catch (...) {
      --in.depth_;
      throw;
    }
    --in.depth_;
    return Value::string(text);
  });
}

}  // namespace ggflow::jinja
