#include <iostream>
#include <memory>

#include "core/distributed/cluster_runtime.h"
#include "core/distributed/dist_session.h"
#include "core/distributed/remote_rendezvous.h"
#include "core/plugin/device_plugin.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {
namespace {

struct OpenedDevice {
  std::string name;
  std::string plugin;
  plugin::DeviceProperties props;
};

std::string Gbps(double value) { return value > 0 ? StrCat(value, " GB/s") : "unknown"; }

// Every device of every task of the config's [cluster], asked of the
// running tasks themselves.
int RunCluster(Context& ctx, const dist::ClusterSpec& cluster, bool json) {
  auto host = ctx.Plugins();
  if (!host.ok()) return ReportError(host.status());
  const dist::DistSessionOptions options = dist::SessionOptionsFor(cluster, ctx.config());
  auto devices = dist::DistSession::ListDevices(options, **host);
  if (!devices.ok()) return ReportError(devices.status());
  auto address_of = [&](const std::string& device) {
    const std::string task = dist::TaskOfDevice(device);
    for (const dist::Peer& p : options.tasks) {
      if (p.name == task) return p.address;
    }
    return std::string();
  };
  if (json) {
    JsonWriter j(std::cout);
    j.BeginArray();
    for (const dist::DeviceInfo& d : *devices) {
      j.BeginObject();
      j.String("name", d.name);
      j.String("type", d.type);
      j.String("task", dist::TaskOfDevice(d.name));
      j.String("address", address_of(d.name));
      j.Bool("host_visible", d.host_visible);
      j.EndObject();
    }
    j.EndArray();
    std::cout << '\n';
    return kExitOk;
  }
  Table table({"DEVICE", "TYPE", "TASK ADDRESS", "HOST VISIBLE"});
  for (const dist::DeviceInfo& d : *devices) {
    table.AddRow({d.name, d.type, address_of(d.name), d.host_visible ? "yes" : "no"});
  }
  table.Print(std::cout);
  return kExitOk;
}

int Run(Context& ctx, bool json, bool local) {
  if (!local) {
    auto cluster = ctx.Cluster();
    if (!cluster.ok()) return ReportError(cluster.status());
    if ((*cluster)->distributed()) return RunCluster(ctx, **cluster, json);
  }
  auto host = ctx.Plugins();
  if (!host.ok()) return ReportError(host.status());
  std::vector<OpenedDevice> devices;
  for (const plugin::DevicePlugin* device_plugin : (*host)->devices().All()) {
    auto count = device_plugin->DeviceCount();
    if (!count.ok()) return ReportError(count.status());
    for (int i = 0; i < *count; ++i) {
      auto device = device_plugin->Open(i);
      if (!device.ok()) return ReportError(device.status());
      auto props = (*device)->Properties();
      if (!props.ok()) return ReportError(props.status());
      devices.push_back({(*device)->name(), device_plugin->plugin_name(), *props});
    }
  }
  if (json) {
    JsonWriter j(std::cout);
    j.BeginArray();
    for (const OpenedDevice& d : devices) {
      j.BeginObject();
      j.String("name", d.name);
      j.String("plugin", d.plugin);
      j.String("model", d.props.model);
      j.String("vendor", d.props.vendor);
      j.String("driver", d.props.driver);
      j.Int("memory_bytes", static_cast<long long>(d.props.memory_bytes));
      j.Int("alignment", static_cast<long long>(d.props.alignment));
      j.Bool("host_visible", d.props.host_visible);
      j.Int("compute_units", d.props.compute_units);
      j.Key("properties");
      j.BeginObject();
      for (const auto& [key, value] : d.props.extra) {
        j.String(key, value);
      }
      j.EndObject();
      j.EndObject();
    }
    j.EndArray();
    return kExitOk;
  }
  if (devices.empty()) {
    std::cerr << "weft: error: no devices: no device plugin is loaded (see `weft plugins`)\n";
    return kExitUserError;
  }
  bool first = true;
  for (const OpenedDevice& d : devices) {
    if (!first) std::cout << '\n';
    first = false;
    std::cout << d.name << "  (plugin " << d.plugin << ")\n";
    Table table({"  model", d.props.model.empty() ? "unknown" : d.props.model});
    table.AddRow({"  vendor", d.props.vendor.empty() ? "unknown" : d.props.vendor});
    table.AddRow({"  driver", d.props.driver.empty() ? "unknown" : d.props.driver});
    table.AddRow({"  memory", d.props.memory_bytes > 0 ? HumanBytes(d.props.memory_bytes) : "unknown"});
    table.AddRow({"  alignment", StrCat(d.props.alignment, " B")});
    table.AddRow({"  compute units", StrCat(d.props.compute_units)});
    table.AddRow({"  host visible", d.props.host_visible ? "yes" : "no"});
    if (!d.props.host_visible) {
      table.AddRow({"  host->device", Gbps(d.props.host_to_device_gbps)});
      table.AddRow({"  device->host", Gbps(d.props.device_to_host_gbps)});
    }
    for (const auto& [key, value] : d.props.extra) table.AddRow({"  " + key, value});
    table.Print(std::cout);
  }
  return kExitOk;
}

}  // namespace

void AddDevicesCommand(CLI::App& app, Runner& run) {
  auto json = std::make_shared<bool>(false);
  auto local = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "devices", "Open every device of every loaded plugin and describe it; with a [cluster], list every task's");
  cmd->add_flag("--json", *json, "Print as JSON");
  cmd->add_flag("--local", *local, "Only this machine's devices, even when the config has a [cluster]");
  cmd->callback([&run, json, local] { run = [json, local](Context& ctx) { return Run(ctx, *json, *local); }; });
}

}  // namespace weft::cli
