// editspec session: replays an edit script on a document session (session.h): its KV cache follows
// each edit by the chosen strategy, and each "complete" predicts the document's next line.
//
// Script (JSONL, one operation a line; '-' reads standard input):
//   {"op": "open", "text": "..."}   or   {"op": "open", "file": "path"}
//   {"op": "edit", "offset": 120, "delete": 4, "insert": "data"}
//   {"op": "complete", "n": 64}
// Output: one JSON line per operation (the edit's token span, stale tokens and KV-update time; the
// predicted line), or with --text only the predicted lines.
#include "cli/commands.h"
#include "editspec/session.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

namespace editspec::cli {

namespace {

struct session_opts {
    std::string model;
    std::string script = "-";
    std::string strategy = "pie";
    int32_t drift_max = -1;
    int32_t threads = 0;
    int32_t n_ctx = 4096;
    bool text = false;
};

// the file an "open" read, to say when it changes on disk under the session: the session follows
// the text it opened and the edits it is given, not the file
struct opened_file {
    std::string path;        // "" = opened from text
    struct timespec mtime{};
    off_t size = 0;
    bool said = false;       // the change was said once
};

bool file_stat(const std::string & path, struct timespec & mtime, off_t & size) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return false;
    mtime = st.st_mtim;
    size = st.st_size;
    return true;
}

// a warning when f changed on disk since it was opened (once per change), "" otherwise
std::string file_changed(opened_file & f) {
    if (f.path.empty()) return "";
    struct timespec mtime{};
    off_t size = 0;
    const bool exists = file_stat(f.path, mtime, size);
    const bool same = exists && size == f.size && mtime.tv_sec == f.mtime.tv_sec && mtime.tv_nsec == f.mtime.tv_nsec;
    if (same || f.said) return "";
    f.said = true;
    return "'" + f.path + "' changed on disk since it was opened (" + (exists ? std::to_string(size) + " bytes, was " +
           std::to_string(f.size) : std::string("removed")) + "): this session follows the text it opened and the edits "
           "given, not the file; open it again to follow the file";
}

// one operation of the script ({"op": "open" | "edit" | "complete", ...}): its JSON line in `out`
// (null: nothing to print); non-zero: the command's exit status
int session_op(const session_opts & o, doc_session & s, const nlohmann::json & op, const std::string & where, bool & open,
               opened_file & file, nlohmann::json & out) {
    const char * cmd = "session";
    std::string error;
    const std::string kind = op.is_object() && op.contains("op") && op["op"].is_string() ? op["op"].get<std::string>() : "";
    out = {{"op", kind}};
    try {
        if (kind == "open") {
            std::string text;
            file = opened_file{};
            if (op.contains("file")) {
                file.path = op["file"].get<std::string>();
                if (!file_stat(file.path, file.mtime, file.size)) {
                    return fail_input(cmd, where + "cannot read '" + file.path + "': " + std::strerror(errno));
                }
                std::ifstream f(file.path, std::ios::binary);
                if (!f) return fail_input(cmd, where + "cannot read '" + file.path + "'");
                std::stringstream ss;
                ss << f.rdbuf();
                text = ss.str();
            } else {
                text = op.at("text").get<std::string>();
            }
            if (!s.open(text, &error)) return fail_input(cmd, where + error);
            open = true;
            out["tokens"] = s.tokens().size();
        } else if (kind == "edit") {
            if (!open) return fail_input(cmd, where + "an edit before any \"open\"");
            text_edit e;
            e.offset = op.at("offset").get<size_t>();
            e.n_delete = op.value("delete", (size_t) 0);
            e.insert = op.value("insert", std::string());
            edit_stats st;
            if (!s.edit(e, &st, &error)) return fail_input(cmd, where + error);
            const int32_t refreshed = s.refresh(); // drift control, between requests
            if (refreshed < 0) return fail_runtime(cmd, where + "re-encoding the stale tokens failed");
            out.update({{"first", st.first}, {"removed", st.n_removed}, {"inserted", st.n_inserted},
                        {"encoded", st.n_encoded}, {"stale", st.n_stale}, {"kv_ms", st.kv_ms},
                        {"refreshed", refreshed}, {"fallback", st.fallback}, {"tokens", s.tokens().size()}});
        } else if (kind == "complete") {
            if (!open) return fail_input(cmd, where + "a completion before any \"open\"");
            out["line"] = s.predict_line(op.value("n", 64));
            if (o.text) {
                printf("%s\n", out["line"].get<std::string>().c_str());
            }
        } else {
            return fail_input(cmd, where + "\"op\" must be \"open\", \"edit\" or \"complete\"");
        }
    } catch (const nlohmann::json::exception & e) {
        return fail_input(cmd, where + "bad operation: " + e.what());
    }
    if (kind != "open") {
        if (const std::string w = file_changed(file); !w.empty()) {
            fprintf(stderr, "editspec session: %swarning: %s\n", where.c_str(), w.c_str());
            out["warning"] = w;
        }
    }
    if (o.text) out = nullptr; // --text prints the completions' lines only
    return 0;
}

int run_session(const session_opts & o) {
    const char * cmd = "session";
    session_params sp;
    if (!kv_reuse_parse(o.strategy, sp.strategy)) {
        return fail_input(cmd, "--strategy '" + o.strategy + "': expected recompute (or prefix), conflict or pie");
    }
    sp.drift_max = o.drift_max;
    std::ifstream file;
    if (o.script != "-") {
        file.open(o.script);
        if (!file) return fail_input(cmd, "cannot read the script '" + o.script + "'");
    }
    std::istream & in = o.script == "-" ? std::cin : file;
    const std::string model_path = o.model.empty() ? default_model_path() : o.model;
    model_load_result ml = model_load(model_path, /*vocab_only=*/false);
    if (!ml.model) return fail_input(cmd, ml.error);
    context_params cp;
    cp.n_ctx = o.n_ctx;
    cp.n_threads = o.threads;
    cp.n_seq_max = 2;
    std::string error;
    auto ctx = context_create(*ml.model, cp, &error);
    if (!ctx) return fail_runtime(cmd, error);
    doc_session s(*ctx, sp);
    bool open = false;
    opened_file opened;
    std::string line;
    int32_t line_no = 0;
    while (std::getline(in, line)) {
        line_no++;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = o.script + ":" + std::to_string(line_no) + ": ";
        nlohmann::json op;
        try {
            op = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception & e) {
            return fail_input(cmd, where + "invalid JSON: " + e.what());
        }
        nlohmann::json out;
        if (const int status = session_op(o, s, op, where, open, opened, out); status != 0) return status;
        if (!out.is_null()) printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        fflush(stdout);
    }
    return 0;
}

} // namespace

command cmd_session_add(CLI::App & app) {
    auto o = std::make_shared<session_opts>();
    CLI::App * sub = app.add_subcommand("session", "replay an edit script on a document whose KV cache follows the edits (PIE)");
    sub->add_option("script", o->script, "the edit script, JSONL of {\"op\": \"open\"|\"edit\"|\"complete\", ...}; - = stdin")
        ->capture_default_str();
    sub->add_option("-m,--model", o->model, "model GGUF (default: the shipped model)");
    sub->add_option("--strategy", o->strategy, "how the KV cache follows an edit: recompute (also called prefix: exact), conflict or pie")
        ->capture_default_str();
    sub->add_option("--drift-max", o->drift_max, "re-encode the stale tokens once more than this many (-1: never)")
        ->capture_default_str();
    sub->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)")->capture_default_str();
    sub->add_option("-c,--ctx-size", o->n_ctx, "KV cache size in tokens")->capture_default_str();
    sub->add_flag("--text", o->text, "print only the predicted lines");
    return {sub, [o] { return run_session(*o); }};
}

} // namespace editspec::cli
