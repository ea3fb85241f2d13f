/* The neural-network family's operators that live outside nn.c (which holds the table,
 * convolution and pooling). */
#ifndef BBI_CPU_NN_H
#define BBI_CPU_NN_H

#include "cpu/cpu_op.h"

/* nn_conv_transpose.c */
int bbi_nn_conv_transpose(bbi_cpu_op_ctx *ctx);

/* nn_norm.c */
int bbi_nn_batch_normalization(bbi_cpu_op_ctx *ctx);
int bbi_nn_layer_normalization(bbi_cpu_op_ctx *ctx);
int bbi_nn_instance_normalization(bbi_cpu_op_ctx *ctx);

/* nn_loss.c */
int bbi_nn_softmax_cross_entropy_loss(bbi_cpu_op_ctx *ctx);
int bbi_nn_negative_log_likelihood_loss(bbi_cpu_op_ctx *ctx);

#endif
