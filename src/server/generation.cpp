#include "server/generation.h"

#include <algorithm>

#include "base/log.h"

namespace rs::server {

ApiError scheduler_failure(sched::ErrorCause cause, const std::string& message) {
  switch (cause) {
    case sched::ErrorCause::kRequest: return api_error(400, "invalid_request_error", message);
    case sched::ErrorCause::kOverloaded: return server_error(503, message, "out_of_memory");
    case sched::ErrorCause::kServer: break;
  }
  return server_error(500, message);
}

Generation::Generation(const ServingModel& model, const GenerationOptions& options,
                       std::vector<std::vector<int32_t>> prompts, int32_t max_new_tokens, uint64_t first_request_id,
                       sched::Scheduler& scheduler, ServerMetrics& metrics)
    : model_(model),
      options_(options),
      prompts_(std::move(prompts)),
      max_new_tokens_(max_new_tokens),
      first_request_id_(first_request_id),
      scheduler_(scheduler),
      metrics_(metrics) {
  const size_t count = prompts_.size() * options_.n;
  choices_.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    choices_.push_back(Choice(first_request_id_ + i, model_.text.stream(options_.skip_special_tokens),
                              StopMatcher(options_.stop, options_.include_stop_str)));
    if (options_.echo) {
      TextStream prompt_text = model_.text.stream(options_.skip_special_tokens);
      for (int32_t token : prompts_[i / options_.n]) choices_.back().echo += prompt_text.push(token);
      choices_.back().echo += prompt_text.flush();
    }
    if (options_.parse_tool_calls && model_.tool_call_format && !model_.harmony.enabled()) {
      choices_.back().tools.emplace(*model_.tool_call_format, options_.tools.is_null() ? nullptr : &options_.tools);
    }
    if (!options_.separate_reasoning) continue;
    if (model_.harmony.enabled())
      choices_.back().harmony.emplace(model_.harmony, options_.parse_tool_calls);
    else if (model_.reasoning.enabled())
      choices_.back().reasoning.emplace(model_.reasoning.open, model_.reasoning.close,
                                        prompt_opens_reasoning(prompts_[i / options_.n]));
  }
}

// Whether the prompt leaves a reasoning block open (templates that end the generation prompt with "<think>").
bool Generation::prompt_opens_reasoning(const std::vector<int32_t>& prompt) const {
  const auto last = [&prompt](int32_t id) {
    const auto it = std::find(prompt.rbegin(), prompt.rend(), id);
    return it == prompt.rend() ? int64_t{-1} : static_cast<int64_t>(prompt.rend() - it);
  };
  return last(model_.reasoning.open_id) > last(model_.reasoning.close_id);
}

Generation::~Generation() { abort(); }

bool Generation::submit() {
  std::vector<int32_t> stop_ids = options_.stop_token_ids;
  if (!options_.ignore_eos) stop_ids.insert(stop_ids.end(), model_.eos_token_ids.begin(), model_.eos_token_ids.end());
  for (size_t c = 0; c < choices_.size(); ++c) {
    auto request = std::make_unique<sched::Request>();
    request->id = choices_[c].request_id;
    request->prompt_ids = prompts_[c / options_.n];
    request->sampling = options_.sampling;
    // n choices of one seeded call must differ from each other yet repeat across calls.
    if (request->sampling.seed) *request->sampling.seed += c % options_.n;
    request->max_new_tokens = max_new_tokens_;
    request->stop_token_ids = stop_ids;
    request->stream = stream_;
    request->choice_index = static_cast<int32_t>(c);
    request->arrival = arrival_;
    if (options_.grammar) {
      request->grammar = std::make_unique<grammar::GrammarMatcher>(options_.grammar);
      // A reasoning model thinks freely; the structure starts after it closes the reasoning block. When the prompt
      // neither opened nor closed one, the model may open it with its first token or answer at once.
      if (options_.separate_reasoning && model_.reasoning.enabled()) {
        const std::vector<int32_t>& prompt = prompts_[c / options_.n];
        const bool has_open = std::find(prompt.begin(), prompt.end(), model_.reasoning.open_id) != prompt.end();
        // (A prompt that closed it, as Qwen3's with thinking off does, is constrained from the start.)
        if (prompt_opens_reasoning(prompt) || !has_open) request->grammar_after_token = model_.reasoning.close_id;
        if (!has_open) request->grammar_or_token = model_.reasoning.open_id;
      }
    }
    if (!scheduler_.submit(std::move(request))) {
      abort();
      return false;
    }
    choices_[c].submitted = true;
  }
  return true;
}

