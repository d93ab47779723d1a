// ChatOutputParser's steps for the families read by markup_reader.h and
// harmony_reader.h (the rest of the class: output_parser.cc).

#include <string>
#include <utility>

#include "chat/output_parser.h"

namespace paceline::chat {

bool ChatOutputParser::StepMarkup(bool final) {
  using Event = internal::MarkupReader::Event;
  internal::MarkupReader::Result r = markup_.Next(buffer_, final);
  ConsumeRaw(r.consumed);
  switch (r.event) {
    case Event::kMore:
      FlushArguments();
      return false;
    case Event::kProgress:
      return true;
    case Event::kAnnounce:
      Announce(markup_.name(), markup_.id());
      return true;
    case Event::kCallDone:
      CommitCall();
      return true;
    case Event::kEnd:
    case Event::kContent:
      raw_.clear();
      state_ = State::kContent;
      skip_whitespace_ = true;
      return true;
    case Event::kBroken:
      FailCall();
      return true;
  }
  return false;
}

bool ChatOutputParser::StepHarmony(bool final) {
  using Event = internal::HarmonyReader::Event;
  internal::HarmonyReader::Result r = harmony_.Next(buffer_, final);
  switch (r.event) {
    case Event::kMore:
      FlushArguments();
      return false;
    case Event::kReasoning:
    case Event::kContent:
      raw_.clear();
      (r.event == Event::kReasoning ? out_.reasoning : out_.content)
          .append(buffer_, 0, r.consumed);
      buffer_.erase(0, r.consumed);
      return true;
    default:
      break;
  }
  ConsumeRaw(r.consumed);
  switch (r.event) {
    case Event::kHeader:
      raw_.clear();
      return true;
    case Event::kAnnounce:
      raw_.clear();
      Announce(harmony_.name(), "");
      return true;
    case Event::kCallDone:
      CommitCall();
      return true;
    case Event::kBroken:
      FailCall();
      state_ = State::kHarmony;
      return true;
    default:
      return true;  // kArguments: FlushArguments sends them
  }
}

std::string ChatOutputParser::TakeArguments() {
  if (state_ == State::kHarmony) return harmony_.TakeArguments();
  if (syntax_ != nullptr && state_ == State::kMarkup) {
    return markup_.TakeArguments();
  }
  return scanner_.TakeArguments();
}

}  // namespace paceline::chat
