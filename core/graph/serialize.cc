#include "core/graph/serialize.h"

#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/serialize-text.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <kj/exception.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/file_util.h"
#include "core/graph/graph.capnp.h"

namespace weft {
namespace {

// --- GraphDef -> capnp --------------------------------------------------------

wire::DType ToWire(DType d) { return static_cast<wire::DType>(static_cast<uint16_t>(d)); }

Expected<DType> FromWire(wire::DType d) {
  const auto value = static_cast<int32_t>(static_cast<uint16_t>(d));
  for (DType known : AllDTypes()) {
    if (static_cast<int32_t>(known) == value) return known;
  }
  return InvalidArgumentError("unknown dtype number ", value);
}

void WriteShape(const Shape& shape, wire::Shape::Builder out) {
  out.setUnknownRank(shape.unknown_rank());
  auto dims = out.initDims(static_cast<unsigned>(shape.unknown_rank() ? 0 : shape.rank()));
  for (int i = 0; i < shape.rank(); ++i) dims.set(static_cast<unsigned>(i), shape.dim(i));
}

// Places tensor contents at multiples of 64 bytes into the file a
// one-segment message becomes (8 bytes of segment table, then the
// segment), so that a reader that maps the file can use them where they
// are (ReadTensor). Padding is a discarded orphan, zeroed where it lies.
class Aligner {
 public:
  explicit Aligner(capnp::MallocMessageBuilder& message) : message_(message) {}
  void Pad() {
    auto segments = message_.getSegmentsForOutput();
    if (segments.size() != 1) return;  // the offsets below hold in one segment only
    const std::size_t words = segments[0].size();
    const std::size_t pad = 7 - (words % 8);  // (1 + words + pad) % 8 == 0
    if (pad > 0) message_.getOrphanage().newOrphan<capnp::Data>(pad * sizeof(capnp::word));
  }

