/* bb — the bytesandbrains command-line tool. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *args;
  const char *help;
} command;

static const command COMMANDS[] = {
    {"inspect", cmd_inspect, "MODEL.onnx [--json|--dot] | --wires A.onnx B.onnx [--json]",
     "summarise a model; for a compiled artifact its partitions, wire edges, wires and bindings;\n"
     "      with --wires, whether two artifacts can talk (exit 1 when they cannot)"},
    {"compile", cmd_compile, "MODEL.onnx --bind SLOT=TYPE ... -o FILE | --example NAME -o FILE | --examples",
     "partition a recorded model (or a shipped example's Module) and bind its slots"},
    {"run", cmd_run, "MODEL.onnx --input [NAME=]T.pb ... [--output-dir DIR] [--repeat N] [--no-rewrites]",
     "run a model on the CPU backend"},
    {"train", cmd_train, "MODEL.onnx --data FILE.csv --label COL -o OUT.onnx [--loss xent|mse|bce] [--optimizer ...]",
     "train a model on a CSV file (bb train --help lists the options) and write it trained"},
    {"dp-epsilon", cmd_dp_epsilon, "--q Q --sigma S --steps T --delta D [--json]",
     "the privacy spent by T steps of the sampled Gaussian (rate Q, noise multiplier S): epsilon at D\n"
     "      by the Renyi-DP accountant (classic conversion), and the order that gives it"},
    {"ops", cmd_ops, "", "list the CPU backend's operators and element types"},
    {"vocab", cmd_vocab, "[--json]", "list the roles, domains, types, keys and names models and artifacts use"},
    {"wire", cmd_wire, "decode ENVELOPE.bin", "print one wire envelope as JSON, or why its bytes are bad"},
    {"reencode", cmd_reencode, "IN.onnx OUT.onnx", "decode a model into the IR and encode it again"},
};

static void usage(FILE *out) {
  fprintf(out, "bb %s — bytesandbrains\n\nusage: bb COMMAND [ARGS]\n\ncommands:\n", BB_VERSION_STRING);
  for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
    fprintf(out, "  bb %s %s\n      %s\n", COMMANDS[i].name, COMMANDS[i].args, COMMANDS[i].help);
  fprintf(out, "  bb version\n      print the version\n");
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
    printf("bb %s\n", BB_VERSION_STRING);
    return 0;
  }
  for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
    if (strcmp(argv[1], COMMANDS[i].name) == 0) return COMMANDS[i].run(argc - 2, argv + 2);
  fprintf(stderr, "bb: unknown command '%s' (bb help lists them)\n", argv[1]);
  return 2;
}
