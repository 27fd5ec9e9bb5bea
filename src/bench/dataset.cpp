// Benchmark dataset readers: CanItEdit, HumanEval, MT-Redundant, EditEval (JSONL).
#include "editspec/dataset.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace editspec {

using json = nlohmann::json;

const char * dataset_kind_name(dataset_kind kind) {
    switch (kind) {
        case DATASET_KIND_AUTO:         return "auto";
        case DATASET_KIND_CANITEDIT:    return "canitedit";
        case DATASET_KIND_HUMANEVAL:    return "humaneval";
        case DATASET_KIND_MT_REDUNDANT: return "mt-redundant";
        case DATASET_KIND_EDITEVAL:     return "editeval";
        default:                        return "unknown";
    }
}

const char * dataset_task_name(dataset_task task) {
    switch (task) {
        case DATASET_TASK_EDIT:     return "edit";
        case DATASET_TASK_COMPLETE: return "complete";
        case DATASET_TASK_CHAT:     return "chat";
        default:                    return "unknown";
    }
}

bool dataset_kind_parse(const std::string & name, dataset_kind & out) {
    for (dataset_kind k : {DATASET_KIND_AUTO, DATASET_KIND_CANITEDIT, DATASET_KIND_HUMANEVAL,
                           DATASET_KIND_MT_REDUNDANT, DATASET_KIND_EDITEVAL}) {
        if (name == dataset_kind_name(k)) {
            out = k;
            return true;
        }
    }
    return false;
}

namespace {

// a record's reader: fills item from obj, or sets why (without the file:line prefix)
struct record_reader {
    const json & obj;
    std::string & why;

    bool has(const char * key) const { return obj.contains(key); }

    bool str(const char * key, std::string & out, bool required = true) {
        auto it = obj.find(key);
        if (it == obj.end() || it->is_null()) {
            if (required) {
                why = std::string("missing field '") + key + "'";
            }
            return !required;
        }
        if (!it->is_string()) {
            why = std::string("field '") + key + "' is not a string";
            return false;
        }
        out = it->get<std::string>();
        return true;
    }

    // ids are strings in the normalized files and integers in the published ones
    bool id(const char * key, std::string & out) {
        auto it = obj.find(key);
        if (it == obj.end()) {
            why = std::string("missing field '") + key + "'";
            return false;
        }
        if (it->is_string()) {
            out = it->get<std::string>();
        } else if (it->is_number_integer()) {
            out = std::to_string(it->get<int64_t>());
        } else {
            why = std::string("field '") + key + "' is neither a string nor an integer";
            return false;
        }
        return true;
    }
};

dataset_kind detect_kind(const json & obj) {
    if (obj.contains("code_before") || (obj.contains("before") && obj.contains("instruction_descriptive"))) {
        return DATASET_KIND_CANITEDIT;
    }
    if (obj.contains("canonical_solution")) {
        return DATASET_KIND_HUMANEVAL;
    }
    if (obj.contains("turns")) {
        return DATASET_KIND_MT_REDUNDANT;
    }
    if (obj.contains("instruction") && obj.contains("input") && obj.contains("output")) {
        return DATASET_KIND_EDITEVAL;
    }
    return DATASET_KIND_AUTO;
}

bool read_canitedit(record_reader & r, dataset_item & it) {
    it.task = DATASET_TASK_EDIT;
    const bool published = !r.has("code_before") && r.has("before"); // test.jsonl as published
    if (!r.id("id", it.id) ||
        !r.str("instruction_descriptive", it.instruction) ||
        !r.str("instruction_lazy", it.instruction_lazy) ||
        !r.str(published ? "before" : "code_before", it.context_code) ||
        !r.str(published ? "after" : "code_after", it.reference) ||
        !r.str("tests", it.tests)) {
        return false;
    }
    if (published) {
        // the normalized id is "<id>_<name>" (full_name in the published file)
        std::string full;
        if (r.str("full_name", full, false) && !full.empty()) {
            it.id = full;
        }
    } else if (!r.str("change_kind", it.category, false) || !r.str("update", it.update, false)) {
        return false;
    }
    return true;
}

bool read_humaneval(record_reader & r, dataset_item & it) {
    it.task = DATASET_TASK_COMPLETE;
    const char * id_key = r.has("id") ? "id" : "task_id"; // normalized / published
    return r.id(id_key, it.id) &&
           r.str("prompt", it.context_code) &&
           r.str("canonical_solution", it.reference) &&
           r.str("test", it.tests) &&
           r.str("entry_point", it.entry_point) &&
           r.str("repo_datastore", it.repo_datastore, false);
}

bool read_mt_redundant(record_reader & r, dataset_item & it) {
    it.task = DATASET_TASK_CHAT;
    if (!r.id("question_id", it.id) || !r.str("category", it.category, false)) {
        return false;
    }
    auto t = r.obj.find("turns");
    if (t == r.obj.end() || !t->is_array() || t->empty()) {
        r.why = "field 'turns' is not a non-empty array";
        return false;
    }
    for (size_t i = 0; i < t->size(); i++) {
        if (!(*t)[i].is_string()) {
            r.why = "turns[" + std::to_string(i) + "] is not a string";
            return false;
        }
        it.turns.push_back((*t)[i].get<std::string>());
    }
    return true;
}

bool read_editeval(record_reader & r, dataset_item & it) {
    it.task = DATASET_TASK_EDIT;
    const char * id_key = r.has("task_id") ? "task_id" : "id";
    return r.id(id_key, it.id) &&
           r.str("instruction", it.instruction) &&
           r.str("input", it.context_code) &&
           r.str("output", it.reference) &&
           r.str("test", it.tests, false);
}

// a folder stands for its normalized.jsonl, else its only *.jsonl
bool resolve_path(const std::string & path, std::string & file, std::string & error) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(path, ec)) {
        file = path;
        return true;
    }
    if (fs::exists(fs::path(path) / "normalized.jsonl", ec)) {
        file = (fs::path(path) / "normalized.jsonl").string();
        return true;
    }
    std::vector<std::string> found;
    for (const auto & e : fs::directory_iterator(path, ec)) {
        if (e.path().extension() == ".jsonl") {
            found.push_back(e.path().string());
        }
    }
    if (found.size() != 1) {
        error = path + ": a folder must hold normalized.jsonl or exactly one *.jsonl (found " +
                std::to_string(found.size()) + ")";
        return false;
    }
    file = found[0];
    return true;
}

