// editspec bench as a user runs it (src/cli/cmd-bench.cpp, src/bench/): results.json's fields,
// --tests (pass@1 with the dataset's reference solutions as the harness check), the edit layout,
// and clear errors for bad flags. Tiny random model, one thread.
#include "common/test-util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace {

using editspec::test::temp_dir;

const std::string k_canitedit = std::string(EDITSPEC_DATASETS) + "/canitedit/normalized.jsonl";
const std::string k_bench = std::string(EDITSPEC_BIN) + " bench -m " + EDITSPEC_TEST_MODEL_Q8 +
                            " --dataset " + k_canitedit + " --threads 1";

// a bad input: exit status 2 and a message that names the offending value
void expect_input_error(const std::string & cmd, const std::string & names) {
    std::string out;
    const int rc = editspec::test::run_command(cmd + " 2>&1", &out);
    EXPECT_EQ(rc, 2) << cmd << "\n" << out;
    EXPECT_NE(out.find(names), std::string::npos) << cmd << "\n" << out;
}

// `bench --oracle --cost-curve design` with the DeepSeek-Coder tokenizer: the command (without
// --out) and, after running it with `args` into `dir`, its oracle.md
std::string oracle_cmd() {
    return std::string(EDITSPEC_BIN) + " bench --oracle --cost-curve design -m " +
           editspec::test::vocab_path("deepseek-coder") + " --dataset " + k_canitedit;
}

std::string oracle_md(const std::string & args, const fs::path & dir) {
    std::string out;
    const int rc = editspec::test::run_command(oracle_cmd() + " " + args + " --out " + dir.string() + " 2>&1", &out);
    EXPECT_EQ(rc, 0) << out;
    std::ifstream f(dir / "oracle.md");
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// a row of oracle.md's table by its "| method | sizing |" start; all -1 when missing
struct oracle_figures {
    double tokens_per_pass = -1, draft_per_pass = -1, accepted_share = -1, speedup = -1;
};

oracle_figures oracle_row(const std::string & md, const std::string & start) {
    oracle_figures f;
    const size_t at = md.find(start);
    if (at == std::string::npos) return f;
    // after the method and sizing: tokens per pass | draft per pass | accepted share | rejected per
    // pass | cut short (cost-model rows) | speedup "Nx"
    const size_t from = at + start.size(), end = md.find('\n', from);
    std::vector<std::string> cells;
    std::istringstream row(md.substr(from, end == std::string::npos ? std::string::npos : end - from));
    for (std::string c; std::getline(row, c, '|');) cells.push_back(c);
    if (cells.size() < 6) return f;
    f.tokens_per_pass = atof(cells[0].c_str());
    f.draft_per_pass  = atof(cells[1].c_str());
    f.accepted_share  = atof(cells[2].c_str());
    f.speedup         = atof(cells[5].c_str()); // atof stops at the 'x'
    return f;
}

} // namespace

