#include "cli/commands.h"
#include "editspec/cost.h"
#include "editspec/draft.h"
#include "editspec/drafters.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace editspec::cli {

int parse_prompt_layout(const char * cmd, const std::string & value, prompt_layout & out) {
    if (prompt_layout_parse(value, out)) return 0;
    return fail_input(cmd, "--prompt-layout '" + value + "' is not one of: " + prompt_layout_names());
}

std::string prompt_layout_help() {
    return "edit and apply prompts: 'file-first' (the file before the instruction and the snippet, so requests "
           "about one file share it as a prefix and reuse its KV exactly), 'instruction-first' (the layout the "
           "shipped models were trained on: they merge as well with the file first but edit from an instruction "
           "far better so) or 'auto' (applies file first; edits instruction first on a model without a chat "
           "template, file first on one with)";
}

int fail_input(const char * cmd, const std::string & msg) {
    fprintf(stderr, "editspec %s: error: %s\n", cmd, msg.c_str());
    return 2;
}

int fail_runtime(const char * cmd, const std::string & msg) {
    fprintf(stderr, "editspec %s: error: %s\n", cmd, msg.c_str());
    return 1;
}

bool read_text_file(const std::string & path, std::string & out, std::string & error) {
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
    error = not_utf8_reason(out, "'" + path + "'");
    return error.empty();
}

std::string not_utf8_reason(std::string_view text, const std::string & what) {
    // the byte-order marks: UTF-32's first, as UTF-32LE's begins with UTF-16LE's
    static const struct { std::string_view bom; const char * name; const char * family; } marks[] = {
        {std::string_view("\xFF\xFE\0\0", 4), "UTF-32LE", "UTF-32"}, {std::string_view("\0\0\xFE\xFF", 4), "UTF-32BE", "UTF-32"},
        {"\xFF\xFE", "UTF-16LE", "UTF-16"}, {"\xFE\xFF", "UTF-16BE", "UTF-16"},
    };
    for (const auto & m : marks) {
        if (text.substr(0, m.bom.size()) != m.bom) continue;
        // a merge of UTF-8 into it would write a file of two encodings
        return what + " is " + m.name + " text (it begins with that byte-order mark); editspec reads UTF-8: convert it "
               "first (iconv -f " + m.family + " -t UTF-8)";
    }
    return "";
}

void warn_past_train_ctx(const char * cmd, const model & m, int32_t n_prompt, int32_t n_answer) {
    const int32_t n_train = m.facts().n_ctx_train;
    if (n_train <= 0 || n_prompt + n_answer <= n_train) {
        return;
    }
    fprintf(stderr,
            "editspec %s: warning: the prompt is %d tokens%s; the model was trained on contexts of %d tokens, and "
            "past them its output degrades\n",
            cmd, n_prompt, n_answer > 0 ? (" and the answer about " + std::to_string(n_answer) + " more").c_str() : "",
            n_train);
}

