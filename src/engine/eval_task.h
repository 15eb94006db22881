// Multi-document reading tasks for quality evaluation (`hypic eval`): the records written by
// tools/tiny/gen_data.py and the scoring the model card uses.
//
// A record's prompt is the engine's PIC layout (engine/prompt.h): system prefix, one segment
// per document ("Document: {title}\n{text}\n\n"), suffix "Question: {question}" + the
// assistant header. The reference reply is "Answer: {reply}": the record's reply restates the
// fact(s) ("The mayor of Brennwick is Tova Lindqvar"), or is the answer itself (older files
// and aggregation tasks); scoring reads the value(s) back (normalize_answer).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace hypic {

struct EvalRecord {
  std::string id;
  std::string task;  // single | two_hop | aggregate
  std::string kind;  // e.g. person.birth_year
  std::string system;
  std::vector<std::string> segments;  // rendered documents, in prompt order
  std::string query;                  // "Question: ..."
  std::string answer;                 // gold answer (without "Answer:")
  std::string reply;                  // reference reply text (the record's "reply", else answer)
};

// Reads a JSONL file of gen_data records. Errors name the file and line.
Result<std::vector<EvalRecord>> load_eval_records(const std::string& path);

// gen_data.normalize_answer: drops <|im_end|> and a leading "Answer:", collapses whitespace,
// reads values back from restated facts ("The mayor of X is V. The river of Y is W" →
// "v, w"; split at ". The ", the text after each part's last " is "), drops a trailing
// period, lower-cases.
std::string normalize_answer(const std::string& s);

// Token-level F1 between normalised answers (words split on spaces and commas); 1 when both
// are empty.
double answer_f1(const std::string& prediction, const std::string& gold);

}  // namespace hypic
