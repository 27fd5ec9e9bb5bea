// Bench output: results.json (all figures), report.md (tables), speedup.svg (a plot).
#include "editspec/bench.h"
#include "editspec/draft.h"
#include "editspec/methods.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace editspec {

namespace {

nlohmann::json sources_json(const source_stats * by_source) {
    nlohmann::json j = nlohmann::json::object();
    for (int s = 0; s < DRAFT_SOURCE_COUNT; s++) {
        if (by_source[s].n_drafted == 0) continue;
        j[draft_source_name((uint8_t) s)] = {{"drafted", by_source[s].n_drafted}, {"accepted", by_source[s].n_accepted},
                                            {"offered_passes", by_source[s].n_offered}};
    }
    return j;
}

std::string task_setting(const bench_params & p) {
    std::string s = p.model_setting;
    if (p.replay && s.find("replay") == std::string::npos) s += ", replay";
    return s;
}

bool write_file(const std::string & path, const std::string & text, std::string * error) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary);
        if (!(f << text)) {
            if (error) *error = "cannot write '" + tmp + "'";
            return false;
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        if (error) *error = "cannot rename '" + tmp + "' to '" + path + "'";
        return false;
    }
    return true;
}

const char * layout_name(bench_layout l) {
    return l == BENCH_LAYOUT_EDIT ? "edit prompt" : "raw layout";
}

std::string fmt(const char * f, double v) {
    char buf[64];
    snprintf(buf, sizeof(buf), f, v);
    return buf;
}

std::string xml_escape(const std::string & s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '&': o += "&amp;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    }
    return o;
}

// horizontal bars: speedup over autoregressive decoding, and tokens per target pass
std::string speedup_svg(const bench_results & res) {
    const auto & sums = res.summary;
    const int bar_h = 26, gap = 10, left = 210, width = 760, plot_w = 460;
    const int panel_h = (int) sums.size() * (bar_h + gap) + 50;
    const int height = 80 + 2 * panel_h;
    double max_speed = 1.0, max_tpp = 1.0;
    for (const auto & s : sums) {
        max_speed = std::max(max_speed, s.speedup_vs_ar);
        max_tpp = std::max(max_tpp, s.mean_accepted_per_pass);
    }
    std::ostringstream o;
    o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"13\">\n";
    o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    o << "<text x=\"16\" y=\"26\" font-size=\"16\" font-weight=\"bold\">editspec bench: "
      << xml_escape(std::filesystem::path(res.params.dataset_path).parent_path().filename().string()) << " ("
      << res.summary.front().items << " items, " << xml_escape(task_setting(res.params)) << ")</text>\n";
    o << "<text x=\"16\" y=\"46\" fill=\"#555\">" << xml_escape(res.model_desc) << " · " << xml_escape(res.machine)
      << "</text>\n";
    auto panel = [&](int y0, const char * title, double max_v, bool speed) {
        o << "<text x=\"16\" y=\"" << y0 + 20 << "\" font-weight=\"bold\">" << title << "</text>\n";
        const double scale = plot_w / (max_v * 1.1);
        if (speed) {
            const int x1 = left + (int) (1.0 * scale);
            o << "<line x1=\"" << x1 << "\" y1=\"" << y0 + 30 << "\" x2=\"" << x1 << "\" y2=\"" << y0 + panel_h - 12
              << "\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>\n";
            o << "<text x=\"" << x1 + 3 << "\" y=\"" << y0 + panel_h - 14 << "\" fill=\"#777\" font-size=\"11\">1× (ar)</text>\n";
        }
        for (size_t i = 0; i < sums.size(); i++) {
            const auto & s = sums[i];
            const double v = speed ? s.speedup_vs_ar : s.mean_accepted_per_pass;
            const int y = y0 + 34 + (int) i * (bar_h + gap);
            const int w = std::max(1, (int) (v * scale));
            const char * color = method_name_is_ar(s.method) ? "#9e9e9e" : (s.identical_to_ar ? "#2e7d32" : "#c62828");
            o << "<text x=\"" << left - 8 << "\" y=\"" << y + bar_h / 2 + 5 << "\" text-anchor=\"end\">"
              << xml_escape(s.method) << "</text>\n";
            o << "<rect x=\"" << left << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << bar_h
              << "\" fill=\"" << color << "\" rx=\"3\"/>\n";
            o << "<text x=\"" << left + w + 6 << "\" y=\"" << y + bar_h / 2 + 5 << "\">"
              << (speed ? fmt("%.2f×", v) : fmt("%.2f", v)) << "</text>\n";
        }
    };
    panel(60, "Wall-clock speedup over autoregressive decoding (same run, same items)", max_speed, true);
    panel(60 + panel_h, "Tokens per target pass", max_tpp, false);
    o << "<text x=\"16\" y=\"" << height - 10 << "\" fill=\"#777\" font-size=\"11\">green: output identical to "
         "autoregressive decoding on every item; red: differs on some</text>\n";
    o << "</svg>\n";
    return o.str();
}

