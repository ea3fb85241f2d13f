/* bytesandbrains — the CPU backend: ONNX (ai.onnx) operators on bb_tensor, and an executor
 * that runs a whole ONNX graph.
 *
 * Example:
 *
 *   bb_model *m = bb_model_new(NULL);  // a node lives in a model's arena
 *   bb_ir_node *relu = bb_ir_node_new(m, "Relu", "", "relu");
 *   bb_strlist_append(m, &relu->inputs, "x");
 *   bb_strlist_append(m, &relu->outputs, "y");
 *   int64_t dims[1] = {4};
 *   bb_tensor *x = bb_tensor_new_empty(NULL, BB_DTYPE_FLOAT, 1, dims), *y = NULL;
 *   memcpy(bb_tensor_data(x), (const float[]){-2, -1, 1, 2}, 4 * sizeof(float));
 *   bb_error err;
 *   int rc = bb_cpu_run_node(relu, 17, &x, 1, &y, 1, NULL, &err);  // ai.onnx opset 17
 *   if (rc) fprintf(stderr, "%s\n", err.message);  // "node relu (Relu): ..."
 *   float sum = 0;
 *   for (int64_t i = 0; !rc && i < y->numel; i++) sum += ((const float *)bb_tensor_data(y))[i];
 *   bb_tensor_release(x);
 *   bb_tensor_release(y);
 *   bb_model_free(m);
 *   if (rc || sum != 3.0f) return 1;
 *
 * A whole graph runs through a session: bb_cpu_session_new plans it once, and each
 * bb_cpu_session_run feeds its inputs by name and returns its outputs. */
#ifndef BB_CPU_H
#define BB_CPU_H

#include "bb/ir.h"
#include "bb/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- limits ------------------------------------------------------------------------ */

/* The most bytes one op may allocate for one value (an output, or a working buffer such
 * as Conv's column matrix) unless the caller says otherwise: a small model cannot make the
 * backend allocate without bound (a 90-byte ConstantOfShape asks for gigabytes), and the
 * default stays well under what a phone's browser tab can hold. */
#define BB_CPU_DEFAULT_MAX_OUTPUT_BYTES ((size_t)256 << 20)

/* The most bytes the values a session's run has made may hold at once (the intermediates
 * still needed and the outputs so far): many values each under the cap above add up (a
 * few hundred bytes of Expand, Tile and ConstantOfShape can ask for gigabytes in all). */
#define BB_CPU_DEFAULT_MAX_TOTAL_BYTES ((size_t)1 << 30)

/* Versioned by struct_size, which the caller sets to sizeof(bb_cpu_limits): fields its
 * struct_size does not cover (a caller built against an older header) take the defaults;
 * a struct_size of 0 or larger than this library knows is BB_ERR_INVALID_ARGUMENT. Zero
 * fields take the defaults in brackets. */
typedef struct bb_cpu_limits {
  size_t struct_size;      /* sizeof(bb_cpu_limits) */
  size_t max_output_bytes; /* [BB_CPU_DEFAULT_MAX_OUTPUT_BYTES] one value of one op */
  size_t max_total_bytes;  /* [BB_CPU_DEFAULT_MAX_TOTAL_BYTES] every value of a session's run at once */
} bb_cpu_limits;

/* ---- single nodes ------------------------------------------------------------------ */

/* Runs one node (ai.onnx or ai.bytesandbrains.grad). inputs[i] may be NULL for an omitted
 * optional input; outputs gets one new reference per declared output (NULL for omitted ones). opset is the
 * ai.onnx version in force (it selects attribute vs input forms). Errors name the node
 * and the reason: unknown op, wrong arity, type or shape mismatch, bad attribute. */
BB_API int bb_cpu_run_node(const bb_ir_node *node, int64_t opset, bb_tensor *const *inputs, size_t n_inputs,
                           bb_tensor **outputs, size_t n_outputs, const bb_allocator *alloc, bb_error *err);
/* bb_cpu_run_node within `limits` (NULL: the defaults). A value over max_output_bytes is
 * refused before it is allocated: BB_ERR_LIMIT, naming the node, the value and its size. */
