#include <iostream>
#include <memory>

#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {
namespace {

std::string DefaultText(const config::OptionSpec& spec) {
  return spec.default_value ? spec.default_value->text : "(none)";
}

void PrintJson(const plugin::PluginHost& host) {
  JsonWriter j(std::cout);
  j.BeginObject();
  j.Key("search_path");
  j.BeginArray();
  for (const std::string& entry : host.SearchPath()) j.String(entry);
  j.EndArray();
  j.Key("plugins");
  j.BeginArray();
  for (const plugin::PluginInfo& p : host.plugins()) {
    j.BeginObject();
    j.String("name", p.name);
    j.Key("kind");
    if (p.kind) {
      j.String(plugin::KindName(*p.kind));
    } else {
      j.Null();
    }
    j.String("abi", p.abi_major == 0 ? "" : StrCat(p.abi_major, ".", p.abi_minor));
    j.String("version", p.version);
    j.String("path", p.path);
    j.String("status", plugin::StateName(p.state));
    j.String("reason", p.reason);
    j.Key("options");
    j.BeginArray();
    for (const config::OptionSpec& spec : p.options) {
      j.BeginObject();
      j.String("key", spec.key);
      j.String("expects", config::DescribeExpected(spec));
      j.String("default", DefaultText(spec));
      j.String("doc", spec.doc);
      j.EndObject();
    }
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
}

int Run(Context& ctx, bool json, bool options) {
  auto host = ctx.Plugins();
  if (!host.ok()) return ReportError(host.status());
  if (json) {
    PrintJson(**host);
    return kExitOk;
  }
  const auto& plugins = (*host)->plugins();
  if (plugins.empty()) {
    std::cout << "No plugins found. Searched:\n";
    for (const std::string& entry : (*host)->SearchPath()) std::cout << "  " << entry << '\n';
    std::cout << "Add directories with [plugins] paths in the config or $WEFT_PLUGIN_PATH.\n";
    return kExitOk;
  }
  Table table({"NAME", "KIND", "ABI", "VERSION", "STATUS", "PATH"});
  for (const plugin::PluginInfo& p : plugins) {
    table.AddRow({p.name.empty() ? "-" : p.name, p.kind ? std::string(plugin::KindName(*p.kind)) : "-",
                  p.abi_major == 0 ? "-" : StrCat(p.abi_major, ".", p.abi_minor), p.version.empty() ? "-" : p.version,
                  std::string(plugin::StateName(p.state)), p.path});
  }
  table.Print(std::cout);
  bool first_note = true;
  for (const plugin::PluginInfo& p : plugins) {
    if (p.reason.empty()) continue;
    if (first_note) std::cout << '\n';
    first_note = false;
    std::cout << (p.name.empty() ? p.path : p.name) << ": " << plugin::StateName(p.state) << ": " << p.reason << '\n';
  }
  if (options) {
    for (const plugin::PluginInfo& p : plugins) {
      if (!p.kind || p.options.empty()) continue;
      std::cout << "\n[" << plugin::SectionKind(*p.kind) << "." << p.name << "]\n";
      Table keys({"  KEY", "EXPECTS", "DEFAULT", "DESCRIPTION"});
      for (const config::OptionSpec& spec : p.options) {
        keys.AddRow({"  " + spec.key, config::DescribeExpected(spec), DefaultText(spec), spec.doc});
      }
      keys.Print(std::cout);
    }
  }
  return kExitOk;
}

}  // namespace

void AddPluginsCommand(CLI::App& app, Runner& run) {
  auto json = std::make_shared<bool>(false);
  auto options = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("plugins", "List the plugins found on the search path, loaded or not, and why");
  cmd->add_flag("--json", *json, "Print as JSON");
  cmd->add_flag("--options", *options, "Also list each plugin's configuration keys");
  cmd->callback([&run, json, options] { run = [json, options](Context& ctx) { return Run(ctx, *json, *options); }; });
}

}  // namespace weft::cli
