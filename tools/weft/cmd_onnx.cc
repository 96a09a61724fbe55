// weft import MODEL.onnx -o MODEL.wg: an ONNX model as a Weft graph file;
// and how the other commands read .onnx files (core/onnx/onnx.h,
// docs/onnx.md).
#include <iostream>
#include <map>
#include <memory>

#include "core/graph/serialize.h"
#include "core/onnx/onnx.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {

onnx_io::ImportOptions FrozenImport() {
  onnx_io::ImportOptions options;
  options.freeze = true;
  return options;
}

Expected<GraphDef> ReadTrainableModel(const std::string& path) { return onnx_io::ReadModelFile(path); }

namespace {

struct ImportArgs {
  std::string model;
  std::string out;
  bool freeze = false;
  bool nchw = false;
  std::string init = "init";
};

int Import(const ImportArgs& args) {
  if (!onnx_io::IsOnnxPath(args.model)) {
    return ReportError(InvalidArgumentError(Quote(args.model),
                                            " is not an .onnx file (`weft convert` converts "
                                            "between .wg and .wgt)"));
  }
  if (Status format = FormatForPath(args.out).status(); !format.ok()) return ReportError(format);
  onnx_io::ImportOptions options;
  options.freeze = args.freeze;
  options.channels_last = !args.nchw;
  options.init_name = args.init;
  auto model = onnx_io::ImportOnnxFile(args.model, options);
  if (!model.ok()) return ReportError(model.status());
  if (Status written = WriteGraphFile(args.out, model->def); !written.ok()) return ReportError(written);
  std::map<std::string, int> ops;
  for (const NodeDef& n : model->def.nodes) ++ops[n.op];
  std::cout << "imported " << args.model << " (opset " << model->opset
            << (model->producer.empty() ? std::string() : ", from " + model->producer) << ") as " << args.out << ": "
            << model->def.nodes.size() << " nodes\n";
  std::cout << "  inputs:  " << StrJoin(model->inputs, ", ") << "\n";
  std::cout << "  outputs: " << StrJoin(model->outputs, ", ") << "\n";
  if (args.freeze) {
    std::cout << "  initializers frozen as constants\n";
  } else if (!model->init.empty()) {
    std::cout << "  " << model->variables << " variables, initialised by running " << Quote(model->init) << "\n";
  }
  return kExitOk;
}

struct ExportArgs {
  std::string graph;
  std::string out;
  std::vector<std::string> outputs;
  std::string checkpoint;
};

int Export(const ExportArgs& args) {
  if (!onnx_io::IsOnnxPath(args.out)) {
    return ReportError(InvalidArgumentError("-o ", Quote(args.out), ": the file to write must end in .onnx"));
  }
  auto def = onnx_io::ReadModelFile(args.graph);
  if (!def.ok()) return ReportError(def.status());
  onnx_io::ExportOptions options;
  options.outputs = args.outputs;
  options.checkpoint = args.checkpoint;
  auto model = onnx_io::ExportOnnxFile(*def, args.out, options);
  if (!model.ok()) return ReportError(model.status().WithContext(StrCat("exporting ", args.graph)));
  std::cout << "exported " << args.graph << " as " << args.out << " (ONNX opset " << onnx_io::kExportOpset << ", "
            << model->bytes.size() << " bytes, " << model->initializers
            << " initializers), checked by ONNX's checker\n";
  std::cout << "  inputs:  " << StrJoin(model->inputs, ", ") << "\n";
  std::cout << "  outputs: " << StrJoin(model->outputs, ", ") << "\n";
  return kExitOk;
}

}  // namespace

void AddOnnxCommands(CLI::App& app, Runner& run) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand("import", "Import an ONNX model (opsets 7 to 17) as a Weft graph file");
  cmd->add_option("MODEL", args->model, "An .onnx file")->required();
  cmd->add_option("-o,--out", args->out, "The graph file to write: .wg (binary) or .wgt (text)")->required();
  cmd->add_flag("--freeze", args->freeze,
                "Make the initializers constants (inference only); by default floating-point initializers become "
                "variables, so the model can be trained");
  cmd->add_flag("--nchw", args->nchw,
                "Keep images channels-first as ONNX has them (by default convolutions, pooling and batch norm run "
                "channels-last, NHWC, where Weft's CPU kernels are fastest; see docs/onnx.md)");
  cmd->add_option("--init", args->init, "The name of the NoOp that initialises the variables")->capture_default_str();
  cmd->footer(
      "Examples:\n"
      "  weft import resnet18.onnx -o resnet18.wg\n"
      "  weft run resnet18.onnx --feed input=x.npy --fetch output     (imports on the fly)\n"
      "docs/onnx.md lists the ONNX ops Weft imports and what each error means.");
  cmd->callback([args, &run] { run = [args](Context&) { return Import(*args); }; });

  auto eargs = std::make_shared<ExportArgs>();
  CLI::App* exp = app.add_subcommand("export", "Export a graph's inference part as an ONNX model (opset 17)");
  exp->add_option("GRAPH", eargs->graph, "A .wg or .wgt graph file (or an .onnx model, re-exported)")->required();
  exp->add_option("-o,--out", eargs->out, "The .onnx file to write")->required();
  exp->add_option("--output", eargs->outputs,
                  "A tensor to export as a model output (\"node\" or \"node:k\"; repeat for more); default: every "
                  "output nothing in the graph reads");
  exp->add_option("--checkpoint", eargs->checkpoint,
                  "Take the variables' values from the newest checkpoint of this directory (as `weft train` writes "
                  "them); default: the constants their initialiser assigns");
  exp->footer(
      "Example:\n"
      "  weft train configs/models/fashion_cnn.wgt --config configs/train_cnn.toml\n"
      "  weft export configs/models/fashion_cnn.wgt --checkpoint checkpoints/ --output probabilities -o cnn.onnx");
  exp->callback([eargs, &run] { run = [eargs](Context&) { return Export(*eargs); }; });
}

}  // namespace weft::cli