TEST(cli_bench, tests_give_pass_at_1_per_method) {
    temp_dir d;
    std::string out;
    const int rc = editspec::test::run_command(
        k_bench + " --task edit --methods ar,reuse,lookup --limit 2 -n 24 --tests --out " + d.path.string() + " 2>&1", &out);
    ASSERT_EQ(rc, 0) << out;
    std::ifstream f(d.path / "results.json");
    const nlohmann::json j = nlohmann::json::parse(f);
    EXPECT_EQ(j["layout"], "edit");
    EXPECT_EQ(j["tests"]["reference_tested"], 2);
    EXPECT_TRUE(j["tests"]["reference_failed"].empty()) << j["tests"].dump();
    for (const char * m : {"ar", "reuse", "lookup"}) {
        const auto & s = j["methods"][m];
        EXPECT_EQ(s["items"], 2) << m;
        EXPECT_EQ(s["tests_run"], 2) << m;
        // a random model's 24 tokens are no solution
        EXPECT_EQ(s["tests_passed"], 0) << m;
        EXPECT_TRUE(s["identical_to_ar"].get<bool>()) << m;
        EXPECT_DOUBLE_EQ(s["mean_edit_similarity_vs_ar"].get<double>(), 1.0) << m;
    }
    int rows = 0;
    for (const auto & r : j["items"]) {
        EXPECT_EQ(r["tests"], "fail");
        rows++;
    }
    EXPECT_EQ(rows, 6);
    std::ifstream md(d.path / "report.md");
    std::stringstream ss;
    ss << md.rdbuf();
    EXPECT_NE(ss.str().find("pass@1"), std::string::npos);
    EXPECT_NE(ss.str().find("reference solutions pass on 2 of 2"), std::string::npos) << ss.str();
    // a sized method's decode time and the cost model's figure, by the passes' depth, add up to its totals
    const auto & lk = j["methods"]["lookup"];
    ASSERT_EQ(lk["decode_ms_by_depth"].size(), 5u) << lk.dump();
    double ms = 0, model_ms = 0;
    for (size_t b = 0; b < 5; b++) {
        ms += lk["decode_ms_by_depth"][b].get<double>();
        model_ms += lk["decode_model_ms_by_depth"][b].get<double>();
    }
    EXPECT_NEAR(ms, lk["decode_ms"].get<double>(), 1e-6 * (1 + ms));
    EXPECT_NEAR(model_ms, lk["decode_model_ms"].get<double>(), 1e-6 * (1 + model_ms));
    EXPECT_GT(model_ms, 0.0);
    EXPECT_NE(ss.str().find("Decode time by the pass's depth"), std::string::npos) << ss.str();
}

TEST(cli_bench, bad_flags_are_clear_errors) {
    temp_dir d;
    const std::string out = " --out " + d.path.string();
    expect_input_error(k_bench + " --replay --tests" + out, "--replay");
    expect_input_error(k_bench + " --layout sideways" + out, "sideways");
    expect_input_error(k_bench + " --methods ar,nonsense" + out, "nonsense");
    expect_input_error(std::string(EDITSPEC_BIN) + " bench -m /nonexistent.gguf --dataset " + k_canitedit + out,
                       "/nonexistent.gguf");
    EXPECT_FALSE(fs::exists(d.path / "results.json"));
}

// --no-ar: the first method is the reference (no ar row); --apply-view: the prompt shows less of the
// file, and the report says so
TEST(cli_bench, no_ar_and_the_apply_view) {
    temp_dir d;
    std::string out;
    const std::string cmd = k_bench + " --task apply --constrain --limit 2 -n 24 --no-ar --methods reuse,lookup+reuse " +
                            "--apply-view none --out " + d.path.string() + " 2>&1";
    ASSERT_EQ(editspec::test::run_command(cmd, &out), 0) << out;
    std::ifstream f(d.path / "results.json");
    const nlohmann::json j = nlohmann::json::parse(f);
    EXPECT_EQ(j["apply_view"], "none");
    ASSERT_EQ(j["methods"].size(), 2u) << j["methods"].dump();
    EXPECT_FALSE(j["methods"].contains("ar"));
    EXPECT_DOUBLE_EQ(j["methods"]["reuse"]["speedup_vs_ar"].get<double>(), 1.0);
    EXPECT_TRUE(j["methods"]["lookup+reuse"]["identical_to_ar"].get<bool>()); // lossless under the constraint
    for (const auto & row : j["items"]) EXPECT_NE(row["method"], "ar");
    expect_input_error(k_bench + " --task apply --apply-view half --out " + d.path.string(), "half");
    expect_input_error(k_bench + " --task edit --apply-view none --out " + d.path.string(), "--apply-view");
}

// --write-tasks: the apply tasks a run would decode, for an endpoint's test (scripts/apply-check.py);
// snippets elide unchanged code (where the change leaves some), and the expected file is the reference
TEST(cli_bench, write_tasks_lists_the_apply_tasks) {
    temp_dir d;
    const fs::path f = d.path / "tasks.jsonl";
    std::string out;
    ASSERT_EQ(editspec::test::run_command(k_bench + " --task apply --limit 3 --write-tasks " + f.string() + " 2>&1", &out), 0) << out;
    std::ifstream in(f);
    std::string line;
    int n = 0, elided = 0;
    while (std::getline(in, line)) {
        const nlohmann::json t = nlohmann::json::parse(line);
        EXPECT_TRUE(t["code"].is_string() && t["expected"].is_string() && t["id"].is_string()) << line;
        elided += t["update"].get<std::string>().find("# ... existing code ...") != std::string::npos;
        EXPECT_NE(t["code"], t["expected"]) << line;
        n++;
    }
    EXPECT_EQ(n, 3) << out;
    EXPECT_GE(elided, 1);
    expect_input_error(k_bench + " --task edit --write-tasks " + f.string(), "--task apply");
}