// one record of a known kind; false with `err` saying why (without the file and line)
bool read_record(const json & obj, dataset_kind kind, int32_t line_no, const std::string & file, dataset_item & it,
                 std::string & err) {
    it.kind = kind;
    it.line = line_no;
    std::string why;
    record_reader r{obj, why};
    bool ok = false;
    switch (kind) {
        case DATASET_KIND_CANITEDIT:    ok = read_canitedit(r, it);    break;
        case DATASET_KIND_HUMANEVAL:    ok = read_humaneval(r, it);    break;
        case DATASET_KIND_MT_REDUNDANT: ok = read_mt_redundant(r, it); break;
        case DATASET_KIND_EDITEVAL:     ok = read_editeval(r, it);     break;
        default:                        why = "bad dataset kind";      break;
    }
    if (!ok) {
        err = why + " (reading as " + dataset_kind_name(kind) + ")";
        return false;
    }
    // a repository datastore named relative to the dataset file
    if (!it.repo_datastore.empty() && std::filesystem::path(it.repo_datastore).is_relative()) {
        it.repo_datastore = (std::filesystem::path(file).parent_path() / it.repo_datastore).string();
    }
    return true;
}

} // namespace

bool dataset_load(const std::string & path, dataset_kind kind, std::vector<dataset_item> & out,
                  std::string * error) {
    std::string err_local;
    std::string & err = error ? *error : err_local;

    std::string file;
    if (!resolve_path(path, file, err)) {
        return false;
    }
    if (file.size() > 3 && file.compare(file.size() - 3, 3, ".gz") == 0) {
        err = file + ": compressed files are not read; use the folder's normalized.jsonl";
        return false;
    }
    std::ifstream f(file, std::ios::binary);
    if (!f) {
        err = file + ": cannot open for reading";
        return false;
    }

    std::vector<dataset_item> items;
    std::string line;
    int32_t line_no = 0;
    while (std::getline(f, line)) {
        line_no++;
        if (line.find_first_not_of(" \t\r") == std::string::npos) {
            continue;
        }
        const std::string where = file + ":" + std::to_string(line_no) + ": ";
        json obj;
        try {
            obj = json::parse(line);
        } catch (const json::exception & e) {
            err = where + "invalid JSON: " + e.what();
            return false;
        }
        if (!obj.is_object()) {
            err = where + "expected a JSON object";
            return false;
        }
        if (kind == DATASET_KIND_AUTO) {
            kind = detect_kind(obj);
            if (kind == DATASET_KIND_AUTO) {
                err = where + "unknown dataset format (no code_before/before, canonical_solution, turns or "
                              "instruction+input+output field)";
                return false;
            }
        }

        dataset_item it;
        if (!read_record(obj, kind, line_no, file, it, err)) {
            err = where + err;
            return false;
        }
        items.push_back(std::move(it));
    }
    if (f.bad()) {
        err = file + ": read error after line " + std::to_string(line_no);
        return false;
    }
    if (items.empty()) {
        err = file + ": no records";
        return false;
    }
    out.insert(out.end(), std::make_move_iterator(items.begin()), std::make_move_iterator(items.end()));
    return true;
}

dataset_text dataset_raw_layout(const dataset_item & item, instruction_kind ik) {
    dataset_text t;
    switch (item.task) {
        case DATASET_TASK_EDIT: {
            const std::string & instr =
                ik == INSTRUCTION_KIND_LAZY && !item.instruction_lazy.empty() ? item.instruction_lazy : item.instruction;
            t.context   = instr + "\n" + item.context_code;
            t.reference = item.reference;
            break;
        }
        case DATASET_TASK_COMPLETE:
            t.context   = item.context_code;
            t.reference = item.reference;
            break;
        case DATASET_TASK_CHAT:
            t.context = item.turns.empty() ? std::string() : item.turns[0];
            break;
    }
    return t;
}

} // namespace editspec