BB_API int bb_cpu_run_node_limited(const bb_ir_node *node, int64_t opset, bb_tensor *const *inputs, size_t n_inputs,
                                   bb_tensor **outputs, size_t n_outputs, const bb_allocator *alloc,
                                   const bb_cpu_limits *limits, bb_error *err);

/* Whether the backend implements this op at that opset (domain "" or "ai.onnx", or the
 * training operators of "ai.bytesandbrains.grad", whose single version any opset takes). */
BB_API bool bb_cpu_supports(const char *domain, const char *op_type, int64_t opset);

/* The supported ops, in alphabetical order: name and the element types they accept
 * (a comma-separated list of bb_dtype_name()s). */
BB_API size_t bb_cpu_op_count(void);
BB_API const char *bb_cpu_op_name(size_t i);
BB_API const char *bb_cpu_op_types(size_t i);

/* The same for the operators of the ai.bytesandbrains.grad domain (BB_DOMAIN_GRAD) that
 * training graphs use (docs/GRAD.md), in alphabetical order. */
BB_API size_t bb_cpu_grad_op_count(void);
BB_API const char *bb_cpu_grad_op_name(size_t i);
BB_API const char *bb_cpu_grad_op_types(size_t i);

/* ---- threads ----------------------------------------------------------------------- */

/* Most threads the backend runs on (the caller's included). */
#define BB_CPU_MAX_THREADS 64

/* Runs the heavy float operators — MatMul, Gemm, convolutions and their gradients,
 * pooling, reductions, softmax and large elementwise operators — on n threads: the
 * calling thread and n - 1 workers the library starts (n = 0: one per processor). Every
 * result is bit for bit the same on any number of threads, because each operator is cut
 * into tasks by its shape alone and no task's arithmetic depends on who runs it.
 * Process-wide, 1 until set; call it while no other thread runs the backend. Returns 0,
 * BB_ERR_INVALID_ARGUMENT over BB_CPU_MAX_THREADS, BB_ERR_UNSUPPORTED for n > 1 in a
 * build without threads (a WebAssembly module without shared memory), BB_ERR_NOMEM when
 * a thread cannot be started (the backend then keeps those that did start). In a
 * WebAssembly module with shared memory the host starts the workers (bb_wasm.h). */
BB_API int bb_cpu_set_threads(size_t n, bb_error *err);

/* The threads the backend runs on now (1: the caller alone). */
BB_API size_t bb_cpu_threads(void);

/* WebAssembly with shared memory only: the loop of the worker in slot `slot` (1 to
 * BB_CPU_MAX_THREADS - 1), run by the host on the worker's own instance and stack. It runs
 * tasks of the backend's jobs until bb_cpu_stop_workers, then returns 0. Returns
 * BB_ERR_INVALID_ARGUMENT for a slot out of range and BB_ERR_UNSUPPORTED in every other
 * build (natively the backend starts its own threads). */
BB_API int bb_cpu_worker_main(size_t slot);

/* Makes every worker's loop return (natively: joins the threads); the backend then runs
 * on one thread until bb_cpu_set_threads. */
BB_API void bb_cpu_stop_workers(void);

/* Counters of the backend's threads since the process started, for tests and benchmarks. */
typedef struct bb_cpu_thread_stats {
  uint64_t jobs;             /* operators (or parts) that went to the threads */
  uint64_t tasks;            /* the tasks they were cut into */
  uint64_t tasks_on_workers; /* of which a worker ran, not the calling thread */
  uint32_t workers_live;     /* workers in their loop now */
} bb_cpu_thread_stats;

BB_API void bb_cpu_thread_stats_get(bb_cpu_thread_stats *out);

/* The threads' trace, for finding where a job's time goes (a debugging aid: it reads the
 * monotonic clock a few times a job). Off at first; turning it on or off zeroes it. */