 private:
  capnp::MallocMessageBuilder& message_;
};

void WriteTensor(const Tensor& t, wire::Tensor::Builder out, Aligner* align) {
  out.setDtype(ToWire(t.dtype()));
  WriteShape(t.shape(), out.initShape());
  if (t.dtype() == DType::kString) {
    auto strings = out.initStrings(static_cast<unsigned>(t.num_elements()));
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      const std::string_view s = t.string_at(i);
      strings.set(static_cast<unsigned>(i), capnp::Text::Reader(s.data(), s.size()));
    }
  } else if (t.byte_size() > 0) {
    if (align != nullptr) align->Pad();
    out.setContent(capnp::Data::Reader(static_cast<const kj::byte*>(t.raw_data()), t.byte_size()));
  }
}

template <class List, class Values, class Fn>
void FillList(List list, const Values& values, Fn set) {
  for (unsigned i = 0; i < values.size(); ++i) set(list, i, values[i]);
}

void WriteAttr(const AttrValue& value, wire::AttrValue::Builder out, Aligner* align) {
  switch (value.type()) {
    case AttrType::kInt: out.setInt(value.get<int64_t>()); break;
    case AttrType::kFloat: out.setFloat(value.get<double>()); break;
    case AttrType::kBool: out.setBool(value.get<bool>()); break;
    case AttrType::kString: out.setString(value.get<std::string>()); break;
    case AttrType::kType: out.setType(ToWire(value.get<DType>())); break;
    case AttrType::kShape: WriteShape(value.get<Shape>(), out.initShape()); break;
    case AttrType::kTensor: WriteTensor(value.get<Tensor>(), out.initTensor(), align); break;
    case AttrType::kFunc: out.setFunc(value.get<FuncName>().name); break;
    case AttrType::kIntList: {
      const auto& v = value.get<std::vector<int64_t>>();
      FillList(out.initInts(static_cast<unsigned>(v.size())), v, [](auto l, unsigned i, int64_t x) { l.set(i, x); });
      break;
    }
    case AttrType::kFloatList: {
      const auto& v = value.get<std::vector<double>>();
      FillList(out.initFloats(static_cast<unsigned>(v.size())), v, [](auto l, unsigned i, double x) { l.set(i, x); });
      break;
    }
    case AttrType::kBoolList: {
      const auto& v = value.get<std::vector<bool>>();
      auto l = out.initBools(static_cast<unsigned>(v.size()));
      for (unsigned i = 0; i < v.size(); ++i) l.set(i, v[i]);
      break;
    }
    case AttrType::kStringList: {
      const auto& v = value.get<std::vector<std::string>>();
      auto l = out.initStrings(static_cast<unsigned>(v.size()));
      for (unsigned i = 0; i < v.size(); ++i) l.set(i, v[i]);
      break;
    }
    case AttrType::kTypeList: {
      const auto& v = value.get<std::vector<DType>>();
      auto l = out.initTypes(static_cast<unsigned>(v.size()));
      for (unsigned i = 0; i < v.size(); ++i) l.set(i, ToWire(v[i]));
      break;
    }
    case AttrType::kShapeList: {
      const auto& v = value.get<std::vector<Shape>>();
      auto l = out.initShapes(static_cast<unsigned>(v.size()));
      for (unsigned i = 0; i < v.size(); ++i) WriteShape(v[i], l[i]);
      break;
    }
    case AttrType::kTensorList: {
      const auto& v = value.get<std::vector<Tensor>>();
      auto l = out.initTensors(static_cast<unsigned>(v.size()));
      for (unsigned i = 0; i < v.size(); ++i) WriteTensor(v[i], l[i], align);
      break;
    }
    case AttrType::kFuncList: {
      const auto& v = value.get<std::vector<FuncName>>();
      auto l = out.initFuncs(static_cast<unsigned>(v.size()));
      for (unsigned i = 0; i < v.size(); ++i) l.set(i, v[i].name);
      break;
    }
  }
}

void WriteNode(const NodeDef& node, wire::Node::Builder out, Aligner* align) {
  out.setName(node.name);
  out.setOp(node.op);
  auto inputs = out.initInputs(static_cast<unsigned>(node.inputs.size()));
  for (unsigned i = 0; i < node.inputs.size(); ++i) inputs.set(i, node.inputs[i]);
  out.setDevice(node.device);
  auto attrs = out.initAttrs(static_cast<unsigned>(node.attrs.size()));
  unsigned i = 0;
  for (const auto& [name, value] : node.attrs) {
    attrs[i].setName(name);
    WriteAttr(value, attrs[i].initValue(), align);
    ++i;
  }
}

void WriteGraph(const GraphDef& def, wire::Graph::Builder out, Aligner* align = nullptr) {
  out.setProducer(def.producer);
  out.setMinConsumer(def.min_consumer);
  auto nodes = out.initNodes(static_cast<unsigned>(def.nodes.size()));
  for (unsigned i = 0; i < def.nodes.size(); ++i) WriteNode(def.nodes[i], nodes[i], align);
  auto library = out.initLibrary(static_cast<unsigned>(def.library.size()));
  for (unsigned f = 0; f < def.library.size(); ++f) {
    const FunctionDef& fn = def.library[f];
    library[f].setName(fn.name);
    auto ins = library[f].initInputs(static_cast<unsigned>(fn.inputs.size()));
    for (unsigned i = 0; i < fn.inputs.size(); ++i) {
      ins[i].setName(fn.inputs[i].name);
      ins[i].setDtype(ToWire(fn.inputs[i].dtype));
    }
    auto outs = library[f].initOutputs(static_cast<unsigned>(fn.outputs.size()));
    for (unsigned i = 0; i < fn.outputs.size(); ++i) {
      outs[i].setName(fn.outputs[i].name);
      outs[i].setDtype(ToWire(fn.outputs[i].dtype));
    }
    auto nodes_out = library[f].initNodes(static_cast<unsigned>(fn.nodes.size()));
    for (unsigned i = 0; i < fn.nodes.size(); ++i) WriteNode(fn.nodes[i], nodes_out[i], align);
    auto results = library[f].initResults(static_cast<unsigned>(fn.results.size()));
    for (unsigned i = 0; i < fn.results.size(); ++i) results.set(i, fn.results[i]);
  }
}

// --- capnp -> GraphDef --------------------------------------------------------

std::string Str(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }

Expected<Shape> ReadShape(wire::Shape::Reader in) {
  if (in.getUnknownRank()) return Shape::UnknownRank();
  std::vector<int64_t> dims;
  if (in.getDims().size() > WEFT_MAX_RANK) {
    return InvalidArgumentError("a shape has rank ", in.getDims().size(), ", above the maximum of ", WEFT_MAX_RANK);
  }
  for (int64_t d : in.getDims()) {
    if (d < -1) return InvalidArgumentError("a shape has dimension ", d);
    dims.push_back(d);
  }
  return Shape(std::move(dims));
}

// A mapped .wg file, kept while tensors read from it in place use it.
class MappedFile : public Buffer {
 public:
  MappedFile(void* data, uint64_t size) : Buffer(data, size, nullptr, nullptr) {}
  ~MappedFile() override { ::munmap(data(), size()); }
};

// Where tensor contents may be used in place: a mapped file, and its
// first byte.
struct Backing {
  std::shared_ptr<MappedFile> file;
  const kj::byte* base = nullptr;
};

Expected<Tensor> ReadTensor(wire::Tensor::Reader in, const Backing* backing) {
  WEFT_ASSIGN_OR_RETURN(DType dtype, FromWire(in.getDtype()));
  WEFT_ASSIGN_OR_RETURN(Shape shape, ReadShape(in.getShape()));
  if (!shape.IsFullyDefined()) return InvalidArgumentError("a tensor has partial shape ", shape.ToString());
  WEFT_ASSIGN_OR_RETURN(int64_t count, CheckedNumElements(shape.dims()));
  if (dtype == DType::kString) {
    if (in.getStrings().size() != static_cast<uint64_t>(count)) {
      return InvalidArgumentError("a string tensor of shape ", shape.ToString(), " holds ", in.getStrings().size(),
                                  " strings");
    }
    std::vector<std::string> values;
    for (auto s : in.getStrings()) values.push_back(Str(s));
    return Tensor::Strings(values, shape);
  }
  if (dtype == DType::kResource || dtype == DType::kInvalid) {
    return InvalidArgumentError("a tensor of dtype ", DTypeName(dtype), " cannot be stored");
  }
  const auto content = in.getContent();
  const uint64_t want = static_cast<uint64_t>(count) * DTypeSize(dtype);
  if (content.size() != want) {
    return InvalidArgumentError("a ", DTypeName(dtype), shape.ToString(), " tensor needs ", want,
                                " bytes of content, it has ", content.size());
  }
  if (backing != nullptr && want > 0) {
    // Contents the writer aligned (WriteGraphFile) are used where they lie
    // in the mapping: no copy of the weights, and their pages stay the
    // file's, shared with the page cache.
    // 64 bytes of the file after it (the writer's end padding in a file
    // it aligned), so that a kernel's read past an input's end (XNNPACK's
    // 16 bytes) stays inside the mapping.
    const auto offset = static_cast<uint64_t>(content.begin() - backing->base);
    if (offset % HostBuffer::kAlignment == 0 && offset + want + 64 <= backing->file->size()) {
      return Tensor(dtype, shape, backing->file, offset);
    }
  }
  WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, shape));
  if (want > 0) std::memcpy(t.raw_data(), content.begin(), want);
  return t;
}

