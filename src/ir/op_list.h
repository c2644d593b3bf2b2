// The op vocabulary of the IR, defined once. X(Name, AttrStruct, min_inputs, max_inputs):
// each op has a typed attribute struct (attrs.h), a shape/type rule `infer_<Name>` and a
// reference kernel `eval_<Name>`, both in the op family's file under ops/. max_inputs -1 means
// any number. Adding an op: a line here, its rule, its kernel, a test.
#pragma once

#define GGFLOW_IR_OPS(X)                                  \
  /* ops/basic.cpp: sources, sinks, casts, shapes-as-values */ \
  X(Parameter, ParameterAttrs, 0, 0)                      \
  X(Constant, ConstantAttrs, 0, 0)                        \
  X(Result, NoAttrs, 1, 1)                                \
  X(Convert, TypeAttrs, 1, 1)                             \
  X(ShapeOf, TypeAttrs, 1, 1)                             \
  X(Range, TypeAttrs, 3, 3)                               \
  X(ReadValue, VariableAttrs, 0, 1)                       \
  X(Assign, VariableAttrs, 1, 1)                          \
  /* ops/shape_ops.cpp: data movement without indices */   \
  X(Reshape, ReshapeAttrs, 2, 2)                          \
  X(Squeeze, AxesAttrs, 1, 1)                             \
  X(Unsqueeze, AxesAttrs, 1, 1)                           \
  X(Transpose, TransposeAttrs, 1, 1)                      \
  X(Concat, AxisAttrs, 1, -1)                             \
  X(Broadcast, NoAttrs, 2, 2)                             \
  X(Tile, TileAttrs, 1, 1)                                \
  /* ops/index_ops.cpp: data movement with indices */      \
  X(Gather, GatherAttrs, 2, 2)                            \
  X(Slice, SliceAttrs, 1, 1)                              \
  X(VariadicSplit, SplitAttrs, 1, 1)                      \
  X(ScatterUpdate, AxisAttrs, 3, 3)                       \
  /* ops/elementwise.cpp: numpy broadcasting */            \
  X(Add, NoAttrs, 2, 2)                                   \
  X(Subtract, NoAttrs, 2, 2)                              \
  X(Multiply, NoAttrs, 2, 2)                              \
  X(Divide, NoAttrs, 2, 2)                                \
  X(Power, NoAttrs, 2, 2)                                 \
  X(Maximum, NoAttrs, 2, 2)                               \
  X(Equal, NoAttrs, 2, 2)                                 \
  X(Less, NoAttrs, 2, 2)                                  \
  X(LessEqual, NoAttrs, 2, 2)                             \
  X(GreaterEqual, NoAttrs, 2, 2)                          \
  X(LogicalAnd, NoAttrs, 2, 2)                            \
  X(Select, NoAttrs, 3, 3)                                \
  X(Sqrt, NoAttrs, 1, 1)                                  \
  X(Exp, NoAttrs, 1, 1)                                   \
  X(Tanh, NoAttrs, 1, 1)                                  \
  X(Sin, NoAttrs, 1, 1)                                   \
  X(Cos, NoAttrs, 1, 1)                                   \
  X(Swish, NoAttrs, 1, 1)                                 \
  X(Gelu, GeluAttrs, 1, 1)                                \
  /* ops/reduce.cpp: reductions and normalizations */      \
  X(ReduceSum, ReduceAttrs, 1, 1)                         \
  X(ReduceMean, ReduceAttrs, 1, 1)                        \
  X(ReduceProd, ReduceAttrs, 1, 1)                        \
  X(Softmax, AxisAttrs, 1, 1)                             \
  X(RMSNorm, RMSNormAttrs, 1, 2)                          \
  X(LayerNorm, LayerNormAttrs, 1, 1)                      \
  /* ops/matmul.cpp, ops/rope.cpp, ops/attention.cpp */    \
  X(MatMul, MatMulAttrs, 2, 2)                            \
  X(RoPE, RopeAttrs, 2, 3)                                \
  X(ScaledDotProductAttention, SdpaAttrs, 3, 4)          \
  /* ops/paged_attention.cpp: DESIGN.md section 4 */      \
  X(PagedAttention, NoAttrs, 13, 14)

// Outputs that alias an input, X(Op, output, input): the op writes its result into that input's
// buffer and returns it (a cache or a scatter destination updated in place, never copied). The
// evaluator hands such an input over exclusively: the runtime's caches directly, anything else
// as a private copy. Compiled models use the same list to find their caches (runtime/).
#define GGFLOW_IR_ALIASES(X) \
  X(ScatterUpdate, 0, 0)     \
  X(PagedAttention, 1, 3)    \
  X(PagedAttention, 2, 4)