typedef struct bb_cpu_thread_trace {
  uint64_t jobs;         /* jobs that went to the threads while tracing */
  uint64_t job_ns;       /* the calling threads' time from publishing a job to its end */
  uint64_t caller_ns;    /* their time in their own tasks */
  uint64_t caller_tasks; /* the tasks they ran */
  uint64_t wait_ns;      /* their time after their last task until the workers' tasks ended */
  uint64_t worker_ns;    /* the workers' time in tasks */
  uint64_t worker_tasks; /* the tasks they ran */
  uint64_t wakes;        /* times a worker saw a new job */
  uint64_t wake_ns;      /* their time from the job's publication to the worker seeing it */
  uint64_t late;         /* of those, jobs with no task left when the worker came */
  uint64_t sleeps;       /* times a worker stopped spinning and slept between jobs */
  uint64_t notify_ns;    /* the callers' time waking the workers (publishing a job) */
} bb_cpu_thread_trace;

BB_API void bb_cpu_thread_trace_set(bool on);
BB_API void bb_cpu_thread_trace_get(bb_cpu_thread_trace *out);

/* ---- whole graphs -------------------------------------------------------------------- */

typedef struct bb_cpu_session bb_cpu_session;

/* Prepares a graph of the model for running: checks every node is supported, orders them
 * topologically, plans when each intermediate can be freed (after its last consumer),
 * converts the initializers once and rewrites the graph for inference (below). The model
 * must outlive the session. */
BB_API int bb_cpu_session_new(const bb_model *model, const bb_allocator *alloc, bb_cpu_session **out, bb_error *err);

/* The rewrites a session makes at load (docs/PERFORMANCE.md, "Graph rewrites"). Results
 * stay those of the graph as written up to float rounding (the BatchNormalization fold) or
 * bit for bit (the others); each can be turned off. */
#define BB_CPU_REWRITE_FOLD_CONSTANTS (1u << 0)   /* nodes whose inputs are all constants run once, at load */
#define BB_CPU_REWRITE_FOLD_BATCHNORM (1u << 1)   /* inference BatchNormalization folded into the Conv before it */
#define BB_CPU_REWRITE_FUSE_ACTIVATIONS (1u << 2) /* Conv/Gemm/MatMul/... then Add, Relu, Clip, Sigmoid or x·sigmoid(x) as one step */
#define BB_CPU_REWRITE_ELIDE_IDENTITY (1u << 3)   /* Identity nodes read their input's value */
/* float 3×3 Conv (stride 1, dilation 1, one group) with constant weights by Winograd's
 * F(2×2, 3×3) where it is faster: within a stated bound of the direct convolution
 * (docs/DEVIATIONS.md), not its bits; off, every Conv gives the node's own bits */
#define BB_CPU_REWRITE_WINOGRAD (1u << 4)
/* each parameter's optimizer update as bb_grad_optimizer_build writes it — SGD, momentum
 * (heavy-ball or Nesterov), Adam or AdamW, with the gradient's clipping coefficient, L2
 * weight decay and AdamW's decoupled decay when present — as one pass over its arrays,
 * cut across the work pool, bit for bit the nodes' results. BB_CPU_REWRITE_FUSE_ADAM names
 * the same bit. */
#define BB_CPU_REWRITE_FUSE_OPTIMIZER (1u << 5)
#define BB_CPU_REWRITE_FUSE_ADAM BB_CPU_REWRITE_FUSE_OPTIMIZER
/* runs of per-sample steps (Conv, pooling, activations, Flatten, Gemm, ...) over a float
 * batch cut into 4 to 8 equal chunks of 8 samples or more run as one job of the work pool
 * whose tasks are those chunks, each taking its samples through every step (the chunks
 * follow the batch size alone: the same bits on any thread count; within float rounding
 * of the steps run whole, whose kernels may sum in another order for another row count) */
#define BB_CPU_REWRITE_BATCH_BANDS (1u << 6)
/* a float Conv whose output only a Transpose of perm [1, 0, 2, ..] reads (a weight
 * gradient's) writes that Transpose's output itself: each image's channel planes go to
 * their transposed places, the same bits */
#define BB_CPU_REWRITE_FUSE_TRANSPOSE (1u << 7)
#define BB_CPU_REWRITE_ALL 0xffu

/* Versioned by struct_size (see bb_cpu_limits); zero fields take the defaults. */
typedef struct bb_cpu_session_options {
  size_t struct_size;    /* sizeof(bb_cpu_session_options) */
  uint32_t rewrites_off; /* BB_CPU_REWRITE_* bits of rewrites to skip [0: make them all] */
} bb_cpu_session_options;

