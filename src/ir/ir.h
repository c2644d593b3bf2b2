// The IR in one include: element types, shapes, tensors, nodes, models, op builders, verifier,
// printers, evaluator and GGUF weight constants.
#pragma once

#include "ir/dim.h"
#include "ir/element_type.h"
#include "ir/evaluator.h"
#include "ir/gguf_constant.h"
#include "ir/model.h"
#include "ir/node.h"
#include "ir/ops.h"
#include "ir/printer.h"
#include "ir/tensor.h"
#include "ir/verifier.h"