Expected<AttrValue> ReadAttr(wire::AttrValue::Reader in, const Backing* backing) {
  using W = wire::AttrValue;
  switch (in.which()) {
    case W::INT: return AttrValue(in.getInt());
    case W::FLOAT: return AttrValue(in.getFloat());
    case W::BOOL: return AttrValue(in.getBool());
    case W::STRING: return AttrValue(Str(in.getString()));
    case W::TYPE: {
      WEFT_ASSIGN_OR_RETURN(DType d, FromWire(in.getType()));
      return AttrValue(d);
    }
    case W::SHAPE: {
      WEFT_ASSIGN_OR_RETURN(Shape s, ReadShape(in.getShape()));
      return AttrValue(s);
    }
    case W::TENSOR: {
      WEFT_ASSIGN_OR_RETURN(Tensor t, ReadTensor(in.getTensor(), backing));
      return AttrValue(t);
    }
    case W::FUNC: return AttrValue(FuncName{Str(in.getFunc())});
    case W::INTS: {
      std::vector<int64_t> v;
      for (int64_t x : in.getInts()) v.push_back(x);
      return AttrValue(v);
    }
    case W::FLOATS: {
      std::vector<double> v;
      for (double x : in.getFloats()) v.push_back(x);
      return AttrValue(v);
    }
    case W::BOOLS: {
      std::vector<bool> v;
      for (bool b : in.getBools()) v.push_back(b);
      return AttrValue(v);
    }
    case W::STRINGS: {
      std::vector<std::string> v;
      for (auto s : in.getStrings()) v.push_back(Str(s));
      return AttrValue(v);
    }
    case W::TYPES: {
      std::vector<DType> v;
      for (auto d : in.getTypes()) {
        WEFT_ASSIGN_OR_RETURN(DType t, FromWire(d));
        v.push_back(t);
      }
      return AttrValue(v);
    }
    case W::SHAPES: {
      std::vector<Shape> v;
      for (auto s : in.getShapes()) {
        WEFT_ASSIGN_OR_RETURN(Shape shape, ReadShape(s));
        v.push_back(shape);
      }
      return AttrValue(v);
    }
    case W::TENSORS: {
      std::vector<Tensor> v;
      for (auto t : in.getTensors()) {
        WEFT_ASSIGN_OR_RETURN(Tensor tensor, ReadTensor(t, backing));
        v.push_back(tensor);
      }
      return AttrValue(v);
    }
    case W::FUNCS: {
      std::vector<FuncName> v;
      for (auto s : in.getFuncs()) v.push_back(FuncName{Str(s)});
      return AttrValue(v);
    }
  }
  return InvalidArgumentError("an attr value of unknown kind ", static_cast<int>(in.which()));
}