// --oracle: no model passes; with the design's curve the DeepSeek-Coder tokenizer gives its figures
// (docs/results/design-notes/cost-curve-and-oracle.md)
TEST(cli_bench, oracle_reproduces_design_figures) {
    temp_dir d;
    const std::string md = oracle_md("--methods ar,lookup-longest,reuse+lookup@8", d.path);
    // docs/results/design-notes/cost-curve-and-oracle.md: longest lookup 7.71 tokens/pass, clairvoyant 3.69x, fixed cap 8 2.52x
    EXPECT_NE(md.find("| lookup-longest | clairvoyant | 7.71 |"), std::string::npos) << md;
    EXPECT_NE(md.find("| 1.000 | 0.00 |  | 3.69x |"), std::string::npos) << md;
    EXPECT_NE(md.find("| lookup-longest | cap 8 | 4.89 | 7.09 | 0.548 |"), std::string::npos) << md;
    EXPECT_NEAR(oracle_row(md, "| lookup-longest | cap 8 |").speedup, 2.52, 1e-9) << md;
    EXPECT_NE(md.find("| ar | uncapped | 1.00 | 0.00 | 0.000 | 0.00 |  | 1.00x |"), std::string::npos) << md;
    // a fixed cap is the only sizing of its method
    EXPECT_NE(md.find("| reuse+lookup@8 | cap 8 |"), std::string::npos) << md;
    EXPECT_EQ(md.find("| reuse+lookup@8 | grow |"), std::string::npos) << md;

    // a draft model cannot be replayed without running it
    expect_input_error(oracle_cmd() + " --out " + d.path.string() + " --methods sd", "'sd'");
    expect_input_error(std::string(EDITSPEC_BIN) + " bench --oracle --cost-curve wavy --dataset " + k_canitedit +
                           " --out " + d.path.string(),
                       "wavy");
}

// --pass-overhead: every pass (ar's too) pays a fixed extra; passes are unchanged, the costs are not
TEST(cli_bench, oracle_pass_overhead_costs_every_pass) {
    temp_dir d;
    const std::string md = oracle_md("--methods ar,lookup-longest@8,lookup --limit 20 --pass-overhead 1", d.path);
    EXPECT_DOUBLE_EQ(oracle_row(md, "| ar | uncapped |").speedup, 1.0) << md;
    const oracle_figures cap8 = oracle_row(md, "| lookup-longest@8 | cap 8 |");
    EXPECT_GT(cap8.speedup, 1.0) << md;
    EXPECT_NE(md.find("--pass-overhead"), std::string::npos) << md;
    const oracle_figures sized = oracle_row(md, "| lookup | cost model |");
    const oracle_figures blind = oracle_row(md, "| lookup | cost model, blind to overhead |");
    EXPECT_GT(blind.speedup, 0.0) << md;
    EXPECT_GE(sized.speedup, blind.speedup - 0.02) << md;
    // the same items without overhead: the same passes, a lower speedup (ar pays the overhead on
    // every token): with o = 1 the speedup is (1 + o) / (1 / speedup_0 + o / tokens per pass)
    temp_dir d0;
    const std::string md0 = oracle_md("--methods lookup-longest@8 --limit 20", d0.path);
    const oracle_figures cap8_0 = oracle_row(md0, "| lookup-longest@8 | cap 8 |");
    ASSERT_GT(cap8_0.speedup, 0.0) << md0;
    EXPECT_DOUBLE_EQ(cap8.tokens_per_pass, cap8_0.tokens_per_pass);
    EXPECT_NEAR(cap8.speedup, 2.0 / (1.0 / cap8_0.speedup + 1.0 / cap8_0.tokens_per_pass), 0.02) << md;
    expect_input_error(oracle_cmd() + " --out " + d0.path.string() + " --pass-overhead -1", "-1");
}

