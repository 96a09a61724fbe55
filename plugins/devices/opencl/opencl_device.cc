#include "opencl_device.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "embedded_sources.h"
#include "weft/sdk/struct.h"

namespace weft::opencl {
namespace {

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

cl_device_type TypeBits(const std::string& type) {
  if (type == "gpu") return CL_DEVICE_TYPE_GPU;
  if (type == "cpu") return CL_DEVICE_TYPE_CPU;
  if (type == "accelerator") return CL_DEVICE_TYPE_ACCELERATOR;
  return CL_DEVICE_TYPE_ALL;
}

std::string TypeName(cl_device_type type) {
  std::string out;
  auto add = [&](cl_device_type bit, const char* name) {
    if ((type & bit) == 0) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(CL_DEVICE_TYPE_CPU, "cpu");
  add(CL_DEVICE_TYPE_GPU, "gpu");
  add(CL_DEVICE_TYPE_ACCELERATOR, "accelerator");
  add(CL_DEVICE_TYPE_CUSTOM, "custom");
  return out.empty() ? "other" : out;
}

std::string Quoted(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "\"" : ", \"") + name + "\"";
  return out;
}

}  // namespace

std::vector<Found> FindDevices(const Selection& selection) {
  cl_uint count = 0;
  const cl_int err = clGetPlatformIDs(0, nullptr, &count);
  if (err != CL_SUCCESS || count == 0) {
    throw sdk::Error(WEFT_UNAVAILABLE,
                     "no OpenCL platform found (clGetPlatformIDs: " +
                         (err != CL_SUCCESS ? ClErrorText(err) : std::string("0 platforms")) +
                         "); install an ICD such as pocl-opencl-icd, or your GPU vendor's OpenCL driver");
  }
  std::vector<cl_platform_id> platforms(count);
  Check(clGetPlatformIDs(count, platforms.data(), nullptr), "clGetPlatformIDs", "the OpenCL ICD loader");

  std::vector<std::string> all_names, matched_names;
  std::vector<Found> found;
  const std::string wanted = Lower(selection.platform);
  for (cl_platform_id platform : platforms) {
    const std::string name = PlatformString(platform, CL_PLATFORM_NAME);
    all_names.push_back(name);
    if (!wanted.empty() && Lower(name).find(wanted) == std::string::npos) continue;
    matched_names.push_back(name);
    cl_uint n = 0;
    const cl_int e = clGetDeviceIDs(platform, TypeBits(selection.device_type), 0, nullptr, &n);
    if (e == CL_DEVICE_NOT_FOUND || n == 0) continue;
    Check(e, "clGetDeviceIDs", "platform \"" + name + "\"");
    std::vector<cl_device_id> devices(n);
    Check(clGetDeviceIDs(platform, TypeBits(selection.device_type), n, devices.data(), nullptr), "clGetDeviceIDs",
          "platform \"" + name + "\"");
    for (cl_device_id device : devices) {
      // A device the driver lists but cannot use (busy, being reset) is
      // left out rather than failing every graph placed on it.
      if (DeviceValue<cl_bool>(device, CL_DEVICE_AVAILABLE) == CL_FALSE) continue;
      found.push_back({platform, device, name});
    }
  }
  if (matched_names.empty()) {
    throw sdk::Error(WEFT_UNAVAILABLE, "no OpenCL platform matches devices.opencl.platform = \"" + selection.platform +
                                           "\" (the platforms are " + Quoted(all_names) +
                                           "); set it to part of one of those names, or remove it");
  }
  if (found.empty()) {
    throw sdk::Error(WEFT_UNAVAILABLE, "no available OpenCL device of type " + selection.device_type + " on platform " +
                                           Quoted(matched_names) + " (devices.opencl.device_type = \"" +
                                           selection.device_type + "\"); choose another type, or \"all\"");
  }
  return found;
}

// --- Program -------------------------------------------------------------------

Program::Program(cl_program program, std::string name, std::string where)
    : program_(program), name_(std::move(name)), where_(std::move(where)) {}

Program::~Program() {
  for (auto& [name, kernels] : free_) {
    for (cl_kernel k : kernels) clReleaseKernel(k);
  }
  clReleaseProgram(program_);
}

cl_kernel Program::Take(const std::string& kernel) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(kernel);
    if (it != free_.end() && !it->second.empty()) {
      cl_kernel k = it->second.back();
      it->second.pop_back();
      return k;
    }
  }
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(program_, kernel.c_str(), &err);
  if (err != CL_SUCCESS) {
    throw sdk::Error(ClErrorCode(err), "clCreateKernel(" + kernel + ") from program " + name_ + " on " + where_ + ": " +
                                           ClErrorText(err));
  }
  return k;
}

