// editspec edit: apply an instruction to a file (or stdin) with the model, printing the edited code,
// a unified diff, or one JSON object; --in-place rewrites the file atomically (backup FILE.orig).
//
//   editspec edit -m model.gguf -f app.py -i "Rename x to count." --diff
//
// Greedy decoding; the default method, reuse+lookup-longest sized by the cost model, is lossless
// (the output equals autoregressive decoding's).
#include "cli/commands.h"
#include "editspec/decoder.h"
#include "editspec/edit.h"
#include "editspec/generate.h"
#include "editspec/methods.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
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
    std::string model;
    std::string draft_model;
    draft_model_params draft;   // --gamma, --draft-p-min
    std::string file;
    std::string instruction;
    std::string method = "reuse+lookup-longest";
    int32_t n_predict = 0; // 0 = auto: twice the code's tokens + 64
    int32_t threads = 0;
    int32_t n_ctx = 4096;
    bool diff = false;
    bool in_place = false;
    bool json = false;
    bool flash_attn = false;
};

bool read_all(const std::string & path, std::string & out, std::string & error) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        error = "cannot read '" + path + "': " + std::strerror(errno);
        return false;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) {
        error = "error reading '" + path + "'";
        return false;
    }
    out = ss.str();
    return true;
}

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

int run_edit(const edit_opts & o) {
    const char * cmd = "edit";
    std::string error;
    // ---- input
    if (o.instruction.find_first_not_of(" \t\r\n") == std::string::npos) {
        return fail_input(cmd, "empty instruction (-i)");
    }
    if (o.in_place && o.file.empty()) {
        return fail_input(cmd, "--in-place needs -f FILE");
    }
    if (o.n_predict < -1 || o.n_predict > 1000000) {
        return fail_input(cmd, "-n " + std::to_string(o.n_predict) + " out of range [-1, 1000000]");
    }
    if (o.threads < 0 || o.threads > 1024) {
        return fail_input(cmd, "--threads " + std::to_string(o.threads) + " out of range [0, 1024]");
    }
    if (o.n_ctx < 64 || o.n_ctx > (1 << 20)) {
        return fail_input(cmd, "--ctx-size " + std::to_string(o.n_ctx) + " out of range [64, 1048576]");
    }
    std::string code;
    mode_t mode = 0644;
    if (!o.file.empty()) {
        struct stat st;
        if (stat(o.file.c_str(), &st) != 0) {
            return fail_input(cmd, "cannot read '" + o.file + "': " + std::strerror(errno));
        }
        if (!S_ISREG(st.st_mode)) {
            return fail_input(cmd, "'" + o.file + "' is not a regular file");
        }
        mode = st.st_mode & 07777;
        if (!read_all(o.file, code, error)) {
            return fail_input(cmd, error);
        }
    } else {
        code.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    if (code.empty()) {
        return fail_input(cmd, "nothing to edit: " + (o.file.empty() ? std::string("stdin") : "'" + o.file + "'") +
                                   " is empty");
    }

    // ---- models
    request_models rm;
    if (const int status = load_request_models(cmd, o.method, o.model, o.draft_model, o.draft, rm); status != 0) {
        return status;
    }
    const method_spec & ms = rm.ms;
    const model & m = *rm.target.model;
    const token_vec prompt = m.tokenize(edit_prompt(m, o.instruction, code), true, edit_prompt_parse_special(m));
    const token_vec original = edit_original_tokens(m, code);
    if ((int32_t) prompt.size() + 1 >= o.n_ctx) {
        return fail_input(cmd, "the prompt is " + std::to_string(prompt.size()) + " tokens and the context holds " +
                                   std::to_string(o.n_ctx) + " (raise --ctx-size)");
    }
    // an edit's answer is about as long as the code
    warn_past_train_ctx(cmd, m, (int32_t) prompt.size(), (int32_t) original.size());
    context_params cp;
    cp.n_ctx = o.n_ctx;
    cp.n_threads = o.threads;
    cp.flash_attn = o.flash_attn;
    // speculative trees: one sequence per leaf, up to 64 leaves (libllama aborts when n_seq_max > n_ctx)
    cp.n_seq_max = ms.is_ar() ? 1 : std::min(65, o.n_ctx);
    auto ctx = context_create(m, cp, &error);
    if (!ctx) {
        return fail_runtime(cmd, error);
    }

    // ---- generate (greedy)
    generate_params gp;
    gp.n_predict = o.n_predict != 0 ? o.n_predict : 2 * (int32_t) original.size() + 64;
    method_inputs in;
    in.original = original;
    in.target = &m;
    in.draft_model = rm.draft.model.get();
    in.draft_params = o.draft;
    in.draft_params.n_ctx = o.n_ctx;
    in.draft_params.n_threads = o.threads;
    generate_result r;
    if (const int status = generate_with_method(cmd, *ctx, prompt, gp, ms, in, r); status != 0) {
        return status;
    }
    const std::string edited = edit_extract_code(r.text);

    // ---- output
    if (o.in_place) {
        if (!write_atomic(o.file + ".orig", code, mode, error) || !write_atomic(o.file, edited, mode, error)) {
            return fail_runtime(cmd, error);
        }
    }
    const std::string name = o.file.empty() ? "stdin" : o.file;
    const std::string diff = o.diff ? edit_unified_diff(code, edited, "a/" + name, "b/" + name) : "";
    if (o.json) {
        nlohmann::json j = result_json(r, *ctx, ms);
        j["code"] = edited;
        j["draft_model"] = rm.draft_path;
        j["file"] = o.file;
        j["in_place"] = o.in_place;
        if (o.diff) j["diff"] = diff;
        printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else if (o.diff) {
        fwrite(diff.data(), 1, diff.size(), stdout);
        // an empty diff is a valid answer; say so where a person reads it, not in the patch
        if (diff.empty()) fprintf(stderr, "editspec edit: the model left the code unchanged\n");
    } else if (!o.in_place) {
        fwrite(edited.data(), 1, edited.size(), stdout);
    }
    return 0;
}

} // namespace

command cmd_edit_add(CLI::App & app) {
    auto o = std::make_shared<edit_opts>();
    CLI::App * sub = app.add_subcommand("edit", "edit code following an instruction (greedy, lossless by default)");
    sub->add_option("-m,--model", o->model, "GGUF model file (default: $EDITSPEC_MODEL or the shipped model)");
    sub->add_option("--draft-model", o->draft_model, "GGUF draft model with the target's vocabulary (sd, efficientedit; default: $EDITSPEC_DRAFT_MODEL, or the shipped draft model with the shipped target)");
    add_draft_options(sub, o->draft);
    sub->add_option("-f,--file", o->file, "the file to edit (default: read the code from stdin)");
    sub->add_option("-i,--instruction", o->instruction, "what to change")->required();
    sub->add_option("--method", o->method,
                    "decoding method: ar, reuse, lookup, lookup-longest, sd, efficientedit, a+b (one tree), "
                    "NAME@N (fixed cap), NAME:POLICY")
        ->capture_default_str();
    sub->add_option("-n,--n-predict", o->n_predict, "most tokens to generate (0 = twice the code's + 64, -1 = no limit)")
        ->capture_default_str();
    sub->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)")->capture_default_str();
    sub->add_option("-c,--ctx-size", o->n_ctx, "KV cache size in tokens")->capture_default_str();
    sub->add_flag("--diff", o->diff, "print a unified diff instead of the edited code");
    sub->add_flag("--in-place", o->in_place, "rewrite FILE atomically, keeping the original as FILE.orig");
    sub->add_flag("--json", o->json, "print one JSON object with the code and statistics");
    sub->add_flag("--flash-attn", o->flash_attn, "use flash attention (faster on some machines, not bit-exact)");
    return {sub, [o] { return run_edit(*o); }};
}

} // namespace editspec::cli
