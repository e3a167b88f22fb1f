/* hf_tokenizer.h: turns a Hugging Face tokenizer.json (byte-level BPE, as Qwen ships it) into the
 * GGUF tokenizer keys llama.cpp's converter writes (MODELS.md §9.1), for `strata synth
 * --tokenizer` and the tokenizer conformance test. */
#ifndef ST_TEXT_HF_TOKENIZER_H
#define ST_TEXT_HF_TOKENIZER_H

#include <stdint.h>
#include "base/status.h"

typedef struct st_gguf_writer st_gguf_writer;

/* Adds tokenizer.ggml.{model,pre,tokens,token_type,merges,bos_token_id,eos_token_id,
 * padding_token_id,add_bos_token} (and tokenizer.chat_template when a tokenizer_config.json
 * beside json_path has one) to w. Token types follow the converter: 1 for the model's vocabulary,
 * 3 for added tokens marked special or looking like <|...|>, 4 for other added tokens, 5 for
 * [PAD{i}] fillers of missing ids. Special ids come from tokenizer_config.json when present
 * (bos_token, eos_token, pad_token); otherwise eos is <|im_end|> (else <|endoftext|>) and bos
 * and padding are <|endoftext|>, as Qwen3's GGUFs have them. pre: NULL means "qwen2". */
st_status st_hf_tokenizer_to_gguf(const char *json_path, st_gguf_writer *w, const char *pre, int64_t *n_vocab_out);
/* The same, padded with [PAD{i}] unused tokens up to n_vocab (a model's vocab_size is often
 * larger than its tokenizer; 151,936 for Qwen3). n_vocab <= 0: no padding. A n_vocab smaller
 * than the tokenizer is ST_ERR_INVALID. */
st_status st_hf_tokenizer_to_gguf_padded(const char *json_path, st_gguf_writer *w, const char *pre,
                                         int64_t n_vocab, int64_t *n_vocab_out);

#endif
