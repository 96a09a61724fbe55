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

}  // namespace

void AddOnnxCommands(CLI::App& app, Runner& run) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand("import", "Import an ONNX model (opsets 7 to 17) as a Weft graph file");
  cmd->add_option("MODEL", args->model, "An .onnx file")->required();
  cmd->add_option("-o,--out", args->out, "The graph file to write: .wg (binary) or .wgt (text)")->required();
  cmd->add_flag("--freeze", args->freeze,
                "Make the initializers constants (inference only); by default floating-point initializers become "
                "variables, so the model can be trained");
  cmd->add_option("--init", args->init, "The name of the NoOp that initialises the variables")->capture_default_str();
  cmd->footer(
      "Examples:\n"
      "  weft import resnet18.onnx -o resnet18.wg\n"
      "  weft run resnet18.onnx --feed input=x.npy --fetch output     (imports on the fly)\n"
      "docs/onnx.md lists the ONNX ops Weft imports and what each error means.");
  cmd->callback([args, &run] { run = [args](Context&) { return Import(*args); }; });
}

}  // namespace weft::cli
