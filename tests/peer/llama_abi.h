/* llama_abi.h: the few declarations of the peer's llama.h that the programs loading its
 * libllama with dlopen share (tests/peer/tokenize_peer.c, bench/json/bench_json_mask.c), written
 * out from the peer's header. Each program checks the layout of llama_model_params against
 * llama_model_default_params() before it uses it. */
#ifndef ST_TESTS_LLAMA_ABI_H
#define ST_TESTS_LLAMA_ABI_H

#include <stdbool.h>
#include <stdint.h>

struct llama_model;
struct llama_vocab;

struct llama_model_params {
    void *devices;
    const void *tensor_buft_overrides;
    int32_t n_gpu_layers;
    int split_mode, load_mode, lazy_mode;
    int32_t main_gpu;
    const float *tensor_split;
    void *progress_callback;
    void *progress_callback_user_data;
    const void *kv_overrides;
    bool vocab_only, check_tensors, use_extra_bufts, no_host, no_alloc, load_mtp;
};

#endif
