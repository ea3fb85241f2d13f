/* Fields the IR does not model survive a decode → encode: known ONNX fields outside the
 * IR (training_info, sparse initializers, tensor segments, sparse attributes) and field
 * numbers the schema does not know at all, at every nesting level. */
#include "ir/testutil.h"

#include "bb/ir.h"
#include "harness.h"
#include "onnx.pb-c.h"

/* An unknown varint field, number `tag`, value 42. */
static ProtobufCMessageUnknownField unknown_varint(uint32_t tag) {
  static uint8_t v42[] = {42};
  ProtobufCMessageUnknownField u = {tag, PROTOBUF_C_WIRE_TYPE_VARINT, 1, v42};
  return u;
}

static void test_unmodelled_fields_survive(void) {
  ProtobufCMessageUnknownField u_model = unknown_varint(1000), u_node = unknown_varint(77),
                               u_attr = unknown_varint(99), u_dim = unknown_varint(50),
                               u_kv = unknown_varint(3), u_type = unknown_varint(60);

  Onnx__StringStringEntryProto kv = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
  kv.key = "k";
  kv.value = "v";
  kv.base.n_unknown_fields = 1;
  kv.base.unknown_fields = &u_kv;
  Onnx__StringStringEntryProto *kvs[] = {&kv};

  Onnx__TensorProto__Segment seg = ONNX__TENSOR_PROTO__SEGMENT__INIT;
  seg.has_begin = 1, seg.begin = 2, seg.has_end = 1, seg.end = 5;
  Onnx__TensorProto sparse_vals = ONNX__TENSOR_PROTO__INIT;
  sparse_vals.has_data_type = 1, sparse_vals.data_type = 1;
  float fv[] = {1.5f, -2.0f};
  sparse_vals.n_float_data = 2, sparse_vals.float_data = fv;
  sparse_vals.segment = &seg;
  Onnx__SparseTensorProto sparse = ONNX__SPARSE_TENSOR_PROTO__INIT;
  sparse.values = &sparse_vals;
  int64_t sdims[] = {4};
  sparse.n_dims = 1, sparse.dims = sdims;
  Onnx__SparseTensorProto *sparses[] = {&sparse};

  Onnx__AttributeProto at = ONNX__ATTRIBUTE_PROTO__INIT;
  at.name = "sp";
  at.has_type = 1, at.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR;
  at.sparse_tensor = &sparse;
  at.base.n_unknown_fields = 1, at.base.unknown_fields = &u_attr;
  Onnx__AttributeProto *ats[] = {&at};

  char *ins[] = {"x"}, *outs[] = {"y"};
  Onnx__NodeProto node = ONNX__NODE_PROTO__INIT;
  node.op_type = "Identity";
  node.n_input = 1, node.input = ins, node.n_output = 1, node.output = outs;
  node.n_attribute = 1, node.attribute = ats;
  node.n_metadata_props = 1, node.metadata_props = kvs;
  node.base.n_unknown_fields = 1, node.base.unknown_fields = &u_node;
  Onnx__NodeProto *nodes[] = {&node};

  Onnx__TensorShapeProto__Dimension dim = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
  dim.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM, dim.dim_param = "N";
  dim.base.n_unknown_fields = 1, dim.base.unknown_fields = &u_dim;
  Onnx__TensorShapeProto__Dimension *dims[] = {&dim};
  Onnx__TensorShapeProto shape = ONNX__TENSOR_SHAPE_PROTO__INIT;
  shape.n_dim = 1, shape.dim = dims;
  Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
  tt.has_elem_type = 1, tt.elem_type = 1, tt.shape = &shape;
  tt.base.n_unknown_fields = 1, tt.base.unknown_fields = &u_type;
  Onnx__TypeProto type = ONNX__TYPE_PROTO__INIT;
  type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, type.tensor_type = &tt;
  Onnx__ValueInfoProto vin = ONNX__VALUE_INFO_PROTO__INIT, vout = ONNX__VALUE_INFO_PROTO__INIT;
  vin.name = "x", vin.type = &type, vout.name = "y", vout.type = &type;
  Onnx__ValueInfoProto *vins[] = {&vin}, *vouts[] = {&vout};

  Onnx__TensorAnnotation qa = ONNX__TENSOR_ANNOTATION__INIT;
  qa.tensor_name = "x";
  Onnx__TensorAnnotation *qas[] = {&qa};
  Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
  g.name = "g";
  g.n_node = 1, g.node = nodes;
  g.n_input = 1, g.input = vins, g.n_output = 1, g.output = vouts;
  g.n_sparse_initializer = 1, g.sparse_initializer = sparses;
  g.n_quantization_annotation = 1, g.quantization_annotation = qas;

  Onnx__TrainingInfoProto ti = ONNX__TRAINING_INFO_PROTO__INIT;
  ti.algorithm = &g;
  Onnx__TrainingInfoProto *tis[] = {&ti};
  Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
  model.has_ir_version = 1, model.ir_version = 8;
  model.graph = &g;
  model.n_training_info = 1, model.training_info = tis;
  model.base.n_unknown_fields = 1, model.base.unknown_fields = &u_model;

  size_t len = protobuf_c_message_get_packed_size(&model.base);
  uint8_t *bytes = malloc(len);
  protobuf_c_message_pack(&model.base, bytes);

  bb_error err;
  bb_model *m = NULL;
  CHECK_EQ_INT(bb_model_decode(bytes, len, NULL, NULL, &m, &err), 0);
  if (!m) {
    free(bytes);
    return;
  }
  CHECK(m->extra.len > 0);                 /* training_info + field 1000 */
  CHECK(m->graph->extra.len > 0);          /* sparse_initializer + quantization_annotation */
  CHECK(m->graph->nodes.items[0]->extra.len > 0);
  CHECK(m->graph->nodes.items[0]->attrs.items[0]->extra.len > 0);
  CHECK(m->graph->inputs.items[0]->type->inner_extra.len > 0);
  CHECK(m->graph->inputs.items[0]->type->shape->dims[0].extra.len > 0);
  CHECK(m->graph->nodes.items[0]->metadata.items[0].extra.len > 0);

  /* change something the IR models, so the encoder really rebuilds the messages */
  CHECK_EQ_INT(bb_kv_upsert(m, &m->metadata, "touched", "yes"), 0);
  uint8_t *out;
  size_t out_len;
  CHECK_EQ_INT(bb_model_encode(m, &out, &out_len, &err), 0);
  Onnx__ModelProto *back = onnx__model_proto__unpack(NULL, out_len, out);
  CHECK(back != NULL);
  if (back) {
    CHECK_EQ_INT(back->n_metadata_props, 1);
    back->n_metadata_props = 0; /* the one intended change */
    Onnx__ModelProto *orig = onnx__model_proto__unpack(NULL, len, bytes);
    CHECK(tu_pb_equal(&orig->base, &back->base));
    CHECK_EQ_INT(back->n_training_info, 1);
    CHECK(back->graph->n_sparse_initializer == 1 && back->graph->sparse_initializer[0]->values->segment &&
          back->graph->sparse_initializer[0]->values->segment->end == 5);
    CHECK(back->graph->node[0]->attribute[0]->sparse_tensor != NULL);
    CHECK_EQ_INT(back->base.n_unknown_fields, 1);
    CHECK_EQ_INT(back->base.unknown_fields[0].tag, 1000);
    back->n_metadata_props = 1;
    onnx__model_proto__free_unpacked(orig, NULL);
    onnx__model_proto__free_unpacked(back, NULL);
  }
  bb_buffer_free(NULL, out);
  bb_model_free(m);
  free(bytes);
}

int main(void) {
  RUN(test_unmodelled_fields_survive);
  return bb_test_finish();
}