void Generation::abort() {
  for (Choice& choice : choices_) {
    if (!choice.submitted || choice.finished) continue;
    scheduler_.abort(choice.request_id);
    choice.finished = true;
    ++num_finished_;
  }
}

std::vector<ChoiceDelta> Generation::poll(std::chrono::milliseconds timeout) {
  std::vector<ChoiceDelta> deltas;
  auto event = stream_->events.pop_for(timeout);
  while (event) {
    apply(*event, deltas);
    event = stream_->events.try_pop();  // take everything already there: fewer, larger writes
  }
  return deltas;
}

void Generation::apply(sched::TokenEvent& event, std::vector<ChoiceDelta>& deltas) {
  if (event.choice_index < 0 || event.choice_index >= num_choices()) return;
  Choice& choice = choices_[event.choice_index];
  if (choice.finished) return;  // ended by a stop string; the scheduler's remaining events are moot
  if (event.prompt_tokens > 0) {
    choice.prompt_tokens = event.prompt_tokens;
    choice.cached_tokens = event.cached_tokens;
  }
  if (event.queue_seconds >= 0) metrics_.queue_time.observe(event.queue_seconds);
  choice.speculative = event.speculative;
  ChoiceDelta delta;
  delta.index = event.choice_index;
  delta.prompt_logprobs = std::move(event.prompt_logprobs);
  const auto now = Clock::now();
  const bool ends_on_stop_token = event.finished && event.stop_token;
  for (size_t t = 0; t < event.tokens.size() && !choice.finished; ++t) {
    const engine::SampledToken& token = event.tokens[t];
    if (!first_token_) first_token_ = now;
    if (choice.completion_tokens++ == 0)
      metrics_.time_to_first_token.observe(std::chrono::duration<double>(now - arrival_).count());
    else
      metrics_.inter_token_latency.observe(std::chrono::duration<double>(now - choice.last_token).count());
    choice.last_token = now;
    if (ends_on_stop_token && t + 1 == event.tokens.size()) break;  // EOS and stop ids add no text
    delta.token_ids.push_back(token.token_id);
    delta.sampled.push_back(token);
    add_token_text(choice, token.token_id, delta);
    if (choice.stop.stopped()) {
      scheduler_.abort(choice.request_id);
      end_choice(choice, delta, "stop");
    }
  }
  if (event.finished && !choice.finished) {
    switch (event.finish_reason) {
      case sched::FinishReason::kStop: end_choice(choice, delta, "stop"); break;
      case sched::FinishReason::kLength: end_choice(choice, delta, "length"); break;
      default:
        // kError, or kAbort from a shutting-down scheduler: the call fails.
        error_ = event.error.empty() ? std::string("the request was aborted") : event.error;
        error_cause_ =
            event.finish_reason == sched::FinishReason::kError ? event.error_cause : sched::ErrorCause::kServer;
        RS_LOG_WARN("rid={} failed: {}", choice.request_id, *error_);
        abort();
        end_choice(choice, delta, "");
    }
  }
  if (choice.reasoning) {  // split what this event released; at the end, also what the parser still held
    ReasoningParser::Split split = choice.reasoning->feed(delta.text);
    if (choice.finished) {
      ReasoningParser::Split rest = choice.reasoning->finish();
      split.reasoning += rest.reasoning;
      split.content += rest.content;
    }
    delta.text = std::move(split.content);
    delta.reasoning = std::move(split.reasoning);
  }
  if (choice.tools) {  // tool calls are read from the reply
    ToolCallParser::Output out = choice.tools->feed(delta.text);
    if (choice.finished) {
      ToolCallParser::Output rest = choice.tools->finish();
      out.content += rest.content;
      for (auto& call : rest.calls) out.calls.push_back(std::move(call));
    }
    delta.text = std::move(out.content);
    for (auto& call : out.calls) delta.tool_calls.push_back(std::move(call));
  }
  delta.first_tool_index = choice.tool_calls;
  choice.tool_calls += static_cast<int32_t>(delta.tool_calls.size());
  if (delta.finish_reason == "stop" && choice.tool_calls > 0) delta.finish_reason = "tool_calls";
  if (!choice.echo.empty()) {  // the prompt comes first, outside stop-string matching
    delta.text = std::move(choice.echo) + delta.text;
    choice.echo.clear();
  }
  if (!delta.text.empty() || !delta.reasoning.empty() || !delta.tool_calls.empty() || !delta.token_ids.empty() ||
      !delta.finish_reason.empty() || !delta.prompt_logprobs.empty())
    deltas.push_back(std::move(delta));
}

