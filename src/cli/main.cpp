// editspec: speculative decoding for code edits and completions.
#include "cli/commands.h"
#include "editspec/engine.h"
#include "editspec/rpc.h"

#include <cstdio>
#include <vector>

int main(int argc, char ** argv) {
    CLI::App app{"editspec: fast, lossless code editing and completion with speculative decoding on llama.cpp"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "editspec 0.1.0");

    std::vector<editspec::cli::command> commands = {
        editspec::cli::cmd_complete_add(app),
        editspec::cli::cmd_make_model_add(app),
        editspec::cli::cmd_bench_add(app),
        editspec::cli::cmd_cost_add(app),
        editspec::cli::cmd_check_exact_add(app),
        editspec::cli::cmd_edit_add(app),
        editspec::cli::cmd_apply_add(app),
        editspec::cli::cmd_serve_add(app),
        editspec::cli::cmd_chat_add(app),
        editspec::cli::cmd_index_add(app),
        editspec::cli::cmd_session_add(app),
    };
    // the device options on every command: models load through one engine setting
    int32_t gpu_layers = -1;
    std::string rpc;
    std::string kernels = "auto";
    for (const auto & c : commands) {
        c.sub->add_option("--kernels", kernels,
                          "a GPU's kernels: exact (batch-invariant: greedy speculative output equals plain decoding, "
                          "slower), stock (llama.cpp's own, fastest, not batch-exact), auto (exact where it is: "
                          "quantized weights with every layer on the GPU; else stock). $EDITSPEC_CUDA_EXACT=0/1 stands "
                          "for stock/exact without it. A CPU's kernels are always exact")
            ->capture_default_str();
        c.sub->add_option("--gpu-layers", gpu_layers,
                          "model layers offloaded to the GPU or the --rpc workers (-1 = all; ignored by a CPU-only "
                          "build without --rpc)")
            ->capture_default_str();
        c.sub->add_option("--rpc", rpc,
                          "HOST:PORT,... RPC workers (`editspec rpc-server`) that hold the model's layers, split by "
                          "their memory; loopback or a private network only (docs/scale-out.md)");
    }
    commands.push_back(editspec::cli::cmd_rpc_server_add(app));
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp & e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp & e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion & e) {
        return app.exit(e);
    } catch (const CLI::ParseError & e) {
        app.exit(e);
        return 2;
    }
    editspec::engine_set_gpu_layers(gpu_layers);
    editspec::engine_kernels k = editspec::ENGINE_KERNELS_AUTO;
    if (!editspec::engine_kernels_parse(kernels, k)) {
        fprintf(stderr, "editspec: error: --kernels '%s' must be one of auto, exact, stock\n", kernels.c_str());
        return 2;
    }
    editspec::engine_set_kernels(k);
    if (k == editspec::ENGINE_KERNELS_STOCK && !editspec::engine_has_gpu()) {
        fprintf(stderr, "editspec: warning: --kernels stock chooses a GPU's kernels; this machine has no GPU, and the "
                        "CPU's kernels are always the exact ones\n");
    }
    if (!rpc.empty()) {
        std::string error;
        if (!editspec::engine_add_rpc_servers(rpc, &error)) {
            fprintf(stderr, "editspec: error: %s\n", error.c_str());
            return 2;
        }
    }
    for (const auto & c : commands) {
        if (c.sub->parsed()) {
            return c.run();
        }
    }
    return 2;
}
