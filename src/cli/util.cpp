#include "cli/commands.h"
#include "editspec/cost.h"
#include "editspec/draft.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sys/stat.h>

namespace editspec::cli {

int fail_input(const char * cmd, const std::string & msg) {
    fprintf(stderr, "editspec %s: error: %s\n", cmd, msg.c_str());
    return 2;
}

int fail_runtime(const char * cmd, const std::string & msg) {
    fprintf(stderr, "editspec %s: error: %s\n", cmd, msg.c_str());
    return 1;
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

// --draft-model, or the default when the method needs one; loaded and checked against the target.
// Returns an exit status; leaves `out` empty when the method drafts without a model.
static int load_draft_for_method(const char * cmd, const method_spec & ms, const std::string & draft_opt, const model & target,
                          const std::string & target_path, std::string & draft_path, model_load_result & out) {
    draft_path = draft_opt;
    if (draft_path.empty() && ms.uses_draft_model()) {
        draft_path = default_draft_model_path(target_path);
        if (draft_path.empty()) {
            return fail_input(cmd, "method '" + ms.name + "' needs a draft model: pass --draft-model FILE (a GGUF with the "
                                   "vocabulary of '" + target_path + "') or set EDITSPEC_DRAFT_MODEL");
        }
    }
    if (draft_path.empty()) return 0;
    std::string error;
    if (!load_draft_model(draft_path, target, target_path, out, &error)) {
        return fail_input(cmd, error);
    }
    return 0;
}

void add_draft_options(CLI::App * sub, draft_model_params & dp) {
    sub->add_option("--gamma", dp.gamma, "draft-model tokens per proposal (sd, efficientedit)")->capture_default_str();
    sub->add_option("--draft-p-min", dp.p_min,
                    "stop a draft-model proposal at a token whose draft probability is below this (0 = always gamma)")
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

bool load_draft_model(const std::string & path, const model & target, const std::string & target_path,
                      model_load_result & out, std::string * error) {
    out = model_load(path);
    if (!out.model) {
        if (error) *error = out.error;
        return false;
    }
    std::string why;
    if (!model_vocab_compatible(target, *out.model, &why)) {
        if (error) {
            *error = "draft model '" + path + "' cannot draft for target '" + target_path + "': vocabularies differ (" +
                     why + ")";
        }
        out.model.reset();
        return false;
    }
    return true;
}

int generate_with_method(const char * cmd, context & ctx, std::span<const llama_token> prompt,
                         const generate_params & gp, const method_spec & ms, const method_inputs & in,
                         generate_result & r) {
    std::string error;
    cost_model cost;
    if (!ms.is_ar() && ms.draft_max == 0 && !cost_model_get(ctx, cost, &error)) {
        return fail_runtime(cmd, error);
    }
    if (!method_generate(ctx, prompt, gp, ms, in, &cost, nullptr, r, &error)) {
        return fail_input(cmd, error);
    }
    if (r.stop == STOP_REASON_ERROR) {
        return fail_input(cmd, r.error);
    }
    return 0;
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
        {"tokens_per_s", r.tokens_per_s()},
        {"target_passes", r.target_passes},
        {"tokens_per_pass", r.tokens_per_pass()},
        {"stop", stop_reason_name(r.stop)},
        {"model", ctx.owner().path()},
        {"threads", ctx.n_threads()},
        {"flash_attn", ctx.params().flash_attn},
        {"method", ms.name},
        {"draft_tokens", r.draft_tokens},
        {"accepted", r.accepted},
        {"draft_ms", r.draft_ms},
        {"decode_ms", r.decode_ms},
        {"by_source", by_source},
    };
}

int load_request_models(const char * cmd, const std::string & method, const std::string & model_opt,
                        const std::string & draft_opt, const draft_model_params & dp, request_models & out) {
    if (const int status = check_draft_options(cmd, dp); status != 0) {
        return status;
    }
    std::string error;
    if (!method_parse(method, out.ms, &error)) {
        return fail_input(cmd, error);
    }
    out.model_path = model_opt.empty() ? default_model_path() : model_opt;
    out.target = model_load(out.model_path);
    if (!out.target.model) {
        return fail_input(cmd, out.target.error);
    }
    return load_draft_for_method(cmd, out.ms, draft_opt, *out.target.model, out.model_path, out.draft_path, out.draft);
}

} // namespace editspec::cli
