// llama.cpp's common_speculative drafters as editspec drafters (include/editspec/llama-common.h).
#include "editspec/llama-common.h"
#include "editspec/drafters.h"

#if EDITSPEC_HAVE_LLAMA_COMMON
#include "common.h"
#include "ngram-cache.h"
#include "speculative.h"
#endif

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <unistd.h>

namespace editspec {

#if EDITSPEC_HAVE_LLAMA_COMMON

namespace {

struct named_type {
    const char * name;
    common_speculative_type type;
};

const named_type TYPES[] = {
    {"llama-ngram-simple", COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE},
    {"llama-ngram-map-k", COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K},
    {"llama-ngram-mod", COMMON_SPECULATIVE_TYPE_NGRAM_MOD},
    {"llama-ngram-cache", COMMON_SPECULATIVE_TYPE_NGRAM_CACHE},
};

// one common_speculative with one sequence (id 0) per request, driven as llama-server drives it:
// draft params {n_max, pos0, id_last, prompt = every token before id_last}, then draft, then
// accept with the number of draft tokens the target kept
class llama_common_drafter : public drafter_i {
public:
    llama_common_drafter(const char * name, common_speculative_type type, const std::string & static_cache = "")
        : name_(name) {
        params_.types = {type};
        params_.ngram_cache.lookup_cache_static = static_cache;
        spec_ = common_speculative_init(params_, 1);
    }
    ~llama_common_drafter() override {
        if (spec_) common_speculative_free(spec_);
    }
    bool ok() const { return spec_ != nullptr; }

    const char * name() const override { return name_; }
    uint8_t source() const override { return DRAFT_SOURCE_LOOKUP; }

    // llama-server begins with the tokens in the KV cache and drafts after {those, id_last}; the
    // decoder's first proposal comes before the prompt's last token is decoded, so that token is
    // id_last and the rest is what begin() sees (the ngram maps require prompts that only grow)
    void begin(std::span<const llama_token> prompt) override {
        const size_t n = prompt.empty() ? 0 : prompt.size() - 1;
        common_speculative_begin(spec_, 0, llama_tokens(prompt.begin(), prompt.begin() + n));
    }

    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override {
        draft_.clear();
        if (history.empty() || budget < 1) return;
        prompt_.assign(history.begin(), history.end() - 1);
        common_speculative_get_draft_params(spec_, 0) = {
            /* .drafting = */ true,
            /* .n_max    = */ budget,
            /* .pos0     = */ (llama_pos) history.size() - 1,
            /* .id_last  = */ history.back(),
            /* .prompt   = */ &prompt_,
            /* .result   = */ &draft_,
        };
        common_speculative_draft(spec_);
        if (draft_.empty()) return;
        const int32_t max_nodes = (int32_t) std::min<int64_t>((int64_t) tree.size() + budget, INT32_MAX);
        tree.add_path(-1, draft_, DRAFT_SOURCE_LOOKUP, max_nodes);
    }