// chat: per turn (CopySpec's Tables 2-3: tokens/s, copied share, speedup) and per category and turn
std::string chat_tables_md(const bench_results & res) {
    std::ostringstream o;
    int32_t n_turns = 0;
    std::vector<std::string> categories;
    std::map<std::string, int32_t> prompt_decoded, prompt_total; // per method, over every turn after the first
    for (const bench_row & r : res.rows) {
        n_turns = std::max(n_turns, r.turn);
        if (std::find(categories.begin(), categories.end(), r.category) == categories.end()) categories.push_back(r.category);
    }
    o << "\n## By turn\n\nCopied / drafted: tokens the target accepted from the copy drafter / from any drafter, "
         "as a share of the tokens generated. Prompt: tokens of the turn's prompt decoded (the rest were in the KV "
         "cache from the earlier turns) and the prefill time.\n\n"
         "| turn | method | items | tokens/s | speedup vs ar | tokens per pass | copied | drafted | identical to ar | prompt tokens decoded / all | prefill ms |\n"
         "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |\n";
    for (int32_t t = 1; t <= n_turns; t++) {
        for (const bench_summary & s : bench_summarize_rows(res, t, "")) {
            int64_t decoded = 0, total = 0;
            double prefill = 0.0;
            for (const bench_row & r : res.rows) {
                if (r.turn != t || r.method != s.method) continue;
                decoded += r.prompt_tokens - r.prompt_cached;
                total += r.prompt_tokens;
                prefill += r.prompt_ms;
            }
            const double n = std::max<double>(1.0, (double) s.tokens);
            o << "| " << t << " | " << s.method << " | " << s.items << " | " << fmt("%.2f", s.tokens_per_s) << " | "
              << fmt("%.2f×", s.speedup_vs_ar) << " | " << fmt("%.2f", s.mean_accepted_per_pass) << " | "
              << fmt("%.1f%%", 100.0 * (double) s.by_source[DRAFT_SOURCE_COPY].n_accepted / n) << " | "
              << fmt("%.1f%%", 100.0 * (double) s.accepted / n) << " | " << (s.identical_to_ar ? "yes" : "no") << " | "
              << decoded << " / " << total << " | " << fmt("%.0f", prefill) << " |\n";
        }
    }
    if (categories.size() > 1) {
        o << "\n## By category and turn (speedup over ar; ar in tokens/s)\n\n| category | turn | ar tok/s |";
        for (const std::string & m : res.params.methods) if (!method_name_is_ar(m)) o << " " << m << " |";
        o << "\n| --- | ---: | ---: |";
        for (const std::string & m : res.params.methods) if (!method_name_is_ar(m)) o << " ---: |";
        o << "\n";
        for (const std::string & c : categories) {
            for (int32_t t = 1; t <= n_turns; t++) {
                const std::vector<bench_summary> ss = bench_summarize_rows(res, t, c);
                if (ss.empty() || ss.front().items == 0) continue;
                o << "| " << c << " | " << t << " | " << fmt("%.2f", ss.front().tokens_per_s) << " |";
                for (size_t k = 1; k < ss.size(); k++) o << " " << fmt("%.2f×", ss[k].speedup_vs_ar) << " |";
                o << "\n";
            }
        }
    }
    return o.str();
}

