// editspec edit: apply an instruction to a file (or stdin) with the model, printing the edited code,
// a unified diff, or one JSON object; --in-place rewrites the file atomically (backup FILE.orig).
// editspec apply: the same for an edit snippet to merge into the file (fast apply, apply.h).
//
//   editspec edit -m model.gguf -f app.py -i "Rename x to count." --diff
//   editspec apply -m model.gguf -f app.py -u change.py --diff
//
// Greedy decoding; the default method, reuse+lookup-longest sized by the cost model, is lossless
// (the output equals autoregressive decoding's).
#include "cli/commands.h"
#include "editspec/apply.h"
#include "editspec/clock.h"
#include "editspec/decoder.h"
#include "editspec/edit.h"
#include "editspec/generate.h"
#include "editspec/methods.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace editspec::cli {

namespace {

struct edit_opts {
    const char * cmd = "edit"; // or "apply"
    request_opts req;      // -m, --method, --draft-model, --gamma, -t, -c, --flash-attn
    std::string file;
    std::string update;    // apply: the snippet's file ("-" = stdin)
    std::string instruction;
    int32_t n_predict = 0; // 0 = auto: twice the whole answer's tokens + 64
    bool ctx_given = false; // -c was given: the context is not grown to the file
    bool quiet = false;     // no progress line on a terminal
    bool diff = false;
    bool in_place = false;
    bool json = false;
    bool constrain = false; // apply: every merged line from the file or the snippet (apply_constraint)
    std::string layout = "auto"; // edit.h: the file before or after the instruction and the update
    std::string view = "auto";   // apply.h: how much of the file the prompt shows
};

// writes `text` to `path` through a temporary file in the same folder and rename(2): readers see
// the old file or the new one, never a part. mode: permission bits of the new file.
bool write_atomic(const std::string & path, const std::string & text, mode_t mode, std::string & error) {
    std::string tmpl = path + ".editspec-XXXXXX";
    const int fd = mkstemp(tmpl.data());
    if (fd < 0) {
        error = "cannot create a temporary file next to '" + path + "': " + std::strerror(errno);
        return false;
    }
    bool ok = fchmod(fd, mode) == 0;
    size_t done = 0;
    while (ok && done < text.size()) {
        const ssize_t w = write(fd, text.data() + done, text.size() - done);
        if (w < 0 && errno == EINTR) continue;
        ok = w > 0;
        done += ok ? (size_t) w : 0;
    }
    ok = ok && fsync(fd) == 0;
    ok = (close(fd) == 0) && ok;
    if (!ok || rename(tmpl.c_str(), path.c_str()) != 0) {
        error = "cannot write '" + path + "': " + std::strerror(errno);
        unlink(tmpl.c_str());
        return false;
    }
    return true;
}

// the code to edit: -f FILE (a regular file; *mode gets its permission bits) or stdin; an exit status
int read_code(const char * cmd, const std::string & file, std::string & code, mode_t * mode) {
    std::string error;
    if (!file.empty()) {
        struct stat st;
        if (stat(file.c_str(), &st) != 0) {
            return fail_input(cmd, "cannot read '" + file + "': " + std::strerror(errno));
        }
        if (!S_ISREG(st.st_mode)) {
            return fail_input(cmd, "'" + file + "' is not a regular file");
        }
        *mode = st.st_mode & 07777;
        if (!read_text_file(file, code, error)) {
            return fail_input(cmd, error);
        }
    } else {
        code.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        if (const std::string why = not_utf8_reason(code, "stdin"); !why.empty()) return fail_input(cmd, why);
    }
    if (code.empty()) {
        return fail_input(cmd, "nothing to edit: " + (file.empty() ? std::string("stdin") : "'" + file + "'") + " is empty");
    }
    return 0;
}

// apply's snippet: -u FILE, or stdin ("-"); an exit status
int read_update(const char * cmd, const std::string & file, std::string & update) {
    std::string error;
    if (file == "-") {
        update.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        if (const std::string why = not_utf8_reason(update, "stdin"); !why.empty()) return fail_input(cmd, why);
    } else if (!read_text_file(file, update, error)) {
        return fail_input(cmd, error);
    }
    if (update.find_first_not_of(" \t\r\n") == std::string::npos) {
        return fail_input(cmd, "the update " + (file == "-" ? std::string("(stdin)") : "'" + file + "'") + " is empty");
    }
    return 0;
}

// the options' values, before any file or model is read
int check_edit_opts(const edit_opts & o, bool apply) {
    const char * cmd = o.cmd;
    if (!apply && o.instruction.find_first_not_of(" \t\r\n") == std::string::npos) {
        return fail_input(cmd, "empty instruction (-i)");
    }
    if (apply && o.update == "-" && o.file.empty()) {
        return fail_input(cmd, "the code and the update cannot both come from stdin: give -f FILE or -u FILE");
    }
    if (o.in_place && o.file.empty()) {
        return fail_input(cmd, "--in-place needs -f FILE");
    }
    if (o.n_predict < -1 || o.n_predict > 1000000) {
        return fail_input(cmd, "-n " + std::to_string(o.n_predict) + " out of range [-1, 1000000]");
    }
    if (o.req.n_ctx < 64 || o.req.n_ctx > (1 << 20)) { // an edit prompt needs room (--threads: open_request_runner)
        return fail_input(cmd, "--ctx-size " + std::to_string(o.req.n_ctx) + " out of range [64, 1048576]");
    }
    return 0;
}

// the edited file in place (the original kept beside it as FILE.orig), as a diff, as JSON or as text
int write_edit_output(const edit_opts & o, bool apply, const std::string & code, const std::string & edited, mode_t mode,
                      const generate_result & r, const runner & rn, const method_spec & ms) {
    const char * cmd = o.cmd;
    std::string error;
    if (o.in_place) {
        if (!write_atomic(o.file + ".orig", code, mode, error) || !write_atomic(o.file, edited, mode, error)) {
            return fail_runtime(cmd, error);
        }
    }
    const std::string name = o.file.empty() ? "stdin" : o.file;
    const std::string sep = name.front() == '/' ? "" : "/"; // an absolute path: a/work/x.py, as git writes it
    const std::string diff = o.diff ? edit_unified_diff(code, edited, "a" + sep + name, "b" + sep + name) : "";
    if (o.json) {
        nlohmann::json j = result_json(r, *rn.ctx, ms);
        j["complete"] = true;
        j["code"] = edited;
        j["draft_model"] = rn.params.draft_model_path;
        j["file"] = o.file;
        j["in_place"] = o.in_place;
        if (apply) j["constrained"] = o.constrain;
        if (o.diff) j["diff"] = diff;
        printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else if (o.diff) {
        fwrite(diff.data(), 1, diff.size(), stdout);
        // an empty diff is a valid answer; say so where a person reads it, not in the patch
        if (diff.empty()) fprintf(stderr, "editspec %s: the model left the code unchanged\n", cmd);
    } else if (!o.in_place) {
        fwrite(edited.data(), 1, edited.size(), stdout);
    }
    return 0;
}

// Progress on a terminal (stderr), twice a second at most: the answer's characters against the code's
// (an edit's or apply's answer is about as long), the time so far and the time left at that rate; one
// summary line at the end. Silent when stderr is not a terminal, or with --quiet.
struct progress_line {
    const char * cmd;
    size_t expected; // the code's characters
    bool on;
    size_t chars = 0;
    clock_type::time_point t0 = clock_type::now(), last = t0;

    progress_line(const char * c, size_t n, bool show) : cmd(c), expected(std::max<size_t>(n, 1)), on(show) {}
    bool add(size_t n) {
        chars += n;
        const auto now = clock_type::now();
        if (std::chrono::duration<double>(now - last).count() < 0.5) return true;
        last = now;
        const double s = std::chrono::duration<double>(now - t0).count();
        const double frac = std::min(0.99, (double) chars / (double) expected);
        fprintf(stderr, "\reditspec %s: %zu of about %zu characters (%d%%), %.1f s, about %.0f s left\033[K", cmd, chars,
                expected, (int) (100 * frac), s, frac > 0 ? s * (1 - frac) / frac : 0.0);
        return true;
    }
    void done(const generate_result & r) const {
        if (!on) return;
        if (r.prompt_tokens == 0) { // refused or failed before decoding: its error follows
            fprintf(stderr, "\r\033[K");
            return;
        }
        // the first token: the prompt's prefill and the pass that decodes its end with the first drafts
        fprintf(stderr, "\reditspec %s: %zu tokens in %.1f s (%.1f tokens/s, %.1f a pass; first token after %.2f s)\033[K\n", cmd,
                r.tokens.size(), (r.prompt_ms + r.gen_ms) / 1000.0, r.tokens_per_s(), r.tokens_per_pass(),
                (r.prompt_ms + r.first_pass_ms) / 1000.0);
    }
};

// The context for the whole answer (request_answer_room), checked before decoding: -c as given;
// without -c, grown to the answer where the model was trained on contexts that long. An exit status:
// 2 naming the sizes and the flag when it cannot fit.
int size_context(const edit_opts & o, runner & rn, const request & rq) {
    const char * cmd = o.cmd;
    const int32_t n_predict = o.n_predict > 0 ? o.n_predict : -1;
    const int32_t need = request_ctx_needed(rq);
    const int32_t n_train = rn.target.model->facts().n_ctx_train;
    if (!o.ctx_given && need > rn.params.n_ctx && need <= n_train) {
        const int32_t n_ctx = std::min(n_train, (need + 255) / 256 * 256);
        fprintf(stderr, "editspec %s: the context grows from %d to %d tokens to hold the whole answer (-c to set it)\n",
                cmd, rn.params.n_ctx, n_ctx);
        rn.params.n_ctx = n_ctx;
        std::string error;
        rn.ctx = runner_new_context(rn, &error);
        if (!rn.ctx) return fail_runtime(cmd, error);
    }
    bool over_ctx = false;
    const std::string why = request_answer_room(rq, rn.params.n_ctx, n_predict, &over_ctx);
    if (why.empty()) return 0;
    if (!over_ctx) return fail_input(cmd, why + ": raise -n to at least " + std::to_string(rq.n_answer) + " or leave it out");
    std::string hint = ": raise --ctx-size to at least " + std::to_string(need);
    if (n_train > 0 && need > n_train) {
        hint += " (the model was trained on contexts of " + std::to_string(n_train) + " tokens; past them its output degrades)";
    }
    return fail_input(cmd, why + hint);
}

// An answer cut short (stop_reason_whole) is not the file: nothing is written or printed (--json says
// "complete": false, without the code); exit status 1, naming the limit that cut it
int fail_incomplete(const edit_opts & o, const generate_result & r, const runner & rn, const method_spec & ms) {
    const char * cmd = o.cmd;
    std::string why = stop_reason_name(r.stop);
    if (r.stop == STOP_REASON_MAX_TOKENS) why = "-n " + std::to_string((long long) r.tokens.size()) + " reached; raise -n or leave it out";
    if (r.stop == STOP_REASON_CONTEXT) why = "the context (--ctx-size " + std::to_string(rn.params.n_ctx) + ") is full; raise --ctx-size";
    if (o.json) {
        nlohmann::json j = result_json(r, *rn.ctx, ms);
        j.erase("text");
        j["complete"] = false;
        j["file"] = o.file;
        j["in_place"] = false;
        printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    }
    return fail_runtime(cmd, "the answer stopped after " + std::to_string(r.tokens.size()) + " tokens, before its end (" +
                                 why + "): nothing " + (o.in_place ? "written" : "printed") + ", " +
                                 (o.file.empty() ? std::string("the input") : "'" + o.file + "'") + " unchanged");
}

int run_edit(edit_opts & o, const CLI::App * sub) {
    o.ctx_given = sub->get_option("--ctx-size")->count() > 0;
    const char * cmd = o.cmd;
    const bool apply = std::string(cmd) == "apply";
    if (const int status = check_edit_opts(o, apply); status != 0) {
        return status;
    }
    apply_view view = APPLY_VIEW_AUTO;
    if (!apply_view_parse(o.view, view)) return fail_input(cmd, "--apply-view '" + o.view + "' must be one of " + apply_view_names());
    std::string code;
    mode_t mode = 0644;
    if (const int status = read_code(cmd, o.file, code, &mode); status != 0) {
        return status;
    }
    std::string update;
    if (apply) {
        if (const int status = read_update(cmd, o.update, update); status != 0) {
            return status;
        }
    }

    // ---- models
    method_spec ms;
    runner rn;
    if (const int status = open_request_runner(cmd, o.req, ms, rn); status != 0) {
        return status;
    }
    request rq;
    prompt_layout layout = PROMPT_LAYOUT_AUTO;
    if (const int status = parse_prompt_layout(cmd, o.layout, layout); status != 0) return status;
    if (apply) {
        // a command's apply arrives cold: constrained, the file is read once, as the merge is written
        request_apply_tokens(*rn.target.model, {code, update, o.instruction}, rq, o.constrain, layout,
                             apply_view_for(view, o.constrain));
    } else {
        request_edit_tokens(*rn.target.model, o.instruction, code, rq, layout);
    }
    // ---- room for the whole answer, checked before any decoding
    if (const int status = size_context(o, rn, rq); status != 0) return status;
    warn_past_train_ctx(cmd, *rn.target.model, (int32_t) rq.prompt.size(), rq.n_answer);

    // ---- generate (greedy)
    rq.gen.n_predict = o.n_predict != 0 ? o.n_predict : 2 * rq.n_answer + 64;
    generate_result r;
    progress_line progress(cmd, code.size(), !o.quiet && isatty(STDERR_FILENO));
    if (progress.on) {
        fprintf(stderr, "editspec %s: reading the %zu-token prompt\r", cmd, rq.prompt.size());
        rq.gen.on_text = [&progress](std::string_view text) { return progress.add(text.size()); };
    }
    const int status = run_request(cmd, rn, ms, rq, r);
    progress.done(r);
    if (status != 0) {
        return status;
    }
    if (!stop_reason_whole(r.stop)) {
        return fail_incomplete(o, r, rn, ms);
    }
    const std::string edited = apply ? apply_merged_code({code, update, o.instruction}, r.text) : edit_extract_code(r.text);

    return write_edit_output(o, apply, code, edited, mode, r, rn, ms);
}

// the options edit and apply share
void add_edit_options(CLI::App * sub, edit_opts & o, const char * what) {
    add_request_options(sub, o.req,
                        "decoding method (below)");
    sub->get_option("--ctx-size")
        ->description("KV cache size in tokens; without it, grown to hold the prompt and the whole answer where the "
                      "model was trained on contexts that long. An answer that cannot fit is refused before decoding");
    sub->add_option("-f,--file", o.file, std::string("the file to ") + what + " (default: read the code from stdin)");
    sub->add_option("-n,--n-predict", o.n_predict,
                    "most tokens to generate (0 = twice the whole answer's + 64, -1 = no limit); an answer cut short by "
                    "it or by the context is an error, and nothing is written")
        ->capture_default_str();
    sub->add_flag("--diff", o.diff, "print a unified diff instead of the new code");
    sub->add_flag("--in-place", o.in_place, "rewrite FILE atomically, keeping the original as FILE.orig");
    sub->add_flag("--json", o.json, "print one JSON object with the code and statistics");
    sub->add_flag("-q,--quiet", o.quiet, "no progress line on stderr (shown only on a terminal)");
    sub->add_option("--prompt-layout", o.layout, prompt_layout_help())->capture_default_str();
}

} // namespace

command cmd_edit_add(CLI::App & app) {
    auto o = std::make_shared<edit_opts>();
    CLI::App * sub = app.add_subcommand("edit", "edit code following an instruction (greedy, lossless by default)");
    add_edit_options(sub, *o, "edit");
    sub->add_option("-i,--instruction", o->instruction, "what to change")->required();
    return {sub, [o, sub] { return run_edit(*o, sub); }};
}

command cmd_apply_add(CLI::App & app) {
    auto o = std::make_shared<edit_opts>();
    o->cmd = "apply";
    CLI::App * sub = app.add_subcommand(
        "apply", "merge an edit snippet (unchanged code elided by comments such as '# ... existing code ...') into "
                 "a file: fast apply, with the file as the prediction (greedy; constrained to the file's and the "
                 "snippet's lines by default, --no-constrain for the model's free output)");
    o->constrain = true;
    add_edit_options(sub, *o, "merge the update into");
    sub->add_option("-u,--update", o->update, "the snippet to merge, a file or - for stdin")->required();
    sub->add_option("-i,--instruction", o->instruction, "what the change is for (optional)");
    sub->add_option("--apply-view", o->view,
                    "how much of the file the prompt shows: auto (none when constrained, else file), file, windows "
                    "(its lines within " + std::to_string(APPLY_WINDOW) + " of the snippet's), none (the snippet alone: "
                    "the file is read once, as the merge is written; Reuse and the constraint have all of it)")
        ->capture_default_str();
    sub->add_flag("--constrain,!--no-constrain", o->constrain,
                  "constrained decoding (the default): every line of the merged file is a line of the file or of the "
                  "snippet (not a marker), so a small model cannot garble or loop; differs from the model's free "
                  "greedy output where it would have. --no-constrain: the model's free greedy output, lossless")
        ->capture_default_str();
    return {sub, [o, sub] { return run_edit(*o, sub); }};
}

} // namespace editspec::cli
