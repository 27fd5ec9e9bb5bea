// editspec index: build a retrieval datastore (datastore.h) from a repository or a list of files.
#include "cli/commands.h"
#include "editspec/datastore.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <unistd.h>

namespace editspec::cli {

namespace {

struct index_opts {
    std::string model;
    std::string repo;
    std::vector<std::string> files;
    std::string extensions = ".py";
    std::string out;
    double max_file_mb = 1.0;
    bool quiet = false;
};

int run_index(const index_opts & o) {
    const char * cmd = "index";
    datastore_build_params bp;
    if (!o.repo.empty()) {
        std::error_code ec;
        if (!std::filesystem::is_directory(o.repo, ec)) return fail_input(cmd, "--repo '" + o.repo + "' is not a folder");
        std::vector<std::string> exts;
        std::stringstream ss(o.extensions);
        for (std::string x; std::getline(ss, x, ',');) {
            if (!x.empty()) exts.push_back(x[0] == '.' ? x : "." + x);
        }
        bp.files = datastore_list_files(o.repo, exts);
        if (bp.files.empty()) return fail_input(cmd, "no files ending in " + o.extensions + " under '" + o.repo + "'");
    } else {
        bp.files = o.files;
        for (const std::string & f : bp.files) {
            std::error_code ec;
            if (!std::filesystem::is_regular_file(f, ec)) return fail_input(cmd, "cannot read '" + f + "'");
        }
    }
    bp.max_bytes_per_file = (size_t) (o.max_file_mb * 1048576.0);
    const std::string model_path = o.model.empty() ? default_model_path() : o.model;
    model_load_result ml = model_load(model_path, /*vocab_only=*/true);
    if (!ml.model) return fail_input(cmd, ml.error);
    const bool tty = isatty(STDERR_FILENO) && !o.quiet;
    if (!o.quiet) {
        bp.progress = [tty](size_t done, size_t n, uint64_t bytes) {
            fprintf(stderr, "%sindex: tokenizing %zu/%zu files, %.1f MB%s", tty ? "\r" : "", done, n, bytes / 1e6,
                    tty ? "" : "\n");
        };
    }
    datastore_build_stats st;
    std::string error;
    if (!o.quiet) fprintf(stderr, "index: %zu files with the tokenizer of %s\n", bp.files.size(), model_path.c_str());
    if (!datastore_build(*ml.model, bp, o.out, &st, &error)) return fail_runtime(cmd, error);
    if (tty) fprintf(stderr, "\n");
    const double s = st.tokenize_s + st.sort_s;
    printf("wrote %s: %llu files (%llu skipped: too large or not text), %.1f MB of source, %llu tokens, %.1f MB; tokenized in %.1f s, "
           "sorted in %.1f s (%.1f MB of source per minute)\n",
           o.out.c_str(), (unsigned long long) st.files, (unsigned long long) st.files_skipped, st.bytes / 1e6,
           (unsigned long long) st.tokens, st.file_bytes / 1e6, st.tokenize_s, st.sort_s,
           s > 0 ? st.bytes / 1e6 / (s / 60.0) : 0.0);
    return 0;
}

} // namespace

command cmd_index_add(CLI::App & app) {
    auto o = std::make_shared<index_opts>();
    CLI::App * sub = app.add_subcommand("index", "build a retrieval datastore (token suffix array) from source files");
    sub->add_option("-m,--model", o->model, "the model whose tokenizer the datastore is built with (default: the shipped model)");
    auto * repo = sub->add_option("--repo", o->repo, "index every file under this folder (hidden folders skipped)");
    auto * files = sub->add_option("--files", o->files, "index these files");
    repo->excludes(files);
    sub->add_option("--ext", o->extensions, "with --repo: file name endings, comma-separated")->capture_default_str();
    sub->add_option("-o,--out", o->out, "the datastore file to write (FILE.eds)")->required();
    sub->add_option("--max-file-mb", o->max_file_mb, "skip files larger than this (generated code, data), in MiB")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sub->add_flag("-q,--quiet", o->quiet, "no progress on stderr");
    sub->callback([repo, files] {
        if (repo->count() == 0 && files->count() == 0) throw CLI::RequiredError("one of --repo or --files");
    });
    return {sub, [o] { return run_index(*o); }};
}

} // namespace editspec::cli