// the run's setting: model, dataset, items, machine, start
static void report_setting_md(std::ostringstream & o, const bench_results & res) {
    const bench_params & p = res.params;
    o << "| | |\n| --- | --- |\n";
    o << "| model | `" << p.model_path << "` — " << res.model_desc << " |\n";
    o << "| model setting | " << task_setting(p) << " |\n";
    if (p.no_ar && !p.methods.empty()) {
        o << "| reference | `" << p.methods.front() << "` in ar's place (--no-ar): speedups and identity are against it |\n";
    }
    if (p.task == DATASET_TASK_CHAT) {
        o << "| dataset | `" << p.dataset_path << "` (chat: each conversation turn by turn, in the model's chat template "
             "or the plain one, going on from ar's answers) |\n";
    } else {
        const std::string view = p.apply ? std::string(", the prompt's view of the file: ") + apply_view_name(apply_view_for(p.file_view, p.constrain)) : "";
        o << "| dataset | `" << p.dataset_path << "` (" << (p.apply ? (p.constrain ? "apply, constrained" : "apply") : dataset_task_name(p.task)) << view << ", "
          << (p.instruction == INSTRUCTION_KIND_LAZY ? "lazy" : "descriptive") << " instruction, " << layout_name(res.layout)
          << ") |\n";
    }
    o << "| " << (p.task == DATASET_TASK_CHAT ? "turns" : "items") << " | " << (res.summary.empty() ? 0 : res.summary.front().items);
    if (p.fit_train_ctx) {
        o << " of " << res.items_in << " (" << res.items_past_train_ctx << " past the model's training context, left out)";
    }
    o << " |\n";
    o << "| machine | " << res.machine << ", " << (p.threads > 0 ? std::to_string(p.threads) : std::string("all"))
      << " threads, flash attention " << (p.flash_attn ? "on" : "off")
      << (p.kv_type != GGML_TYPE_F16 ? std::string(", ") + ggml_type_name(p.kv_type) + " KV cache" : "") << " |\n";
    o << "| started | " << res.started << " |\n\n";
}

// measured decode time against the cost model's figure, by the passes' depth, for the sized methods
static std::string decode_by_depth_md(const bench_results & res) {
    bool any[COST_DEPTH_BUCKETS] = {};
    for (const auto & s : res.summary) {
        for (int32_t b = 0; b < COST_DEPTH_BUCKETS; b++) any[b] = any[b] || s.decode_model_ms_at[b] > 0;
    }
    std::ostringstream o;
    o << "\nDecode time by the pass's depth (tokens cached before it): measured ms / the cost model's ms (ratio)\n\n| method |";
    int32_t cols = 0;
    for (int32_t b = 0; b < COST_DEPTH_BUCKETS; b++) {
        if (any[b]) {
            o << " " << cost_depth_bucket_name(b) << " |";
            cols++;
        }
    }
    if (cols == 0) return "";
    o << "\n| --- |";
    for (int32_t i = 0; i < cols; i++) o << " ---: |";
    o << "\n";
    for (const auto & s : res.summary) {
        if (s.decode_model_ms <= 0) continue;
        o << "| " << s.method << " |";
        for (int32_t b = 0; b < COST_DEPTH_BUCKETS; b++) {
            if (!any[b]) continue;
            if (s.decode_model_ms_at[b] > 0) {
                o << " " << fmt("%.0f", s.decode_ms_at[b]) << " / " << fmt("%.0f", s.decode_model_ms_at[b]) << " ("
                  << fmt("%.2f", s.decode_ms_at[b] / s.decode_model_ms_at[b]) << ") |";
            } else {
                o << " |";
            }
        }
        o << "\n";
    }
    return o.str();
}