Expected<NodeDef> ReadNode(wire::Node::Reader in, std::size_t index, const Backing* backing) {
  NodeDef node;
  node.name = Str(in.getName());
  node.op = Str(in.getOp());
  node.device = Str(in.getDevice());
  for (auto input : in.getInputs()) node.inputs.push_back(Str(input));
  for (auto attr : in.getAttrs()) {
    auto value = ReadAttr(attr.getValue(), backing);
    if (!value.ok()) {
      return value.status().WithContext(
          StrCat("node #", index, " ", Quote(node.name), ": attr ", Quote(Str(attr.getName()))));
    }
    if (!node.attrs.emplace(Str(attr.getName()), std::move(*value)).second) {
      return InvalidArgumentError("node #", index, " ", Quote(node.name), ": attr ", Quote(Str(attr.getName())),
                                  " is given twice");
    }
  }
  return node;
}

Expected<GraphDef> ReadGraph(wire::Graph::Reader in, const Backing* backing = nullptr) {
  GraphDef def;
  def.producer = in.getProducer();
  def.min_consumer = in.getMinConsumer();
  std::size_t index = 0;
  def.nodes.reserve(in.getNodes().size());
  for (auto node : in.getNodes()) {
    WEFT_ASSIGN_OR_RETURN(NodeDef n, ReadNode(node, index++, backing));
    def.nodes.push_back(std::move(n));
  }
  for (auto fn : in.getLibrary()) {
    FunctionDef f;
    f.name = Str(fn.getName());
    for (auto a : fn.getInputs()) {
      WEFT_ASSIGN_OR_RETURN(DType d, FromWire(a.getDtype()));
      f.inputs.push_back({Str(a.getName()), d});
    }
    for (auto a : fn.getOutputs()) {
      WEFT_ASSIGN_OR_RETURN(DType d, FromWire(a.getDtype()));
      f.outputs.push_back({Str(a.getName()), d});
    }
    std::size_t node_index = 0;
    for (auto node : fn.getNodes()) {
      auto n = ReadNode(node, node_index++, backing);
      if (!n.ok()) return n.status().WithContext(StrCat("function ", Quote(f.name)));
      f.nodes.push_back(std::move(*n));
    }
    for (auto r : fn.getResults()) f.results.push_back(Str(r));
    def.library.push_back(std::move(f));
  }
  return def;
}

// The first line of a kj exception description, without kj's source
// position.
std::string Describe(const kj::Exception& e) {
  std::string text = e.getDescription().cStr();
  const auto newline = text.find('\n');
  if (newline != std::string::npos) text = text.substr(0, newline);
  return text;
}

Status CheckWordSize(std::size_t size, std::string_view name) {
  if (size % sizeof(capnp::word) != 0 || size < sizeof(capnp::word)) {
    return InvalidArgumentError(name, ": not a valid .wg graph file: its size (", size,
                                " bytes) is not a whole number of 8-byte words; is it truncated?");
  }
  return Status();
}

