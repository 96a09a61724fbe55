// `weft ckpt`: look at checkpoints. `ls DIR` lists the bundles a
// checkpoint directory keeps; `inspect PREFIX` shows one bundle's metadata
// and tensors, verifying every tensor's CRC32C.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "core/checkpoint/bundle.h"
#include "core/checkpoint/manager.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {
namespace {

namespace fs = std::filesystem;

std::string Hex(uint32_t v) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "0x%08x", v);
  return buffer;
}

// Prints |table| without the padding an empty last cell leaves.
void PrintTrimmed(const Table& table) {
  std::ostringstream text;
  table.Print(text);
  std::istringstream lines(text.str());
  for (std::string line; std::getline(lines, line);) {
    line.erase(line.find_last_not_of(' ') + 1);
    std::cout << line << '\n';
  }
}

int List(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    return ReportError(NotFoundError("checkpoint directory ", dir, " does not exist"));
  }
  if (!fs::is_directory(dir, ec)) {
    return ReportError(FailedPreconditionError(dir,
                                               " is not a directory; to look at one checkpoint, run `weft ckpt "
                                               "inspect PREFIX`"));
  }
  checkpoint::CheckpointManager manager(dir, 0);
  auto prefixes = manager.List();
  if (!prefixes.ok()) return ReportError(prefixes.status());
  if (prefixes->empty()) {
    std::cout << "no checkpoints in " << dir << "\n";
    return kExitOk;
  }
  auto latest = manager.Latest();
  if (!latest.ok()) return ReportError(latest.status());
  Table table({"PREFIX", "STEP", "TENSORS", "BYTES", "NEWEST"});
  Status first_error;
  for (const std::string& prefix : *prefixes) {
    const std::optional<int64_t> step = checkpoint::CheckpointManager::StepOf(prefix);
    const std::string newest = *latest == prefix ? "*" : "";
    auto reader = checkpoint::BundleReader::Open(prefix);
    if (!reader.ok()) {
      if (first_error.ok()) first_error = reader.status();
      table.AddRow({prefix, step ? StrCat(*step) : "?", "unreadable", "-", newest});
      continue;
    }
    const auto& meta = (*reader)->metadata();
    const auto step_it = meta.find("step");
    table.AddRow({prefix,
                  step_it != meta.end() ? step_it->second
                  : step                ? StrCat(*step)
                                        : "?",
                  StrCat((*reader)->entries().size()), StrCat((*reader)->total_bytes()), newest});
  }
  PrintTrimmed(table);
  if (!first_error.ok()) return ReportError(first_error);
  return kExitOk;
}

int Inspect(std::string prefix) {
  // Accept the index file itself, as shells complete it.
  if (prefix.ends_with(".index")) prefix.resize(prefix.size() - 6);
  auto reader = checkpoint::BundleReader::Open(prefix);
  if (!reader.ok()) return ReportError(reader.status());
  const checkpoint::BundleReader& r = **reader;
  std::cout << "checkpoint " << prefix << ": " << r.entries().size() << " tensor"
            << (r.entries().size() == 1 ? "" : "s") << ", " << r.total_bytes() << " bytes in " << r.num_shards()
            << " shard" << (r.num_shards() == 1 ? "" : "s") << "\n";
  if (r.metadata().empty()) {
    std::cout << "metadata: none\n";
  } else {
    std::cout << "metadata:\n";
    Table meta({"  KEY", "VALUE"});
    for (const auto& [key, value] : r.metadata()) meta.AddRow({"  " + key, Quote(value)});
    PrintTrimmed(meta);
  }
  Table table({"NAME", "DTYPE", "SHAPE", "BYTES", "CRC32C", "STATUS"});
  Status first_error;
  int corrupt = 0;
  for (const checkpoint::TensorEntry& e : r.entries()) {
    Status s = r.Verify(e);
    if (!s.ok()) {
      ++corrupt;
      if (first_error.ok()) first_error = s;
    }
    table.AddRow({e.name, std::string(DTypeName(e.dtype)), e.shape.ToString(), StrCat(e.bytes), Hex(e.crc32c),
                  s.ok()                        ? "ok"
                  : s.code() == Code::kDataLoss ? "CORRUPT"
                                                : "unreadable"});
  }
  PrintTrimmed(table);
  if (!first_error.ok()) {
    return ReportError(
        corrupt > 1 ? Status(first_error.code(), StrCat(first_error.message(), " (", corrupt, " tensors fail in all)"))
                    : first_error);
  }
  return kExitOk;
}

}  // namespace

void AddCheckpointCommands(CLI::App& app, Runner& run) {
  CLI::App* ckpt = app.add_subcommand("ckpt", "Look at checkpoints: list a directory's, inspect and verify one");
  ckpt->require_subcommand(1);

  auto dir = std::make_shared<std::string>();
  CLI::App* ls = ckpt->add_subcommand(
      "ls", "List the checkpoints a directory keeps (from its manifest): prefix, step, tensors, bytes, newest");
  ls->add_option("DIR", *dir, "A checkpoint directory (where training saves ckpt-<step> bundles)")->required();
  ls->callback([&run, dir] { run = [dir](Context&) { return List(*dir); }; });

  auto prefix = std::make_shared<std::string>();
  CLI::App* inspect = ckpt->add_subcommand(
      "inspect",
      "Show a checkpoint's metadata and tensors and verify every tensor's CRC32C (exit 1 if any is corrupt)");
  inspect->add_option("PREFIX", *prefix, "The checkpoint's prefix (DIR/ckpt-<step>, or its .index file)")->required();
  inspect->callback([&run, prefix] { run = [prefix](Context&) { return Inspect(*prefix); }; });
}

}  // namespace weft::cli
