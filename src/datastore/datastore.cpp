// Datastores: build (tokenize, suffix-sort, write), open (map, check), find (binary search).
//
// ref: Zhao et al., "FastCoder: Accelerating Repository-level Code Generation via Efficient Retrieval
// and Verification" §III-A and "CodeSwift: Accelerating LLM Inference for Efficient Code Generation": the datastore of
//      retrieval drafts is a suffix array over the corpus's tokens (as REST, He et al. 2024)
#include "editspec/datastore.h"

#include <divsufsort.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace editspec {

namespace {

constexpr char MAGIC[8] = {'E', 'D', 'S', 'T', 'O', 'R', 'E', '\0'};
constexpr size_t HEADER_SIZE = 64;

struct header {
    char     magic[8];
    uint32_t version;
    uint32_t n_vocab;
    uint64_t fingerprint;
    uint64_t n_tokens;
    uint64_t files;
    uint64_t bytes;
    uint64_t reserved[2];
};
static_assert(sizeof(header) == HEADER_SIZE, "the header is 64 bytes");

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool read_text(const std::string & path, size_t max_bytes, std::string & out) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec || size > max_bytes) return false;
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    std::ostringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    return out.find('\0') == std::string::npos; // binary files are not source
}

// the token suffixes in order: divsufsort over the stream written as w big-endian bytes per token,
// w the fewest bytes that hold every token id and the separator (2 for vocabularies up to 65,535:
// half the memory and sort time of 4, and twice the tokens within divsufsort's 32-bit limit); the
// separator is written as n_vocab, above every token, as DATASTORE_SEP sorts in the stream; the
// suffixes at multiples of w are the token suffixes. `tokens` is freed once encoded, so the peak is
// the encoded stream and its byte suffix array (10 bytes a token for w = 2: 2.5x the token stream);
// the token suffixes are the first n entries of `sa`.
bool suffix_sort(std::vector<int32_t> & tokens, int32_t n_vocab, std::vector<saidx_t> & sa, std::string * error) {
    const size_t n = tokens.size();
    const uint32_t sep = (uint32_t) n_vocab;
    const size_t w = sep < (1u << 8) ? 1 : sep < (1u << 16) ? 2 : sep < (1u << 24) ? 3 : 4;
    if (n >= (size_t) INT32_MAX / w) {
        if (error) *error = "the corpus is " + std::to_string(n) + " tokens; a datastore of this tokenizer holds at most " +
                            std::to_string(INT32_MAX / w - 1);
        return false;
    }
    std::vector<uint8_t> text(w * n);
    for (size_t i = 0; i < n; i++) {
        const uint32_t t = tokens[i] == DATASTORE_SEP ? sep : (uint32_t) tokens[i];
        for (size_t b = 0; b < w; b++) text[w * i + b] = (uint8_t) (t >> (8 * (w - 1 - b)));
    }
    std::vector<int32_t>().swap(tokens); // frees it (`tokens = {}` would keep the capacity)
    sa.assign(w * n, 0);
    if (n > 0 && divsufsort(text.data(), sa.data(), (saidx_t) (w * n)) != 0) {
        if (error) *error = "libdivsufsort failed (out of memory?)";
        return false;
    }
    size_t k = 0;
    for (size_t r = 0; r < sa.size(); r++) {
        if ((size_t) sa[r] % w == 0) sa[k++] = (saidx_t) ((size_t) sa[r] / w);
    }
    sa.resize(n);
    return true;
}

template <typename T>
bool write_all(std::FILE * f, const T * data, size_t count) {
    return count == 0 || std::fwrite(data, sizeof(T), count, f) == count;
}

} // namespace

uint64_t datastore_vocab_fingerprint(const tokenizer & tok) {
    uint64_t h = 0xcbf29ce484222325ull; // FNV-1a over n_vocab and every token's text
    auto mix = [&](const void * p, size_t len) {
        const uint8_t * b = (const uint8_t *) p;
        for (size_t i = 0; i < len; i++) {
            h ^= b[i];
            h *= 0x100000001b3ull;
        }
    };
    const int32_t n_vocab = tok.vocab_size();
    mix(&n_vocab, sizeof(n_vocab));
    for (int32_t t = 0; t < n_vocab; t++) {
        const std::string_view text = tok.token_text(t); // up to its NUL, which is mixed in too
        mix(text.data(), text.size());
        mix("", 1);
    }
    return h;
}