std::string report_md(const bench_results & res) {
    const bench_params & p = res.params;
    std::ostringstream o;
    o << "# editspec bench\n\n";
    report_setting_md(o, res);
    const bool tested = p.run_tests && !res.summary.empty() && res.summary.front().tested > 0;
    const bool checked = !p.replay && !res.summary.empty() && res.summary.front().checked > 0;
    o << "| method | tokens/s | speedup vs ar | tokens per pass | target passes | draft tokens | accepted | draft ms | decode ms | cost model's decode ms | other ms | identical to ar | edit sim. vs ar |"
      << (checked ? " exact |" : "") << (tested ? " pass@1 |" : "") << "\n";
    o << "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |" << (checked ? " ---: |" : "")
      << (tested ? " ---: |" : "") << "\n";
    for (const auto & s : res.summary) {
        o << "| " << s.method << " | " << fmt("%.2f", s.tokens_per_s) << " | " << fmt("%.2f×", s.speedup_vs_ar) << " | "
          << fmt("%.2f", s.mean_accepted_per_pass) << " | " << s.target_passes << " | " << s.draft_tokens << " | "
          << s.accepted << " | " << fmt("%.0f", s.draft_ms) << " | " << fmt("%.0f", s.decode_ms) << " | "
          << (s.decode_model_ms > 0 ? fmt("%.0f", s.decode_model_ms) : std::string("")) << " | "
          << fmt("%.0f", std::max(0.0, s.gen_ms - s.draft_ms - s.decode_ms)) << " | "
          << (s.identical_to_ar ? "yes" : "no (" + std::to_string(s.n_different) + " items differ)") << " | "
          << fmt("%.3f", s.mean_edit_sim_vs_ar) << " |";
        if (checked) {
            o << " " << fmt("%.3f", (double) s.exact / s.checked) << " (" << s.exact << "/" << s.checked << ") |";
        }
        if (tested) {
            o << " " << fmt("%.3f", s.pass_at_1) << " (" << s.passed << "/" << s.tested << ") |";
        }
        o << "\n";
    }
    if (tested) {
        o << "\npass@1: the item's own tests on the output (python3, " << fmt("%.0f", p.tests.timeout_s)
          << " s timeout, no network). The dataset's reference solutions pass on "
          << res.reference_tested - (int32_t) res.reference_failed.size() << " of " << res.reference_tested
          << " items under the same harness";
        if (!res.reference_failed.empty()) {
            o << " (fail here:";
            for (const std::string & id : res.reference_failed) o << " " << id;
            o << ")";
        }
        o << ".\n";
    }
    o << "\nSpeedup: summed generation time of `ar` over the method's, same items, same run. Tokens per pass: "
         "tokens produced (EOS included) per target pass. Other ms: generation time outside drafting and the "
         "target's decodes (verification, sampling, tree layout, KV bookkeeping, output).\n";
    if (p.task == DATASET_TASK_CHAT) o << chat_tables_md(res);
    if (!res.cost_n.empty()) {
        o << "\nCost model (measured at start, ms per pass):\n\n| tokens | ";
        for (int32_t n : res.cost_n) o << n << " | ";
        o << "\n| --- |";
        for (size_t i = 0; i < res.cost_n.size(); i++) o << " ---: |";
        o << "\n| ms" << (res.cost_deeper.empty() ? "" : fmt(" at %.0f cached tokens", (double) res.cost_depth0)) << " | ";
        for (double ms : res.cost_ms) o << fmt("%.1f", ms) << " | ";
        o << "\n";
        for (const cost_depth_curve & c : res.cost_deeper) {
            o << "| ms at " << c.depth << " | ";
            for (size_t i = 0; i < res.cost_n.size(); i++) o << (i < c.ms.size() ? fmt("%.1f", c.ms[i]) : std::string("")) << " | ";
            o << "\n";
        }
        o << decode_by_depth_md(res);
    }
    o << "\n![speedup](speedup.svg)\n\n## Per item\n\n| item | method | tokens | passes | tokens/pass | gen ms | identical |"
      << (tested ? " tests |" : "") << "\n| --- | --- | ---: | ---: | ---: | ---: | --- |" << (tested ? " --- |" : "") << "\n";
    for (const auto & r : res.rows) {
        o << "| " << r.item << " | " << r.method << " | " << r.tokens << " | " << r.target_passes << " | "
          << fmt("%.2f", r.target_passes ? (double) (r.tokens + (r.eos ? 1 : 0)) / r.target_passes : 0.0) << " | "
          << fmt("%.0f", r.gen_ms) << " | " << (r.identical_to_ar ? "yes" : "**no**") << " |";
        if (tested) o << (r.tested ? (r.passed ? " pass |" : " fail |") : " — |");
        o << "\n";
    }
    return o.str();
}

} // namespace

