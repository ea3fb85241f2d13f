/* The window geometry of Conv, ConvTranspose and the pooling operators: kernel, strides,
 * dilations and the pads every auto_pad form resolves to, with the output size ONNX
 * defines. Shared by shape inference and the backward rules. */
#ifndef BBI_GRAD_GEOMETRY_H
#define BBI_GRAD_GEOMETRY_H

#include <stdbool.h>

#include "grad/builder.h"

#define GB_MAX_SPATIAL 3

typedef struct gb_window {
  int nd; /* spatial dims */
  int64_t in[GB_MAX_SPATIAL], kernel[GB_MAX_SPATIAL], stride[GB_MAX_SPATIAL], dil[GB_MAX_SPATIAL];
  int64_t pad_begin[GB_MAX_SPATIAL], pad_end[GB_MAX_SPATIAL], out[GB_MAX_SPATIAL];
  int64_t out_padding[GB_MAX_SPATIAL]; /* ConvTranspose */
} gb_window;

/* The geometry of a Conv / pooling node over x (kernel from `kernel`, the weight's spatial
 * dims or the kernel_shape attribute). Returns 0 when x's spatial dims are known (every
 * field is then set), 1 when they are not (nd, kernel, stride and dil are still set), or
 * -1 when the attributes are inconsistent. */
int gb_window_forward(const bb_ir_node *n, const gb_value *x, const int64_t *kernel, bool ceil_mode, gb_window *w);

/* The same for ConvTranspose (output_padding, output_shape and auto_pad as ONNX defines). */
int gb_window_transpose(const bb_ir_node *n, const gb_value *x, const int64_t *kernel, gb_window *w);

/* The kernel of a node: the weight's spatial dims (Conv, ConvTranspose: w non-NULL) or the
 * kernel_shape attribute. Returns nd, or -1 when unknown. */
int gb_window_kernel(const bb_ir_node *n, const gb_value *x, const gb_value *w, int64_t *kernel);

#endif