/* bb_cpu_session_new with options (NULL: the defaults). BB_ERR_INVALID_ARGUMENT for a
 * struct_size this library cannot read. */
BB_API int bb_cpu_session_new_with_options(const bb_model *model, const bb_allocator *alloc,
                                           const bb_cpu_session_options *options, bb_cpu_session **out, bb_error *err);

/* What the rewrites did. A session keeps two plans: one for runs that give no initializer
 * (general = false: initializers count as constants) and one for runs that replace an
 * initializer the first one folded (general = true: only rewrites that hold for any
 * initializer values). */
typedef struct bb_cpu_session_rewrites {
  size_t nodes;             /* nodes of the graph */
  size_t steps;             /* steps a run executes */
  size_t folded_constants;  /* nodes computed once, at load */
  size_t folded_batchnorms; /* BatchNormalizations folded into a Conv */
  size_t fused_activations; /* Relu, Clip, Sigmoid, x·sigmoid(x) run inside the step before them */
  size_t fused_adds;        /* Adds run inside the step that makes one of their operands */
  size_t elided_identities; /* Identity nodes dropped */
  union {                   /* parameters whose optimizer update runs as one pass */
    size_t fused_updates;
    size_t fused_adam; /* the same count (BB_CPU_REWRITE_FUSE_ADAM) */
  };
  size_t batch_bands;       /* runs of per-sample steps a batch may take as one job of chunks */
  size_t fused_transposes;  /* Transposes a Conv writes its output through */
} bb_cpu_session_rewrites;

BB_API void bb_cpu_session_rewrites_made(const bb_cpu_session *s, bool general, bb_cpu_session_rewrites *out);
BB_API void bb_cpu_session_free(bb_cpu_session *s);

/* The limits every node of the session's runs is held to (a new session has the
 * defaults; NULL restores them). BB_ERR_INVALID_ARGUMENT, the session's limits unchanged,
 * for a struct_size this library cannot read. */
BB_API int bb_cpu_session_set_limits(bb_cpu_session *s, const bb_cpu_limits *limits, bb_error *err);

/* The graph's inputs that are not initializers, and its outputs. */
BB_API size_t bb_cpu_session_input_count(const bb_cpu_session *s);
BB_API const char *bb_cpu_session_input_name(const bb_cpu_session *s, size_t i);
BB_API size_t bb_cpu_session_output_count(const bb_cpu_session *s);
BB_API const char *bb_cpu_session_output_name(const bb_cpu_session *s, size_t i);

/* Runs the graph. inputs are matched to graph inputs by name (every non-initializer input
 * is required; an input may also override an initializer). outputs receives one new
 * reference per graph output, in graph order. A run whose values would hold more than the
 * limits' max_total_bytes at once stops at the node that goes over (BB_ERR_LIMIT, naming
 * it and the cap). */
BB_API int bb_cpu_session_run(bb_cpu_session *s, const char *const *input_names, bb_tensor *const *inputs,
                              size_t n_inputs, bb_tensor **outputs, bb_error *err);

/* Peak bytes of tensor data alive at once during the last run (a memory figure). */
BB_API size_t bb_cpu_session_peak_bytes(const bb_cpu_session *s);

/* Memory of a session's runs. Runs allocate through the session's recycling allocator:
 * what one run frees, the next reuses, so a warm session asks the caller's allocator for
 * nothing (allocations stops growing), and it never keeps more free bytes than its runs
 * had in use at their peak. */
typedef struct bb_cpu_session_memory_stats {
  size_t peak_bytes;      /* bb_cpu_session_peak_bytes */
  size_t produced_bytes;  /* tensor data the last run's nodes made, all of it */
  size_t in_use_high_water; /* the most bytes runs had in use at once: tensors and scratch */
  size_t held_bytes;        /* bytes taken from the caller's allocator now: in use + kept for reuse */
  size_t held_high_water;   /* the most held at once since the session was made */
  uint64_t allocations;   /* run requests that reached the caller's allocator, in all */
} bb_cpu_session_memory_stats;

BB_API void bb_cpu_session_memory(const bb_cpu_session *s, bb_cpu_session_memory_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* BB_CPU_H */
