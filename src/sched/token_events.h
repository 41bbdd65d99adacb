// The events a sequence streams to its request (TokenEvent): the first carries the prompt's figures, each carries
// the tokens a step kept, and the last says why the sequence ended.
#pragma once

#include <cstdint>
#include <string>

#include "sched/request.h"
#include "sched/sequence.h"

namespace rs::sched {

// An event for the tokens of this step; the sequence's first also carries its prompt figures (and prompt logprobs,
// moved out of the sequence).
TokenEvent start_event(Sequence& seq);
// Why `seq` ends after appending `token`: a stop token, its max_new_tokens or the context reached; else kNone.
FinishReason stop_reason(const Sequence& seq, int32_t token, int64_t context_length);
// The final event of a sequence that ends without a token (an error or an abort). cause (with kError): whose fault
// it is, which picks the HTTP status (request 400, server 500, memory 503).
TokenEvent final_event(const Sequence& seq, FinishReason reason, const std::string& error, ErrorCause cause);

}  // namespace rs::sched