// A binary graph from its words; kj exceptions are the caller's.
Expected<GraphDef> ParseWords(kj::ArrayPtr<const capnp::word> words, std::string_view name,
                              const Backing* backing = nullptr) {
  capnp::ReaderOptions options;
  // Reading can never visit more than a few times the file.
  options.traversalLimitInWords = words.size() * 4 + 1024;
  options.nestingLimit = 32;
  capnp::FlatArrayMessageReader reader(words, options);
  if (reader.getEnd() != words.end()) {
    return InvalidArgumentError(name,
                                ": not a valid .wg graph file: ", (words.end() - reader.getEnd()) * sizeof(capnp::word),
                                " bytes of trailing data");
  }
  auto def = ReadGraph(reader.getRoot<wire::Graph>(), backing);
  if (!def.ok()) return def.status().WithContext(std::string(name));
  return def;
}

// The bytes of a .wg file: one segment whose tensor contents are 64-byte
// aligned in the file (Aligner), for readers that map it.
std::string SerializeAligned(const GraphDef& def) {
  // A first pass sizes the segment; padding at most doubles it (a tensor
  // takes more words than the at most 7 of its padding).
  std::size_t words = 0;
  {
    capnp::MallocMessageBuilder sizing;
    WriteGraph(def, sizing.initRoot<wire::Graph>());
    words = capnp::computeSerializedSizeInWords(sizing);
  }
  // A segment holds at most 2^29 - 1 words (4 GiB): a larger model is
  // written in several segments, unaligned, and read by copying.
  const std::size_t segment = 2 * words + 64;
  if (segment >= (std::size_t{1} << 29) - 1) return SerializeGraphDef(def, GraphFormat::kBinary);
  capnp::MallocMessageBuilder message(static_cast<unsigned>(segment), capnp::AllocationStrategy::FIXED_SIZE);
  Aligner align(message);
  WriteGraph(def, message.initRoot<wire::Graph>(), &align);
  // 64 bytes after everything, so that no tensor ends the file: XNNPACK
  // may read 16 bytes past an input's end (docs/lite.md), and past the
  // file's last page a mapping has nothing to read.
  message.getOrphanage().newOrphan<capnp::Data>(64);
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  kj::ArrayPtr<const char> bytes = flat.asChars();
  return std::string(bytes.begin(), bytes.size());
}

}  // namespace

std::string SerializeGraphDef(const GraphDef& def, GraphFormat format) {
  capnp::MallocMessageBuilder message;
  WriteGraph(def, message.initRoot<wire::Graph>());
#if defined(WEFT_LITE)
  // The lite build (docs/lite.md) has no text codec: .wg only.
  if (format == GraphFormat::kText) return "";
#else
  if (format == GraphFormat::kText) {
    capnp::TextCodec codec;
    codec.setPrettyPrint(true);
    kj::String text = codec.encode(message.getRoot<wire::Graph>().asReader());
    return std::string(text.cStr(), text.size()) + "\n";
  }
#endif
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  kj::ArrayPtr<const char> bytes = words.asChars();
  return std::string(bytes.begin(), bytes.size());
}

Expected<GraphDef> ParseGraphDef(std::string_view bytes, GraphFormat format, std::string_view name) {
  try {
    if (format == GraphFormat::kText) {
#if defined(WEFT_LITE)
      return UnimplementedError(name,
                                ": the lite build reads binary .wg graphs only; convert the .wgt with "
                                "`weft optimize MODEL.wgt -o MODEL.wg` (docs/lite.md)");
#else
      capnp::MallocMessageBuilder message;
      auto root = message.initRoot<wire::Graph>();
      const std::string text(bytes);  // NUL-terminated for kj
      capnp::TextCodec codec;
      codec.decode(kj::StringPtr(text.c_str(), text.size()), capnp::toDynamic(root));
      auto def = ReadGraph(root.asReader());
      if (!def.ok()) return def.status().WithContext(std::string(name));
      return def;
#endif
    }
    WEFT_RETURN_IF_ERROR(CheckWordSize(bytes.size(), name));
    kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), bytes.data(), bytes.size());
    return ParseWords(words, name);
  } catch (const kj::Exception& e) {
    return InvalidArgumentError(name, ": not a valid ", format == GraphFormat::kText ? ".wgt" : ".wg",
                                " graph file: ", Describe(e));
  }
}

Expected<GraphFormat> FormatForPath(const std::string& path) {
  if (path.ends_with(".wg")) return GraphFormat::kBinary;
  if (path.ends_with(".wgt")) return GraphFormat::kText;
  return InvalidArgumentError(Quote(path), ": graph files end in .wg (binary) or .wgt (text)");
}

