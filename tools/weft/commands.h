// The subcommands of `weft`. Each Add* function registers one subcommand
// on |app|; when it is chosen, |run| is set to what executes it, returning
// the exit code.
#ifndef WEFT_TOOLS_WEFT_COMMANDS_H_
#define WEFT_TOOLS_WEFT_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <functional>

#include "core/onnx/onnx.h"
#include "core/passes/pass.h"
#include "tools/weft/context.h"

namespace weft::cli {

using Runner = std::function<int(Context&)>;

void AddVersionCommand(CLI::App& app, Runner& run);
void AddPluginsCommand(CLI::App& app, Runner& run);
void AddDevicesCommand(CLI::App& app, Runner& run);
void AddConfigCommand(CLI::App& app, Runner& run);
void AddRunCommand(CLI::App& app, Runner& run);
void AddTrainCommand(CLI::App& app, Runner& run);
void AddPlaceCommand(CLI::App& app, Runner& run);
void AddServeCommand(CLI::App& app, Runner& run);
// model-server --models DIR (docs/serving.md)
void AddModelServerCommand(CLI::App& app, Runner& run);
// predict URL --feed NAME=FILE.npy: one KServe v2 request to a model server
void AddPredictCommand(CLI::App& app, Runner& run);
// The bearer token in the file at |path|, without its trailing newline;
// errors name |what| (the key or flag that gave the path).
Expected<std::string> ReadBearerToken(const std::string& path, std::string_view what);
// cluster status
void AddClusterCommands(CLI::App& app, Runner& run);
// inspect, dot, convert, ops
void AddGraphCommands(CLI::App& app, Runner& run);
// ckpt ls, ckpt inspect
void AddCheckpointCommands(CLI::App& app, Runner& run);
// conformance --plugin PATH
void AddConformanceCommand(CLI::App& app, Runner& run);

// import MODEL.onnx -o MODEL.wg; export MODEL.wg -o MODEL.onnx
void AddOnnxCommands(CLI::App& app, Runner& run);
// optimize MODEL -o OUT [--explain]
void AddOptimizeCommand(CLI::App& app, Runner& run);
// quantize MODEL --calibrate NAME=FILE.npy -o OUT (docs/quantization.md)
void AddQuantizeCommand(CLI::App& app, Runner& run);
// |model| read (an .onnx imported frozen) and optimized at |options| for
// this machine's devices, its inputs and outputs kept (weft optimize).
Expected<passes::OptimizeResult> OptimizeModel(Context& ctx, const std::string& model,
                                               const passes::OptimizeOptions& options);
// bench MODEL [--shape NAME=DIMS] [--profile] [--json]
void AddBenchCommand(CLI::App& app, Runner& run);

// A `--feed NAME=FILE.npy` flag (or |flag|'s): the name and the array, or
// an error naming the flag.
Expected<std::pair<std::string, Tensor>> ReadFeedFlag(const std::string& feed, std::string_view flag = "--feed");

// Adds `--optimize LEVEL` to |cmd|: the graph optimizer's level, over
// [graph_optimizer] level (docs/optimizer.md); |level| stays -1 when it is
// not given. ApplyOptimizeOption writes a given one into the config.
void AddOptimizeOption(CLI::App* cmd, int* level);
void ApplyOptimizeOption(Context& ctx, int level);

// How the commands read a graph file: .wg/.wgt as they are, .onnx
// imported (core/onnx/onnx.h) with its initializers as constants (run,
// place) or as variables with an "init" (train, inspect, dot).
onnx_io::ImportOptions FrozenImport();
Expected<GraphDef> ReadTrainableModel(const std::string& path);

// Serves this process's task of the config's cluster until SIGINT or
// SIGTERM, or, with |stop_when_told|, until the chief of a training run
// asks it to stop (a ps task of `weft train`). |command| prefixes what it
// prints ("weft serve").
int ServeTask(Context& ctx, const char* command, bool stop_when_told);

}  // namespace weft::cli

#endif  // WEFT_TOOLS_WEFT_COMMANDS_H_
