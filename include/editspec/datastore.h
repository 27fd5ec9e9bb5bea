// Retrieval datastores (FastCoder / CodeSwift, seeds 002 and 004, §III-A): the token stream of a
// corpus and its suffix array, built once (`editspec index`), memory-mapped at load.
//
//     editspec::datastore_build_params bp;
//     bp.files = {"a.py", "b.py"};
//     editspec::datastore_build_stats st;
//     if (!editspec::datastore_build(model, bp, "repo.eds", &st, &err)) ...;   // a model is a tokenizer
//     editspec::datastore ds;
//     if (!editspec::datastore_open("repo.eds", model, ds, &err)) ...;   // refuses another tokenizer
//     editspec::datastore_range r = ds.find(tail_tokens);                // suffixes starting with them
//
// File (little-endian):
//
//   offset  size    field
//   0       8       magic "EDSTORE\0"
//   8       4       format version (1)
//   12      4       n_vocab of the tokenizer
//   16      8       tokenizer fingerprint (datastore_vocab_fingerprint)
//   24      8       n tokens in the stream
//   32      8       files indexed
//   40      8       source bytes indexed
//   48      16      reserved (0)
//   64      4n      tokens (int32); files are separated by DATASTORE_SEP (outside every vocabulary),
//                   so no match crosses a file boundary
//   64+4n   4n      suffix array (int32 positions), suffixes in lexicographic order of their tokens
//
// The suffix array is built by libdivsufsort over the stream written as w big-endian bytes per token
// (w = 2 for vocabularies up to 65,535 tokens, 3 or 4 above): byte order then equals token order,
// and the suffixes at multiples of w are the token suffixes.
#pragma once

#include "editspec/tokenizer.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace editspec {

// tokens are int32 ids (llama_token); the datastore sees the vocabulary only through a tokenizer
// (tokenizer.h: the engine's model is one), never through libllama
constexpr int32_t DATASTORE_SEP = INT32_MAX; // between files: matches nothing of a context
constexpr uint32_t DATASTORE_VERSION = 1;

// a hash of the vocabulary: its size and every token's text; two tokenizers with the same
// fingerprint tokenize alike
uint64_t datastore_vocab_fingerprint(const tokenizer & tok);

struct datastore_build_params {
    std::vector<std::string> files;    // source files, indexed in this order
    size_t max_bytes_per_file = 1u << 20; // larger files (generated, data) are skipped
    // progress: (files done, files, bytes done); called every few files
    std::function<void(size_t, size_t, uint64_t)> progress;
};

struct datastore_build_stats {
    uint64_t files = 0;
    uint64_t files_skipped = 0; // unreadable, too large, or not UTF-8 text
    uint64_t bytes = 0;
    uint64_t tokens = 0;
    double   tokenize_s = 0.0;
    double   sort_s = 0.0;
    uint64_t file_bytes = 0;    // the datastore's size
};

// every file under dir whose name ends with one of the extensions (e.g. ".py"), sorted; hidden
// folders (.git, ...) are skipped
std::vector<std::string> datastore_list_files(const std::string & dir, const std::vector<std::string> & extensions);

// tokenizes the files with the tokenizer (a model), sorts the suffixes and writes the datastore to
// `path` (through a temporary file: a failed build leaves no partial file). False with *error.
bool datastore_build(const tokenizer & tok, const datastore_build_params & p, const std::string & path,
                     datastore_build_stats * stats, std::string * error);

// suffixes [lo, hi) of the suffix array: the occurrences of a pattern
struct datastore_range {
    int64_t lo = 0;
    int64_t hi = 0;
    int64_t count() const { return hi - lo; }
};

// A memory-mapped datastore. Movable, not copyable; read-only, so threads may share one.
class datastore {
public:
    datastore() = default;
    ~datastore();
    datastore(datastore && o) noexcept;
    datastore & operator=(datastore && o) noexcept;
    datastore(const datastore &) = delete;
    datastore & operator=(const datastore &) = delete;

    const std::string & path() const { return path_; }
    int64_t size() const { return n_; }
    std::span<const int32_t> tokens() const { return {tokens_, (size_t) n_}; }
    std::span<const int32_t> suffixes() const { return {sa_, (size_t) n_}; }
    uint64_t files() const { return files_; }
    uint64_t source_bytes() const { return bytes_; }

    // the suffixes that start with `pattern` (binary search: O(|pattern| log n))
    datastore_range find(std::span<const int32_t> pattern) const;

private:
    friend bool datastore_open(const std::string & path, const tokenizer * tok, datastore & out, std::string * error);
    void close();

    std::string path_;
    void * map_ = nullptr;
    size_t map_size_ = 0;
    const int32_t * tokens_ = nullptr;
    const int32_t * sa_ = nullptr;
    int64_t n_ = 0;
    uint64_t files_ = 0;
    uint64_t bytes_ = 0;
};

// maps a datastore and checks it: magic, version, size against its header (a truncated file), and,
// with a tokenizer (a model), that it is the one the datastore was built with (an error naming both
// when it differs). False with *error naming the
// file and what is wrong.
bool datastore_open(const std::string & path, const tokenizer * tok, datastore & out, std::string * error);

} // namespace editspec