void Generation::add_token_text(Choice& choice, int32_t token, ChoiceDelta& delta) {
  // Below min_tokens no stop applies (vLLM): stop strings are matched in the text of later tokens.
  const bool match_stops = choice.completion_tokens >= options_.sampling.min_tokens;
  if (!choice.harmony) {
    const std::string text = choice.text.push(token);
    delta.text += match_stops ? choice.stop.push(text) : text;
    return;
  }
  // Stop strings apply to the reply (content), not to the reasoning.
  auto route_text = [&](HarmonyParser::Route route, const std::string& text) {
    if (route == HarmonyParser::Route::kReasoning) delta.reasoning += text;
    if (route == HarmonyParser::Route::kContent) delta.text += match_stops ? choice.stop.push(text) : text;
    if (route == HarmonyParser::Route::kToolCall) choice.tool_arguments += text;
  };
  const HarmonyParser::Route route =
      choice.harmony->push(token, choice.harmony->reading_header() ? model_.text.token_text(token) : std::string());
  if (choice.harmony->message_ended()) {
    route_text(choice.harmony->last_route(), choice.text.flush());
    if (choice.harmony->last_route() == HarmonyParser::Route::kToolCall) end_harmony_call(choice, delta);
  }
  if (route != HarmonyParser::Route::kNone) route_text(route, choice.text.push(token));
}

void Generation::end_harmony_call(Choice& choice, ChoiceDelta& delta) {
  delta.tool_calls.push_back({choice.harmony->function(), std::move(choice.tool_arguments)});
  choice.tool_arguments.clear();
}

void Generation::end_choice(Choice& choice, ChoiceDelta& delta, const std::string& reason) {
  if (choice.harmony && !choice.stop.stopped()) {  // the last message ended (<|return|>, <|call|>) or was cut off
    const std::string rest = choice.text.flush();
    switch (choice.harmony->current_route()) {
      case HarmonyParser::Route::kReasoning: delta.reasoning += rest; break;
      case HarmonyParser::Route::kToolCall:
        choice.tool_arguments += rest;
        if (reason == "stop") end_harmony_call(choice, delta);  // a call cut off by max_tokens is not a call
        break;
      default: delta.text += choice.stop.push(rest);
    }
  }
  if (!choice.stop.stopped()) delta.text += choice.stop.push(choice.text.flush());
  delta.text += choice.stop.flush();
  delta.finish_reason = reason;
  delta.stop_sequence = choice.stop.matched();
  choice.finish_reason = reason;
  if (!choice.finished) {
    choice.finished = true;
    ++num_finished_;
  }
  if (done() && !error_) metrics_.request_latency.observe(seconds_since(arrival_));
}

double Generation::seconds_to_first_token() const {
  return first_token_ ? std::chrono::duration<double>(*first_token_ - arrival_).count() : -1.0;
}

std::string Generation::finish_reasons() const {
  std::string out;
  for (const Choice& choice : choices_) {
    const std::string reason = choice.finished ? choice.finish_reason : "abort";
    if (("," + out + ",").find("," + reason + ",") != std::string::npos) continue;
    out += (out.empty() ? "" : ",") + reason;
  }
  return out;
}

Usage Generation::usage() const {
  Usage usage;
  for (size_t c = 0; c < choices_.size(); ++c) {
    usage.completion_tokens += choices_[c].completion_tokens;
    usage.speculative.verifies += choices_[c].speculative.verifies;
    usage.speculative.drafted += choices_[c].speculative.drafted;
    usage.speculative.accepted += choices_[c].speculative.accepted;
    if (c % options_.n != 0) continue;  // a prompt counts once, whatever n is
    usage.prompt_tokens += static_cast<int64_t>(prompts_[c / options_.n].size());
    usage.cached_tokens += choices_[c].cached_tokens;
  }
  return usage;
}

}  // namespace rs::server
