// Statements of the interpreter (see jinja_interp.h): output, if, for with loop.*, set, macro,
// call and filter blocks, break/continue; plus scopes and the sandbox limits.
#include "text/jinja_interp.h"

namespace ggflow::jinja {

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

Interpreter::Interpreter(Limits limits, std::function<std::string(const std::string&)> strftime_now)
    : limits_(limits), strftime_now_(std::move(strftime_now)) {}

void Interpreter::count_iterations(int64_t n, int line) {
  iterations_ += n;
  if (iterations_ > limits_.max_iterations)
    throw TemplateError("loop iteration limit exceeded (" + std::to_string(limits_.max_iterations) +
                            " iterations)", line);
}

void Interpreter::emit(const std::string& s, int line) {
  out_->append(s);
  if (out_->size() > limits_.max_output)
    throw TemplateError("output size limit exceeded (" + std::to_string(limits_.max_output) + " bytes)", line);
}

std::string Interpreter::render(const Program& program, const Value& globals) {
  auto root = std::make_shared<Scope>();
  auto builtins = std::make_shared<Scope>();
  builtins->vars["namespace"] = Value::callable("namespace", [](Interpreter&, CallArgs& a) {
    Value ns = Value::make_namespace();
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
    for (const Value& v : a.positional)
      if (v.kind != Kind::Int && v.kind != Kind::Bool)
        throw TemplateError("range() takes integers, got " + v.type_name(), a.line);
    if (a.positional.size() == 1) stop = a.positional[0].i;
    else if (a.positional.size() >= 2) {
      start = a.positional[0].i;
      stop = a.positional[1].i;
      if (a.positional.size() >= 3) step = a.positional[2].i;
    } else throw TemplateError("range() needs arguments", a.line);
    if (step == 0) throw TemplateError("range() step must not be zero", a.line);
    List items;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (int64_t(items.size()) >= in.limits().max_range)
        throw TemplateError("range() too big (limit " + std::to_string(in.limits().max_range) + " items)", a.line);
      items.push_back(Value::integer(k));
    }
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

void Interpreter::exec_set(const Stmt& s) {
  Value v = eval(*s.expr);
  if (!s.attr.empty()) {
    const Value* ns = scope_->find(s.targets[0]);
    if (!ns || ns->kind != Kind::Namespace)
      throw TemplateError("cannot assign attribute '" + s.attr + "' on '" + s.targets[0] +
                              "': not a namespace", s.line);
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
    for (int64_t k = 0; k < n; ++k) {
      count_iterations(1, s.line);
      Value loop = Value::make_dict();
      Dict& d = *loop.dict;
      d.set("index", Value::integer(k + 1));
      d.set("index0", Value::integer(k));
      d.set("revindex", Value::integer(n - k));
      d.set("revindex0", Value::integer(n - k - 1));
      d.set("first", Value::boolean(k == 0));
      d.set("last", Value::boolean(k == n - 1));
      d.set("length", Value::integer(n));
      d.set("depth", Value::integer(1));
      d.set("depth0", Value::integer(0));
      d.set("previtem", k > 0 ? items[size_t(k - 1)] : Value::undefined("previtem"));
      d.set("nextitem", k + 1 < n ? items[size_t(k + 1)] : Value::undefined("nextitem"));
      d.set("cycle", Value::callable("cycle", [k](Interpreter&, CallArgs& a) {
        if (a.positional.empty()) throw TemplateError("loop.cycle() needs arguments", a.line);
        return a.positional[size_t(k) % a.positional.size()];
      }));
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
  return Value::callable(name, [def, closure, name](Interpreter& in, CallArgs& a) {
    if (in.depth_ >= in.limits_.max_depth)
      throw TemplateError("macro recursion depth limit exceeded (" + std::to_string(in.limits_.max_depth) +
                              " nested calls in '" + name + "')", a.line);
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