// `editspec cost` on the tiny Q8_0 model, its cache in `cache`, measured now at 1 to 4 tokens, once each
std::string cost_cmd(const temp_dir & cache) {
    return "EDITSPEC_CACHE=" + cache.path.string() + " " + std::string(EDITSPEC_BIN) + " cost -m " + EDITSPEC_TEST_MODEL_Q8 +
           " -t 1 --fresh --max 4 --reps 1";
}

// the cost cache keeps the newest 256 curves (each model file adds one)
TEST(cli_cost, cache_keeps_the_newest_curves) {
    temp_dir cache;
    const fs::path dir = cache.path / "cost";
    fs::create_directories(dir);
    const auto old_time = fs::file_time_type::clock::now() - std::chrono::hours(24);
    for (int i = 0; i < 300; i++) {
        const fs::path f = dir / ("old-" + std::to_string(i) + ".json");
        std::ofstream(f) << "{}";
        fs::last_write_time(f, old_time + std::chrono::seconds(i));
    }
    std::string out;
    const std::string cmd = cost_cmd(cache) + " 2>&1";
    ASSERT_EQ(editspec::test::run_command(cmd, &out), 0) << out;
    int n = 0, n_old = 0;
    for (const auto & e : fs::directory_iterator(dir)) {
        n++;
        n_old += e.path().filename().string().rfind("old-", 0) == 0;
    }
    EXPECT_EQ(n, 256);
    EXPECT_EQ(n_old, 255); // the new curve stays, the 45 oldest went
    EXPECT_FALSE(fs::exists(dir / "old-44.json"));
    EXPECT_TRUE(fs::exists(dir / "old-45.json"));
}

// editspec cost: a fresh measurement at a chosen context, not cached with --no-save
TEST(cli_cost, fresh_measurement_at_a_prefix) {
    temp_dir cache;
    std::string out;
    const std::string cmd = cost_cmd(cache) + " --no-save";
    ASSERT_EQ(editspec::test::run_command(cmd + " --prefix 48 2>/dev/null", &out), 0) << out;
    // a row per size, 1, 2, 3 and 4 tokens (cost_model_sizes), with costs that do not fall (a size
    // may cost what the one below it costs: the kernels work in tiles; 10 % for a shared machine)
    double last = 0.0;
    int rows = 0;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        int n = 0;
        double ms = 0, tps = 0, rel = 0;
        if (sscanf(line.c_str(), "%d %lf %lf %lf", &n, &ms, &tps, &rel) != 4) continue;
        EXPECT_EQ(n, rows + 1) << out;
        EXPECT_GE(ms, 0.9 * last) << out;
        last = ms;
        rows++;
    }
    EXPECT_EQ(rows, 4) << out;
    EXPECT_TRUE(fs::is_empty(cache.path)) << "--no-save wrote the cache";
    expect_input_error(cmd + " --prefix 0", "--prefix 0");
    expect_input_error(cmd + " --prefix 48 --depths 32", "--depths 32");
}

// editspec cost --depths: the same sizes timed after deeper caches, a column each, never below the
// shallower curve
TEST(cli_cost, curves_deeper_in_a_file) {
    temp_dir cache;
    std::string out;
    const std::string cmd = cost_cmd(cache) + " --no-save --prefix 48 --depths 512,160";
    ASSERT_EQ(editspec::test::run_command(cmd + " 2>/dev/null", &out), 0) << out;
    EXPECT_NE(out.find("ms@160"), std::string::npos) << out;
    EXPECT_LT(out.find("ms@160"), out.find("ms@512")) << out; // ascending depths
    int rows = 0;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        int n = 0;
        double ms = 0, tps = 0, rel = 0, d1 = 0, d2 = 0;
        if (sscanf(line.c_str(), "%d %lf %lf %lf %lf %lf", &n, &ms, &tps, &rel, &d1, &d2) != 6) continue;
        EXPECT_GE(d1, ms) << out;
        EXPECT_GE(d2, d1) << out;
        rows++;
    }
    EXPECT_EQ(rows, 4) << out;
}
