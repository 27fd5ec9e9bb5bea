// Benchmark datasets (../datasets, see its README.md) read into one item type.
//
//     std::vector<editspec::dataset_item> items;
//     std::string err;
//     if (!editspec::dataset_load("datasets/canitedit/normalized.jsonl", editspec::DATASET_KIND_AUTO, items, &err)) {
//         fprintf(stderr, "%s\n", err.c_str());   // "...normalized.jsonl:17: missing field 'code_after'"
//     }
//     editspec::dataset_text t = editspec::dataset_raw_layout(items[0], editspec::INSTRUCTION_KIND_DESCRIPTIVE);
//     // t.context = instruction_descriptive + "\n" + code_before, t.reference = code_after
//
// Formats (one JSON object per line, blank lines skipped):
//
//   kind          file                                  fields read
//   canitedit     canitedit/normalized.jsonl            id, instruction_descriptive, instruction_lazy,
//                                                       code_before, code_after, tests[, change_kind, topic]
//   canitedit     canitedit/test.jsonl (as published)   id (int), full_name, instruction_descriptive,
//                                                       instruction_lazy, before, after, tests
//   humaneval     humaneval/normalized.jsonl            id, prompt, canonical_solution, test, entry_point
//   mt-redundant  mt-redundant/question_*.jsonl         question_id, category, turns[2]
//   editeval      editeval/edit_eval.jsonl              task_id, instruction, input, output, test[, context]
//
// Pure data: safe to share across threads once loaded.
#pragma once

#include <string>
#include <vector>

namespace editspec {

enum dataset_kind {
    DATASET_KIND_AUTO         = 0, // from the first record's fields
    DATASET_KIND_CANITEDIT    = 1, // task edit
    DATASET_KIND_HUMANEVAL    = 2, // task complete
    DATASET_KIND_MT_REDUNDANT = 3, // task chat
    DATASET_KIND_EDITEVAL     = 4, // task edit
};

enum dataset_task {
    DATASET_TASK_EDIT     = 0, // rewrite context_code following the instruction
    DATASET_TASK_COMPLETE = 1, // continue context_code
    DATASET_TASK_CHAT     = 2, // answer turns in order
};

enum instruction_kind {
    INSTRUCTION_KIND_DESCRIPTIVE = 0, // CanItEdit's instruction_descriptive (the only one elsewhere)
    INSTRUCTION_KIND_LAZY        = 1, // CanItEdit's instruction_lazy; falls back to descriptive
};

const char * dataset_kind_name(dataset_kind kind);
const char * dataset_task_name(dataset_task task);
// "canitedit", "humaneval", "mt-redundant", "editeval", "auto"; false if unknown
bool dataset_kind_parse(const std::string & name, dataset_kind & out);

struct dataset_item {
    std::string  id;               // "10_csv_parser", "HumanEval/0", "81" (question_id), "EditEval/0"
    dataset_kind kind = DATASET_KIND_AUTO;
    dataset_task task = DATASET_TASK_EDIT;
    std::string  instruction;      // edit: the (descriptive) instruction; empty for complete / chat
    std::string  instruction_lazy; // CanItEdit only, else empty
    std::string  context_code;     // edit: code before; complete: the prompt; chat: empty
    std::string  reference;        // edit: code after; complete: canonical solution; chat: empty
    std::string  update;           // edit, optional: a fast-apply snippet of the change (bench --task apply uses it)
    std::string  tests;            // test code (CanItEdit tests, HumanEval test, EditEval test)
    std::string  entry_point;      // HumanEval only
    std::string  category;         // MT-Redundant category; CanItEdit change_kind
    std::vector<std::string> turns; // MT-Redundant: the user turns, in order
    std::string  repo_datastore;   // complete, optional: the repository's datastore for this item (fastcoder's
                                   // D_r: the repository without the item's file), relative to the dataset file
    int32_t      line = 0;         // 1-based line of the record in its file
};

// Reads a JSONL file (or a dataset folder: its normalized.jsonl, else its only *.jsonl).
// Appends to out only on success. On failure returns false and sets *error (when given) to one
// line naming the file, the line and the problem, e.g.
//   "datasets/humaneval/normalized.jsonl:3: field 'prompt' is not a string".
bool dataset_load(const std::string & path, dataset_kind kind, std::vector<dataset_item> & out,
                  std::string * error);

// The "raw layout" of docs/results/design-notes/cost-curve-and-oracle.md, without a chat template:
//   canitedit  context = instruction + "\n" + code_before   reference = code_after
//   editeval   context = instruction + "\n" + input         reference = output
//   humaneval  context = prompt                              reference = canonical_solution
//   chat       context = turns[0]                            reference = "" (none published)
// The EOS token that ends the reference output is added in token space (replay_tokenize).
struct dataset_text {
    std::string context;
    std::string reference;
};

dataset_text dataset_raw_layout(const dataset_item & item, instruction_kind ik = INSTRUCTION_KIND_DESCRIPTIVE);

} // namespace editspec
