// Variables: mutable state that lives across steps, owned by the resource
// manager of the device the handle is placed on. A handle is created by
// VarHandle; every other op reaches the variable through it, and the
// placer keeps them all on the variable's device.
#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

// ReadVariable: the variable's declared shape.
Status ValueShape(InferenceContext& c) {
  c.set_output(0, c.input_handle_shape(0));
  return Status();
}

// ResourceGather: indices.shape + variable.shape[1:].
Status GatherRowsShape(InferenceContext& c) {
  const Shape& var = c.input_handle_shape(0);
  const Shape& indices = c.input_shape(1);
  if (var.unknown_rank() || indices.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  if (var.rank() < 1) return c.Error("cannot gather rows of a scalar variable");
  std::vector<int64_t> dims = indices.dims();
  dims.insert(dims.end(), var.dims().begin() + 1, var.dims().end());
  c.set_output(0, Shape(dims));
  return Status();
}

}  // namespace

Status RegisterStateOps(OpRegistry& r) {
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("VarHandle")
                     .Output("resource: resource")
                     .Attr("dtype: type")
                     .Attr("shape: shape")
                     .Attr("container: string = ''")
                     .Attr("shared_name: string = ''")
                     .Stateful()
                     .Shape([](InferenceContext& c) -> Status {
                       Status fits = CheckShapeFits(c.ShapeAttr("shape"), c.Type("dtype"));
                       if (!fits.ok()) return fits.WithContext("attr shape");
                       return ScalarShape(c);
                     })
                     .Doc("A handle to the variable (container, shared_name) on its device, created empty the first "
                          "time; shared_name defaults to the node's name. Every run of a session, and every session of "
                          "one process, sees the same variable.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("ReadVariable")
                     .Input("resource: resource")
                     .Output("value: dtype")
                     .Attr("dtype: type")
                     .Stateful()
                     .Shape(ValueShape)
                     .Doc("The variable's current value (a snapshot: later updates do not change it). Reading an "
                          "uninitialised variable is an error naming it.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("Assign")
                     .Input("resource: resource")
                     .Input("value: dtype")
                     .Attr("dtype: type")
                     .Stateful()
                     .Shape(NoOutputShape)
                     .Doc("Sets the variable to 'value' (of the variable's dtype and any shape that fits its declared "
                          "shape).")));
  for (const char* name : {"AssignAdd", "AssignSub"}) {
    WEFT_RETURN_IF_ERROR(
        r.Register(OpDefBuilder(name)
                       .Input("resource: resource")
                       .Input("value: dtype")
                       .Attr("dtype: {numeric}")
                       .Stateful()
                       .Shape(NoOutputShape)
                       .Doc(StrCat(std::string(name) == "AssignAdd" ? "Adds 'value' to" : "Subtracts 'value' from",
                                   " the variable in place, atomically with respect to other updates of it; 'value' "
                                   "has the variable's shape. The variable must be initialised."))));
  }
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("ResourceGather")
                     .Input("resource: resource")
                     .Input("indices: Tindices")
                     .Output("output: dtype")
                     .Attr("dtype: type")
                     .Attr("Tindices: {i32, i64}")
                     .Stateful()
                     .Shape(GatherRowsShape)
                     .Doc("Rows of the variable at 'indices' (Gather along axis 0 of its value), without copying the "
                          "whole variable. An index out of range is an error.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("ResourceScatterAdd")
          .Input("resource: resource")
          .Input("indices: Tindices")
          .Input("updates: dtype")
          .Attr("dtype: {numeric}")
          .Attr("Tindices: {i32, i64}")
          .Stateful()
          .Shape(NoOutputShape)
          .Doc("Adds updates[i] to row indices[i] of the variable in place (repeated indices add up); updates "
               "has shape indices.shape + variable.shape[1:].")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("VarIsInitialized")
                                      .Input("resource: resource")
                                      .Output("is_initialized: bool")
                                      .Stateful()
                                      .Shape(ScalarShape)
                                      .Doc("Whether the variable has been assigned a value.")));
  return Status();
}

}  // namespace weft::ops
