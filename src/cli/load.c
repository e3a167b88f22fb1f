/* load.c: what every engine command does around the library: report a failure (cli_fail),
 * load the model its options name (cli_load_model: the demo model without -m, the device and
 * the weight copy from the options, a warning for an unsupported tokenizer), and settle the
 * context a session takes when none was asked for (cli_fit_context). */
#include <stdio.h>

#include "base/log.h"
#include "cli/cli.h"

int cli_fail(const char *what) {
    fprintf(stderr, "strata: %s%s%s\n", what ? what : "", what && *what ? ": " : "", st_last_error());
    return 1;
}

int cli_load_model(const char *command, cli_options *o, st_model **out) {
    *out = NULL;
    if (!cli_model_or_default(o, command)) return 1;
    st_model_params mp = st_model_default_params();
    mp.copy_weights = o->copy_weights;
    mp.device = o->device;
    mp.gpu_mem_gib = o->gpu_mem;
    if (st_model_load(o->model, &mp, out) != ST_OK) return cli_fail("cannot load the model");
    if (*st_model_device_plan(*out)) fprintf(stderr, "strata: %s: %s\n", st_model_device(*out), st_model_device_plan(*out));
    if (!st_model_has_tokenizer(*out))
        st_warn("%s: tokenizer not supported (%s); only token ids can be used", o->model, st_model_tokenizer_error(*out));
    return 0;
}

void cli_fit_context(const char *command, const st_model *m, st_session_params *sp) {
    if (sp->n_ctx > 0) return;
    st_ctx_fit f = st_model_ctx_fit(m, sp->kv_f32);
    sp->n_ctx = f.n_ctx;
    if (f.capped)
        fprintf(stderr, "strata %s: context %lld tokens, not the model's %lld: its KV cache (%.1f KiB a token) would "
                        "take more than half of the %.1f GiB free (--ctx N sets it)\n",
                command, (long long)f.n_ctx, (long long)f.n_ctx_train, (double)f.cell_bytes / 1024,
                (double)f.free_bytes / (1 << 30));
}
