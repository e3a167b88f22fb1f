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

static char found[PATH_MAX];

static int try_path(const char *dir, const char *rel) {
    if (snprintf(found, sizeof found, "%s/%s%s", dir, rel, DEMO_MODEL) >= (int)sizeof found) return 0;
    return access(found, R_OK) == 0;
}

static const char *find_default_model(void) {
    const char *env = getenv("STRATA_MODEL");
    if (env && *env) return env;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        if (try_path(exe, "../models/") || try_path(exe, "../share/strata/models/")) return found;
    }
#ifdef STRATA_SOURCE_DIR
    if (try_path(STRATA_SOURCE_DIR, "models/")) return found;
#endif
    return NULL;
}

const char *cli_model_or_default(const char *model, const char *command) {
    if (model) return model;
    const char *path = find_default_model();
    if (!path) {
        fprintf(stderr, "strata %s: no -m MODEL given, and the demo model %s was not found "
                        "(set STRATA_MODEL or pass -m)\n", command, DEMO_MODEL);
        return NULL;
    }
    fprintf(stderr, "strata %s: no -m given: using the demo model %s\n", command, path);
    return path;
}
