/* default_model.c: the model `strata run`, `chat`, `serve` and `bench` use when no -m is given:
 * the small qwen35moe demo model trained for this repository (models/README.md). It is looked
 * for, in order: $STRATA_MODEL; models/ beside the folder holding the binary (the build tree
 * build/strata -> models/); the installed copy <prefix>/share/strata/models/; the source tree
 * the binary was built from. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

#define DEMO_MODEL "strata-demo-q8_0.gguf"

static int try_path(char found[PATH_MAX], const char *dir, const char *rel) {
    if (snprintf(found, PATH_MAX, "%s/%s%s", dir, rel, DEMO_MODEL) >= PATH_MAX) return 0;
    return access(found, R_OK) == 0;
}

static const char *find_default_model(char found[PATH_MAX]) {
    const char *env = getenv("STRATA_MODEL");
    if (env && *env) return env;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        if (try_path(found, exe, "../models/") || try_path(found, exe, "../share/strata/models/")) return found;
    }
#ifdef STRATA_SOURCE_DIR
    if (try_path(found, STRATA_SOURCE_DIR, "models/")) return found;
#endif
    return NULL;
}

const char *cli_model_or_default(cli_options *o, const char *command) {
    if (o->model) return o->model;
    const char *path = find_default_model(o->model_found);
    if (!path) {
        fprintf(stderr, "strata %s: no -m MODEL given, and the demo model %s was not found "
                        "(set STRATA_MODEL or pass -m)\n", command, DEMO_MODEL);
        return NULL;
    }
    fprintf(stderr, "strata %s: no -m given: using the demo model %s\n", command, path);
    return o->model = path;
}
