// editspec bench as a user runs it (src/cli/cmd-bench.cpp, src/bench/): results.json's fields,
// --tests (pass@1 with the dataset's reference solutions as the harness check), the edit layout,
// and clear errors for bad flags. Tiny random model, one thread.
#include "common/test-util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// --oracle: no model passes; with design.md's curve the DeepSeek-Coder tokenizer gives its figures
TEST(cli_bench, oracle_reproduces_design_figures) {
    temp_dir d;
    std::string out;
    const std::string base = std::string(EDITSPEC_BIN) + " bench --oracle --cost-curve design -m " +
                             editspec::test::vocab_path("deepseek-coder") + " --dataset " + k_canitedit +
                             " --out " + d.path.string();
    const int rc = editspec::test::run_command(base + " --methods ar,lookup-longest,reuse+lookup@8 2>&1", &out);
    ASSERT_EQ(rc, 0) << out;
    std::ifstream f(d.path / "oracle.md");
    const std::string md((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // design.md §4: longest lookup 7.71 tokens/pass, clairvoyant 3.69x, fixed cap 8 2.52x
    EXPECT_NE(md.find("| lookup-longest | clairvoyant | 7.71 |"), std::string::npos) << md;
    EXPECT_NE(md.find("| 1.000 | 3.69x |"), std::string::npos) << md;
    EXPECT_NE(md.find("| lookup-longest | cap 8 | 4.89 | 7.09 | 0.548 | 2.52x |"), std::string::npos) << md;
    EXPECT_NE(md.find("| ar | uncapped | 1.00 | 0.00 | 0.000 | 1.00x |"), std::string::npos) << md;
    // a fixed cap is the only sizing of its method
    EXPECT_NE(md.find("| reuse+lookup@8 | cap 8 |"), std::string::npos) << md;
    EXPECT_EQ(md.find("| reuse+lookup@8 | grow |"), std::string::npos) << md;

    // a draft model cannot be replayed without running it
    expect_input_error(base + " --methods sd", "'sd'");
    expect_input_error(std::string(EDITSPEC_BIN) + " bench --oracle --cost-curve wavy --dataset " + k_canitedit +
                           " --out " + d.path.string(),
                       "wavy");
}

// --pass-overhead: every pass (ar's too) pays a fixed extra; passes are unchanged, the costs are not
TEST(cli_bench, oracle_pass_overhead_costs_every_pass) {
    temp_dir d;
    std::string out;
    const std::string cmd = std::string(EDITSPEC_BIN) + " bench --oracle --cost-curve design -m " +
                            editspec::test::vocab_path("deepseek-coder") + " --dataset " + k_canitedit +
                            " --methods ar,lookup-longest@8,lookup --limit 20 --pass-overhead 1 --out " + d.path.string();
    ASSERT_EQ(editspec::test::run_command(cmd + " 2>&1", &out), 0) << out;
    std::ifstream f(d.path / "oracle.md");
    const std::string md((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // speedup of the row that starts with `prefix` (its last column)
    auto speedup = [&](const std::string & prefix) {
        const size_t at = md.find(prefix);
        if (at == std::string::npos) return -1.0;
        const std::string line = md.substr(at, md.find('\n', at) - at);
        const size_t bar = line.rfind('|', line.size() - 2);
        return std::stod(line.substr(bar + 1));
    };
    EXPECT_DOUBLE_EQ(speedup("| ar | uncapped |"), 1.0) << md;
    // with o = 1: tokens x 2 / (sum of t + passes), so the speedup is (1 + o) / (t / tokens + o / tokens per pass)
    const size_t row = md.find("| lookup-longest@8 | cap 8 |");
    ASSERT_NE(row, std::string::npos) << md;
    double tpp = 0, dpp = 0, acc = 0, sp = 0;
    ASSERT_EQ(sscanf(md.c_str() + row, "| lookup-longest@8 | cap 8 | %lf | %lf | %lf | %lfx |", &tpp, &dpp, &acc, &sp), 4) << md;
    EXPECT_GT(sp, 1.0);
    EXPECT_NE(md.find("| lookup | cost model, blind to overhead |"), std::string::npos) << md;
    EXPECT_NE(md.find("--pass-overhead"), std::string::npos) << md;
    EXPECT_GE(speedup("| lookup | cost model |"), speedup("| lookup | cost model, blind to overhead |") - 0.02) << md;
    // the same items without overhead: the same passes, a lower speedup (ar pays the overhead on every token)
    temp_dir d0;
    const std::string cmd0 = std::string(EDITSPEC_BIN) + " bench --oracle --cost-curve design -m " +
                             editspec::test::vocab_path("deepseek-coder") + " --dataset " + k_canitedit +
                             " --methods lookup-longest@8 --limit 20 --out " + d0.path.string();
    ASSERT_EQ(editspec::test::run_command(cmd0 + " 2>&1", &out), 0) << out;
    std::ifstream f0(d0.path / "oracle.md");
    const std::string md0((std::istreambuf_iterator<char>(f0)), std::istreambuf_iterator<char>());
    const size_t row0 = md0.find("| lookup-longest@8 | cap 8 |");
    ASSERT_NE(row0, std::string::npos) << md0;
    double tpp0 = 0, dpp0 = 0, acc0 = 0, sp0 = 0;
    ASSERT_EQ(sscanf(md0.c_str() + row0, "| lookup-longest@8 | cap 8 | %lf | %lf | %lf | %lfx |", &tpp0, &dpp0, &acc0, &sp0), 4);
    EXPECT_DOUBLE_EQ(tpp, tpp0);
    // (1 + o) / (1 / sp0 + o / tpp), rounded to two decimals in the report
    EXPECT_NEAR(sp, 2.0 / (1.0 / sp0 + 1.0 / tpp0), 0.02) << md;
    expect_input_error(cmd0 + " --pass-overhead -1", "-1");
}

// editspec cost: a fresh measurement at a chosen context, not cached with --no-save
TEST(cli_cost, fresh_measurement_at_a_prefix) {
    temp_dir cache;
    std::string out;
    const std::string cmd = "EDITSPEC_CACHE=" + cache.path.string() + " " + std::string(EDITSPEC_BIN) + " cost -m " +
                            EDITSPEC_TEST_MODEL_Q8 + " -t 1 --fresh --no-save --max 4 --reps 1";
    ASSERT_EQ(editspec::test::run_command(cmd + " --prefix 48 2>/dev/null", &out), 0) << out;
    // a row per size, 1, 2 and 4 tokens, with costs that never fall
    double last = 0.0;
    int rows = 0;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        int n = 0;
        double ms = 0, tps = 0, rel = 0;
        if (sscanf(line.c_str(), "%d %lf %lf %lf", &n, &ms, &tps, &rel) != 4) continue;
        EXPECT_EQ(n, 1 << rows) << out;
        EXPECT_GE(ms, last) << out;
        last = ms;
        rows++;
    }
    EXPECT_EQ(rows, 3) << out;
    EXPECT_TRUE(fs::is_empty(cache.path)) << "--no-save wrote the cache";
    expect_input_error(cmd + " --prefix 0", "--prefix 0");
}