namespace {

constexpr std::string_view kMappingFailure = "cannot map the file";

bool IsMappingFailure(const Status& status) { return status.message().find(kMappingFailure) != std::string::npos; }

// A .wg file read from a private mapping (page-aligned, so word-aligned as
// Cap'n Proto needs). In place, tensor contents
// that WriteGraphFile aligned stay in the mapping (ReadTensor), which
// lives as long as they do; it is writable copy-on-write, so a kernel that
// writes a constant's buffer changes its own copy of the page, never the
// file. Else the mapping goes when the GraphDef holds its copies. A file that cannot be mapped (a
// pipe, a file system without mmap) fails with kMappingFailure, and the
// caller reads it instead.
Expected<GraphDef> ReadMappedGraphFile(const std::string& path, TensorReading reading) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFoundError("cannot read graph file ", Quote(path), ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
    ::close(fd);
    return UnavailableError(kMappingFailure);
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  // In place: writable copy-on-write, its pages mapped as they are first
  // read (a writable private mapping would be copied page by page by
  // MAP_POPULATE, and prefaulting then mprotect took longer than the reads'
  // faults). Copied: prefaulted read-only in one call.
  const bool in_place = reading == TensorReading::kInPlace;
  void* data = in_place ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0)
                        : ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (data == MAP_FAILED) return UnavailableError(kMappingFailure);
  if (in_place) ::madvise(data, size, MADV_WILLNEED);  // read ahead: every page will be read
  Backing backing;                                     // unmaps the file when the last tensor over it goes
  backing.file = std::make_shared<MappedFile>(data, size);
  backing.base = static_cast<const kj::byte*>(data);
  WEFT_RETURN_IF_ERROR(CheckWordSize(size, path));
  try {
    return ParseWords(
        kj::ArrayPtr<const capnp::word>(static_cast<const capnp::word*>(data), size / sizeof(capnp::word)), path,
        in_place ? &backing : nullptr);
  } catch (const kj::Exception& e) {
    return InvalidArgumentError(path, ": not a valid .wg graph file: ", Describe(e));
  }
}

}  // namespace

Expected<GraphDef> ReadGraphFile(const std::string& path, TensorReading reading) {
  if (path.ends_with(".wg")) {
    // Read in place from a mapping of the file: no copy but the tensors'.
    // What cannot be mapped (a directory, an empty file, a pipe) is opened
    // below, which says why it cannot be read.
    if (Expected<GraphDef> mapped = ReadMappedGraphFile(path, reading);
        mapped.ok() || !IsMappingFailure(mapped.status())) {
      return mapped;
    }
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read graph file ", Quote(path), ": ", std::strerror(errno));
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    return InvalidArgumentError("cannot read graph file ", Quote(path), ": it is a directory");
  }
  if (path.ends_with(".wg")) {
    // Straight into the words Cap'n Proto reads: one copy of the file.
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    in.seekg(0, std::ios::beg);
    if (size < 0 || !in) return NotFoundError("cannot read graph file ", Quote(path), ": cannot tell its size");
    WEFT_RETURN_IF_ERROR(CheckWordSize(static_cast<std::size_t>(size), path));
    try {
      kj::Array<capnp::word> words = kj::heapArray<capnp::word>(static_cast<std::size_t>(size) / sizeof(capnp::word));
      if (!in.read(reinterpret_cast<char*>(words.begin()), size)) {
        return NotFoundError("cannot read graph file ", Quote(path), ": ", std::strerror(errno));
      }
      return ParseWords(words, path);
    } catch (const kj::Exception& e) {
      return InvalidArgumentError(path, ": not a valid .wg graph file: ", Describe(e));
    }
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  auto format = FormatForPath(path);
  if (!format.ok()) {
    const auto first = bytes.find_first_not_of(" \t\r\n");
    format = first != std::string::npos && (bytes[first] == '(' || bytes[first] == '#') ? GraphFormat::kText
                                                                                        : GraphFormat::kBinary;
  }
  return ParseGraphDef(bytes, *format, path);
}

Status WriteGraphFile(const std::string& path, const GraphDef& def) {
  WEFT_ASSIGN_OR_RETURN(GraphFormat format, FormatForPath(path));
  const std::string bytes = format == GraphFormat::kBinary ? SerializeAligned(def) : SerializeGraphDef(def, format);
  // Atomically (temporary file, fsync, rename, directory fsync): a reader
  // never sees half a file, and a crash leaves the old one.
  return WriteFileAtomically(path, bytes).WithContext(StrCat("writing ", path));
}

}  // namespace weft