bool bench_write(const bench_results & res, const std::string & dir, std::string * error) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
        if (error) *error = "cannot create '" + dir + "': " + ec.message();
        return false;
    }
    const bench_params & p = res.params;
    nlohmann::json j;
    j["model"] = p.model_path;
    j["model_desc"] = res.model_desc;
    j["model_setting"] = task_setting(p);
    j["dataset"] = p.dataset_path;
    j["task"] = p.apply ? "apply" : dataset_task_name(p.task);
    j["constrained"] = p.constrain;
    if (p.apply) j["apply_view"] = apply_view_name(apply_view_for(p.file_view, p.constrain));
    j["instruction"] = p.instruction == INSTRUCTION_KIND_LAZY ? "lazy" : "descriptive";
    j["replay"] = p.replay;
    j["items_in"] = res.items_in;
    j["items_past_train_ctx"] = res.items_past_train_ctx;
    j["layout"] = res.layout == BENCH_LAYOUT_EDIT ? "edit" : "raw";
    j["threads"] = p.threads;
    j["flash_attn"] = p.flash_attn;
    j["kv_cache_type"] = ggml_type_name(p.kv_type);
    j["rs_snapshots"] = p.rs_snapshots;
    j["machine"] = res.machine;
    j["started"] = res.started;
    if (p.run_tests) {
        j["tests"] = {{"timeout_s", p.tests.timeout_s}, {"no_network", p.tests.no_network},
                      {"reference_tested", res.reference_tested}, {"reference_failed", res.reference_failed}};
    }
    if (!res.cost_n.empty()) j["cost_model"] = {{"n", res.cost_n}, {"ms", res.cost_ms}};
    nlohmann::json methods = nlohmann::json::object();
    for (const auto & s : res.summary) {
        methods[s.method] = {
            {"items", s.items},
            {"tokens", s.tokens},
            {"tokens_per_s", s.tokens_per_s},
            {"speedup_vs_ar", s.speedup_vs_ar},
            {"mean_accepted_per_pass", s.mean_accepted_per_pass},
            {"target_passes", s.target_passes},
            {"draft_tokens", s.draft_tokens},
            {"accepted_draft_tokens", s.accepted},
            {"draft_ms", s.draft_ms},
            {"decode_ms", s.decode_ms},
            {"decode_model_ms", s.decode_model_ms},
            {"checkpoint_ms", s.checkpoint_ms},
            {"decode_ms_by_depth", std::vector<double>(s.decode_ms_at, s.decode_ms_at + COST_DEPTH_BUCKETS)},
            {"decode_model_ms_by_depth", std::vector<double>(s.decode_model_ms_at, s.decode_model_ms_at + COST_DEPTH_BUCKETS)},
            {"gen_ms", s.gen_ms},
            {"other_ms", std::max(0.0, s.gen_ms - s.draft_ms - s.decode_ms)},
            {"identical_to_ar", s.identical_to_ar},
            {"items_differing_from_ar", s.n_different},
            {"mean_edit_similarity_vs_ar", s.mean_edit_sim_vs_ar},
            {"tests_run", s.tested},
            {"tests_passed", s.passed},
            {"pass_at_1", s.tested > 0 ? nlohmann::json(s.pass_at_1) : nlohmann::json(nullptr)},
            {"checked", s.checked},
            {"exact", s.exact},
            {"by_source", sources_json(s.by_source)},
        };
    }
    j["methods"] = methods;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto & r : res.rows) {
        rows.push_back({
            {"item", r.item}, {"method", r.method}, {"prompt_tokens", r.prompt_tokens}, {"tokens", r.tokens},
            {"turn", r.turn}, {"category", r.category}, {"prompt_cached", r.prompt_cached}, {"prompt_ms", r.prompt_ms},
            {"target_passes", r.target_passes}, {"draft_tokens", r.draft_tokens}, {"accepted", r.accepted},
            {"gen_ms", r.gen_ms}, {"draft_ms", r.draft_ms}, {"decode_ms", r.decode_ms},
            {"decode_model_ms", r.decode_model_ms}, {"checkpoint_ms", r.checkpoint_ms}, {"eos", r.eos}, {"identical_to_ar", r.identical_to_ar},
            {"edit_similarity_vs_ar", r.edit_sim_vs_ar},
            {"tests", r.tested ? nlohmann::json(r.passed ? "pass" : "fail") : nlohmann::json(nullptr)},
            {"exact", r.checked ? nlohmann::json(r.exact) : nlohmann::json(nullptr)},
            {"code", r.checked ? nlohmann::json(r.code) : nlohmann::json(nullptr)},
            {"by_source", sources_json(r.by_source)},
        });
    }
    j["items"] = rows;
    const std::string base = dir + "/";
    // (an output can hold invalid UTF-8: a model may stop inside a character)
    return write_file(base + "results.json", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", error) &&
           write_file(base + "report.md", report_md(res), error) &&
           write_file(base + "speedup.svg", speedup_svg(res), error);
}

} // namespace editspec