static bool file_exists(const std::string & path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

static const std::string k_shipped_target = std::string(EDITSPEC_SOURCE_DIR) + "/models/editspec-target.gguf";
static const std::string k_shipped_draft = std::string(EDITSPEC_SOURCE_DIR) + "/models/editspec-draft.gguf";

std::string default_draft_model_path(const std::string & target_path) {
    if (const char * env = std::getenv("EDITSPEC_DRAFT_MODEL"); env && *env) {
        return env;
    }
    std::error_code ec;
    if (file_exists(k_shipped_draft) && std::filesystem::equivalent(target_path, k_shipped_target, ec)) {
        return k_shipped_draft;
    }
    return "";
}

void add_draft_options(CLI::App * sub, draft_model_params & dp) {
    sub->add_option("--gamma", dp.gamma, "draft-model tokens per proposal (sd, efficientedit)")->capture_default_str();
    sub->add_option("--draft-p-min", dp.p_min,
                    "stop a draft-model proposal at a token whose draft probability is below this (0 = always gamma)")
        ->capture_default_str();
}

void add_method_settings(CLI::App * sub, method_settings & s) {
    sub->add_option("--copy-gamma", s.copy_gamma, "CopySpec: γ, the tokens a copy matches")->capture_default_str();
    sub->add_option("--copy-len", s.copy_len, "CopySpec: |S|, the tokens copied per attempt")->capture_default_str();
    sub->add_option("--alpha", s.alpha, "FastCoder: α, the weight of a repository continuation")->capture_default_str();
    sub->add_option("--beta", s.beta, "FastCoder: β, the weight of a common datastore's continuation")->capture_default_str();
    sub->add_option("--skip-p", s.skip_p, "FastCoder: p, the retrieval probability at a line's first token")
        ->capture_default_str();
    sub->add_option("--cache-min", s.cache_min, "FastCoder: l, the sequences its cache holds before it is searched")
        ->capture_default_str();
    sub->add_option("--retrieve-max", s.retrieve_max, "rest, FastCoder: the longest suffix looked up, tokens")
        ->capture_default_str();
    sub->add_option("--accept-top-k", s.top_k,
                    "the topk policy: a draft among the target's top k tokens is accepted (lossy; --top-k samples)")
        ->capture_default_str();
    sub->add_option("--entropy-k", s.entropy_k, "EfficientEdit's entropy-aware policy: the base threshold k (lossy)")
        ->capture_default_str();
    sub->add_option("--head-max", s.head_max,
                    "llama-draft-* (a model's own head or a head file), efficientedit-mtp: the most tokens the head "
                    "drafts a pass (llama-server's --spec-draft-n-max)")
        ->capture_default_str();
    sub->add_option("--head-p-min", s.head_p_min,
                    "llama-draft-*: stop the head's draft at a token below this probability (--spec-draft-p-min)")
        ->capture_default_str();
}

int check_draft_options(const char * cmd, const draft_model_params & dp) {
    if (dp.gamma < 1 || dp.gamma > 256) {
        return fail_input(cmd, "--gamma " + std::to_string(dp.gamma) + " out of range [1, 256]");
    }
    if (!(dp.p_min >= 0.0f && dp.p_min <= 1.0f)) {
        return fail_input(cmd, "--draft-p-min " + std::to_string(dp.p_min) + " out of range [0, 1]");
    }
    return 0;
}

std::string default_model_path() {
    if (const char * env = std::getenv("EDITSPEC_MODEL"); env && *env) {
        return env;
    }
    // the shipped model, then the generated stand-in the README's main command makes
    if (file_exists(k_shipped_target)) {
        return k_shipped_target;
    }
    return std::string(EDITSPEC_SOURCE_DIR) + "/build/models/default.gguf";
}

nlohmann::json result_json(const generate_result & r, const context & ctx, const method_spec & ms) {
    nlohmann::json by_source = nlohmann::json::object();
    for (int s = 0; s < DRAFT_SOURCE_COUNT; s++) {
        if (r.by_source[s].n_drafted == 0) continue;
        by_source[draft_source_name((uint8_t) s)] = {{"drafted", r.by_source[s].n_drafted},
                                                     {"accepted", r.by_source[s].n_accepted},
                                                     {"offered_passes", r.by_source[s].n_offered}};
    }
    return {
        {"text", r.text},
        {"tokens", r.tokens.size()},
        {"prompt_tokens", r.prompt_tokens},
        {"prompt_ms", r.prompt_ms},
        {"gen_ms", r.gen_ms},
        {"first_pass_ms", r.first_pass_ms}, // of gen_ms: the pass that decodes the prompt's end
        {"tokens_per_s", r.tokens_per_s()},
        {"target_passes", r.target_passes},
        {"tokens_per_pass", r.tokens_per_pass()},
        {"stop", stop_reason_name(r.stop)},
        {"model", ctx.owner().path()},
        {"threads", ctx.n_threads()},
        {"flash_attn", ctx.params().flash_attn},
        {"method", ms.name},
        {"drafters", r.drafters},
        {"policy", r.policy},
        {"draft_tokens", r.draft_tokens},
        {"accepted", r.accepted},
        {"draft_ms", r.draft_ms},
        {"decode_ms", r.decode_ms},
        {"checkpoint_ms", r.checkpoint_ms},
        {"by_source", by_source},
    };
}

std::string methods_footer() {
    std::string out = "Methods (--method): ar (one token per pass); auto (every drafter the request can feed: Reuse with "
                      "code being edited, lookup and copy over the context, fastcoder in lookup's place with datastores, "
                      "sd with a draft model); or drafters joined by '+' into one tree, NAME@N for a fixed cap of N draft tokens, "
                      "NAME:POLICY for an acceptance policy (greedy, sampling, topk, entropy, direct). Drafters:\n";
    for (const drafter_desc & d : drafter_table()) {
        char line[64];
        snprintf(line, sizeof(line), "  %-22s", d.name);
        out += line + std::string(d.help) + "\n";
    }
    return out;
}

void add_cache_type_option(CLI::App * sub, std::string & type) {
    sub->add_option("--cache-type", type,
                    "the target's KV cache type, K and V: f16, or q8_0 (half the memory for long contexts; exact with flash "
                    "attention on the CPU: speculative output equals its own ar output, which may differ slightly from f16's)")
        ->capture_default_str();
}

void add_rs_snapshots_option(CLI::App * sub, int32_t & n) {
    sub->add_option("--rs-snapshots", n,
                    "a recurrent or hybrid model's snapshots of its state (Qwen3.5, Qwen3-Next, Mamba-2, Nemotron-H), 0.." +
                        std::to_string(CONTEXT_RS_ROLLBACK) + ": the longest draft a pass takes back, each a copy of the "
                        "state per sequence in memory; 0 = checkpoints instead (a copy before a drafted pass, loaded back "
                        "after a rejection, whose accepted tokens are decoded again). Models llama.cpp cannot roll back "
                        "(Granite 4's hybrid, Falcon-H1, Jamba, RWKV) always take checkpoints")
        ->check(CLI::Range(0, CONTEXT_RS_ROLLBACK))
        ->capture_default_str();
}

void add_request_options(CLI::App * sub, request_opts & o, const std::string & methods) {
    sub->footer(methods_footer());
    sub->add_option("-m,--model", o.model, "GGUF model file (default: $EDITSPEC_MODEL or the shipped model)");
    sub->add_option("--method", o.method, methods)->capture_default_str();
    sub->add_option("--draft-model", o.draft_model,
                    "GGUF draft model with the target's vocabulary (sd, efficientedit; default: $EDITSPEC_DRAFT_MODEL, "
                    "or the shipped draft model with the shipped target)");
    sub->add_option("--head-model", o.head_model,
                    "a head file trained over the target, as llama-server's -md takes it (llama-draft-eagle3: arch eagle3; "
                    "llama-draft-dflash, llama-draft-dspark: arch dflash)");
    add_draft_options(sub, o.draft);
    add_method_settings(sub, o.settings);
    sub->add_option("-t,--threads", o.threads, "CPU threads (0 = all cores)")->capture_default_str();
    sub->add_option("-c,--ctx-size", o.n_ctx, "KV cache size in tokens")->capture_default_str();
    sub->add_flag("--flash-attn,!--no-flash-attn", o.flash_attn, "flash attention (default on: exact with our ggml patch, faster)");
    add_cache_type_option(sub, o.cache_type);
    add_rs_snapshots_option(sub, o.rs_snapshots);
    sub->add_option("--datastore", o.datastores, "common retrieval datastore for the rest and fastcoder methods (built by `editspec index`; repeatable)");
    sub->add_option("--repo-datastore", o.repo_datastores, "the repository's retrieval datastore for fastcoder (D_r; repeatable)");
}

int request_runner_params(const char * cmd, const request_opts & o, method_spec & ms, bool draft_always, runner_params & rp) {
    if (const int status = check_draft_options(cmd, o.draft); status != 0) {
        return status;
    }
    if (o.threads < 0 || o.threads > 1024) {
        return fail_input(cmd, "--threads " + std::to_string(o.threads) + " out of range [0, 1024]");
    }
    if (o.n_ctx < 16 || o.n_ctx > (1 << 20)) {
        return fail_input(cmd, "--ctx-size " + std::to_string(o.n_ctx) + " out of range [16, 1048576]");
    }
    if (const std::string bad = method_settings_check(o.settings); !bad.empty()) {
        return fail_input(cmd, bad);
    }
    std::string error;
    if (!method_parse(o.method, ms, &error)) {
        return fail_input(cmd, error);
    }
    ggml_type kv_type = GGML_TYPE_F16;
    if (!kv_cache_type_parse(o.cache_type, kv_type, &error)) {
        return fail_input(cmd, error);
    }
    if (kv_type != GGML_TYPE_F16 && !o.flash_attn) {
        return fail_input(cmd, "--cache-type " + o.cache_type + " needs flash attention: drop --no-flash-attn");
    }
    rp = runner_params{};
    rp.kv_type = kv_type;
    rp.rs_snapshots = o.rs_snapshots;
    rp.model_path = o.model.empty() ? default_model_path() : o.model;
    rp.draft_model_path = o.draft_model;
    if (rp.draft_model_path.empty() && (draft_always || ms.uses_draft_model())) {
        rp.draft_model_path = default_draft_model_path(rp.model_path);
        if (rp.draft_model_path.empty() && ms.uses_draft_model()) {
            return fail_input(cmd, "method '" + ms.name + "' needs a draft model: pass --draft-model FILE (a GGUF with the "
                                   "vocabulary of '" + rp.model_path + "') or set EDITSPEC_DRAFT_MODEL");
        }
    }
    rp.head_model_path = o.head_model;
    rp.n_ctx = o.n_ctx;
    rp.n_threads = o.threads;
    rp.flash_attn = o.flash_attn;
    rp.trees = !ms.is_ar();
    rp.draft = o.draft;
    rp.settings = o.settings;
    rp.datastore_paths = o.datastores;
    rp.repo_datastore_paths = o.repo_datastores;
    return 0;
}

int open_request_runner(const char * cmd, const request_opts & o, method_spec & ms, runner & rn) {
    runner_params rp;
    if (const int status = request_runner_params(cmd, o, ms, false, rp); status != 0) return status;
    std::string error;
    if (!runner_open(rp, rn, &error)) {
        // models and datastores that loaded but a context that could not be created: the machine's failure
        const bool inputs_ok = rn.target.model && (rp.draft_model_path.empty() || rn.draft.model) &&
                               (rp.head_model_path.empty() || rn.head.model) &&
                               rn.datastores.size() == rp.datastore_paths.size() + rp.repo_datastore_paths.size();
        return inputs_ok ? fail_runtime(cmd, error) : fail_input(cmd, error);
    }
    return 0;
}

int run_request(const char * cmd, runner & rn, const method_spec & ms, const request & rq, generate_result & r) {
    if (const std::string over = request_over_context(rq, rn.params.n_ctx); !over.empty()) {
        return fail_input(cmd, over + " (raise --ctx-size)");
    }
    std::string error;
    if (!runner_generate(rn, ms, rq, r, &error)) {
        return fail_input(cmd, error);
    }
    if (r.stop == STOP_REASON_ERROR) {
        return fail_input(cmd, r.error);
    }
    return 0;
}

} // namespace editspec::cli
