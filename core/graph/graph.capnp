# Weft graph files: binary .wg (Cap'n Proto messages) and text .wgt (Cap'n
# Proto's text format of the same schema). Fields are only ever added, with
# new ordinals; nothing is renumbered or removed.
@0x843469a63aa287ef;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("weft::wire");

# Element types, numbered as in the plugin ABI (weft/weft_tensor.h), which
# are TensorFlow's numbers. The gaps are reserved names.
enum DType {
  invalid @0;
  f32 @1;
  f64 @2;
  i32 @3;
  u8 @4;
  i16 @5;
  i8 @6;
  string @7;
  reserved8 @8;
  i64 @9;
  bool @10;
  reserved11 @11;
  reserved12 @12;
  reserved13 @13;
  bf16 @14;
  reserved15 @15;
  reserved16 @16;
  reserved17 @17;
  reserved18 @18;
  f16 @19;
  resource @20;
}

struct Shape {
  unknownRank @0 :Bool;
  # -1 for a dimension of unknown size.
  dims @1 :List(Int64);
}

struct Tensor {
  dtype @0 :DType;
  shape @1 :Shape;
  # The elements, little-endian, row-major. Empty for strings.
  content @2 :Data;
  # The elements of a string tensor.
  strings @3 :List(Text);
}

struct AttrValue {
  union {
    int @0 :Int64;
    float @1 :Float64;
    bool @2 :Bool;
    string @3 :Text;
    type @4 :DType;
    shape @5 :Shape;
    tensor @6 :Tensor;
    func @7 :Text;
    ints @8 :List(Int64);
    floats @9 :List(Float64);
    bools @10 :List(Bool);
    strings @11 :List(Text);
    types @12 :List(DType);
    shapes @13 :List(Shape);
    tensors @14 :List(Tensor);
    funcs @15 :List(Text);
  }
}

struct Attr {
  name @0 :Text;
  value @1 :AttrValue;
}

struct Node {
  name @0 :Text;
  op @1 :Text;
  # "node", "node:k" or "^node".
  inputs @2 :List(Text);
  device @3 :Text;
  attrs @4 :List(Attr);
}

struct FunctionArg {
  name @0 :Text;
  dtype @1 :DType;
}

struct Function {
  name @0 :Text;
  inputs @1 :List(FunctionArg);
  outputs @2 :List(FunctionArg);
  nodes @3 :List(Node);
  results @4 :List(Text);
}

struct Graph {
  # The format version that wrote the file, and the oldest reader that
  # understands it.
  producer @0 :UInt32;
  minConsumer @1 :UInt32;
  nodes @2 :List(Node);
  library @3 :List(Function);
}