void Program::Give(const std::string& kernel, cl_kernel object) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_[kernel].push_back(object);
}

// --- Device --------------------------------------------------------------------

Device::Device(int ordinal, const Found& found, const Selection& selection)
    : ordinal_(ordinal), device_(found.device), kernel_source_dir_(selection.kernel_source_dir) {
  model_ = DeviceString(device_, CL_DEVICE_NAME);
  where_ = model_ + " (/device:OPENCL:" + std::to_string(ordinal) + ")";
  vendor_ = DeviceString(device_, CL_DEVICE_VENDOR);
  // "OpenCL 3.0 PoCL HSTR: ..." -> "OpenCL 3.0": the rest repeats the model.
  std::string version = DeviceString(device_, CL_DEVICE_VERSION);
  if (const auto space = version.find(' ', 7); space != std::string::npos) version.resize(space);
  driver_ = found.platform_name + " " + DeviceString(device_, CL_DRIVER_VERSION) + ", " + version;
  memory_bytes_ = DeviceValue<cl_ulong>(device_, CL_DEVICE_GLOBAL_MEM_SIZE);
  max_alloc_ = DeviceValue<cl_ulong>(device_, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  compute_units_ = static_cast<int32_t>(DeviceValue<cl_uint>(device_, CL_DEVICE_MAX_COMPUTE_UNITS));
  align_ = std::max<uint64_t>(DeviceValue<cl_uint>(device_, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8, 1);
  const std::string extensions = DeviceString(device_, CL_DEVICE_EXTENSIONS);
  fp64_ = extensions.find("cl_khr_fp64") != std::string::npos;
  exact_divide_sqrt_ = (DeviceValue<cl_device_fp_config>(device_, CL_DEVICE_SINGLE_FP_CONFIG) &
                        CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;

  const bool emulated_local = DeviceValue<cl_device_local_mem_type>(device_, CL_DEVICE_LOCAL_MEM_TYPE) == CL_GLOBAL;
  blocked_matmul_ = selection.matmul_kernel == "auto" ? emulated_local : selection.matmul_kernel == "blocked";

  extra_text_ = {
      {"platform", found.platform_name},
      {"device_type", TypeName(DeviceValue<cl_device_type>(device_, CL_DEVICE_TYPE))},
      {"opencl_c", DeviceString(device_, CL_DEVICE_OPENCL_C_VERSION)},
      {"max_alloc", std::to_string(max_alloc_ >> 20) + " MiB"},
      {"local_memory", std::to_string(DeviceValue<cl_ulong>(device_, CL_DEVICE_LOCAL_MEM_SIZE) >> 10) + " KiB"},
      {"max_work_group_size", std::to_string(DeviceValue<size_t>(device_, CL_DEVICE_MAX_WORK_GROUP_SIZE))},
      {"fp64", fp64_ ? "yes" : "no"},
      {"matmul_kernel", blocked_matmul_ ? "blocked" : "tiled"},
  };
  for (const auto& [key, value] : extra_text_) extra_.push_back({sizeof(weft_property_t), key.c_str(), value.c_str()});

  const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM,
                                              reinterpret_cast<cl_context_properties>(found.platform), 0};
  cl_int err = CL_SUCCESS;
  context_ = clCreateContext(properties, 1, &device_, nullptr, nullptr, &err);
  Check(err, "clCreateContext");
}

Device::~Device() {
  programs_.clear();
  if (context_ != nullptr) clReleaseContext(context_);
}

void Device::Properties(weft_device_properties_t* out) const {
  auto props = sdk::Make<weft_device_properties_t>();
  props.model = model_.c_str();
  props.vendor = vendor_.c_str();
  props.driver = driver_.c_str();
  props.memory_bytes = memory_bytes_;
  props.alignment = align_;
  props.host_visible = 0;
  props.compute_units = compute_units_;
  // Unknown until measured (tools/bench transfer_h2d, transfer_d2h).
  props.host_to_device_gbps = 0;
  props.device_to_host_gbps = 0;
  props.device_to_device_gbps = 0;
  props.extra = extra_.data();
  props.num_extra = extra_.size();
  sdk::FillOut(out, props);
}

Buffer* Device::Allocate(uint64_t size) {
  if (size > max_alloc_) {
    throw sdk::Error(WEFT_RESOURCE_EXHAUSTED,
                     "cannot allocate " + std::to_string(size) + " bytes on " + where_ +
                         ": more than the largest buffer it allows (CL_DEVICE_MAX_MEM_ALLOC_SIZE = " +
                         std::to_string(max_alloc_) + " bytes)");
  }
  // OpenCL refuses empty buffers; one byte keeps every buffer a real object.
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(context_, CL_MEM_READ_WRITE, size == 0 ? 1 : size, nullptr, &err);
  if (err != CL_SUCCESS) {
    throw sdk::Error(err == CL_INVALID_BUFFER_SIZE ? WEFT_RESOURCE_EXHAUSTED : ClErrorCode(err),
                     "clCreateBuffer(" + std::to_string(size) + " bytes) on " + where_ + ": " + ClErrorText(err));
  }
  return new Buffer{mem, size};
}

void Device::Free(Buffer* buffer) {
  if (buffer == nullptr) return;
  // OpenCL keeps the memory until the commands using it have completed.
  clReleaseMemObject(buffer->mem);
  delete buffer;
}

std::string Device::Source(const std::string& name) const {
  if (!kernel_source_dir_.empty()) {
    std::ifstream file(kernel_source_dir_ + "/" + name + ".cl", std::ios::binary);
    if (file) {
      std::ostringstream text;
      text << file.rdbuf();
      return text.str();
    }
  }
  for (std::size_t i = 0; i < kNumEmbeddedSources; ++i) {
    if (name == kEmbeddedSources[i].name) return std::string(kEmbeddedSources[i].text, kEmbeddedSources[i].size);
  }
  throw sdk::Error(WEFT_INTERNAL, "the opencl plugin has no kernel source '" + name + ".cl'");
}

Program& Device::GetProgram(const std::string& name, const std::string& defines) {
  std::lock_guard<std::mutex> lock(programs_mutex_);
  const std::string key = name + "\n" + defines;
  auto it = programs_.find(key);
  if (it != programs_.end()) return *it->second;

  const bool overridden = !kernel_source_dir_.empty() && std::ifstream(kernel_source_dir_ + "/" + name + ".cl").good();
  const std::string title = "'" + name + "'" + (defines.empty() ? "" : " (" + defines + ")") +
                            (overridden ? " from " + kernel_source_dir_ + "/" + name + ".cl" : "");
  const std::string source = Source(name);
  const char* text = source.c_str();
  const size_t length = source.size();
  cl_int err = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(context_, 1, &text, &length, &err);
  Check(err, "clCreateProgramWithSource");
  std::string options = "-cl-std=CL1.2 " + defines;
  if (fp64_) options += " -DWEFT_HAS_FP64=1";
  // IEEE division and square roots where the device can, so that results
  // (Adam's update, softmax) match the CPU's bit for bit more often.
  if (exact_divide_sqrt_) options += " -cl-fp32-correctly-rounded-divide-sqrt";
  err = clBuildProgram(program, 1, &device_, options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    std::string log;
    size_t size = 0;
    if (clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) == CL_SUCCESS && size > 0) {
      log.resize(size);
      clGetProgramBuildInfo(program, device_, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    }
    clReleaseProgram(program);
    throw sdk::Error(WEFT_INTERNAL, "OpenCL program " + title + " failed to build on " + where_ +
                                        ": clBuildProgram: " + ClErrorText(err) + "; the compiler says:\n" +
                                        (log.empty() ? "(no build log)" : log));
  }
  auto built = std::make_unique<Program>(program, title, where_);
  Program& ref = *built;
  programs_.emplace(key, std::move(built));
  return ref;
}

}  // namespace weft::opencl