    void accept(std::span<const llama_token> accepted) override {
        if (draft_.empty()) return; // llama-server reports only passes that carried a draft
        size_t n = 0;
        while (n + 1 < accepted.size() && n < draft_.size() && accepted[n] == draft_[n]) n++;
        common_speculative_accept(spec_, 0, (uint16_t) std::min<size_t>(n, UINT16_MAX));
        draft_.clear();
    }

private:
    const char * name_;
    common_params_speculative params_;
    common_speculative * spec_ = nullptr;
    llama_tokens prompt_;
    llama_tokens draft_;
};

// llama-lookup-create's static cache (token pairs, LLAMA_NGRAM_STATIC) of the datastores' token
// streams, file by file, saved where llama-server's --lookup-cache-static would read it; one file per
// set of datastores for the process's life
std::string static_cache_file(std::span<const datastore * const> corpus, std::string * error) {
    struct files {
        std::mutex mu;
        std::map<std::string, std::string> by_key;
        ~files() {
            for (auto & [k, path] : by_key) std::remove(path.c_str());
        }
    };
    static files reg;
    std::string key;
    for (const datastore * ds : corpus) key += ds->path() + "#" + std::to_string(ds->size()) + "\n";
    std::lock_guard<std::mutex> lock(reg.mu);
    if (auto it = reg.by_key.find(key); it != reg.by_key.end()) return it->second;
    common_ngram_cache cache;
    std::vector<llama_token> part;
    for (const datastore * ds : corpus) {
        const auto t = ds->tokens();
        for (size_t i = 0; i <= t.size(); i++) {
            if (i < t.size() && t[i] != DATASTORE_SEP) {
                part.push_back(t[i]);
                continue;
            }
            if (part.size() > LLAMA_NGRAM_STATIC) {
                common_ngram_cache_update(cache, LLAMA_NGRAM_STATIC, LLAMA_NGRAM_STATIC, part, (int) part.size(), false);
            }
            part.clear();
        }
    }
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("editspec-ngram-static-" + std::to_string(getpid()) + "-" + std::to_string(reg.by_key.size()) + ".bin"))
                                 .string();
    try {
        common_ngram_cache_save(cache, path);
    } catch (const std::exception & e) {
        if (error) *error = "llama-ngram-cache: cannot write its static cache " + path + ": " + e.what();
        return "";
    }
    reg.by_key[key] = path;
    return path;
}

} // namespace

bool llama_common_available() { return true; }

std::unique_ptr<drafter_i> llama_common_drafter_create(const std::string & name, std::string * error,
                                                       std::span<const datastore * const> corpus) {
    for (const named_type & t : TYPES) {
        if (name == t.name) {
            std::string static_cache;
            if (t.type == COMMON_SPECULATIVE_TYPE_NGRAM_CACHE && !corpus.empty()) {
                static_cache = static_cache_file(corpus, error);
                if (static_cache.empty()) return nullptr;
            }
            auto d = std::make_unique<llama_common_drafter>(t.name, t.type, static_cache);
            if (!d->ok()) {
                if (error) *error = "llama.cpp's common_speculative_init failed for '" + name + "'";
                return nullptr;
            }
            return d;
        }
    }
    if (error) *error = "no llama.cpp drafter named '" + name + "'";
    return nullptr;
}

#else // built against a llama.cpp without its common library

bool llama_common_available() { return false; }

std::unique_ptr<drafter_i> llama_common_drafter_create(const std::string & name, std::string * error,
                                                       std::span<const datastore * const>) {
    if (error) {
        *error = "'" + name + "' needs llama.cpp's common library, which this build's llama.cpp does not have "
                              "(scripts/setup-llama.sh installs it)";
    }
    return nullptr;
}

#endif

// the table's rows (drafters.h): llama.cpp's own drafters, in-process; llama-ngram-cache's static
// cache is built from the same datastores as the retrieval drafters'
namespace {

std::unique_ptr<drafter_i> make_llama_common(const drafter_desc & self, const drafter_inputs & in, std::string * error) {
    std::vector<const datastore *> corpus(in.repo_datastores.begin(), in.repo_datastores.end());
    corpus.insert(corpus.end(), in.datastores.begin(), in.datastores.end());
    return llama_common_drafter_create(self.name, error, corpus);
}

} // namespace

std::span<const drafter_desc> llama_common_drafters() {
    static const drafter_desc rows[] = {
        {"llama-ngram-simple", "llama.cpp's ngram-simple drafter (common/speculative), in-process", 0,
         VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_llama_common},
        {"llama-ngram-map-k", "llama.cpp's ngram-map-k drafter, in-process", 0, VERIFY_POLICY_GREEDY,
         DRAFTER_LOSSY_NOT_REUSE, make_llama_common},
        {"llama-ngram-mod", "llama.cpp's ngram-mod drafter, in-process", 0, VERIFY_POLICY_GREEDY,
         DRAFTER_LOSSY_NOT_REUSE, make_llama_common},
        {"llama-ngram-cache", "llama.cpp's ngram-cache drafter, in-process (a static cache from the datastores)", 0,
         VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_llama_common},
    };
    return rows;
}

} // namespace editspec
