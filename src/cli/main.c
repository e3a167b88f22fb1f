/* main.c: the `strata` command. Dispatches to a subcommand; `strata --help` lists them. With no
 * command on a terminal it starts `strata chat` with the demo model, so a fresh build answers. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "strata.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"info", cmd_info, "print a GGUF file's architecture, hyperparameters and tensor types"},
    {"serve", cmd_serve, "serve a model over OpenAI- and Anthropic-compatible HTTP, with a web chat"},
    {"run", cmd_run, "answer a prompt once (in the model's chat template; --raw: continue it)"},
    {"chat", cmd_chat, "chat interactively with a model (ChatML)"},
    {"eval", cmd_eval, "write the logits of every position of a list of token ids"},
    {"bench", cmd_bench, "measure prompt and decode speed"},
    {"synth", cmd_synth, "write a random-weight model in llama.cpp's converter layout"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: strata <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`strata <command> --help` describes a command's options. Without -m, run, chat, serve\n"
               "and bench use the demo model (models/strata-demo-q8_0.gguf); `strata` alone on a\n"
               "terminal chats with it. run, chat, serve, bench and eval share the model's and the\n"
               "session's options (-m, --device, -t, --ctx, --prefill, --kv-type, ...); --device\n"
               "cpu|cuda|auto: a build with CUDA (-DSTRATA_CUDA=ON) runs the model on the GPU when one\n"
               "is present.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
            char *chat_argv[] = {"chat", NULL};
            return cmd_chat(1, chat_argv);
        }
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("strata %s\n", st_version());
        return 0;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "strata: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
