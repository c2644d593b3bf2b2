// POST /v1/chat/completions and /v1/completions: parse and check the request on the HTTP thread,
// queue its choices on the engine loop, then answer in one body or as Server-Sent Events.
#include <algorithm>
#include <chrono>

#include "server/http_server.h"
#include "server/openai_response.h"

namespace ggflow::server {

namespace {

constexpr auto kKeepAlive = std::chrono::milliseconds(1000);  // SSE comment interval while waiting

// The candidates of a request as submissions: prompt-major, candidate i of a prompt seeded seed + i
// (best_of > n: each records its tokens' log-probabilities, which choose the answers).
std::vector<Submission> submissions(const GenerationRequest& r, const ModelLease& model, const std::shared_ptr<RequestHandle>& handle) {
  std::vector<Submission> out;
  for (size_t p = 0; p < r.prompts.size(); ++p)
    for (int32_t i = 0; i < r.candidates(); ++i) {
      Submission s;
      s.index = int32_t(p) * r.candidates() + i;
      s.prompt = r.prompts[p].ids;
      s.params = r.params;
      if (r.best_of > r.n && s.params.logprobs < 0) s.params.logprobs = 0;
      s.constraint = r.constraint;
      s.lora = model.lora();
      s.adapter = model.adapter();
      if (s.params.seed) s.params.seed = *s.params.seed + uint64_t(i);
      s.handle = handle;
      out.push_back(std::move(s));
    }
  return out;
}

// Applies an event to its choice's state.
void apply(ChoiceState& c, RequestEvent& e) {
  c.text += e.text;
  c.tokens.insert(c.tokens.end(), e.tokens.begin(), e.tokens.end());
  c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
  if (e.prompt_scored) c.prompt_logprobs = e.prompt_logprobs;
  if (e.done) {
    c.done = true;
    c.finish = e.finish;
    c.error = e.error;
    c.usage = e.usage;
  }
}

std::vector<ChoiceState> initial_choices(const GenerationRequest& r) {
  std::vector<ChoiceState> choices;
  for (int64_t i = 0; i < r.num_candidates(); ++i) choices.push_back(new_choice(r));
  if (!r.chat && r.echo)
    for (size_t i = 0; i < choices.size(); ++i) {
      choices[i].text = r.prompts[i / size_t(r.candidates())].text;
      choices[i].text_offset = choices[i].text.size();
    }
  return choices;
}

// best_of: per prompt, the n candidates with the highest cumulative log-probability of their
// tokens, most likely first (vLLM's rule; ties keep the candidate order); their recorded
// log-probabilities dropped when the request did not ask for them.
std::vector<ChoiceState> best_choices(const GenerationRequest& r, std::vector<ChoiceState>& all) {
  std::vector<ChoiceState> out;
  const size_t k = size_t(r.candidates());
  for (size_t p = 0; p < r.prompts.size(); ++p) {
    std::vector<std::pair<double, size_t>> ranked;
    for (size_t i = 0; i < k; ++i) {
      double sum = 0;
      for (const auto& l : all[p * k + i].logprobs) sum += l.chosen.logprob;
      ranked.push_back({sum, i});
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (int32_t j = 0; j < r.n; ++j) {
      ChoiceState c = std::move(all[p * k + ranked[size_t(j)].second]);
      if (r.params.logprobs < 0) c.logprobs.clear();
      out.push_back(std::move(c));
    }
  }
  return out;
}

int64_t completion_tokens(const std::vector<ChoiceState>& choices) {
  int64_t n = 0;
  for (const auto& c : choices) n += int64_t(c.tokens.size());
  return n;
}

}  // namespace

void Server::generate(const std::string& text, httplib::Response& res, bool chat) {
  Json body;
  if (auto e = parse_body(text, body)) return send_error(res, *e);
  auto model = generative(body, res);
  if (!model) return;
  auto r = std::make_shared<GenerationRequest>();
  if (auto e = chat ? parse_chat_request(body, model->info(), *r) : parse_completion_request(body, model->info(), *r))
    return send_error(res, *e);

  auto handle = std::make_shared<RequestHandle>();
  switch (model->loop().submit(submissions(*r, *model, handle))) {
    case EngineLoop::Admission::Accepted: break;
    case EngineLoop::Admission::QueueFull:
      res.set_header("Retry-After", "1");
      return send_error(res, {429, "rate_limit_error", "queue_full", "",
                              "the server's queue is full (--max-queue); retry after a second or on another replica"});
    case EngineLoop::Admission::Draining:
      return send_error(res, {503, "server_error", "shutting_down", "", "the server is shutting down; retry on another replica"});
  }
  if (r->stream) return generate_stream(r, std::move(model), handle, res);
  generate_blocking(*r, *model, handle, res);
}

// vLLM's /v1/chat/completions/render and /v1/completions/render: the request parsed and checked
// exactly as generation parses it (the same errors), answered with the prompt's token ids instead
// of run. vllm-router's cache-aware policy routes by these ids.
void Server::render(const std::string& text, httplib::Response& res, bool chat) {
  Json body;
  if (auto e = parse_body(text, body)) return send_error(res, *e);
  auto model = generative(body, res);
  if (!model) return;
  GenerationRequest r;
  if (auto e = chat ? parse_chat_request(body, model->info(), r) : parse_completion_request(body, model->info(), r))
    return send_error(res, *e);
  auto rendered = [](const PromptInput& p) { return Json{{"token_ids", p.ids}, {"prompt", p.text}}; };
  if (chat) return send_json(res, rendered(r.prompts[0]));
  Json out = Json::array();
  for (const auto& p : r.prompts) out.push_back(rendered(p));
  send_json(res, out);
}

void Server::generate_blocking(const GenerationRequest& r, const ModelLease& model, std::shared_ptr<RequestHandle> handle,
                               httplib::Response& res) {
  std::vector<ChoiceState> choices = initial_choices(r);
  size_t done = 0;
  while (done < choices.size())
    for (auto& e : handle->wait(kKeepAlive)) {
      apply(choices[size_t(e.index)], e);
      done += e.done;
    }
  for (auto& c : choices)  // the tool-call parsers get the whole answer
    if (c.tools) {
      c.tools->push(c.text);
      c.tools->finish();
    }
  res.set_header("X-Ggflow-Completion-Tokens", std::to_string(completion_tokens(choices)));
  for (const auto& c : choices)
    if (c.finish == text::FinishReason::Error)
      return send_error(res, {500, "server_error", "generation_failed", "", "the generation failed: " + c.error});
  const ModelInfo& info = model.info();
  if (r.best_of <= r.n) return send_json(res, response_json(new_head(r, info.name), r, choices, info.format->tokenizer()));
  // best_of: usage counts every candidate's tokens (as OpenAI bills them), the answer the best n
  GenerationRequest all = r;
  all.n = r.candidates();
  const Json usage = usage_json(all, choices);
  Json out = response_json(new_head(r, info.name), r, best_choices(r, choices), info.format->tokenizer());
  out["usage"] = usage;
  send_json(res, out);
}

// The stream holds the model's lease until it ends (its release callback).
void Server::generate_stream(std::shared_ptr<const GenerationRequest> r, std::shared_ptr<ModelLease> model,
                             std::shared_ptr<RequestHandle> handle, httplib::Response& res) {
  struct Stream {
    ResponseHead head;
    std::vector<ChoiceState> choices;
    size_t done = 0;
    bool opened = false;
  };
  auto st = std::make_shared<Stream>();
  st->head = new_head(*r, model->info().name);
  st->choices = initial_choices(*r);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  httplib::Response* resp = &res;  // outlives the provider: the access log reads the token count
  EngineLoop* loop = &model->loop();
  const text::Tokenizer* tok = &model->info().format->tokenizer();

  auto provider = [r, handle, st, loop, tok, resp](size_t, httplib::DataSink& sink) -> bool {
    auto send = [&](const Json& chunk) {
      const std::string line = "data: " + dump(chunk) + "\n\n";
      return sink.write(line.data(), line.size());
    };
    if (!st->opened) {  // the opening chunks: the assistant role (chat), the echoed prompt (completions)
      st->opened = true;
      Json open = Json::array();
      for (size_t i = 0; i < st->choices.size(); ++i) {
        if (r->chat)
          open.push_back({{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
        else if (r->echo && r->params.prompt_logprobs < 0)  // with them: once the prompt is scored
          open.push_back({{"index", i}, {"text", st->choices[i].text}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
      }
      if (!open.empty() && !send(chunk_json(st->head, *r, open))) return false;
    }
    auto events = handle->wait(kKeepAlive);
    if (events.empty()) {  // nothing yet: a comment, which also finds a client that went away
      static const char kPing[] = ": keep-alive\n\n";
      return sink.write(kPing, sizeof(kPing) - 1);
    }
    for (auto& e : events) {
      ChoiceState& c = st->choices[size_t(e.index)];
      if (e.prompt_scored) {  // echo + logprobs: the prompt's chunk, with its log-probabilities
        const PromptInput& prompt = r->prompts[size_t(e.index) / size_t(r->candidates())];
        Json open = {{"index", e.index}, {"text", prompt.text}, {"logprobs", prompt_logprobs_json(*tok, prompt.ids, e.prompt_logprobs)},
                     {"finish_reason", nullptr}};
        if (!send(chunk_json(st->head, *r, Json::array({open})))) return false;
      }
      Json choice = chunk_choice(*r, e, *tok, c);
      apply(c, e);
      st->done += e.done;
      if (e.done && e.finish == text::FinishReason::Error)
        choice["error"] = {{"message", "the generation failed: " + e.error}, {"type", "server_error"}};
      // Nothing to say yet (a tool-call parser may hold text back until it knows what it is).
      if (!e.done && e.logprobs.empty() && (r->chat ? choice["delta"].empty() : e.text.empty())) continue;
      if (!send(chunk_json(st->head, *r, Json::array({choice})))) return false;
    }
    if (st->done < st->choices.size()) return true;
    if (r->include_usage) {
      Json last = chunk_json(st->head, *r, Json::array());
      last["usage"] = usage_json(*r, st->choices);
      if (!send(last)) return false;
    }
    static const char kDone[] = "data: [DONE]\n\n";
    if (!sink.write(kDone, sizeof(kDone) - 1)) return false;
    resp->set_header("X-Ggflow-Completion-Tokens", std::to_string(completion_tokens(st->choices)));
    sink.done();
    return true;
  };
  // Called when the response ends; not `success` means the client went away (or a write
  // failed): the request is cancelled, its blocks freed within one engine step.
  auto release = [handle, st, loop, model](bool success) mutable {
    if (!success || st->done < st->choices.size()) loop->cancel(handle);
    model.reset();
  };
  res.set_chunked_content_provider("text/event-stream", provider, release);
}

}  // namespace ggflow::server
