// Tells emcc that bb.wasm imports these from its host (module "env"): the callbacks of
// components whose methods run in JavaScript, and the recording of Modules the host
// defines (bb_wasm.h). No JavaScript from here ships:
// the module is linked standalone, and js/src/engine/host.ts provides the functions.
mergeInto(LibraryManager.library, {
  bb_host_create: function (typeId, slot, config, configLen, seed) {},
  bb_host_destroy: function (instance) {},
  bb_host_invoke: function (instance, opType, nInputs, nOutputs) {},
  bb_host_on_message: function (instance, op, from, payload, len) {},
  bb_host_on_timer: function (instance, token) {},
  bb_host_save: function (instance) {},
  bb_host_load: function (instance, state, len) {},
  bb_host_module_record: function (hostId, bootstrap) {},
  bb_host_sign: function (node, slot, message, len) {},
});
