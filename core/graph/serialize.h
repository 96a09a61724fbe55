// Graph files: binary .wg and text .wgt, both Cap'n Proto (graph.capnp),
// converting exactly to and from GraphDef: a graph written and read back,
// in either format, is the same graph, bit for bit (floats and tensor
// contents included).
//
// Reading never trusts the file: a truncated or garbage file, an
// out-of-range enum or an oversized message is an error naming the file,
// never a crash, and the reader's memory is bounded by the file's size.
#ifndef WEFT_CORE_GRAPH_SERIALIZE_H_
#define WEFT_CORE_GRAPH_SERIALIZE_H_

#include <string>
#include <string_view>

#include "core/base/status.h"
#include "core/graph/graph_def.h"

namespace weft {

enum class GraphFormat { kBinary, kText };

std::string SerializeGraphDef(const GraphDef& def, GraphFormat format);
// |name| is used in messages.
Expected<GraphDef> ParseGraphDef(std::string_view bytes, GraphFormat format, std::string_view name);

// The format a path's extension names: .wg binary, .wgt text; an error for
// anything else.
Expected<GraphFormat> FormatForPath(const std::string& path);

// How ReadGraphFile gives tensor contents: copied into memory of their
// own, or, from a .wg file, in place in a private mapping of the file
// (copy-on-write) where WriteGraphFile aligned them: no copy of the
// weights, and their pages are the page cache's. In place, the GraphDef
// keeps the mapping, and the file must not be rewritten in place while
// it is used (Weft's writers replace files by renaming, which is safe;
// `cp` over the file is not); inference::Model::Load reads so, long-lived
// servers copy.
enum class TensorReading { kCopy, kInPlace };

// Reads a graph file. The extension picks the format; a file with another
// extension is read as text when it looks like text, else as binary.
Expected<GraphDef> ReadGraphFile(const std::string& path, TensorReading reading = TensorReading::kCopy);
// Writes a graph file in the format its extension names, through a
// temporary file and a rename. In a .wg file, every tensor's contents
// start at a multiple of 64 bytes into the file, so readers that map it can
// use them in place.
Status WriteGraphFile(const std::string& path, const GraphDef& def);

}  // namespace weft

#endif  // WEFT_CORE_GRAPH_SERIALIZE_H_
