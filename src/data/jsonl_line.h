// JsonlLine: one line of a JSONL corpus for `crucible curate`, parsed with
// simdjson's On-Demand API: its "text" member (unescaped) and the other
// members kept as their JSON text, byte for byte, around where "text" was.
// Invalid UTF-8 is repaired first (as read_corpus does). One object per
// thread: the parser is reused from line to line (not thread-safe).
#pragma once
#include <string>
#include <string_view>

#include <memory>

namespace crucible::data {

// One JSONL line: its "text" (unescaped) and the other members, kept as
// their JSON text, byte for byte, around where "text" was. simdjson's
// On-Demand parser, reused from line to line.
class JsonlLine {
 public:
  JsonlLine();
  ~JsonlLine();
  JsonlLine(const JsonlLine&) = delete;
  JsonlLine& operator=(const JsonlLine&) = delete;

  std::string text, prefix, suffix, error;
  size_t repaired = 0;  // bad UTF-8 sequences replaced before parsing

  // `room`: readable bytes from line.data() on (>= line.size()). False, with
  // `error` set, when the line is not an object with a string "text".
  bool parse(std::string_view line, size_t room);

 private:
  bool fail();
  // simdjson's parser, kept out of the header: every simdjson inline lives
  // in jsonl_line.cc, so one translation unit allocates and frees its buffers.
  struct Parser;
  std::unique_ptr<Parser> parser_;
};

}  // namespace crucible::data
