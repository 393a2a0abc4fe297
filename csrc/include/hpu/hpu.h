/* The public C API of the hpu core. Nothing here includes PyTorch. */
#ifndef HPU_HPU_H
#define HPU_HPU_H
#include "hpu/status.h"
#include "hpu/dtype.h"
#include "hpu/device.h"
#include "hpu/memory.h"
#include "hpu/stream.h"
#include "hpu/parallel.h"
#include "hpu/tensor.h"
#include "hpu/op.h"
#include "hpu/graph.h"
#include "hpu/rng.h"
#include "hpu/metrics.h"
#include "hpu/lazy.h"
#include "hpu/capture.h"
#include "hpu/trace.h"
#endif