std::vector<std::string> datastore_list_files(const std::string & dir, const std::vector<std::string> & extensions) {
    std::vector<std::string> out;
    std::error_code ec;
    namespace fs = std::filesystem;
    fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        const fs::path & p = it->path();
        const std::string name = p.filename().string();
        if (it->is_directory(ec) && !name.empty() && name[0] == '.') {
            it.disable_recursion_pending();
            continue;
        }
        if (!it->is_regular_file(ec)) continue;
        for (const std::string & x : extensions) {
            if (name.size() >= x.size() && name.compare(name.size() - x.size(), x.size(), x) == 0) {
                out.push_back(p.string());
                break;
            }
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

bool datastore_build(const tokenizer & tok, const datastore_build_params & p, const std::string & path,
                     datastore_build_stats * stats, std::string * error) {
    datastore_build_stats st;
    std::vector<int32_t> tokens;
    // room for a token per byte (no token is shorter) and a separator per file: the vector never
    // moves while it grows, and the pages past the last token are never touched, so never resident
    uint64_t room = p.files.size();
    for (const std::string & f : p.files) {
        std::error_code ec;
        const uintmax_t sz = std::filesystem::file_size(f, ec);
        if (!ec && sz <= p.max_bytes_per_file) room += sz;
    }
    tokens.reserve((size_t) room);
    const auto t0 = std::chrono::steady_clock::now();
    std::string text;
    for (size_t i = 0; i < p.files.size(); i++) {
        if (!read_text(p.files[i], p.max_bytes_per_file, text)) {
            st.files_skipped++;
            continue;
        }
        const std::vector<int32_t> t = tok.tokenize_plain(text);
        tokens.insert(tokens.end(), t.begin(), t.end());
        tokens.push_back(DATASTORE_SEP);
        st.files++;
        st.bytes += text.size();
        if (p.progress && (i % 64 == 63 || i + 1 == p.files.size())) p.progress(i + 1, p.files.size(), st.bytes);
    }
    st.tokens = tokens.size();
    st.tokenize_s = seconds_since(t0);

    // the tokens go to the file first, so the sort does not hold them beside its own arrays
    header h{};
    std::memcpy(h.magic, MAGIC, sizeof(MAGIC));
    h.version = DATASTORE_VERSION;
    h.n_vocab = (uint32_t) tok.vocab_size();
    h.fingerprint = datastore_vocab_fingerprint(tok);
    h.n_tokens = tokens.size();
    h.files = st.files;
    h.bytes = st.bytes;
    const std::string tmp = path + ".tmp";
    std::FILE * f = std::fopen(tmp.c_str(), "wb");
    if (!f) {
        if (error) *error = "cannot write '" + tmp + "': " + std::strerror(errno);
        return false;
    }
    auto fail = [&](const std::string & why) {
        std::fclose(f);
        std::remove(tmp.c_str());
        if (error) *error = why;
        return false;
    };
    if (!write_all(f, &h, 1) || !write_all(f, tokens.data(), tokens.size())) {
        return fail("cannot write '" + tmp + "': " + std::strerror(errno));
    }
    const auto t1 = std::chrono::steady_clock::now();
    std::vector<saidx_t> sa;
    std::string sort_error;
    if (!suffix_sort(tokens, tok.vocab_size(), sa, &sort_error)) return fail(sort_error);
    st.sort_s = seconds_since(t1);
    static_assert(sizeof(saidx_t) == sizeof(int32_t), "the file holds int32 suffixes");
    const bool ok = write_all(f, sa.data(), sa.size());
    const int write_errno = errno;
    if (std::fclose(f) != 0 || !ok) {
        const int e = ok ? errno : write_errno;
        std::remove(tmp.c_str());
        if (error) *error = "cannot write '" + tmp + "': " + std::strerror(e);
        return false;
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        if (error) *error = "cannot rename '" + tmp + "' to '" + path + "'";
        return false;
    }
    st.file_bytes = HEADER_SIZE + 8 * (uint64_t) st.tokens;
    if (stats) *stats = st;
    return true;
}

// ----------------------------------------------------------------------------

datastore::~datastore() { close(); }

datastore::datastore(datastore && o) noexcept { *this = std::move(o); }

datastore & datastore::operator=(datastore && o) noexcept {
    if (this != &o) {
        close();
        path_ = std::move(o.path_);
        map_ = o.map_;
        map_size_ = o.map_size_;
        tokens_ = o.tokens_;
        sa_ = o.sa_;
        n_ = o.n_;
        files_ = o.files_;
        bytes_ = o.bytes_;
        o.map_ = nullptr;
        o.map_size_ = 0;
        o.tokens_ = nullptr;
        o.sa_ = nullptr;
        o.n_ = 0;
    }
    return *this;
}

void datastore::close() {
    if (map_) munmap(map_, map_size_);
    map_ = nullptr;
    map_size_ = 0;
    tokens_ = nullptr;
    sa_ = nullptr;
    n_ = 0;
}

bool datastore_open(const std::string & path, const tokenizer * tok, datastore & out, std::string * error) {
    auto fail = [&](const std::string & msg) {
        if (error) *error = "datastore '" + path + "': " + msg;
        return false;
    };
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return fail(std::string("cannot open: ") + std::strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        ::close(fd);
        return fail(std::string("cannot stat: ") + std::strerror(errno));
    }
    const size_t size = (size_t) sb.st_size;
    if (size < HEADER_SIZE) {
        ::close(fd);
        return fail("not a datastore (" + std::to_string(size) + " bytes, shorter than its header)");
    }
    void * map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) return fail(std::string("cannot map: ") + std::strerror(errno));
    datastore ds;
    ds.path_ = path;
    ds.map_ = map;
    ds.map_size_ = size;
    header h;
    std::memcpy(&h, map, sizeof(h));
    if (std::memcmp(h.magic, MAGIC, sizeof(MAGIC)) != 0) return fail("not a datastore (no EDSTORE magic)");
    if (h.version != DATASTORE_VERSION) {
        return fail("format version " + std::to_string(h.version) + "; this editspec reads version " +
                    std::to_string(DATASTORE_VERSION) + " (build it again with `editspec index`)");
    }
    const uint64_t want = HEADER_SIZE + 8 * h.n_tokens;
    if (h.n_tokens >= (uint64_t) INT32_MAX || size != want) {
        return fail("truncated or corrupt: " + std::to_string(size) + " bytes, its header says " + std::to_string(want));
    }
    if (tok) {
        const uint64_t fp = datastore_vocab_fingerprint(*tok);
        if (fp != h.fingerprint || (uint32_t) tok->vocab_size() != h.n_vocab) {
            char buf[256];
            snprintf(buf, sizeof(buf), "built with another tokenizer (%u tokens, fingerprint %016llx) than model '%s' (%d tokens, %016llx)",
                     h.n_vocab, (unsigned long long) h.fingerprint, tok->tokenizer_source().c_str(), tok->vocab_size(),
                     (unsigned long long) fp);
            return fail(buf);
        }
    }
    ds.n_ = (int64_t) h.n_tokens;
    ds.files_ = h.files;
    ds.bytes_ = h.bytes;
    ds.tokens_ = (const int32_t *) ((const char *) map + HEADER_SIZE);
    ds.sa_ = (const int32_t *) ((const char *) map + HEADER_SIZE + 4 * h.n_tokens);
    for (int64_t i = 0; i < ds.n_; i += std::max<int64_t>(1, ds.n_ / 64)) {
        if (ds.sa_[i] < 0 || ds.sa_[i] >= ds.n_) return fail("corrupt suffix array (entry " + std::to_string(i) + ")");
    }
    out = std::move(ds);
    return true;
}

datastore_range datastore::find(std::span<const int32_t> pattern) const {
    // -1: the suffix at sa[i] sorts before the pattern, 0: starts with it, 1: after it
    auto cmp = [&](int64_t i) {
        const int64_t s = sa_[i];
        const int64_t len = std::min<int64_t>((int64_t) pattern.size(), n_ - s);
        for (int64_t k = 0; k < len; k++) {
            const uint32_t a = (uint32_t) tokens_[s + k], b = (uint32_t) pattern[k];
            if (a != b) return a < b ? -1 : 1;
        }
        return len < (int64_t) pattern.size() ? -1 : 0;
    };
    int64_t lo = 0, hi = n_;
    while (lo < hi) { // first suffix not before the pattern
        const int64_t mid = lo + (hi - lo) / 2;
        if (cmp(mid) < 0) lo = mid + 1; else hi = mid;
    }
    int64_t lo2 = lo, hi2 = n_;
    while (lo2 < hi2) { // first suffix after it
        const int64_t mid = lo2 + (hi2 - lo2) / 2;
        if (cmp(mid) <= 0) lo2 = mid + 1; else hi2 = mid;
    }
    return {lo, lo2};
}

} // namespace editspec
