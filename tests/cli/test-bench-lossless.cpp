// The lossless promise end to end, as a user meets it: `editspec bench` on CanItEdit items, every
// greedy method's output identical to `ar`'s token for token, with the models we ship (target and
// draft) and with a K-quant (Q4_K_M) model, the type most users download. A greedy method that
// differs from ar on any item fails here with the item named in results.json. The default tier runs
// every method on a sample of items; the long tier (scripts/test.sh --long) on every item.
#include "common/test-util.h"
#include "editspec/drafters.h"
#include "editspec/verify.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace {

const std::string k_canitedit = std::string(EDITSPEC_DATASETS) + "/canitedit/normalized.jsonl";

// runs bench on every item with `methods`, returns results.json
nlohmann::json bench_all_items(const std::string & model_args, const std::string & methods, int n_predict,
                               const std::string & data = k_canitedit + " --task edit") {
    editspec::test::temp_dir d;
    const std::string cmd = std::string(EDITSPEC_BIN) + " bench " + model_args + " --dataset " + data +
                            " --threads 1 -n " + std::to_string(n_predict) + " --methods " + methods +
                            " --out " + d.path.string() + " 2>&1";
    std::string out;
    const int rc = editspec::test::run_command(cmd, &out);
    EXPECT_EQ(rc, 0) << cmd << "\n" << out;
    std::ifstream f(d.path / "results.json");
    if (!f) return nlohmann::json::object();
    return nlohmann::json::parse(f);
}

void expect_identical(const nlohmann::json & j, const std::vector<std::string> & methods, int items) {
    ASSERT_TRUE(j.contains("methods")) << j.dump();
    for (const std::string & m : methods) {
        const auto & s = j["methods"][m];
        EXPECT_EQ(s["items"], items) << m;
        EXPECT_TRUE(s["identical_to_ar"].get<bool>()) << m;
    }
    // name the items that differ, if any
    for (const auto & r : j["items"]) {
        if (!r["identical_to_ar"].get<bool>()) {
            ADD_FAILURE() << r["method"] << " differs from ar on " << r["item"];
        }
    }
}

const std::string k_shipped = std::string(" -m ") + EDITSPEC_MODELS + "/editspec-target.gguf --draft-model " +
                              EDITSPEC_MODELS + "/editspec-draft.gguf";

// every row of the drafter table an edit can feed (the bench loads no datastore here), lossy defaults
// asked for greedy, then auto and combinations: a new drafter enters this sweep by its row
std::vector<std::string> edit_sweep() {
    std::vector<std::string> v = {"auto", "reuse+lookup", "reuse+sd", "lookup-longest@16"};
    for (const editspec::drafter_desc & d : editspec::drafter_table()) {
        if (d.needs & editspec::DRAFTER_NEEDS_DATASTORE) continue;
        if (d.needs & editspec::DRAFTER_NEEDS_HEAD) continue; // the shipped models have none (tests/draft/test-heads.cpp)
        v.push_back(std::string(d.name) + (editspec::verify_policy_is_lossy(d.policy) ? ":greedy" : ""));
    }
    return v;
}

void edit_methods(int limit) {
    const std::vector<std::string> greedy = edit_sweep();
    std::string list = "ar";
    for (const std::string & m : greedy) list += "," + m;
    const std::string data = k_canitedit + " --task edit" + (limit > 0 ? " --limit " + std::to_string(limit) : "");
    expect_identical(bench_all_items(k_shipped, list, 48, data), greedy, limit > 0 ? limit : 105);
}

void q4_k_m_methods(int limit) {
    const std::vector<std::string> greedy = {"lookup", "lookup-longest", "reuse+lookup"};
    std::string list = "ar";
    for (const std::string & m : greedy) list += "," + m;
    const std::string data = k_canitedit + " --task edit" + (limit > 0 ? " --limit " + std::to_string(limit) : "");
    expect_identical(bench_all_items(" -m " + editspec::test::typed_model_path("q4_k_m"), list, 32, data), greedy,
                     limit > 0 ? limit : 105);
}

// chat: turns of MT-Redundant's conversations (two turns) and of HumanEval's refinement loop (three
// turns), each conversation going on from ar's answers, the copy methods identical to ar
void chat_methods(int mt_limit, int he_limit) {
    const std::vector<std::string> greedy = {"copy", "copy-recent", "copy-tree", "copy-ext", "copyspec", "copy+sd",
                                             "copy+lookup-longest"};
    std::string list = "ar";
    for (const std::string & m : greedy) list += "," + m;
    const std::string mt = std::string(EDITSPEC_DATASETS) + "/mt-redundant/question_redundant.jsonl --task chat" +
                           (mt_limit > 0 ? " --limit " + std::to_string(mt_limit) : "");
    expect_identical(bench_all_items(k_shipped, list, 64, mt), greedy, 2 * (mt_limit > 0 ? mt_limit : 80));
    const std::string he = std::string(EDITSPEC_DATASETS) + "/humaneval/normalized.jsonl --task chat --limit " +
                           std::to_string(he_limit);
    expect_identical(bench_all_items(k_shipped, list, 64, he), greedy, 3 * he_limit);
}

} // namespace

TEST(bench_lossless, shipped_models_canitedit_sample) { edit_methods(8); }
TEST(bench_lossless, q4_k_m_canitedit_sample) { q4_k_m_methods(10); }
TEST(bench_lossless, shipped_models_chat_sample) { chat_methods(6, 3); }

TEST(bench_lossless, long_shipped_models_every_canitedit_item) { edit_methods(0); }
TEST(bench_lossless, long_q4_k_m_every_canitedit_item) { q4_k_m_methods(0); }
TEST(bench_lossless, long_shipped_models_every_chat_turn) { chat_methods(0, 20); }
